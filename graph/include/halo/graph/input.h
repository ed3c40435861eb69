// Opening untrusted inputs: one place decides which kinds of file a reader may open, so that no
// reader blocks forever on a FIFO nobody writes to or reads a directory as a file, and how deep
// a JSON document may nest (nlohmann's dump, copy and comparison recurse: a deep document would
// overflow the stack long after it was parsed).
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace halo {

// What an input may be besides a regular file.
enum class InputKind {
  kFile,    // a file inside a folder (meta.json, array files, OGB's raw/ and split/ files) or a
            // table named by a flag: a regular file only (a symbolic link to one is followed)
  kStream,  // a text file named on the command line and read once, in order: also a pipe, a
            // FIFO or a character device (`halo convert <(zcat edges.gz) --format edgelist`)
};

// Opens path read-only and returns its descriptor (blocking reads, O_CLOEXEC; the caller closes
// it). For kFile the type is checked before any open that could block (a FIFO is refused, never
// opened). Throws InputError naming the path and what it is instead ("a directory", "a FIFO
// (named pipe)", "a socket", "a character device"), SystemError when it cannot be opened.
int open_input(const std::filesystem::path& path, InputKind kind = InputKind::kFile);

// The whole of a regular file of at most max_bytes, opened by open_input (InputError beyond).
std::string read_input_file(const std::filesystem::path& path,
                            std::size_t max_bytes = std::size_t(256) << 20);

// The deepest nesting of arrays and objects any halo JSON file has is 4 (meta.json's
// "arrays" -> entry -> "shape"); this leaves room for any format to come.
inline constexpr int kMaxJsonDepth = 64;

// Parses untrusted JSON text read from file (named in messages). Invalid JSON, and nesting
// deeper than kMaxJsonDepth (refused while parsing, before a deep tree exists), are InputError.
nlohmann::json parse_json(const std::string& text, const std::filesystem::path& file);

// read_input_file then parse_json.
nlohmann::json read_json_file(const std::filesystem::path& path);

// A JSON value for an error message, at most about max_bytes: scalars as JSON, strings with
// control bytes escaped (printable), arrays and objects cut with "..." after max_bytes or 3
// levels. Never serializes a whole untrusted value.
std::string json_shown(const nlohmann::json& v, std::size_t max_bytes = 40);

}  // namespace halo

// Reading large text files fast: LineReader hands out blocks of whole lines from a plain or
// gzip file (detected by its magic bytes, not its name), inflating on a background thread so
// that decompression and parsing overlap on two cores. LineCursor walks a block field by field
// with hand-written integer parsing and std::from_chars for floats, keeping the line number
// so every error can name it. Every float that leaves a LineCursor is finite.
#pragma once

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "halo/graph/error.h"
#include "halo/graph/input.h"

namespace halo {

// The longest line any reader accepts, in bytes. Far above any real file (a METIS vertex with
// 50 million neighbours writes a ~500 MB line); it bounds memory when a file has no newlines.
inline constexpr std::size_t kMaxLineBytes = std::size_t(1) << 30;

class LineReader {
 public:
  // Opens path by open_input (kind: a regular file only, or also a pipe or a device for a
  // file named on the command line); throws SystemError when it cannot be opened, InputError
  // when it is of a kind refused or is named *.gz without being gzip. Later errors
  // (InputError, from next()): corrupt or truncated gzip, a NUL byte (binary data), a line
  // longer than max_line_bytes.
  explicit LineReader(const std::filesystem::path& path, std::size_t max_line_bytes = kMaxLineBytes,
                      InputKind kind = InputKind::kFile);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets block to the next run of whole lines (the last may lack its '\n' at end of file);
  // returns false at end of file. The block stays valid until the next call. Lines of any
  // length up to max_line_bytes come whole; errors found ahead are thrown in line order,
  // after the blocks before them.
  bool next(std::string_view& block);

  const std::filesystem::path& path() const { return path_; }
  bool compressed() const;
  std::uint64_t file_size() const;
  std::uint64_t bytes_read() const;     // of the file (compressed), for progress
  std::uint64_t bytes_decoded() const;  // of text handed out so far

 private:
  struct Impl;
  std::filesystem::path path_;
  std::unique_ptr<Impl> impl_;
};

// A cursor over one block of lines. Fields are separated by commas and/or blanks (spaces,
// tabs); '\r' before '\n' is ignored. Line numbers continue across blocks via first_line.
class LineCursor {
 public:
  LineCursor(const std::filesystem::path& file, std::string_view block, std::int64_t first_line)
      : file_(&file), p_(block.data()), end_(block.data() + block.size()), line_(first_line - 1) {}

  // Moves to the next line; false when the block is exhausted.
  bool next_line() {
    if (p_ >= end_) return false;
    ++line_;
    line_begin_ = p_;
    const void* nl = memchr_(p_, end_ - p_);
    line_end_ = nl ? static_cast<const char*>(nl) : end_;
    p_ = line_end_ < end_ ? line_end_ + 1 : end_;
    if (line_end_ > line_begin_ && line_end_[-1] == '\r') --line_end_;
    q_ = line_begin_;
    fields_ = 0;
    pending_ = false;
    return true;
  }

  std::int64_t line() const { return line_; }
  std::string_view text() const { return {line_begin_, std::size_t(line_end_ - line_begin_)}; }
  // True for an empty or all-blank line.
  bool blank() const;
  // True when the line's first non-blank character is one of chars.
  bool starts_with_any(std::string_view chars) const;
  // True once every field of the line has been consumed (trailing blanks ignored).
  bool at_end() {
    skip_blanks();
    return q_ >= line_end_ && !pending_;
  }
  // Number of fields on this line (does not move the cursor).
  int count_fields() const;

  // Next field as an integer; throws InputError naming `what` when it is not one.
  std::int64_t next_int(const char* what) {
    std::string_view f = next_field(what);
    const char* s = f.data();
    const char* e = s + f.size();
    bool neg = false;
    if (s < e && (*s == '-' || *s == '+')) neg = (*s++ == '-');
    if (s == e || e - s > 18) bad_number(f, what, "an integer");
    std::int64_t v = 0;
    for (; s < e; ++s) {
      unsigned d = unsigned(*s) - '0';
      if (d > 9) bad_number(f, what, "an integer");
      v = v * 10 + d;
    }
    return neg ? -v : v;
  }
  // Next field as a finite float: inf, nan (any spelling) and out-of-range values throw
  // InputError. With allow_nan, NaN in any spelling and an empty field give NaN (missing).
  float next_float(const char* what, bool allow_nan = false);
  double next_double(const char* what, bool allow_nan = false);
  // Next field as raw text.
  std::string_view next_field(const char* what);
  // Throws InputError "FILE: line N: WHAT".
  [[noreturn]] void fail(const std::string& what) const;
  // Throws the wrong-column-count error unless the line is fully consumed.
  void expect_end(int expected_fields);
  // Throws "expected KIND for WHAT in column N, found 'F'".
  [[noreturn]] void bad_number(std::string_view f, const char* what, const char* kind) const;

 private:
  static const void* memchr_(const char* p, std::ptrdiff_t n);
  void skip_blanks() {
    while (q_ < line_end_ && (*q_ == ' ' || *q_ == '\t')) ++q_;
  }

  const std::filesystem::path* file_;
  const char* p_;
  const char* end_;
  std::int64_t line_;
  const char* line_begin_ = nullptr;
  const char* line_end_ = nullptr;
  const char* q_ = nullptr;
  int fields_ = 0;
  bool pending_ = false;  // a comma was consumed: one more field follows
};

// Calls fn(LineCursor&) for every line of path, in order, with line numbers from 1.
// progress_label, when non-empty, shows progress on stderr if it is a terminal.
// Returns the number of text bytes parsed (after decompression). kind as for LineReader.
template <class Fn>
std::uint64_t for_each_line(const std::filesystem::path& path, Fn&& fn,
                            const char* progress_label = "", InputKind kind = InputKind::kFile);

// Reads the first line of a small file as text (no newline); empty for an empty file.
std::string read_first_line(const std::filesystem::path& path, InputKind kind = InputKind::kFile);

// s for an error message: at most max_bytes of it, every control byte and invalid UTF-8
// escaped as \xHH (so binary input cannot drive the terminal), "..." when cut.
std::string printable(std::string_view s, std::size_t max_bytes = 200);

// True when printable(s) would show s unchanged: no control byte, valid UTF-8. What a name
// read from a file must be before it is shown as it is.
bool is_printable(std::string_view s);

}  // namespace halo

#include "halo/graph/text_inl.h"

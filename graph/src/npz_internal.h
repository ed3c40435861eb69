// What the .npz reader's files share: the open archive and its entries (npz_zip.cc reads the
// container), the sequential entry reader that inflates and checks them (npz.cc), and the .npy
// header's parse (npy_header.cc) that npz.cc and the conversions (npz_convert.cc) use. Private to
// graph/src; the rules are npz.h's.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "halo/graph/error.h"
#include "halo/graph/npz.h"

namespace halo::npz_internal {

constexpr std::size_t kMaxZlibCall = std::size_t{1} << 30;  // avail_in/avail_out are 32-bit

inline std::uint16_t rd16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t rd32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
inline std::uint64_t rd64(const unsigned char* p) {
  return static_cast<std::uint64_t>(rd32(p)) | (static_cast<std::uint64_t>(rd32(p + 4)) << 32);
}

// "(2, 3)", "(4,)": a shape as NumPy prints it.
std::string shape_str(const std::vector<std::uint64_t>& shape);

// One central-directory entry (sizes and offset already widened by the ZIP64 extra field).
struct Entry {
  std::string name;  // full entry name, e.g. "edge_index.npy"
  std::uint16_t flags = 0, method = 0;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0, usize = 0, offset = 0;
};

// The open archive: descriptor, size and the .npy entries of its central directory.
struct Archive {
  std::filesystem::path path;
  int fd = -1;
  std::uint64_t file_size = 0;
  std::uint64_t data_end = 0;  // offset of the central directory: entry data lies before it
  std::vector<Entry> entries;  // ".npy" entries, archive order
  std::unordered_map<std::string, std::size_t> by_key;

  [[noreturn]] void fail(const std::string& what) const { throw_input(path, 0, what); }
  [[noreturn]] void fail(const Entry& e, const std::string& what) const {
    throw_input(path, 0, "entry " + e.name + ": " + what);
  }

  // Reads exactly n bytes at off; EOF is an InputError (truncated file), errors SystemError.
  void read_at(void* dst, std::size_t n, std::uint64_t off) const;
  // Opens path (a regular file) and records its size.
  void open_file();

  // Finds the end-of-central-directory record (and the ZIP64 one) and parses the directory.
  void read_directory();

  // The entry of array key; an InputError listing the available keys when there is none.
  const Entry& find(const std::string& key) const;

  // Checks the entry can be read and returns the offset of its data (after the local header).
  std::uint64_t data_start(const Entry& e) const;
};

// Sequential reader of one entry's uncompressed content, verifying it at finish().
class EntryReader {
 public:
  EntryReader(const Archive& a, const Entry& e, std::size_t io_bytes);
  ~EntryReader();
  EntryReader(const EntryReader&) = delete;
  EntryReader& operator=(const EntryReader&) = delete;

  // Reads up to n bytes of content into dst; returns fewer only at the end of the entry.
  std::size_t read(std::byte* dst, std::size_t n);

  // Checks the whole entry was consumed: declared sizes, end of the deflate stream, CRC-32.
  void finish();

  const Entry& entry() const { return e_; }
  const Archive& archive() const { return a_; }

 private:
  void refill();

  const Archive& a_;
  const Entry& e_;
  std::uint64_t pos_;      // file offset of the next compressed byte
  std::uint64_t in_left_;  // compressed bytes not read from the file yet
  std::uint64_t out_total_ = 0;
  uLong crc_ = crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> in_;
  z_stream z_{};
  bool inflating_ = false;
  bool stream_end_ = false;
};

// A parsed descr such as "<i8": byte order mark (0 if none), kind letter, size in bytes.
struct Descr {
  char order = 0;
  char kind = 0;
  std::size_t item_size = 0;
  bool ok = false;
};

// Parses a dtype descr; ok is false when it is not one this reader knows.
Descr parse_descr(const std::string& d);

// An entry's .npy header: the array's info and how the entry's bytes divide around it.
struct ParsedHeader {
  NpyArrayInfo info;
  std::uint64_t header_bytes = 0;  // magic + version + length + dict
  std::uint64_t payload_bytes = 0;
};

// Reads and checks the .npy header at the start of the entry.
ParsedHeader read_header(EntryReader& rd);

}  // namespace halo::npz_internal

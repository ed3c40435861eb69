// NpzReader: zip container parsing (EOCD, ZIP64 record/locator, central directory, local
// headers), .npy header parsing, payload streaming (stored or zlib raw inflate) with CRC-32 and
// size checks, and the typed conversions of stream_as / read_all_as. See npz.h for the rules.
#include "halo/graph/npz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "halo/graph/error.h"
#include "halo/graph/input.h"

namespace halo {

static_assert(std::endian::native == std::endian::little,
              "npz.cc reinterprets little-endian payload bytes in place");

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEocdSig = 0x06054b50;
constexpr std::uint32_t kEocd64Sig = 0x06064b50;
constexpr std::uint32_t kLocatorSig = 0x07064b50;
constexpr std::size_t kEocdBytes = 22;
constexpr std::size_t kLocatorBytes = 20;
constexpr std::size_t kEocd64Bytes = 56;
constexpr std::size_t kCentralBytes = 46;
constexpr std::size_t kLocalBytes = 30;
constexpr std::size_t kMaxComment = 65535;
constexpr std::uint64_t kMaxCentralDirectory = std::uint64_t{1} << 30;
constexpr std::uint64_t kMaxNpyHeader = std::uint64_t{1} << 20;
constexpr std::size_t kInfoReadBytes = std::size_t{1} << 16;
constexpr std::size_t kMaxZlibCall = std::size_t{1} << 30;  // avail_in/avail_out are 32-bit

std::uint16_t rd16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t rd32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
std::uint64_t rd64(const unsigned char* p) {
  return static_cast<std::uint64_t>(rd32(p)) | (static_cast<std::uint64_t>(rd32(p + 4)) << 32);
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string shape_str(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

const char* method_name(std::uint16_t m) {
  switch (m) {
    case 0:
      return "stored";
    case 8:
      return "deflate";
    case 9:
      return "deflate64";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstd";
    case 95:
      return "xz";
    default:
      return "unknown";
  }
}

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
  void read_at(void* dst, std::size_t n, std::uint64_t off) const {
    auto* p = static_cast<unsigned char*>(dst);
    while (n > 0) {
      const std::size_t want = std::min(n, kMaxZlibCall);
      const ssize_t got = ::pread(fd, p, want, static_cast<off_t>(off));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw_system(path, "read at offset " + std::to_string(off));
      }
      if (got == 0)
        fail("unexpected end of file at offset " + std::to_string(off) + " (truncated archive?)");
      p += got;
      n -= static_cast<std::size_t>(got);
      off += static_cast<std::uint64_t>(got);
    }
  }

  void open_file() {
    fd = open_input(path);  // a zip archive is read from its end: a regular file only
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_system(path, "cannot stat");
    file_size = static_cast<std::uint64_t>(st.st_size);
  }

  // Finds the end-of-central-directory record (and the ZIP64 one) and parses the directory.
  void read_directory() {
    if (file_size < kEocdBytes)
      fail("not a zip archive (only " + std::to_string(file_size) +
           " bytes, shorter than an end of central directory record)");
    const std::size_t tail_len =
        static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kEocdBytes + kMaxComment));
    const std::uint64_t tail_off = file_size - tail_len;
    std::vector<unsigned char> tail(tail_len);
    read_at(tail.data(), tail_len, tail_off);
    // Search backwards; prefer a record whose comment ends exactly at the end of the file.
    std::size_t found = tail_len, loose = tail_len;
    for (std::size_t pos = tail_len - kEocdBytes + 1; pos-- > 0;) {
      if (rd32(&tail[pos]) != kEocdSig) continue;
      const std::size_t clen = rd16(&tail[pos + 20]);
      if (pos + kEocdBytes + clen == tail_len) {
        found = pos;
        break;
      }
      if (loose == tail_len && pos + kEocdBytes + clen <= tail_len) loose = pos;
    }
    if (found == tail_len) found = loose;
    if (found == tail_len)
      fail("not a zip archive: no end of central directory record (truncated file?)");
    const unsigned char* e = &tail[found];
    const std::uint64_t eocd_off = tail_off + found;
    std::uint64_t disk = rd16(e + 4), cd_disk = rd16(e + 6), n_disk = rd16(e + 8);
    std::uint64_t n_total = rd16(e + 10), cd_size = rd32(e + 12), cd_off = rd32(e + 16);
    std::uint64_t cd_limit = eocd_off;  // the directory ends before this offset

    if (eocd_off >= kLocatorBytes) {
      unsigned char loc[kLocatorBytes];
      read_at(loc, kLocatorBytes, eocd_off - kLocatorBytes);
      if (rd32(loc) == kLocatorSig) {
        const std::uint64_t rec_off = rd64(loc + 8);
        const std::uint32_t n_disks = rd32(loc + 16);
        if (rd32(loc + 4) != 0 || n_disks > 1)
          fail("multi-disk (split) zip archives are not supported");
        if (rec_off > eocd_off - kLocatorBytes || eocd_off - kLocatorBytes - rec_off < kEocd64Bytes)
          fail("ZIP64 end of central directory record offset " + std::to_string(rec_off) +
               " is out of range");
        unsigned char rec[kEocd64Bytes];
        read_at(rec, kEocd64Bytes, rec_off);
        if (rd32(rec) != kEocd64Sig)
          fail("no ZIP64 end of central directory record at offset " + std::to_string(rec_off));
        disk = rd32(rec + 16);
        cd_disk = rd32(rec + 20);
        n_disk = rd64(rec + 24);
        n_total = rd64(rec + 32);
        cd_size = rd64(rec + 40);
        cd_off = rd64(rec + 48);
        cd_limit = rec_off;
      }
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n_total)
      fail("multi-disk (split) zip archives are not supported");
    if (cd_size > cd_limit || cd_off > cd_limit - cd_size)
      fail("central directory (" + std::to_string(cd_size) + " bytes at offset " +
           std::to_string(cd_off) + ") runs past its end record (truncated or prefixed archive?)");
    if (cd_size > kMaxCentralDirectory)
      fail("central directory of " + std::to_string(cd_size) + " bytes is too large");
    if (n_total > cd_size / kCentralBytes)
      fail(std::to_string(n_total) + " entries cannot fit a central directory of " +
           std::to_string(cd_size) + " bytes");
    data_end = cd_off;

    std::vector<unsigned char> cd(static_cast<std::size_t>(cd_size));
    read_at(cd.data(), cd.size(), cd_off);
    std::unordered_set<std::string> names;
    std::size_t pos = 0;
    for (std::uint64_t i = 0; i < n_total; ++i) {
      const std::string where = "central directory entry " + std::to_string(i);
      if (cd.size() - pos < kCentralBytes || rd32(&cd[pos]) != kCentralSig)
        fail(where + ": bad signature or truncated directory");
      const unsigned char* c = &cd[pos];
      Entry en;
      en.flags = rd16(c + 8);
      en.method = rd16(c + 10);
      en.crc = rd32(c + 16);
      en.csize = rd32(c + 20);
      en.usize = rd32(c + 24);
      const std::size_t nlen = rd16(c + 28), elen = rd16(c + 30), clen = rd16(c + 32);
      const std::uint16_t disk_start = rd16(c + 34);
      en.offset = rd32(c + 42);
      if (cd.size() - pos - kCentralBytes < nlen + elen + clen)
        fail(where + ": name/extra/comment run past the central directory");
      en.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), nlen);
      const unsigned char* x = c + kCentralBytes + nlen;
      // ZIP64 extra field (0x0001): a 64-bit value for each 32-bit field that is 0xFFFFFFFF,
      // in the order uncompressed size, compressed size, local header offset, disk.
      for (std::size_t q = 0; q + 4 <= elen;) {
        const std::uint16_t id = rd16(x + q);
        const std::size_t sz = rd16(x + q + 2);
        if (q + 4 + sz > elen) fail(where + " (" + en.name + "): extra field runs past its end");
        if (id == 0x0001) {
          const unsigned char* z = x + q + 4;
          std::size_t left = sz;
          auto take = [&](std::uint64_t& field) {
            if (left < 8) fail(where + " (" + en.name + "): ZIP64 extra field too short");
            field = rd64(z);
            z += 8;
            left -= 8;
          };
          if (en.usize == 0xFFFFFFFFu) take(en.usize);
          if (en.csize == 0xFFFFFFFFu) take(en.csize);
          if (en.offset == 0xFFFFFFFFu) take(en.offset);
        }
        q += 4 + sz;
      }
      if (disk_start != 0 && disk_start != 0xFFFF)
        fail("multi-disk (split) zip archives are not supported");
      if (en.offset >= data_end)
        fail("entry " + en.name + ": local header offset " + std::to_string(en.offset) +
             " is not before the central directory");
      if (!names.insert(en.name).second) fail("duplicate entry " + en.name);
      pos += kCentralBytes + nlen + elen + clen;
      if (en.name.size() > 4 && en.name.compare(en.name.size() - 4, 4, ".npy") == 0) {
        by_key.emplace(en.name.substr(0, en.name.size() - 4), entries.size());
        entries.push_back(std::move(en));
      }
    }
  }

  const Entry& find(const std::string& key) const {
    auto it = by_key.find(key);
    if (it != by_key.end()) return entries[it->second];
    std::string avail;
    for (std::size_t i = 0; i < entries.size() && i < 20; ++i) {
      if (i) avail += ", ";
      avail += entries[i].name.substr(0, entries[i].name.size() - 4);
    }
    if (entries.size() > 20) avail += ", ...";
    fail("no array '" + key + "' (available: " + (avail.empty() ? "none" : avail) + ")");
  }

  // Checks the entry can be read and returns the offset of its data (after the local header).
  std::uint64_t data_start(const Entry& e) const {
    if (e.flags & 0x0001) fail(e, "encrypted entries are not supported");
    if (e.method != 0 && e.method != 8)
      fail(e, "unsupported compression method " + std::to_string(e.method) + " (" +
                  method_name(e.method) + "); only stored (0) and deflate (8) are supported");
    if (e.method == 0 && e.csize != e.usize)
      fail(e, "stored entry with compressed size " + std::to_string(e.csize) + " != size " +
                  std::to_string(e.usize));
    // Deflate expands at most 1032:1; a larger declared size is corrupt (or a zip bomb).
    if (e.method == 8 && e.usize / 1032 > e.csize + 1)
      fail(e, "declared size " + std::to_string(e.usize) + " is impossible for " +
                  std::to_string(e.csize) + " bytes of deflate data");
    if (data_end - e.offset < kLocalBytes)
      fail(e, "local header at offset " + std::to_string(e.offset) + " runs into the directory");
    unsigned char h[kLocalBytes];
    read_at(h, kLocalBytes, e.offset);
    if (rd32(h) != kLocalSig) fail(e, "no local file header at offset " + std::to_string(e.offset));
    const std::uint64_t nlen = rd16(h + 26), elen = rd16(h + 28);
    const std::uint64_t start = e.offset + kLocalBytes + nlen + elen;
    if (start > data_end || e.csize > data_end - start)
      fail(e, std::to_string(e.csize) + " bytes of data at offset " + std::to_string(start) +
                  " run past the central directory (truncated archive?)");
    std::string local(static_cast<std::size_t>(nlen), '\0');
    read_at(local.data(), local.size(), e.offset + kLocalBytes);
    if (local != e.name) fail(e, "local header names '" + local + "'");
    return start;
  }
};

// Sequential reader of one entry's uncompressed content, verifying it at finish().
class EntryReader {
 public:
  EntryReader(const Archive& a, const Entry& e, std::size_t io_bytes)
      : a_(a), e_(e), pos_(a.data_start(e)), in_left_(e.csize) {
    if (e_.method == 8) {
      in_.resize(static_cast<std::size_t>(
          std::min<std::uint64_t>({io_bytes, kMaxZlibCall, std::max<std::uint64_t>(e.csize, 1)})));
      if (inflateInit2(&z_, -MAX_WBITS) != Z_OK) a_.fail(e_, "zlib inflateInit2 failed");
      inflating_ = true;
    }
  }
  ~EntryReader() {
    if (inflating_) inflateEnd(&z_);
  }
  EntryReader(const EntryReader&) = delete;
  EntryReader& operator=(const EntryReader&) = delete;

  // Reads up to n bytes of content into dst; returns fewer only at the end of the entry.
  std::size_t read(std::byte* dst, std::size_t n) {
    std::size_t got = 0;
    if (e_.method == 0) {
      got = static_cast<std::size_t>(std::min<std::uint64_t>(n, in_left_));
      a_.read_at(dst, got, pos_);
      pos_ += got;
      in_left_ -= got;
    } else {
      while (got < n && !stream_end_) {
        if (z_.avail_in == 0 && in_left_ > 0) refill();
        const std::size_t want = std::min(n - got, kMaxZlibCall);
        z_.next_out = reinterpret_cast<Bytef*>(dst + got);
        z_.avail_out = static_cast<uInt>(want);
        const int ret = inflate(&z_, Z_NO_FLUSH);
        got += want - z_.avail_out;
        if (ret == Z_STREAM_END) {
          stream_end_ = true;
        } else if (ret == Z_OK || ret == Z_BUF_ERROR) {
          if (z_.avail_out > 0 && z_.avail_in == 0 && in_left_ == 0)
            a_.fail(e_, "deflate data ends early (truncated entry)");
        } else if (ret == Z_MEM_ERROR) {
          throw std::bad_alloc();
        } else {
          a_.fail(e_, std::string("corrupt deflate data (zlib: ") +
                          (z_.msg ? z_.msg : "error " + std::to_string(ret)) + ")");
        }
      }
    }
    if (got > e_.usize - out_total_)
      a_.fail(e_, "inflates to more than the declared " + std::to_string(e_.usize) + " bytes");
    out_total_ += got;
    for (std::size_t done = 0; done < got;) {
      const std::size_t k = std::min(got - done, kMaxZlibCall);
      crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(dst + done), k);
      done += k;
    }
    return got;
  }

  // Checks the whole entry was consumed: declared sizes, end of the deflate stream, CRC-32.
  void finish() {
    if (e_.method == 8 && !stream_end_) {
      std::byte probe[64];
      if (read(probe, sizeof probe) != 0 || !stream_end_)
        a_.fail(e_, "inflates to more than the declared " + std::to_string(e_.usize) + " bytes");
    }
    if (out_total_ != e_.usize)
      a_.fail(e_, "holds " + std::to_string(out_total_) + " bytes, the directory says " +
                      std::to_string(e_.usize) + " (truncated entry?)");
    if (in_left_ != 0 || z_.avail_in != 0)
      a_.fail(e_, "compressed data continues after the end of the deflate stream");
    if (crc_ != e_.crc)
      a_.fail(e_, "CRC-32 mismatch (computed " + hex32(static_cast<std::uint32_t>(crc_)) +
                      ", expected " + hex32(e_.crc) + "): corrupt data");
  }

  const Entry& entry() const { return e_; }
  const Archive& archive() const { return a_; }

 private:
  void refill() {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(in_.size(), in_left_));
    a_.read_at(in_.data(), n, pos_);
    pos_ += n;
    in_left_ -= n;
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(n);
  }

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

// ---- .npy header: a Python dict literal ---------------------------------------------------

struct PyValue {
  enum Kind { kStr, kInt, kBool, kNone, kTuple, kList, kDict } kind = kNone;
  std::string str;
  bool negative = false;
  std::uint64_t magnitude = 0;
  bool boolean = false;
  std::vector<PyValue> items;     // tuple/list elements, dict values
  std::vector<std::string> keys;  // dict keys (parallel to items)
};

class PyParser {
 public:
  explicit PyParser(const std::string& s) : s_(s) {}

  PyValue parse() {
    PyValue v = value(0);
    skip_ws();
    if (i_ != s_.size()) throw std::runtime_error("unexpected text after the dict");
    return v;
  }

 private:
  void skip_ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\0'))
      ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool word(const char* w) {
    const std::size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }

  PyValue value(int depth) {
    if (depth > 16) throw std::runtime_error("nested too deeply");
    skip_ws();
    if (i_ >= s_.size()) throw std::runtime_error("unexpected end");
    PyValue v;
    const char c = s_[i_];
    if (c == '\'' || c == '"') {
      v.kind = PyValue::kStr;
      v.str = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::kInt;
      if (c == '-') {
        v.negative = true;
        ++i_;
      }
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') throw std::runtime_error("bad number");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
        if (v.magnitude > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
          throw std::runtime_error("integer too large");
        v.magnitude = v.magnitude * 10 + d;
        ++i_;
      }
      if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;  // Python 2 long
    } else if (word("True")) {
      v.kind = PyValue::kBool;
      v.boolean = true;
    } else if (word("False")) {
      v.kind = PyValue::kBool;
    } else if (word("None")) {
      v.kind = PyValue::kNone;
    } else if (c == '(' || c == '[') {
      v.kind = c == '(' ? PyValue::kTuple : PyValue::kList;
      const char close = c == '(' ? ')' : ']';
      ++i_;
      while (!eat(close)) {
        v.items.push_back(value(depth + 1));
        if (!eat(',')) {
          if (!eat(close)) throw std::runtime_error("expected ',' or closing bracket");
          break;
        }
      }
    } else if (c == '{') {
      v.kind = PyValue::kDict;
      ++i_;
      while (!eat('}')) {
        skip_ws();
        if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
          throw std::runtime_error("expected a string key");
        v.keys.push_back(string());
        if (!eat(':')) throw std::runtime_error("expected ':'");
        v.items.push_back(value(depth + 1));
        if (!eat(',')) {
          if (!eat('}')) throw std::runtime_error("expected ',' or '}'");
          break;
        }
      }
    } else {
      throw std::runtime_error(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  std::string string() {
    const char q = s_[i_++];
    std::string out;
    while (true) {
      if (i_ >= s_.size()) throw std::runtime_error("unterminated string");
      char c = s_[i_++];
      if (c == q) break;
      if (c == '\\') {
        if (i_ >= s_.size()) throw std::runtime_error("unterminated string");
        c = s_[i_++];
      }
      out += c;
    }
    return out;
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// A parsed descr such as "<i8": byte order mark (0 if none), kind letter, size in bytes.
struct Descr {
  char order = 0;
  char kind = 0;
  std::size_t item_size = 0;
  bool ok = false;
};

Descr parse_descr(const std::string& d) {
  Descr r;
  std::size_t i = 0;
  if (i < d.size() && std::strchr("<>|=", d[i]) && d[i] != '\0') r.order = d[i++];
  if (i >= d.size()) return r;
  r.kind = d[i++];
  std::uint64_t n = 0;
  bool digits = false;
  while (i < d.size() && d[i] >= '0' && d[i] <= '9') {
    n = n * 10 + static_cast<std::uint64_t>(d[i++] - '0');
    digits = true;
    if (n > (std::uint64_t{1} << 32)) return r;
  }
  const std::string rest = d.substr(i);
  switch (r.kind) {
    case 'b':
    case 'i':
    case 'u':
    case 'f':
    case 'c':
      if (!digits || n == 0 || !rest.empty()) return r;
      r.item_size = static_cast<std::size_t>(n);
      break;
    case 'U':
      if (!digits || !rest.empty()) return r;
      r.item_size = static_cast<std::size_t>(4 * n);
      break;
    case 'S':
    case 'a':
    case 'V':
      if (!digits || !rest.empty()) return r;
      r.item_size = static_cast<std::size_t>(n);
      break;
    case 'O':
      if (!rest.empty()) return r;
      r.item_size = digits ? static_cast<std::size_t>(n) : sizeof(void*);
      break;
    case 'M':
    case 'm':
      if (!digits || n == 0 || (!rest.empty() && (rest.front() != '[' || rest.back() != ']')))
        return r;
      r.item_size = static_cast<std::size_t>(n);
      break;
    default:
      return r;
  }
  r.ok = true;
  return r;
}

struct ParsedHeader {
  NpyArrayInfo info;
  std::uint64_t header_bytes = 0;  // magic + version + length + dict
  std::uint64_t payload_bytes = 0;
};

// Reads and checks the .npy header at the start of the entry.
ParsedHeader read_header(EntryReader& rd) {
  const Archive& a = rd.archive();
  const Entry& e = rd.entry();
  unsigned char pre[12];
  if (rd.read(reinterpret_cast<std::byte*>(pre), 10) != 10)
    a.fail(e, "too short for a .npy header");
  if (std::memcmp(pre, "\x93NUMPY", 6) != 0) a.fail(e, "not a .npy file (bad magic)");
  const int major = pre[6], minor = pre[7];
  std::uint64_t hlen = 0, prefix = 10;
  if (major == 1 && minor == 0) {
    hlen = rd16(pre + 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (rd.read(reinterpret_cast<std::byte*>(pre + 10), 2) != 2)
      a.fail(e, "too short for a .npy header");
    hlen = rd32(pre + 8);
    prefix = 12;
  } else {
    a.fail(e, "unsupported .npy format version " + std::to_string(major) + "." +
                  std::to_string(minor));
  }
  if (hlen > kMaxNpyHeader)
    a.fail(e, ".npy header of " + std::to_string(hlen) + " bytes is too long");
  std::string text(static_cast<std::size_t>(hlen), '\0');
  if (rd.read(reinterpret_cast<std::byte*>(text.data()), text.size()) != text.size())
    a.fail(e, "truncated .npy header");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();

  PyValue dict;
  try {
    dict = PyParser(text).parse();
    if (dict.kind != PyValue::kDict) throw std::runtime_error("not a dict");
  } catch (const std::runtime_error& ex) {
    a.fail(e, std::string("bad .npy header (") + ex.what() + "): " + text.substr(0, 200));
  }
  ParsedHeader h;
  NpyArrayInfo& info = h.info;
  info.name = e.name.substr(0, e.name.size() - 4);
  bool have_descr = false, have_order = false, have_shape = false;
  for (std::size_t k = 0; k < dict.keys.size(); ++k) {
    const PyValue& v = dict.items[k];
    if (dict.keys[k] == "descr") {
      if (v.kind == PyValue::kList)
        a.fail(e, "structured dtypes are not supported (descr " + text.substr(0, 200) + ")");
      if (v.kind != PyValue::kStr) a.fail(e, "bad .npy header: descr is not a string");
      info.descr = v.str;
      have_descr = true;
    } else if (dict.keys[k] == "fortran_order") {
      if (v.kind != PyValue::kBool) a.fail(e, "bad .npy header: fortran_order is not a bool");
      info.fortran_order = v.boolean;
      have_order = true;
    } else if (dict.keys[k] == "shape") {
      if (v.kind != PyValue::kTuple && v.kind != PyValue::kList)
        a.fail(e, "bad .npy header: shape is not a tuple");
      for (const PyValue& d : v.items) {
        if (d.kind != PyValue::kInt || d.negative)
          a.fail(e, "bad .npy header: shape holds a non-integer or negative dimension");
        info.shape.push_back(d.magnitude);
      }
      have_shape = true;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    a.fail(e, "bad .npy header: needs descr, fortran_order and shape: " + text.substr(0, 200));
  const Descr d = parse_descr(info.descr);
  if (!d.ok) a.fail(e, "unknown dtype descr '" + info.descr + "'");
  info.item_size = d.item_size;

  std::uint64_t count = 1;
  for (std::uint64_t dim : info.shape) {
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / dim)
      a.fail(e, "shape " + shape_str(info.shape) + " overflows");
    count *= dim;
  }
  if (info.item_size != 0 && count > std::numeric_limits<std::uint64_t>::max() / info.item_size)
    a.fail(e, "shape " + shape_str(info.shape) + " overflows");
  h.header_bytes = prefix + hlen;
  if (h.header_bytes > e.usize) a.fail(e, "truncated .npy header");
  h.payload_bytes = e.usize - h.header_bytes;
  if (d.kind != 'O' && h.payload_bytes != count * info.item_size)
    a.fail(e, "payload is " + std::to_string(h.payload_bytes) + " bytes but shape " +
                  shape_str(info.shape) + " of " + info.descr + " needs " +
                  std::to_string(count * info.item_size));
  return h;
}

// ---- conversions ---------------------------------------------------------------------------

enum class Src { kBool, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kF16, kF32, kF64 };

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, float>)
    return "float32";
  else
    return "float64";
}

// Where a conversion error is reported: archive path and entry name.
struct ConvCtx {
  const std::filesystem::path* path;
  const std::string* entry;
  [[noreturn]] void fail(const std::string& what) const {
    throw_input(*path, 0, "entry " + *entry + ": " + what);
  }
};

template <class T, class S>
T convert_one(S v, std::uint64_t index, const ConvCtx& ctx) {
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_integral_v<S>);
    if (!std::in_range<T>(v))
      ctx.fail("value " + std::to_string(v) + " at index " + std::to_string(index) +
               " does not fit " + type_name<T>());
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, float> && std::is_same_v<S, double>) {
    if (std::isfinite(v) && std::fabs(v) > static_cast<double>(FLT_MAX))
      ctx.fail("value " + fmt_double(v) + " at index " + std::to_string(index) +
               " does not fit float32");
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <class T, class S>
void convert_run(const std::byte* src, std::size_t n, T* dst, std::uint64_t first,
                 const ConvCtx& ctx) {
  for (std::size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * sizeof(S), sizeof(S));
    dst[i] = convert_one<T>(v, first + i, ctx);
  }
}

template <class T>
void convert_bool(const std::byte* src, std::size_t n, T* dst, std::uint64_t, const ConvCtx&) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] != std::byte{0} ? T(1) : T(0);
}

template <class T>
void convert_half(const std::byte* src, std::size_t n, T* dst, std::uint64_t, const ConvCtx&) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = static_cast<T>(half_to_float(bits));
  }
}

template <class T>
using ConvFn = void (*)(const std::byte*, std::size_t, T*, std::uint64_t, const ConvCtx&);

template <class T>
ConvFn<T> pick_converter(Src s) {
  switch (s) {
    case Src::kBool:
      return &convert_bool<T>;
    case Src::kI8:
      return &convert_run<T, std::int8_t>;
    case Src::kI16:
      return &convert_run<T, std::int16_t>;
    case Src::kI32:
      return &convert_run<T, std::int32_t>;
    case Src::kI64:
      return &convert_run<T, std::int64_t>;
    case Src::kU8:
      return &convert_run<T, std::uint8_t>;
    case Src::kU16:
      return &convert_run<T, std::uint16_t>;
    case Src::kU32:
      return &convert_run<T, std::uint32_t>;
    case Src::kU64:
      return &convert_run<T, std::uint64_t>;
    case Src::kF16:  // NOLINT(bugprone-branch-clone): for integer T the three float cases all break
      if constexpr (std::is_floating_point_v<T>) return &convert_half<T>;
      break;
    case Src::kF32:
      if constexpr (std::is_floating_point_v<T>) return &convert_run<T, float>;
      break;
    case Src::kF64:
      if constexpr (std::is_floating_point_v<T>) return &convert_run<T, double>;
      break;
  }
  return nullptr;
}

// Maps an accepted descr to its source type; throws InputError naming the dtype otherwise.
template <class T>
Src classify(const NpyArrayInfo& info, const ConvCtx& ctx) {
  const Descr d = parse_descr(info.descr);
  const std::string to = type_name<T>();
  if (d.ok && d.item_size > 1 && d.order == '>' && std::strchr("biuf", d.kind))
    ctx.fail("big-endian dtype " + info.descr + " is not supported (convert it with " +
             "arr.astype('<" + info.descr.substr(1) + "') in NumPy)");
  const bool le = d.item_size == 1 || d.order == '<' || d.order == '=';
  if (d.ok && le) {
    if (d.kind == 'f' && std::is_integral_v<T>)
      ctx.fail("cannot convert float dtype " + info.descr + " to " + to +
               " (float to integer conversion is not allowed)");
    switch (d.kind) {
      case 'b':
        if (d.item_size == 1) return Src::kBool;
        break;
      case 'i':
        switch (d.item_size) {
          case 1:
            return Src::kI8;
          case 2:
            return Src::kI16;
          case 4:
            return Src::kI32;
          case 8:
            return Src::kI64;
          default:
            break;
        }
        break;
      case 'u':
        switch (d.item_size) {
          case 1:
            return Src::kU8;
          case 2:
            return Src::kU16;
          case 4:
            return Src::kU32;
          case 8:
            return Src::kU64;
          default:
            break;
        }
        break;
      case 'f':
        switch (d.item_size) {
          case 2:
            return Src::kF16;
          case 4:
            return Src::kF32;
          case 8:
            return Src::kF64;
          default:
            break;
        }
        break;
      default:
        break;
    }
  }
  ctx.fail("cannot convert dtype " + info.descr + " to " + to +
           " (supported: little-endian bool, int8-64, uint8-64, float16/32/64)");
}

// Whether a Fortran-order array of this shape has the same element order as C order.
bool layout_is_c(const NpyArrayInfo& info) {
  if (!info.fortran_order) return true;
  std::size_t big = 0;
  for (std::uint64_t d : info.shape) big += d > 1 ? 1 : 0;
  return big <= 1;
}

// stream_as with the Fortran check optional: without it elements come in file order.
template <class T>
void stream_converted(const NpzReader& r, const std::string& key,
                      const std::function<void(const T*, std::size_t, std::uint64_t)>& fn,
                      std::size_t chunk_bytes, bool allow_fortran) {
  const NpyArrayInfo info = r.info(key);
  const std::string entry = key + ".npy";
  const ConvCtx ctx{&r.path(), &entry};
  const ConvFn<T> conv = pick_converter<T>(classify<T>(info, ctx));
  if (!allow_fortran && !layout_is_c(info))
    ctx.fail("Fortran-order arrays with 2 or more dimensions (shape " + shape_str(info.shape) +
             ") are not supported by stream_as; save with np.ascontiguousarray");
  if (chunk_bytes == 0) throw ParamError(r.path().string() + ": chunk_bytes must be positive");
  const std::size_t isz = info.item_size;
  const std::uint64_t count = info.count();
  std::vector<T> out(
      static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes / isz + 1, count)));
  std::array<std::byte, 8> carry{};
  std::size_t carry_n = 0;
  std::uint64_t next = 0;
  r.stream(
      key,
      [&](const std::byte* p, std::size_t n) {
        std::size_t k = 0;
        if (carry_n > 0) {
          const std::size_t take = std::min(isz - carry_n, n);
          std::memcpy(carry.data() + carry_n, p, take);
          carry_n += take;
          p += take;
          n -= take;
          if (carry_n < isz) return;
          conv(carry.data(), 1, out.data(), next, ctx);
          k = 1;
          carry_n = 0;
        }
        const std::size_t whole = n / isz;
        conv(p, whole, out.data() + k, next + k, ctx);
        k += whole;
        carry_n = n - whole * isz;
        std::memcpy(carry.data(), p + whole * isz, carry_n);
        if (k > 0) {
          fn(out.data(), k, next);
          next += k;
        }
      },
      chunk_bytes);
}

}  // namespace

// ---- public API ----------------------------------------------------------------------------

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    const float v = std::ldexp(static_cast<float>(mant), -24);  // subnormal: exact in float
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

std::uint64_t NpyArrayInfo::count() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

struct NpzReader::Impl {
  Archive ar;
  ~Impl() {
    if (ar.fd >= 0) ::close(ar.fd);
  }
};

NpzReader::NpzReader(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
  impl_->ar.path = path;
  impl_->ar.open_file();
  impl_->ar.read_directory();
}

NpzReader::~NpzReader() = default;
NpzReader::NpzReader(NpzReader&& other) noexcept = default;
NpzReader& NpzReader::operator=(NpzReader&& other) noexcept = default;

const std::filesystem::path& NpzReader::path() const { return impl_->ar.path; }

std::vector<std::string> NpzReader::keys() const {
  std::vector<std::string> out;
  out.reserve(impl_->ar.entries.size());
  for (const Entry& e : impl_->ar.entries) out.push_back(e.name.substr(0, e.name.size() - 4));
  return out;
}

bool NpzReader::contains(const std::string& key) const { return impl_->ar.by_key.count(key) != 0; }

NpyArrayInfo NpzReader::info(const std::string& key) const {
  const Entry& e = impl_->ar.find(key);
  EntryReader rd(impl_->ar, e, kInfoReadBytes);
  return read_header(rd).info;
}

void NpzReader::stream(const std::string& key,
                       const std::function<void(const std::byte*, std::size_t)>& fn,
                       std::size_t chunk_bytes) const {
  if (chunk_bytes == 0) throw ParamError(path().string() + ": chunk_bytes must be positive");
  const Entry& e = impl_->ar.find(key);
  EntryReader rd(impl_->ar, e, chunk_bytes);
  const ParsedHeader h = read_header(rd);
  std::uint64_t left = h.payload_bytes;
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, left)));
  while (left > 0) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), left));
    if (rd.read(buf.data(), n) != n)
      impl_->ar.fail(e, "ends " + std::to_string(left) + " bytes early (truncated entry?)");
    fn(buf.data(), n);
    left -= n;
  }
  rd.finish();
}

template <class T>
void stream_as(const NpzReader& r, const std::string& key,
               const std::function<void(const T*, std::size_t, std::uint64_t)>& fn,
               std::size_t chunk_bytes) {
  stream_converted<T>(r, key, fn, chunk_bytes, false);
}

template <class T>
std::vector<T> read_all_as(const NpzReader& r, const std::string& key) {
  const NpyArrayInfo info = r.info(key);
  const std::string entry = key + ".npy";
  classify<T>(info, ConvCtx{&r.path(), &entry});  // reject the dtype before allocating
  const std::uint64_t count = info.count();
  std::vector<T> v;
  if (count > v.max_size())
    throw_input(
        r.path(), 0,
        "entry " + key + ".npy: " + std::to_string(count) + " elements are too many to read whole");
  v.reserve(static_cast<std::size_t>(count));
  stream_converted<T>(
      r, key, [&](const T* p, std::size_t n, std::uint64_t) { v.insert(v.end(), p, p + n); },
      std::size_t{1} << 22, true);
  if (layout_is_c(info) || v.empty()) return v;
  // Fortran order: the first axis varies fastest in v. Walk v in order, tracking the C index.
  const std::size_t nd = info.shape.size();
  std::vector<std::uint64_t> cstride(nd, 1);
  for (std::size_t d = nd - 1; d-- > 0;) cstride[d] = cstride[d + 1] * info.shape[d + 1];
  std::vector<std::uint64_t> idx(nd, 0);
  std::vector<T> c(v.size());
  std::uint64_t ci = 0;
  for (std::size_t f = 0; f < v.size(); ++f) {
    c[static_cast<std::size_t>(ci)] = v[f];
    for (std::size_t d = 0; d < nd; ++d) {
      ci += cstride[d];
      if (++idx[d] < info.shape[d]) break;
      ci -= cstride[d] * info.shape[d];
      idx[d] = 0;
    }
  }
  return c;
}

#define HALO_NPZ_INSTANTIATE(T)                                                                \
  template void stream_as<T>(const NpzReader&, const std::string&,                             \
                             const std::function<void(const T*, std::size_t, std::uint64_t)>&, \
                             std::size_t);                                                     \
  template std::vector<T> read_all_as<T>(const NpzReader&, const std::string&);
HALO_NPZ_INSTANTIATE(std::int32_t)
HALO_NPZ_INSTANTIATE(std::int64_t)
HALO_NPZ_INSTANTIATE(float)
HALO_NPZ_INSTANTIATE(double)
#undef HALO_NPZ_INSTANTIATE

}  // namespace halo

// The .npz container: a zip archive read from its end (end of central directory record, ZIP64
// record and locator, the central directory with its ZIP64 extra fields), the lookup of a member
// by key, and the checks of its local header before its data is read. See npz.h for the rules.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <unordered_set>
#include <utility>

#include "halo/graph/input.h"
#include "npz_internal.h"

namespace halo {
using namespace npz_internal;  // Archive and Entry (npz_internal.h)

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

}  // namespace

namespace npz_internal {

void Archive::read_at(void* dst, std::size_t n, std::uint64_t off) const {
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

void Archive::open_file() {
  fd = open_input(path);  // a zip archive is read from its end: a regular file only
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_system(path, "cannot stat");
  file_size = static_cast<std::uint64_t>(st.st_size);
}

void Archive::read_directory() {
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

const Entry& Archive::find(const std::string& key) const {
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

std::uint64_t Archive::data_start(const Entry& e) const {
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

}  // namespace npz_internal

}  // namespace halo

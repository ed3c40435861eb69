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

// What the end of central directory record (or its ZIP64 form) says about the directory.
struct EndRecord {
  std::uint64_t disk = 0, cd_disk = 0, n_disk = 0, n_total = 0, cd_size = 0, cd_off = 0;
  std::uint64_t cd_limit = 0;  // the directory ends before this offset
};

// Finds the end of central directory record in the file's last 64 KiB and reads its fields;
// separate because the backwards search for it is its own problem.
EndRecord find_end_record(const Archive& a, std::uint64_t* eocd_off_out) {
  if (a.file_size < kEocdBytes)
    a.fail("not a zip archive (only " + std::to_string(a.file_size) +
           " bytes, shorter than an end of central directory record)");
  const std::size_t tail_len =
      static_cast<std::size_t>(std::min<std::uint64_t>(a.file_size, kEocdBytes + kMaxComment));
  const std::uint64_t tail_off = a.file_size - tail_len;
  std::vector<unsigned char> tail(tail_len);
  a.read_at(tail.data(), tail_len, tail_off);
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
    a.fail("not a zip archive: no end of central directory record (truncated file?)");
  const unsigned char* e = &tail[found];
  const std::uint64_t eocd_off = tail_off + found;
  EndRecord r;
  r.disk = rd16(e + 4);
  r.cd_disk = rd16(e + 6);
  r.n_disk = rd16(e + 8);
  r.n_total = rd16(e + 10);
  r.cd_size = rd32(e + 12);
  r.cd_off = rd32(e + 16);
  r.cd_limit = eocd_off;
  *eocd_off_out = eocd_off;
  return r;
}

// Replaces r's fields with the ZIP64 record's when a locator precedes the end record at
// eocd_off; separate because only archives over 4 GiB or 65535 entries have one.
void read_zip64_record(const Archive& a, std::uint64_t eocd_off, EndRecord& r) {
  if (eocd_off < kLocatorBytes) return;
  unsigned char loc[kLocatorBytes];
  a.read_at(loc, kLocatorBytes, eocd_off - kLocatorBytes);
  if (rd32(loc) != kLocatorSig) return;
  const std::uint64_t rec_off = rd64(loc + 8);
  const std::uint32_t n_disks = rd32(loc + 16);
  if (rd32(loc + 4) != 0 || n_disks > 1)
    a.fail("multi-disk (split) zip archives are not supported");
  if (rec_off > eocd_off - kLocatorBytes || eocd_off - kLocatorBytes - rec_off < kEocd64Bytes)
    a.fail("ZIP64 end of central directory record offset " + std::to_string(rec_off) +
           " is out of range");
  unsigned char rec[kEocd64Bytes];
  a.read_at(rec, kEocd64Bytes, rec_off);
  if (rd32(rec) != kEocd64Sig)
    a.fail("no ZIP64 end of central directory record at offset " + std::to_string(rec_off));
  r.disk = rd32(rec + 16);
  r.cd_disk = rd32(rec + 20);
  r.n_disk = rd64(rec + 24);
  r.n_total = rd64(rec + 32);
  r.cd_size = rd64(rec + 40);
  r.cd_off = rd64(rec + 48);
  r.cd_limit = rec_off;
}

// Checks the end record describes one disk and a directory that fits before it; separate so
// the directory's bounds are known good before it is read.
void check_end_record(const Archive& a, const EndRecord& r) {
  if (r.disk != 0 || r.cd_disk != 0 || r.n_disk != r.n_total)
    a.fail("multi-disk (split) zip archives are not supported");
  if (r.cd_size > r.cd_limit || r.cd_off > r.cd_limit - r.cd_size)
    a.fail("central directory (" + std::to_string(r.cd_size) + " bytes at offset " +
           std::to_string(r.cd_off) +
           ") runs past its end record (truncated or prefixed archive?)");
  if (r.cd_size > kMaxCentralDirectory)
    a.fail("central directory of " + std::to_string(r.cd_size) + " bytes is too large");
  if (r.n_total > r.cd_size / kCentralBytes)
    a.fail(std::to_string(r.n_total) + " entries cannot fit a central directory of " +
           std::to_string(r.cd_size) + " bytes");
}

// Widens en's sizes and offset from the ZIP64 extra field (0x0001) among the elen bytes of
// extra fields at x; separate because the extra-field walk is independent of the entry layout.
void apply_zip64_extra(const Archive& a, const std::string& where, const unsigned char* x,
                       std::size_t elen, Entry& en) {
  // ZIP64 extra field (0x0001): a 64-bit value for each 32-bit field that is 0xFFFFFFFF,
  // in the order uncompressed size, compressed size, local header offset, disk.
  for (std::size_t q = 0; q + 4 <= elen;) {
    const std::uint16_t id = rd16(x + q);
    const std::size_t sz = rd16(x + q + 2);
    if (q + 4 + sz > elen) a.fail(where + " (" + en.name + "): extra field runs past its end");
    if (id == 0x0001) {
      const unsigned char* z = x + q + 4;
      std::size_t left = sz;
      auto take = [&](std::uint64_t& field) {
        if (left < 8) a.fail(where + " (" + en.name + "): ZIP64 extra field too short");
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
}

// Parses central directory entry i at cd[pos] and sets *record_len to its size; separate
// because each entry's layout and bounds checks are independent of the loop over them.
Entry parse_central_entry(const Archive& a, const std::vector<unsigned char>& cd, std::size_t pos,
                          std::uint64_t i, std::size_t* record_len) {
  const std::string where = "central directory entry " + std::to_string(i);
  if (cd.size() - pos < kCentralBytes || rd32(&cd[pos]) != kCentralSig)
    a.fail(where + ": bad signature or truncated directory");
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
    a.fail(where + ": name/extra/comment run past the central directory");
  en.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), nlen);
  apply_zip64_extra(a, where, c + kCentralBytes + nlen, elen, en);
  if (disk_start != 0 && disk_start != 0xFFFF)
    a.fail("multi-disk (split) zip archives are not supported");
  if (en.offset >= a.data_end)
    a.fail("entry " + en.name + ": local header offset " + std::to_string(en.offset) +
           " is not before the central directory");
  *record_len = kCentralBytes + nlen + elen + clen;
  return en;
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
  std::uint64_t eocd_off = 0;
  EndRecord r = find_end_record(*this, &eocd_off);
  read_zip64_record(*this, eocd_off, r);
  check_end_record(*this, r);
  data_end = r.cd_off;

  std::vector<unsigned char> cd(static_cast<std::size_t>(r.cd_size));
  read_at(cd.data(), cd.size(), r.cd_off);
  std::unordered_set<std::string> names;
  std::size_t pos = 0;
  for (std::uint64_t i = 0; i < r.n_total; ++i) {
    std::size_t record_len = 0;
    Entry en = parse_central_entry(*this, cd, pos, i, &record_len);
    if (!names.insert(en.name).second) fail("duplicate entry " + en.name);
    pos += record_len;
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

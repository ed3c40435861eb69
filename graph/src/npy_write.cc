// The .npy writer (format 1.0): magic, version, header length, a Python dict literal padded
// with spaces to a 64-byte boundary, then the raw data.
#include <zlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "halo/graph/error.h"
#include "halo/graph/npz.h"
#include "halo/graph/staging.h"

namespace halo {

std::string npy_prefix(const char* descr, std::uint64_t rows, std::uint64_t cols) {
  return cols == 0 ? npy_prefix(descr, std::vector<std::uint64_t>{rows})
                   : npy_prefix(descr, std::vector<std::uint64_t>{rows, cols});
}

std::string npy_prefix(const char* descr, const std::vector<std::uint64_t>& dims) {
  std::string shape = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) shape += (i ? ", " : "") + std::to_string(dims[i]);
  shape += dims.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '";
  header += descr;
  header += "', 'fortran_order': False, 'shape': ";
  header += shape;
  header += ", }";
  const std::size_t unpadded = 10 + header.size() + 1;  // magic(6) version(2) len(2) ... '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header;
}

template <class T>
void write_npy(const std::filesystem::path& path, const T* data, std::uint64_t rows,
               std::uint64_t cols) {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, float>);
  const std::string prefix = npy_prefix(std::is_same_v<T, float> ? "<f4" : "<i8", rows, cols);
  StagedFile f(path);  // checked writes, renamed over path when complete (staging.h)
  const std::uint64_t count = rows * (cols == 0 ? 1 : cols);
  f.write(prefix);
  f.write(data, std::size_t(count) * sizeof(T));
  f.commit();
}

template void write_npy<std::int64_t>(const std::filesystem::path&, const std::int64_t*,
                                      std::uint64_t, std::uint64_t);
template void write_npy<float>(const std::filesystem::path&, const float*, std::uint64_t,
                               std::uint64_t);

namespace {

void put16(std::string& b, std::uint32_t v) {
  b += char(v & 0xff);
  b += char((v >> 8) & 0xff);
}
void put32(std::string& b, std::uint32_t v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}

}  // namespace

void write_npz(const std::filesystem::path& path, const std::vector<NpzArray>& arrays) {
  // A zip of stored (uncompressed) members, one NAME.npy each: what np.savez writes. No ZIP64,
  // so every member and the whole archive must stay below 4 GiB.
  StagedFile f(path);
  std::string central;
  std::uint64_t at = 0;
  for (const NpzArray& a : arrays) {
    const std::string name = a.name + ".npy";
    const std::string prefix = npy_prefix(a.descr.c_str(), a.shape);
    const std::uint64_t size = prefix.size() + a.bytes;
    if (size >= 0xffffffffull || at + size + name.size() + 30 >= 0xffffffffull)
      throw ParamError(path.string() + ": " + a.name + " would make the .npz exceed 4 GiB");
    uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(prefix.data()), uInt(prefix.size()));
    for (std::size_t off = 0; off < a.bytes; off += std::size_t(1) << 30) {
      const std::size_t n = std::min(a.bytes - off, std::size_t(1) << 30);
      crc = crc32(crc, static_cast<const Bytef*>(a.data) + off, uInt(n));
    }
    std::string local;
    put32(local, 0x04034b50);  // local file header
    put16(local, 20);          // version needed
    put16(local, 0);           // flags
    put16(local, 0);           // stored
    put16(local, 0);           // time
    put16(local, 0x21);        // date: 1980-01-01
    put32(local, std::uint32_t(crc));
    put32(local, std::uint32_t(size));
    put32(local, std::uint32_t(size));
    put16(local, std::uint32_t(name.size()));
    put16(local, 0);
    local += name;
    put32(central, 0x02014b50);  // central directory entry
    put16(central, 20);
    put16(central, 20);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, std::uint32_t(crc));
    put32(central, std::uint32_t(size));
    put32(central, std::uint32_t(size));
    put16(central, std::uint32_t(name.size()));
    put16(central, 0);  // extra
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, std::uint32_t(at));
    central += name;
    f.write(local);
    f.write(prefix);
    if (a.bytes) f.write(a.data, a.bytes);
    at += local.size() + size;
  }
  std::string end;
  put32(end, 0x06054b50);  // end of central directory
  put16(end, 0);
  put16(end, 0);
  put16(end, std::uint32_t(arrays.size()));
  put16(end, std::uint32_t(arrays.size()));
  put32(end, std::uint32_t(central.size()));
  put32(end, std::uint32_t(at));
  put16(end, 0);
  if (arrays.size() > 0xffff || at + central.size() >= 0xffffffffull)
    throw ParamError(path.string() + ": too large for a .npz without ZIP64");
  f.write(central);
  f.write(end);
  f.commit();
}

}  // namespace halo

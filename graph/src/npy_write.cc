// The .npy writer (format 1.0): magic, version, header length, a Python dict literal padded
// with spaces to a 64-byte boundary, then the raw data.
#include <string>

#include "halo/graph/npz.h"
#include "halo/graph/staging.h"

namespace halo {

std::string npy_prefix(const char* descr, std::uint64_t rows, std::uint64_t cols) {
  std::string shape = cols == 0 ? "(" + std::to_string(rows) + ",)"
                                : "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
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

}  // namespace halo

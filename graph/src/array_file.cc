// Array files: header layout in array_file.h. Writes go through pwrite (never mmap) so large
// outputs do not count towards this process's resident memory.
#include "halo/graph/array_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/staging.h"

namespace halo {
namespace {

constexpr char kMagic[8] = {'H', 'A', 'L', 'O', 'A', 'R', 'R', '1'};
constexpr std::uint32_t kVersion = 1;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t dtype;
  std::uint64_t rows;
  std::uint64_t cols;
  std::uint64_t crc32;
  std::uint64_t payload_bytes;
  std::uint8_t reserved[16];
};
static_assert(sizeof(Header) == kArrayHeaderBytes);

void pwrite_all(int fd, const std::filesystem::path& path, const void* data, std::uint64_t n,
                std::uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const std::size_t chunk = std::size_t(std::min<std::uint64_t>(n, 1u << 30));
    const ssize_t w = ::pwrite(fd, p, chunk, off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_system(path, "write failed");
    }
    p += w;
    n -= std::uint64_t(w);
    offset += std::uint64_t(w);
  }
}

// CRC-32 of bytes [offset, offset + n) of fd, read in chunks.
std::uint32_t crc_of_file(int fd, const std::filesystem::path& path, std::uint64_t offset,
                          std::uint64_t n) {
  std::vector<char> buf(std::size_t(std::min<std::uint64_t>(n, 8u << 20)) + 1);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const std::size_t want = std::size_t(std::min<std::uint64_t>(n, buf.size()));
    const ssize_t r = ::pread(fd, buf.data(), want, off_t(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_system(path, "read failed");
    }
    if (r == 0) throw_input(path, 0, "file shrank while being checksummed");
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(buf.data()), std::size_t(r));
    offset += std::uint64_t(r);
    n -= std::uint64_t(r);
  }
  return std::uint32_t(crc);
}

Header make_header(const ArrayInfo& info) {
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.dtype = std::uint32_t(info.dtype);
  h.rows = info.rows;
  h.cols = info.cols;
  h.crc32 = info.crc32;
  h.payload_bytes = info.rows * info.cols * dtype_size(info.dtype);
  return h;
}

struct Mapping {
  void* addr = nullptr;
  std::size_t len = 0;
  ~Mapping() {
    if (addr && addr != MAP_FAILED) munmap(addr, len);
  }
};

}  // namespace

void release_file_pages(const void* p, std::size_t bytes) {
  static const auto page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  const auto b = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto e = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
  // A hint: a failure leaves the pages resident, which is only memory.
  // NOLINTNEXTLINE(performance-no-int-to-ptr): madvise takes the page-aligned address
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kInt8:
      return "int8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "unknown";
}

template <class T>
ArrayInfo write_array(const std::filesystem::path& path, const T* data, std::uint64_t rows,
                      std::uint64_t cols) {
  ArrayFileWriter w(path, dtype_of<T>(), rows, cols);
  w.write_rows(0, data, rows);
  return w.finish();
}

ArrayFileWriter::ArrayFileWriter(const std::filesystem::path& path, DType dtype, std::uint64_t rows,
                                 std::uint64_t cols)
    : path_(path) {
  info_.dtype = dtype;
  info_.rows = rows;
  info_.cols = cols;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_system(path, "cannot create");
  const std::uint64_t total = kArrayHeaderBytes + rows * cols * dtype_size(dtype);
  if (::ftruncate(fd_, off_t(total)) != 0) throw_system(path, "cannot size");
}

ArrayFileWriter::~ArrayFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ArrayFileWriter::write_rows(std::uint64_t row, const void* data, std::uint64_t count) {
  if (count == 0) return;
  const std::uint64_t row_bytes = info_.cols * dtype_size(info_.dtype);
  pwrite_all(fd_, path_, data, count * row_bytes, kArrayHeaderBytes + row * row_bytes);
}

void ArrayFileWriter::shrink_rows(std::uint64_t rows) {
  if (rows > info_.rows) throw std::logic_error(path_.string() + ": shrink_rows cannot grow");
  info_.rows = rows;
  const std::uint64_t total = kArrayHeaderBytes + rows * info_.cols * dtype_size(info_.dtype);
  if (::ftruncate(fd_, off_t(total)) != 0) throw_system(path_, "cannot size");
}

ArrayInfo ArrayFileWriter::finish() {
  const std::uint64_t payload = info_.rows * info_.cols * dtype_size(info_.dtype);
  info_.crc32 = crc_of_file(fd_, path_, kArrayHeaderBytes, payload);
  const Header h = make_header(info_);
  pwrite_all(fd_, path_, &h, sizeof h, 0);
  // Synced before the rename that commits its folder: a full disk or an I/O error seen only by
  // fsync (delayed allocation, NFS) must fail the write, not surface later as a corrupt array.
  try {
    sync_fd(fd_, path_);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_system(path_, "close failed");
  }
  fd_ = -1;
  return info_;
}

template <class T>
Array<T> map_array(const std::filesystem::path& path, ArrayInfo* out_info, bool verify) {
  const int fd = open_input(path);  // a regular file: a FIFO or a device cannot be mapped
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw_system(path, "cannot stat");
  const std::uint64_t size = std::uint64_t(st.st_size);
  Header h{};
  if (size < sizeof h)
    throw_input(path, 0,
                "truncated: expected a " + std::to_string(sizeof h) + "-byte header, found " +
                    std::to_string(size) + " bytes");
  if (::pread(fd, &h, sizeof h, 0) != ssize_t(sizeof h)) throw_system(path, "read failed");
  if (std::memcmp(h.magic, kMagic, 8) != 0)
    throw_input(path, 0, "not a halo array file (bad magic)");
  if (h.version != kVersion)
    throw_input(path, 0,
                "array format version " + std::to_string(h.version) + ", this halo reads version " +
                    std::to_string(kVersion));
  if (h.dtype != std::uint32_t(dtype_of<T>()))
    throw_input(path, 0,
                std::string("expected dtype ") + dtype_name(dtype_of<T>()) + ", found " +
                    dtype_name(DType(h.dtype)));
  // Checked in this order so that no product or sum below can wrap: a header claiming 2^62 x 4
  // elements must not pass as a small payload (it would map a few bytes and index far past them).
  std::uint64_t elements = 0, expect_payload = 0;
  if (__builtin_mul_overflow(h.rows, h.cols, &elements) ||
      __builtin_mul_overflow(elements, std::uint64_t(sizeof(T)), &expect_payload) ||
      h.payload_bytes != expect_payload)
    throw_input(path, 0,
                "header shape " + std::to_string(h.rows) + "x" + std::to_string(h.cols) +
                    " disagrees with its payload size " + std::to_string(h.payload_bytes));
  if (h.payload_bytes > size || size - sizeof h != h.payload_bytes)
    throw_input(path, 0,
                "truncated: expected " + std::to_string(sizeof h + h.payload_bytes) +
                    " bytes, found " + std::to_string(size));
  if (verify) {
    const std::uint32_t crc = crc_of_file(fd, path, sizeof h, h.payload_bytes);
    if (crc != h.crc32)
      throw_input(path, 0,
                  "checksum mismatch: header says crc32 " + std::to_string(h.crc32) +
                      ", data gives " + std::to_string(crc) + " (file corrupted)");
  }
  if (out_info) *out_info = {DType(h.dtype), h.rows, h.cols, std::uint32_t(h.crc32)};
  if (h.payload_bytes == 0) return Array<T>(std::vector<T>());
  auto map = std::make_shared<Mapping>();
  map->len = std::size_t(size);
  map->addr = mmap(nullptr, map->len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map->addr == MAP_FAILED) throw_system(path, "mmap failed");
  // Mapped read-only: a mapped Array is read-only by contract (a write faults instead of
  // silently changing a dataset another process may be reading).
  T* data = reinterpret_cast<T*>(static_cast<char*>(map->addr) + sizeof h);
  return Array<T>::mapped(map, data, std::size_t(h.rows * h.cols));
}

#define HALO_INSTANTIATE(T)                                                                \
  template ArrayInfo write_array<T>(const std::filesystem::path&, const T*, std::uint64_t, \
                                    std::uint64_t);                                        \
  template Array<T> map_array<T>(const std::filesystem::path&, ArrayInfo*, bool);
HALO_INSTANTIATE(std::int8_t)
HALO_INSTANTIATE(std::int32_t)
HALO_INSTANTIATE(std::int64_t)
HALO_INSTANTIATE(float)
HALO_INSTANTIATE(double)
#undef HALO_INSTANTIATE

}  // namespace halo

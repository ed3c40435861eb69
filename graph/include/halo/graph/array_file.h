// One binary array per file, memory-mappable: a 64-byte header then the raw little-endian
// payload (so the payload is 64-byte aligned in the mapping).
//
//   0  char[8]  magic "HALOARR1"
//   8  u32      format version (1)
//  12  u32      dtype (DType)
//  16  u64      rows
//  24  u64      cols (1 for a vector)
//  32  u64      CRC-32 of the payload (zlib's crc32, zero-extended)
//  40  u64      payload bytes (= rows * cols * dtype size)
//  48  u8[16]   zero
//
// Files are written under a temporary name by DatasetWriter and renamed with their directory,
// so a reader never sees a half-written array; the checksum catches later corruption.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "halo/graph/array.h"

namespace halo {

enum class DType : std::uint32_t { kInt8 = 1, kInt32 = 2, kInt64 = 3, kFloat32 = 4, kFloat64 = 5 };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<std::int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}

inline constexpr std::size_t kArrayHeaderBytes = 64;

struct ArrayInfo {
  DType dtype = DType::kInt8;
  std::uint64_t rows = 0, cols = 0;
  std::uint32_t crc32 = 0;
};

// Writes rows x cols elements of T to path (header + payload) in one go.
template <class T>
ArrayInfo write_array(const std::filesystem::path& path, const T* data, std::uint64_t rows,
                      std::uint64_t cols = 1);

// A file being filled row by row, possibly out of order (pwrite at the row's offset), for
// arrays too large to hold in memory (features of ogbn-papers100M). finish() writes the header
// with the checksum, read back in chunks so the pages never count towards resident memory.
class ArrayFileWriter {
 public:
  ArrayFileWriter(const std::filesystem::path& path, DType dtype, std::uint64_t rows,
                  std::uint64_t cols);
  ~ArrayFileWriter();
  ArrayFileWriter(const ArrayFileWriter&) = delete;
  ArrayFileWriter& operator=(const ArrayFileWriter&) = delete;

  // Writes `count` consecutive rows starting at `row` from data (count * cols elements).
  void write_rows(std::uint64_t row, const void* data, std::uint64_t count);
  // Cuts the array to its first `rows` rows (<= the rows it was opened with), for writers that
  // learn the length at the end (a CSR whose duplicates merge as it is written).
  void shrink_rows(std::uint64_t rows);
  ArrayInfo finish();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  ArrayInfo info_;
};

// Maps an array file read-only and checks its header against the expected dtype; verifies the
// checksum when verify. Throws InputError naming the file for any mismatch or truncation.
template <class T>
Array<T> map_array(const std::filesystem::path& path, ArrayInfo* info = nullptr,
                   bool verify = true);

}  // namespace halo

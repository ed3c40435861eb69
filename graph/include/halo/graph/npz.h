// Streaming reader for NumPy .npz archives (zip files of .npy arrays), as written by np.savez
// (stored entries) and np.savez_compressed (deflate entries); used to import OGB's binary
// layout (ogbn-papers100M raw/data.npz, raw/node-label.npz), whose arrays are tens of GB.
//
// Owns: the zip container (end-of-central-directory record, ZIP64 record/locator, central
// directory with ZIP64 extra fields, local headers), .npy header parsing (format 1.0, 2.0,
// 3.0), payload streaming with CRC-32 and size checks, and the element conversion of
// stream_as/read_all_as. Data is never loaded whole: memory is O(chunk).
//
// Conventions:
//  * keys() lists the entries whose name ends in ".npy", without that suffix; other entries
//    are ignored. Two entries with the same name make the archive invalid.
//  * Compression methods 0 (stored) and 8 (deflate) only; encrypted and multi-disk archives
//    are rejected.
//  * Every bad-format problem throws InputError "ARCHIVE: entry NAME.npy: WHAT" (or
//    "ARCHIVE: WHAT" for the container); OS failures throw SystemError.
//  * Const member functions only use pread on the archive's descriptor, so one NpzReader may
//    be streamed from several threads at once.
//
// Conversion rules of stream_as<T> (T is int32_t, int64_t, float or double):
//  * Accepted source dtypes: <i1 <i2 <i4 <i8 <u1 <u2 <u4 <u8 <f2 <f4 <f8 |b1 |i1 |u1 (any byte
//    order mark on one-byte types). Big-endian ('>i4'), complex, string, object, datetime and
//    structured dtypes are rejected with InputError naming the dtype (no byte swapping is
//    done: convert with arr.astype('<i4') in NumPy).
//  * Integer -> integer: range-checked; a value that does not fit T throws
//    "value V at index I does not fit int32". Bool -> 0/1.
//  * Float -> integer: rejected before any element is delivered.
//  * Integer -> float/double: nearest representable value (int64 -> float may round).
//  * float64 -> float32: rounded; a finite value beyond float's range throws; inf/nan kept.
//  * float16 -> float/double: exact, by hand (subnormals, +-inf, nan, -0).
//  * Fortran order: 1-D (and 0-D) arrays have one layout and are accepted. stream_as rejects
//    Fortran-order arrays with ndim >= 2; read_all_as accepts them (any ndim) and returns the
//    elements in C order (it holds the array anyway, so the transpose costs one copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace halo {

// What a .npy header says about one array of an archive.
struct NpyArrayInfo {
  std::string name;   // key without ".npy"
  std::string descr;  // e.g. "<i8", "<f4", "<f2", "|b1", "<f8", ">i4", "<U3"
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;  // empty for 0-d
  std::size_t item_size = 0;         // bytes per element
  // Number of elements: the product of shape (1 for 0-d).
  std::uint64_t count() const;
};

// An open .npz archive. Holds a file descriptor and the central directory, never array data.
class NpzReader {
 public:
  // Opens path and reads its central directory (ZIP64 aware); throws InputError/SystemError.
  explicit NpzReader(const std::filesystem::path& path);
  // Closes the archive.
  ~NpzReader();
  NpzReader(const NpzReader&) = delete;
  NpzReader& operator=(const NpzReader&) = delete;
  // Takes over other's archive; other is left empty (only destructible or assignable).
  NpzReader(NpzReader&& other) noexcept;
  // Takes over other's archive, closing the current one.
  NpzReader& operator=(NpzReader&& other) noexcept;

  // The archive's path as given to the constructor.
  const std::filesystem::path& path() const;
  // Array names (entry names without ".npy"), in archive order.
  std::vector<std::string> keys() const;
  // Whether the archive holds the array key.
  bool contains(const std::string& key) const;
  // Parses key's .npy header (v1, v2, v3) and checks it against the entry's size; throws
  // InputError for a missing key (naming the available ones) or a bad header.
  NpyArrayInfo info(const std::string& key) const;
  // Streams key's raw payload bytes (after the .npy header) in order, in chunks of exactly
  // chunk_bytes except the last (fn is not called for an empty payload); inflates deflate
  // entries and checks the entry's CRC-32 and sizes at the end; a truncated or corrupt entry
  // throws InputError naming the archive and entry (possibly after some chunks were
  // delivered). chunk_bytes also bounds each read from the file; 0 throws ParamError.
  void stream(const std::string& key, const std::function<void(const std::byte*, std::size_t)>& fn,
              std::size_t chunk_bytes = std::size_t{1} << 22) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Streams key's elements converted to T (rules in the file comment), calling
// fn(values, count, first_index) with C-order element indices; chunk_bytes as in
// NpzReader::stream (elements straddling chunks are reassembled).
template <class T>
void stream_as(const NpzReader& r, const std::string& key,
               const std::function<void(const T*, std::size_t, std::uint64_t)>& fn,
               std::size_t chunk_bytes = std::size_t{1} << 22);

// Reads a whole (small) array converted to T, in C order (Fortran order of any ndim allowed).
template <class T>
std::vector<T> read_all_as(const NpzReader& r, const std::string& key);

// Converts an IEEE binary16 value (bit pattern) to float, exactly.
float half_to_float(std::uint16_t bits);

// The bytes a .npy file (format 1.0, C order) of rows x cols values of dtype descr ("<f4",
// "<i8") starts with, its data following; cols == 0: a 1-D array. Its size is a multiple of 64.
std::string npy_prefix(const char* descr, std::uint64_t rows, std::uint64_t cols);

// The same for any shape (a 1-D array: one dimension; dims may be 0).
std::string npy_prefix(const char* descr, const std::vector<std::uint64_t>& dims);

// One array of an .npz archive: `bytes` bytes at data, of NumPy dtype descr ("<i8", "<f8",
// "<f4", "|u1") and the given shape, stored as NAME.npy.
struct NpzArray {
  std::string name, descr;
  std::vector<std::uint64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// Writes an .npz archive (np.load reads it; members stored uncompressed, as np.savez does),
// staged and renamed into place; ParamError beyond 4 GiB (no ZIP64).
void write_npz(const std::filesystem::path& path, const std::vector<NpzArray>& arrays);

// Writes a NumPy .npy file (format 1.0, C order, little-endian) of rows x cols values of T
// (int64 or float32); cols == 0 writes a 1-D array of rows values. Written to a temporary name
// and renamed, like every output.
template <class T>
void write_npy(const std::filesystem::path& path, const T* data, std::uint64_t rows,
               std::uint64_t cols);

}  // namespace halo

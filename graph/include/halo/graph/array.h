// Array<T>: a contiguous typed buffer that either owns its storage (a std::vector) or views a
// memory-mapped file kept alive by a shared handle. Copies share the storage (they are cheap,
// like a view). Every reader and builder in halo hands out
// Arrays, so consumers never care whether data came from RAM or from an mmap'd dataset.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace halo {

// Drops the resident pages that lie wholly inside [p, p + bytes) of a read-only file mapping:
// the next read maps them from the file again. Only for Array's file-backed storage (on
// anonymous memory it would zero the data); Array::release is the safe way to call it.
void release_file_pages(const void* p, std::size_t bytes);

template <class T>
class Array {
 public:
  Array() = default;
  // Takes ownership of v's storage (no copy).
  explicit Array(std::vector<T> v) {
    auto holder = std::make_shared<std::vector<T>>(std::move(v));
    data_ = holder->data();
    size_ = holder->size();
    keep_ = std::move(holder);
  }
  // Views n elements at data, kept valid as long as keep (e.g. an mmap handle) lives.
  // keep is moved into keep_; clang-tidy 14 misses a move through the template's own type.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  static Array view(std::shared_ptr<const void> keep, T* data, std::size_t n) {
    Array a;
    a.keep_ = std::move(keep);
    a.data_ = data;
    a.size_ = n;
    return a;
  }

  // As view, for a read-only mapping of a file (map_array): release() may drop its pages.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  static Array mapped(std::shared_ptr<const void> keep, T* data, std::size_t n) {
    Array a = view(std::move(keep), data, n);
    a.file_backed_ = true;
    return a;
  }

  // Lets a sweep over a mapped array keep its resident memory to a window: drops the pages
  // holding elements [first, last), read again from the file if they are touched again. A
  // no-op for storage in memory. The contents seen through the array never change.
  void release(std::size_t first, std::size_t last) const {
    if (file_backed_ && first < last && last <= size_)
      release_file_pages(data_ + first, (last - first) * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  std::span<const T> span() const { return {data_, size_}; }
  std::span<T> span() { return {data_, size_}; }

 private:
  std::shared_ptr<const void> keep_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool file_backed_ = false;
};

}  // namespace halo

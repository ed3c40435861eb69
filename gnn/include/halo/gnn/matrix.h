// Dense row-major float32 matrices. MatrixView is what kernels take: a pointer, a shape and the
// memory space; rows are contiguous (leading dimension = cols), so a range of rows of a view is
// again a view — the runtime keeps owned rows first and halo rows after them in one buffer.
// Matrix owns storage on the host or, with the CUDA backend, on the current GPU (RAII: freed
// with the matrix; device memory is allocated with plain cudaMalloc, never managed memory).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace halo {

enum class Device { kCpu, kCuda };

struct MatrixView {
  float* data = nullptr;
  std::int64_t rows = 0, cols = 0;
  Device device = Device::kCpu;

  std::int64_t size() const { return rows * cols; }
  float* row(std::int64_t r) const { return data + r * cols; }
  float& at(std::int64_t r, std::int64_t c) const { return data[r * cols + c]; }
  // Rows [begin, end) of this view.
  MatrixView rows_range(std::int64_t begin, std::int64_t end) const {
    return {data + begin * cols, end - begin, cols, device};
  }
};

// Copies n floats from src (in memory space `from`) to dst (in `to`); plain memcpy on the host.
void copy_floats(Device to, float* dst, Device from, const float* src, std::int64_t n);

class Matrix {
 public:
  Matrix() = default;
  Matrix(std::int64_t rows, std::int64_t cols, float fill = 0.f, Device device = Device::kCpu);
  // Moves leave the source empty (0 x 0, no storage), so a reused moved-from matrix allocates.
  Matrix(Matrix&& o) noexcept;
  Matrix& operator=(Matrix&& o) noexcept;
  Matrix(const Matrix& o);  // deep copy, same device
  Matrix& operator=(const Matrix& o);

  // Resizes (contents unspecified when the size changes) — buffers are reused across epochs:
  // device storage is reallocated only when it must grow.
  void resize(std::int64_t rows, std::int64_t cols);
  // Where later allocations go; the matrix must be empty or already there.
  void set_device(Device d);
  Device device() const { return device_; }
  // Every element = v.
  void fill(float v);
  MatrixView view() { return {data(), rows_, cols_, device_}; }
  MatrixView view() const { return {const_cast<float*>(data()), rows_, cols_, device_}; }
  float* data() { return device_ == Device::kCpu ? host_.data() : dev_.get(); }
  const float* data() const { return device_ == Device::kCpu ? host_.data() : dev_.get(); }
  // Row r's first element (in the matrix's memory space).
  float* row(std::int64_t r) { return data() + r * cols_; }
  const float* row(std::int64_t r) const { return data() + r * cols_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t size() const { return rows_ * cols_; }
  // Host matrices only.
  float& at(std::int64_t r, std::int64_t c) { return host_[std::size_t(r * cols_ + c)]; }
  float at(std::int64_t r, std::int64_t c) const { return host_[std::size_t(r * cols_ + c)]; }
  std::vector<float>& storage() { return host_; }
  const std::vector<float>& storage() const { return host_; }
  // The elements on the host (a copy for device matrices), and their replacement from the host.
  std::vector<float> to_host() const;
  void assign(const std::vector<float>& values);  // values.size() == size()

 private:
  struct DeviceFree {
    void operator()(float* p) const noexcept;
  };
  std::int64_t rows_ = 0, cols_ = 0;
  Device device_ = Device::kCpu;
  std::vector<float> host_;
  std::unique_ptr<float, DeviceFree> dev_;
  std::int64_t dev_capacity_ = 0;
};

}  // namespace halo

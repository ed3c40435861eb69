// Dense row-major float32 matrices. MatrixView is what kernels take: a pointer, a shape and the
// memory space; rows are contiguous (leading dimension = cols), so a range of rows of a view is
// again a view — the runtime keeps owned rows first and halo rows after them in one buffer.
// Matrix owns host storage; the CUDA backend adds device storage behind the same view type.
#pragma once

#include <cstdint>
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

class Matrix {
 public:
  Matrix() = default;
  Matrix(std::int64_t rows, std::int64_t cols, float fill = 0.f)
      : rows_(rows), cols_(cols), data_(std::size_t(rows * cols), fill) {}
  // Resizes (contents unspecified when the size changes) — buffers are reused across epochs.
  void resize(std::int64_t rows, std::int64_t cols) {
    rows_ = rows;
    cols_ = cols;
    data_.resize(std::size_t(rows * cols));
  }
  void fill(float v) { std::fill(data_.begin(), data_.end(), v); }
  MatrixView view() { return {data_.data(), rows_, cols_, Device::kCpu}; }
  MatrixView view() const { return {const_cast<float*>(data_.data()), rows_, cols_, Device::kCpu}; }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t size() const { return rows_ * cols_; }
  float& at(std::int64_t r, std::int64_t c) { return data_[std::size_t(r * cols_ + c)]; }
  float at(std::int64_t r, std::int64_t c) const { return data_[std::size_t(r * cols_ + c)]; }
  std::vector<float>& storage() { return data_; }
  const std::vector<float>& storage() const { return data_; }

 private:
  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<float> data_;
};

}  // namespace halo

// Matrix storage on the host or the GPU.
#include "halo/gnn/matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "halo/gnn/device.h"
#include "halo/graph/error.h"

namespace halo {

void copy_floats(Device to, float* dst, Device from, const float* src, std::int64_t n) {
  if (n <= 0) return;
  const std::size_t bytes = sizeof(float) * std::size_t(n);
  if (to == Device::kCpu && from == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  device_copy(dst, src, bytes,
              to == Device::kCpu     ? CopyKind::kDeviceToHost
              : from == Device::kCpu ? CopyKind::kHostToDevice
                                     : CopyKind::kDeviceToDevice);
}

void Matrix::DeviceFree::operator()(float* p) const noexcept { device_free(p); }

Matrix::Matrix(std::int64_t rows, std::int64_t cols, float fill_value, Device device)
    : device_(device) {
  resize(rows, cols);
  fill(fill_value);
}

Matrix::Matrix(const Matrix& o) : device_(o.device_) {
  resize(o.rows_, o.cols_);
  copy_floats(device_, data(), o.device_, o.data(), size());
}

Matrix& Matrix::operator=(const Matrix& o) {
  if (this == &o) return *this;
  if (device_ != o.device_) {
    *this = Matrix();
    device_ = o.device_;
  }
  resize(o.rows_, o.cols_);
  copy_floats(device_, data(), o.device_, o.data(), size());
  return *this;
}

Matrix::Matrix(Matrix&& o) noexcept
    : rows_(std::exchange(o.rows_, 0)),
      cols_(std::exchange(o.cols_, 0)),
      device_(o.device_),
      host_(std::move(o.host_)),
      dev_(std::move(o.dev_)),
      dev_capacity_(std::exchange(o.dev_capacity_, 0)) {
  o.host_.clear();
}

Matrix& Matrix::operator=(Matrix&& o) noexcept {
  if (this == &o) return *this;
  rows_ = std::exchange(o.rows_, 0);
  cols_ = std::exchange(o.cols_, 0);
  device_ = o.device_;
  host_ = std::move(o.host_);
  o.host_.clear();
  dev_ = std::move(o.dev_);
  dev_capacity_ = std::exchange(o.dev_capacity_, 0);
  return *this;
}

void Matrix::resize(std::int64_t rows, std::int64_t cols) {
  rows_ = rows;
  cols_ = cols;
  if (device_ == Device::kCpu) {
    host_.resize(std::size_t(rows * cols));
    return;
  }
  if (rows * cols > dev_capacity_) {
    dev_.reset();
    dev_capacity_ = 0;  // owns nothing should the allocation throw
    dev_.reset(static_cast<float*>(device_alloc(sizeof(float) * std::size_t(rows * cols))));
    dev_capacity_ = rows * cols;
  }
}

void Matrix::set_device(Device d) {
  if (d == device_) return;
  if (size() != 0) throw ParamError("Matrix::set_device on a non-empty matrix");
  device_ = d;
}

void Matrix::fill(float v) {
  if (device_ == Device::kCpu) {
    std::fill(host_.begin(), host_.end(), v);
    return;
  }
  if (v == 0.f && !std::signbit(v)) {  // -0 keeps its sign, as on the host
    device_zero(dev_.get(), sizeof(float) * std::size_t(size()));
    return;
  }
  assign(std::vector<float>(std::size_t(size()), v));
}

std::vector<float> Matrix::to_host() const {
  if (device_ == Device::kCpu) return host_;
  std::vector<float> out(static_cast<std::size_t>(size()));
  copy_floats(Device::kCpu, out.data(), device_, data(), size());
  return out;
}

void Matrix::assign(const std::vector<float>& values) {
  if (std::int64_t(values.size()) != size()) throw ParamError("Matrix::assign: size mismatch");
  copy_floats(device_, data(), Device::kCpu, values.data(), size());
}

}  // namespace halo

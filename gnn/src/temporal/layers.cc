// TGN layers: time encoding and GRU cell, forward and explicit backward.
#include "halo/gnn/temporal/layers.h"

#include <cmath>

namespace halo {
namespace {

Param zero_param(std::int64_t rows, std::int64_t cols) {
  Param p;
  p.value = Matrix(rows, cols);
  p.grad = Matrix(rows, cols);
  p.m = Matrix(rows, cols);
  p.v = Matrix(rows, cols);
  return p;
}

// Uniform(-1/sqrt(H), 1/sqrt(H)), PyTorch's GRU initialisation, from the keyed RNG.
void init_uniform(Param& p, float bound, std::uint64_t seed, std::uint64_t stream) {
  const PhiloxKey key = philox_key(seed, kStreamInit + stream);
  for (std::int64_t i = 0; i < p.value.rows(); ++i)
    for (std::int64_t j = 0; j < p.value.cols(); ++j)
      p.value.at(i, j) = (2.f * philox_uniform(key, std::uint64_t(i), std::uint32_t(j)) - 1.f) * bound;
}

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

}  // namespace

TimeEncoder::TimeEncoder(std::int64_t dim) : dim_(dim), w_(zero_param(1, dim)), b_(zero_param(1, dim)) {
  w_.name = "time.w";
  b_.name = "time.b";
  for (std::int64_t k = 0; k < dim; ++k)
    w_.value.at(0, k) = float(std::pow(10.0, -9.0 * double(k) / double(std::max<std::int64_t>(1, dim - 1))));
}

void TimeEncoder::forward(const double* dt, std::int64_t n, Matrix& out) {
  dt_.assign(dt, dt + n);
  out.resize(n, dim_);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < dim_; ++k)
      out.at(i, k) = float(std::cos(double(w_.value.at(0, k)) * dt[i] + double(b_.value.at(0, k))));
}

void TimeEncoder::backward(const Matrix& dout) {
  for (std::int64_t k = 0; k < dim_; ++k) {
    double gw = 0, gb = 0;
    for (std::size_t i = 0; i < dt_.size(); ++i) {
      const double s = -std::sin(double(w_.value.at(0, k)) * dt_[i] + double(b_.value.at(0, k))) *
                       double(dout.at(std::int64_t(i), k));
      gw += s * dt_[i];
      gb += s;
    }
    w_.grad.at(0, k) += float(gw);
    b_.grad.at(0, k) += float(gb);
  }
}

GruCell::GruCell(std::int64_t in, std::int64_t hidden, std::uint64_t seed, std::uint64_t stream)
    : in_(in), hid_(hidden), w_(zero_param(in, 3 * hidden)), u_(zero_param(hidden, 3 * hidden)),
      bw_(zero_param(1, 3 * hidden)), bu_(zero_param(1, 3 * hidden)) {
  const float bound = float(1.0 / std::sqrt(double(hidden)));
  init_uniform(w_, bound, seed, stream * 4);
  init_uniform(u_, bound, seed, stream * 4 + 1);
  init_uniform(bw_, bound, seed, stream * 4 + 2);
  init_uniform(bu_, bound, seed, stream * 4 + 3);
  w_.name = "gru.weight_x";
  u_.name = "gru.weight_h";
  bw_.name = "gru.bias_x";
  bu_.name = "gru.bias_h";
}

void GruCell::zero_grad() {
  for (Param* p : params()) p->grad.fill(0.f);
}

void GruCell::forward(Backend& be, const MatrixView& x, const MatrixView& h, Matrix& h_out) {
  const std::int64_t B = x.rows, H = hid_;
  x_.resize(B, in_);
  be.copy(x, x_.view());
  h_.resize(B, H);
  be.copy(h, h_.view());
  a_.resize(B, 3 * H);
  c_.resize(B, 3 * H);
  be.gemm(false, false, 1.f, x, w_.value.view(), 0.f, a_.view());
  be.add_bias(a_.view(), bw_.value.data());
  be.gemm(false, false, 1.f, h, u_.value.view(), 0.f, c_.view());
  be.add_bias(c_.view(), bu_.value.data());
  r_.resize(B, H);
  z_.resize(B, H);
  n_.resize(B, H);
  h_out.resize(B, H);
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j < H; ++j) {
      const float r = sigmoid(a_.at(i, j) + c_.at(i, j));
      const float z = sigmoid(a_.at(i, H + j) + c_.at(i, H + j));
      const float n = std::tanh(a_.at(i, 2 * H + j) + r * c_.at(i, 2 * H + j));
      r_.at(i, j) = r;
      z_.at(i, j) = z;
      n_.at(i, j) = n;
      h_out.at(i, j) = (1.f - z) * n + z * h_.at(i, j);
    }
}

void GruCell::backward(Backend& be, const MatrixView& dh_out, Matrix& dx, Matrix& dh) {
  const std::int64_t B = dh_out.rows, H = hid_;
  Matrix da(B, 3 * H), dc(B, 3 * H);
  dh.resize(B, H);
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j < H; ++j) {
      const float g = dh_out.at(i, j), r = r_.at(i, j), z = z_.at(i, j), n = n_.at(i, j);
      const float dn = g * (1.f - z) * (1.f - n * n);  // through tanh
      const float dz = g * (h_.at(i, j) - n) * z * (1.f - z);
      const float dr = dn * c_.at(i, 2 * H + j) * r * (1.f - r);
      da.at(i, j) = dc.at(i, j) = dr;
      da.at(i, H + j) = dc.at(i, H + j) = dz;
      da.at(i, 2 * H + j) = dn;
      dc.at(i, 2 * H + j) = dn * r;
      dh.at(i, j) = g * z;  // the direct path; the gates' part is added below
    }
  be.gemm(true, false, 1.f, x_.view(), da.view(), 1.f, w_.grad.view());
  be.gemm(true, false, 1.f, h_.view(), dc.view(), 1.f, u_.grad.view());
  std::vector<float> s(std::size_t(3 * H));
  be.column_sums(da.view(), s.data());
  for (std::int64_t j = 0; j < 3 * H; ++j) bw_.grad.data()[j] += s[std::size_t(j)];
  be.column_sums(dc.view(), s.data());
  for (std::int64_t j = 0; j < 3 * H; ++j) bu_.grad.data()[j] += s[std::size_t(j)];
  dx.resize(B, in_);
  be.gemm(false, true, 1.f, da.view(), w_.value.view(), 0.f, dx.view());
  be.gemm(false, true, 1.f, dc.view(), u_.value.view(), 1.f, dh.view());
}

}  // namespace halo

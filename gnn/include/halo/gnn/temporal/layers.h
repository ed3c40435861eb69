// TGN's learnable building blocks with explicit backward, written against the Backend for the
// matrix products (element-wise parts are host loops for now: the memory of a batch's nodes is
// small). Parameters are halo::Param, so the trainer's Adam and checkpoints handle them.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/model.h"

namespace halo {

// Time encoding φ(Δt)[k] = cos(w_k Δt + b_k), w_k = 10^(-9k/(d-1)) at start (TGN/TGAT's
// frequencies, learnable), b = 0.
class TimeEncoder {
 public:
  explicit TimeEncoder(std::int64_t dim);
  // out (n x dim) = φ(dt[i]) for i < n; keeps dt for backward.
  void forward(const double* dt, std::int64_t n, Matrix& out);
  // Adds d(loss)/d(w, b) from d(loss)/d(out) of the last forward.
  void backward(const Matrix& dout);
  std::vector<Param*> params() { return {&w_, &b_}; }
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
  Param w_, b_;
  std::vector<double> dt_;
};

// GRU cell (PyTorch's equations and gate order r, z, n):
//   r = σ(x W_r + b_ir + h U_r + b_hr),  z = σ(x W_z + b_iz + h U_z + b_hz)
//   n = tanh(x W_n + b_in + r ⊙ (h U_n + b_hn)),  h' = (1 − z) ⊙ n + z ⊙ h
// with W = [W_r W_z W_n] (in x 3H) and U (H x 3H) row-major.
class GruCell {
 public:
  GruCell(std::int64_t in, std::int64_t hidden, std::uint64_t seed, std::uint64_t stream);
  // h_out (B x H) from x (B x in) and h (B x H); keeps what backward needs.
  void forward(Backend& be, const MatrixView& x, const MatrixView& h, Matrix& h_out);
  // From dh_out: accumulates the parameter gradients (+=) and writes dx and dh (B x in, B x H).
  void backward(Backend& be, const MatrixView& dh_out, Matrix& dx, Matrix& dh);
  std::vector<Param*> params() { return {&w_, &u_, &bw_, &bu_}; }
  void zero_grad();

 private:
  std::int64_t in_, hid_;
  Param w_, u_, bw_, bu_;
  Matrix x_, h_, a_, c_, r_, z_, n_;  // saved by forward
};

}  // namespace halo

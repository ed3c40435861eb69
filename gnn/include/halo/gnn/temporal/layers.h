// TGN's learnable building blocks with explicit backward, written against the Backend. The time
// encoder and the GRU cell run as Backend ops only (their parameters and saved state live in
// the backend's memory: to_device moves them), so they run on the CPU or the GPU alike; the
// attention's element-wise parts are host loops for now. Parameters are halo::Param, so the
// trainer's Adam and checkpoints handle them.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/model.h"
#include "halo/gnn/param_device.h"
#include "halo/gnn/temporal/cos_sin.h"
#include "halo/gnn/tgat_view.h"

namespace halo {

// Time encoding φ(Δt)[k] = cos(w_k Δt + b_k), w_k = 10^(-9k/(d-1)) at start (TGN/TGAT's
// frequencies, learnable), b = 0.
class TimeEncoder {
 public:
  explicit TimeEncoder(std::int64_t dim);
  // out (n x dim) = φ(dt[i]) for i < n by be's time_encode (dt in host memory; out reallocated
  // in be's memory when it is elsewhere); keeps dt (uploaded when be is a GPU's) and the sines.
  void forward(Backend& be, const double* dt, std::int64_t n, Matrix& out);
  // Adds d(loss)/d(w, b) from d(loss)/d(out) (n x dim) of the last forward, on its backend.
  void backward(Backend& be, const MatrixView& dout);
  // The same on the CPU backend, the parameters in host memory.
  void forward(const double* dt, std::int64_t n, Matrix& out);
  void backward(const Matrix& dout);
  // Moves the parameters and the saved state to memory d (where the backend computes).
  void to_device(Device d);
  std::vector<Param*> params() { return {&w_, &b_}; }
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
  Param w_, b_;
  std::vector<double> dt_;         // the last forward's gaps (host)
  DeviceArray<double> dt_dev_;     // their device copy, when the backend is a GPU's (grows only)
  const double* dt_at_ = nullptr;  // dt_ or dt_dev_: what backward hands the op
  Matrix sin_;  // sin of the forward's arguments: their cos' derivative, for backward
};

// GRU cell (PyTorch's equations and gate order r, z, n):
//   r = σ(x W_r + b_ir + h U_r + b_hr),  z = σ(x W_z + b_iz + h U_z + b_hz)
//   n = tanh(x W_n + b_in + r ⊙ (h U_n + b_hn)),  h' = (1 − z) ⊙ n + z ⊙ h
// with W = [W_r W_z W_n] (in x 3H) and U (H x 3H) row-major. GEMMs, bias adds and the gates
// (gru_gates) are Backend ops, so the cell runs wherever its parameters are (to_device).
class GruCell {
 public:
  GruCell(std::int64_t in, std::int64_t hidden, std::uint64_t seed, std::uint64_t stream);
  // h_out (B x H) from x (B x in) and h (B x H), all in be's memory (h_out reallocated there
  // when it is elsewhere); keeps what backward needs.
  void forward(Backend& be, const MatrixView& x, const MatrixView& h, Matrix& h_out);
  // From dh_out: accumulates the parameter gradients (+=) and writes dx and dh (B x in, B x H;
  // reallocated in be's memory when elsewhere).
  void backward(Backend& be, const MatrixView& dh_out, Matrix& dx, Matrix& dh);
  // Moves the parameters and the saved state to memory d (where the backend computes).
  void to_device(Device d);
  std::vector<Param*> params() { return {&w_, &u_, &bw_, &bu_}; }
  void zero_grad();

 private:
  std::int64_t in_, hid_;
  Param w_, u_, bw_, bu_;
  Matrix x_, h_, a_, c_, rzn_;  // saved by forward (rzn_: the gates r | z | n)
  Matrix da_, dc_, colsum_;     // backward scratch, kept to reuse its memory
};

// TGN's temporal graph attention (TGAT layer): node i at time t attends over its k most recent
// neighbours with multi-head attention (PyTorch's MultiheadAttention with kdim = vdim = dk),
//   query  q_i  = [h_i ‖ φ(0)]                       (dq = dim(h) + dim(φ))
//   key/value kv_ij = [h_j ‖ e_ij ‖ φ(t − t_ij)]     (dk)
//   a_i = MHA(q_i, kv_i·, kv_i·) with padded slots masked (a row without neighbours gives 0),
// then the merger z_i = W2 relu(W1 [a_i ‖ h_i] + b1) + b2 (output dim dout).
// The key/value input of a batch, factored as kv_ij = [nodes[node_ij] ‖ slots_ij]: neighbours
// repeat across a batch's queries (on UCI about 300 distinct nodes fill 4,000 neighbour slots),
// so the node part of the key and value projections is computed once per distinct node, and
// padded slots (no neighbour) are not computed at all. The per-slot part is never projected:
// per head, q·(s W_k) = (q W_kᵀ)·s and Σ_j α_j (s_j W_v) = (Σ_j α_j s_j) W_v, so it is
// folded into one projection per query (P = Q W_kᵀ, and the α-weighted slot sums times W_v):
// about 7x fewer FLOPs than projecting every slot on UCI, the same attention in exact
// arithmetic.
// nodes and slots are in the backend's memory, node on the host (the compact-row bookkeeping is
// the host's, uploaded once per batch when the backend is a GPU's).
struct KeyValueInput {
  MatrixView nodes;                    // U x dn: the distinct neighbours' rows
  const std::int32_t* node = nullptr;  // B * k: row of `nodes` for slot i * k + j; -1 = padded
  MatrixView slots;  // (B * k) x ds, ds = dk - dn: per-slot columns (may be empty)
};

// int32 arrays of one batch for the backend: filled on the host, uploaded in one copy when the
// backend computes in device memory (the buffer grows only).
class IndexUpload {
 public:
  std::vector<std::int32_t>& host() { return host_; }
  // host() in d's memory: the host array itself, or its device copy made now.
  const std::int32_t* place(Device d);

 private:
  struct Free {
    void operator()(void* p) const noexcept;
  };
  std::vector<std::int32_t> host_;
  std::unique_ptr<void, Free> dev_;
  std::size_t dev_capacity_ = 0;  // int32s
};

// A host float buffer that grows and is reused, page-locked when it feeds a GPU (copies from it
// then need no bounce buffer): the staging area of a batch's rows with --memory-on host.
class HostStaging {
 public:
  // At least n floats, in pinned memory when pinned (a GPU reads them); contents unspecified.
  float* reserve(std::size_t n, bool pinned);

 private:
  struct Free {
    bool pinned;
    void operator()(float* p) const noexcept;
  };
  std::unique_ptr<float, Free> p_{nullptr, Free{false}};
  std::size_t capacity_ = 0;  // floats
};

class TemporalAttention {
 public:
  TemporalAttention(std::int64_t dh, std::int64_t dq, std::int64_t dk, std::int64_t dout, int heads,
                    std::uint64_t seed, std::uint64_t stream);
  // q: B x dq; kv: the neighbours of query i in slots i * k .. i * k + k - 1; h: B x dh (the
  // node's own embedding input, for the merger). Writes z (B x dout). Runs as be's ops only:
  // views and parameters in be's memory (to_device), z placed there.
  void forward(Backend& be, const MatrixView& q, const KeyValueInput& kv, int k,
               const MatrixView& h, Matrix& z);
  // From dz: accumulates parameter gradients (+=); writes dq (B x dq), dnodes (U x dn), dslots
  // ((B * k) x ds, zero on padded slots) and dh (B x dh), placed in be's memory.
  void backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dnodes, Matrix& dslots,
                Matrix& dh);
  // The same with dslots written into a view the caller sized ((B * k) x ds, in be's memory):
  // TGN's slot gradients straight into its time codes' gradient rows, without a copy.
  void backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dnodes,
                const MatrixView& dslots, Matrix& dh);
  // The same with kv given whole: (B * k) x dk rows and a valid flag per slot (host memory);
  // dkv likewise.
  void forward(Backend& be, const MatrixView& q, const MatrixView& kv, const std::uint8_t* valid,
               int k, const MatrixView& h, Matrix& z);
  void backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dkv, Matrix& dh);
  std::vector<Param*> params();
  void zero_grad();
  // Moves the parameters (values, gradients, Adam moments) to d's memory, for a backend
  // computing there; the saved activations follow the backend of the next forward.
  void to_device(Device d);

 private:
  // Puts the saved activations and scratch in d's memory (emptied when they are elsewhere).
  // The compact slot rows of a batch of B queries (k_ slots each) and their upload.
  void index_slots(Backend& be, const std::int32_t* node, std::int64_t B);
  void place(Device d);
  // The attention core's operands from what forward saved.
  TgatView core_view();

  std::int64_t dh_, dq_, dk_, dout_;
  int heads_;
  Param wq_, bq_, wk_, bk_, wv_, bv_, wo_, bo_, w1_, b1_, w2_, b2_;
  // Saved by forward.
  int k_ = 0;
  std::int64_t dn_ = 0;              // node columns of kv (the rest are per slot)
  std::vector<std::int32_t> row_;    // slot -> compact row of K and V, -1 = padded
  std::vector<NodeId> slot_node_;    // compact row -> row of nodes
  std::vector<NodeId> slot_of_;      // compact row -> slot
  std::vector<std::int32_t> whole_;  // node index for the whole-kv forward
  // row_, slot_node_, slot_of_ and a has-a-neighbour flag per query, in the backend's memory.
  IndexUpload index_;
  const std::int32_t *d_row_ = nullptr, *d_slot_node_ = nullptr, *d_slot_of_ = nullptr,
                     *d_keep_ = nullptr;
  // Head by head (block h of rows): kheads_/vheads_ W_k's / W_v's per-slot rows over head h's
  // columns, Qh_ the queries' head-h columns, P_ = Qh kheadsᵀ, sbar_ the α-weighted slot sums.
  Matrix q_, nodes_, slots_, h_, Q_, Kn_, Vn_, kheads_, vheads_, Qh_, P_, sbar_, ctxh_, alpha_,
      ctx_, att_, cat_, hid_;
  Matrix dhid_, dcat_, datt_, dctx_, dctxh_, dQ_, dK_, dV_, dKn_, dVn_, dP_, dsbar_, dslices_,
      dslots_empty_, sums_;  // backward scratch (sums_: a bias gradient's column sums)
};

}  // namespace halo

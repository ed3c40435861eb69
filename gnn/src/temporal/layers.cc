// TGN layers: time encoding and GRU cell (Backend ops only), temporal attention; forward and
// explicit backward.
#include "halo/gnn/temporal/layers.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "halo/gnn/device.h"
#include "halo/gnn/param_device.h"
#include "halo/graph/error.h"

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
      p.value.at(i, j) =
          (2.f * philox_uniform(key, std::uint64_t(i), std::uint32_t(j)) - 1.f) * bound;
}

// m reallocated (empty) in memory d when it is elsewhere: for outputs and scratch, whose
// contents the caller overwrites.
void place(Matrix& m, Device d) {
  if (m.device() == d) return;
  m = Matrix();
  m.set_device(d);
}

}  // namespace

TimeEncoder::TimeEncoder(std::int64_t dim)
    : dim_(dim), w_(zero_param(1, dim)), b_(zero_param(1, dim)) {
  w_.name = "time.w";
  b_.name = "time.b";
  for (std::int64_t k = 0; k < dim; ++k)
    w_.value.at(0, k) =
        float(std::pow(10.0, -9.0 * double(k) / double(std::max<std::int64_t>(1, dim - 1))));
}

void TimeEncoder::to_device(Device d) {
  move_param(w_, d);
  move_param(b_, d);
  place(sin_, d);
  dt_at_ = nullptr;
}

void TimeEncoder::forward(Backend& be, const double* dt, std::int64_t n, Matrix& out) {
  dt_.assign(dt, dt + n);
  dt_at_ = dt_.data();
  if (be.device() != Device::kCpu && n > 0) {
    if (std::int64_t(dt_dev_.size()) < n)
      dt_dev_ = DeviceArray<double>(dt, std::size_t(n));
    else
      device_copy(dt_dev_.data(), dt, sizeof(double) * std::size_t(n), CopyKind::kHostToDevice);
    dt_at_ = dt_dev_.data();
  }
  place(out, be.device());
  out.resize(n, dim_);
  place(sin_, be.device());
  sin_.resize(n, dim_);
  be.time_encode(dt_at_, n, w_.value.data(), b_.value.data(), out.view(), sin_.view());
}

void TimeEncoder::backward(Backend& be, const MatrixView& dout) {
  be.time_encode_backward(dt_at_, sin_.view(), dout, w_.grad.data(), b_.grad.data());
}

void TimeEncoder::forward(const double* dt, std::int64_t n, Matrix& out) {
  forward(cpu_backend(), dt, n, out);
}

void TimeEncoder::backward(const Matrix& dout) { backward(cpu_backend(), dout.view()); }

GruCell::GruCell(std::int64_t in, std::int64_t hidden, std::uint64_t seed, std::uint64_t stream)
    : in_(in),
      hid_(hidden),
      w_(zero_param(in, 3 * hidden)),
      u_(zero_param(hidden, 3 * hidden)),
      bw_(zero_param(1, 3 * hidden)),
      bu_(zero_param(1, 3 * hidden)) {
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

void GruCell::to_device(Device d) {
  for (Param* p : params()) move_param(*p, d);
  for (Matrix* m : {&x_, &h_, &a_, &c_, &rzn_, &da_, &dc_, &colsum_}) place(*m, d);
}

void GruCell::forward(Backend& be, const MatrixView& x, const MatrixView& h, Matrix& h_out) {
  const std::int64_t B = x.rows, H = hid_;
  const Device d = be.device();
  for (Matrix* m : {&x_, &h_, &a_, &c_, &rzn_, &h_out}) place(*m, d);
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
  rzn_.resize(B, 3 * H);
  h_out.resize(B, H);
  be.gru_gates(a_.view(), c_.view(), h_.view(), rzn_.view(), h_out.view());
}

void GruCell::backward(Backend& be, const MatrixView& dh_out, Matrix& dx, Matrix& dh) {
  const std::int64_t B = dh_out.rows, H = hid_;
  const Device d = be.device();
  for (Matrix* m : {&da_, &dc_, &colsum_, &dx, &dh}) place(*m, d);
  da_.resize(B, 3 * H);
  dc_.resize(B, 3 * H);
  dh.resize(B, H);
  be.gru_gates_backward(dh_out, h_.view(), c_.view(), rzn_.view(), da_.view(), dc_.view(),
                        dh.view());
  be.gemm(true, false, 1.f, x_.view(), da_.view(), 1.f, w_.grad.view());
  be.gemm(true, false, 1.f, h_.view(), dc_.view(), 1.f, u_.grad.view());
  // Bias gradients: the column sums into a scratch row, then one add (grad += sums in float).
  colsum_.resize(1, 3 * H);
  be.column_sums(da_.view(), colsum_.data());
  be.add(colsum_.view(), bw_.grad.view());
  be.column_sums(dc_.view(), colsum_.data());
  be.add(colsum_.view(), bu_.grad.view());
  dx.resize(B, in_);
  be.gemm(false, true, 1.f, da_.view(), w_.value.view(), 0.f, dx.view());
  be.gemm(false, true, 1.f, dc_.view(), u_.value.view(), 1.f, dh.view());
}

}  // namespace halo

namespace halo {
namespace {

Param linear_weight(std::int64_t in, std::int64_t out, std::uint64_t seed, std::uint64_t stream,
                    const char* name) {
  Param p = zero_param(in, out);
  init_uniform(p, float(1.0 / std::sqrt(double(in))), seed, stream);
  p.name = name;
  return p;
}

Param bias(std::int64_t out, const char* name) {
  Param p = zero_param(1, out);
  p.name = name;
  return p;
}

// Y = X W + b for a row-major X (rows x in).
void linear(Backend& be, const MatrixView& x, const Param& w, const Param& b, Matrix& y) {
  y.resize(x.rows, w.value.cols());
  be.gemm(false, false, 1.f, x, w.value.view(), 0.f, y.view());
  be.add_bias(y.view(), b.value.data());
}

// dW += X^T dY, db += colsum(dY) (summed into `sums` first), dX = dY W^T (when dx is given).
void linear_backward(Backend& be, const MatrixView& x, const MatrixView& dy, Param& w, Param& b,
                     Matrix* dx, Matrix& sums) {
  be.gemm(true, false, 1.f, x, dy, 1.f, w.grad.view());
  sums.resize(1, dy.cols);
  be.column_sums(dy, sums.data());
  be.add(sums.view(), b.grad.view());
  if (dx) {
    dx->resize(dy.rows, w.value.rows());
    be.gemm(false, true, 1.f, dy, w.value.view(), 0.f, dx->view());
  }
}

// Rows [h * n, (h + 1) * n) of m: head h's block.
MatrixView head(Matrix& m, int h, std::int64_t n) {
  return m.view().rows_range(h * n, (h + 1) * n);
}

// m in d's memory: emptied first when it is elsewhere (its contents are about to be written).
void place_matrix(Matrix& m, Device d) {
  if (m.device() == d) return;
  m = Matrix();
  m.set_device(d);
}

}  // namespace

void IndexUpload::Free::operator()(void* p) const noexcept { device_free(p); }

const std::int32_t* IndexUpload::place(Device d) {
  if (d == Device::kCpu) return host_.data();
  if (host_.empty()) return nullptr;
  if (host_.size() > dev_capacity_) {
    dev_.reset();
    dev_capacity_ = 0;  // owns nothing should the allocation throw
    dev_.reset(device_alloc(sizeof(std::int32_t) * host_.size()));
    dev_capacity_ = host_.size();
  }
  // On the default stream, which the backend's blocking stream is ordered with: queued kernels
  // reading the last batch's copy finish before it is overwritten.
  device_copy(dev_.get(), host_.data(), sizeof(std::int32_t) * host_.size(),
              CopyKind::kHostToDevice);
  return static_cast<const std::int32_t*>(dev_.get());
}

void HostStaging::Free::operator()(float* p) const noexcept {
  if (pinned)
    host_pinned_free(p);
  else
    delete[] p;
}

float* HostStaging::reserve(std::size_t n, bool pinned) {
  if (n <= capacity_ && p_.get_deleter().pinned == pinned && p_) return p_.get();
  p_.reset();
  capacity_ = 0;  // owns nothing should the allocation throw
  float* raw =
      pinned ? static_cast<float*>(host_pinned_alloc(sizeof(float) * std::max<std::size_t>(n, 1)))
             : new float[std::max<std::size_t>(n, 1)];
  p_ = std::unique_ptr<float, Free>(raw, Free{pinned});
  capacity_ = n;
  return raw;
}

TemporalAttention::TemporalAttention(std::int64_t dh, std::int64_t dq, std::int64_t dk,
                                     std::int64_t dout, int heads, std::uint64_t seed,
                                     std::uint64_t stream)
    : dh_(dh),
      dq_(dq),
      dk_(dk),
      dout_(dout),
      heads_(heads),
      wq_(linear_weight(dq, dq, seed, stream * 16 + 0, "attn.wq")),
      bq_(bias(dq, "attn.bq")),
      wk_(linear_weight(dk, dq, seed, stream * 16 + 1, "attn.wk")),
      bk_(bias(dq, "attn.bk")),
      wv_(linear_weight(dk, dq, seed, stream * 16 + 2, "attn.wv")),
      bv_(bias(dq, "attn.bv")),
      wo_(linear_weight(dq, dq, seed, stream * 16 + 3, "attn.wo")),
      bo_(bias(dq, "attn.bo")),
      w1_(linear_weight(dq + dh, dout, seed, stream * 16 + 4, "merge.w1")),
      b1_(bias(dout, "merge.b1")),
      w2_(linear_weight(dout, dout, seed, stream * 16 + 5, "merge.w2")),
      b2_(bias(dout, "merge.b2")) {
  if (heads < 1 || dq % heads != 0)
    throw ParamError("attention: the query width must divide into the heads");
}

std::vector<Param*> TemporalAttention::params() {
  return {&wq_, &bq_, &wk_, &bk_, &wv_, &bv_, &wo_, &bo_, &w1_, &b1_, &w2_, &b2_};
}

void TemporalAttention::zero_grad() {
  for (Param* p : params()) p->grad.fill(0.f);
}

void TemporalAttention::to_device(Device d) { move_params(params(), d); }

void TemporalAttention::place(Device d) {
  for (Matrix* m : {&q_,      &nodes_, &slots_, &h_,    &Q_,    &Kn_,    &Vn_,      &kheads_,
                    &vheads_, &Qh_,    &P_,     &sbar_, &ctxh_, &alpha_, &ctx_,     &att_,
                    &cat_,    &hid_,   &dhid_,  &dcat_, &datt_, &dctx_,  &dctxh_,   &dQ_,
                    &dK_,     &dV_,    &dKn_,   &dVn_,  &dP_,   &dsbar_, &dslices_, &dslots_empty_,
                    &sums_})
    place_matrix(*m, d);
}

TgatView TemporalAttention::core_view() {
  TgatView v;
  v.Q = Q_.view();
  v.P = P_.view();
  v.Kn = Kn_.view();
  v.Vn = Vn_.view();
  v.slots = slots_.view();
  v.row = d_row_;
  v.node = d_slot_node_;
  v.bk = bk_.value.data();
  v.heads = heads_;
  v.k = k_;
  return v;
}

// Compact rows: only slots with a neighbour get a key and a value. The indices the ops read go
// up in one upload: row_ (slot -> compact row), slot_node_, slot_of_, then whether each of the
// B queries has a neighbour (rows without one give 0, not the output bias).
void TemporalAttention::index_slots(Backend& be, const std::int32_t* node, std::int64_t B) {
  const int k = k_;
  const std::int64_t slots = B * k;
  row_.assign(static_cast<std::size_t>(slots), -1);
  slot_node_.clear();
  slot_of_.clear();
  for (std::int64_t r = 0; r < slots; ++r)
    if (node[r] >= 0) {
      row_[std::size_t(r)] = std::int32_t(slot_of_.size());
      slot_of_.push_back(NodeId(r));
      slot_node_.push_back(NodeId(node[r]));
    }
  const std::int64_t sv = std::int64_t(slot_of_.size());
  std::vector<std::int32_t>& idx = index_.host();
  idx.assign(row_.begin(), row_.end());
  idx.insert(idx.end(), slot_node_.begin(), slot_node_.end());
  idx.insert(idx.end(), slot_of_.begin(), slot_of_.end());
  for (std::int64_t i = 0; i < B; ++i) {
    bool any = false;
    for (int j = 0; j < k; ++j) any = any || row_[std::size_t(i * k + j)] >= 0;
    idx.push_back(any ? 1 : 0);
  }
  const std::int32_t* base = index_.place(be.device());
  d_row_ = base;
  d_slot_node_ = base + slots;
  d_slot_of_ = base + slots + sv;
  d_keep_ = base + slots + 2 * sv;
}

void TemporalAttention::forward(Backend& be, const MatrixView& q, const KeyValueInput& kv, int k,
                                const MatrixView& h, Matrix& z) {
  const std::int64_t B = q.rows, dhd = dq_ / heads_;
  const std::int64_t dn = kv.nodes.cols, ds = dk_ - dn;
  if (dn > dk_ || (ds > 0 && kv.slots.cols != ds))
    throw ParamError("attention: key/value widths do not add up");
  place(be.device());
  place_matrix(z, be.device());
  k_ = k;
  dn_ = dn;
  index_slots(be, kv.node, B);
  const std::int64_t sv = std::int64_t(slot_of_.size());
  q_.resize(B, dq_);
  be.copy(q, q_.view());
  nodes_.resize(kv.nodes.rows, dn);
  be.copy(kv.nodes, nodes_.view());
  h_.resize(B, dh_);
  be.copy(h, h_.view());
  linear(be, q, wq_, bq_, Q_);
  // K = nodes[node] W_k[:dn] + slots W_k[dn:] + b_k (V alike): the node part once per node.
  Kn_.resize(kv.nodes.rows, dq_);
  Vn_.resize(kv.nodes.rows, dq_);
  be.gemm(false, false, 1.f, nodes_.view(), wk_.value.view().rows_range(0, dn), 0.f, Kn_.view());
  be.gemm(false, false, 1.f, nodes_.view(), wv_.value.view().rows_range(0, dn), 0.f, Vn_.view());
  slots_.resize(sv, ds);
  if (ds > 0) be.gather_rows(kv.slots, d_slot_of_, sv, slots_.view());
  // The per-slot columns folded into the queries: per head P_h = Q_h W_k,hᵀ (row h B + i of P_),
  // so a score is Q_h·(Kn_h + b_k,h) + P_h·s without a per-slot projection.
  const std::int64_t hb = heads_ * B;
  P_.resize(hb, ds);
  sbar_.resize(hb, ds);
  if (ds > 0) {
    kheads_.resize(heads_ * ds, dhd);
    vheads_.resize(heads_ * ds, dhd);
    Qh_.resize(hb, dhd);
    be.split_heads(wk_.value.view().rows_range(dn, dn + ds), heads_, kheads_.view());
    be.split_heads(wv_.value.view().rows_range(dn, dn + ds), heads_, vheads_.view());
    be.split_heads(Q_.view(), heads_, Qh_.view());
    for (int hd = 0; hd < heads_; ++hd)
      be.gemm(false, true, 1.f, head(Qh_, hd, B), head(kheads_, hd, ds), 0.f, head(P_, hd, B));
  }
  alpha_.resize(B * heads_, k);
  ctx_.resize(B, dq_);
  be.tgat_attend(core_view(), bv_.value.data(), alpha_.view(), ctx_.view(), sbar_.view());
  // Σ_j α_j (s_j W_v) = (Σ_j α_j s_j) W_v: one product per query for every slot's values.
  if (ds > 0) {
    ctxh_.resize(hb, dhd);
    for (int hd = 0; hd < heads_; ++hd)
      be.gemm(false, false, 1.f, head(sbar_, hd, B), head(vheads_, hd, ds), 0.f,
              head(ctxh_, hd, B));
    be.merge_heads(ctxh_.view(), heads_, ctx_.view(), true);
  }
  linear(be, ctx_.view(), wo_, bo_, att_);
  be.mask_rows(att_.view(), d_keep_);  // rows without neighbours: 0, not the output bias
  cat_.resize(B, dq_ + dh_);
  be.copy_columns(att_.view(), 0, cat_.view(), 0, dq_, false);
  be.copy_columns(h_.view(), 0, cat_.view(), dq_, dh_, false);
  linear(be, cat_.view(), w1_, b1_, hid_);
  be.relu(hid_.view());
  linear(be, hid_.view(), w2_, b2_, z);
}

void TemporalAttention::backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dnodes,
                                 Matrix& dslots, Matrix& dh) {
  place_matrix(dslots, be.device());
  dslots.resize(dz.rows * k_, dk_ - dn_);
  backward(be, dz, dq, dnodes, dslots.view(), dh);
}

void TemporalAttention::backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dnodes,
                                 const MatrixView& dslots, Matrix& dh) {
  const std::int64_t B = dz.rows, dhd = dq_ / heads_, dn = dn_, ds = dk_ - dn_;
  const int k = k_;
  const std::int64_t sv = std::int64_t(slot_of_.size());
  if (dslots.rows != B * k || dslots.cols != ds)
    throw std::logic_error("attention: the slot gradients' view is not (B * k) x ds");
  for (Matrix* m : {&dq, &dnodes, &dh}) place_matrix(*m, be.device());
  Matrix& dhid = dhid_;
  Matrix& dcat = dcat_;
  linear_backward(be, hid_.view(), dz, w2_, b2_, &dhid, sums_);
  be.relu_backward(hid_.view(), dhid.view());
  linear_backward(be, cat_.view(), dhid.view(), w1_, b1_, &dcat, sums_);
  Matrix& datt = datt_;
  datt.resize(B, dq_);
  dh.resize(B, dh_);
  be.copy_columns(dcat.view(), 0, datt.view(), 0, dq_, false);
  be.mask_rows(datt.view(), d_keep_);
  be.copy_columns(dcat.view(), dq_, dh.view(), 0, dh_, false);
  Matrix& dctx = dctx_;
  linear_backward(be, ctx_.view(), datt.view(), wo_, bo_, &dctx, sums_);
  Matrix &dQ = dQ_, &dK = dK_, &dV = dV_;
  const std::int64_t hb = heads_ * B;
  // Through ctx_h += sbar_h W_v,h: the slot sums' gradient.
  dsbar_.resize(hb, ds);
  if (ds > 0) {
    dctxh_.resize(hb, dhd);
    be.split_heads(dctx.view(), heads_, dctxh_.view());
    for (int h = 0; h < heads_; ++h)
      be.gemm(false, true, 1.f, head(dctxh_, h, B), head(vheads_, h, ds), 0.f, head(dsbar_, h, B));
  }
  dQ.resize(B, dq_);
  dK.resize(sv, dq_);  // per compact row
  dV.resize(sv, dq_);
  dP_.resize(hb, ds);
  // Scores, softmax and the node parts' gradients per compact row; b_k's gradient, per query
  // rather than per slot (Σ_slots g Q_i = Σ_i (Σ_j g_j) Q_i), straight into its gradient.
  be.tgat_attend_backward(core_view(), alpha_.view(), dctx.view(), dsbar_.view(), dQ.view(),
                          dK.view(), dV.view(), dP_.view(), dslots, bk_.grad.data());
  if (ds > 0) {
    // Through P_h = Q_h W_k,hᵀ and ctx_h += sbar_h W_v,h: the queries and W_k's, W_v's slot rows.
    ctxh_.resize(hb, dhd);
    for (int h = 0; h < heads_; ++h)
      be.gemm(false, false, 1.f, head(dP_, h, B), head(kheads_, h, ds), 0.f, head(ctxh_, h, B));
    be.merge_heads(ctxh_.view(), heads_, dQ.view(), true);
    dslices_.resize(heads_ * ds, dhd);
    for (int h = 0; h < heads_; ++h)
      be.gemm(true, false, 1.f, head(dP_, h, B), head(Qh_, h, B), 0.f, head(dslices_, h, ds));
    be.merge_heads(dslices_.view(), heads_, wk_.grad.view().rows_range(dn, dn + ds), true);
    for (int h = 0; h < heads_; ++h)
      be.gemm(true, false, 1.f, head(sbar_, h, B), head(dctxh_, h, B), 0.f, head(dslices_, h, ds));
    be.merge_heads(dslices_.view(), heads_, wv_.grad.view().rows_range(dn, dn + ds), true);
  }
  linear_backward(be, q_.view(), dQ.view(), wq_, bq_, &dq, sums_);
  // b_v's gradient is Σ_i dctx_i (the weights sum to 1; a row without neighbours has dctx 0).
  sums_.resize(1, dq_);
  be.column_sums(dctx.view(), sums_.data());
  be.add(sums_.view(), bv_.grad.view());
  // The node part: each node's slots summed first, then one row per node.
  const std::int64_t u = nodes_.rows();
  dKn_.resize(u, dq_);
  dVn_.resize(u, dq_);
  be.fill(dKn_.view(), 0.f);
  be.fill(dVn_.view(), 0.f);
  be.scatter_add_rows(dK.view(), d_slot_node_, sv, dKn_.view());
  be.scatter_add_rows(dV.view(), d_slot_node_, sv, dVn_.view());
  be.gemm(true, false, 1.f, nodes_.view(), dKn_.view(), 1.f, wk_.grad.view().rows_range(0, dn));
  be.gemm(true, false, 1.f, nodes_.view(), dVn_.view(), 1.f, wv_.grad.view().rows_range(0, dn));
  dnodes.resize(u, dn);
  be.gemm(false, true, 1.f, dKn_.view(), wk_.value.view().rows_range(0, dn), 0.f, dnodes.view());
  be.gemm(false, true, 1.f, dVn_.view(), wv_.value.view().rows_range(0, dn), 1.f, dnodes.view());
}

void TemporalAttention::forward(Backend& be, const MatrixView& q, const MatrixView& kv,
                                const std::uint8_t* valid, int k, const MatrixView& h, Matrix& z) {
  // Every slot its own node: the factored path with U = B * k and no per-slot columns.
  whole_.resize(static_cast<std::size_t>(kv.rows));
  for (std::int64_t r = 0; r < kv.rows; ++r)
    whole_[std::size_t(r)] = valid[r] ? std::int32_t(r) : -1;
  KeyValueInput in;
  in.nodes = kv;
  in.node = whole_.data();
  forward(be, q, in, k, h, z);
}

void TemporalAttention::backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dkv,
                                 Matrix& dh) {
  backward(be, dz, dq, dkv, dslots_empty_, dh);
}

}  // namespace halo

// TGN layers: time encoding and GRU cell (Backend ops only), temporal attention; forward and
// explicit backward.
#include "halo/gnn/temporal/layers.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <utility>

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

void move_param(Param& p, Device d) {
  for (Matrix* m : {&p.value, &p.grad, &p.m, &p.v}) {
    if (m->device() == d) continue;
    Matrix moved(m->rows(), m->cols(), 0.f, d);
    moved.assign(m->to_host());
    *m = std::move(moved);
  }
}

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

// dW += X^T dY, db += colsum(dY), dX = dY W^T (when dx is given).
void linear_backward(Backend& be, const MatrixView& x, const MatrixView& dy, Param& w, Param& b,
                     Matrix* dx) {
  be.gemm(true, false, 1.f, x, dy, 1.f, w.grad.view());
  std::vector<float> s(std::size_t(dy.cols));
  be.column_sums(dy, s.data());
  for (std::int64_t j = 0; j < dy.cols; ++j) b.grad.data()[j] += s[std::size_t(j)];
  if (dx) {
    dx->resize(dy.rows, w.value.rows());
    be.gemm(false, true, 1.f, dy, w.value.view(), 0.f, dx->view());
  }
}

// a · b over n floats.
inline float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// y += a x over n floats.
inline void axpy(float a, const float* x, float* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) y[c] += a * x[c];
}

// W's rows [dn, dn + ds), head by head: out row h * ds + c is W[dn + c] over head h's columns
// ((heads * ds) x dhd), so each head's product is a plain GEMM.
void head_slices(const Matrix& w, std::int64_t dn, std::int64_t ds, int heads, Matrix& out) {
  const std::int64_t dq = w.cols(), dhd = dq / heads;
  out.resize(heads * ds, dhd);
  for (int h = 0; h < heads; ++h)
    for (std::int64_t c = 0; c < ds; ++c)
      std::copy_n(w.row(dn + c) + h * dhd, dhd, out.row(h * ds + c));
}

// grad's rows [dn, dn + ds) += d, laid out as head_slices makes them.
void add_head_slices(const Matrix& d, std::int64_t dn, std::int64_t ds, int heads, Matrix& grad) {
  const std::int64_t dhd = grad.cols() / heads;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t c = 0; c < ds; ++c) {
      const float* src = d.row(h * ds + c);
      float* dst = grad.row(dn + c) + h * dhd;
      for (std::int64_t j = 0; j < dhd; ++j) dst[j] += src[j];
    }
}

// x (B x heads * w) head by head: out row h * B + i is row i's head-h columns ((heads * B) x w).
void split_heads(const Matrix& x, int heads, Matrix& out) {
  const std::int64_t B = x.rows(), w = x.cols() / heads;
  out.resize(heads * B, w);
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < B; ++i) std::copy_n(x.row(i) + h * w, w, out.row(h * B + i));
}

// out (B x heads * w) += x laid out as split_heads makes it.
void add_heads(const Matrix& x, int heads, Matrix& out) {
  const std::int64_t B = out.rows(), w = out.cols() / heads;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < B; ++i) {
      const float* src = x.row(h * B + i);
      float* dst = out.row(i) + h * w;
      for (std::int64_t c = 0; c < w; ++c) dst[c] += src[c];
    }
}

// Rows [h * n, (h + 1) * n) of m: head h's block.
MatrixView head(Matrix& m, int h, std::int64_t n) {
  return m.view().rows_range(h * n, (h + 1) * n);
}

}  // namespace

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

void TemporalAttention::forward(Backend& be, const MatrixView& q, const KeyValueInput& kv, int k,
                                const MatrixView& h, Matrix& z) {
  const std::int64_t B = q.rows, dhd = dq_ / heads_, slots = B * k;
  const std::int64_t dn = kv.nodes.cols, ds = dk_ - dn;
  if (dn > dk_ || (ds > 0 && kv.slots.cols != ds))
    throw ParamError("attention: key/value widths do not add up");
  k_ = k;
  dn_ = dn;
  // Compact rows: only slots with a neighbour get a key and a value.
  row_.assign(static_cast<std::size_t>(slots), -1);
  slot_node_.clear();
  slot_of_.clear();
  for (std::int64_t r = 0; r < slots; ++r)
    if (kv.node[r] >= 0) {
      row_[std::size_t(r)] = std::int32_t(slot_of_.size());
      slot_of_.push_back(NodeId(r));
      slot_node_.push_back(NodeId(kv.node[r]));
    }
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
  if (ds > 0) be.gather_rows(kv.slots, slot_of_.data(), sv, slots_.view());
  // The per-slot columns folded into the queries: per head P_h = Q_h W_k,hᵀ (row h B + i of P_),
  // so a score is Q_h·(Kn_h + b_k,h) + P_h·s without a per-slot projection.
  const std::int64_t hb = heads_ * B;
  P_.resize(hb, ds);
  sbar_.resize(hb, ds);
  sbar_.fill(0.f);
  if (ds > 0) {
    head_slices(wk_.value, dn, ds, heads_, kheads_);
    head_slices(wv_.value, dn, ds, heads_, vheads_);
    split_heads(Q_, heads_, Qh_);
    for (int hd = 0; hd < heads_; ++hd)
      be.gemm(false, true, 1.f, head(Qh_, hd, B), head(kheads_, hd, ds), 0.f, head(P_, hd, B));
  }
  alpha_.resize(B * heads_, k);
  ctx_.resize(B, dq_);
  ctx_.fill(0.f);
  const float scale = float(1.0 / std::sqrt(double(dhd)));
  const float* bk = bk_.value.data();
  const float* bv = bv_.value.data();
#pragma omp parallel for schedule(static) if (B * k * dq_ > 16384)
  for (std::int64_t i = 0; i < B; ++i)
    for (int hd = 0; hd < heads_; ++hd) {
      float* a = alpha_.data() + (i * heads_ + hd) * k;
      const std::int32_t* rows = row_.data() + i * k;
      const float* qi = Q_.row(i) + hd * dhd;
      const float* pi = P_.row(hd * B + i);
      const float qb = dot(qi, bk + hd * dhd, dhd);
      float mx = -1e30f;
      bool any = false;
      for (int j = 0; j < k; ++j) {
        a[j] = 0.f;
        if (rows[j] < 0) continue;
        const std::int64_t c = rows[j];
        float s = dot(qi, Kn_.row(slot_node_[std::size_t(c)]) + hd * dhd, dhd) + qb;
        if (ds > 0) s += dot(pi, slots_.row(c), ds);
        a[j] = s * scale;
        mx = any ? std::max(mx, a[j]) : a[j];
        any = true;
      }
      if (!any) continue;  // no neighbours: the attention output stays 0
      double sum = 0;
      for (int j = 0; j < k; ++j)
        if (rows[j] >= 0) sum += (a[j] = std::exp(a[j] - mx));
      float* ci = ctx_.row(i) + hd * dhd;
      float* si = sbar_.row(hd * B + i);
      for (int j = 0; j < k; ++j) {
        a[j] = rows[j] >= 0 ? float(a[j] / sum) : 0.f;
        if (rows[j] < 0) continue;
        const std::int64_t c = rows[j];
        axpy(a[j], Vn_.row(slot_node_[std::size_t(c)]) + hd * dhd, ci, dhd);
        if (ds > 0) axpy(a[j], slots_.row(c), si, ds);
      }
      for (std::int64_t c = 0; c < dhd; ++c) ci[c] += bv[hd * dhd + c];  // the weights sum to 1
    }
  // Σ_j α_j (s_j W_v) = (Σ_j α_j s_j) W_v: one product per query for every slot's values.
  if (ds > 0) {
    ctxh_.resize(hb, dhd);
    for (int hd = 0; hd < heads_; ++hd)
      be.gemm(false, false, 1.f, head(sbar_, hd, B), head(vheads_, hd, ds), 0.f,
              head(ctxh_, hd, B));
    add_heads(ctxh_, heads_, ctx_);
  }
  linear(be, ctx_.view(), wo_, bo_, att_);
  for (std::int64_t i = 0; i < B; ++i) {  // rows without neighbours: 0, not the output bias
    bool any = false;
    for (int j = 0; j < k; ++j) any = any || row_[std::size_t(i * k + j)] >= 0;
    if (!any)
      for (std::int64_t c = 0; c < dq_; ++c) att_.at(i, c) = 0.f;
  }
  cat_.resize(B, dq_ + dh_);
#pragma omp parallel for schedule(static) if (B * (dq_ + dh_) > 16384)
  for (std::int64_t i = 0; i < B; ++i) {
    for (std::int64_t c = 0; c < dq_; ++c) cat_.at(i, c) = att_.at(i, c);
    for (std::int64_t c = 0; c < dh_; ++c) cat_.at(i, dq_ + c) = h_.at(i, c);
  }
  linear(be, cat_.view(), w1_, b1_, hid_);
  be.relu(hid_.view());
  linear(be, hid_.view(), w2_, b2_, z);
}

void TemporalAttention::backward(Backend& be, const MatrixView& dz, Matrix& dq, Matrix& dnodes,
                                 Matrix& dslots, Matrix& dh) {
  const std::int64_t B = dz.rows, dhd = dq_ / heads_, dn = dn_, ds = dk_ - dn_;
  const int k = k_;
  const std::int64_t sv = std::int64_t(slot_of_.size());
  Matrix& dhid = dhid_;
  Matrix& dcat = dcat_;
  linear_backward(be, hid_.view(), dz, w2_, b2_, &dhid);
  be.relu_backward(hid_.view(), dhid.view());
  linear_backward(be, cat_.view(), dhid.view(), w1_, b1_, &dcat);
  Matrix& datt = datt_;
  datt.resize(B, dq_);
  dh.resize(B, dh_);
  for (std::int64_t i = 0; i < B; ++i) {
    bool any = false;
    for (int j = 0; j < k; ++j) any = any || row_[std::size_t(i * k + j)] >= 0;
    for (std::int64_t c = 0; c < dq_; ++c) datt.at(i, c) = any ? dcat.at(i, c) : 0.f;
    for (std::int64_t c = 0; c < dh_; ++c) dh.at(i, c) = dcat.at(i, dq_ + c);
  }
  Matrix& dctx = dctx_;
  linear_backward(be, ctx_.view(), datt.view(), wo_, bo_, &dctx);
  Matrix &dQ = dQ_, &dK = dK_, &dV = dV_;
  const std::int64_t hb = heads_ * B;
  // Through ctx_h += sbar_h W_v,h: the slot sums' gradient.
  dsbar_.resize(hb, ds);
  if (ds > 0) {
    split_heads(dctx, heads_, dctxh_);
    for (int h = 0; h < heads_; ++h)
      be.gemm(false, true, 1.f, head(dctxh_, h, B), head(vheads_, h, ds), 0.f, head(dsbar_, h, B));
  }
  dQ.resize(B, dq_);
  dQ.fill(0.f);
  dK.resize(sv, dq_);  // per compact row: every head's columns written below
  dV.resize(sv, dq_);
  dP_.resize(hb, ds);
  dP_.fill(0.f);
  dslots.resize(B * k, ds);  // slot i * k + j is query i's: written by its thread only
  dslots.fill(0.f);
  gsum_.assign(static_cast<std::size_t>(B * heads_), 0.0);
  const float scale = float(1.0 / std::sqrt(double(dhd)));
  const float* bk = bk_.value.data();
#pragma omp parallel if (B * k * dq_ > 16384)
  {
    std::vector<float> da(static_cast<std::size_t>(k));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < B; ++i)
      for (int hd = 0; hd < heads_; ++hd) {
        const float* a = alpha_.data() + (i * heads_ + hd) * k;
        const std::int32_t* rows = row_.data() + i * k;
        const float* gi = dctx.row(i) + hd * dhd;
        const float* gs = dsbar_.row(hd * B + i);
        const float* qi = Q_.row(i) + hd * dhd;
        const float* pi = P_.row(hd * B + i);
        float* dqi = dQ.row(i) + hd * dhd;
        float* dpi = dP_.row(hd * B + i);
        // d alpha_j = dctx · V_j (node part, slot part through sbar; the bias is the same for
        // every j and drops out of the softmax); ds_j = a_j (dalpha_j − Σ a dalpha).
        double sum = 0;
        for (int j = 0; j < k; ++j) {
          da[std::size_t(j)] = 0.f;
          if (rows[j] < 0) continue;
          const std::int64_t c = rows[j];
          float s = dot(gi, Vn_.row(slot_node_[std::size_t(c)]) + hd * dhd, dhd);
          if (ds > 0) {
            s += dot(gs, slots_.row(c), ds);
            axpy(a[j], gs, dslots.row(i * k + j), ds);
          }
          float* dv = dV.row(c) + hd * dhd;
          for (std::int64_t e = 0; e < dhd; ++e) dv[e] = a[j] * gi[e];
          da[std::size_t(j)] = s;
          sum += double(a[j]) * s;
        }
        for (int j = 0; j < k; ++j) {
          if (rows[j] < 0) continue;
          const std::int64_t c = rows[j];
          const float g = a[j] * (da[std::size_t(j)] - float(sum)) * scale;
          gsum_[std::size_t(i * heads_ + hd)] += double(g);
          const float* kn = Kn_.row(slot_node_[std::size_t(c)]) + hd * dhd;
          for (std::int64_t e = 0; e < dhd; ++e) dqi[e] += g * (kn[e] + bk[hd * dhd + e]);
          float* dk = dK.row(c) + hd * dhd;
          for (std::int64_t e = 0; e < dhd; ++e) dk[e] = g * qi[e];
          if (ds > 0) {
            axpy(g, slots_.row(c), dpi, ds);
            axpy(g, pi, dslots.row(i * k + j), ds);
          }
        }
      }
  }
  if (ds > 0) {
    // Through P_h = Q_h W_k,hᵀ and ctx_h += sbar_h W_v,h: the queries and W_k's, W_v's slot rows.
    ctxh_.resize(hb, dhd);
    for (int h = 0; h < heads_; ++h)
      be.gemm(false, false, 1.f, head(dP_, h, B), head(kheads_, h, ds), 0.f, head(ctxh_, h, B));
    add_heads(ctxh_, heads_, dQ);
    dslices_.resize(heads_ * ds, dhd);
    for (int h = 0; h < heads_; ++h)
      be.gemm(true, false, 1.f, head(dP_, h, B), head(Qh_, h, B), 0.f, head(dslices_, h, ds));
    add_head_slices(dslices_, dn, ds, heads_, wk_.grad);
    for (int h = 0; h < heads_; ++h)
      be.gemm(true, false, 1.f, head(sbar_, h, B), head(dctxh_, h, B), 0.f, head(dslices_, h, ds));
    add_head_slices(dslices_, dn, ds, heads_, wv_.grad);
  }
  linear_backward(be, q_.view(), dQ.view(), wq_, bq_, &dq);
  // The biases, per query rather than per slot: b_k's gradient is Σ_slots g Q_i = Σ_i (Σ_j g_j)
  // Q_i, and b_v's is Σ_i dctx_i (the weights sum to 1; a row without neighbours has dctx 0).
  std::vector<double> acc(static_cast<std::size_t>(dq_), 0.0);
  for (std::int64_t i = 0; i < B; ++i)
    for (int hd = 0; hd < heads_; ++hd) {
      const double g = gsum_[std::size_t(i * heads_ + hd)];
      const float* qi = Q_.row(i) + hd * dhd;
      for (std::int64_t e = 0; e < dhd; ++e) acc[std::size_t(hd * dhd + e)] += g * double(qi[e]);
    }
  for (std::int64_t j = 0; j < dq_; ++j) bk_.grad.data()[j] += float(acc[std::size_t(j)]);
  std::vector<float> cs(static_cast<std::size_t>(dq_));
  be.column_sums(dctx.view(), cs.data());
  for (std::int64_t j = 0; j < dq_; ++j) bv_.grad.data()[j] += cs[std::size_t(j)];
  // The node part: each node's slots summed first, then one row per node.
  const std::int64_t u = nodes_.rows();
  dKn_.resize(u, dq_);
  dVn_.resize(u, dq_);
  dKn_.fill(0.f);
  dVn_.fill(0.f);
  be.scatter_add_rows(dK.view(), slot_node_.data(), sv, dKn_.view());
  be.scatter_add_rows(dV.view(), slot_node_.data(), sv, dVn_.view());
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

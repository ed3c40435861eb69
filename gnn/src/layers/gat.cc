// GAT layers (Velickovic et al. 2018) of Model: construction, forward, explicit backward and the
// memory they hold. gat.h has the layer's equations and memory plan; attention.h the kernels'.
//
// Partitioned runs: Z's halo rows arrive through the exchange, and each rank computes el for them
// from those rows (the same bits their owners compute), so no attention term travels. Backward
// sends d(Z)'s halo rows home, d(el) of halo columns included. The attention vectors' gradients
// are partial sums over every column a rank sees; the trainer sums them across ranks like any
// parameter gradient, which makes them the one-process sums. Attention dropout is keyed by the
// global ids of both ends of an edge, so K ranks draw one process's masks.
#include "layers/gat.h"

#include <algorithm>
#include <string>

namespace halo {

using model_util::dropout_key;
using model_util::glorot;
using model_util::make_param;
using model_util::reserve;
using model_util::shape;

namespace {

// Attention dropout's key slot: after the feature dropouts' slots (0 .. layers <= 31).
constexpr int kAttentionSlot = 32;

}  // namespace

void Model::gat_init(std::uint64_t seed) {
  gat_work_ = std::make_unique<GatWork>();
  GatWork& ws = *gat_work_;
  for (Matrix* m : {&ws.edge, &ws.concat, &ws.dz, &ws.del, &ws.der, &ws.grad, &ws.logits, &x_drop_})
    m->set_device(device_);
  const ModelConfig& c = config_;
  for (int l = 0; l < c.layers; ++l) {
    auto L = std::make_unique<GatLayer>();
    L->index = l;
    L->last = l + 1 == c.layers;
    L->heads = L->last ? c.out_heads : c.heads;
    L->width = L->last ? c.out : c.hidden;
    L->in = l == 0 ? c.in : std::int64_t(c.heads) * c.hidden;
    const std::int64_t hf = L->heads * L->width;
    L->out = L->last ? L->width : hf;
    L->residual = c.residual;
    L->res_proj = c.residual && L->in != hf;
    const std::string pre = "layer" + std::to_string(l) + ".";
    const auto stream = std::uint64_t(l) * 4;
    L->w = make_param(pre + "weight", glorot(L->in, hf, seed, stream, device_));
    L->a_src = make_param(pre + "att_src", glorot(L->heads, L->width, seed, stream + 1, device_));
    L->a_dst = make_param(pre + "att_dst", glorot(L->heads, L->width, seed, stream + 2, device_));
    if (L->res_proj)
      L->w_res = make_param(pre + "res_weight", glorot(L->in, hf, seed, stream + 3, device_));
    L->b = make_param(pre + "bias", Matrix(1, L->out, 0.f, device_));
    if (L->last && L->heads > 1) {
      std::vector<float> m(std::size_t(hf * L->width), 0.f);
      for (std::int64_t h = 0; h < L->heads; ++h)
        for (std::int64_t f = 0; f < L->width; ++f)
          m[std::size_t((h * L->width + f) * L->width + f)] = 1.f / float(L->heads);
      L->head_mean = Matrix(hf, L->width, 0.f, device_);
      L->head_mean.assign(m);
    }
    for (Matrix* m : {&L->z, &L->el, &L->er, &L->alpha, &L->out_kept}) m->set_device(device_);
    gat_.push_back(std::move(L));
  }
}

MatrixView Model::gat_forward(Backend& be, const GraphContext& g, const MatrixView& x,
                              bool training, std::uint64_t seed, std::int64_t epoch,
                              const LayerSink& sink) {
  const ModelConfig& c = config_;
  GatWork& ws = *gat_work_;
  const AttentionView& A = g.attention;
  if (A.rows != g.owned || A.cols != g.all)
    throw std::logic_error("Model::forward: --model gat needs GraphContext::attention");
  MatrixView h = x;  // after input dropout (Model::forward)
  std::int64_t max_heads = 1;
  for (const auto& L : gat_) max_heads = std::max(max_heads, L->heads);
  reserve(ws.edge, A.nnz * max_heads);
  const GatLayer& top = *gat_.back();
  reserve(ws.concat, top.heads > 1 ? g.owned * top.heads * top.width : 0);
  reserve(ws.logits, g.owned * top.out);
  for (auto& L : gat_) {
    const std::int64_t hf = L->heads * L->width;
    L->z.resize(g.all, hf);
    L->el.resize(g.all, L->heads);
    L->er.resize(g.owned, L->heads);
    L->alpha.resize(A.nnz, L->heads);
    if (!L->last) reserve(L->out_kept, g.all * hf);  // backward puts d(Z) there, halo rows too
  }
  for (auto& Lp : gat_) {
    GatLayer& L = *Lp;
    const std::int64_t hf = L.heads * L.width;
    const MatrixView z = L.z.view();
    be.gemm(false, false, 1.f, h, L.w.value.view(), 0.f, z.rows_range(0, g.owned));
    if (g.exchange) {
      g.exchange->forward_begin(z, L.index, training);
      g.exchange->forward_end();
    }
    be.gat_head_dots(z, L.a_src.value.view(), L.el.view());
    be.gat_head_dots(z.rows_range(0, g.owned), L.a_dst.value.view(), L.er.view());
    be.gat_edge_softmax(A, L.el.view(), L.er.view(), c.negative_slope, L.alpha.view());
    MatrixView att = L.alpha.view();
    if (training && c.attn_dropout > 0) {
      att = shape(ws.edge, A.nnz, L.heads);
      be.copy(L.alpha.view(), att);
      be.gat_edge_dropout(A, att, c.attn_dropout,
                          dropout_key(seed, epoch, kAttentionSlot + L.index), g.global_ids);
    }
    const bool mean = L.last && L.heads > 1;
    const MatrixView o = !L.last ? shape(L.out_kept, g.owned, hf)
                         : mean  ? shape(ws.concat, g.owned, hf)
                                 : shape(ws.logits, g.owned, hf);
    be.gat_aggregate(A, att, z, o);
    if (L.res_proj)
      be.gemm(false, false, 1.f, h, L.w_res.value.view(), 1.f, o);
    else if (L.residual)
      be.add(h, o);
    if (L.last) {
      const MatrixView y = shape(ws.logits, g.owned, L.out);
      if (mean) be.gemm(false, false, 1.f, o, L.head_mean.view(), 0.f, y);
      be.add_bias(y, L.b.value.data());
      if (sink) sink(L.index, y);
      return y;
    }
    be.add_bias(o, L.b.value.data());
    be.elu(o);
    if (training && c.dropout > 0)
      be.dropout(o, c.dropout, dropout_key(seed, epoch, L.index + 1), g.global_ids);
    if (sink) sink(L.index, o);
    h = o;
  }
  throw std::logic_error("Model::forward: a GAT model without layers");
}

// gat_forward with training = false, its calls in its order, on views of infer's rotating slabs;
// el, er and alpha hold one layer's terms at a time.
MatrixView Model::gat_infer(Backend& be, const GraphContext& g, const MatrixView& x,
                            const LayerSink& sink, const std::function<void()>& input_read) {
  const ModelConfig& c = config_;
  InferWork& iw = *infer_;
  const AttentionView& A = g.attention;
  if (A.rows != g.owned || A.cols != g.all)
    throw std::logic_error("Model::infer: --model gat needs GraphContext::attention");
  MatrixView h = x;
  int hs = -1;  // the slab h is in (-1: the caller's x)
  for (auto& Lp : gat_) {
    GatLayer& L = *Lp;
    const std::int64_t hf = L.heads * L.width;
    int zs = -1;
    const MatrixView z = iw.take(g.all, hf, zs, {hs});
    be.gemm(false, false, 1.f, h, L.w.value.view(), 0.f, z.rows_range(0, g.owned));
    // x's last read in layer 0: this transform, or the residual below.
    const bool first = L.index == 0 && input_read;
    if (first && !L.residual) input_read();
    if (g.exchange) {
      g.exchange->forward_begin(z, L.index, false);
      g.exchange->forward_end();
    }
    reserve(iw.el, g.all * L.heads);
    reserve(iw.er, g.owned * L.heads);
    reserve(iw.alpha, A.nnz * L.heads);
    const MatrixView el = shape(iw.el, g.all, L.heads), er = shape(iw.er, g.owned, L.heads);
    const MatrixView alpha = shape(iw.alpha, A.nnz, L.heads);
    be.gat_head_dots(z, L.a_src.value.view(), el);
    be.gat_head_dots(z.rows_range(0, g.owned), L.a_dst.value.view(), er);
    be.gat_edge_softmax(A, el, er, c.negative_slope, alpha);
    int os = -1;
    const MatrixView o = iw.take(g.owned, hf, os, {zs, L.residual ? hs : -1});
    be.gat_aggregate(A, alpha, z, o);
    if (L.res_proj)
      be.gemm(false, false, 1.f, h, L.w_res.value.view(), 1.f, o);
    else if (L.residual)
      be.add(h, o);
    if (first && L.residual) input_read();
    if (L.last) {
      MatrixView y = o;
      int ys = os;
      if (L.heads > 1) {
        y = iw.take(g.owned, L.out, ys, {os});
        be.gemm(false, false, 1.f, o, L.head_mean.view(), 0.f, y);
      }
      be.add_bias(y, L.b.value.data());
      if (sink) sink(L.index, y);
      return y;
    }
    be.add_bias(o, L.b.value.data());
    be.elu(o);
    if (sink) sink(L.index, o);
    h = o;
    hs = os;
  }
  throw std::logic_error("Model::infer: a GAT model without layers");
}

void Model::gat_backward(Backend& be, const GraphContext& g, const MatrixView& dlogits) {
  const ModelConfig& c = config_;
  GatWork& ws = *gat_work_;
  const AttentionView& A = g.attention;
  std::int64_t widest_in = 0, max_heads = 1;
  for (const auto& L : gat_) {
    if (L->index > 0) widest_in = std::max(widest_in, L->in);
    max_heads = std::max(max_heads, L->heads);
  }
  const GatLayer& top = *gat_.back();
  reserve(ws.dz, g.all * top.heads * top.width);
  reserve(ws.del, g.all * max_heads);
  reserve(ws.der, g.owned * max_heads);
  reserve(ws.grad, g.owned * widest_in);
  MatrixView dy = dlogits;  // the caller's: never modified
  for (int l = int(gat_.size()) - 1; l >= 0; --l) {
    GatLayer& L = *gat_[std::size_t(l)];
    const std::int64_t hf = L.heads * L.width;
    const MatrixView x = l == 0 ? input_ : shape(gat_[std::size_t(l - 1)]->out_kept, g.owned, L.in);
    MatrixView dcat = dy;
    if (L.last) {
      be.column_sums(dy, L.b.grad.data());
      if (L.heads > 1) {
        dcat = shape(ws.concat, g.owned, hf);
        be.gemm(false, true, 1.f, dy, L.head_mean.view(), 0.f, dcat);
      }
    } else {  // dy is this layer's output's gradient, in grad: undo dropout and ELU
      if (c.dropout > 0)
        be.dropout(dy, c.dropout, dropout_key(last_seed_, last_epoch_, L.index + 1), g.global_ids);
      be.elu_backward(shape(L.out_kept, g.owned, hf), dy, 1.f - c.dropout);
      be.column_sums(dy, L.b.grad.data());
    }
    if (L.res_proj) be.gemm(true, false, 1.f, x, dcat, 0.f, L.w_res.grad.view());
    // d(Z) from the aggregation and from the attention logits, then home for the halo rows: in
    // a hidden layer's output slab, dead once its ELU is undone (the layer above read it).
    const MatrixView dz = L.last ? shape(ws.dz, g.all, hf) : shape(L.out_kept, g.all, hf);
    be.fill(dz, 0.f);
    const MatrixView edge = shape(ws.edge, A.nnz, L.heads);
    const PhiloxKey akey = dropout_key(last_seed_, last_epoch_, kAttentionSlot + L.index);
    if (c.attn_dropout > 0) {
      be.copy(L.alpha.view(), edge);  // alpha' again, then its own gradient in its place
      be.gat_edge_dropout(A, edge, c.attn_dropout, akey, g.global_ids);
      be.gat_aggregate_backward(A, edge, L.z.view(), dcat, edge, dz);
      be.gat_edge_dropout(A, edge, c.attn_dropout, akey, g.global_ids);
    } else {
      be.gat_aggregate_backward(A, L.alpha.view(), L.z.view(), dcat, edge, dz);
    }
    const MatrixView del = shape(ws.del, g.all, L.heads), der = shape(ws.der, g.owned, L.heads);
    be.fill(del, 0.f);
    be.fill(der, 0.f);
    be.gat_edge_softmax_backward(A, L.el.view(), L.er.view(), c.negative_slope, L.alpha.view(),
                                 edge, del, der);
    be.fill(L.a_src.grad.view(), 0.f);
    be.fill(L.a_dst.grad.view(), 0.f);
    be.gat_head_dots_backward(L.z.view(), L.a_src.value.view(), del, dz, L.a_src.grad.view());
    be.gat_head_dots_backward(L.z.view().rows_range(0, g.owned), L.a_dst.value.view(), der, dz,
                              L.a_dst.grad.view());
    if (g.exchange) {
      g.exchange->backward_begin(dz, L.index);
      g.exchange->backward_end(dz);
    }
    const MatrixView dz_own = dz.rows_range(0, g.owned);
    be.gemm(true, false, 1.f, x, dz_own, 0.f, L.w.grad.view());
    if (l == 0) break;
    // d(input) into the one gradient slab. A hidden layer's d(out) is there, read only by an
    // identity residual, which the product adds to in place (beta = 1); hidden layers above the
    // first have in = heads * hidden, so they never project their residual.
    const MatrixView dx = shape(ws.grad, g.owned, L.in);
    if (!L.last && L.res_proj)
      throw std::logic_error("Model::backward: a projected hidden residual");
    const bool in_place = !L.last && L.residual;
    be.gemm(false, true, 1.f, dz_own, L.w.value.view(), in_place ? 1.f : 0.f, dx);
    if (L.last && L.res_proj)
      be.gemm(false, true, 1.f, dcat, L.w_res.value.view(), 1.f, dx);
    else if (L.last && L.residual)
      be.add(dcat, dx);
    dy = dx;
  }
}

std::int64_t Model::gat_activation_bytes() const {
  const GatWork& ws = *gat_work_;
  std::int64_t floats = x_drop_.size();
  for (const Matrix* m : {&ws.edge, &ws.concat, &ws.dz, &ws.del, &ws.der, &ws.grad, &ws.logits})
    floats += m->size();
  for (const auto& L : gat_)
    floats += L->z.size() + L->el.size() + L->er.size() + L->alpha.size() + L->out_kept.size();
  return floats * std::int64_t(sizeof(float));
}

}  // namespace halo

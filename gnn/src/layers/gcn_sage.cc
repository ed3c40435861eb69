// GCN and SAGE layers: the Model's forward, inference and explicit backward against the Backend
// (GAT models are handed to gat.cc first). The Model's configuration and set-up are in model.cc.
//
// GCN layer l (input h: owned x in, output owned x out):
//   transform first (out <= in: no more columns to aggregate and to exchange, less kept):
//       T = h W (owned rows) -> exchange -> Y = A T + b
//   aggregate first:
//       X = [h | halo rows] -> exchange -> Z = A X -> Y = Z W + b
// SAGE-mean adds a root term h W_root and aggregates with the mean operator.
// Hidden layers then apply batch norm (optional), ReLU and dropout.
// Backward mirrors it, multiplying by the precomputed transposes and sending halo gradients back.
//
// Memory plan (activations dominate a full-graph run: one N x hidden matrix is 173 MB on
// ogbn-arxiv and 2.5 GB on ogbn-products). Forward keeps exactly one matrix per hidden layer for
// backward, its `saved` slab: batch norm's x-hat, or the layer's output when it has no batch
// norm. A batch-norm layer's output (ReLU and dropout of gamma * x-hat + beta, masks keyed by the
// RNG) is never kept: forward writes it where the next layer reads it, backward takes ReLU's mask
// from x-hat and rebuilds the output, bit for bit, only as the input of the layer above's weight
// gradient. Everything else is transient in shared slabs (T = h W, the gradients between
// layers), and in backward a layer's saved slab, dead once its ReLU and batch norm are undone,
// receives d(T) or d(Z). A 3-layer GCN with batch norm thus peaks at three N x hidden matrices
// (two saved, one gradient) where keeping every intermediate took seven.

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "halo/gnn/model.h"
#include "layers/gat.h"
#include "layers/model_internal.h"

namespace halo {

using model_util::dropout_key;
using model_util::reserve;
using model_util::shape;
using model_util::transforms_first;

namespace {

// Rows [begin, end) of a CSR operator (offsets stay absolute, so the slice is a view).
SparseView row_slice(const SparseView& a, std::int64_t begin, std::int64_t end) {
  return {end - begin, a.cols, a.offsets + begin, a.indices, a.values, a.storage_id};
}

// Y = A X where the halo rows of X (rows [owned, all)) arrive through the exchange: the inner
// rows of Y, which read owned rows only, are aggregated while the halo is in flight. consume: X
// is dead afterwards (the backend may round it in place; one process only, as the halo path
// reads X twice).
void aggregate_with_halo(Backend& be, const GraphContext& g, const SparseView& a,
                         const MatrixView& x_all, const MatrixView& y, int layer, bool training,
                         bool consume) {
  if (!g.exchange) {
    if (consume)
      be.spmm_consume(a, x_all, y);
    else
      be.spmm(a, x_all, y);
    return;
  }
  g.exchange->forward_begin(x_all, layer, training);
  if (g.inner > 0) be.spmm(row_slice(a, 0, g.inner), x_all, y.rows_range(0, g.inner));
  g.exchange->forward_end();
  if (g.inner < g.owned)
    be.spmm(row_slice(a, g.inner, g.owned), x_all, y.rows_range(g.inner, g.owned));
}

// Y = A X for an X of the owned rows only, X living on: with an exchange, [X | halo] is assembled
// in `staged` (all x X.cols) first.
void aggregate_owned(Backend& be, const GraphContext& g, const SparseView& a, const MatrixView& x,
                     const MatrixView& staged, const MatrixView& y, int layer, bool training) {
  MatrixView xa = x;
  if (g.exchange) {
    xa = staged;
    be.copy(x, xa.rows_range(0, g.owned));
  }
  aggregate_with_halo(be, g, a, xa, y, layer, training, /*consume=*/false);
}

// D = A^T dY over [owned | halo] rows, then the halo rows' gradients travel home and are added
// into their owners' rows: the halo rows are computed first and sent while the owned rows are
// computed. On return rows [0, owned) of d hold the complete gradient.
void aggregate_transpose_with_halo(Backend& be, const GraphContext& g, const SparseView& at,
                                   const MatrixView& dy, const MatrixView& d, int layer,
                                   bool consume) {
  if (!g.exchange) {
    if (consume)
      be.spmm_consume(at, dy, d);
    else
      be.spmm(at, dy, d);
    return;
  }
  if (g.all > g.owned) be.spmm(row_slice(at, g.owned, g.all), dy, d.rows_range(g.owned, g.all));
  g.exchange->backward_begin(d, layer);
  be.spmm(row_slice(at, 0, g.owned), dy, d.rows_range(0, g.owned));
  g.exchange->backward_end(d);
}

}  // namespace

bool reads_input_only_aggregated(const ModelConfig& c) {
  return c.kind == ModelKind::kGcn && !(c.input_dropout && c.dropout > 0) &&
         !transforms_first(c.in, c.layers == 1 ? c.out : c.hidden);
}

Matrix aggregate_input(Backend& be, const GraphContext& g, const MatrixView& x) {
  Matrix out(g.owned, x.cols, 0.f, x.device);
  const Matrix staged = g.exchange ? Matrix(g.all, x.cols, 0.f, x.device) : Matrix();
  // Not a training exchange: the halo rows come exactly, whatever the staleness.
  aggregate_owned(be, g, g.gcn.fwd, x, staged.view(), out.view(), /*layer=*/0,
                  /*training=*/false);
  return out;
}

MatrixView Model::Layer::forward(Backend& be, const GraphContext& g, const MatrixView& x,
                                 bool static_x, bool training, float p, std::uint64_t seed,
                                 std::int64_t epoch, float momentum, float eps, Matrix& y_slab,
                                 Work& ws) {
  if (!last)
    ws.y_layer =
        -1;  // a hidden layer overwrites the slab its input came in (the last one does not)
  const OperatorView& op = sage ? g.mean : g.gcn;
  // x lives in the features, a saved slab (this layer's own when the layer below had batch
  // norm), grad[0] (the last layer) or act (SAGE): T and [x | halo] go where x is not, and the
  // pre-activation overwrites x's slab only once x is consumed.
  Matrix& staging = last ? ws.tail : ws.grad[0];
  const MatrixView y = last ? shape(ws.logits, g.owned, out) : shape(saved, g.owned, out);
  if (transform_first) {
    const MatrixView t_all = shape(staging, g.all, out);
    be.gemm(false, false, 1.f, x, w.value.view(), 0.f, t_all.rows_range(0, g.owned));
    aggregate_with_halo(be, g, op.fwd, t_all, y, index, training,
                        /*consume=*/true);  // T is transient
  } else if (index == 0 && g.input_aggregate.data) {
    z_used = g.input_aggregate;  // computed once by the caller: x is not read
    be.gemm(false, false, 1.f, z_used, w.value.view(), 0.f, y);
  } else {
    const Source from{x.data, x.rows, x.cols, g.all, op.fwd.offsets};
    if (!static_x || !(z_from == from)) {
      // Every rank decides alike (same options, same first call), so a skipped exchange is
      // skipped everywhere.
      z.resize(g.owned, in);
      aggregate_owned(be, g, op.fwd, x, g.exchange ? shape(staging, g.all, in) : MatrixView{},
                      z.view(), index, training);
      z_from = static_x ? from : Source{};
    }
    z_used = z.view();
    be.gemm(false, false, 1.f, z_used, w.value.view(), 0.f, y);
  }
  if (sage) be.gemm(false, false, 1.f, x, w_root.value.view(), 1.f, y);
  if (!bn) be.add_bias(y, b.value.data());
  if (last) return y;
  if (!bn) {
    be.relu(y);
    if (training && p > 0) be.dropout(y, p, dropout_key(seed, epoch, index + 1), g.global_ids);
    return y;
  }
  const std::size_t c = std::size_t(out);
  const MatrixView a = shape(y_slab, g.owned, out);
  if (training) {
    std::vector<double> s(2 * c);
    be.column_moments(y, s.data(), s.data() + c);
    if (g.exchange) g.exchange->allreduce(s.data(), std::int64_t(2 * c));
    const double n = double(g.global_nodes);
    for (std::size_t j = 0; j < c; ++j) {
      const double mu = s[j] / n;
      const double var = std::max(0.0, s[c + j] / n - mu * mu);
      mean[j] = float(mu);
      inv_std[j] = float(1.0 / std::sqrt(var + eps));
      run_mean[j] = (1 - momentum) * run_mean[j] + momentum * float(mu);
      run_var[j] = (1 - momentum) * run_var[j] + momentum * float(n > 1 ? var * n / (n - 1) : var);
    }
    // x-hat over the pre-activation, the output into y_slab: rebuild_output repeats the same
    // arithmetic, as (x-hat - 0) * 1 is x-hat exactly.
    if (p > 0) keep_words.resize(std::size_t(g.owned * ((out + 63) / 64)));
    keep = {keep_words.data(), false};  // a new key: record the mask afresh
    be.batch_norm_relu_dropout(y, mean.data(), inv_std.data(), gamma.value.data(),
                               beta.value.data(), &y, a, p, dropout_key(seed, epoch, index + 1),
                               g.global_ids, &keep);
    ws.y_layer = index;
    ws.y = a;
  } else {
    const std::vector<float> rstd = running_rstd(eps);
    be.batch_norm_relu_dropout(y, run_mean.data(), rstd.data(), gamma.value.data(),
                               beta.value.data(), nullptr, a, 0.f, {}, nullptr);
  }
  return a;
}

MatrixView Model::Layer::rebuild_output(Backend& be, const GraphContext& g, float p,
                                        std::uint64_t seed, std::int64_t epoch, Matrix& into) {
  const MatrixView a = shape(into, g.owned, out);
  be.batch_norm_relu_dropout(shape(saved, g.owned, out), zeros.data(), ones.data(),
                             gamma.value.data(), beta.value.data(), nullptr, a, p,
                             dropout_key(seed, epoch, index + 1), g.global_ids, &keep);
  return a;
}

void Model::Layer::activation_backward(Backend& be, const GraphContext& g, const MatrixView& dy,
                                       float p, std::uint64_t seed, std::int64_t epoch) {
  if (last) return;
  const MatrixView kept = shape(saved, g.owned, out);  // x-hat, or the output without batch norm
  if (!bn) {
    if (p > 0) be.dropout(dy, p, dropout_key(seed, epoch, index + 1), g.global_ids);
    be.relu_backward(kept, dy);  // the output is post-dropout: zero where dropped or inactive
    return;
  }
  const std::size_t c = std::size_t(out);
  std::vector<double> s(2 * c);
  be.batch_norm_relu_dropout_backward(kept, gamma.value.data(), beta.value.data(), p,
                                      dropout_key(seed, epoch, index + 1), g.global_ids, dy,
                                      s.data(), s.data() + c, &keep);
  // The parameters' own gradients stay partial (the trainer sums every gradient across ranks
  // once); the normalisation below needs the global sums now.
  std::vector<float> gb(c), gg(c);
  for (std::size_t j = 0; j < c; ++j) {
    gb[j] = float(s[j]);
    gg[j] = float(s[c + j]);
  }
  beta.grad.assign(gb);
  gamma.grad.assign(gg);
  if (g.exchange) g.exchange->allreduce(s.data(), std::int64_t(2 * c));
  std::vector<float> mdy(c), mdyx(c);
  for (std::size_t j = 0; j < c; ++j) {
    mdy[j] = float(s[j] / double(g.global_nodes));
    mdyx[j] = float(s[c + j] / double(g.global_nodes));
  }
  be.batch_norm_backward(dy, kept, gamma.value.data(), inv_std.data(), mdy.data(), mdyx.data(), dy);
}

template <class Input>
MatrixView Model::Layer::linear_backward(Backend& be, const GraphContext& g, const MatrixView& dy,
                                         bool want_dx, Work& ws, int& cur, Input&& input) {
  if (!bn) be.column_sums(dy, b.grad.data());
  const OperatorView& op = sage ? g.mean : g.gcn;
  // The layer's own slab, dead since activation_backward, takes d(T) or d(Z).
  Matrix& spare = last ? ws.tail : saved;
  // dy lives in ws.grad[cur] (or is the caller's, for the last layer) and is read until d(T) or
  // d(Z) is formed; GCN's input is then rebuilt there and its dx written over it. SAGE's root
  // term needs the input, dy and dx at once: the input goes to act, dx to the other grad slab.
  MatrixView dx_root;
  if (sage) {
    const MatrixView x = input(ws.act);
    be.gemm(true, false, 1.f, x, dy, 0.f, w_root.grad.view());
    if (want_dx) {
      dx_root = shape(ws.grad[1 - cur], g.owned, in);
      be.gemm(false, true, 1.f, dy, w_root.value.view(), 0.f, dx_root);
    }
  }
  MatrixView dx;
  if (transform_first) {
    const MatrixView dt = shape(spare, g.all, out);
    // dy is dead once d(T) is formed, except the caller's d(logits).
    aggregate_transpose_with_halo(be, g, op.bwd, dy, dt, index, /*consume=*/!last);
    const MatrixView dt_own = dt.rows_range(0, g.owned);
    be.gemm(true, false, 1.f, input(sage ? ws.act : ws.grad[cur]), dt_own, 0.f, w.grad.view());
    ws.y_layer = -1;  // dx may overwrite it
    if (!want_dx) return {};
    dx = sage ? dx_root : shape(ws.grad[cur], g.owned, in);
    be.gemm(false, true, 1.f, dt_own, w.value.view(), sage ? 1.f : 0.f, dx);
  } else {
    be.gemm(true, false, 1.f, z_used, dy, 0.f, w.grad.view());
    ws.y_layer = -1;
    if (!want_dx) return {};
    const MatrixView dz = shape(spare, g.owned, in);
    be.gemm(false, true, 1.f, dy, w.value.view(), 0.f, dz);
    const MatrixView d_all = shape(ws.grad[cur], g.all, in);
    aggregate_transpose_with_halo(be, g, op.bwd, dz, d_all, index, /*consume=*/true);
    dx = d_all.rows_range(0, g.owned);
    if (sage) {
      be.add(dx, dx_root);
      dx = dx_root;
    }
  }
  if (sage) cur = 1 - cur;
  return dx;
}

MatrixView Model::forward(Backend& be, const GraphContext& g, const MatrixView& x, bool training,
                          std::uint64_t seed, std::int64_t epoch, const LayerSink& sink) {
  MatrixView h = x;
  if (training) {
    last_seed_ = seed;
    last_epoch_ = epoch;
  }
  if (training && config_.input_dropout && config_.dropout > 0) {
    x_drop_.resize(x.rows, x.cols);
    be.copy(x, x_drop_.view());
    be.dropout(x_drop_.view(), config_.dropout, dropout_key(seed, epoch, 0), g.global_ids);
    h = x_drop_.view();
  }
  if (training) input_ = h;
  if (!gat_.empty()) return gat_forward(be, g, h, training, seed, epoch, sink);
  // The memory plan (top of file): every slab at the size of its largest use, before any layer
  // cuts views from it.
  const std::int64_t hidden = config_.hidden, n = config_.layers;
  const bool sage = config_.kind == ModelKind::kSage;
  Work& ws = *work_;
  reserve(ws.grad[0], n > 1 ? g.all * hidden : 0);
  reserve(ws.grad[1], sage && n > 1 ? g.all * hidden : 0);
  reserve(ws.act, sage && config_.batch_norm && n > 1 ? g.owned * hidden : 0);
  reserve(ws.tail, g.all * config_.out);
  reserve(ws.logits, g.owned * config_.out);
  for (auto& L : layers_)
    if (!L->last) reserve(L->saved, g.all * hidden);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    // A batch-norm layer's output goes where the next layer reads it without a conflict: the
    // next hidden layer's own slab (overwritten only once the input is consumed), grad[0] before
    // the last layer, act for SAGE.
    Matrix* y_slab = &ws.act;
    if (!sage) y_slab = l + 2 < layers_.size() ? &layers_[l + 1]->saved : &ws.grad[0];
    const bool static_x = l == 0 && g.static_input && h.data == x.data;  // not after input dropout
    h = layers_[l]->forward(be, g, h, static_x, training, config_.dropout, seed, epoch,
                            config_.bn_momentum, config_.bn_eps, *y_slab, ws);
    if (sink) sink(int(l), h);
  }
  return h;
}

MatrixView Model::InferWork::take(std::int64_t rows, std::int64_t cols, int& at,
                                  std::initializer_list<int> busy) {
  for (int i = 0; i < 3; ++i) {
    if (std::find(busy.begin(), busy.end(), i) != busy.end()) continue;
    reserve(slab[i], floats);
    at = i;
    return shape(slab[i], rows, cols);
  }
  throw std::logic_error("Model::infer: every slab is busy");
}

// The same backend calls as Layer::forward with training = false, in the same order, on views of
// the rotating slabs instead of the layers' kept ones.
MatrixView Model::infer(Backend& be, const GraphContext& g, const MatrixView& x,
                        const LayerSink& sink, const std::function<void()>& input_read) {
  if (!infer_) {
    infer_ = std::make_unique<InferWork>();
    for (Matrix* m : {&infer_->slab[0], &infer_->slab[1], &infer_->slab[2], &infer_->el,
                      &infer_->er, &infer_->alpha})
      m->set_device(device_);
  }
  InferWork& iw = *infer_;
  const ModelConfig& c = config_;
  const bool gat = !gat_.empty();
  iw.floats =
      g.all * std::max({c.in, c.hidden * (gat ? c.heads : 1), c.out * (gat ? c.out_heads : 1)});
  if (gat) return gat_infer(be, g, x, sink, input_read);
  MatrixView h = x;
  int hs = -1;  // the slab h is in (-1: the caller's x)
  for (auto& Lp : layers_) {
    Layer& L = *Lp;
    const OperatorView& op = L.sage ? g.mean : g.gcn;
    const int root = L.sage ? hs : -1;  // SAGE's root term reads h after the aggregation
    // x's last read in layer 0: the transform or the aggregation, or SAGE's root term.
    const auto read = [&] {
      if (L.index == 0 && input_read) input_read();
    };
    MatrixView y;
    int ys = -1;
    if (L.transform_first) {
      int ts = -1;
      const MatrixView t_all = iw.take(g.all, L.out, ts, {hs});
      be.gemm(false, false, 1.f, h, L.w.value.view(), 0.f, t_all.rows_range(0, g.owned));
      if (!L.sage) read();
      y = iw.take(g.owned, L.out, ys, {ts, root});
      aggregate_with_halo(be, g, op.fwd, t_all, y, L.index, false, /*consume=*/true);
    } else {
      MatrixView xa = h;
      int as = hs;
      if (g.exchange) {
        xa = iw.take(g.all, L.in, as, {hs});
        be.copy(h, xa.rows_range(0, g.owned));
      }
      int zs = -1;
      const MatrixView z = iw.take(g.owned, L.in, zs, {as, root});
      aggregate_with_halo(be, g, op.fwd, xa, z, L.index, false, /*consume=*/false);
      if (!L.sage) read();
      y = iw.take(g.owned, L.out, ys, {zs, root});
      be.gemm(false, false, 1.f, z, L.w.value.view(), 0.f, y);
    }
    if (L.sage) {
      be.gemm(false, false, 1.f, h, L.w_root.value.view(), 1.f, y);
      read();
    }
    if (!L.bn) be.add_bias(y, L.b.value.data());
    if (!L.last && !L.bn) be.relu(y);
    if (!L.last && L.bn) {
      int as = -1;
      const MatrixView a = iw.take(g.owned, L.out, as, {ys});
      const std::vector<float> rstd = L.running_rstd(c.bn_eps);
      be.batch_norm_relu_dropout(y, L.run_mean.data(), rstd.data(), L.gamma.value.data(),
                                 L.beta.value.data(), nullptr, a, 0.f, {}, nullptr);
      y = a;
      ys = as;
    }
    if (sink) sink(L.index, y);
    h = y;
    hs = ys;
  }
  return h;
}

void Model::backward(Backend& be, const GraphContext& g, const MatrixView& dlogits) {
  if (!gat_.empty()) return gat_backward(be, g, dlogits);
  // The caller's dlogits must survive: the last layer does not modify its incoming gradient.
  Work& ws = *work_;
  MatrixView d = dlogits;
  int cur = 0;
  for (int l = int(layers_.size()) - 1; l >= 0; --l) {
    Layer& L = *layers_[std::size_t(l)];
    L.activation_backward(be, g, d, config_.dropout, last_seed_, last_epoch_);
    auto input = [&](Matrix& free) -> MatrixView {
      if (l == 0) return input_;
      Layer& below = *layers_[std::size_t(l - 1)];
      if (!below.bn) return shape(below.saved, g.owned, below.out);
      if (ws.y_layer != l - 1) {
        ws.y = below.rebuild_output(be, g, config_.dropout, last_seed_, last_epoch_, free);
        ws.y_layer = l - 1;
      }
      return ws.y;
    };
    d = L.linear_backward(be, g, d, l > 0, ws, cur, input);
  }
}

}  // namespace halo

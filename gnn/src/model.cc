// Model layers: forward and explicit backward against the Backend.
//
// GCN layer l (input h: owned x in, output owned x out):
//   transform first (out <= in: no more columns to aggregate and to exchange, less kept):
//       T = h W (owned rows) -> exchange -> Y = A T + b
//   aggregate first:
//       X = [h | halo rows] -> exchange -> Z = A X -> Y = Z W + b
// SAGE-mean adds a root term h W_root and aggregates with the mean operator.
// Hidden layers then apply batch norm (optional), ReLU and dropout in place.
// Backward mirrors it, multiplying by the precomputed transposes and sending halo gradients back.
#include "halo/gnn/model.h"

#include <cmath>
#include <string>

#include "halo/graph/error.h"

namespace halo {
namespace {

// Glorot-uniform weights, drawn on the host (the same numbers for every device) then placed.
Matrix glorot(std::int64_t in, std::int64_t out, std::uint64_t seed, std::uint64_t stream, Device device) {
  std::vector<float> w(std::size_t(in * out));
  const PhiloxKey key = philox_key(seed, kStreamInit + stream);
  const float a = float(std::sqrt(6.0 / double(in + out)));
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t j = 0; j < out; ++j)
      w[std::size_t(i * out + j)] = (2.f * philox_uniform(key, std::uint64_t(i), std::uint32_t(j)) - 1.f) * a;
  Matrix m(in, out, 0.f, device);
  m.assign(w);
  return m;
}

Param make_param(std::string name, Matrix value) {
  Param p;
  p.name = std::move(name);
  const Device d = value.device();
  p.grad = Matrix(value.rows(), value.cols(), 0.f, d);
  p.m = Matrix(value.rows(), value.cols(), 0.f, d);
  p.v = Matrix(value.rows(), value.cols(), 0.f, d);
  p.value = std::move(value);
  return p;
}

PhiloxKey dropout_key(std::uint64_t seed, std::int64_t epoch, int slot) {
  return philox_key(seed, kStreamDropout + std::uint64_t(epoch) * 64 + std::uint64_t(slot));
}

}  // namespace

void ModelConfig::check() const {
  if (kind != "gcn" && kind != "sage") throw ParamError("unknown --model '" + kind + "' (expected gcn or sage)");
  if (layers < 1) throw ParamError("--layers must be at least 1");
  if (hidden < 1) throw ParamError("--hidden must be at least 1");
  if (in < 1) throw ParamError("the dataset has no node features to train on");
  if (out < 1) throw ParamError("the dataset has no labels to train on");
  if (!(dropout >= 0 && dropout < 1)) throw ParamError("--dropout must be in [0, 1)");
}

struct Model::Layer {
  int index = 0;
  bool last = false;
  bool sage = false;
  bool transform_first = false;
  std::int64_t in = 0, out = 0;
  // b: layers followed by batch norm have none — BN's beta is the bias, and a bias before BN
  // has an exactly-zero gradient whose rounding noise Adam would blow up into real steps (that
  // drift leaks into the running mean and makes evaluation depend on summation order).
  Param w, b, w_root;  // w_root: SAGE only
  bool bn = false;
  Param gamma, beta;
  std::vector<float> run_mean, run_var, mean, inv_std;
  // Saved by forward for backward.
  MatrixView x;   // input (owned x in): the previous layer's output, or the (dropped) features
  Matrix z;       // aggregate first: A X (owned x in)
  Matrix y;       // output (owned x out), after bn / relu / dropout
  Matrix xhat;    // batch norm

  // scratch: shared by all layers, holds transient [owned | halo] rows (T = h W, the input with
  // its halo rows, or their gradients) and dz; sharing it is what keeps peak memory near the
  // activations the backward pass really needs.
  void forward(Backend& be, const GraphContext& g, const MatrixView& in_rows, bool training,
               float p, std::uint64_t seed, std::int64_t epoch, float momentum, float eps,
               Matrix& scratch);
  // dy: gradient at this layer's output (modified). Writes d(input) (owned x in) into dx unless
  // dx is null (first layer).
  void backward(Backend& be, const GraphContext& g, const MatrixView& dy, Matrix* dx, float p,
                std::uint64_t seed, std::int64_t epoch, Matrix& scratch, Matrix& scratch2);
};

namespace {

// Rows [begin, end) of a CSR operator (offsets stay absolute, so the slice is a view).
SparseView row_slice(const SparseView& a, std::int64_t begin, std::int64_t end) {
  return {end - begin, a.cols, a.offsets + begin, a.indices, a.values};
}

// Y = A X where the halo rows of X (rows [owned, all)) arrive through the exchange: the inner
// rows of Y, which read owned rows only, are aggregated while the halo is in flight.
void aggregate_with_halo(Backend& be, const GraphContext& g, const SparseView& a, const MatrixView& x_all,
                         const MatrixView& y, int layer, bool training) {
  if (!g.exchange) {
    be.spmm(a, x_all, y);
    return;
  }
  g.exchange->forward_begin(x_all, layer, training);
  if (g.inner > 0) be.spmm(row_slice(a, 0, g.inner), x_all, y.rows_range(0, g.inner));
  g.exchange->forward_end();
  if (g.inner < g.owned) be.spmm(row_slice(a, g.inner, g.owned), x_all, y.rows_range(g.inner, g.owned));
}

// D = A^T dY over [owned | halo] rows, then the halo rows' gradients travel home and are added
// into their owners' rows: the halo rows are computed first and sent while the owned rows are
// computed. On return rows [0, owned) of d hold the complete gradient.
void aggregate_transpose_with_halo(Backend& be, const GraphContext& g, const SparseView& at, const MatrixView& dy,
                                   const MatrixView& d, int layer) {
  if (!g.exchange) {
    be.spmm(at, dy, d);
    return;
  }
  if (g.all > g.owned) be.spmm(row_slice(at, g.owned, g.all), dy, d.rows_range(g.owned, g.all));
  g.exchange->backward_begin(d, layer);
  be.spmm(row_slice(at, 0, g.owned), dy, d.rows_range(0, g.owned));
  g.exchange->backward_end(d);
}

}  // namespace

void Model::Layer::forward(Backend& be, const GraphContext& g, const MatrixView& in_rows, bool training,
                           float p, std::uint64_t seed, std::int64_t epoch, float momentum, float eps,
                           Matrix& scratch) {
  x = in_rows;
  const OperatorView& op = sage ? g.mean : g.gcn;
  y.resize(g.owned, out);
  if (transform_first) {
    scratch.resize(g.all, out);
    const MatrixView t_all = scratch.view();
    be.gemm(false, false, 1.f, x, w.value.view(), 0.f, t_all.rows_range(0, g.owned));
    aggregate_with_halo(be, g, op.fwd, t_all, y.view(), index, training);
  } else {
    MatrixView xa = x;
    if (g.exchange) {
      scratch.resize(g.all, in);
      be.copy(x, scratch.view().rows_range(0, g.owned));
      xa = scratch.view();
    }
    z.resize(g.owned, in);
    aggregate_with_halo(be, g, op.fwd, xa, z.view(), index, training);
    be.gemm(false, false, 1.f, z.view(), w.value.view(), 0.f, y.view());
  }
  if (sage) be.gemm(false, false, 1.f, x, w_root.value.view(), 1.f, y.view());
  if (!bn) be.add_bias(y.view(), b.value.data());
  if (last) return;
  if (bn) {
    const std::size_t c = std::size_t(out);
    if (training) {
      std::vector<double> s(2 * c);
      be.column_moments(y.view(), s.data(), s.data() + c);
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
      xhat.resize(g.owned, out);
      const MatrixView xh = xhat.view();
      be.batch_norm_apply(y.view(), mean.data(), inv_std.data(), gamma.value.data(), beta.value.data(), &xh, y.view());
    } else {
      std::vector<float> rstd(c);
      for (std::size_t j = 0; j < c; ++j) rstd[j] = float(1.0 / std::sqrt(double(run_var[j]) + eps));
      be.batch_norm_apply(y.view(), run_mean.data(), rstd.data(), gamma.value.data(), beta.value.data(), nullptr, y.view());
    }
  }
  be.relu(y.view());
  if (training && p > 0) be.dropout(y.view(), p, dropout_key(seed, epoch, index + 1), g.global_ids);
}

void Model::Layer::backward(Backend& be, const GraphContext& g, const MatrixView& dy, Matrix* dx, float p,
                            std::uint64_t seed, std::int64_t epoch, Matrix& scratch, Matrix& scratch2) {
  if (!last) {
    if (p > 0) be.dropout(dy, p, dropout_key(seed, epoch, index + 1), g.global_ids);
    be.relu_backward(y.view(), dy);  // y is post-dropout: zero where dropped or inactive
    if (bn) {
      const std::size_t c = std::size_t(out);
      std::vector<double> s(2 * c);
      be.batch_norm_grad_sums(dy, xhat.view(), s.data(), s.data() + c);
      // The parameters' own gradients stay partial (the trainer sums every gradient across
      // ranks once); the normalisation below needs the global sums now.
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
      be.batch_norm_backward(dy, xhat.view(), gamma.value.data(), inv_std.data(), mdy.data(), mdyx.data(), dy);
    }
  }
  if (!bn) be.column_sums(dy, b.grad.data());
  const OperatorView& op = sage ? g.mean : g.gcn;
  // For GCN, dx may be the very buffer dy lives in (the model reuses one gradient buffer for
  // every layer): dy is fully consumed before dx is resized and written below.
  if (sage) {
    be.gemm(true, false, 1.f, x, dy, 0.f, w_root.grad.view());
    if (dx) {  // SAGE's dx is a separate buffer: the root term needs dy first
      dx->resize(g.owned, in);
      be.gemm(false, true, 1.f, dy, w_root.value.view(), 0.f, dx->view());
    }
  }
  if (transform_first) {
    scratch.resize(g.all, out);
    aggregate_transpose_with_halo(be, g, op.bwd, dy, scratch.view(), index);
    const MatrixView dt = scratch.view().rows_range(0, g.owned);
    be.gemm(true, false, 1.f, x, dt, 0.f, w.grad.view());
    if (dx) {
      if (!sage) dx->resize(g.owned, in);
      be.gemm(false, true, 1.f, dt, w.value.view(), sage ? 1.f : 0.f, dx->view());
    }
    return;
  }
  be.gemm(true, false, 1.f, z.view(), dy, 0.f, w.grad.view());
  if (!dx) return;
  const bool direct = !g.exchange && !sage;  // one process: [owned | halo] is just the owned rows
  Matrix& dz = direct ? scratch : scratch2;
  dz.resize(g.owned, in);
  be.gemm(false, true, 1.f, dy, w.value.view(), 0.f, dz.view());
  if (direct) {
    dx->resize(g.owned, in);
    be.spmm(op.bwd, dz.view(), dx->view());
    return;
  }
  scratch.resize(g.all, in);
  aggregate_transpose_with_halo(be, g, op.bwd, dz.view(), scratch.view(), index);
  const MatrixView own = scratch.view().rows_range(0, g.owned);
  if (sage) {
    be.add(own, dx->view());
  } else {
    dx->resize(g.owned, in);
    be.copy(own, dx->view());
  }
}

Model::Model(const ModelConfig& config, std::uint64_t seed, Device device) : config_(config), device_(device) {
  config_.check();
  for (Matrix* m : {&x_drop_, &scratch_, &scratch2_, &grad_[0], &grad_[1]}) m->set_device(device);
  for (int l = 0; l < config_.layers; ++l) {
    auto L = std::make_unique<Layer>();
    L->index = l;
    L->last = l + 1 == config_.layers;
    L->sage = config_.kind == "sage";
    L->in = l == 0 ? config_.in : config_.hidden;
    L->out = L->last ? config_.out : config_.hidden;
    // Transform first when the layer does not widen: the SpMM and the exchange are no wider, and
    // nothing but the input needs keeping for backward (aggregate-first keeps A X as well).
    L->transform_first = L->out <= L->in;
    const std::string pre = "layer" + std::to_string(l) + ".";
    L->w = make_param(pre + "weight", glorot(L->in, L->out, seed, std::uint64_t(l) * 4, device));
    L->b = make_param(pre + "bias", Matrix(1, L->out, 0.f, device));
    if (L->sage) L->w_root = make_param(pre + "root_weight", glorot(L->in, L->out, seed, std::uint64_t(l) * 4 + 1, device));
    L->bn = config_.batch_norm && !L->last;
    if (L->bn) {
      L->gamma = make_param(pre + "bn.weight", Matrix(1, L->out, 1.f, device));
      L->beta = make_param(pre + "bn.bias", Matrix(1, L->out, 0.f, device));
      L->run_mean.assign(std::size_t(L->out), 0.f);
      L->run_var.assign(std::size_t(L->out), 1.f);
      L->mean.assign(std::size_t(L->out), 0.f);
      L->inv_std.assign(std::size_t(L->out), 1.f);
    }
    for (Matrix* m : {&L->z, &L->y, &L->xhat}) m->set_device(device);
    layers_.push_back(std::move(L));
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

MatrixView Model::forward(Backend& be, const GraphContext& g, const MatrixView& x, bool training,
                          std::uint64_t seed, std::int64_t epoch) {
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
  for (auto& L : layers_) {
    L->forward(be, g, h, training, config_.dropout, seed, epoch, config_.bn_momentum, config_.bn_eps, scratch_);
    h = L->y.view();
  }
  return h;
}

void Model::backward(Backend& be, const GraphContext& g, const MatrixView& dlogits) {
  // The caller's dlogits must survive: the last layer does not modify its incoming gradient.
  // GCN layers consume their incoming gradient before writing the outgoing one, so one buffer
  // serves every layer; SAGE needs both at once and ping-pongs between two.
  MatrixView d = dlogits;
  const bool sage = config_.kind == "sage";
  for (int l = int(layers_.size()) - 1; l >= 0; --l) {
    Layer& L = *layers_[std::size_t(l)];
    Matrix* dx = l > 0 ? &grad_[sage ? l % 2 : 0] : nullptr;
    L.backward(be, g, d, dx, config_.dropout, last_seed_, last_epoch_, scratch_, scratch2_);
    if (dx) d = dx->view();
  }
}

std::vector<std::pair<std::string, std::vector<float>*>> Model::buffers() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  for (auto& L : layers_)
    if (L->bn) {
      out.emplace_back(L->gamma.name.substr(0, L->gamma.name.size() - 6) + "running_mean", &L->run_mean);
      out.emplace_back(L->gamma.name.substr(0, L->gamma.name.size() - 6) + "running_var", &L->run_var);
    }
  return out;
}

std::vector<Param*> Model::params() {
  std::vector<Param*> out;
  for (auto& L : layers_) {
    out.push_back(&L->w);
    if (L->sage) out.push_back(&L->w_root);
    if (!L->bn) out.push_back(&L->b);
    if (L->bn) {
      out.push_back(&L->gamma);
      out.push_back(&L->beta);
    }
  }
  return out;
}

}  // namespace halo

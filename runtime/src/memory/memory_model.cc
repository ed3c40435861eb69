// The per-rank memory model (formula in memory_model.h). Every term names the allocation it
// stands for; when the code that allocates changes, the term here must change with it (the
// unit test that trains a small graph and compares its measured peak RSS catches a drift).
//
// What counts, and why:
// - Heap slabs are std::vector-backed and value-initialised when sized, so every byte of them
//   is touched and resident. Vectors that grow keep only their largest size touched (the copy
//   touches the old size, value-initialisation the rest; spare capacity beyond it is never
//   touched), so a buffer resized per layer costs its largest use, plus, at the instant it
//   moves to a larger block, the old block (see Buffer and exchange_peak).
// - Part files are mapped (MAP_PRIVATE, read-only). Their checksums are read with pread into a
//   bounded buffer, so a mapped page becomes resident only when training reads it; the terms
//   below count the arrays training reads, whole (a page holds 1,024 ids or labels, so even a
//   split of 1% of the rows touches nearly every page of the labels).
// - The peak is reached in the first training epoch and held to the end: the model's slabs are
//   sized before its first layer runs and kept across epochs; the operator's construction
//   transients (1/sqrt(degree), the transpose's cursors: 12 bytes per column) are freed before.
#include "halo/runtime/memory/memory_model.h"

#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/partition/parts.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo {
namespace {

constexpr std::int64_t kFloat = 4;   // float32 values, int32 ids (NodeId), int32 labels and degrees
constexpr std::int64_t kOffset = 8;  // int64 CSR offsets (EdgeId)

// One layer as Model's constructor lays it out.
struct LayerShape {
  std::int64_t in = 0, out = 0;
  bool transform_first = false;  // out <= in: T = h W is exchanged and aggregated
  bool bn = false;               // followed by batch norm (hidden layers only)
  // Width of the rows it exchanges: forward, and backward for every layer above layer 0.
  std::int64_t fwd_width() const { return transform_first ? out : in; }
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The split train_rank takes: --split, else default_split's.
template <class Source>
const Split& chosen_split(const Source& d, const std::string& asked,
                          const std::string& partitioned_for, const std::string& where) {
  const std::string name = asked.empty() ? default_split(d.splits, partitioned_for) : asked;
  const Split* s = d.split(name);
  if (!s) throw missing_split(where, name, d.splits);
  return *s;
}

// The model's shape as train_rank derives it from the options and the labels, with the
// trainer's own checks.
template <class Source>
ModelShape checked_model_shape(const TrainOptions& o, const Source& d, const std::string& where) {
  if (d.label_kind == LabelKind::kNone) throw ParamError(where + ": the dataset has no labels");
  if (d.num_features == 0) throw ParamError(where + ": the dataset has no node features");
  const bool multilabel = d.label_kind == LabelKind::kMultilabel;
  const ModelShape m = model_shape(o, multilabel, multilabel ? d.label_cols : d.num_classes);
  TrainOptions checked = o;  // the trainer's own checks, with the widths it derives
  checked.model.in = d.num_features;
  checked.model.out = m.out;
  checked.check();
  return m;
}

std::int64_t rows_of(const Split& s) {
  return std::int64_t(s.train.size() + s.valid.size() + s.test.size());
}

// A std::vector<char> as libstdc++ sizes it, in bytes: resize() beyond the capacity allocates
// max(2 x size, n), copies the old elements and value-initialises the rest (touching n bytes)
// before it frees the old block; assign() beyond the capacity allocates exactly n. Pages of the
// capacity never written stay untouched (large blocks are fresh mmaps), so what is resident is
// the largest size the block has held.
struct Buffer {
  std::int64_t size = 0, capacity = 0, touched = 0;
  // Both return the bytes of the old block alive with the new one at that instant (0: no move).
  std::int64_t resize(std::int64_t n) { return grow(n, std::max(2 * size, n)); }
  std::int64_t assign(std::int64_t n) { return grow(n, n); }

 private:
  std::int64_t grow(std::int64_t n, std::int64_t new_capacity) {
    std::int64_t old = 0;
    if (n > capacity) {
      old = touched;
      capacity = new_capacity;
      touched = 0;
    }
    touched = std::max(touched, n);
    size = n;
    return old;
  }
};

// The peak bytes of HaloExchanger's host buffers (CPU backend, MPI path), replaying the calls
// its forward_begin / backward_begin / backward_end make, in the trainer's order: three
// training epochs (forward through the layers, backward from the last layer down to layer 1;
// layer 0 sends no gradient back), then an evaluation forward. widths[l]: the row width layer l
// exchanges; s: send-list rows; h: halo rows.
std::int64_t exchange_peak(const std::vector<std::int64_t>& widths, bool static_first,
                           std::int64_t s, std::int64_t h, bool bf16, int staleness,
                           bool smoothing) {
  const std::int64_t es = bf16 ? 2 : 4;  // bytes of a value on the wire
  const std::size_t L = widths.size();
  Buffer send, recv, widened;  // send_buf_, recv_buf_, widened_
  // Stale exchanges: each layer's Slot::send and Slot::recv (forward), send, recv, prev (backward).
  std::vector<Buffer> fsend(L), frecv(L), bsend(L), brecv(L), bprev(L);
  std::int64_t peak = 0;
  const auto note = [&](std::int64_t old_block) {
    std::int64_t live = send.touched + recv.touched + widened.touched + old_block;
    for (const auto* v : {&fsend, &frecv, &bsend, &brecv, &bprev})
      for (const Buffer& b : *v) live += b.touched;
    peak = std::max(peak, live);
  };
  // An exact exchange (evaluation always; training without staleness).
  const auto exact_forward = [&](std::int64_t w) {
    note(recv.resize(bf16 ? h * w * es : 0));  // f32 halo rows land in place
    note(send.resize(s * w * es));
  };
  const auto exact_backward = [&](std::int64_t w) {
    if (bf16) note(send.resize(h * w * es));  // f32 gradients leave from the halo rows themselves
    note(recv.resize(s * w * es));
    if (bf16) note(widened.resize(s * w * 4));
  };
  for (int epoch = 1; epoch <= 3; ++epoch) {
    for (std::size_t l = 0; l < L; ++l) {
      if (l == 0 && static_first && epoch > 1) continue;  // A X is reused: no exchange
      if (staleness == 0) {
        exact_forward(widths[l]);
      } else {
        note(frecv[l].resize(h * widths[l] * es));
        note(fsend[l].resize(s * widths[l] * es));
      }
    }
    for (std::size_t l = L; l-- > 1;) {
      const std::int64_t w = widths[l];
      if (staleness == 0) {
        exact_backward(w);
        continue;
      }
      // post(): the halo gradients copied (f32) or narrowed (bf16), the owned rows' gradients
      // received; after the first epoch the receive and the previous epoch's payload alternate.
      note(bf16 ? bsend[l].resize(h * w * es) : bsend[l].assign(h * w * es));
      note(brecv[l].resize(s * w * es));
      std::swap(brecv[l], bprev[l]);  // arrived(): what came in is what backward_end adds
      if (bf16) note(widened.resize(s * w * 4));
    }
  }
  for (std::size_t l = 0; l < L; ++l)
    if (!(l == 0 && static_first)) exact_forward(widths[l]);
  // --halo-smoothing: each layer's moving averages (float, made in epoch 1, kept to the end):
  // its halo rows forward, its owned rows' gradients backward (layer 0 sends none back).
  if (smoothing && staleness > 0)
    for (std::size_t l = 0; l < L; ++l) peak += (h + (l > 0 ? s : 0)) * widths[l] * 4;
  return peak;
}
}  // namespace

std::int64_t MemoryEstimate::total() const {
  std::int64_t t = 0;
  for (const auto& [name, bytes] : terms()) t += bytes;
  return t;
}

std::vector<std::pair<std::string, std::int64_t>> MemoryEstimate::terms() const {
  return {{"features", features},       {"graph", graph},         {"operator", op},
          {"activations", activations}, {"gradients", gradients}, {"exchange", exchange},
          {"weights", weights},         {"transient", transient}, {"predictions", predictions},
          {"overhead", overhead}};
}

// Measured on this project's build (Release, OpenBLAS, Open MPI 4.1, glibc) as the peak RSS of
// `halo train` on Cora minus its modelled terms (docs/BENCHMARKS.md, "Per-rank memory model"):
// one process 26.3-27.9 MiB against 16.2 MiB modelled, ranks of 2 and 4 under mpirun 24-29 MiB
// against 4.6-8.5 MiB. It is the executable and the shared libraries it touches, the OpenMP and
// OpenBLAS runtimes and their threads, allocator arenas; under mpirun also Open MPI's
// libraries, its shared-memory transport and the progress thread.
std::int64_t process_overhead_bytes(int ranks) {
  constexpr std::int64_t kProcess = 12LL << 20;
  constexpr std::int64_t kMpi = 9LL << 20;
  return kProcess + (ranks > 1 ? kMpi : 0);
}

namespace {

// Throws ParamError on a shape no rank can have.
void check_shapes(const RankShape& r, const ModelShape& m) {
  if (r.owned < 0 || r.halo < 0 || r.nnz < 0 || r.send_rows < 0 || r.features < 0 ||
      r.label_cols < 0 || r.train_rows < 0 || r.split_rows < 0 || r.global_nodes < 0 ||
      r.global_split_rows < 0)
    throw ParamError("memory model: negative sizes");
  if (r.ranks < 1 || r.rank < 0 || r.rank >= r.ranks)
    throw ParamError("memory model: bad rank or rank count");
  if (m.layers < 1 || m.hidden < 1 || m.out < 0)
    throw ParamError("memory model: layers and hidden must be >= 1");
}

// Each layer's input and output widths, and which of its kernels runs first.
std::vector<LayerShape> layer_shapes(const RankShape& r, const ModelShape& m) {
  const std::int64_t f = r.features, w = m.hidden, c = m.out;
  const int L = m.layers;
  std::vector<LayerShape> layers(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    LayerShape& x = layers[std::size_t(l)];
    x.in = l == 0 ? f : w;
    x.out = l + 1 == L ? c : w;
    x.transform_first = x.out <= x.in;
    x.bn = m.batch_norm && l + 1 < L;
  }
  return layers;
}

// The mapped inputs training reads and the sparse operators built from them.
void input_terms(const RankShape& r, const ModelShape& m, MemoryEstimate& est) {
  const std::int64_t n = r.owned, all = r.owned + r.halo, e = r.nnz, s = r.send_rows,
                     f = r.features, t = r.label_cols;
  const bool drop = m.dropout > 0;
  // features.bin (or the dataset's), mapped: the first layer reads every owned row.
  // --norm-features: the trainer's row-normalised copy (xnorm).
  est.features = kFloat * n * f * (m.norm_features ? 2 : 1);

  // The part's other mapped arrays that training reads (edge_weights.bin is not one of them:
  // neither operator uses it).
  est.graph = kOffset * (n + 1)  // offsets.bin: read whole building the operator
              + kFloat * e       // indices.bin: likewise
              + kFloat * all     // degree.bin, or a one-process run's degree vector (train_dataset)
              + kFloat * n * t   // labels.bin (the split rows' labels)
              + kFloat * r.split_rows  // split.NAME.{train,valid,test}.bin of the chosen split
              + kFloat * s             // send.bin: packing reads every entry (empty for one rank)
              // global_ids.bin: dropout masks are keyed by the owned rows' global ids, and the
              // predictions name them; one process on a dataset has none (identity).
              + (r.part && (drop || m.predictions) ? kFloat * n : 0);

  // gcn_operator / mean_operator: the forward CSR over owned rows (GCN adds a self-loop per
  // row) and its transpose over all rows: int64 offsets, int32 indices, float values each.
  // GCN's operator on a whole undirected graph (no halo columns) is its own transpose and is
  // stored once (GraphOperator::symmetric).
  const std::int64_t op_nnz = m.sage ? e : e + n;
  const bool own_transpose = !m.sage && r.halo == 0 && !r.directed;
  est.op = kOffset * (n + 1) + (kFloat + kFloat) * op_nnz;
  if (!own_transpose) est.op += kOffset * (all + 1) + (kFloat + kFloat) * op_nnz;
}

// Activations: the forward pass's slabs, sized once and reused every epoch.
std::int64_t activation_bytes(const RankShape& r, const ModelShape& m,
                              const std::vector<LayerShape>& layers) {
  const std::int64_t n = r.owned, all = r.owned + r.halo, f = r.features, w = m.hidden, c = m.out;
  const int L = m.layers;
  const bool drop = m.dropout > 0;
  // Model::forward's memory plan (gnn/src/layers/model.cc).
  std::int64_t act = 0;
  // Layer::saved: one all x W slab per hidden layer (x-hat or output, then d(T) in backward).
  act += kFloat * all * w * (L - 1);
  for (const LayerShape& x : layers)
    if (!x.transform_first) act += kFloat * n * x.in;  // Layer::z = A X of an aggregate-first layer
  if (m.batch_norm && drop)  // Layer::keep_words: the dropout mask as bits, per batch-norm layer
    act += std::int64_t(sizeof(std::uint64_t)) * n * ceil_div(w, 64) * (L - 1);
  if (m.input_dropout && drop) act += kFloat * n * f;          // Model::x_drop_
  if (m.sage && m.batch_norm && L > 1) act += kFloat * n * w;  // Work::act (SAGE's BN outputs)
  act += kFloat * n * c;                                       // Work::logits
  return act;
}

// Gradients between layers and of the logits.
std::int64_t gradient_bytes(const RankShape& r, const ModelShape& m) {
  const std::int64_t n = r.owned, all = r.owned + r.halo, w = m.hidden, c = m.out;
  const int L = m.layers;
  std::int64_t grad = 0;
  if (L > 1) grad += kFloat * all * w;  // Work::grad[0]: gradients between layers, T in forward
  if (m.sage && L > 1) grad += kFloat * all * w;  // Work::grad[1]: SAGE ping-pongs
  grad += kFloat * all * c;                       // Work::tail: the last layer's T, then d(T)
  grad += kFloat * n * c;                         // the trainer's dlogits
  return grad;
}

// Parameters with their optimiser state and copies, and batch-norm vectors.
std::int64_t weight_bytes(const ModelShape& m, const std::vector<LayerShape>& layers,
                          bool exchanges) {
  // Parameters (value, grad, Adam m and v), the fused all-reduce buffer, the best epoch's model
  // (RunState::best) and the temporary model_values builds to replace it, batch-norm vectors.
  std::int64_t params = 0, bn_buffers = 0;
  for (const LayerShape& x : layers) {
    // W (and SAGE's W_root), then b, or batch norm's gamma and beta in its place.
    params += x.in * x.out * (m.sage ? 2 : 1) + (x.bn ? 2 * x.out : x.out);
    // Running mean and variance: checkpointed, and part of the best model.
    if (x.bn) bn_buffers += 2 * x.out;
  }
  // Batch mean and inv_std, and the zeros and ones rebuild_output normalises with.
  const std::int64_t bn_scratch = 2 * bn_buffers;
  return kFloat * (4 * params + (exchanges ? params : 0) + 2 * (params + bn_buffers) + bn_buffers +
                   bn_scratch);
}

// Short-lived buffers alive at the peak.
std::int64_t transient_bytes(const RankShape& r, const ModelShape& m) {
  const std::int64_t n = r.owned, w = m.hidden, c = m.out, t = r.label_cols;
  // Short-lived buffers live at the peak: the larger of the loss's per-row vector and the
  // per-block column partials of batch norm (2 doubles per column per 256 rows); multi-label
  // metrics keep scores and labels of the largest split set, and rank 0 gathers every rank's.
  std::int64_t tr = r.train_rows * (m.multilabel ? 16 : 8);
  if (m.batch_norm) tr = std::max(tr, ceil_div(n, 256) * w * 2 * 8);
  tr = std::max(tr, ceil_div(n, 256) * c * 8);  // column_sums of d(logits) (the last bias)
  if (m.multilabel) {
    const std::int64_t largest = std::max(r.train_rows, r.split_rows - r.train_rows);
    tr += 8 * largest * t + (r.rank == 0 ? 8 * r.global_split_rows * t : 0);
  }
  return tr;
}

// --predictions-out's buffers, 0 without it.
std::int64_t prediction_bytes(const RankShape& r, const ModelShape& m) {
  const std::int64_t n = r.owned, t = r.label_cols;
  // --predictions-out, after the last epoch with the model alive: every rank's ids (and classes),
  // rank 0 the gathered ids and values and the output array.
  if (!m.predictions) return 0;
  const std::int64_t g = std::max(r.global_nodes, n);
  if (m.multilabel) return kFloat * n + (r.rank == 0 ? kFloat * g + 2 * kFloat * g * t : 0);
  // rank 0: classes, ids, gathered ids and classes, int64 output; others: argmax + classes
  return r.rank == 0 ? 2 * kFloat * n + 16 * g : 12 * n;
}

// --model gat (gnn/src/layers/gat.h's memory plan): the attention graph instead of an operator, and
// per layer Z, el, er, alpha and a hidden layer's output kept (in a slab that later takes its
// d(Z)); the shared edge slab, the last layer's d(Z) and one gradient slab.
void gat_terms(const RankShape& r, const ModelShape& m, MemoryEstimate& est) {
  const std::int64_t n = r.owned, all = r.owned + r.halo, f = r.features, c = m.out;
  const std::int64_t nnz = r.nnz + n;  // a self-loop per row
  const int L = m.layers;
  // AttentionGraph: offsets and transposed offsets (int64), indices and transposed rows (int32),
  // the transposed entries' edge ids (int64).
  est.op = kOffset * (n + 1) + kOffset * (all + 1) + (4 + 4 + 8) * nnz;
  std::int64_t act = 0, widest_in = 0, max_heads = 1, params = 0;
  std::vector<std::int64_t> widths;
  for (int l = 0; l < L; ++l) {
    const bool last = l + 1 == L;
    const std::int64_t heads = last ? m.out_heads : m.heads, width = last ? c : m.hidden;
    const std::int64_t hf = heads * width, in = l == 0 ? f : std::int64_t(m.heads) * m.hidden;
    act += kFloat * (all * hf + all * heads + n * heads + nnz * heads);  // z, el, er, alpha
    if (!last) act += kFloat * all * hf;  // the output, in a slab that later takes its d(Z)
    if (l > 0) widest_in = std::max(widest_in, in);
    max_heads = std::max(max_heads, heads);
    params += in * hf * (m.residual && in != hf ? 2 : 1) + 2 * hf + (last ? width : hf);
    widths.push_back(hf);
    if (last && heads > 1) params += hf * width;  // the constant head-mean matrix (not trained)
  }
  const std::int64_t top = std::int64_t(m.out_heads) * c;
  act += kFloat * (nnz * max_heads + (m.out_heads > 1 ? n * top : 0) + n * c);  // edge, concat
  if (m.input_dropout && m.dropout > 0) act += kFloat * n * f;                  // x_drop_
  est.activations = act;
  // The last layer's d(Z), d(el), d(er), the gradient between layers, the trainer's dlogits.
  est.gradients = kFloat * (all * top + all * max_heads + n * max_heads + n * widest_in + n * c);
  const bool exchanges = r.ranks > 1;
  if (exchanges)
    est.exchange = exchange_peak(widths, false, r.send_rows, r.halo, m.halo_bf16, m.halo_staleness,
                                 m.halo_smoothing);
  est.weights = kFloat * (4 * params + (exchanges ? params : 0) + 2 * params);
}

}  // namespace

MemoryEstimate estimate_rank_memory(const RankShape& r, const ModelShape& m) {
  check_shapes(r, m);
  if (m.gat) {
    MemoryEstimate est;
    input_terms(r, m, est);
    gat_terms(r, m, est);
    est.transient = transient_bytes(r, m);
    est.predictions = prediction_bytes(r, m);
    est.overhead = process_overhead_bytes(r.ranks);
    return est;
  }
  const std::vector<LayerShape> layers = layer_shapes(r, m);
  const bool exchanges = r.ranks > 1;
  const bool drop = m.dropout > 0;
  const std::int64_t s = r.send_rows;
  MemoryEstimate est;
  input_terms(r, m, est);
  est.activations = activation_bytes(r, m, layers);
  est.gradients = gradient_bytes(r, m);
  // HaloExchanger's payload buffers (runtime/src/comm/halo_exchange.cc), CPU backend over MPI: the
  // peak of a replay of its buffer calls over the first epochs and an evaluation (see
  // exchange_peak), since a buffer that grows holds its old block while the new one fills.
  if (exchanges) {
    // Each layer's exchange width; backward sends gradients of the same width.
    std::vector<std::int64_t> widths;
    widths.reserve(layers.size());
    for (const LayerShape& x : layers) widths.push_back(x.fwd_width());
    // A first layer that aggregates the features reuses A X after the first training epoch and
    // in evaluation (not under input dropout, which changes its input every epoch).
    const bool static_first = !layers[0].transform_first && !(m.input_dropout && drop);
    est.exchange = exchange_peak(widths, static_first, s, r.halo, m.halo_bf16, m.halo_staleness,
                                 m.halo_smoothing);
  }

  est.weights = weight_bytes(m, layers, exchanges);
  est.transient = transient_bytes(r, m);
  est.predictions = prediction_bytes(r, m);
  est.overhead = process_overhead_bytes(r.ranks);
  return est;
}

ModelShape model_shape(const TrainOptions& o, bool multilabel, std::int64_t out) {
  ModelShape m;
  m.sage = o.model.kind == ModelKind::kSage;
  m.gat = o.model.kind == ModelKind::kGat;
  m.heads = o.model.heads;
  m.out_heads = o.model.out_heads;
  m.residual = o.model.residual;
  m.layers = o.model.layers;
  m.hidden = o.model.hidden;
  m.out = out;
  m.multilabel = multilabel;
  m.dropout = o.model.dropout;
  m.input_dropout = o.model.input_dropout;
  m.batch_norm = o.model.batch_norm;
  m.norm_features = o.norm_features;
  m.halo_bf16 = o.halo_dtype == HaloDtype::kBf16;
  m.halo_staleness = o.halo_staleness;
  m.halo_smoothing = o.halo_smoothing > 0.f;
  m.predictions = !o.predictions_out.empty();
  return m;
}

double predicted_rank_bytes(const RankShape& r, const ModelShape& m, std::string* largest) {
  // Beyond ~1e17 bytes the model's int64 arithmetic could overflow: the weights and slabs alone
  // (already far beyond any machine) are the answer.
  const double w = double(m.hidden), f = double(r.features), c = double(m.out),
               a = double(r.owned + r.halo), layers = double(m.layers);
  const double params = f * w + (layers - 2 > 0 ? layers - 2 : 0) * w * w + w * c;
  const double rough = 4.0 * (6 * params + 3 * a * w * layers);  // weights, Adam, best; slabs
  if (rough > 1e17) {
    *largest = "weights and activations";
    return rough;
  }
  const MemoryEstimate est = estimate_rank_memory(r, m);
  std::int64_t top = -1;
  for (const auto& [name, bytes] : est.terms())
    if (bytes > top) {
      top = bytes;
      *largest = name;
    }
  return double(est.total());
}

void refuse_impossible_memory(const RankShape& r, const ModelShape& m, const std::string& source) {
  if (const char* v = std::getenv("HALO_MEMORY_CHECK"); v && std::string(v) == "0") return;
  std::string largest;
  const double need = predicted_rank_bytes(r, m, &largest);
  const AvailableMemory avail = available_memory();
  if (avail.bytes <= 0 || need <= 2.0 * double(avail.bytes)) return;
  const bool model_part = largest == "weights" || largest == "activations" ||
                          largest == "gradients" || largest == "exchange" ||
                          largest == "weights and activations" || largest == "transient";
  char head[160];
  if (model_part)
    std::snprintf(head, sizeof head, "--hidden %lld --layers %d", (long long)m.hidden, m.layers);
  else
    std::snprintf(head, sizeof head, "%s", source.c_str());
  throw ParamError(
      std::string(head) + ": training needs about " + format_bytes(std::uint64_t(need)) +
      " on this rank (memory model; mostly " + largest + "), but only " +
      format_bytes(std::uint64_t(avail.bytes)) + " is available (" + avail.source + "); " +
      (model_part    ? "lower --hidden or --layers"
       : r.ranks > 1 ? "partition the dataset into more parts"
                     : "partition the dataset (halo partition) and train across ranks"));
}

JobShape job_shape(const std::filesystem::path& path, const TrainOptions& o) {
  JobShape job;
  const ReadOptions lazy{.verify_checksums = false};  // sizes only: nothing is read or touched
  if (!is_parts_dir(path)) {
    const GraphDataset d = read_graph_dataset(path, lazy);
    const Split& s = chosen_split(d, o.split, "", path.string());
    job.model = checked_model_shape(o, d, path.string());
    RankShape x;
    x.owned = x.global_nodes = d.num_nodes();
    x.nnz = d.graph.num_edges();
    x.features = d.num_features;
    x.label_cols = d.label_cols;
    x.train_rows = std::int64_t(s.train.size());
    x.split_rows = rows_of(s);
    x.global_split_rows = std::int64_t(std::max({s.train.size(), s.valid.size(), s.test.size()}));
    x.part = false;
    job.ranks.push_back(x);
    return job;
  }
  const nlohmann::json meta = read_parts_meta(path);
  const int k = meta.at("k").get<int>();
  const std::string main_split = meta.at("options").value("split", "");
  std::int64_t sets[3] = {0, 0, 0};  // the whole graph's train, valid and test rows
  for (int r = 0; r < k; ++r) {
    const Part p = read_part(path, r, lazy);
    const std::string where = (path / ("part-" + std::to_string(r))).string();
    const Split& s = chosen_split(p, o.split, main_split, where);
    if (r == 0) job.model = checked_model_shape(o, p, where);
    RankShape x;
    x.owned = p.num_owned;
    x.halo = p.num_halo;
    x.nnz = p.graph.num_edges();
    x.send_rows = p.send_offsets[std::size_t(k)];
    x.features = p.num_features;
    x.label_cols = p.label_cols;
    x.train_rows = std::int64_t(s.train.size());
    x.split_rows = rows_of(s);
    x.ranks = k;
    x.rank = r;
    x.global_nodes = p.global_nodes;
    sets[0] += std::int64_t(s.train.size());
    sets[1] += std::int64_t(s.valid.size());
    sets[2] += std::int64_t(s.test.size());
    job.ranks.push_back(x);
  }
  for (RankShape& x : job.ranks) x.global_split_rows = std::max({sets[0], sets[1], sets[2]});
  return job;
}

}  // namespace halo

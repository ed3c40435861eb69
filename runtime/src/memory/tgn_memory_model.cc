// The TGN memory model (memory_model.h): the peak resident memory of a `halo tgn train` rank,
// its GPU memory for either --memory-on placement, the choice between them and the refusals.
// Each term is derived from the code that allocates it; docs/BENCHMARKS.md "TGN memory model"
// has the derivation and the measurements.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo {
namespace {

// The sum of an estimate's terms, saturating at the int64 maximum (terms are clamped there).
std::int64_t saturating_total(const std::vector<std::pair<std::string, std::int64_t>>& terms) {
  std::int64_t sum = 0;
  for (const auto& [name, bytes] : terms)
    sum = bytes > std::numeric_limits<std::int64_t>::max() - sum
              ? std::numeric_limits<std::int64_t>::max()
              : sum + bytes;
  return sum;
}

}  // namespace

std::int64_t TgnMemoryEstimate::total() const { return saturating_total(terms()); }

std::vector<std::pair<std::string, std::int64_t>> TgnMemoryEstimate::terms() const {
  return {{"stream", stream},    {"indexes", indexes}, {"node state", node_state},
          {"weights", weights},  {"batch", batch},     {"evaluation", evaluation},
          {"overhead", overhead}};
}

const char* TgnMemoryEstimate::largest() const {
  const std::pair<const char*, std::int64_t> named[] = {
      {"weights", weights}, {"node state", node_state}, {"batch buffers", batch},
      {"stream", stream},   {"indexes", indexes},       {"evaluation", evaluation}};
  const auto* top =
      std::max_element(std::begin(named), std::end(named),
                       [](const auto& x, const auto& y) { return x.second < y.second; });
  return top->first;
}

TgnStreamShape tgn_stream_shape(std::int64_t nodes, std::int64_t events, std::int64_t edge_dim) {
  TgnStreamShape s;
  s.nodes = nodes;
  s.events = events;
  s.edge_dim = edge_dim;
  s.train_events = events * 70 / 100;
  s.valid_events = events * 85 / 100 - s.train_events;
  s.test_events = events - s.train_events - s.valid_events;
  return s;
}

namespace {

// The process's own resident memory in a TGN run: code, libraries, OpenMP's and OpenBLAS's
// per-thread buffers. Measured: peak RSS less the modelled terms of `halo tgn train UCI --model
// jodie --skip-eval --epochs 1` (the terms 21.6 MiB, the peak 30.2 MiB at 1 and 2 threads; AMD
// EPYC, 2026-12-07).
constexpr double kTgnProcessBytes = 10.0 * (1 << 20);
constexpr double kTgnMpiBytes = 9.0 * (1 << 20);  // under mpirun (as halo train measures)

// A rank's events per batch, its slice (exact) or whole batches (segments, one process), and
// the negatives per event of its widest scoring (evaluation's, unless --skip-eval).
struct TgnRankBatch {
  double events = 0, negatives = 1;
};
TgnRankBatch tgn_rank_batch(const TgnOptions& o, int ranks) {
  const double b = double(o.batch_size);
  return {o.parallel == TgnParallel::kSegments || ranks <= 1
              ? b
              : std::ceil(b / double(std::max(1, ranks))),
          o.skip_eval ? 1 : double(std::max<std::int64_t>(1, o.eval_negatives))};
}

// Bytes of one batch's buffers (gnn/src/temporal/tgn.cc, layers.cc): forward ones for q queries
// (the larger of a training and an evaluation batch) and pairs scored pairs, backward ones for
// a training batch of qt queries. Each line names the members it stands for.
double tgn_batch_bytes(const TgnStreamShape& st, const TgnOptions& o, const TgnRankBatch& rb) {
  const double events_t = rb.events, events_f = rb.events, negatives_f = rb.negatives;
  const bool attention = o.embedding == TgnEmbedding::kAttention;
  const double m = double(o.memory_dim), t = double(o.time_dim), de = double(st.edge_dim);
  const double z = attention ? double(o.embed_dim) : m, k = attention ? double(o.neighbors) : 0;
  // nd: a node's row in the attention (the memory, and the static memory's row with it).
  const double nd = m + double(o.static_memory);
  const double h = double(o.heads), dq = nd + t, ds = de + t, in = 2 * m + de + t;
  const double n = double(st.nodes);
  // Pending nodes (updated by the GRU): both ends of the previous batch's events.
  const double p = std::min(n, 2.0 * double(o.batch_size));
  const double qf = events_f * (2 + negatives_f), sf = qf * k, uf = std::min(n, sf);
  const double qt = 3 * events_t, svt = qt * k, ut = std::min(n, svt);
  const double pairs_f = events_f * (1 + negatives_f);
  double fwd = 0;
  // Tgn: query nodes and times, the neighbour batch (node, event, time per slot; counts), the
  // slot -> distinct-neighbour map and list, the gaps and their time codes (+ the encoder's
  // copy of the gaps and its sines), the attention's inputs, embeddings, pairs, hidden, logits.
  fwd += 12 * qf + 20 * sf + 4 * qf + 4 * sf + 4 * uf;
  fwd += (8 + 4 * t) * (qf + sf + p) * 2;
  // Without edge features the slots' columns are their time codes, read in place (tgn.cc).
  fwd += 4 * (qf * dq + qf * nd + uf * nd + (de > 0 ? sf * ds : 0));
  fwd += 4 * (qf * z + pairs_f * 2 * z + pairs_f * z + pairs_f);
  // The GRU: its input and previous memory, the updated memory, the cell's saved x, h, the two
  // pre-activations (3m wide) and the three gates.
  fwd += 4 * p * (in + m + m) + 4 * p * (in + m + 6 * m + 3 * m);
  if (attention)  // TemporalAttention's forward: compact-row maps, saved inputs, projections
    fwd += 12 * sf + 4 * (qf * dq + uf * nd + sf * ds + qf * nd) +
           4 * (qf * dq + 2 * uf * dq + qf * dq + 2 * h * qf * ds + qf * dq + h * qf * k +
                2 * qf * dq + qf * (dq + nd) + qf * z);
  // Backward (training batches): d(logits, hidden, pairs, embeddings), the time codes' and the
  // GRU's gradients, and TemporalAttention's.
  double bwd = 4 * (2 * events_t * (1 + z + 2 * z) + qt * z) + 4 * t * (qt + svt + p) +
               4 * p * (m + in + m + 6 * m);
  if (attention)
    bwd += 4 * (qt * z + qt * (dq + nd) + 4 * qt * dq + 2 * svt * dq + 2 * h * qt * ds) +
           8 * h * qt + 4 * (2 * ut * dq + (de > 0 ? svt * ds : 0) + qt * dq + ut * nd + qt * nd);
  // The model's row-op buffers (tgn.cc): the batch's int32 index pack (pending nodes and their
  // messages, queries, slots, distinct neighbours, pairs; when training, the memory gradients'
  // routing), the memory gradients gathered in the host loop's order, JODIE's query rows, and
  // commit's gathered and summed message rows (both ends of every event).
  fwd += 4 * (3 * p + 3 * qf + sf + 3 * uf + pairs_f) + (attention ? 0 : 4 * qf * m);
  fwd += 2 * 4 * 2 * events_f * std::max(m, de);
  if (attention) bwd += 16 * (2 * qt + ut) + 4 * (2 * qt + ut) * dq;
  return fwd + bwd;
}

// The floats of the model's parameters (all built) and of those trained (in the all-reduce).
// Tgn's members (gnn/src/temporal/tgn.cc): GruCell(2m + de + t -> m): w, u, two biases;
// TemporalAttention(dh = nd, dq = nd + t, dk = nd + de + t, dout = z), nd = m + the static
// memory's width, built whatever the embedding; the predictor's MLP (2z -> z -> 1); the time
// encoding and projection. The static memory is counted with the node state.
struct TgnParamFloats {
  double built = 0, trained = 0;
};
TgnParamFloats tgn_param_floats(const TgnStreamShape& st, const TgnOptions& o) {
  const double m = double(o.memory_dim), t = double(o.time_dim), de = double(st.edge_dim);
  const double nd = m + double(o.static_memory);
  const bool attention = o.embedding == TgnEmbedding::kAttention;
  const double z = attention ? double(o.embed_dim) : m;  // embedding width
  const double gru = (2 * m + de + t) * 3 * m + m * 3 * m + 6 * m;
  const double dq = nd + t, dk = nd + de + t;
  const double attn = 2 * dq * dq + 2 * dk * dq + 4 * dq + (dq + nd) * z + z * z + 2 * z;
  const double pred = 2 * z * z + z + z + 1, small = 2 * t + 2 * m;
  const double params = gru + attn + pred + small;
  return {params, params - (attention ? 0 : attn)};
}

std::int64_t clamp_bytes(double x) {
  return x >= 9.2e18 ? std::numeric_limits<std::int64_t>::max() : std::int64_t(x);
}

}  // namespace

TgnMemoryEstimate estimate_tgn_memory(const TgnStreamShape& st, const TgnOptions& o, int ranks) {
  // In double: 65,536-wide memories make 10^10-parameter GRUs; clamped into int64 at the end.
  const double m = double(o.memory_dim), de = double(st.edge_dim);
  const double n = double(st.nodes), e = double(st.events);
  const double sd = double(o.static_memory);
  // Every Param allocates value, gradient and both moments; the replicas' all-reduce buffer
  // holds the trained gradients (tgn_replicas.h).
  const TgnParamFloats pf = tgn_param_floats(st, o);
  const double weights = 16.0 * pf.built + 4.0 * (pf.trained + 1);
  // The dataset's arrays (read whole: src, dst, time, features, others); the temporal indexes
  // (sampler.h: offsets, and per entry neighbour, event and time, two entries per event) of the
  // training events and of every event, each sampler's per-node pointer; the split's train_keep
  // and inductive flags per event and new-node flags per node; the training event ids.
  const double train = double(st.train_events);
  const double stream = e * (16 + 4 * de + double(st.other_event_bytes));
  const double indexes =
      (8 * (n + 1) + 40 * train) + (8 * (n + 1) + 40 * e) + 16 * n + (2 * e + n) + 8 * train;
  // NodeMemory: rows, last update; MessageStore: self, other, edge, time, flag, count (and the
  // mean aggregator's per-node time lists); Tgn: pending_row_, neighbor_row_.
  const double mean_lists = o.aggregator == TgnAggregator::kMean ? 24 * n : 0;
  // The static memory is a parameter, but per node: value, gradient and Adam's moments.
  const double node_state = n * (4 * m + 8) + n * (8 * m + 4 * std::max(1.0, de) + 8 + 1 + 4) +
                            mean_lists + 8 * n + 16 * n * sd;
  const double batch = tgn_batch_bytes(st, o, tgn_rank_batch(o, ranks));
  // Evaluation: the validation Scores kept while the test range is scored (per event a positive
  // and a negative score and label, again for new-node events), the test range's records (event,
  // scores, reciprocal rank) and its Scores.
  const double v = double(st.valid_events), te = double(st.test_events);
  const double evaluation = o.skip_eval ? 0 : 32 * v + 24 * te + 32 * te;
  const auto clamp = clamp_bytes;
  TgnMemoryEstimate est;
  est.stream = clamp(stream);
  est.indexes = clamp(indexes);
  est.node_state = clamp(node_state);
  est.weights = clamp(weights);
  est.batch = clamp(batch);
  est.evaluation = clamp(evaluation);
  est.overhead = clamp(kTgnProcessBytes + (ranks > 1 ? kTgnMpiBytes : 0));
  return est;
}

std::int64_t TgnGpuEstimate::total() const { return saturating_total(terms()); }

std::vector<std::pair<std::string, std::int64_t>> TgnGpuEstimate::terms() const {
  return {{"weights", weights},
          {"node state", node_state},
          {"stream", stream},
          {"batch", batch},
          {"staged rows", staged}};
}

TgnGpuEstimate estimate_tgn_gpu_memory(const TgnStreamShape& st, const TgnOptions& o, int ranks,
                                       TgnMemoryOn memory) {
  const double m = double(o.memory_dim), de = double(st.edge_dim), n = double(st.nodes);
  const bool attention = o.embedding == TgnEmbedding::kAttention;
  const bool device = memory == TgnMemoryOn::kDevice;
  // Tgn::to_device: every Param (value, gradient, Adam's moments), the static memory with them.
  const double weights = 16.0 * tgn_param_floats(st, o).built + 16.0 * n * double(o.static_memory);
  // kDevice: NodeMemory::rows, MessageStore's self, other and edge tables; the stream's edge
  // features (Tgn::efeat_dev_).
  const double node_state = device ? n * (4 * m + 8 * m + 4 * std::max(1.0, de)) : 0;
  const double stream = device ? 4.0 * double(st.events) * de : 0;
  // The batch buffers: the host's estimate of them (tgn_batch_bytes), which also counts the
  // host's index bookkeeping: an upper bound by a few percent.
  const TgnRankBatch rb = tgn_rank_batch(o, ranks);
  const double b = double(o.batch_size), per_rank = rb.events, negatives_f = rb.negatives;
  const double batch = tgn_batch_bytes(st, o, rb);
  // kHost: Tgn::staged_, the rows a batch reads: the pending nodes' memory and messages, the
  // stored memory of its queries and distinct neighbours (at most every node), the slots' edge
  // features.
  const double p = std::min(n, 2.0 * b), q = per_rank * (2 + negatives_f);
  const double k = attention ? double(o.neighbors) : 0;
  const double rows = std::min(n, p + q + std::min(n, q * k));
  const double staged = device ? 0 : 4 * (rows * m + p * (2 * m + std::max(1.0, de)) + q * k * de);
  TgnGpuEstimate est;
  est.weights = clamp_bytes(weights);
  est.node_state = clamp_bytes(node_state);
  est.stream = clamp_bytes(stream);
  est.batch = clamp_bytes(batch);
  est.staged = clamp_bytes(staged);
  return est;
}

namespace {

// The flags behind the largest term of a GPU estimate, for the refusal's advice.
std::string gpu_advice(const TgnGpuEstimate& e, const TgnOptions& o) {
  if (e.node_state + e.stream >= std::max(e.weights, e.batch)) return "use --memory-on host";
  if (e.weights >= e.batch)
    return o.static_memory > 0 ? "lower --static-memory or --memory-dim" : "lower --memory-dim";
  return "lower --batch-size, --eval-negatives or --neighbors";
}

}  // namespace

TgnMemoryOn choose_tgn_memory(const TgnStreamShape& stream, const TgnOptions& o, int ranks,
                              std::size_t free_bytes, int sharing, const std::string& dataset) {
  const TgnGpuEstimate on_device = estimate_tgn_gpu_memory(stream, o, ranks, TgnMemoryOn::kDevice),
                       on_host = estimate_tgn_gpu_memory(stream, o, ranks, TgnMemoryOn::kHost);
  const char* check = std::getenv("HALO_MEMORY_CHECK");
  const bool skip = free_bytes == 0 || (check && std::string(check) == "0");
  const double budget = 0.9 * double(free_bytes) / double(std::max(1, sharing));
  const auto fits = [&](const TgnGpuEstimate& e) { return skip || double(e.total()) <= budget; };
  if (o.memory_on == TgnMemoryChoice::kDevice ||
      (o.memory_on == TgnMemoryChoice::kAuto && fits(on_device))) {
    if (fits(on_device)) return TgnMemoryOn::kDevice;
  } else if (fits(on_host)) {
    return TgnMemoryOn::kHost;
  }
  const bool asked_device = o.memory_on == TgnMemoryChoice::kDevice;
  const TgnGpuEstimate& e = asked_device ? on_device : on_host;
  const std::string shared =
      sharing > 1 ? " (shared by " + std::to_string(sharing) + " ranks)" : std::string();
  throw ParamError(
      dataset + ": " +
      (asked_device ? std::string("--memory-on device")
                    : std::string("even with the node state in host memory, TGN")) +
      " needs about " + format_bytes(std::uint64_t(e.total())) + " of GPU memory per rank (" +
      std::to_string(stream.nodes) + " nodes, --memory-dim " + std::to_string(o.memory_dim) +
      ", --batch-size " + std::to_string(o.batch_size) + "), but the GPU has " +
      format_bytes(std::uint64_t(free_bytes)) + " free" + shared +
      (!asked_device ? "; " + gpu_advice(on_host, o)
       : fits(on_host)
           ? "; use --memory-on host (about " + format_bytes(std::uint64_t(on_host.total())) + ")"
           : "; even --memory-on host needs about " + format_bytes(std::uint64_t(on_host.total())) +
                 ": " + gpu_advice(on_host, o)));
}

std::string tgn_memory_message(const TgnMemoryEstimate& e, const TgnOptions& o, std::int64_t nodes,
                               const std::string& dataset) {
  const std::string largest = e.largest();
  if (largest == "weights")
    return "--memory-dim " + std::to_string(o.memory_dim) + " --embed-dim " +
           std::to_string(o.embed_dim) + " --time-dim " + std::to_string(o.time_dim) +
           ": the model's weights (GRU, attention, link predictor) with their gradients and Adam "
           "moments need about " +
           format_bytes(std::uint64_t(e.weights)) + "; lower --memory-dim";
  if (largest == "node state")
    return dataset + ": the node state of " + std::to_string(nodes) + " nodes x --memory-dim " +
           std::to_string(o.memory_dim) +
           (o.static_memory > 0 ? " and --static-memory " + std::to_string(o.static_memory)
                                : std::string()) +
           " needs about " + format_bytes(std::uint64_t(e.node_state)) +
           (o.static_memory > 0 ? "; lower --memory-dim or --static-memory"
                                : "; lower --memory-dim");
  if (largest == "stream" || largest == "indexes" || largest == "evaluation")
    return dataset + ": the events, their temporal indexes and evaluation scores need about " +
           format_bytes(std::uint64_t(e.stream + e.indexes + e.evaluation)) +
           "; train on a machine with more memory";
  return "--batch-size " + std::to_string(o.batch_size) + " --eval-negatives " +
         std::to_string(o.eval_negatives) + " --neighbors " + std::to_string(o.neighbors) +
         ": one batch's buffers need about " + format_bytes(std::uint64_t(e.batch)) +
         "; lower --batch-size or --eval-negatives";
}

void refuse_impossible_tgn_memory(const TgnStreamShape& stream, const TgnOptions& o, int ranks,
                                  const std::string& dataset) {
  if (const char* v = std::getenv("HALO_MEMORY_CHECK"); v && std::string(v) == "0") return;
  const TgnMemoryEstimate e = estimate_tgn_memory(stream, o, ranks);
  const AvailableMemory avail = available_memory();
  if (avail.bytes <= 0 || double(e.total()) <= 2.0 * double(avail.bytes)) return;
  std::string line = tgn_memory_message(e, o, stream.nodes, dataset);
  const std::size_t advice = line.rfind("; ");
  throw ParamError(line.substr(0, advice) + " (in all about " +
                   format_bytes(std::uint64_t(e.total())) + "), but only " +
                   format_bytes(std::uint64_t(avail.bytes)) + " is available (" + avail.source +
                   ")" + line.substr(advice));
}

}  // namespace halo

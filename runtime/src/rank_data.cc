// Reading what one rank computes on (rank_data.h): a dataset for one process, or its part of
// PARTS, checked against the other ranks' parts.
#include "rank_data.h"

#include <omp.h>

#include <cstdlib>

#include "halo/graph/error.h"
#include "halo/runtime/trainer.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Labels and splits from a dataset or a part (the same fields on both).
template <class Source>
void take_labels(RankData& r, const Source& d) {
  r.labels = d.labels.data();
  r.label_cols = d.label_cols;
  r.num_classes = d.num_classes;
  r.label_kind = d.label_kind;
  r.splits = &d.splits;
}

// What no rank can check alone: that its peers agree, i.e. q's send count to r is r's receive
// count from q (else the exchange mismatches message sizes). One all-reduce of the K x K counts,
// keyed (sender, receiver); every rank reaches the same verdict. Collective.
void check_peers_agree(const fs::path& parts, const Part& p, Communicator& comm) {
  const int k = comm.size();
  std::vector<std::int64_t> counts(2 * std::size_t(k) * std::size_t(k), 0);
  const auto kk = std::size_t(k), r = std::size_t(p.rank);
  for (std::size_t q = 0; q < kk; ++q) {
    counts[r * kk + q] = p.send_offsets[q + 1] - p.send_offsets[q];
    counts[kk * kk + q * kk + r] = p.recv_offsets[q + 1] - p.recv_offsets[q];
  }
  comm.allreduce(counts.data(), std::int64_t(counts.size()), ReduceOp::kSum);
  for (std::size_t i = 0; i < kk * kk; ++i)
    if (counts[i] != counts[kk * kk + i])
      throw InputError((parts / ("part-" + std::to_string(i / kk)) / "send_offsets.bin").string() +
                       ": part " + std::to_string(i / kk) + " sends " + std::to_string(counts[i]) +
                       " rows to part " + std::to_string(i % kk) + ", which expects " +
                       std::to_string(counts[kk * kk + i]) + " (parts from different partitions?)");
}

}  // namespace

void RankInput::release_graph() const {
  const Csr& g = dataset ? dataset->graph : part->graph;
  g.indices.release(0, g.indices.size());
  g.offsets.release(0, g.offsets.size());
  g.values.release(0, g.values.size());
}

void RankInput::release_features() const {
  const Array<float>& f = dataset ? dataset->features : part->features;
  f.release(0, f.size());
}

void set_rank_threads(int threads, int ranks) {
  if (threads > 0)
    omp_set_num_threads(threads);
  else if (ranks > 1 && !std::getenv("OMP_NUM_THREADS"))
    omp_set_num_threads(default_threads_per_rank());
}

Matrix row_normalised(const MatrixView& x) {
  Matrix out(x.rows, x.cols);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const float* s = x.row(r);
    double sum = 0;
    for (std::int64_t c = 0; c < x.cols; ++c) sum += s[c];
    const float inv = sum != 0 ? float(1.0 / sum) : 0.f;
    for (std::int64_t c = 0; c < x.cols; ++c) out.at(r, c) = s[c] * inv;
  }
  return out;
}

void ModelInputs::load(const RankData& d, ModelKind kind, bool norm_features, bool transpose) {
  x = d.features;
  if (norm_features) {
    xnorm = row_normalised(x);
    x = xnorm.view();
  }
  if (kind == ModelKind::kGcn)
    gcn = gcn_operator(d.graph, d.all, d.degree, transpose);
  else if (kind == ModelKind::kSage)
    mean = mean_operator(d.graph, d.all, transpose);
  else
    attention = attention_graph(d.graph, d.all);
}

void ModelInputs::place(const RankData& d, ModelKind kind, Device dev, GraphContext& ctx) {
  const bool gpu = dev == Device::kCuda;
  if (gpu) {
    x_dev = Matrix(d.owned, x.cols, 0.f, dev);
    copy_floats(dev, x_dev.data(), Device::kCpu, x.data, x.size());
    x = x_dev.view();
    if (kind == ModelKind::kGcn)
      gcn_dev = gcn.to_device(dev);
    else if (kind == ModelKind::kSage)
      mean_dev = mean.to_device(dev);
    else {
      att_offsets = DeviceArray<EdgeId>(attention.offsets.data(), attention.offsets.size());
      att_indices = DeviceArray<NodeId>(attention.indices.data(), attention.indices.size());
      att_t_offsets = DeviceArray<EdgeId>(attention.t_offsets.data(), attention.t_offsets.size());
      att_t_rows = DeviceArray<NodeId>(attention.t_rows.data(), attention.t_rows.size());
      att_t_edge = DeviceArray<EdgeId>(attention.t_edge.data(), attention.t_edge.size());
    }
    if (d.global_ids) gids_dev = DeviceArray<NodeId>(d.global_ids, std::size_t(d.all));
  }
  ctx.owned = d.owned;
  ctx.all = d.all;
  ctx.inner = d.inner;
  ctx.gcn = gpu ? gcn_dev.view() : gcn.view();
  ctx.mean = gpu ? mean_dev.view() : mean.view();
  ctx.attention = attention.view();
  if (gpu && kind == ModelKind::kGat)
    ctx.attention = {ctx.attention.rows, ctx.attention.cols, ctx.attention.nnz,
                     att_offsets.data(), att_indices.data(), att_t_offsets.data(),
                     att_t_rows.data(),  att_t_edge.data()};
  ctx.global_ids = gpu && d.global_ids ? gids_dev.data() : d.global_ids;
  ctx.global_nodes = d.global_nodes;
}

void ModelInputs::drop_features() {
  xnorm = Matrix();
  x_dev = Matrix();
  x = {};
}

void ModelInputs::aggregate_input_once(Backend& be, const ModelConfig& model, GraphContext& ctx) {
  if (!reads_input_only_aggregated(model)) return;
  x_agg = aggregate_input(be, ctx, x);
  ctx.input_aggregate = x_agg.view();
  const MatrixView shape{nullptr, x.rows, x.cols, x.device};
  drop_features();  // the mapped features stay mapped: pages nothing reads again
  x = shape;
}

std::unique_ptr<RankInput> open_dataset_rank(const fs::path& dataset) {
  auto in = std::make_unique<RankInput>();
  const GraphDataset& d = in->dataset.emplace(read_graph_dataset(dataset));
  RankData& r = in->data;
  r.source = dataset.string();
  r.dataset_fingerprint = read_dataset_meta(dataset).value("fingerprint", "");
  r.owned = r.all = r.inner = r.global_nodes = d.num_nodes();
  r.directed = d.directed;
  r.graph = d.graph.view();
  in->degree.resize(static_cast<std::size_t>(r.owned));
  for (std::int64_t v = 0; v < r.owned; ++v)
    in->degree[std::size_t(v)] = std::int32_t(r.graph.degree(NodeId(v)));
  r.degree = in->degree.data();
  r.features = {const_cast<float*>(d.features.data()), r.owned, d.num_features, Device::kCpu};
  take_labels(r, d);
  r.default_split = default_split(d.splits, "");
  r.original_ids = d.original_ids.empty() ? nullptr : d.original_ids.data();
  return in;
}

std::unique_ptr<RankInput> open_parts_rank(const fs::path& parts, Communicator& comm) {
  const json meta = read_parts_meta(parts);
  const int k = meta.at("k").get<int>();
  if (k != comm.size())
    throw ParamError(parts.string() + " has " + std::to_string(k) + " parts but the job has " +
                     std::to_string(comm.size()) + " rank" + (comm.size() == 1 ? "" : "s") +
                     ": run it with mpirun -np " + std::to_string(k));
  auto in = std::make_unique<RankInput>();
  // Validated; refuses a part of another partition.
  const Part& p = in->part.emplace(read_part(parts, comm.rank()));
  check_peers_agree(parts, p, comm);
  if (comm.rank() == 0) in->original = read_original_ids(parts);
  RankData& r = in->data;
  r.source = (parts / ("part-" + std::to_string(p.rank))).string();
  // A parts folder written without its dataset's fingerprint resumes checkpoints of itself only.
  r.dataset_fingerprint = meta.value("dataset_fingerprint", "");
  if (r.dataset_fingerprint.empty())
    r.dataset_fingerprint = "parts " + meta.value("fingerprint", "");
  r.partition = meta.value("fingerprint", "");
  r.owned = p.num_owned;
  r.all = p.num_owned + p.num_halo;
  r.inner = p.num_inner;
  r.global_nodes = p.global_nodes;
  r.directed = meta.at("dataset").value("directed", false);
  r.graph = p.graph.view();
  r.degree = p.degree.data();
  r.global_ids = p.global_ids.data();
  r.features = {const_cast<float*>(p.features.data()), p.num_owned, p.num_features, Device::kCpu};
  take_labels(r, p);
  r.default_split = default_split(p.splits, meta.at("options").value("split", ""));
  r.plan = p.halo_plan();
  r.original_ids = in->original.empty() ? nullptr : in->original.data();
  return in;
}

}  // namespace halo

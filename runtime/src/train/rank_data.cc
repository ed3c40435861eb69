// Reading what one rank computes on (rank_data.h): a dataset for one process, or its part of
// PARTS, checked against the other ranks' parts.
#include "train/rank_data.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "cluster/supervisor_loop.h"
#include "halo/graph/error.h"
#include "halo/runtime/train/trainer.h"

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

// "rank 1 on node2", or "rank 1" when the host is unknown.
std::string rank_on(int rank, const std::vector<std::string>& record) {
  return "rank " + std::to_string(rank) + (record.empty() ? "" : " on " + record[0]);
}

}  // namespace

void check_inputs_agree(const std::string& source, const std::vector<InputField>& fields,
                        const std::string& hint, Communicator& comm) {
  if (comm.size() < 2) return;
  // This rank's record: its host, then each value (fingerprints and counts: short; clipped so
  // that a damaged file cannot make the message long). Lines never hold a '\n' of their own.
  const auto clip = [](const std::string& v) {
    std::string c = v.substr(0, 100);
    std::replace(c.begin(), c.end(), '\n', ' ');
    return c;
  };
  std::string mine = clip(host_name());
  for (const InputField& f : fields) mine += "\n" + clip(f.value);
  std::vector<std::size_t> counts;
  const std::vector<char> all = comm.gather(mine.data(), mine.size(), 0, &counts);
  std::string verdict;
  if (comm.rank() == 0) {
    std::vector<std::vector<std::string>> recs;
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      std::vector<std::string> rec;
      std::string s(all.data() + at, counts[r]);
      at += counts[r];
      for (std::size_t b = 0;;) {
        const std::size_t e = s.find('\n', b);
        rec.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) break;
        b = e + 1;
      }
      rec.resize(fields.size() + 1);
      recs.push_back(std::move(rec));
    }
    const auto values = [&](std::size_t r) {
      return std::vector<std::string>(recs[r].begin() + 1, recs[r].end());
    };
    // The reference: the values most ranks hold (on a tie, the lowest rank's).
    std::size_t ref = 0, best = 0;
    for (std::size_t r = 0; r < recs.size(); ++r) {
      const std::size_t n = std::size_t(std::count_if(recs.begin(), recs.end(), [&](const auto& o) {
        return o.size() == recs[r].size() &&
               std::equal(o.begin() + 1, o.end(), recs[r].begin() + 1);
      }));
      if (n > best) best = n, ref = r;
    }
    std::vector<std::size_t> differ;
    for (std::size_t r = 0; r < recs.size(); ++r)
      if (values(r) != values(ref)) differ.push_back(r);
    if (!differ.empty()) {
      const std::size_t d = differ[0];
      std::string what;
      for (std::size_t f = 0; f < fields.size(); ++f)
        if (recs[d][f + 1] != recs[ref][f + 1])
          what += std::string(what.empty() ? "its " : ", its ") + fields[f].name + " is " +
                  recs[d][f + 1] + " (" + recs[ref][f + 1] + " on rank " + std::to_string(ref) +
                  ")";
      verdict = source + ": " + rank_on(int(d), recs[d]) + " reads another input than " +
                rank_on(int(ref), recs[ref]) +
                (differ.size() > 1 ? " (and " + std::to_string(differ.size() - 1) + " more rank" +
                                         (differ.size() > 2 ? "s" : "") + " differ)"
                                   : "") +
                ": " + what + "; " + hint;
    }
  }
  std::vector<char> msg(4096, 0);
  if (comm.rank() == 0) verdict.copy(msg.data(), msg.size() - 1);
  comm.broadcast(msg.data(), msg.size(), 0);
  if (msg[0]) throw InputError(std::string(msg.data()));
}

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
  // Before any work: every node's copy of PARTS is of the same partition of the same dataset (a
  // node holding another dataset's meta.json and parts would pass every other check when the
  // structure is the same, and the job would silently train on a mix).
  check_inputs_agree(parts.string(),
                     {{"dataset fingerprint", meta.value("dataset_fingerprint", "")},
                      {"partition fingerprint", meta.value("fingerprint", "")},
                      {"parts", std::to_string(k)}},
                     "every node must hold copies of the same PARTS (meta.json and its part-r "
                     "folders from one halo partition)",
                     comm);
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

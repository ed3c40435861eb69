// The full-graph trainer's metrics, per-rank figures, summary (and its log record) and predictions
// (train_report.h).
#include "train/train_report.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "halo/gnn/device.h"
#include "halo/gnn/metrics.h"
#include "halo/graph/npz.h"
#include "halo/graph/progress.h"

namespace halo {
using json = nlohmann::json;

json TrainSummary::to_json() const {
  json j = {{"type", "summary"},
            {"metric", metric},
            {"valid_mean", valid_mean},
            {"valid_std", valid_std},
            {"test_mean", test_mean},
            {"test_std", test_std},
            {"runs", runs.size()},
            {"epoch_time_median_s", epoch_time_median_s},
            {"peak_rss_mb", peak_rss_mb},
            {"ranks", ranks},
            {"matmul_precision", matmul_precision}};
  if (!bf16_kernel.empty()) j["bf16_kernel"] = bf16_kernel;
  if (peak_gpu_mb > 0) j["peak_gpu_mb"] = peak_gpu_mb;
  if (ranks > 1) {
    if (!rank_peak_rss_mb.empty()) {
      j["rank_owned_rows"] = rank_owned_rows;
      j["rank_halo_rows"] = rank_halo_rows;
      j["rank_peak_rss_mb"] = rank_peak_rss_mb;
    }
    j["halo_bytes_per_epoch"] = halo_bytes_per_epoch;
    j["setup_halo_bytes"] = setup_halo_bytes;
    j["halo_wait_s"] = halo_wait_s;
    j["allreduce_s"] = allreduce_s;
    j["compute_s"] = compute_s;
  }
  return j;
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

void mean_std(const std::vector<double>& v, double* mean, double* sd) {
  *mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double s = 0;
  for (double x : v) s += (x - *mean) * (x - *mean);
  *sd = v.size() > 1 ? std::sqrt(s / double(v.size() - 1)) : 0.0;  // sample std, as numpy's ddof=1
}

// Every rank's owned and halo rows and peak memory to rank 0's summary, and the peaks (host,
// and GPU when gpu) over ranks to every rank's. Collective.
void gather_memory(Communicator& comm, std::int64_t owned, std::int64_t halo, bool gpu,
                   TrainSummary& summary) {
  double rss = double(peak_rss_bytes()) / (1 << 20);
  if (comm.size() > 1) {  // every rank's part and peak, on rank 0
    const double mine[3] = {double(owned), double(halo), rss};
    const std::vector<char> all = comm.gather(mine, sizeof mine, 0, nullptr);
    const auto* f = reinterpret_cast<const double*>(all.data());
    for (std::size_t r = 0; comm.rank() == 0 && r < std::size_t(comm.size()); ++r) {
      summary.rank_owned_rows.push_back(std::int64_t(f[3 * r]));
      summary.rank_halo_rows.push_back(std::int64_t(f[3 * r + 1]));
      summary.rank_peak_rss_mb.push_back(f[3 * r + 2]);
    }
  }
  comm.allreduce(&rss, 1, ReduceOp::kMax);
  summary.peak_rss_mb = rss;
  if (gpu) {
    double g = double(device_peak_bytes()) / (1 << 20);
    comm.allreduce(&g, 1, ReduceOp::kMax);
    summary.peak_gpu_mb = g;
  }
}

}  // namespace

std::array<double, 3> split_metrics(Communicator& comm, const MatrixView& logits,
                                    const std::int32_t* labels, std::int64_t label_cols,
                                    bool multilabel, const Split& split, MetricBuffers& bufs) {
  const std::array<const Array<NodeId>*, 3> sets = {&split.train, &split.valid, &split.test};
  std::array<double, 3> res{};
  if (!multilabel) {
    std::int64_t c[6];
    for (int i = 0; i < 3; ++i) {
      const Counts k = accuracy_counts(logits, labels, sets[std::size_t(i)]->data(),
                                       std::int64_t(sets[std::size_t(i)]->size()));
      c[2 * i] = k.correct;
      c[2 * i + 1] = k.total;
    }
    comm.allreduce(c, 6);
    for (int i = 0; i < 3; ++i)
      res[std::size_t(i)] = c[2 * i + 1] ? double(c[2 * i]) / double(c[2 * i + 1]) : 0.0;
    return res;
  }
  // ROC-AUC ranks all rows together: gather the rows' scores and labels on rank 0.
  const std::int64_t t = label_cols;
  for (int i = 0; i < 3; ++i) {
    const Array<NodeId>& rows = *sets[std::size_t(i)];
    bufs.scores.resize(rows.size() * std::size_t(t));
    bufs.labels.resize(rows.size() * std::size_t(t));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::copy_n(logits.row(rows[r]), t, bufs.scores.data() + r * std::size_t(t));
      std::copy_n(labels + std::int64_t(rows[r]) * t, t, bufs.labels.data() + r * std::size_t(t));
    }
    const std::vector<char> s = comm.gather(bufs.scores.data(), bufs.scores.size() * 4, 0, nullptr);
    const std::vector<char> l = comm.gather(bufs.labels.data(), bufs.labels.size() * 4, 0, nullptr);
    double v = 0;
    if (comm.rank() == 0)
      v = rocauc(reinterpret_cast<const float*>(s.data()),
                 reinterpret_cast<const std::int32_t*>(l.data()), std::int64_t(s.size() / 4) / t,
                 t);
    comm.allreduce(&v, 1);  // rank 0's value to every rank (the others add 0)
    res[std::size_t(i)] = v;
  }
  return res;
}

void gather_figures(Communicator& comm, const RankFigures& fig, FigureHistory& history, json& rec) {
  const std::vector<char> all = comm.gather(&fig, sizeof fig, 0, nullptr);
  if (comm.rank() != 0) return;
  const auto* f = reinterpret_cast<const RankFigures*>(all.data());
  json per = json::array();
  double total = 0, wait = 0, ar = 0, comp = 0;
  for (int r = 0; r < comm.size(); ++r) {
    per.push_back({{"rank", r},
                   {"halo_bytes", f[r].bytes},
                   {"eval_halo_bytes", f[r].eval_bytes},
                   {"compute_s", f[r].compute_s},
                   {"halo_wait_s", f[r].wait_s},
                   {"allreduce_s", f[r].allreduce_s},
                   {"epoch_time_s", f[r].epoch_s}});
    total += f[r].bytes;
    wait = std::max(wait, f[r].wait_s);
    ar = std::max(ar, f[r].allreduce_s);
    comp = std::max(comp, f[r].compute_s);
  }
  rec["halo_bytes"] = total;
  rec["ranks"] = per;
  history.bytes.push_back(total);
  history.wait.push_back(wait);
  history.allreduce.push_back(ar);
  history.compute.push_back(comp);
}

TrainSummary summarize_runs(Communicator& comm, const std::vector<RunState>& states,
                            const FigureHistory& history, std::int64_t owned, std::int64_t halo,
                            bool gpu) {
  TrainSummary summary;
  std::vector<double> valid, test, times;
  for (const auto& st : states) {
    summary.runs.push_back(st.result);
    valid.push_back(st.result.best_valid);
    test.push_back(st.result.test_at_best);
    times.insert(times.end(), st.result.epoch_seconds.begin(), st.result.epoch_seconds.end());
  }
  mean_std(valid, &summary.valid_mean, &summary.valid_std);
  mean_std(test, &summary.test_mean, &summary.test_std);
  summary.epoch_time_median_s = median(times);
  gather_memory(comm, owned, halo, gpu, summary);
  summary.halo_bytes_per_epoch = median(history.bytes);
  summary.halo_wait_s = median(history.wait);
  summary.allreduce_s = median(history.allreduce);
  summary.compute_s = median(history.compute);
  return summary;
}

void write_predictions(Communicator& comm, const std::filesystem::path& path,
                       const MatrixView& eval, bool multilabel, std::int64_t label_cols,
                       const NodeId* global_ids, const NodeId* original_ids) {
  const std::int64_t n = eval.rows;
  std::vector<std::int32_t> classes;
  if (!multilabel) {
    const auto am = argmax_rows(eval);
    classes.assign(am.begin(), am.end());
  }
  // Every rank sends (global id, row) for its owned rows; rank 0 places them.
  const std::size_t t = multilabel ? std::size_t(label_cols) : 1;
  std::vector<NodeId> ids(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v) ids[std::size_t(v)] = global_ids ? global_ids[v] : NodeId(v);
  const std::vector<char> gid = comm.gather(ids.data(), ids.size() * sizeof(NodeId), 0, nullptr);
  const std::vector<char> val =
      multilabel ? comm.gather(eval.data, std::size_t(eval.size()) * 4, 0, nullptr)
                 : comm.gather(classes.data(), classes.size() * 4, 0, nullptr);
  if (comm.rank() != 0) return;
  const auto* g = reinterpret_cast<const NodeId*>(gid.data());
  const std::size_t total = gid.size() / sizeof(NodeId);
  auto place = [&](std::size_t i) {
    const std::size_t v = std::size_t(g[i]);
    return original_ids ? std::size_t(original_ids[v]) : v;
  };
  if (multilabel) {
    const auto* sc = reinterpret_cast<const float*>(val.data());
    std::vector<float> outv(total * t);
    for (std::size_t i = 0; i < total; ++i)
      for (std::size_t c = 0; c < t; ++c)
        outv[place(i) * t + c] = 1.f / (1.f + std::exp(-sc[i * t + c]));
    write_npy(path, outv.data(), std::uint64_t(total), t);
  } else {
    const auto* cl = reinterpret_cast<const std::int32_t*>(val.data());
    std::vector<std::int64_t> outv(total, 0);
    for (std::size_t i = 0; i < total; ++i) outv[place(i)] = cl[i];
    write_npy(path, outv.data(), std::uint64_t(total), 0);
  }
}

}  // namespace halo

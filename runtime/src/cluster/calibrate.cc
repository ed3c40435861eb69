// The speed measurement of calibrate.h.
#include "halo/runtime/cluster/calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "halo/gnn/attention.h"
#include "halo/gnn/backend.h"
#include "halo/gnn/graph_op.h"
#include "halo/gnn/model.h"
#include "halo/graph/csr.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/runtime/comm/halo_exchange.h"
#include "train/rank_data.h"

namespace halo {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Stands in for the halo exchange: moves nothing (the halo rows keep what they hold) and counts
// the widths the model exchanges, which is what one halo row costs on the wire.
class CountingExchanger final : public Exchanger {
 public:
  bool counting = false;
  std::int64_t floats = 0;  // per halo row, since counting began
  void forward_begin(const MatrixView& all, int, bool training) override {
    if (counting && training) floats += all.cols;
  }
  void forward_end() override {}
  void backward_begin(const MatrixView& all, int) override {
    if (counting) floats += all.cols;
  }
  void backward_end(const MatrixView&) override {}
  void allreduce(double*, std::int64_t) override {}
};

// n owned rows over n + n / 4 columns, each row with about `degree` distinct random columns
// other than itself (seeded: every rank times the same graph).
Csr synthetic_graph(std::int64_t n, std::int64_t cols, int degree, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, cols - 1);
  std::vector<EdgeId> offsets(std::size_t(n) + 1, 0);
  std::vector<NodeId> indices;
  indices.reserve(std::size_t(n) * std::size_t(degree));
  std::vector<NodeId> row;
  for (std::int64_t v = 0; v < n; ++v) {
    row.clear();
    for (int e = 0; e < degree; ++e) {
      const std::int64_t c = pick(rng);
      if (c != v) row.push_back(NodeId(c));
    }
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    indices.insert(indices.end(), row.begin(), row.end());
    offsets[std::size_t(v) + 1] = EdgeId(indices.size());
  }
  Csr g;
  g.num_nodes = n;
  g.offsets = Array<EdgeId>(std::move(offsets));
  g.indices = Array<NodeId>(std::move(indices));
  return g;
}

struct StepTime {
  double seconds = 0;     // median training step
  std::int64_t nnz = 0;   // stored nonzeros of the graph it ran on
  double row_floats = 0;  // floats one halo row moved per step
};

// The median training step (forward and backward) of `cfg` on a synthetic graph.
StepTime time_steps(Backend& be, const ModelConfig& cfg, std::int64_t n, int degree, int epochs,
                    std::uint64_t seed) {
  const std::int64_t halo = std::max<std::int64_t>(1, n / 4), cols = n + halo;
  const Csr g = synthetic_graph(n, cols, degree, seed);
  std::vector<std::int32_t> deg(std::size_t(cols), std::max(1, degree));
  const GraphOperator gcn = gcn_operator(g.view(), cols, deg.data());
  const GraphOperator mean = mean_operator(g.view(), cols);
  AttentionGraph att;  // only GAT reads it
  if (cfg.kind == ModelKind::kGat) att = attention_graph(g.view(), cols);
  std::vector<NodeId> ids(static_cast<std::size_t>(cols));
  std::iota(ids.begin(), ids.end(), NodeId(0));
  CountingExchanger counter;
  GraphContext ctx;
  ctx.owned = n;
  ctx.all = cols;
  ctx.gcn = gcn.view();
  ctx.mean = mean.view();
  ctx.attention = att.view();
  ctx.global_ids = ids.data();
  ctx.global_nodes = cols;
  ctx.exchange = &counter;
  ctx.static_input = true;  // as the trainer: the features never change
  Matrix x(n, cfg.in);
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  Matrix dlogits(n, cfg.out, 1.f / float(n));
  Model model(cfg, seed);
  std::vector<double> times;
  for (int e = 0; e <= epochs; ++e) {
    counter.counting = e > 0;  // the first step also exchanges the static first layer's input
    Stopwatch clock;
    model.forward(be, ctx, x.view(), true, seed, e);
    model.backward(be, ctx, dlogits.view());
    be.wait_for_queued_work();
    if (e > 0) times.push_back(clock.seconds());
  }
  return {median(times), g.num_edges(), double(counter.floats) / std::max(1, epochs)};
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Rank r's partner in each round of a round-robin tournament of k ranks (the circle method: with
// k odd, one rank sits each round out, -1): every pair meets exactly once, the pairs of a round
// are disjoint.
std::vector<int> partners(int k, int r) {
  const int n = k % 2 ? k + 1 : k;  // with a dummy rank n - 1 when k is odd
  std::vector<int> out;
  for (int round = 0; round < n - 1; ++round) {
    int partner = -1;
    for (int i = 0; i < n / 2; ++i) {
      const int a = i == 0 ? n - 1 : (round + i) % (n - 1);
      const int b = (round - i + n - 1) % (n - 1);
      if (a == r) partner = b;
      if (b == r) partner = a;
    }
    out.push_back(partner < k ? partner : -1);
  }
  return out;
}

// Bytes per second to each rank (own entry 0): the ranks pair up (a round-robin tournament, all
// pairs of a round at once, as the halo exchange loads every link together), and each pair
// swaps link_bytes in both directions; the fastest of the repeats, so that a measurement sees
// this pair's link alone.
std::vector<double> measure_links(Communicator& comm, const CalibrateOptions& c) {
  const int k = comm.size(), r = comm.rank();
  std::vector<double> bw(std::size_t(k), 0.0);
  std::vector<char> send(c.link_bytes, 1), recv(c.link_bytes);
  for (const int peer : partners(k, r)) {
    double best = 1e30;
    for (int i = 0; i < std::max(1, c.link_repeats); ++i) {
      comm.barrier();
      if (peer < 0) continue;  // this rank sits the round out
      Stopwatch clock;
      const PeerBlock out{peer, send.data(), send.size()};
      const PeerBlock in{peer, recv.data(), recv.size()};
      comm.exchange({&out, 1}, {&in, 1}, /*tag=*/7)->wait();
      // Other traffic and a throttled peer only ever slow a transfer down.
      best = std::min(best, clock.seconds());
    }
    if (peer >= 0) bw[std::size_t(peer)] = double(c.link_bytes) / std::max(best, 1e-9);
  }
  return bw;
}

}  // namespace

SpeedTable calibrate_speed(Communicator& comm, const TrainOptions& opt, std::int64_t in,
                           std::int64_t out, double degree, const CalibrateOptions& c) {
  if (opt.device != DeviceChoice::kCpu)
    throw ParamError("--calibrate measures the CPU backend only (--device cpu)");
  if (c.rows < 16 || c.epochs < 1) throw ParamError("calibration needs rows >= 16, epochs >= 1");
  set_rank_threads(opt.threads, comm.size());
  Backend& be = cpu_backend();
  be.set_matmul_precision(opt.matmul_precision);
  ModelConfig cfg = opt.model;
  cfg.in = in;
  cfg.out = out;
  cfg.check();
  // Two degrees around the dataset's mean separate the per-row work (transforms, activations,
  // batch norm) from the per-nonzero work (aggregation).
  const int lo = std::max(2, int(std::lround(degree / 2))),
            hi = std::max(lo + 8, int(std::lround(degree * 2)));
  const StepTime a = time_steps(be, cfg, c.rows, lo, c.epochs, opt.seed + 1);
  const StepTime b = time_steps(be, cfg, c.rows, hi, c.epochs, opt.seed + 2);
  RankSpeed me;
  me.host = host_name();
  me.threads = omp_get_max_threads();
  me.nonzero_s = std::max(0.0, (b.seconds - a.seconds) / double(b.nnz - a.nnz));
  // The per-row figure from the mean of both fits; never below a tenth of the plain per-row time
  // (timing noise must not make rows look free).
  const double row_a = (a.seconds - me.nonzero_s * double(a.nnz)) / double(c.rows);
  const double row_b = (b.seconds - me.nonzero_s * double(b.nnz)) / double(c.rows);
  me.row_s = std::max((row_a + row_b) / 2, 0.1 * a.seconds / double(c.rows));
  me.link_bytes_per_s = measure_links(comm, c);
  const double row_bytes = a.row_floats * double(value_bytes(opt.halo_dtype));

  // Rank 0 gathers every rank's row.
  const std::string text = to_json(me).dump();
  std::vector<std::size_t> counts;
  const std::vector<char> all = comm.gather(text.data(), text.size(), 0, &counts);
  SpeedTable table;
  if (comm.rank() != 0) return table;
  table.halo_row_bytes = row_bytes;
  table.model = {{"kind", to_string(cfg.kind)},
                 {"layers", cfg.layers},
                 {"in", cfg.in},
                 {"hidden", cfg.hidden},
                 {"out", cfg.out},
                 {"batch_norm", cfg.batch_norm},
                 {"halo_dtype", to_string(opt.halo_dtype)},
                 {"degree", degree},
                 {"rows", c.rows}};
  std::size_t at = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t count : counts) {
    rows.push_back(nlohmann::json::parse(all.begin() + std::ptrdiff_t(at),
                                         all.begin() + std::ptrdiff_t(at + count)));
    at += count;
  }
  const std::size_t k = rows.size();
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = i + 1; j < k; ++j) {  // the faster of the two measurements of a link
      const double v = std::max(rows[i]["link_bytes_per_s"][j].get<double>(),
                                rows[j]["link_bytes_per_s"][i].get<double>());
      rows[i]["link_bytes_per_s"][j] = v;
      rows[j]["link_bytes_per_s"][i] = v;
    }
  nlohmann::json j = table.to_json();
  j["ranks"] = rows;
  return speed_table_from_json(j, "the calibration");
}

}  // namespace halo

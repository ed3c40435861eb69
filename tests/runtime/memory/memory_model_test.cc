// The per-rank memory model: a hand-computed golden, the terms adding up, how each term scales
// with each input, and the model against the measured peak RSS of real training runs (one
// process, and two ranks under mpirun) on a small generated graph.
#include "halo/runtime/memory/memory_model.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../../test_util.h"
#include "halo/graph/error.h"
#include "halo/runtime/temporal/tgn.h"
#include "halo/runtime/train/presets.h"

namespace halo {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

// A one-process GCN: 1,000 rows, 5,000 nonzeros, 16 features, 8 hidden, 4 classes, 2 layers.
RankShape small_rank() {
  RankShape r;
  r.owned = 1000;
  r.nnz = 5000;
  r.features = 16;
  r.train_rows = 500;
  r.split_rows = 1000;
  r.part = false;
  r.global_nodes = 1000;
  return r;
}

ModelShape small_model() {
  ModelShape m;
  m.layers = 2;
  m.hidden = 8;
  m.out = 4;
  m.dropout = 0.5f;
  return m;
}

// Four ranks' worth of one part: halo rows, send lists.
RankShape part_rank() {
  RankShape r = small_rank();
  r.halo = 400;
  r.send_rows = 350;
  r.ranks = 4;
  r.rank = 1;
  r.part = true;
  r.global_nodes = 4000;
  return r;
}

TEST(MemoryModel, HandComputedGolden) {
  const MemoryEstimate e = estimate_rank_memory(small_rank(), small_model());
  // Both layers transform first (8 <= 16, 4 <= 8): no A X is kept.
  EXPECT_EQ(e.features, 4 * 1000 * 16);
  EXPECT_EQ(e.graph,
            8 * 1001 + 4 * 5000 + 4 * 1000 /*degree*/ + 4 * 1000 /*labels*/ + 4 * 1000 /*split*/);
  // GCN adds 1,000 self-loops. On the whole undirected graph the operator is its own transpose;
  // a directed graph's has a transpose with as many entries.
  EXPECT_EQ(e.op, 8 * 1001 + 8 * (5000 + 1000));
  RankShape directed = small_rank();
  directed.directed = true;
  EXPECT_EQ(estimate_rank_memory(directed, small_model()).op, 8 * 1001 * 2 + 16 * (5000 + 1000));
  EXPECT_EQ(e.activations, 4 * 1000 * 8 /*saved*/ + 4 * 1000 * 4 /*logits*/);
  EXPECT_EQ(e.gradients,
            4 * 1000 * 8 /*grad[0]*/ + 4 * 1000 * 4 /*tail*/ + 4 * 1000 * 4 /*dlogits*/);
  EXPECT_EQ(e.exchange, 0);
  const std::int64_t params = 16 * 8 + 8 + 8 * 4 + 4;
  // value, grad, m, v; the best model and the temporary that replaces it
  EXPECT_EQ(e.weights, 4 * (4 * params + 2 * params));
  EXPECT_EQ(e.transient, 8 * 500);  // the loss's per-row vector
  EXPECT_EQ(e.predictions, 0);
  EXPECT_EQ(e.overhead, process_overhead_bytes(1));
}

TEST(MemoryModel, TermsAddUpToTheTotal) {
  for (const RankShape& r : {small_rank(), part_rank()}) {
    ModelShape m = small_model();
    m.batch_norm = true;
    m.input_dropout = true;
    m.predictions = true;
    const MemoryEstimate e = estimate_rank_memory(r, m);
    std::int64_t sum = 0;
    for (const auto& [name, bytes] : e.terms()) {
      EXPECT_GE(bytes, 0) << name;
      sum += bytes;
    }
    EXPECT_EQ(sum, e.total());
    EXPECT_EQ(e.terms().size(), 10u);
    EXPECT_EQ(sum, e.features + e.graph + e.op + e.activations + e.gradients + e.exchange +
                       e.weights + e.transient + e.predictions + e.overhead);
  }
}

TEST(MemoryModel, FeaturesScaleWithOwnedRowsTimesWidth) {
  RankShape r = small_rank();
  const ModelShape m = small_model();
  const MemoryEstimate a = estimate_rank_memory(r, m);
  r.features *= 2;
  const MemoryEstimate b = estimate_rank_memory(r, m);
  EXPECT_EQ(b.features, 2 * a.features);
  EXPECT_EQ(b.op, a.op);
  ModelShape norm = m;
  norm.norm_features = true;  // the trainer's row-normalised copy
  EXPECT_EQ(estimate_rank_memory(r, norm).features, 2 * b.features);
}

TEST(MemoryModel, OperatorAndGraphScaleWithNonzeros) {
  RankShape r = small_rank();
  const ModelShape m = small_model();
  const MemoryEstimate a = estimate_rank_memory(r, m);
  r.nnz += 1000;
  const MemoryEstimate b = estimate_rank_memory(r, m);
  EXPECT_EQ(b.op - a.op, 8 * 1000);  // index and value, the operator being its own transpose
  RankShape part = part_rank();
  const MemoryEstimate pa = estimate_rank_memory(part, m);
  part.nnz += 1000;
  EXPECT_EQ(estimate_rank_memory(part, m).op - pa.op, 16 * 1000);  // and the transpose's
  EXPECT_EQ(b.graph - a.graph, 4 * 1000);                          // the mapped indices
  EXPECT_EQ(b.activations, a.activations);
  ModelShape sage = m;
  sage.sage = true;  // the mean operator has no self-loops
  EXPECT_EQ(estimate_rank_memory(r, sage).op, 8 * 1001 * 2 + 16 * 6000);
}

TEST(MemoryModel, HaloRowsWidenEverySlabThatHoldsThem) {
  RankShape r = part_rank();
  const ModelShape m = small_model();
  const MemoryEstimate a = estimate_rank_memory(r, m);
  r.halo += 100;
  const MemoryEstimate b = estimate_rank_memory(r, m);
  // saved (1 hidden layer x 8) + grad[0] (8) + tail (4) per halo row; operator transpose offsets;
  // degree; owned-row terms unchanged.
  EXPECT_EQ(b.activations - a.activations, 4 * 100 * 8);
  EXPECT_EQ(b.gradients - a.gradients, 4 * 100 * (8 + 4));
  EXPECT_EQ(b.op - a.op, 8 * 100);
  EXPECT_EQ(b.graph - a.graph, 4 * 100);
  EXPECT_EQ(b.features, a.features);
  EXPECT_EQ(b.exchange,
            a.exchange);  // exact f32: halo rows land in place, only send rows are buffered
}

TEST(MemoryModel, ExchangeBuffersScaleWithSendRowsAndWidth) {
  RankShape r = part_rank();
  ModelShape m = small_model();
  const MemoryEstimate a = estimate_rank_memory(r, m);
  EXPECT_EQ(a.exchange,
            4 * 350 * 8 + 4 * 350 * 4);  // packed rows (widest 8), received gradients (layer 1: 4)
  r.send_rows *= 2;
  EXPECT_EQ(estimate_rank_memory(r, m).exchange, 2 * a.exchange);
  RankShape one = small_rank();
  EXPECT_EQ(estimate_rank_memory(one, m).exchange, 0);  // one process exchanges nothing
  // Staleness keeps every layer's payloads in flight: more than the exact path's two buffers.
  m.halo_staleness = 1;
  EXPECT_GT(estimate_rank_memory(part_rank(), m).exchange, a.exchange);
}

TEST(MemoryModel, AGrowingBufferHoldsItsOldBlockWhileTheNewOneFills) {
  // Three layers 16 -> 8 -> 8 -> 4: backward receives the last layer's 4-wide gradients first,
  // then layer 1's 8-wide ones, so in the first epoch recv_buf_ grows from 350 x 4 to 350 x 8
  // floats with the old block still alive (the measured peak of products-sized runs showed it).
  const RankShape r = part_rank();
  ModelShape m = small_model();
  m.layers = 3;
  EXPECT_EQ(estimate_rank_memory(r, m).exchange,
            4 * 350 * (8 /*send_buf_*/ + 4 /*old recv_buf_*/ + 8 /*new*/));
}

TEST(MemoryModel, Bf16HalvesTheWireNotTheBuffers) {
  // bf16 payloads are half as wide, but the exact path then buffers both directions and widens
  // the received gradients to float: with as many send rows as halo rows it costs what f32 does.
  RankShape r = part_rank();
  r.send_rows = r.halo;
  ModelShape m = small_model();
  const std::int64_t f32 = estimate_rank_memory(r, m).exchange;
  m.halo_bf16 = true;
  EXPECT_EQ(estimate_rank_memory(r, m).exchange, f32);
}

TEST(MemoryModel, HiddenWidthAndLayers) {
  const RankShape r = part_rank();
  ModelShape m = small_model();
  const MemoryEstimate a = estimate_rank_memory(r, m);
  m.layers = 3;  // one more hidden layer: one more saved all x hidden slab
  const MemoryEstimate b = estimate_rank_memory(r, m);
  EXPECT_EQ(b.activations - a.activations, 4 * 1400 * 8);
  EXPECT_EQ(b.gradients, a.gradients);
  // value, grad, m, v; the all-reduce buffer; the best model and its temporary
  EXPECT_EQ(b.weights - a.weights, 4 * (4 + 1 + 2) * (8 * 8 + 8));
  m = small_model();
  m.hidden = 32;  // wider than the 16 features: the first layer aggregates first and keeps A X
  const MemoryEstimate c = estimate_rank_memory(r, m);
  EXPECT_EQ(c.activations, 4 * 1400 * 32 + 4 * 1000 * 16 + 4 * 1000 * 4);
}

TEST(MemoryModel, BatchNormKeepsDropoutMasksAsBits) {
  const RankShape r = small_rank();
  ModelShape m = small_model();
  const std::int64_t plain = estimate_rank_memory(r, m).activations;
  m.batch_norm = true;
  // One 64-bit word per row holds the mask of 8 columns.
  EXPECT_EQ(estimate_rank_memory(r, m).activations - plain, 8 * 1000 * 1);
  m.dropout = 0;
  EXPECT_EQ(estimate_rank_memory(r, m).activations, plain);
  m.input_dropout = true;  // no dropout at all: no copy of the input either
  EXPECT_EQ(estimate_rank_memory(r, m).activations, plain);
}

TEST(MemoryModel, PredictionsCostRankZeroTheWholeGraph) {
  RankShape r = part_rank();
  ModelShape m = small_model();
  m.predictions = true;
  EXPECT_EQ(estimate_rank_memory(r, m).predictions, 12 * 1000);
  r.rank = 0;
  EXPECT_EQ(estimate_rank_memory(r, m).predictions, 8 * 1000 + 16 * 4000);
}

// The address-space limit (ulimit -v) bounds what the process can get, as MemAvailable and the
// cgroup do: under a limit 1 GiB above its mapped size, at most 1 GiB is available.
TEST(MemoryModel, AvailableMemoryHonoursTheAddressSpaceLimit) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  std::ifstream st("/proc/self/status");
  std::string key;
  long long kib = 0;
  while (st >> key)
    if (key == "VmSize:" && st >> kib) break;
  ASSERT_GT(kib, 0);
  const rlimit tight{rlim_t(kib) * 1024 + (rlim_t(1) << 30), old.rlim_max};
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < tight.rlim_cur)
    GTEST_SKIP() << "the hard limit is below the test's";
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  const AvailableMemory a = available_memory();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  EXPECT_LE(a.bytes, std::int64_t(1) << 30);
  EXPECT_GT(a.bytes, std::int64_t(900) << 20);  // the test mapped next to nothing meanwhile
  EXPECT_EQ(a.source, "its address-space limit (ulimit -v)");
}

// The TGN estimate names the allocation that sizes a run: 65,536-wide memories make the GRU's
// weights (3 m (3 m + de + t) parameters, four floats each) the largest term; 100,000 evaluation
// negatives the batch buffers; a hundred million nodes the node state. Defaults on UCI's shape
// stay far below 1 GiB, and the terms add up to the total.
TEST(MemoryModel, TgnEstimateNamesTheLargestAllocation) {
  TgnOptions o;
  const TgnStreamShape uci = tgn_stream_shape(1899, 59835, 1);
  const TgnMemoryEstimate small = estimate_tgn_memory(uci, o, 1);
  EXPECT_LT(small.total(), std::int64_t(1) << 30);
  std::int64_t sum = 0;
  for (const auto& [name, bytes] : small.terms()) sum += bytes;
  EXPECT_EQ(sum, small.total());
  o.memory_dim = 65536;
  const TgnMemoryEstimate wide = estimate_tgn_memory(uci, o, 1);
  EXPECT_STREQ(wide.largest(), "weights");
  const double m = 65536, gru = 3 * m * (3 * m + 1 + 100);
  EXPECT_GE(double(wide.weights), 16 * gru);
  EXPECT_NE(tgn_memory_message(wide, o, 1899, "uci").find("--memory-dim 65536"), std::string::npos);
  o.memory_dim = 100;
  o.eval_negatives = 100000;
  const TgnMemoryEstimate negatives = estimate_tgn_memory(uci, o, 1);
  EXPECT_STREQ(negatives.largest(), "batch buffers");
  // (2 + N) queries per event of a 200-event batch, each with 10 neighbour slots.
  EXPECT_GE(double(negatives.batch), 4.0 * 200 * 100002 * 10 * 201);
  o.skip_eval = true;  // no evaluation: training's 3 queries per event
  EXPECT_LT(estimate_tgn_memory(uci, o, 1).batch, negatives.batch / 1000);
  o.skip_eval = false;
  o.eval_negatives = 0;
  EXPECT_STREQ(estimate_tgn_memory(tgn_stream_shape(100000000, 59835, 1), o, 1).largest(),
               "node state");
  // An exact-parallel rank embeds a quarter of each batch; a segmented one whole batches.
  TgnOptions big;
  big.batch_size = 20000;
  const std::int64_t one = estimate_tgn_memory(uci, big, 1).batch;
  EXPECT_LT(estimate_tgn_memory(uci, big, 4).batch, one / 2);
  big.parallel = TgnParallel::kSegments;
  EXPECT_EQ(estimate_tgn_memory(uci, big, 4).batch, one);
}

// The GPU estimates of --memory-on: with the node state on the device it grows with the nodes
// (memory and message tables) and the events (edge features); in host memory only the batch's
// staged rows remain, so a 100 M-node stream needs no more GPU memory than a 1 M-node one. auto
// keeps the device where it fits 90% of the free memory (over the ranks sharing the GPU) and moves
// to the host where it does not; an asked placement that does not fit, or auto where neither does,
// is one line naming the bytes and what to change.
TEST(MemoryModel, TgnMemoryOnPicksThePlacementThatFitsTheGpu) {
  TgnOptions o;
  const TgnStreamShape uci = tgn_stream_shape(1899, 59835, 1),
                       huge = tgn_stream_shape(100000000, 1000000, 172);
  const TgnGpuEstimate dev = estimate_tgn_gpu_memory(huge, o, 1, TgnMemoryOn::kDevice),
                       host = estimate_tgn_gpu_memory(huge, o, 1, TgnMemoryOn::kHost);
  // 100 M nodes x (memory, two message tables of 100 floats, 172 edge features) on the device.
  EXPECT_GE(double(dev.node_state), 1e8 * 4 * (300 + 172));
  EXPECT_EQ(dev.stream, std::int64_t(4) * 1000000 * 172);
  EXPECT_EQ(dev.staged, 0);
  EXPECT_EQ(host.node_state, 0);
  EXPECT_EQ(host.stream, 0);
  EXPECT_GT(host.staged, 0);
  EXPECT_EQ(host.weights, dev.weights);
  EXPECT_EQ(host.batch, dev.batch);
  std::int64_t sum = 0;
  for (const auto& [name, bytes] : dev.terms()) sum += bytes;
  EXPECT_EQ(sum, dev.total());
  const TgnGpuEstimate fewer =
      estimate_tgn_gpu_memory(tgn_stream_shape(1000000, 1000000, 172), o, 1, TgnMemoryOn::kHost);
  EXPECT_EQ(host.total(), fewer.total());  // beyond a batch's reach, nodes cost the GPU nothing
  const std::size_t gib = std::size_t(1) << 30;
  // auto: device when it fits, host when only that fits; free 0 (unknown) keeps the device.
  EXPECT_EQ(choose_tgn_memory(uci, o, 1, 80 * gib, 1, "uci"), TgnMemoryOn::kDevice);
  EXPECT_EQ(choose_tgn_memory(huge, o, 1, 80 * gib, 1, "big"), TgnMemoryOn::kHost);
  EXPECT_EQ(choose_tgn_memory(huge, o, 1, 0, 1, "big"), TgnMemoryOn::kDevice);
  // Ranks sharing one GPU share its free memory.
  const std::size_t just = std::size_t(double(dev.total()) / 0.9) + gib;
  EXPECT_EQ(choose_tgn_memory(huge, o, 1, just, 1, "big"), TgnMemoryOn::kDevice);
  EXPECT_EQ(choose_tgn_memory(huge, o, 1, just, 2, "big"), TgnMemoryOn::kHost);
  o.memory_on = TgnMemoryChoice::kHost;  // asked: host even where the device fits
  EXPECT_EQ(choose_tgn_memory(uci, o, 1, 80 * gib, 1, "uci"), TgnMemoryOn::kHost);
  o.memory_on = TgnMemoryChoice::kDevice;
  try {
    choose_tgn_memory(huge, o, 1, 80 * gib, 1, "big");
    ADD_FAILURE() << "--memory-on device of 100 M nodes on 80 GiB was accepted";
  } catch (const ParamError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    for (const char* part : {"big: --memory-on device needs about", "100000000 nodes",
                             "80.00 GiB free", "use --memory-on host (about"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
  }
  o.memory_on = TgnMemoryChoice::kAuto;  // neither fits: the batch is what to lower
  o.batch_size = 200000;
  try {
    choose_tgn_memory(huge, o, 1, gib, 1, "big");
    ADD_FAILURE() << "a run that fits neither placement was accepted";
  } catch (const ParamError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("even with the node state in host memory"), std::string::npos) << what;
    EXPECT_NE(what.find("lower --batch-size"), std::string::npos) << what;
  }
}

TEST(MemoryModel, RefusesImpossibleShapes) {
  RankShape r = small_rank();
  r.halo = -1;
  EXPECT_THROW(estimate_rank_memory(r, small_model()), ParamError);
  ModelShape m = small_model();
  m.layers = 0;
  EXPECT_THROW(estimate_rank_memory(small_rank(), m), ParamError);
  r = small_rank();
  r.rank = 1;  // of a one-rank job
  EXPECT_THROW(estimate_rank_memory(r, small_model()), ParamError);
}

// ---- Against measurements ------------------------------------------------------------------

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string halo() { return test::configured("HALO_BINARY", HALO_BINARY); }

// Every rank's peak RSS from the summary record of a --log file (rank_peak_rss_mb; one
// process: peak_rss_mb), in bytes.
std::vector<double> logged_peaks(const fs::path& log) {
  std::ifstream f(log);
  std::vector<double> mb;
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("type", "") != "summary") continue;
    mb = j.contains("rank_peak_rss_mb") ? j.at("rank_peak_rss_mb").get<std::vector<double>>()
                                        : std::vector<double>{j.at("peak_rss_mb").get<double>()};
  }
  for (double& x : mb) x *= double(1 << 20);
  return mb;
}

// A generated graph whose modelled terms (~150 MiB) are large next to the process's constant
// (~12 MiB), so the comparison tests the terms rather than the constant.
class Graph : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-memory-model-" + std::to_string(getpid()));
  }
  void SetUp() override {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);  // containers may forbid CMA
    setenv("HALO_SUPERVISE", "0", 1);
    fs::create_directories(dir());
    const std::string d = dir().string();
    ASSERT_EQ(
        shell(halo() +
              " generate --nodes 60000 --avg-degree 20 --features 64 --classes 16 --seed 2 -o " +
              d + "/g > /dev/null 2>&1"),
        0);
    ASSERT_EQ(shell(halo() + " partition " + d + "/g -k 2 -o " + d + "/g-2 > /dev/null 2>&1"), 0);
  }
  void TearDown() override { fs::remove_all(dir()); }
};
const auto* const kGraph = ::testing::AddGlobalTestEnvironment(new Graph);

// Trains `path` (under `launcher`) and compares every rank's measured peak with its prediction.
void expect_within(double tolerance, const std::string& launcher, const fs::path& path,
                   const TrainOptions& o, const std::string& flags) {
  TempDir t;
  const std::string cmd = launcher + halo() + " train " + path.string() + " " + flags +
                          " --epochs 2 --eval-every 2 --quiet --log " + (t / "log.jsonl").string() +
                          " > " + (t / "out.txt").string() + " 2>&1";
  ASSERT_EQ(shell(cmd), 0) << cmd << "\n" << test::read_bytes(t / "out.txt");
  const JobShape job = job_shape(path, o);
  const std::vector<double> measured = logged_peaks(t / "log.jsonl");
  ASSERT_EQ(measured.size(), job.ranks.size());
  for (std::size_t r = 0; r < measured.size(); ++r) {
    const double predicted = double(estimate_rank_memory(job.ranks[r], job.model).total());
    EXPECT_NEAR(predicted / measured[r], 1.0, tolerance)
        << "rank " << r << ": measured " << measured[r] / (1 << 20) << " MiB, predicted "
        << predicted / (1 << 20) << " MiB";
  }
}

// The tolerance: on the arxiv- and products-sized graphs the model lands within 1% of every
// rank (docs/BENCHMARKS.md; measured here: +1.3% for one process, -1.8% for two ranks). On this
// small graph the process constant (about 12 MiB for one process and 21 MiB under mpirun with
// this machine's libraries) is 8-15% of the total, so 15% leaves room for another machine's
// constant without hiding a missing slab (each is 15-30 MiB here).
constexpr double kTolerance = 0.15;

TEST(MemoryModelMeasured, OneProcessWithinTolerance) {
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);  // its shape (3 layers, batch norm, dropout), narrower
  o.model.hidden = 128;
  expect_within(kTolerance, "", Graph::dir() / "g", o,
                "--preset ogbn-arxiv-gcn --hidden 128 --threads 2");
}

TEST(MemoryModelMeasured, TwoRanksWithinTolerance) {
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);
  o.model.hidden = 128;
  const std::string mpirun =
      test::configured("HALO_MPIEXEC", HALO_MPIEXEC) + " --oversubscribe --bind-to none -np 2 ";
  expect_within(kTolerance, mpirun, Graph::dir() / "g-2", o,
                "--preset ogbn-arxiv-gcn --hidden 128 --threads 1");
}

}  // namespace
TEST(MemoryModelMeasured, GatOneProcessAndTwoRanksWithinTolerance) {
  // The arxiv GAT's shape (3 layers, 3 heads averaged at the output, residual), narrower: z, el,
  // er and alpha per layer, the edge slab, d(Z) and the attention graph instead of an operator.
  TrainOptions o;
  apply_preset("ogbn-arxiv-gat", o);
  o.model.hidden = 32;
  o.model.attn_dropout = 0.2f;
  const std::string flags = "--preset ogbn-arxiv-gat --hidden 32 --attn-dropout 0.2 ";
  expect_within(kTolerance, "", Graph::dir() / "g", o, flags + "--threads 2");
  const std::string mpirun =
      test::configured("HALO_MPIEXEC", HALO_MPIEXEC) + " --oversubscribe --bind-to none -np 2 ";
  expect_within(kTolerance, mpirun, Graph::dir() / "g-2", o, flags + "--threads 1");
}

// `halo tgn train --dry-run` against the measured peak of the same run, on UCI's first 12,000
// events: the default model (attention), one whose batch buffers dominate (20 neighbours,
// batches of 600), and JODIE (no attention: the GRU and the node state). The batch terms are
// sized for the widest batch (every slot a distinct neighbour), so the model may land above a
// measurement; measured on this machine: within +8% / -8% on UCI and its variants, +4% on a
// 2 M-event stream of 500,000 nodes (docs/BENCHMARKS.md "TGN memory model"). 20% leaves room for
// another machine's allocator and libraries without hiding a missing term (the batch buffers
// are 40-85% of these totals).
TEST(MemoryModelMeasured, TgnDryRunWithinToleranceOfTheMeasuredPeak) {
  TempDir t;
  {
    std::ifstream in(test::bundled("uci-messages/graph.txt"));
    std::ofstream out(t / "uci.txt");
    std::string line;
    for (int kept = 0; kept < 12000 && std::getline(in, line);)
      if (!line.empty() && line[0] != '%') {
        out << line << "\n";
        ++kept;
      }
  }
  const std::string uci = (t / "uci").string();
  ASSERT_EQ(shell(halo() + " convert " + (t / "uci.txt").string() + " --format konect -o " + uci +
                  " > /dev/null 2>&1"),
            0);
  for (const std::string flags : {"", " --neighbors 20 --batch-size 600", " --model jodie"}) {
    const std::string run =
        halo() + " tgn train " + uci + flags + " --epochs 1 --max-train-events 2000 --threads 2 -q";
    ASSERT_EQ(shell(run + " --dry-run > " + (t / "dry.txt").string() + " 2>&1"), 0) << run;
    const std::string dry = test::read_bytes(t / "dry.txt");
    const std::size_t at = dry.rfind("peak ");
    ASSERT_NE(at, std::string::npos) << dry;
    const double predicted = std::stod(dry.substr(at + 5)) * double(1 << 20);
    ASSERT_EQ(shell(run + " --log " + (t / "log.jsonl").string() + " > /dev/null 2>&1"), 0) << run;
    const std::vector<double> measured = logged_peaks(t / "log.jsonl");
    ASSERT_EQ(measured.size(), 1u);
    EXPECT_NEAR(predicted / measured[0], 1.0, 0.20)
        << flags << ": measured " << measured[0] / (1 << 20) << " MiB, predicted "
        << predicted / (1 << 20) << " MiB\n"
        << dry;
    std::filesystem::remove(t / "log.jsonl");
  }
}

}  // namespace halo

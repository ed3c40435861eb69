// TGN training: the whole batch's gradients (memory update through the GRU, time encoding,
// attention over neighbours, predictor) against finite differences, and the leakage rule.
#include "halo/runtime/temporal/tgn.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../../test_util.h"
#include "halo/gnn/device.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/graph/error.h"
#include "halo/graph/formats.h"
#include "halo/graph/npz.h"
#include "halo/runtime/comm/comm.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

// The first `events` events of the bundled UCI messages, as a temporal dataset.
std::filesystem::path uci_prefix(const TempDir& t, int events) {
  std::ifstream in(test::bundled("uci-messages/graph.txt"));
  std::ofstream out(t / "uci.txt");
  std::string line;
  for (int i = 0; i < events + 2 && std::getline(in, line); ++i)
    out << line << "\n";  // 2 comment lines
  out.close();
  ConvertOptions o;
  o.format = Format::kKonect;
  convert(t / "uci.txt", t / "uci", o);
  return t / "uci";
}

TEST(Tgn, BatchGradientsMatchFiniteDifferences) {
  TempDir t;
  const auto ds = uci_prefix(t, 400);
  TgnOptions o;
  o.memory_dim = 6;
  o.embed_dim = 5;
  o.time_dim = 4;
  o.neighbors = 3;
  o.batch_size = 8;  // small batches: gradients large enough for a float central difference
  o.lr = 1e-2f;
  // 20 batches of history first, so memory, messages and neighbours all carry gradient. Doubling
  // the neighbour-memory or the own-memory gradient path makes this ~1.0 (checked by mutation).
  EXPECT_LT(tgn_gradient_check(ds, o, 20), 5e-2) << "attn";
  for (const char* e : {"identity", "time"}) {  // the other embeddings, through the same batch
    o.embedding = parse_tgn_embedding(e);
    EXPECT_LT(tgn_gradient_check(ds, o, 20), 5e-2) << e;
  }
  // The mean aggregator: several messages per node, time encodings averaged.
  o.embedding = TgnEmbedding::kAttention;
  o.aggregator = TgnAggregator::kMean;
  EXPECT_LT(tgn_gradient_check(ds, o, 20), 5e-2) << "mean aggregator";
}

// With DistTGL's static memory the attention reads [memory ‖ S]: S's gradient (every row the
// batch reads: queries and neighbours) and the attention's, now wider, match finite
// differences too. Dropping the neighbours', the queries' or the merger's S gradient makes
// this fail (checked by mutation).
TEST(Tgn, StaticMemoryGradientsMatchFiniteDifferences) {
  TempDir t;
  const auto ds = uci_prefix(t, 400);
  TgnOptions o;
  o.memory_dim = 6;
  o.embed_dim = 5;
  o.time_dim = 4;
  o.static_memory = 4;
  o.neighbors = 3;
  o.batch_size = 8;
  o.lr = 1e-2f;
  EXPECT_LT(tgn_gradient_check(ds, o, 20), 5e-2);
  // S alone, tighter: its query path is a small part of its gradient (worst ~5e-4 here;
  // dropping the query path gives ~3e-2).
  EXPECT_LT(tgn_gradient_check(ds, o, 20, "static_memory"), 5e-3);
}

// The small model both leakage tests run: batches of 20, 4 neighbours.
TgnOptions leakage_options() {
  TgnOptions o;
  o.memory_dim = 8;
  o.embed_dim = 8;
  o.time_dim = 8;
  o.neighbors = 4;
  o.batch_size = 20;
  o.lr = 1e-2f;
  return o;
}

// A stream where 3 events share each timestamp (ties inside batches), for the leakage tests.
struct TieStream {
  std::int64_t nodes = 30, events = 200;
  std::vector<NodeId> src, dst;
  std::vector<double> time;
  TieStream() {
    for (std::int64_t e = 0; e < events; ++e) {
      src.push_back(NodeId((e * 7) % nodes));
      dst.push_back(NodeId((e * 11 + 3) % nodes));
      time.push_back(double(e / 3));  // NOLINT(bugprone-integer-division): ties of 3 on purpose
    }
  }
  // Scores of the events of batch `batch` after training on the ones before it.
  std::vector<float> scores(const TgnOptions& o, std::int64_t batch) const {
    return tgn_batch_scores(nodes, src, dst, time, o, batch);
  }
  // Events from `first` on rewired.
  void rewire(std::int64_t first) {
    for (std::int64_t e = first; e < events; ++e) {
      src[std::size_t(e)] = NodeId((e * 13 + 1) % nodes);
      dst[std::size_t(e)] = NodeId((e * 5 + 2) % nodes);
    }
  }
};

// TGN's protocol (the default): an event sees the events strictly before its own time, earlier
// events of its batch included, never itself, a tie or anything later. Rewiring event 110 and
// every later one leaves the scores of batch events 100..109 (times up to 110's) bit for bit the
// same, and changes some later event's score (so the test can tell).
TEST(Tgn, AnEventSeesOnlyEventsStrictlyBeforeItsTime) {
  const TgnOptions o = leakage_options();
  const std::int64_t batch = 5;
  const std::vector<float> base = TieStream().scores(o, batch);
  ASSERT_EQ(base.size(), 20u);
  TieStream later;
  later.rewire(batch * 20 + 10);
  ASSERT_EQ(later.time[109], later.time[110]);  // a tie: 109 must not see 110 either
  const std::vector<float> other = later.scores(o, batch);
  for (std::size_t i = 0; i < 10; ++i)
    EXPECT_EQ(base[i], other[i]) << "event " << i << " of the batch";
  bool later_changed = false;
  for (std::size_t i = 11; i < base.size(); ++i)
    later_changed = later_changed || base[i] != other[i];
  EXPECT_TRUE(later_changed) << "events after 110 should see it as a neighbour";
}

// With --neighbors-before batch a batch's predictions depend only on earlier batches: changing
// other events of the batch, or any later event, leaves every other prediction of the batch bit
// for bit the same; changing an event of the previous batch does not (so the test can tell).
TEST(Tgn, ABatchNeverSeesItsOwnEvents) {
  TgnOptions o = leakage_options();
  o.neighbors_before = TgnNeighborsBefore::kBatch;
  const std::int64_t batch = 5;
  const TieStream stream;
  const std::vector<float> base = stream.scores(o, batch);
  ASSERT_EQ(base.size(), 20u);
  // Rewire the batch's last event and every later one.
  TieStream later;
  later.rewire(batch * 20 + 19);
  const std::vector<float> other = later.scores(o, batch);
  for (std::size_t i = 0; i + 1 < base.size(); ++i)
    EXPECT_EQ(base[i], other[i]) << "event " << i << " of the batch";
  // Control: an event of the previous batch does change them.
  TieStream previous;
  previous.src[std::size_t(batch * 20 - 1)] =
      NodeId((stream.src[std::size_t(batch * 20 - 1)] + 1) % stream.nodes);
  const std::vector<float> earlier = previous.scores(o, batch);
  bool changed = false;
  for (std::size_t i = 0; i < base.size(); ++i) changed = changed || base[i] != earlier[i];
  EXPECT_TRUE(changed);
}

// MRR against N negatives: the first negative is the AP negative, so AP and AUC do not move;
// the reciprocal ranks lie in [1/(N+1), 1] and a trained model ranks the positive first more
// often than chance (chance: the mean of 1/r over r = 1..N+1).
TEST(Tgn, EvalNegativesAddMrrWithoutChangingAp) {
  TempDir t;
  const auto ds = uci_prefix(t, 2000);
  TgnOptions o;
  o.memory_dim = o.embed_dim = o.time_dim = 32;
  o.epochs = 2;
  o.quiet = true;
  o.lr = 1e-3f;
  LocalCommunicator comm;
  std::ostringstream sink;
  const TgnSummary plain = train_tgn(ds, comm, o, sink);
  o.eval_negatives = 9;
  const TgnSummary ranked = train_tgn(ds, comm, o, sink);
  EXPECT_EQ(plain.test_ap, ranked.test_ap);
  EXPECT_EQ(plain.test_auc, ranked.test_auc);
  EXPECT_EQ(plain.test_mrr, 0.0);
  double chance = 0;
  for (int r = 1; r <= 10; ++r) chance += 1.0 / r / 10.0;
  EXPECT_GE(ranked.test_mrr, 0.1);
  EXPECT_LE(ranked.test_mrr, 1.0);
  EXPECT_GT(ranked.test_mrr, chance + 0.1) << "chance " << chance;
}

// Resuming with o is refused because the checkpoint's options differ (not for another reason,
// such as a parameter list of another length).
void expect_other_options(const fs::path& ds, Communicator& comm, const TgnOptions& o) {
  std::ostringstream sink;
  try {
    train_tgn(ds, comm, o, sink);
    ADD_FAILURE() << "resumed a checkpoint of other options";
  } catch (const ParamError& e) {
    EXPECT_NE(std::string(e.what()).find("made with other options"), std::string::npos) << e.what();
  }
}

// A run stopped after epoch 2 and resumed from its checkpoint ends exactly where an uninterrupted
// 3-epoch run does; a checkpoint made with other options is refused.
TEST(Tgn, ResumeFromACheckpointIsBitIdentical) {
  TempDir t;
  const auto ds = uci_prefix(t, 1500);
  TgnOptions o;
  o.memory_dim = o.embed_dim = o.time_dim = 16;
  o.quiet = true;
  o.lr = 1e-3f;
  o.epochs = 3;
  LocalCommunicator comm;
  std::ostringstream sink;
  const TgnSummary whole = train_tgn(ds, comm, o, sink);
  o.checkpoint = t / "ck";
  o.epochs = 2;
  train_tgn(ds, comm, o, sink);
  EXPECT_TRUE(std::filesystem::exists(t / "ck" / "epoch-2" / "meta.json"));
  EXPECT_FALSE(std::filesystem::exists(t / "ck" / "epoch-1"));  // older epochs are removed
  o.epochs = 3;
  o.resume = true;
  const TgnSummary resumed = train_tgn(ds, comm, o, sink);
  EXPECT_EQ(resumed.valid_ap, whole.valid_ap);
  EXPECT_EQ(resumed.test_ap, whole.test_ap);
  EXPECT_EQ(resumed.test_inductive_ap, whole.test_inductive_ap);
  EXPECT_EQ(resumed.best_epoch, whole.best_epoch);
  o.lr = 2e-3f;
  EXPECT_THROW(train_tgn(ds, comm, o, sink), ParamError);
  // A checkpoint made without the static memory is not resumed with it: S would start at zero
  // in the middle of a run.
  o.lr = 1e-3f;
  o.static_memory = 4;
  expect_other_options(ds, comm, o);
}

// The static memory is saved and restored with the other parameters: a resumed run with it
// ends bit for bit where an uninterrupted one does, and its checkpoint is not resumed without.
TEST(Tgn, ResumeWithStaticMemoryIsBitIdentical) {
  TempDir t;
  const auto ds = uci_prefix(t, 1000);
  TgnOptions o;
  o.memory_dim = o.embed_dim = o.time_dim = 16;
  o.static_memory = 8;
  o.quiet = true;
  o.lr = 1e-3f;
  o.epochs = 2;
  LocalCommunicator comm;
  std::ostringstream sink;
  const TgnSummary whole = train_tgn(ds, comm, o, sink);
  o.checkpoint = t / "ck";
  o.epochs = 1;
  train_tgn(ds, comm, o, sink);
  o.epochs = 2;
  o.resume = true;
  const TgnSummary resumed = train_tgn(ds, comm, o, sink);
  EXPECT_EQ(resumed.valid_ap, whole.valid_ap);
  EXPECT_EQ(resumed.test_ap, whole.test_ap);
  EXPECT_EQ(resumed.test_inductive_ap, whole.test_inductive_ap);
  o.static_memory = 0;
  expect_other_options(ds, comm, o);
}

// `halo tgn split`: the archive holds the dataset's events and exactly the split training makes
// (chronological_split with the same seed), the negatives are the fixed evaluation ones (the same
// for every seed), and Python's zipfile finds every member's CRC right.
TEST(TgnSplit, TheExportIsTheSplitTrainingUses) {
  TempDir t;
  const auto ds = uci_prefix(t, 3000);
  const TemporalDataset d = read_temporal_dataset(ds);
  const std::size_t n = std::size_t(d.num_events());
  std::vector<std::int64_t> neg0;
  for (const std::uint64_t seed : {0ull, 7ull}) {
    const fs::path out = t / ("split-" + std::to_string(seed) + ".npz");
    write_tgn_split(ds, out, seed);
    const NpzReader z(out);  // checks every entry's CRC and sizes as it reads
    EXPECT_EQ(z.keys(),
              (std::vector<std::string>{"src", "dst", "t", "msg", "nodes", "train_end", "valid_end",
                                        "train_keep", "inductive", "eval_neg"}));
    const auto src = read_all_as<std::int64_t>(z, "src"), dst = read_all_as<std::int64_t>(z, "dst");
    const auto time = read_all_as<double>(z, "t");
    ASSERT_EQ(src.size(), n);
    for (std::size_t e = 0; e < n; ++e) {
      ASSERT_EQ(src[e], d.src[e]) << e;
      ASSERT_EQ(dst[e], d.dst[e]) << e;
      ASSERT_EQ(time[e], d.time[e]) << e;
    }
    EXPECT_EQ(z.info("msg").shape, (std::vector<std::uint64_t>{n, 0}));
    EXPECT_EQ(read_all_as<std::int64_t>(z, "nodes"), (std::vector<std::int64_t>{d.num_nodes}));
    const TemporalSplit s = chronological_split(d.num_nodes, d.src.data(), d.dst.data(),
                                                d.time.data(), d.num_events(), seed);
    EXPECT_EQ(read_all_as<std::int64_t>(z, "train_end"), (std::vector<std::int64_t>{s.train_end}));
    EXPECT_EQ(read_all_as<std::int64_t>(z, "valid_end"), (std::vector<std::int64_t>{s.valid_end}));
    const auto keep = read_all_as<std::int32_t>(z, "train_keep");
    const auto inductive = read_all_as<std::int32_t>(z, "inductive");
    EXPECT_EQ(std::vector<std::int32_t>(s.train_keep.begin(), s.train_keep.end()), keep);
    EXPECT_EQ(std::vector<std::int32_t>(s.inductive.begin(), s.inductive.end()), inductive);
    const auto neg = read_all_as<std::int64_t>(z, "eval_neg");
    ASSERT_EQ(neg.size(), n);
    for (std::int64_t v : neg) ASSERT_TRUE(v >= 0 && v < d.num_nodes) << v;
    if (neg0.empty()) neg0 = neg;
    EXPECT_EQ(neg, neg0) << "the evaluation negatives do not depend on the seed";
    if (std::system("python3 -c 'import zipfile' 2> /dev/null") == 0) {
      const std::string check =
          "python3 -c 'import sys, zipfile; sys.exit(zipfile.ZipFile(sys.argv[1])"
          ".testzip() is not None)' " +
          out.string();
      EXPECT_EQ(std::system(check.c_str()), 0) << "Python's zipfile refuses " << out;
    }
  }
  EXPECT_THROW(write_tgn_split(ds, ds / "inside.npz", 0), Error);  // never into the dataset
  EXPECT_FALSE(fs::exists(ds / "inside.npz"));
}

}  // namespace
}  // namespace halo

namespace halo {
namespace {

// The epoch records of a run's JSON-lines log, in order.
std::vector<nlohmann::json> epoch_records(const fs::path& log) {
  std::ifstream in(log);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("type", "") == "epoch") out.push_back(std::move(j));
  }
  return out;
}

// One training of opt on ds on `device`; its epoch records (and its summary, when asked).
std::vector<nlohmann::json> train_on(const fs::path& ds, TgnOptions o, DeviceChoice device,
                                     const fs::path& log, TgnSummary* summary = nullptr) {
  o.device = device;
  o.log = log;
  LocalCommunicator comm;
  std::ostringstream sink;
  const TgnSummary s = train_tgn(ds, comm, o, sink);
  if (summary) *summary = s;
  return epoch_records(log);
}

// Epoch by epoch, b's loss within loss_rtol of a's (relative) and its test AP within ap_atol.
void expect_close_epochs(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                         double loss_rtol, double ap_atol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double la = a[e]["loss"], lb = b[e]["loss"];
    EXPECT_LT(std::abs(la - lb) / std::abs(la), loss_rtol)
        << what << " epoch " << e + 1 << ": " << la << " vs " << lb;
    EXPECT_NEAR(a[e]["test_ap"].get<double>(), b[e]["test_ap"].get<double>(), ap_atol)
        << what << " epoch " << e + 1;
  }
}

// TGN and JODIE on the GPU train the CPU's model: the same weights, negatives and batches, so
// the per-epoch losses agree to rounding (1e-3 relative) and the test AP within 0.005 (skipped
// without a GPU; tools/gpu-check.sh runs it).
TEST(TgnGpu, UciOnCudaMatchesCpu) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  TempDir t;
  const auto ds = uci_prefix(t, 6000);
  for (const char* model : {"tgn", "jodie"}) {
    TgnOptions o;
    o.model = parse_tgn_model(model);
    o.epochs = 3;
    o.lr = 1e-3f;
    o.quiet = true;
    const auto cpu = train_on(ds, o, DeviceChoice::kCpu, t / "cpu.jsonl");
    TgnSummary on_gpu;
    const auto gpu = train_on(ds, o, DeviceChoice::kCuda, t / "gpu.jsonl", &on_gpu);
    EXPECT_GT(on_gpu.peak_gpu_mb, 0.0) << model;  // the summary reports the GPU's peak
    EXPECT_TRUE(on_gpu.to_json().contains("peak_gpu_mb")) << model;
    ASSERT_EQ(cpu.size(), 3u) << model;
    ASSERT_EQ(gpu.size(), 3u) << model;
    expect_close_epochs(cpu, gpu, 1e-3, 5e-3, std::string(model) + ", cpu then gpu");
    EXPECT_GT(gpu.back()["test_ap"].get<double>(), 0.6) << model;  // it learned something
    fs::remove(t / "cpu.jsonl");
    fs::remove(t / "gpu.jsonl");
  }
}

// --memory-on host on a GPU: the node state in host memory, each batch's rows staged through
// pinned memory, trains the device placement's model (the same ops on the same floats: losses
// within 1e-5 relative, test AP within 1e-3) with less GPU memory (skipped without a GPU).
TEST(TgnGpu, HostMemoryOnCudaMatchesDeviceMemory) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  TempDir t;
  const auto ds = uci_prefix(t, 6000);
  for (const char* model : {"tgn", "jodie"}) {
    TgnOptions o;
    o.model = parse_tgn_model(model);
    o.epochs = 2;
    o.lr = 1e-3f;
    o.quiet = true;
    TgnSummary on_device, on_host;
    o.memory_on = TgnMemoryChoice::kDevice;
    const auto dev = train_on(ds, o, DeviceChoice::kCuda, t / "dev.jsonl", &on_device);
    o.memory_on = TgnMemoryChoice::kHost;
    const auto host = train_on(ds, o, DeviceChoice::kCuda, t / "host.jsonl", &on_host);
    EXPECT_EQ(on_device.memory_on, "device") << model;
    EXPECT_EQ(on_host.memory_on, "host") << model;
    ASSERT_EQ(dev.size(), 2u) << model;
    ASSERT_EQ(host.size(), 2u) << model;
    expect_close_epochs(dev, host, 1e-5, 1e-3, std::string(model) + ", device then host");
    EXPECT_LT(on_host.peak_gpu_mb, on_device.peak_gpu_mb) << model;
    fs::remove(t / "dev.jsonl");
    fs::remove(t / "host.jsonl");
  }
}

// --memory-on host with --device cpu runs the staging path (the batch's rows gathered from the
// tables and the indices renamed) and trains the same run bit for bit, for TGN with either
// aggregator and JODIE; auto on the CPU keeps the tables in place. Runs everywhere.
TEST(TgnHostMemory, StagingOnTheCpuTrainsTheSameRunBitForBit) {
  TempDir t;
  const auto ds = uci_prefix(t, 1500);
  for (const auto& [model, aggregator] :
       {std::pair{"tgn", "last"}, std::pair{"tgn", "mean"}, std::pair{"jodie", "last"}}) {
    TgnOptions o;
    o.model = parse_tgn_model(model);
    o.aggregator = parse_tgn_aggregator(aggregator);
    o.memory_dim = o.embed_dim = o.time_dim = 16;
    o.epochs = 2;
    o.lr = 1e-3f;
    o.quiet = true;
    TgnSummary in_place, staged;
    const auto a = train_on(ds, o, DeviceChoice::kCpu, t / "a.jsonl", &in_place);
    o.memory_on = TgnMemoryChoice::kHost;
    const auto b = train_on(ds, o, DeviceChoice::kCpu, t / "b.jsonl", &staged);
    EXPECT_EQ(in_place.memory_on, "device") << model;
    EXPECT_EQ(staged.memory_on, "host") << model;
    ASSERT_EQ(a.size(), 2u) << model;
    ASSERT_EQ(b.size(), 2u) << model;
    for (std::size_t e = 0; e < a.size(); ++e)
      for (const char* field : {"loss", "valid_ap", "test_ap", "test_auc"})
        EXPECT_EQ(a[e][field], b[e][field])
            << model << " " << aggregator << " epoch " << e + 1 << " " << field;
    fs::remove(t / "a.jsonl");
    fs::remove(t / "b.jsonl");
  }
}

// Checkpoints on the GPU: saved from device memory and restored into it, a resumed CUDA run ends
// bit for bit where an uninterrupted one does (the CUDA ops are deterministic), and the same
// checkpoint resumes on the CPU, since the parameters are the same floats (skipped without a
// GPU).
TEST(TgnGpu, ACudaCheckpointResumesOnCudaAndOnTheCpu) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  TempDir t;
  const auto ds = uci_prefix(t, 1500);
  TgnOptions o;
  o.memory_dim = o.embed_dim = o.time_dim = 16;
  o.quiet = true;
  o.lr = 1e-3f;
  o.epochs = 3;
  const auto whole = train_on(ds, o, DeviceChoice::kCuda, t / "whole.jsonl");
  ASSERT_EQ(whole.size(), 3u);
  o.checkpoint = t / "ck";
  o.epochs = 2;
  train_on(ds, o, DeviceChoice::kCuda, t / "first.jsonl");
  fs::copy(t / "ck", t / "ck-cpu", fs::copy_options::recursive);
  o.epochs = 3;
  o.resume = true;
  const auto resumed = train_on(ds, o, DeviceChoice::kCuda, t / "resumed.jsonl");
  ASSERT_FALSE(resumed.empty());
  EXPECT_EQ(resumed.back()["loss"], whole.back()["loss"]);
  EXPECT_EQ(resumed.back()["test_ap"], whole.back()["test_ap"]);
  o.checkpoint = t / "ck-cpu";
  const auto on_cpu = train_on(ds, o, DeviceChoice::kCpu, t / "cpu.jsonl");
  ASSERT_FALSE(on_cpu.empty());
  const double a = whole.back()["loss"], b = on_cpu.back()["loss"];
  EXPECT_LT(std::abs(a - b) / std::abs(a), 1e-3) << "cuda " << a << " resumed on the cpu " << b;
}

// Without a GPU, --device cuda is a ParamError naming why there is none (before the dataset is
// read: a missing one is not what the error is about), and auto trains on the CPU, bit for bit
// the CPU's run (skipped with a GPU).
TEST(TgnGpu, DeviceCudaWithoutAGpuIsRefusedAndAutoIsTheCpu) {
  const CudaDevices devs = cuda_devices();
  if (devs.count > 0) GTEST_SKIP() << "a GPU is visible";
  TempDir t;
  TgnOptions o;
  o.device = DeviceChoice::kCuda;
  o.quiet = true;
  LocalCommunicator comm;
  std::ostringstream sink;
  try {
    train_tgn(t / "no-such-dataset", comm, o, sink);
    ADD_FAILURE() << "expected an error";
  } catch (const ParamError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--device cuda"), std::string::npos) << what;
    EXPECT_NE(what.find(devs.reason), std::string::npos) << what;
  }
  const auto ds = uci_prefix(t, 1500);
  o.memory_dim = o.embed_dim = o.time_dim = 16;
  o.epochs = 2;
  o.lr = 1e-3f;
  TgnSummary on_cpu;
  const auto cpu = train_on(ds, o, DeviceChoice::kCpu, t / "cpu.jsonl", &on_cpu);
  EXPECT_EQ(on_cpu.peak_gpu_mb, 0.0);  // a CPU run holds no GPU memory and does not report any
  EXPECT_FALSE(on_cpu.to_json().contains("peak_gpu_mb"));
  const auto any = train_on(ds, o, DeviceChoice::kAuto, t / "auto.jsonl");
  ASSERT_EQ(cpu.size(), 2u);
  ASSERT_EQ(any.size(), 2u);
  for (std::size_t e = 0; e < cpu.size(); ++e) {
    EXPECT_EQ(cpu[e]["loss"], any[e]["loss"]) << "epoch " << e + 1;
    EXPECT_EQ(cpu[e]["test_ap"], any[e]["test_ap"]) << "epoch " << e + 1;
  }
}

// The spellings halo tgn's enum options accept (and its summary records), and the exact line for
// one they do not.
TEST(OptionSpellings, TgnOptions) {
  test::expect_spellings<TgnModel>(
      {{TgnModel::kTgn, "tgn"}, {TgnModel::kJodie, "jodie"}, {TgnModel::kEdgebank, "edgebank"}},
      parse_tgn_model, [](TgnModel m) { return to_string(m); });
  EXPECT_EQ(test::param_error([] { parse_tgn_model("dyrep"); }),
            "unknown --model 'dyrep' (expected tgn, jodie or edgebank)");
  test::expect_spellings<TgnEmbedding>({{TgnEmbedding::kAttention, "attn"},
                                        {TgnEmbedding::kIdentity, "identity"},
                                        {TgnEmbedding::kTime, "time"}},
                                       parse_tgn_embedding,
                                       [](TgnEmbedding e) { return to_string(e); });
  EXPECT_EQ(test::param_error([] { parse_tgn_embedding("attention"); }),
            "unknown --embedding 'attention' (expected attn, identity or time)");
  test::expect_spellings<TgnAggregator>(
      {{TgnAggregator::kLast, "last"}, {TgnAggregator::kMean, "mean"}}, parse_tgn_aggregator,
      [](TgnAggregator a) { return to_string(a); });
  EXPECT_EQ(test::param_error([] { parse_tgn_aggregator("sum"); }),
            "unknown --aggregator 'sum' (expected last or mean)");
  test::expect_spellings<TgnParallel>(
      {{TgnParallel::kExact, "exact"}, {TgnParallel::kSegments, "segments"}}, parse_tgn_parallel,
      [](TgnParallel p) { return to_string(p); });
  EXPECT_EQ(test::param_error([] { parse_tgn_parallel("fast"); }),
            "unknown --parallel 'fast' (expected exact or segments)");
  test::expect_spellings<TgnNeighborsBefore>(
      {{TgnNeighborsBefore::kEvent, "event"}, {TgnNeighborsBefore::kBatch, "batch"}},
      parse_tgn_neighbors_before, [](TgnNeighborsBefore n) { return to_string(n); });
  EXPECT_EQ(test::param_error([] { parse_tgn_neighbors_before("epoch"); }),
            "unknown --neighbors-before 'epoch' (expected event or batch)");
  test::expect_spellings<TgnMemoryChoice>({{TgnMemoryChoice::kAuto, "auto"},
                                           {TgnMemoryChoice::kDevice, "device"},
                                           {TgnMemoryChoice::kHost, "host"}},
                                          parse_tgn_memory_choice,
                                          [](TgnMemoryChoice m) { return to_string(m); });
  EXPECT_EQ(test::param_error([] { parse_tgn_memory_choice("disk"); }),
            "unknown --memory-on 'disk' (expected auto, device or host)");
}

}  // namespace
}  // namespace halo

// The single-process trainer: accuracy on Cora with the published recipe, determinism,
// checkpoint/resume bit-identity (predictions included) and refusals of checkpoints of another
// dataset, options or format version, predictions for independent scoring, multi-label training.
#include "halo/runtime/train/trainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

#include "../../test_util.h"
#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/graph/formats.h"
#include "halo/graph/generate.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/train/predict.h"
#include "halo/runtime/train/presets.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

// Cora converted once per test process, removed at exit.
class CoraEnv : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-trainer-test-cora-" + std::to_string(getpid()));
  }
  void SetUp() override { convert(test::bundled("cora"), dir(), {.overwrite = true}); }
  void TearDown() override { fs::remove_all(dir()); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new CoraEnv);
fs::path cora() { return CoraEnv::dir(); }

std::vector<nlohmann::json> read_log(const fs::path& p) {
  std::ifstream f(p);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Trainer, PlanetoidGcnReachesPublishedAccuracyOnCora) {
  TrainOptions o;
  apply_preset("planetoid-gcn", o);
  o.quiet = true;
  std::ostringstream out;
  const TrainSummary s = train_dataset(cora(), o, out);
  EXPECT_EQ(s.metric, "acc");
  ASSERT_EQ(s.runs.size(), 1u);
  EXPECT_GE(s.test_mean, 0.79) << "Kipf & Welling report 0.815";
  EXPECT_GT(s.runs[0].best_epoch, 0);
  EXPECT_LT(s.runs[0].final_loss, 0.6);
}

TEST(Trainer, SageTrainsToo) {
  TrainOptions o;
  o.model.kind = ModelKind::kSage;
  o.model.hidden = 32;
  o.epochs = 60;
  o.norm_features = true;
  o.quiet = true;
  std::ostringstream out;
  EXPECT_GE(train_dataset(cora(), o, out).test_mean, 0.70);
}

TEST(Trainer, SameSeedSameLossesBitForBit) {
  TempDir t;
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);  // batch norm and dropout in play
  o.model.hidden = 32;
  o.epochs = 15;
  o.quiet = true;
  std::ostringstream out;
  o.log = t / "a.jsonl";
  train_dataset(cora(), o, out);
  o.log = t / "b.jsonl";
  train_dataset(cora(), o, out);
  const auto a = read_log(t / "a.jsonl"), b = read_log(t / "b.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i + 1 < a.size(); ++i)
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "epoch " << i + 1;
}

// Why this CPU cannot compute bf16 products; empty when it can.
std::string bf16_unavailable() {
  try {
    cpu_backend().set_matmul_precision(MatmulPrecision::kBf16);
    cpu_backend().set_matmul_precision(MatmulPrecision::kFp32);
  } catch (const SystemError& e) {
    return e.what();
  }
  return "";
}

// o trained for `epochs` straight (checkpoints in t/straight, log t/straight.jsonl) and again
// interrupted after epoch `stop`, then resumed to `epochs` (t/resumed, t/resumed.jsonl) with
// `on_resume` applied to the options first; the resumed run's summary, its lines in `lines`.
TrainSummary train_straight_and_resumed(const fs::path& t, TrainOptions o, int stop, int epochs,
                                        std::ostream& lines,
                                        const std::function<void(TrainOptions&)>& on_resume) {
  std::ostringstream out;
  o.epochs = epochs;
  o.checkpoint = t / "straight";
  o.log = t / "straight.jsonl";
  train_dataset(cora(), o, out);
  o.checkpoint = t / "resumed";
  o.log = t / "resumed.jsonl";
  o.epochs = stop;  // "interrupted" after epoch `stop` (checkpointed at its end)
  train_dataset(cora(), o, out);
  o.epochs = epochs;
  o.resume = true;
  on_resume(o);
  return train_dataset(cora(), o, lines);
}

TEST(Trainer, Bf16GemmTracksFp32AndIsDeterministic) {
  if (const std::string why = bf16_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir t;
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);
  o.model.hidden = 64;
  o.epochs = 40;
  o.quiet = true;
  std::ostringstream out;
  o.log = t / "fp32.jsonl";
  const TrainSummary exact = train_dataset(cora(), o, out);
  o.matmul_precision = MatmulPrecision::kBf16;
  const auto a = read_log(t / "fp32.jsonl");
  std::vector<double> last_losses;
  // Each kernel the CPU can run (cpu_bf16.h), then auto, which must be one of them.
  for (const Bf16Kernel kernel : {Bf16Kernel::kDot, Bf16Kernel::kFma, Bf16Kernel::kAuto}) {
    const std::string name = to_string(kernel);
    o.bf16_kernel = kernel;
    o.log = t / (name + ".jsonl");
    const TrainSummary mixed = train_dataset(cora(), o, out);
    if (kernel == Bf16Kernel::kFma) {  // the same bits again (dot's: a GEMM test's)
      o.log = t / (name + "-again.jsonl");
      train_dataset(cora(), o, out);
    }
    EXPECT_EQ(mixed.matmul_precision, "bf16");
    EXPECT_EQ(read_log(o.log).back()["matmul_precision"], "bf16");
    EXPECT_EQ(read_log(o.log).back()["bf16_kernel"], mixed.bf16_kernel);
    const Bf16Kernel ran =
        kernel == Bf16Kernel::kAuto ? pick_bf16_kernel(probe_bf16_kernels()) : kernel;
    EXPECT_EQ(mixed.bf16_kernel, to_string(ran));
    const auto b = read_log(t / (name + ".jsonl")), c = read_log(o.log);
    ASSERT_EQ(a.size(), b.size());
    // Rounding the GEMM inputs to 8 bits of mantissa moves the early losses by well under 5%;
    // once the loss is near zero the two trajectories are different fits of the same quality.
    int differ = 0;
    const double first = a[0]["loss"];
    std::vector<double> losses;
    for (std::size_t i = 0; i + 1 < a.size(); ++i) {
      const double la = a[i]["loss"], lb = b[i]["loss"];
      EXPECT_NEAR(lb, la, i < 10 ? 0.05 * la : 0.02 * first) << name << " epoch " << i + 1;
      EXPECT_EQ(b[i]["loss"], c[i]["loss"]) << name << " epoch " << i + 1;
      differ += la != lb;
      losses.push_back(lb);
    }
    EXPECT_GT(differ, 0) << name << ": losses equal fp32's bit for bit: the kernel was not used";
    EXPECT_NEAR(mixed.test_mean, exact.test_mean, 0.03) << name;
    // dot and fma sum in different orders: different bits, else one of them did not run.
    if (kernel == Bf16Kernel::kFma) {
      EXPECT_NE(losses, last_losses);
    }
    last_losses = losses;
  }
  EXPECT_EQ(cpu_backend().matmul_precision(), MatmulPrecision::kBf16);
  o.matmul_precision = MatmulPrecision::kFp32;
  o.bf16_kernel = Bf16Kernel::kAuto;
  o.log.clear();
  o.epochs = 1;
  train_dataset(cora(), o, out);
  EXPECT_EQ(cpu_backend().matmul_precision(), MatmulPrecision::kFp32)
      << "every run sets the shared backend's precision";
}

TEST(Trainer, ResumeIsBitIdenticalToAnUninterruptedRun) {
  TempDir t;
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);
  o.model.hidden = 32;
  o.quiet = true;
  o.checkpoint_every = 4;
  std::ostringstream out;
  train_straight_and_resumed(t.path(), o, 9, 20, out, [](TrainOptions&) {});
  const auto a = read_meta(t / "straight/run-0/rank-0/epoch-20", "halo-checkpoint", 2);
  const auto b = read_meta(t / "resumed/run-0/rank-0/epoch-20", "halo-checkpoint", 2);
  EXPECT_EQ(a["epoch"], 20);
  EXPECT_EQ(a["fingerprint"], b["fingerprint"]) << "weights or optimiser state differ";
  EXPECT_EQ(a["best_valid"], b["best_valid"]);
  // The resumed log's epochs 10..20 equal the straight run's.
  const auto la = read_log(t / "straight.jsonl"), lb = read_log(t / "resumed.jsonl");
  std::map<int, double> loss_a, loss_b;
  for (const auto& r : la)
    if (r["type"] == "epoch") loss_a[r["epoch"].get<int>()] = r["loss"].get<double>();
  for (const auto& r : lb)
    if (r["type"] == "epoch") loss_b[r["epoch"].get<int>()] = r["loss"].get<double>();
  for (int e = 1; e <= 20; ++e) EXPECT_EQ(loss_a[e], loss_b[e]) << "epoch " << e;
}

// A bf16 run's kernel is part of its checkpoint's record: a resume with --bf16-kernel auto goes on
// with it whatever this machine's probe prefers (so it stays bit for bit on the uninterrupted
// run), and predict computes with it too.
TEST(Trainer, ResumeAndPredictContinueOnTheCheckpointsBf16Kernel) {
  if (const std::string why = bf16_unavailable(); !why.empty()) GTEST_SKIP() << why;
  // The kernel the probe does not pick here, so that taking the checkpoint's is visible.
  const Bf16Kernel other = pick_bf16_kernel(probe_bf16_kernels()) == Bf16Kernel::kDot
                               ? Bf16Kernel::kFma
                               : Bf16Kernel::kDot;
  TempDir t;
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);
  o.model.hidden = 32;
  o.quiet = true;
  o.checkpoint_every = 3;
  o.matmul_precision = MatmulPrecision::kBf16;
  o.bf16_kernel = other;
  std::ostringstream resumed;
  const TrainSummary s =
      train_straight_and_resumed(t.path(), o, 3, 8, resumed, [](TrainOptions& r) {
        r.bf16_kernel = Bf16Kernel::kAuto;
        r.quiet = false;
      });
  EXPECT_EQ(s.bf16_kernel, to_string(other));
  EXPECT_NE(resumed.str().find(std::string("bf16 products: ") + to_string(other) +
                               ", as the checkpoint's run"),
            std::string::npos)
      << resumed.str();
  const auto a = read_meta(t / "straight/run-0/rank-0/epoch-8", "halo-checkpoint", 2);
  const auto b = read_meta(t / "resumed/run-0/rank-0/epoch-8", "halo-checkpoint", 2);
  EXPECT_EQ(a["fingerprint"], b["fingerprint"]) << "weights or optimiser state differ";
  EXPECT_EQ(b["exchange"]["bf16_kernel"], to_string(other));

  set_cpu_bf16_kernel(Bf16Kernel::kAuto);  // the probe's kernel, not the checkpoint's
  PredictOptions p;
  p.checkpoint = t / "resumed";
  p.out = t / "pred.npy";
  std::ostringstream out;
  const PredictSummary ps = predict_dataset(cora(), p, out);
  EXPECT_EQ(ps.bf16_kernel, to_string(other));
  EXPECT_EQ(cpu_bf16_kernel(), other) << "predict computed with another kernel than training";
  cpu_backend().set_matmul_precision(MatmulPrecision::kFp32);
}

TEST(Trainer, ResumeWithOtherOptionsIsRefused) {
  TempDir t;
  TrainOptions o;
  o.epochs = 2;
  o.quiet = true;
  o.checkpoint = t / "ck";
  std::ostringstream out;
  train_dataset(cora(), o, out);
  o.resume = true;
  o.lr = 0.05f;
  EXPECT_THROW(train_dataset(cora(), o, out), ParamError);
}

// Options whose best validation epoch (13 of 40; batch norm, so buffers count too) comes before
// an interruption at 20: a resumed run's predictions then come from the checkpoint's best model.
TrainOptions best_early() {
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);
  o.model.hidden = 32;
  o.lr = 0.05f;
  o.epochs = 40;
  o.checkpoint_every = 5;
  o.quiet = true;
  return o;
}

TEST(Trainer, PredictionsOfAResumedRunEqualAnUninterruptedRunsBitForBit) {
  TempDir t;
  std::ostringstream out;
  TrainOptions o = best_early();
  o.predictions_out = t / "straight.npy";
  const TrainSummary s = train_dataset(cora(), o, out);
  ASSERT_LE(s.runs[0].best_epoch, 20) << "the premise: the best epoch is before the interruption";
  o.checkpoint = t / "ck";
  o.predictions_out.clear();
  o.epochs = 20;
  train_dataset(cora(), o, out);
  o.epochs = 40;
  o.resume = true;
  o.predictions_out = t / "resumed.npy";
  const TrainSummary r = train_dataset(cora(), o, out);
  EXPECT_EQ(r.runs[0].best_epoch, s.runs[0].best_epoch);
  EXPECT_EQ(r.test_mean, s.test_mean);
  EXPECT_EQ(test::read_bytes(t / "straight.npy"), test::read_bytes(t / "resumed.npy"));
}

TEST(Trainer, ACheckpointOfAnotherDatasetIsRefusedNamingIt) {
  TempDir t;
  TrainOptions o;
  o.epochs = 2;
  o.quiet = true;
  o.checkpoint = t / "ck";
  std::ostringstream out;
  train_dataset(cora(), o, out);
  convert(test::bundled("cora"), t / "rcm",
          {.reorder = NodeOrder::kRcm});  // the same graph, renumbered
  o.resume = true;
  try {
    train_dataset(t / "rcm", o, out);
    ADD_FAILURE() << "expected a refusal";
  } catch (const ParamError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("checkpoint of another dataset (dataset \""), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(Trainer, AnOldCheckpointIsAClearError) {
  TempDir t;
  TrainOptions o;
  o.epochs = 2;
  o.quiet = true;
  o.checkpoint = t / "ck";
  std::ostringstream out;
  train_dataset(cora(), o, out);
  const fs::path meta = t / "ck/run-0/rank-0/epoch-2/meta.json";
  nlohmann::json j = nlohmann::json::parse(test::read_bytes(meta));
  j["version"] = 1;  // what halo wrote before checkpoints left the partition
  std::ofstream(meta) << j.dump();
  o.resume = true;
  try {
    train_dataset(cora(), o, out);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("epoch-2: checkpoint format version 1, this halo resumes version 2"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("start a new checkpoint directory"), std::string::npos) << m;
  }
}

TEST(Trainer, LogHasEpochRecordsAndASummary) {
  TempDir t;
  TrainOptions o;
  o.epochs = 5;
  o.runs = 2;
  o.quiet = true;
  o.log = t / "log.jsonl";
  std::ostringstream out;
  train_dataset(cora(), o, out);
  const auto log = read_log(o.log);
  ASSERT_EQ(log.size(), 11u);
  EXPECT_EQ(log[0]["type"], "epoch");
  EXPECT_EQ(log[5]["run"], 1);
  const auto& s = log.back();
  EXPECT_EQ(s["type"], "summary");
  EXPECT_EQ(s["metric"], "acc");
  EXPECT_EQ(s["runs"], 2);
  for (const char* k :
       {"valid_mean", "valid_std", "test_mean", "test_std", "epoch_time_median_s", "peak_rss_mb"})
    EXPECT_TRUE(s.contains(k)) << k;
}

// A .npy file's header and size, parsed by hand (the format is four lines of the NumPy docs).
std::string npy_header(const fs::path& p, std::uint64_t* payload) {
  const std::string bytes = test::read_bytes(p);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const std::size_t len = std::uint8_t(bytes[8]) | (std::size_t(std::uint8_t(bytes[9])) << 8);
  EXPECT_EQ((10 + len) % 64, 0u);
  *payload = bytes.size() - 10 - len;
  return bytes.substr(10, len);
}

TEST(Trainer, PredictionsAreWrittenAsNpyInInputOrder) {
  TempDir t;
  TrainOptions o;
  o.epochs = 30;
  o.quiet = true;
  o.predictions_out = t / "pred.npy";
  std::ostringstream out;
  const TrainSummary s = train_dataset(cora(), o, out);
  std::uint64_t payload = 0;
  const std::string h = npy_header(o.predictions_out, &payload);
  EXPECT_NE(h.find("'descr': '<i8'"), std::string::npos) << h;
  EXPECT_NE(h.find("'shape': (2708,)"), std::string::npos) << h;
  EXPECT_EQ(payload, 2708u * 8);
  // Scoring the file independently on the test split gives the reported test accuracy.
  const std::string bytes = test::read_bytes(o.predictions_out);
  const auto* pred = reinterpret_cast<const std::int64_t*>(bytes.data() + bytes.size() - payload);
  const GraphDataset d = read_graph_dataset(cora());
  std::int64_t correct = 0;
  for (NodeId v : d.split("public")->test) correct += pred[v] == d.labels[std::size_t(v)];
  EXPECT_NEAR(double(correct) / 1000.0, s.test_mean, 1e-9);
  // A reordered dataset writes predictions back in the input order.
  convert(test::bundled("cora"), t / "rcm", {.reorder = NodeOrder::kRcm});
  o.predictions_out = t / "pred-rcm.npy";
  const TrainSummary r = train_dataset(t / "rcm", o, out);
  const std::string b2 = test::read_bytes(o.predictions_out);
  const auto* p2 = reinterpret_cast<const std::int64_t*>(b2.data() + b2.size() - payload);
  correct = 0;
  for (NodeId v : d.split("public")->test) correct += p2[v] == d.labels[std::size_t(v)];
  EXPECT_NEAR(double(correct) / 1000.0, r.test_mean, 1e-9);
}

TEST(Trainer, MultiLabelUsesBceAndRocAuc) {
  TempDir t;
  // Cora's classes as 7 one-vs-rest binary tasks, a few entries missing: an ogbn-proteins shape.
  const GraphDataset c = read_graph_dataset(cora());
  GraphDataset d;
  d.name = "cora-multilabel";
  d.graph = c.graph;
  d.features = c.features;
  d.num_features = c.num_features;
  d.splits = c.splits;
  d.label_kind = LabelKind::kMultilabel;
  d.label_cols = 7;
  d.num_classes = 2;
  std::vector<std::int32_t> y(2708 * 7);
  for (std::size_t v = 0; v < 2708; ++v)
    for (std::size_t k = 0; k < 7; ++k)
      y[v * 7 + k] = (v * 7 + k) % 97 == 0 ? -1 : c.labels[v] == std::int32_t(k);
  d.labels = Array<std::int32_t>(std::move(y));
  write_graph_dataset(d, t / "ml");
  TrainOptions o;
  o.epochs = 40;
  o.model.dropout = 0;
  o.quiet = true;
  o.predictions_out = t / "scores.npy";
  std::ostringstream out;
  const TrainSummary s = train_dataset(t / "ml", o, out);
  EXPECT_EQ(s.metric, "rocauc");
  EXPECT_GT(s.test_mean, 0.85);
  EXPECT_LE(s.test_mean, 1.0);
  std::uint64_t payload = 0;
  const std::string h = npy_header(o.predictions_out, &payload);
  EXPECT_NE(h.find("'descr': '<f4'"), std::string::npos) << h;
  EXPECT_NE(h.find("'shape': (2708, 7)"), std::string::npos) << h;
}

TEST(Trainer, BadOptionsAreParameterErrors) {
  TrainOptions o;
  EXPECT_THROW(apply_preset("gpt-5", o), ParamError);
  std::ostringstream out;
  o.split = "nonexistent";
  EXPECT_THROW(train_dataset(cora(), o, out), ParamError);
  o.split = "";
  o.epochs = 0;
  EXPECT_THROW(train_dataset(cora(), o, out), ParamError);
  o.epochs = 1;
  o.resume = true;
  EXPECT_THROW(train_dataset(cora(), o, out), ParamError);
  o.resume = false;
  EXPECT_THROW(parse_matmul_precision("fp16"), ParamError);  // the CLI's parse refuses it
  o.matmul_precision =
      MatmulPrecision::kTf32;  // a tensor-core format: the CPU refuses rather than compute fp32
  EXPECT_THROW(train_dataset(cora(), o, out), SystemError);
  TempDir t;
  convert(test::bundled("metis/test.mgraph"), t / "nolabels", {});
  TrainOptions p;
  EXPECT_THROW(train_dataset(t / "nolabels", p, out), ParamError);
}

}  // namespace
}  // namespace halo

namespace halo {
namespace {

// GPU runs against CPU runs of the same model (skipped without a GPU): the same keyed dropout
// masks and weights, so the loss curves agree to rounding.
void expect_gpu_matches_cpu(const fs::path& dataset, TrainOptions o) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  TempDir t;
  o.epochs = 20;
  o.quiet = true;
  std::ostringstream out;
  o.device = DeviceChoice::kCpu;
  o.log = t / "cpu.jsonl";
  const TrainSummary a = train_dataset(dataset, o, out);
  o.device = DeviceChoice::kCuda;
  o.log = t / "gpu.jsonl";
  const TrainSummary b = train_dataset(dataset, o, out);
  const auto la = read_log(t / "cpu.jsonl"), lb = read_log(t / "gpu.jsonl");
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t i = 0; i + 1 < la.size(); ++i) {
    const double x = la[i]["loss"], y = lb[i]["loss"];
    EXPECT_LT(std::abs(x - y) / std::abs(x), 1e-4)
        << "epoch " << i + 1 << ": cpu " << x << " gpu " << y;
  }
  EXPECT_NEAR(a.test_mean, b.test_mean, 2e-3);
}

TEST(TrainerGpu, CoraOnCudaMatchesCpu) {
  TrainOptions o;
  apply_preset("ogbn-arxiv-gcn", o);  // 3 layers, batch norm, dropout: every op on the device
  o.model.hidden = 64;
  expect_gpu_matches_cpu(cora(), o);
}

TEST(TrainerGpu, SageOnGeneratedGraphOnCudaMatchesCpu) {
  if (cuda_devices().count == 0) GTEST_SKIP() << cuda_devices().reason;
  TempDir t;
  GenerateOptions g;
  g.nodes = 20000;
  g.features = 48;
  g.classes = 6;
  g.seed = 5;
  generate(t / "sbm", g);
  TrainOptions o;
  o.model.kind = ModelKind::kSage;
  o.model.layers = 3;
  o.model.hidden = 128;
  o.model.batch_norm = true;
  expect_gpu_matches_cpu(t / "sbm", o);
}

TEST(TrainerGpu, GatOnCoraOnCudaMatchesCpu) {
  if (cuda_devices().count == 0) GTEST_SKIP() << cuda_devices().reason;
  TrainOptions o;
  apply_preset("planetoid-gat", o);  // attention and feature dropout, 8 heads
  expect_gpu_matches_cpu(cora(), o);
}

TEST(TrainerGpu, DeviceCudaWithoutAGpuIsAClearError) {
  if (cuda_devices().count > 0) GTEST_SKIP() << "a GPU is visible";
  TrainOptions o;
  o.epochs = 1;
  o.quiet = true;
  o.device = DeviceChoice::kCuda;
  std::ostringstream out;
  try {
    train_dataset(cora(), o, out);
    ADD_FAILURE() << "expected an error";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
  o.device = DeviceChoice::kAuto;  // falls back to the CPU
  EXPECT_NO_THROW(train_dataset(cora(), o, out));
}

// poll_until, the wait every NCCL call is bounded by: it returns once poll says done, passes a
// failure of poll on untouched, and past the deadline gives up once (the communicator's abort)
// and names what it waited for and the variable that sets the limit.
TEST(PollUntil, ReturnsFailsOrGivesUpAtTheDeadline) {
  int calls = 0, gave_up = 0;
  poll_until([&] { return ++calls == 5; }, 10.0, "quick", [&] { ++gave_up; });
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(gave_up, 0);
  EXPECT_THROW(poll_until([]() -> bool { throw SystemError("peer failed"); }, 10.0, "failing",
                          [&] { ++gave_up; }),
               SystemError);
  EXPECT_EQ(gave_up, 0);
  const auto t0 = std::chrono::steady_clock::now();
  calls = 0;
  try {
    poll_until([&] { return ++calls < 0; }, 0.3, "NCCL init (halo rows)", [&] { ++gave_up; });
    ADD_FAILURE() << "a wait that never ends returned";
  } catch (const SystemError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("NCCL init (halo rows): no answer from the other ranks after 0 s", 0), 0u)
        << m;
    EXPECT_NE(m.find("HALO_COMM_TIMEOUT_S"), std::string::npos) << m;
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(gave_up, 1);
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  EXPECT_GT(calls, 100);  // it kept polling until the deadline, sleeping only briefly
}

// NCCL on a one-GPU machine: a one-rank communicator sends device memory to itself in a group
// and all-reduces in place (the identity), so loading, init, grouped send/recv, the event wait
// and teardown all run even where ranks cannot each have a GPU.
TEST(NcclGpu, OneRankSendsToItselfAndReduces) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  if (const std::string why = nccl_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  LocalCommunicator boot;
  const std::unique_ptr<Communicator> nccl = make_nccl_communicator(boot, 0);
  EXPECT_TRUE(nccl->device_buffers());
  EXPECT_EQ(nccl->size(), 1);
  std::vector<float> host(4099);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f - 7.f;
  Matrix src(std::int64_t(host.size()), 1, 0.f, Device::kCuda),
      dst(std::int64_t(host.size()), 1, -1.f, Device::kCuda);
  src.assign(host);
  const PeerBlock send{0, src.data(), host.size() * 4}, recv{0, dst.data(), host.size() * 4};
  nccl->exchange({&send, 1}, {&recv, 1}, 1)->wait();
  EXPECT_EQ(dst.to_host(), host);
  nccl->allreduce_device(src.data(), std::int64_t(host.size()));
  EXPECT_EQ(src.to_host(), host);
}

// A bootstrap that says two ranks but whose other rank never comes (hung before NCCL init).
class LonelyBoot final : public ForwardingCommunicator {
 public:
  explicit LonelyBoot(Communicator& inner) : ForwardingCommunicator(inner) {}
  int size() const override { return 2; }
  void broadcast(void*, std::size_t, int) override {}  // rank 0 is the root: nothing to receive
};

// NCCL init waits for every rank; with the missing one it must end at the communication
// deadline, naming the step, not block forever. Run apart with a short HALO_COMM_TIMEOUT_S
// (tools/gpu-check.sh does: the variable is read once per process).
TEST(NcclGpu, InitWithAMissingPeerEndsAtTheDeadline) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  if (const std::string why = nccl_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const double limit = comm_timeout_seconds();
  if (limit > 10) GTEST_SKIP() << "needs HALO_COMM_TIMEOUT_S <= 10 (it is " << limit << ")";
  LocalCommunicator local;
  LonelyBoot boot(local);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    make_nccl_communicator(boot, 0);
    ADD_FAILURE() << "NCCL init with a missing rank returned";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL init (halo rows): no answer"), std::string::npos)
        << e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, limit);
  EXPECT_LT(waited, limit + 30);
}

// The spellings --device and --halo-dtype accept (and summaries and checkpoints record), and the
// exact line for one they do not.
TEST(OptionSpellings, DeviceAndHaloDtype) {
  test::expect_spellings<DeviceChoice>(
      {{DeviceChoice::kCpu, "cpu"}, {DeviceChoice::kCuda, "cuda"}, {DeviceChoice::kAuto, "auto"}},
      parse_device_choice, [](DeviceChoice d) { return to_string(d); });
  EXPECT_EQ(test::param_error([] { parse_device_choice("gpu"); }),
            "--device must be cpu, cuda or auto");
  test::expect_spellings<HaloDtype>({{HaloDtype::kF32, "f32"}, {HaloDtype::kBf16, "bf16"}},
                                    parse_halo_dtype, [](HaloDtype d) { return to_string(d); });
  EXPECT_EQ(test::param_error([] { parse_halo_dtype("fp16"); }),
            "--halo-dtype must be f32 or bf16");
}

}  // namespace
}  // namespace halo

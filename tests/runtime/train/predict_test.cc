// `halo predict` end to end (one process and K ranks under mpirun): its predictions are the
// bytes `train --predictions-out` wrote at the best epoch, on the training's partition; on another
// partition (or none) the same model's outputs agree to rounding; embeddings come back in input
// order (the last layer's are the logits the predictions are the argmax of); GAT too; --epoch
// chooses among the epochs a checkpoint keeps; wrong checkpoints are refused in one line, leaving
// no output behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>

#include "../../test_util.h"
#include "halo/gnn/device.h"

namespace halo {
namespace {

using test::TempDir;
namespace fs = std::filesystem;
using Result = test::Run;

std::string halo() { return test::configured("HALO_BINARY", HALO_BINARY); }
std::string mpirun(int np) {
  return test::configured("HALO_MPIEXEC", HALO_MPIEXEC) + " --oversubscribe --bind-to none -np " +
         std::to_string(np) + " ";
}
Result shell(const std::string& cmd, const fs::path& out_file) {
  return test::shell_merged(cmd, out_file);
}

// Cora, in 2 and 3 parts, and another (generated) dataset, made once per test process.
class Data : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-predict-" + std::to_string(getpid()));
  }
  void SetUp() override {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    fs::create_directories(dir());
    const std::string d = dir().string();
    for (const std::string& s : {
             halo() + " convert " + test::bundled("cora").string() + " -o " + d + "/cora",
             halo() + " partition " + d + "/cora -k 2 -o " + d + "/cora-2",
             halo() + " partition " + d + "/cora -k 3 -o " + d + "/cora-3",
             // renumbered (original ids kept): rows travel through both id maps
             halo() + " reorder " + d + "/cora --method rcm -o " + d + "/cora-rcm",
             halo() + " partition " + d + "/cora-rcm -k 3 -o " + d + "/cora-rcm-3",
             halo() + " generate --nodes 500 --avg-degree 6 --features 1433 --classes 7 -o " + d +
                 "/other",
         }) {
      const Result r = shell(s, dir() / "setup.out");
      ASSERT_EQ(r.code, 0) << s << "\n" << r.out;
    }
  }
  void TearDown() override { fs::remove_all(dir()); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Data);

fs::path data(const std::string& name) { return Data::dir() / name; }

// 3 layers with batch norm (so the best model's running statistics matter), best epoch before
// the last, checkpoints every 7 epochs and at the end.
const std::string kTrain =
    " --preset ogbn-arxiv-gcn --hidden 32 --lr 0.05 --epochs 30 --checkpoint-every 7 --threads 1 "
    "-q";

// A training run (launcher: "" or mpirun(K)) on input with options, once per test process: its
// checkpoint (ck/) and predictions (train.npy) under data(name).
fs::path trained(const std::string& name, const std::string& launcher, const std::string& input,
                 const std::string& options = kTrain) {
  fs::path d = data(name);
  if (!fs::exists(d / "train.npy")) {
    fs::create_directories(d);
    const Result r =
        shell(launcher + halo() + " train " + data(input).string() + options + " --checkpoint " +
                  (d / "ck").string() + " --predictions-out " + (d / "train.npy").string(),
              d / "out");
    EXPECT_EQ(r.code, 0) << r.out;
  }
  return d;
}

struct Npy {
  std::int64_t rows = -1, cols = 0;  // cols 0: 1-D
  std::string descr;
  std::string payload;
};

// A .npy file's shape, dtype and data bytes.
Npy read_npy(const fs::path& p) {
  Npy n;
  const std::string bytes = test::read_bytes(p);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return n;
  const std::size_t len = std::size_t(std::uint8_t(bytes[8])) | std::size_t(std::uint8_t(bytes[9]))
                                                                    << 8;
  const std::string header = bytes.substr(10, len);
  std::smatch m;
  if (std::regex_search(header, m, std::regex("'descr': '([^']+)'"))) n.descr = m[1];
  if (std::regex_search(header, m, std::regex(R"('shape': \((\d+),\s*(\d*)\))"))) {
    n.rows = std::stoll(m[1]);
    n.cols = m[2].length() ? std::stoll(m[2]) : 0;
  }
  n.payload = bytes.substr(10 + len);
  return n;
}

std::vector<std::int64_t> classes(const Npy& n) {
  std::vector<std::int64_t> out(n.payload.size() / 8);
  std::memcpy(out.data(), n.payload.data(), out.size() * 8);
  return out;
}

std::vector<float> floats(const Npy& n) {
  std::vector<float> out(n.payload.size() / 4);
  std::memcpy(out.data(), n.payload.data(), out.size() * 4);
  return out;
}

// The epoch `halo predict` says it took the weights of.
int epoch_of(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(epoch (\d+) \()")) ? std::stoi(m[1]) : -1;
}

TEST(Predict, OneProcessGivesTheTrainingsBestEpochPredictionsByteForByte) {
  const fs::path d = trained("one", "", "cora");
  TempDir t;
  const Result r = shell(halo() + " predict " + data("cora").string() + " --checkpoint " +
                             (d / "ck").string() + " -o " + (t / "p.npy").string(),
                         t / "o");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(best validation)"), std::string::npos) << r.out;
  const std::string want = test::read_bytes(d / "train.npy");
  ASSERT_GT(want.size(), 2708u * 8);
  EXPECT_EQ(test::read_bytes(t / "p.npy"), want);
  EXPECT_LT(epoch_of(r.out), 30) << "the best epoch should not be the last here: " << r.out;
}

TEST(Predict, ThreeRanksGiveTheTrainingsBestEpochPredictionsByteForByte) {
  const fs::path d = trained("three", mpirun(3), "cora-3");
  TempDir t;
  const Result r =
      shell(mpirun(3) + halo() + " predict " + data("cora-3").string() + " --checkpoint " +
                (d / "ck").string() + " -o " + (t / "p.npy").string() + " --threads 1",
            t / "o");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("on 3 ranks"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(t / "p.npy"), test::read_bytes(d / "train.npy"));
}

// Embeddings a and b (float32 .npy of the same shape) agree to 1e-4 of a's largest magnitude.
void expect_close(const fs::path& a_npy, const fs::path& b_npy) {
  const Npy ea = read_npy(a_npy), eb = read_npy(b_npy);
  ASSERT_GT(ea.rows, 0) << a_npy;
  ASSERT_EQ(eb.rows, ea.rows) << b_npy;
  ASSERT_EQ(eb.cols, ea.cols) << b_npy;
  const std::vector<float> a = floats(ea), b = floats(eb);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(a[i])));
  }
  EXPECT_GT(scale, 0.1) << a_npy;
  EXPECT_LT(worst, 1e-4 * scale) << a_npy << " vs " << b_npy;
}

// The share of rows on which the predictions of a and b (int64 .npy) agree.
double agreement(const fs::path& a, const fs::path& b) {
  const auto pa = classes(read_npy(a)), pb = classes(read_npy(b));
  if (pa.empty() || pa.size() != pb.size()) return 0;
  std::size_t same = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) same += pa[i] == pb[i];
  return double(same) / double(pa.size());
}

// The 3-rank training's model on one process and on 2 ranks: the same outputs up to float
// summation order, embeddings (the last hidden layer by default) in input order.
TEST(Predict, AnyPartitionOrNoneGivesOneProcessOutputs) {
  const fs::path d = trained("three", mpirun(3), "cora-3");
  TempDir t;
  const std::string ck = " --checkpoint " + (d / "ck").string();
  const Result one =
      shell(halo() + " predict " + data("cora").string() + ck + " -o " + (t / "1.npy").string() +
                " --embeddings-out " + (t / "e1.npy").string(),
            t / "o1");
  ASSERT_EQ(one.code, 0) << one.out;
  const Result two = shell(mpirun(2) + halo() + " predict " + data("cora-2").string() + ck +
                               " -o " + (t / "2.npy").string() + " --embeddings-out " +
                               (t / "e2.npy").string() + " --threads 1",
                           t / "o2");
  ASSERT_EQ(two.code, 0) << two.out;
  const Npy e1 = read_npy(t / "e1.npy");
  EXPECT_EQ(e1.descr, "<f4");
  EXPECT_EQ(e1.rows, 2708);
  EXPECT_EQ(e1.cols, 32);  // layer 1 of 3: the last hidden layer
  expect_close(t / "e1.npy", t / "e2.npy");
  EXPECT_EQ(classes(read_npy(t / "1.npy")).size(), 2708u);
  EXPECT_GE(agreement(t / "1.npy", t / "2.npy"), 0.999);
  EXPECT_GE(agreement(t / "1.npy", d / "train.npy"), 0.999);
}

// The last layer's "embeddings" are the logits: their argmax per row is the training's
// prediction (written in input order by another path), row for row, on a renumbered dataset's
// parts, which a row written to the wrong place would break.
TEST(Predict, LastLayerEmbeddingsAreTheLogitsInInputOrder) {
  const fs::path d = trained("rcm", mpirun(3), "cora-rcm-3");
  TempDir t;
  const Result r =
      shell(mpirun(3) + halo() + " predict " + data("cora-rcm-3").string() + " --checkpoint " +
                (d / "ck").string() + " -o " + (t / "p.npy").string() + " --embeddings-out " +
                (t / "e.npy").string() + " --layer 2 --threads 1",
            t / "o");
  ASSERT_EQ(r.code, 0) << r.out;
  const Npy e = read_npy(t / "e.npy");
  ASSERT_EQ(e.rows, 2708);
  ASSERT_EQ(e.cols, 7);
  const std::vector<float> z = floats(e);
  const auto p = classes(read_npy(d / "train.npy"));
  EXPECT_EQ(classes(read_npy(t / "p.npy")), p);
  ASSERT_EQ(p.size(), 2708u);
  std::size_t same = 0;
  std::vector<int> seen(7, 0);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const auto row = z.begin() + std::ptrdiff_t(i * 7);
    const auto arg = std::max_element(row, row + 7) - row;
    same += arg == p[i];
    ++seen[std::size_t(arg)];
  }
  EXPECT_EQ(same, p.size());
  EXPECT_GE(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 0; }), 5);
}

TEST(Predict, GatOnTwoRanksGivesTheTrainingsPredictionsByteForByte) {
  const fs::path d = trained("gat", mpirun(2), "cora-2",
                             " --model gat --heads 2 --hidden 8 --layers 2 --residual --epochs 20 "
                             "--attn-dropout 0.3 --norm-features --threads 1 -q");
  TempDir t;
  const Result r =
      shell(mpirun(2) + halo() + " predict " + data("cora-2").string() + " --checkpoint " +
                (d / "ck").string() + " -o " + (t / "p.npy").string() + " --embeddings-out " +
                (t / "e.npy").string() + " --threads 1",
            t / "o");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gat, run 0"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(t / "p.npy"), test::read_bytes(d / "train.npy"));
  EXPECT_EQ(read_npy(t / "e.npy").cols, 16);  // 2 heads x 8, concatenated
}

// --epoch best | last | N, where N is one of the two epochs a checkpoint keeps; anything else is
// refused in one line, with no output left behind.
TEST(Predict, EpochChoosesAmongTheEpochsTheCheckpointKeeps) {
  const fs::path d = trained("one", "", "cora");
  TempDir t;
  const std::string cmd = halo() + " predict " + data("cora").string() + " --checkpoint " +
                          (d / "ck").string() + " -o ";
  const Result best = shell(cmd + (t / "best.npy").string(), t / "o1");
  ASSERT_EQ(best.code, 0) << best.out;
  const int b = epoch_of(best.out);
  ASSERT_GT(b, 0);
  const Result by_number =
      shell(cmd + (t / "n.npy").string() + " --epoch " + std::to_string(b), t / "o2");
  ASSERT_EQ(by_number.code, 0) << by_number.out;
  EXPECT_EQ(test::read_bytes(t / "n.npy"), test::read_bytes(t / "best.npy"));
  const Result last = shell(cmd + (t / "last.npy").string() + " --epoch last", t / "o3");
  ASSERT_EQ(last.code, 0) << last.out;
  EXPECT_EQ(epoch_of(last.out), 30);
  EXPECT_NE(last.out.find("(newest)"), std::string::npos) << last.out;
  const Result thirty = shell(cmd + (t / "30.npy").string() + " --epoch 30", t / "o4");
  ASSERT_EQ(thirty.code, 0) << thirty.out;
  EXPECT_EQ(test::read_bytes(t / "30.npy"), test::read_bytes(t / "last.npy"));
  const int gone = b == 3 ? 4 : 3;
  const Result refused =
      shell(cmd + (t / "x.npy").string() + " --epoch " + std::to_string(gone), t / "o5");
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(
      refused.out.find("--epoch " + std::to_string(gone) + ": " + (d / "ck" / "run-0").string() +
                       " keeps epoch 30 (the newest) and epoch " + std::to_string(b) +
                       " (the best validation) only"),
      std::string::npos)
      << refused.out;
  EXPECT_EQ(std::count(refused.out.begin(), refused.out.end(), '\n'), 1) << refused.out;
  EXPECT_FALSE(fs::exists(t / "x.npy"));
}

TEST(Predict, RefusesAnotherDatasetOrNoCheckpointInOneLine) {
  const fs::path d = trained("one", "", "cora");
  TempDir t;
  const Result other =
      shell(halo() + " predict " + data("other").string() + " --checkpoint " + (d / "ck").string() +
                " -o " + (t / "p.npy").string() + " --embeddings-out " + (t / "e.npy").string(),
            t / "o1");
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find(": checkpoint of another dataset (fingerprint "), std::string::npos)
      << other.out;
  EXPECT_EQ(std::count(other.out.begin(), other.out.end(), '\n'), 1) << other.out;
  const Result none = shell(halo() + " predict " + data("cora").string() + " --checkpoint " +
                                (t / "empty").string() + " -o " + (t / "p.npy").string(),
                            t / "o2");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find((t / "empty").string() + ": no checkpoint"), std::string::npos)
      << none.out;
  const Result layer = shell(halo() + " predict " + data("cora").string() + " --checkpoint " +
                                 (d / "ck").string() + " -o " + (t / "p.npy").string() +
                                 " --embeddings-out " + (t / "e.npy").string() + " --layer 3",
                             t / "o3");
  EXPECT_EQ(layer.code, 2) << layer.out;
  EXPECT_NE(layer.out.find("--layer 3: the model has layers 0 .. 2"), std::string::npos)
      << layer.out;
  EXPECT_FALSE(fs::exists(t / "p.npy"));
  EXPECT_FALSE(fs::exists(t / "e.npy"));
}

// The CUDA twin: CPU-trained checkpoints predicted on the GPU, GCN on one process and GAT on two
// ranks sharing the GPU, give the CPU's outputs up to summation order (skipped without a GPU).
TEST(PredictGpu, CudaGivesTheCpusOutputs) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) GTEST_SKIP() << devs.reason;
  const fs::path gcn = trained("one", "", "cora");
  const fs::path gat =
      trained("gat", mpirun(2), "cora-2",
              " --model gat --heads 2 --hidden 8 --layers 2 --residual --epochs 20 "
              "--attn-dropout 0.3 --norm-features --threads 1 -q");
  TempDir t;
  for (const std::string device : {"cpu", "cuda"}) {
    const Result one = shell(halo() + " predict " + data("cora").string() + " --checkpoint " +
                                 (gcn / "ck").string() + " -o " +
                                 (t / (device + "-1.npy")).string() + " --embeddings-out " +
                                 (t / (device + "-e1.npy")).string() + " --device " + device,
                             t / "o1");
    ASSERT_EQ(one.code, 0) << one.out;
    const Result two =
        shell(mpirun(2) + halo() + " predict " + data("cora-2").string() + " --checkpoint " +
                  (gat / "ck").string() + " -o " + (t / (device + "-2.npy")).string() +
                  " --embeddings-out " + (t / (device + "-e2.npy")).string() + " --device " +
                  device + " --threads 1",
              t / "o2");
    ASSERT_EQ(two.code, 0) << two.out;
  }
  expect_close(t / "cpu-e1.npy", t / "cuda-e1.npy");
  expect_close(t / "cpu-e2.npy", t / "cuda-e2.npy");
  EXPECT_GE(agreement(t / "cpu-1.npy", t / "cuda-1.npy"), 0.999);
  EXPECT_GE(agreement(t / "cpu-2.npy", t / "cuda-2.npy"), 0.999);
}

}  // namespace
}  // namespace halo

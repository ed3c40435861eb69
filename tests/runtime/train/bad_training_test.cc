// Training that goes wrong must end, in one clear line, with the right exit status, within
// seconds, on one process and on K ranks (issue 15):
//   - metrics on NaN and infinite scores terminate with a defined figure;
//   - a loss that stops being a number ends `halo train` and `halo tgn train` naming the epoch
//     (and the batch), exit 1, on every rank;
//   - a temporal split with no training events is refused (InputError, exit 1);
//   - a rank that never reaches MPI start-up ends the job at HALO_COMM_TIMEOUT_S;
//   - --resume without a checkpoint, or with one past --epochs, is refused (exit 2);
//   - a model that cannot fit in memory is refused before allocating (exit 2), and an allocation
//     that fails anyway says what it was for.
// Every command that could hang runs under `timeout`, so a regression fails instead.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../../test_util.h"
#include "halo/gnn/metrics.h"
#include "halo/runtime/memory/memory_model.h"

namespace halo {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- Metrics on NaN and infinite scores ----------------------------------------------------

TEST(BadTrainingMetrics, AveragePrecisionRanksNaNLowestAndEnds) {
  // Descending: 0.9 (pos) | 0.1 (neg) | NaN, NaN (pos, neg: one tie group).
  // AP = 0.5 * 1 + 0 + 0.5 * (2 / 4) = 0.75.
  const float s[] = {kNaN, 0.9f, kNaN, 0.1f};
  const std::int32_t y[] = {1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(average_precision(s, y, 4), 0.75);
  const float all_nan[] = {kNaN, kNaN, kNaN, kNaN};  // one group: precision = positives / n
  EXPECT_DOUBLE_EQ(average_precision(all_nan, y, 4), 0.5);
  const float inf[] = {kInf, 1.f, -kInf, kNaN};  // NaN below -inf
  const std::int32_t yi[] = {1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(average_precision(inf, yi, 4), 1.0);
}

TEST(BadTrainingMetrics, RocAucRanksNaNLowestAsOneTieGroup) {
  // Ascending ranks: NaN, NaN (1.5 each) | 0.1 (3) | 0.9 (4); positives 1.5 + 4: U = 5.5 - 3.
  const float s[] = {kNaN, 0.9f, kNaN, 0.1f};
  const std::int32_t y[] = {1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(rocauc(s, y, 4, 1), 2.5 / 4);
  const float all_nan[] = {kNaN, kNaN, kNaN, kNaN};
  EXPECT_DOUBLE_EQ(rocauc(all_nan, y, 4, 1), 0.5);
}

// Large enough for std::sort's introsort (> 16 elements), where a comparator that is not a strict
// weak order reads out of bounds: NaN must rank exactly as a score below every other would.
TEST(BadTrainingMetrics, ManyNaNScoresGiveTheFiguresOfTheLowestScore) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int n : {17, 63, 257, 1000}) {
    const auto m = static_cast<std::size_t>(n);
    std::vector<float> s(m), low(m);
    std::vector<std::int32_t> y(m);
    for (int i = 0; i < n; ++i) {
      const bool nan = u(rng) < 0.3f;
      s[std::size_t(i)] = nan ? kNaN : u(rng);
      low[std::size_t(i)] = nan ? -1.f : s[std::size_t(i)];
      y[std::size_t(i)] = u(rng) < 0.5f;
    }
    EXPECT_DOUBLE_EQ(average_precision(s.data(), y.data(), n),
                     average_precision(low.data(), y.data(), n))
        << n;
    EXPECT_DOUBLE_EQ(rocauc(s.data(), y.data(), n, 1), rocauc(low.data(), y.data(), n, 1)) << n;
  }
}

TEST(BadTrainingMetrics, AccuracyNeverLetsANaNLogitWin) {
  // Rows: all NaN (label 0: wrong, it predicts nothing), NaN beside 1 (label 1: right), 2 beside
  // NaN (label 0: right), +inf beside NaN (label 0: right).
  float logits[] = {kNaN, kNaN, kNaN, 1.f, 2.f, kNaN, kInf, kNaN};
  const MatrixView v{logits, 4, 2, Device::kCpu};
  const std::int32_t labels[] = {0, 1, 0, 0};
  const NodeId rows[] = {0, 1, 2, 3};
  const Counts c = accuracy_counts(v, labels, rows, 4);
  EXPECT_EQ(c.total, 4);
  EXPECT_EQ(c.correct, 3);
  EXPECT_EQ(argmax_rows(v), (std::vector<std::int64_t>{0, 1, 0, 0}));
}

TEST(BadTrainingMetrics, ReciprocalRankPutsANaNPositiveLast) {
  const float neg[] = {0.1f, 0.2f};
  EXPECT_DOUBLE_EQ(reciprocal_rank(kNaN, neg, 2), 1.0 / 3);  // below both
  const float with_nan[] = {kNaN, 0.7f};
  EXPECT_DOUBLE_EQ(reciprocal_rank(0.5f, with_nan, 2), 0.5);  // only 0.7 above
  const float nan_only[] = {kNaN};
  EXPECT_DOUBLE_EQ(reciprocal_rank(kNaN, nan_only, 1), 1.0 / 1.5);  // a tie
  const float strided[] = {0.9f, 0.f, 0.8f, 0.f};  // every second entry is another event's
  EXPECT_DOUBLE_EQ(reciprocal_rank(0.85f, strided, 2, 2), 0.5);
  EXPECT_TRUE(score_less(kNaN, -kInf));
  EXPECT_FALSE(score_less(kNaN, kNaN));
  EXPECT_TRUE(score_tied(kNaN, kNaN));
}

// ---- The halo command ----------------------------------------------------------------------

using Result = test::Run;

// Runs a shell command, stdout and stderr together in out_file.
Result shell(const std::string& cmd, const fs::path& out_file) {
  return test::shell_merged(cmd, out_file);
}

std::string halo() { return "timeout 30 " + test::configured("HALO_BINARY", HALO_BINARY); }
std::string mpirun(int np) {
  return "timeout 60 " + test::configured("HALO_MPIEXEC", HALO_MPIEXEC) +
         " --oversubscribe --bind-to none -np " + std::to_string(np) + " " +
         test::configured("HALO_BINARY", HALO_BINARY);
}

// The lines of `out` that start with "error:".
std::vector<std::string> error_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t end = std::min(out.find('\n', at), out.size());
    if (out.compare(at, 6, "error:") == 0) lines.push_back(out.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// The string value of `key` in the JSON file `file`.
std::string json_value(const fs::path& file, const std::string& key) {
  return nlohmann::json::parse(test::read_bytes(file)).at(key).get<std::string>();
}

// Cora (one process and 2 parts) and small temporal streams, made on first use (this file shares
// its binary with tests that need none of them) and removed at exit.
class Data {
 public:
  static const Data& get() {
    static const Data d;
    return d;
  }
  ~Data() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir() const { return dir_; }
  std::string failed;  // the setup step that failed, with its output

 private:
  Data() : dir_(fs::temp_directory_path() / ("halo-bad-" + std::to_string(getpid()))) {
    // mpirun refuses root without these; the container may lack cross-memory attach.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    fs::create_directories(dir_);
    const std::string d = dir_.string();
    std::string same = "% sym positive\n";  // 300 events at one timestamp
    for (int i = 0; i < 300; ++i)
      same += std::to_string(1 + i % 40) + " " + std::to_string(41 + i % 37) + " 1 5\n";
    test::write_text(dir_ / "same.txt", same);
    const std::string bin = test::configured("HALO_BINARY", HALO_BINARY);
    for (const std::string& s : {
             bin + " convert " + test::bundled("cora").string() + " -o " + d + "/cora",
             bin + " partition " + d + "/cora -k 2 -o " + d + "/cora-2",
             "head -n 1502 " + test::bundled("uci-messages/graph.txt").string() + " > " + d +
                 "/uci.txt",
             bin + " convert " + d + "/uci.txt --format konect -o " + d + "/uci",
             bin + " convert " + d + "/same.txt --format konect -o " + d + "/same",
             // Two datasets of one structure (same seed) and other features (--noise), each in 2
             // parts: the partitions' send and receive counts agree, their fingerprints do not.
             bin + " generate --nodes 2000 --avg-degree 6 --features 8 --classes 3 --seed 5 -o " +
                 d + "/g",
             bin + " generate --nodes 2000 --avg-degree 6 --features 8 --classes 3 --seed 5 " +
                 "--noise 3 -o " + d + "/gn",
             bin + " partition " + d + "/g -k 2 -o " + d + "/g-2",
             bin + " partition " + d + "/gn -k 2 -o " + d + "/gn-2",
             "head -n 1002 " + test::bundled("uci-messages/graph.txt").string() + " > " + d +
                 "/uci1k.txt",
             bin + " convert " + d + "/uci1k.txt --format konect -o " + d + "/uci1k",
         }) {
      const Result r = shell(s, dir_ / "setup.out");
      if (r.code != 0) {
        failed = s + "\n" + r.out;
        return;
      }
    }
  }
  fs::path dir_;
};

// A path under the shared data (the test fails at once when making it failed).
std::string data(const std::string& name) {
  const Data& d = Data::get();
  EXPECT_EQ(d.failed, "");
  return (d.dir() / name).string();
}

// The small TGN every temporal case trains (one epoch of 1,500 events takes well under a second).
const std::string kTgn =
    " --memory-dim 16 --embed-dim 16 --time-dim 16 --batch-size 100 --threads 1 -q";

// ---- 1. A loss that is no longer a number --------------------------------------------------

TEST(BadTraining, DivergingTrainingStopsNamingTheEpochOnOneProcess) {
  TempDir t;
  const Result r =
      shell(halo() + " train " + data("cora") + " --lr 1e30 --epochs 50 --threads 1 -q", t / "o");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_LT(r.seconds, 20) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_NE(lines[0].find("error: run 0 epoch "), std::string::npos) << r.out;
  EXPECT_NE(lines[0].find("the model diverged; lower --lr (now 1e+30)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("loss nan"), std::string::npos) << r.out;
}

// Every rank sees the same all-reduced loss and stops: the job ends at once, not at a timeout.
TEST(BadTraining, DivergingTrainingStopsEveryRank) {
  TempDir t;
  const Result r = shell("HALO_COMM_TIMEOUT_S=60 " + mpirun(2) + " train " + data("cora-2") +
                             " --lr 1e30 --epochs 50 --threads 1 -q",
                         t / "o");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_LT(r.seconds, 30) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_GE(lines.size(), 1u) << r.out;
  for (const std::string& l : lines) {  // each rank that reports says the same
    EXPECT_NE(l.find(" of 2 on "), std::string::npos) << r.out;
    EXPECT_NE(l.find(": run 0 epoch "), std::string::npos) << r.out;
    EXPECT_NE(l.find("the model diverged"), std::string::npos) << r.out;
  }
}

TEST(BadTraining, DivergingTgnStopsNamingTheEpochAndBatch) {
  TempDir t;
  const Result one =
      shell(halo() + " tgn train " + data("uci") + kTgn + " --lr 1e10 --epochs 3", t / "o1");
  EXPECT_EQ(one.code, 1) << one.out;
  EXPECT_LT(one.seconds, 20) << one.out;
  auto lines = error_lines(one.out);
  ASSERT_EQ(lines.size(), 1u) << one.out;
  EXPECT_NE(lines[0].find("error: epoch "), std::string::npos) << one.out;
  EXPECT_NE(lines[0].find("the model diverged; lower --lr (now 1e+10)"), std::string::npos)
      << one.out;
  const Result two = shell("HALO_COMM_TIMEOUT_S=60 " + mpirun(2) + " tgn train " + data("uci") +
                               kTgn + " --lr 1e10 --epochs 3",
                           t / "o2");
  EXPECT_EQ(two.code, 1) << two.out;
  EXPECT_LT(two.seconds, 30) << two.out;
  lines = error_lines(two.out);
  ASSERT_GE(lines.size(), 1u) << two.out;
  for (const std::string& l : lines)
    EXPECT_NE(l.find("the model diverged"), std::string::npos) << two.out;
}

// Times near the float range used to make every score NaN, and average precision spin forever.
TEST(BadTraining, ATimestampOf1e300EndsWithAnError) {
  TempDir t;
  std::string events = "% sym positive\n";  // the last of 300 events at 1e300
  for (int i = 0; i < 300; ++i)
    events += std::to_string(1 + i % 40) + " " + std::to_string(41 + i % 37) + " 1 " +
              (i == 299 ? std::string("1e300") : std::to_string(1000 + 10 * i)) + "\n";
  test::write_text(t / "huge.txt", events);
  const Result c = shell(halo() + " convert " + (t / "huge.txt").string() + " --format konect -o " +
                             (t / "huge").string(),
                         t / "o");
  if (c.code == 1 && error_lines(c.out).size() == 1)
    GTEST_SKIP() << "the reader refuses it: " << c.out;
  ASSERT_EQ(c.code, 0) << c.out;
  const Result r =
      shell(halo() + " tgn train " + (t / "huge").string() + kTgn + " --epochs 2", t / "o");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_LT(r.seconds, 20) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_NE(lines[0].find("not finite"), std::string::npos) << r.out;
}

// ---- 2. A split with no training events ----------------------------------------------------

TEST(BadTraining, ASplitWithNoTrainingEventsIsRefused) {
  TempDir t;
  for (const std::string model : {"tgn", "edgebank"}) {
    const Result r =
        shell(halo() + " tgn train " + data("same") + kTgn + " --model " + model, t / "o");
    EXPECT_EQ(r.code, 1) << model << "\n" << r.out;
    EXPECT_LT(r.seconds, 20) << r.out;
    const auto lines = error_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_NE(
        lines[0].find(
            "error: " + data("same") +
            ": the chronological split leaves no training events "
            "(train 0, validation 0, test 300 of 300 events; every event has the timestamp 5)"),
        std::string::npos)
        << r.out;
  }
}

// ---- 3. A rank that never starts -----------------------------------------------------------

// The pids of live processes whose command line holds `marker`.
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = test::read_bytes(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(marker) != std::string::npos && cmd.find("timeout") == std::string::npos)
      out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

TEST(BadTraining, ARankStoppedBeforeMpiStartUpEndsTheJobAtTheTimeout) {
  TempDir t;
  const std::string marker = data("cora") + "/./";  // unique to this job's command line
  const Result r = shell(
      "HALO_TEST_STOP_BEFORE_MPI_INIT=1 HALO_COMM_TIMEOUT_S=3 " + mpirun(2) + " info " + marker,
      t / "o");
  // Whatever the outcome, no stopped rank may outlive the test.
  for (pid_t p : processes_with(marker)) kill(p, SIGKILL);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "timeout ended it, not the job\n" << r.out;
  EXPECT_LT(r.seconds, 15) << r.out;
  EXPECT_NE(r.out.find("error: rank 0 of 2 on "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": MPI start-up (MPI_Init_thread) did not finish within 3 s"),
            std::string::npos)
      << r.out;
}

// ---- 3b. An error every rank meets is one line, from one rank ---------------------------------

// Every rank refuses PARTS of another K (and a bad flag) alike: the job prints the error once.
TEST(BadTraining, AnErrorEveryRankMeetsIsOneLineFromOneRank) {
  TempDir t;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" train " + data("cora-2") + " --epochs 2",
       "cora-2 has 2 parts but the job has 3 ranks: run it with mpirun -np 2"},
      {" train " + data("cora-2") + " --epochs x", "--epochs"},
      {" tgn train " + data("uci") + " --epochs x", "--epochs"},
  };
  for (const auto& [args, says] : cases) {
    const Result r =
        shell(mpirun(3) + args + " --threads 1 -q --log " + (t / "log.jsonl").string(), t / "o");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_LT(r.seconds, 10) << r.out;
    const auto lines = error_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.out;
    EXPECT_EQ(lines[0].rfind("error: rank 0 of 3 on ", 0), 0u) << r.out;
    EXPECT_NE(lines[0].find(says), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(t / "log.jsonl"));
  }
}

// ---- 3c. Ranks whose inputs differ -----------------------------------------------------------

// "mpirun -np 1 halo ARGS_A : -np 1 halo ARGS_B": rank 0 and rank 1 read different paths, as
// two nodes holding different copies at one path would.
std::string two_ranks(const std::string& a, const std::string& b) {
  const std::string bin = test::configured("HALO_BINARY", HALO_BINARY);
  return "timeout 60 " + test::configured("HALO_MPIEXEC", HALO_MPIEXEC) +
         " --oversubscribe --bind-to none -np 1 " + bin + a + " : -np 1 " + bin + b;
}

// A node holding another dataset's parts (same structure, other features: every count agrees)
// is refused before any work, in one line naming the rank and both fingerprints; the same for
// `halo tgn train`, whose ranks each read their node's copy of the stream.
TEST(BadTraining, ARankHoldingAnotherDatasetsPartsIsRefusedBeforeAnyWork) {
  TempDir t;
  const std::string common = " --epochs 2 --threads 1 -q --log " + (t / "log.jsonl").string() +
                             " --checkpoint " + (t / "ck").string();
  const auto fp = [&](const std::string& parts, const char* key) {
    return json_value(fs::path(data(parts)) / "meta.json", key);
  };
  const Result r = shell(
      two_ranks(" train " + data("g-2") + common, " train " + data("gn-2") + common), t / "o");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_LT(r.seconds, 10) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0].rfind("error: rank 0 of 2 on ", 0), 0u) << r.out;
  EXPECT_NE(lines[0].find(data("g-2") + ": rank 1 on "), std::string::npos) << r.out;
  EXPECT_NE(lines[0].find("its dataset fingerprint is " + fp("gn-2", "dataset_fingerprint") + " (" +
                          fp("g-2", "dataset_fingerprint") + " on rank 0)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(lines[0].find("its partition fingerprint is " + fp("gn-2", "fingerprint") + " (" +
                          fp("g-2", "fingerprint") + " on rank 0)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(lines[0].find("every node must hold copies of the same PARTS"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(t / "log.jsonl"));
  EXPECT_FALSE(fs::exists(t / "ck") && !fs::is_empty(t / "ck"));
  // The same parts on both ranks train (the check refuses only what differs).
  const Result same =
      shell(two_ranks(" train " + data("g-2") + common, " train " + data("g-2") + common), t / "o");
  EXPECT_EQ(same.code, 0) << same.out;
  // `halo predict` reads the parts the same way.
  const std::string predict = " predict --threads 1 --checkpoint " + (t / "ck").string() + " -o " +
                              (t / "p.npy").string() + " ";
  const Result p = shell(two_ranks(predict + data("g-2"), predict + data("gn-2")), t / "o");
  EXPECT_EQ(p.code, 1) << p.out;
  const auto pl = error_lines(p.out);
  ASSERT_EQ(pl.size(), 1u) << p.out;
  EXPECT_NE(pl[0].find(data("g-2") + ": rank 1 on "), std::string::npos) << p.out;
  EXPECT_NE(pl[0].find("every node must hold copies of the same PARTS"), std::string::npos)
      << p.out;
  EXPECT_FALSE(fs::exists(t / "p.npy"));

  const Result tgn = shell(two_ranks(" tgn train " + data("uci") + kTgn + " --epochs 1",
                                     " tgn train " + data("uci1k") + kTgn + " --epochs 1"),
                           t / "o");
  EXPECT_EQ(tgn.code, 1) << tgn.out;
  const auto tl = error_lines(tgn.out);
  ASSERT_EQ(tl.size(), 1u) << tgn.out;
  EXPECT_NE(tl[0].find(data("uci") + ": rank 1 on "), std::string::npos) << tgn.out;
  EXPECT_NE(tl[0].find("its dataset fingerprint is " +
                       json_value(fs::path(data("uci1k")) / "meta.json", "fingerprint")),
            std::string::npos)
      << tgn.out;
}

// ---- 4. --resume -----------------------------------------------------------------------------

TEST(BadTraining, ResumeWithoutACheckpointOrPastEpochsIsRefused) {
  TempDir t;
  const std::string train = halo() + " train " + data("cora") + " --threads 1 -q --checkpoint ";
  for (const char* dir : {"empty", "missing"}) {
    fs::create_directories(t / "empty");
    const Result r = shell(train + (t / dir).string() + " --epochs 2 --resume", t / "o");
    EXPECT_EQ(r.code, 2) << r.out;
    const auto lines = error_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0], "error: --resume: no checkpoint in " + (t / dir).string() +
                            "; drop --resume to start a new run");
  }
  ASSERT_EQ(shell(train + (t / "ck").string() + " --epochs 4", t / "o").code, 0);
  const Result past = shell(train + (t / "ck").string() + " --epochs 2 --resume", t / "o");
  EXPECT_EQ(past.code, 2) << past.out;
  EXPECT_NE(past.out.find("is of epoch 4, after --epochs 2; resume with --epochs 4 or more"),
            std::string::npos)
      << past.out;
  // On K ranks too, and at --epochs itself the finished run resumes and trains nothing.
  const std::string two = mpirun(2) + " train " + data("cora-2") + " --threads 1 -q --checkpoint ";
  const Result none = shell(two + (t / "empty").string() + " --epochs 2 --resume", t / "o");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("--resume: no checkpoint in "), std::string::npos) << none.out;
  EXPECT_EQ(shell(two + (t / "ck").string() + " --epochs 4 --resume", t / "o").code, 0);
}

TEST(BadTraining, TgnResumeWithoutACheckpointOrPastEpochsIsRefused) {
  TempDir t;
  const std::string train = halo() + " tgn train " + data("uci") + kTgn + " --checkpoint ";
  fs::create_directories(t / "empty");
  const Result none = shell(train + (t / "empty").string() + " --epochs 1 --resume", t / "o");
  EXPECT_EQ(none.code, 2) << none.out;
  const auto lines = error_lines(none.out);
  ASSERT_EQ(lines.size(), 1u) << none.out;
  EXPECT_EQ(lines[0], "error: --resume: no checkpoint in " + (t / "empty").string() +
                          "; drop --resume to start a new run");
  ASSERT_EQ(shell(train + (t / "ck").string() + " --epochs 2", t / "o").code, 0);
  const Result past = shell(train + (t / "ck").string() + " --epochs 1 --resume", t / "o");
  EXPECT_EQ(past.code, 2) << past.out;
  EXPECT_NE(past.out.find("is of epoch 2, after --epochs 1"), std::string::npos) << past.out;
}

// ---- 5. Absurd sizes -------------------------------------------------------------------------

TEST(BadTraining, AModelThatCannotFitIsRefusedBeforeAllocating) {
  TempDir t;
  // --hidden is capped at 65536 by its flag; each 65536 x 65536 hidden weight with its gradient
  // and Adam state is 64 GiB, beyond this machine and CI's 24 GiB.
  for (const std::string layers : {"3", "8"}) {
    const Result r = shell(
        halo() + " train " + data("cora") + " --hidden 65536 --layers " + layers + " -q", t / "o");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_LT(r.seconds, 10) << r.out;
    const auto lines = error_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_NE(lines[0].find("error: --hidden 65536 --layers " + layers + ": training needs about "),
              std::string::npos)
        << r.out;
    EXPECT_NE(lines[0].find(" is available ("), std::string::npos) << r.out;
  }
  // Beyond the flag's range: refused by the flag, before any estimate.
  const Result r = shell(halo() + " train " + data("cora") + " --hidden 1000000000 -q", t / "o");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: --hidden: must be an integer in [1, 65536], found '1000000000'"),
            std::string::npos)
      << r.out;
}

// An allocation the check lets through (it refuses only what is clearly impossible) and that
// fails anyway names what it was for. The check reads the address-space limit too (it would
// refuse this run: BadFlags tests that), so it is switched off here to reach the allocation.
TEST(BadTraining, AnAllocationThatFailsSaysWhatItWasFor) {
  // Weights of 1433 x 60000 floats (~0.34 GB each for value, gradient and two moments): ~2 GB.
  if (available_memory().bytes < (std::int64_t(2) << 30))
    GTEST_SKIP() << "needs 2 GB available to pass the check";
  TempDir t;
  const Result r = shell("ulimit -v 1000000; HALO_MEMORY_CHECK=0 " + halo() + " train " +
                             data("cora") + " --hidden 60000 --epochs 1 -q",
                         t / "o");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_NE(lines[0].find("error: out of memory allocating "), std::string::npos) << r.out;
  EXPECT_NE(lines[0].find("the memory model predicts "), std::string::npos) << r.out;
}

// The message says which epoch's allocation failed: the run's first epoch in this process (1,
// or the one after a resumed checkpoint) allocates the layers' buffers, later ones do not.
TEST(BadTraining, AnAllocationFailureNamesTheFirstEpochOnlyWhenItIsTheFirst) {
  TempDir t;
  const std::string train = halo() + " train " + data("cora") + " --threads 1 -q";
  auto failing_at = [&](int epoch, const std::string& more) {
    const Result r = shell(
        "HALO_INJECT_FAULT=0:" + std::to_string(epoch) + ":alloc " + train + " --epochs 4" + more,
        t / "o");
    EXPECT_EQ(r.code, 1) << r.out;
    const auto lines = error_lines(r.out);
    EXPECT_EQ(lines.size(), 1u) << r.out;
    return lines.empty() ? std::string() : lines[0];
  };
  const std::string first =
      "error: out of memory allocating the layers' activations and "
      "gradients (first epoch)";
  const std::string later = "error: out of memory allocating a training epoch";
  EXPECT_EQ(failing_at(1, "").rfind(first, 0), 0u);
  EXPECT_EQ(failing_at(3, "").rfind(later, 0), 0u);
  const std::string ck = " --checkpoint " + (t / "ck").string();
  ASSERT_EQ(shell(train + ck + " --epochs 2", t / "o").code, 0);
  EXPECT_EQ(failing_at(3, ck + " --resume").rfind(first, 0), 0u);
  EXPECT_EQ(failing_at(4, ck + " --resume").rfind(later, 0), 0u);
}

}  // namespace
}  // namespace halo

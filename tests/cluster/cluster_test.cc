// Across machines on one box: every test makes a cluster with tools/cluster/up.sh (each node a
// network namespace with its own host name, disk folder and memory cgroup, joined over TCP by a
// bridge), deploys only each node's parts to its disk, runs halo under mpirun with the cluster's
// launch agent, and removes the cluster again. They check what a user of real machines relies
// on: K ranks over TCP give one process's model while every rank reads only its own node's
// disk; a node killed or cut off, or a node out of memory, ends the whole job quickly with one
// line naming the rank and host; the checkpoints on the surviving nodes are intact and resume
// to the uninterrupted run's weights bit for bit, also on fewer nodes.
//
// Needs root and network namespaces (CI has both); elsewhere every test skips saying why.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "../test_util.h"
#include "../train_log.h"
#include "halo/graph/dataset.h"
#include "halo/graph/staging.h"
#include "halo/runtime/train/checkpoint.h"

namespace halo {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Result {
  int code = -1;
  double seconds = 0;
  std::string out;
};

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Runs a shell command, capturing stdout and stderr together.
Result shell(const std::string& cmd) {
  char name[] = "/tmp/halo-cluster-out-XXXXXX";
  const int fd = mkstemp(name);
  close(fd);
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system((cmd + " > " + name + " 2>&1").c_str());
  Result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::read_bytes(name);
  fs::remove(name);
  return r;
}

std::string halo() { return test::configured("HALO_BINARY", HALO_BINARY); }
fs::path tools() { return test::source_dir() / "tools" / "cluster"; }

// Why this machine cannot host a cluster (empty when it can).
std::string unavailable() {
  static const std::string why = [] {
    const Result r = shell(
        "bash -c " + quote(". " + (tools() / "lib.sh").string() + "; cluster_unavailable_reason"));
    std::string s = r.out;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return r.code == 0 ? s : "cannot run tools/cluster/lib.sh: " + s;
  }();
  return why;
}

#define SKIP_WITHOUT_CLUSTER()                                                   \
  do {                                                                           \
    if (!unavailable().empty()) GTEST_SKIP() << "no cluster: " << unavailable(); \
  } while (0)

// One cluster in a box for the lifetime of the object (removed, with its disks, at the end).
class Cluster {
 public:
  Cluster(const fs::path& root, int nodes, const std::string& options) : root_(root) {
    name_ = "hct" + std::to_string(getpid());
    env_ = "HALO_CLUSTER=" + name_ + " CLUSTER_ROOT=" + root_.string() + " ";
    up(nodes, options);
  }
  ~Cluster() { shell(env_ + (tools() / "down.sh").string()); }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Makes the cluster again (a fresh one: new namespaces and processes), keeping the disks.
  void up(int nodes, const std::string& options) {
    shell(env_ + (tools() / "down.sh").string() + " --keep-disks");
    const Result r =
        shell(env_ + (tools() / "up.sh").string() + " " + std::to_string(nodes) + " " + options);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  void deploy(const fs::path& parts) {
    const Result r = shell(env_ + (tools() / "deploy.sh").string() + " " + parts.string());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  // A command on NODE (run.sh: the cluster's MPI settings; mpirun there reaches every node).
  Result run(const std::string& cmd, const std::string& node = "node1") const {
    return shell(env_ + (tools() / "run.sh").string() + " --node " + node + " -- bash -c " +
                 quote(cmd));
  }
  std::string run_in_background(const std::string& cmd, const fs::path& out) const {
    return env_ + (tools() / "run.sh").string() + " -- bash -c " + quote(cmd) + " > " +
           out.string() + " 2>&1";
  }
  Result kill_node(const std::string& node) const {
    return shell(env_ + (tools() / "kill.sh").string() + " " + node);
  }
  Result link(const std::string& node, const std::string& state) const {
    return shell(env_ + (tools() / "link.sh").string() + " " + node + " " + state);
  }
  // Sends `sig` (STOP: freeze, CONT: thaw) to every process of NODE (its cgroup), as a hung
  // machine or a VM paused by its host would stop.
  Result signal_node(const std::string& node, const std::string& sig) const {
    return shell(env_ + "bash -c " +
                 quote(". " + (tools() / "lib.sh").string() +
                       "; cluster_load; pids=$(cluster_node_pids " + node +
                       "); [ -n \"$pids\" ] && kill -" + sig + " $pids"));
  }
  // Where NODE's disk is on this machine, and where a command on the node sees it.
  fs::path disk(const std::string& node) const { return root_ / "disks" / node; }
  std::string data() const { return (root_ / "data").string(); }

 private:
  fs::path root_;
  std::string name_, env_;
};

// mpirun on the cluster: ranks by slot, halo's timeout passed like any variable a job needs.
std::string mpirun(int np, const std::string& env = "") {
  std::string s = test::configured("HALO_MPIEXEC", HALO_MPIEXEC) + " -np " + std::to_string(np) +
                  " -x OMP_NUM_THREADS=1 ";
  if (!env.empty()) s += "-x " + env + " ";
  return s;
}

// Datasets shared by the tests of this process: Cora in 2, 3 and 4 parts, and a generated graph
// of 100,000 nodes in 2, 3 and 4 parts.
class Data : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-cluster-data-" + std::to_string(getpid()));
  }
  void SetUp() override {
    if (!unavailable().empty()) return;
    setenv("OMP_NUM_THREADS", "1", 1);
    fs::create_directories(dir());
    const std::string d = dir().string();
    for (const std::string& s : {
             halo() + " convert " + test::bundled("cora").string() + " -o " + d + "/cora",
             halo() + " partition " + d + "/cora -k 2 -o " + d + "/cora-2",
             halo() + " partition " + d + "/cora -k 3 -o " + d + "/cora-3",
             halo() + " partition " + d + "/cora -k 4 -o " + d + "/cora-4",
             halo() +
                 " generate --nodes 100000 --avg-degree 10 --features 32 --classes 8 --seed 3 -o " +
                 d + "/g100k",
             halo() + " partition " + d + "/g100k -k 2 -o " + d + "/g100k-2",
             halo() + " partition " + d + "/g100k -k 3 -o " + d + "/g100k-3",
             halo() + " partition " + d + "/g100k -k 4 -o " + d + "/g100k-4",
             // Two datasets of one structure (one seed) and other features (--noise): their
             // partitions' counts all agree, their fingerprints do not.
             halo() + " generate --nodes 3000 --avg-degree 8 --features 16 --classes 4 --seed 5 " +
                 "-o " + d + "/g",
             halo() + " generate --nodes 3000 --avg-degree 8 --features 16 --classes 4 --seed 5 " +
                 "--noise 3 -o " + d + "/gn",
             halo() + " partition " + d + "/g -k 3 -o " + d + "/g-3",
             halo() + " partition " + d + "/gn -k 3 -o " + d + "/gn-3",
         }) {
      const Result r = shell(s);
      ASSERT_EQ(r.code, 0) << s << "\n" << r.out;
    }
  }
  void TearDown() override { fs::remove_all(dir()); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Data);
fs::path data(const std::string& name) { return Data::dir() / name; }

using test::epochs;
using test::read_log;
using test::rel;

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

json checkpoint_meta(const fs::path& dir) {
  const json raw = json::parse(test::read_bytes(dir / "meta.json"));
  return read_meta(dir, "halo-checkpoint", raw.at("version").get<int>());
}

// The largest relative difference between the weights (".value" arrays) of two checkpoints;
// every array is also read in full with its checksum verified (an intact checkpoint).
double weight_difference(const fs::path& a, const fs::path& b, int* compared) {
  const json ma = checkpoint_meta(a), mb = checkpoint_meta(b);
  double worst = 0;
  *compared = 0;
  for (const auto& [name, entry] : ma.at("arrays").items()) {
    if (name.size() < 6 || name.substr(name.size() - 6) != ".value") continue;
    const Array<float> wa = map_listed<float>(a, ma, name, {}, kAnyShape, 1);
    const Array<float> wb = map_listed<float>(b, mb, name, {}, kAnyShape, 1);
    if (wa.size() != wb.size()) return 1e30;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < wa.size(); ++i) {
      num = std::max(num, double(std::abs(wa[i] - wb[i])));
      den = std::max(den, double(std::abs(wa[i])));
    }
    worst = std::max(worst, num / std::max(den, 1e-12));
    ++*compared;
  }
  return worst;
}

// Every array of every committed epoch under a rank's checkpoint folder reads back with its
// checksum (a job that died mid-write left no torn epoch behind); returns the newest epoch.
int expect_intact(const fs::path& rank_dir) {
  const std::vector<int> e = committed_epochs(rank_dir);
  EXPECT_FALSE(e.empty()) << rank_dir << ": no committed checkpoint";
  for (int epoch : e) {
    const fs::path d = epoch_dir(rank_dir, epoch);
    const json m = checkpoint_meta(d);
    for (const auto& [name, entry] : m.at("arrays").items()) {
      EXPECT_NO_THROW((void)map_listed<float>(d, m, name, {}, kAnyShape, 1, false))
          << d << " " << name;
    }
  }
  return e.empty() ? 0 : e.back();
}

// Waits until the job's log holds `n` epochs (or `seconds` pass); false when it never did.
bool wait_for_epochs(const fs::path& log, std::size_t n, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (epochs(read_log(log)).size() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Trains DATASET in one process and PARTS on the cluster (2 nodes x 2 ranks), and compares
// losses, metrics and final weights; checks that each node holds only its own parts.
void expect_cluster_equals_one_process(const std::string& dataset, const std::string& parts,
                                       const std::string& args) {
  test::TempDir t;
  Cluster c(t / "cluster", 2, "--slots 2");
  c.deploy(data(parts));
  // Each node has exactly its ranks' parts (rank r on node r/2 + 1) and sees no other disk.
  for (const auto& [node, mine] : std::map<std::string, std::string>{
           {"node1", "meta.json part-0 part-1"}, {"node2", "meta.json part-2 part-3"}}) {
    const Result ls =
        c.run("echo $(ls " + c.data() + "/" + parts + "); ls -A " +
                  (fs::path(c.data()).parent_path() / "disks").string() + " | wc -l; hostname",
              node);
    ASSERT_EQ(ls.code, 0) << ls.out;
    EXPECT_EQ(ls.out, mine + "\n0\n" + node + "\n") << "what " << node << " sees";
  }
  const std::string common = " --threads 1 -q --checkpoint-every 1000 " + args;
  const Result one = shell(halo() + " train " + data(dataset).string() + common + " --log " +
                           (t / "1.jsonl").string() + " --checkpoint " + (t / "ck1").string());
  ASSERT_EQ(one.code, 0) << one.out;
  const Result many =
      c.run(mpirun(4) + halo() + " train " + c.data() + "/" + parts + common + " --log " +
            (t / "k.jsonl").string() + " --checkpoint " + c.data() + "/ck");
  ASSERT_EQ(many.code, 0) << many.out;
  const auto la = read_log(t / "1.jsonl"), lb = read_log(t / "k.jsonl");
  const auto ea = epochs(la), eb = epochs(lb);
  ASSERT_EQ(ea.size(), eb.size());
  ASSERT_GT(ea.size(), 0u);
  for (const auto& [e, ra] : ea) {
    const json& rb = eb.at(e);
    EXPECT_LT(rel(ra["loss"], rb["loss"]), 1e-4) << "epoch " << e;
    for (const char* m : {"train", "valid", "test"})
      if (ra.contains(m)) {
        EXPECT_LT(rel(ra[m], rb[m]), 1e-4) << "epoch " << e << " " << m;
      }
  }
  EXPECT_EQ(lb.back()["ranks"], 4);
  // The final weights of every rank (each on its own node's disk) against the one process's.
  const std::string last = "epoch-" + std::to_string(ea.rbegin()->first);
  for (int r = 0; r < 4; ++r) {
    int compared = 0;
    const fs::path mine =
        c.disk(r < 2 ? "node1" : "node2") / "ck/run-0" / ("rank-" + std::to_string(r)) / last;
    EXPECT_LT(weight_difference(t / "ck1/run-0/rank-0" / last, mine, &compared), 1e-4)
        << "rank " << r;
    EXPECT_GT(compared, 1);
  }
}

TEST(Cluster, CoraOnTwoNodesOfTwoRanksEqualsOneProcess) {
  SKIP_WITHOUT_CLUSTER();
  expect_cluster_equals_one_process("cora", "cora-4",
                                    "--preset planetoid-gcn --epochs 30 --eval-every 5");
}

TEST(Cluster, GeneratedGraphOf100kNodesOnTwoNodesEqualsOneProcess) {
  SKIP_WITHOUT_CLUSTER();
  expect_cluster_equals_one_process("g100k", "g100k-4",
                                    "--layers 2 --hidden 32 --epochs 8 --eval-every 4");
}

// An uneven cluster: each node gets its own CPU quota and link cap, and `halo train --calibrate`
// run across the nodes sees them: the node with a quarter of another's CPU is measured several
// times slower, the capped link several times slower than a free one. (The quotas leave part of
// this machine's 2 cores free, so the nodes do not also compete for them.)
TEST(Cluster, UnevenNodesGetTheirOwnQuotaAndLinkAndCalibrationMeasuresThem) {
  SKIP_WITHOUT_CLUSTER();
  test::TempDir t;
  Cluster c(t / "c", 3, "--cpus-per-node-list 0.6,0.15,0.6 --link-rate-list -,100mbit,-");
  const Result qdisc =
      shell("ip netns exec hct" + std::to_string(getpid()) + "-node2 tc qdisc show dev eth0");
  EXPECT_NE(qdisc.out.find("rate 100Mbit"), std::string::npos) << qdisc.out;
  c.deploy(data("cora-3"));
  const Result cal =
      c.run(mpirun(3) + halo() + " train " + c.data() +
            "/cora-3 --layers 3 --hidden 256 --threads 1 --calibrate " + c.data() + "/speed.json");
  ASSERT_EQ(cal.code, 0) << cal.out;
  const json table = json::parse(test::read_bytes(c.disk("node1") / "speed.json"));
  const json& r = table["ranks"];
  ASSERT_EQ(r.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[i]["host"], "node" + std::to_string(i + 1));
  const auto epoch = [&](int i) {  // seconds per epoch of the graph's mean row
    return r[i]["row_s"].get<double>() + 4.9 * r[i]["nonzero_s"].get<double>();
  };
  EXPECT_GT(epoch(1), 2.5 * epoch(0)) << table.dump();              // 0.15 CPU against 0.6
  const double capped = r[0]["link_bytes_per_s"][1].get<double>();  // node1 - node2: 100 Mbit/s
  const double free = r[0]["link_bytes_per_s"][2].get<double>();    // node1 - node3
  EXPECT_LT(capped, 14e6) << table.dump();
  EXPECT_GT(free, 3 * capped) << table.dump();
}

// A failure while 4 ranks on 2 nodes train Cora (checkpoints every 10 epochs): the job must end
// within `limit` seconds of it, non-zero, printing a line that matches `line`; the checkpoints
// on node1 must be intact, and a fresh cluster resumes them to the uninterrupted run's weights.
template <class Fail>
void expect_failure_ends_job_and_resume_is_exact(const std::string& env, Fail&& fail, double limit,
                                                 const std::string& line) {
  test::TempDir t;
  const std::string args =
      " --preset planetoid-gcn --epochs 400 --eval-every 1000 --threads 1 -q --checkpoint-every 10";
  const std::string cmd = mpirun(4, env) + halo() + " train ";
  // The uninterrupted run, on a cluster as well (the same transport and reduction order).
  {
    Cluster ref(t / "ref", 2, "--slots 2");
    ref.deploy(data("cora-4"));
    const Result r =
        ref.run(cmd + ref.data() + "/cora-4" + args + " --checkpoint " + ref.data() + "/ck");
    ASSERT_EQ(r.code, 0) << r.out;
    fs::create_directories(t / "expected");
    fs::copy(ref.disk("node1") / "ck/run-0/rank-0/epoch-400", t / "expected",
             fs::copy_options::recursive);
  }
  Cluster c(t / "cluster", 2, "--slots 2");
  c.deploy(data("cora-4"));
  const fs::path log = t / "log.jsonl";
  const std::string job = c.run_in_background(
      cmd + c.data() + "/cora-4" + args + " --checkpoint " + c.data() + "/ck --log " + log.string(),
      t / "job.out");
  std::thread runner([&] { std::system(job.c_str()); });
  if (!wait_for_epochs(log, 60, 60)) {
    runner.join();
    FAIL() << "training did not start:\n" << test::read_bytes(t / "job.out");
  }
  const auto failed_at = std::chrono::steady_clock::now();
  fail(c);
  // The job (mpirun) must end by itself within the limit.
  runner.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - failed_at).count();
  const std::string out = test::read_bytes(t / "job.out");
  EXPECT_LT(took, limit) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(line)))
      << "expected a line matching '" << line << "' in:\n"
      << out;
  EXPECT_EQ(epochs(read_log(log)).count(400), 0u) << "the job finished before the failure";
  // Nothing lost: node1's checkpoints are intact; a fresh cluster resumes them and ends with the
  // uninterrupted run's weights, bit for bit.
  const int newest = expect_intact(c.disk("node1") / "ck/run-0/rank-0");
  expect_intact(c.disk("node1") / "ck/run-0/rank-1");
  EXPECT_GE(newest, 10);
  c.up(2, "--slots 2");
  const Result resumed =
      c.run(cmd + c.data() + "/cora-4" + args + " --checkpoint " + c.data() + "/ck --resume");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  int compared = 0;
  EXPECT_EQ(
      weight_difference(t / "expected", c.disk("node1") / "ck/run-0/rank-0/epoch-400", &compared),
      0.0);
  EXPECT_GT(compared, 1);
}

TEST(Cluster, NodeLossEndsTheJobNamingRanksAndHostAndNothingIsLost) {
  SKIP_WITHOUT_CLUSTER();
  expect_failure_ends_job_and_resume_is_exact(
      "", [](Cluster& c) { ASSERT_EQ(c.kill_node("node2").code, 0); }, 15.0,
      "error: rank 0 of 4 on node1: lost rank 2 and rank 3 on node2");
}

TEST(Cluster, LinkLossEndsTheJobWithinTheTimeoutNamingThePeer) {
  SKIP_WITHOUT_CLUSTER();
  // HALO_COMM_TIMEOUT_S=4: the heartbeat timeout follows it (min(30, 4)).
  expect_failure_ends_job_and_resume_is_exact(
      "HALO_COMM_TIMEOUT_S=4", [](Cluster& c) { ASSERT_EQ(c.link("node2", "down").code, 0); },
      4.0 + 15.0,
      "error: rank 0 of 4 on node1: lost rank 2 and rank 3 on node2: no heartbeat for 4 s|"
      "error: rank [01] of 4: .*no answer from rank [23] \\(node2\\)");
}

TEST(Cluster, NodeOutOfMemoryEndsTheJobSayingSoAndTheCheckpointSurvives) {
  SKIP_WITHOUT_CLUSTER();
  const Result kind =
      shell("bash -c " + quote(". " + (tools() / "lib.sh").string() + "; cluster_cgroup_kind"));
  if (kind.out.rfind("none", 0) == 0) GTEST_SKIP() << "no memory cgroups on this machine";
  test::TempDir t;
  const std::string args =
      " --layers 2 --hidden 32 --eval-every 1000 --threads 1 -q --checkpoint-every 5";
  const std::string cmd = mpirun(4) + halo() + " train ";
  // 10 epochs with checkpoints on nodes with memory enough, then a resume where node2's memory
  // is too small for its parts.
  Cluster c(t / "cluster", 2, "--slots 2");
  c.deploy(data("g100k-4"));
  const Result first =
      c.run(cmd + c.data() + "/g100k-4" + args + " --epochs 10 --checkpoint " + c.data() + "/ck");
  ASSERT_EQ(first.code, 0) << first.out;
  c.up(2, "--slots 2 --mem-per-node-list -,24M");
  // The memory model sees at start that node2's parts cannot fit (more than twice the room its
  // cgroup leaves) and refuses before allocating; with the check off the kernel's OOM killer
  // ends the ranks, and the supervisor says so.
  const Result refused = c.run(cmd + c.data() + "/g100k-4" + args +
                               " --epochs 20 --resume --checkpoint " + c.data() + "/ck");
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_TRUE(std::regex_search(
      refused.out, std::regex("error: rank [23] of 4 on node2: .*/part-[23]: training needs "
                              "about [0-9.]+ MiB on this rank \\(memory model; .*\\), but "
                              "only [0-9.]+ MiB is available \\(its memory cgroup's limit\\); "
                              "partition the dataset into more parts")))
      << refused.out;
  const Result oom =
      c.run(mpirun(4, "HALO_MEMORY_CHECK=0") + halo() + " train " + c.data() + "/g100k-4" + args +
            " --epochs 20 --resume --checkpoint " + c.data() + "/ck");
  EXPECT_NE(oom.code, 0) << oom.out;
  EXPECT_TRUE(std::regex_search(
      oom.out, std::regex("error: rank [23] of 4 on node2: out of memory: the kernel's OOM "
                          "killer ended it at [0-9]+ MiB resident \\(the memory limit of "
                          "its cgroup is 24 MiB\\)")))
      << oom.out;
  for (const char* rank : {"rank-2", "rank-3"})
    EXPECT_EQ(expect_intact(c.disk("node2") / "ck/run-0" / rank), 10);
  // With memory enough again the resume finishes as an uninterrupted 20-epoch run does.
  c.up(2, "--slots 2");
  const Result resumed = c.run(cmd + c.data() + "/g100k-4" + args +
                               " --epochs 20 --resume --checkpoint " + c.data() + "/ck");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  const Result straight =
      c.run(cmd + c.data() + "/g100k-4" + args + " --epochs 20 --checkpoint " + c.data() + "/ck2");
  ASSERT_EQ(straight.code, 0) << straight.out;
  int compared = 0;
  EXPECT_EQ(weight_difference(c.disk("node1") / "ck2/run-0/rank-0/epoch-20",
                              c.disk("node1") / "ck/run-0/rank-0/epoch-20", &compared),
            0.0);
  EXPECT_GT(compared, 1);
}

// A node whose copy of PARTS is another dataset's (same structure, other features: every send
// and receive count agrees) is refused before any work, in one line naming the node and both
// fingerprints, where it used to train a mix of the two datasets.
TEST(Cluster, ANodeHoldingAnotherDatasetsPartsIsRefusedInOneLine) {
  SKIP_WITHOUT_CLUSTER();
  test::TempDir t;
  Cluster c(t / "cluster", 3, "--slots 1");
  c.deploy(data("g-3"));
  // node2 (rank 1) holds gn-3's meta.json and part-1 under g-3's name.
  fs::remove_all(c.disk("node2") / "g-3");
  fs::create_directories(c.disk("node2") / "g-3");
  fs::copy(data("gn-3") / "meta.json", c.disk("node2") / "g-3" / "meta.json");
  fs::copy(data("gn-3") / "part-1", c.disk("node2") / "g-3" / "part-1",
           fs::copy_options::recursive);
  const auto meta = [](const std::string& parts) {
    return json::parse(test::read_bytes(data(parts) / "meta.json"));
  };
  const json g = meta("g-3"), gn = meta("gn-3");
  const Result r = c.run(mpirun(3) + halo() + " train " + c.data() + "/g-3 --epochs 3 -q --log " +
                         (t / "log.jsonl").string() + " --checkpoint " + c.data() + "/ck");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_LT(r.seconds, 10) << r.out;
  const auto lines = error_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0].rfind("error: rank 0 of 3 on node1: " + c.data() +
                               "/g-3: rank 1 on node2 reads another input than rank 0 on node1: ",
                           0),
            0u)
      << r.out;
  EXPECT_NE(
      lines[0].find("its dataset fingerprint is " + gn["dataset_fingerprint"].get<std::string>() +
                    " (" + g["dataset_fingerprint"].get<std::string>() + " on rank 0)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(lines[0].find("its partition fingerprint is " + gn["fingerprint"].get<std::string>() +
                          " (" + g["fingerprint"].get<std::string>() + " on rank 0)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(t / "log.jsonl")) << "a log was started";
  for (const char* node : {"node1", "node2", "node3"})
    EXPECT_FALSE(fs::exists(c.disk(node) / "ck") && !fs::is_empty(c.disk(node) / "ck")) << node;
}

// A frozen node (every process stopped, as a hung machine or a paused VM: its kernel still
// answers TCP, so no connection times out) ends the job within the timeout + 15 s with one
// line, whatever the node does later: mpirun used to wait for the frozen node's daemon until
// it thawed.
TEST(Cluster, AFrozenNodeEndsTheJobWithinTheTimeoutInOneLine) {
  SKIP_WITHOUT_CLUSTER();
  test::TempDir t;
  constexpr double kTimeout = 10;
  Cluster c(t / "cluster", 3, "--slots 1");
  c.deploy(data("cora-3"));
  const fs::path log = t / "log.jsonl";
  const std::string job =
      "timeout 120 env " +
      c.run_in_background(mpirun(3, "HALO_COMM_TIMEOUT_S=" + std::to_string(int(kTimeout))) +
                              halo() + " train " + c.data() +
                              "/cora-3 --epochs 100000 --threads 1 -q --log " + log.string(),
                          t / "job.out");
  std::thread runner([&] { std::system(job.c_str()); });
  if (!wait_for_epochs(log, 5, 60)) {
    runner.join();
    FAIL() << "training did not start:\n" << test::read_bytes(t / "job.out");
  }
  ASSERT_EQ(c.signal_node("node2", "STOP").code, 0);
  const auto frozen_at = std::chrono::steady_clock::now();
  runner.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
  EXPECT_EQ(c.signal_node("node2", "CONT").code, 0);  // thawed; the cluster goes at the end
  const std::string out = test::read_bytes(t / "job.out");
  std::printf("the job ended %.1f s after the freeze\n", took);
  EXPECT_LT(took, kTimeout + 15) << out;
  const auto lines = error_lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_TRUE(std::regex_search(
      lines[0], std::regex("error: rank 0 of 3 on node1: lost rank 1 on node2: no heartbeat for "
                           "10 s|error: rank [02] of 3 on node[13]: .*no answer from rank 1 "
                           "\\(node2\\)")))
      << out;
}

// A slow link is not a dead rank: node2's link at 10 Mbit/s and HALO_COMM_TIMEOUT_S=3, while
// each epoch's 6 MB gradient all-reduce takes ~10 s over it. A wait ends only after the timeout
// with nothing received by any rank of the job, so the job trains; it used to end after 3 s
// with "all-reduce: no answer from the other ranks".
TEST(Cluster, ASlowLinkIsNotADeadRank) {
  SKIP_WITHOUT_CLUSTER();
  test::TempDir t;
  Cluster c(t / "cluster", 3, "--slots 1 --link-rate-list -,10mbit,-");
  c.deploy(data("cora-3"));
  const Result r =
      c.run(mpirun(3, "HALO_COMM_TIMEOUT_S=3") + halo() + " train " + c.data() +
            "/cora-3 --epochs 2 --hidden 1024 --threads 1 -q --log " + (t / "log.jsonl").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(error_lines(r.out).size(), 0u) << r.out;
  const auto e = epochs(read_log(t / "log.jsonl"));
  ASSERT_EQ(e.size(), 2u);
  // The waits did outlast the timeout: the link was as slow as meant.
  EXPECT_GT(e.at(2)["epoch_time_s"].get<double>(), 3.0) << r.out;
}

// A checkpoint belongs to the dataset, not to a partition: 3 nodes train 40 epochs of a
// 100k-node graph with a checkpoint every epoch; node3 dies after epoch 20 and its disk is gone;
// the 2 nodes left resume on a 2-part partition and finish. Every epoch's loss matches an
// uninterrupted 3-node run within 1e-4.
TEST(Cluster, ResumeOnFewerNodesAfterANodeDiedContinuesTheTrajectory) {
  SKIP_WITHOUT_CLUSTER();
  test::TempDir t;
  const std::string args =
      " --layers 2 --hidden 32 --epochs 40 --eval-every 1000 --threads 1 -q --checkpoint-every 1";
  const auto train = [&](int np, const std::string& parts, const std::string& rest) {
    return mpirun(np) + halo() + " train " + parts + args + rest;
  };
  Cluster c(t / "cluster", 3, "--slots 1");
  c.deploy(data("g100k-3"));
  const Result ref = c.run(train(3, c.data() + "/g100k-3", " --log " + (t / "ref.jsonl").string()));
  ASSERT_EQ(ref.code, 0) << ref.out;

  const fs::path log = t / "died.jsonl";
  const std::string job = c.run_in_background(
      train(3, c.data() + "/g100k-3", " --checkpoint " + c.data() + "/ck --log " + log.string()),
      t / "job.out");
  std::thread runner([&] { std::system(job.c_str()); });
  const bool started = wait_for_epochs(log, 20, 120);
  if (started) {
    EXPECT_EQ(c.kill_node("node3").code, 0);
  }
  runner.join();
  ASSERT_TRUE(started) << test::read_bytes(t / "job.out");
  const auto died = epochs(read_log(log));
  ASSERT_LT(died.size(), 40u) << "the job finished before node3 died";
  fs::remove_all(c.disk("node3"));  // the lost node's disk is gone too

  c.up(2, "--slots 1");
  c.deploy(data("g100k-2"));
  const Result resumed = c.run(
      train(2, c.data() + "/g100k-2",
            " --checkpoint " + c.data() + "/ck --resume --log " + (t / "resumed.jsonl").string()));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  const auto expected = epochs(read_log(t / "ref.jsonl"));
  auto got = epochs(read_log(t / "resumed.jsonl"));
  ASSERT_FALSE(got.empty());
  const int first_resumed = got.begin()->first;
  EXPECT_GE(first_resumed, 20) << "resumed from an old checkpoint";
  EXPECT_LE(first_resumed, int(died.size()) + 1);
  for (const auto& [e, r] : died)
    if (e < first_resumed) got[e] = r;
  ASSERT_EQ(got.size(), 40u);
  for (const auto& [e, r] : expected)
    EXPECT_LT(rel(r["loss"], got.at(e)["loss"]), 1e-4) << "epoch " << e;
}

// A checkpoint folder holds one run across nodes, and a resume takes the newest epoch of its own
// options: run A checkpoints on 3 nodes, then its folder is deleted on node1 and node2 only. A
// fresh run B into it is refused in one line (node3 holds A's epoch 12) until --force, which
// clears node3's copy too; B is killed at epoch 7; node3 gets A's epoch 12 back (a node that
// missed the clear). B's --resume continues from its own epoch 6, to the losses of an
// uninterrupted B bit for bit, and its next commit removes the stale epoch.
TEST(Cluster, ACheckpointFolderHoldsOneRunAndAResumeTakesItsOwnNewestEpoch) {
  SKIP_WITHOUT_CLUSTER();
  test::TempDir t;
  Cluster c(t / "cluster", 3, "--slots 1");
  c.deploy(data("cora-3"));
  const std::string ck = " --checkpoint " + c.data() + "/ck";
  const auto train = [&](const std::string& rest, const std::string& env = "") {
    return c.run(mpirun(3, env) + halo() + " train " + c.data() + "/cora-3" +
                 " --layers 2 --hidden 16 --epochs 12 --eval-every 1000 --threads 1 -q "
                 "--checkpoint-every 1" +
                 rest);
  };
  const Result a = train(" --lr 0.05" + ck);
  ASSERT_EQ(a.code, 0) << a.out;
  const fs::path a12 = c.disk("node3") / "ck" / "run-0" / "rank-2" / "epoch-12";
  ASSERT_TRUE(fs::exists(a12 / "meta.json"));
  fs::copy(a12, t / "a12", fs::copy_options::recursive);
  fs::remove_all(c.disk("node1") / "ck");
  fs::remove_all(c.disk("node2") / "ck");

  const Result refused = train(" --lr 0.01" + ck);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("holds the checkpoint of an earlier run (epoch 12)"),
            std::string::npos)
      << refused.out;
  std::size_t lines = 0;
  for (std::size_t at = refused.out.find("error: "); at != std::string::npos;
       at = refused.out.find("error: ", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << refused.out;

  const Result killed = train(" --lr 0.01 --force" + ck, "HALO_INJECT_FAULT=1:7:kill");
  EXPECT_NE(killed.code, 0) << killed.out;
  EXPECT_FALSE(fs::exists(a12)) << "--force left node3's copy of the earlier run";
  fs::copy(t / "a12", a12, fs::copy_options::recursive);

  const fs::path log = t / "resumed.jsonl", whole = t / "whole.jsonl";
  const Result resumed = train(" --lr 0.01 --resume --log " + log.string() + ck);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  // node3's epoch 12 is now B's own (the stale one was removed by B's first commit).
  const json key_b =
      checkpoint_meta(c.disk("node1") / "ck" / "run-0" / "rank-0" / "epoch-12")["key"];
  EXPECT_EQ(checkpoint_meta(a12)["key"], key_b);
  EXPECT_NE(checkpoint_meta(t / "a12")["key"], key_b);
  const Result straight = train(" --lr 0.01 --log " + whole.string());
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto got = epochs(read_log(log)), expected = epochs(read_log(whole));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.begin()->first, 7) << "resumed from another epoch than B's 6";
  EXPECT_EQ(got.size(), 6u);
  for (const auto& [e, r] : got) EXPECT_EQ(r["loss"], expected.at(e)["loss"]) << "epoch " << e;
}

}  // namespace
}  // namespace halo

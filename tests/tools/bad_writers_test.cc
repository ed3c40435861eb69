// One output, one run: two writers of one output cannot both succeed (the second commit finds the
// first's output and fails, whatever the timing), a checkpoint folder holds one run (a fresh run
// refuses an earlier run's checkpoint unless --resume or --force, and two trainings cannot write
// one folder at once), a resume takes the newest epoch of its own options, output names up to the
// file system's limit are written, and a log FIFO nobody reads is refused instead of waited on.
// Timing-free: a writer is held at its commit (HALO_TEST_WAIT_AT, staging.h) while the other
// writer commits.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

std::string halo_bin() { return test::configured("HALO_BINARY", HALO_BINARY); }

// Runs `env ENV halo ARGS` with both streams captured.
Result halo(const std::string& args, const std::string& env = "") {
  static int calls = 0;
  const fs::path base =
      fs::temp_directory_path() /
      ("halo-bad-writers-" + std::to_string(getpid()) + "-" + std::to_string(calls++));
  const test::Run run =
      test::shell_redirected("env " + env + " timeout 60 " + halo_bin() + " " + args,
                             " >" + base.string() + ".out 2>" + base.string() + ".err");
  Result r{run.code, test::read_bytes(base.string() + ".out"),
           test::read_bytes(base.string() + ".err"), run.seconds};
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
}

// Exit `code`, exactly one line "error: ..." holding every one of parts, in under 10 s.
void expect_error(const Result& r, int code, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "'" << p << "' not in: " << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

// Every entry under dir (relative paths), for "nothing else was written" checks.
std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::end(it); it.increment(ec))
    out.insert(fs::relative(it->path(), dir).string());
  return out;
}

// No staging entry (".NAME.halo-tmp-PID", ".NAME.halo-old-PID") left anywhere under dir.
void expect_no_staging(const fs::path& dir) {
  for (const std::string& e : listing(dir))
    EXPECT_EQ(e.find(".halo-"), std::string::npos) << "left behind: " << e;
}

// A background `halo ARGS` held at its commit until release() (HALO_TEST_WAIT_AT), so another
// writer can commit first; finish() lets it go and returns how it ended.
class HeldWriter {
 public:
  HeldWriter(const fs::path& dir, const std::string& args) : gate_(dir / "release"), dir_(dir) {
    fs::remove(gate_);
    const std::string cmd = "env HALO_TEST_WAIT_AT=staged:" + gate_.string() + " " + halo_bin() +
                            " " + args + " >" + (dir / "held.out").string() + " 2>" +
                            (dir / "held.err").string() + "; echo $? >" +
                            (dir / "held.rc").string();
    fs::remove(dir / "held.rc");
    thread_ = std::thread([cmd] { (void)std::system(cmd.c_str()); });
  }
  // Waits until the writer has staged its output under dir (a staging entry exists in `where`).
  void wait_staged(const fs::path& where) {
    for (int i = 0; i < 3000; ++i) {
      for (const std::string& e : listing(where))
        if (e.find(".halo-tmp-") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the held writer never staged into " << where;
  }
  Result finish() {
    test::write_text(gate_, "go");
    thread_.join();
    Result r;
    r.code = std::stoi(test::read_bytes(dir_ / "held.rc"));
    r.out = test::read_bytes(dir_ / "held.out");
    r.err = test::read_bytes(dir_ / "held.err");
    for (const char* f : {"held.rc", "held.out", "held.err", "release"}) fs::remove(dir_ / f);
    return r;
  }

 private:
  fs::path gate_, dir_;
  std::thread thread_;
};

class BadWriters : public ::testing::Test {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-bad-writers-" + std::to_string(getpid()));
  }
  static fs::path cora() { return dir() / "cora"; }
  static fs::path uci() { return dir() / "uci"; }
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);
    for (const std::string& step :
         {"convert " + test::bundled("cora").string() + " -o " + cora().string(),
          "convert " + test::bundled("uci-messages/graph.txt").string() + " --format konect -o " +
              uci().string()}) {
      const Result r = halo(step);
      ASSERT_EQ(r.code, 0) << step << ": " << r.err;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }
  static std::string train(const std::string& more) {
    return "train " + cora().string() + " -q " + more;
  }
  static std::string tgn(const std::string& more) {
    return "tgn train " + uci().string() + " --max-train-events 400 --skip-eval -q " + more;
  }
};

std::string meta_of(const fs::path& dir) { return test::read_bytes(dir / "meta.json"); }

// ---- racing writers -------------------------------------------------------------------------

// Two partitions into one new folder: the one committing second fails "already exists" and the
// first one's parts stay, whole.
TEST_F(BadWriters, TwoPartitionsIntoOneFolderCannotBothSucceed) {
  TempDir t;
  const fs::path out = t / "out";
  HeldWriter late(t.path(), "partition " + cora().string() + " -k 2 -o " + out.string());
  late.wait_staged(t.path());
  const Result first = halo("partition " + cora().string() + " -k 3 -o " + out.string());
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string committed = meta_of(out);
  const Result second = late.finish();
  expect_error(second, 2, {out.string(), "already exists", "another process", "--force"});
  EXPECT_EQ(meta_of(out), committed);
  EXPECT_EQ(nlohmann::json::parse(committed).at("k"), 3);
  expect_no_staging(t.path());
}

// The same for two converts, and for --force writers: a replace replaces only what was there when
// it started, so the later of two --force writers fails too.
TEST_F(BadWriters, TwoConvertsAndTwoForcedReplacesCannotBothSucceed) {
  TempDir t;
  const fs::path out = t / "out";
  const std::string convert = "convert " + test::bundled("cora").string() + " -o " + out.string();
  {
    HeldWriter late(t.path(), convert);
    late.wait_staged(t.path());
    ASSERT_EQ(halo(convert).code, 0);
    expect_error(late.finish(), 2, {out.string(), "already exists"});
    expect_no_staging(t.path());
  }
  const std::string before = meta_of(out);
  HeldWriter late(t.path(), convert + " --force --name late");
  late.wait_staged(t.path());
  const Result first = halo(convert + " --force --name first");
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string committed = meta_of(out);
  EXPECT_NE(committed, before);
  expect_error(late.finish(), 2, {out.string(), "replaced by another process"});
  EXPECT_EQ(meta_of(out), committed);
  expect_no_staging(t.path());
}

// Two --predictions-out into one new file: the second commit fails, the first file stays.
TEST_F(BadWriters, TwoPredictionFilesIntoOnePathCannotBothSucceed) {
  TempDir t;
  const fs::path out = t / "p.npy";
  HeldWriter late(t.path(), train("--epochs 1 --predictions-out " + out.string()));
  late.wait_staged(t.path());
  ASSERT_EQ(halo(train("--epochs 2 --predictions-out " + out.string())).code, 0);
  const std::string committed = test::read_bytes(out);
  expect_error(late.finish(), 2, {out.string(), "already exists"});
  EXPECT_EQ(test::read_bytes(out), committed);
  expect_no_staging(t.path());
}

// A writer that started first and commits last (a long training) still finds the output taken:
// what it may replace is what was there when it started, not when its write began.
TEST_F(BadWriters, AWriterThatStartedFirstAndCommitsLastFindsTheOutputTaken) {
  TempDir t;
  const fs::path out = t / "p.npy", log = t / "long.jsonl";
  HeldWriter late(
      t.path(), train("--epochs 400 --log " + log.string() + " --predictions-out " + out.string()));
  for (int i = 0; i < 3000 && test::read_bytes(log).find("\"epoch\"") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // past its start-up checks
  const Result first = halo(train("--epochs 1 --predictions-out " + out.string()));
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string committed = test::read_bytes(out);
  late.wait_staged(t.path());
  expect_error(late.finish(), 2, {out.string(), "already exists"});
  EXPECT_EQ(test::read_bytes(out), committed);
  expect_no_staging(t.path());
}

// ---- names -------------------------------------------------------------------------------------

// Any name the file system takes is an output name: a 250-byte folder name (its staging entry
// would pass 255 bytes) and a 255-byte file name are written, and replaced.
TEST_F(BadWriters, NamesUpToTheFileSystemLimitAreWritten) {
  TempDir t;
  const fs::path folder = t / std::string(250, 'b');
  const std::string convert =
      "convert " + test::bundled("metis/4elt.graph").string() + " -o " + folder.string();
  const Result r = halo(convert);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(folder / "meta.json"));
  EXPECT_EQ(halo(convert + " --force").code, 0);
  expect_error(halo(convert), 2, {"already exists"});
  const fs::path file = t / (std::string(251, 'p') + ".npy");
  const Result p = halo(train("--epochs 1 --predictions-out " + file.string()));
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_TRUE(fs::is_regular_file(file));
  expect_no_staging(t.path());
}

// ---- checkpoint folders ---------------------------------------------------------------------

// A fresh run into a folder holding an earlier run is refused before anything is written (the
// log too), and halo predict keeps reading the earlier run; --force replaces it; --resume goes on.
TEST_F(BadWriters, AFreshRunRefusesAnEarlierRunsCheckpoint) {
  TempDir t;
  const fs::path ck = t / "ck", log = t / "log.jsonl";
  ASSERT_EQ(halo(train("--epochs 3 --hidden 32 --checkpoint " + ck.string())).code, 0);
  const std::set<std::string> before = listing(ck);
  const Result r = halo(train("--epochs 3 --checkpoint " + ck.string() + " --log " + log.string()));
  expect_error(r, 2, {ck.string(), "earlier run", "epoch 3", "--resume", "--force"});
  EXPECT_EQ(listing(ck), before);
  EXPECT_FALSE(fs::exists(log));
  // --force: the new run's model replaces the old one, and predict reads the new one.
  ASSERT_EQ(halo(train("--epochs 3 --hidden 16 --force --checkpoint " + ck.string())).code, 0);
  const nlohmann::json meta =
      nlohmann::json::parse(test::read_bytes(ck / "run-0" / "rank-0" / "epoch-3" / "meta.json"));
  EXPECT_EQ(meta.at("key").at("hidden"), 16);
  EXPECT_EQ(listing(ck).count("run-0/rank-0/epoch-3"), 1u);
  const Result pred = halo("predict " + cora().string() + " --checkpoint " + ck.string() + " -o " +
                           (t / "p.npy").string());
  EXPECT_EQ(pred.code, 0) << pred.err;
  // --resume of the forced run (past its last epoch: more epochs) continues it.
  const Result more = halo(train("--epochs 4 --hidden 16 --resume --checkpoint " + ck.string()));
  EXPECT_EQ(more.code, 0) << more.err;
  expect_error(halo(train("--epochs 4 --force --resume --checkpoint " + ck.string())), 2,
               {"--force", "--resume"});
  expect_no_staging(ck);
}

// The same for TGN.
TEST_F(BadWriters, AFreshTgnRunRefusesAnEarlierRunsCheckpoint) {
  TempDir t;
  const fs::path ck = t / "ck";
  ASSERT_EQ(halo(tgn("--epochs 2 --memory-dim 32 --checkpoint " + ck.string())).code, 0);
  const std::set<std::string> before = listing(ck);
  expect_error(halo(tgn("--epochs 1 --checkpoint " + ck.string())), 2,
               {ck.string(), "earlier run", "epoch 2", "--force"});
  EXPECT_EQ(listing(ck), before);
  ASSERT_EQ(halo(tgn("--epochs 1 --force --checkpoint " + ck.string())).code, 0);
  EXPECT_EQ(listing(ck).count("epoch-1"), 1u);
  EXPECT_EQ(listing(ck).count("epoch-2"), 0u);
  // The other trainer's checkpoint is never advised to be resumed: each way, with and without
  // --resume, the line says whose it is and that only --force replaces it.
  const fs::path gcn = t / "gcn";
  ASSERT_EQ(halo(train("--epochs 2 --checkpoint " + gcn.string())).code, 0);
  for (const char* more : {"", " --resume"}) {
    expect_error(halo(tgn("--epochs 1 --checkpoint " + gcn.string() + std::string(more))), 2,
                 {"a checkpoint of halo train", "cannot resume", "--force"});
    expect_error(halo(train("--epochs 3 --checkpoint " + ck.string() + std::string(more))), 2,
                 {"a checkpoint of halo tgn train", "cannot resume", "--force"});
  }
  ASSERT_EQ(halo(tgn("--epochs 1 --force --checkpoint " + gcn.string())).code, 0);
  EXPECT_EQ(listing(gcn).count("run-0"), 0u);
}

// A folder with anything but halo checkpoints in it is refused, --force or not, and left alone;
// a new folder the refused run created is removed again.
TEST_F(BadWriters, AFolderOfOtherFilesIsNoCheckpointFolder) {
  TempDir t;
  const fs::path ck = t / "photos";
  test::write_text(ck / "cat.jpg", "meow");
  for (const char* more : {"", " --force"})
    expect_error(halo(train("--epochs 1 --checkpoint " + ck.string() + std::string(more))), 2,
                 {ck.string(), "cat.jpg", "not a halo checkpoint"});
  EXPECT_EQ(listing(ck), std::set<std::string>{"cat.jpg"});
  expect_error(halo(tgn("--epochs 1 --checkpoint " + ck.string())), 2, {"cat.jpg"});
  // Nor is a folder whose checkpoints hold files halo did not write (deeper down), or a file
  // named like an epoch: refused with or without --force, and left as they are.
  for (const std::string foreign : {"run-0/rank-0/epoch-2/notes.txt", "run-0/rank-0/epoch-3"}) {
    const fs::path ck2 = t / "ck2";
    fs::remove_all(ck2);
    ASSERT_EQ(halo(train("--epochs 2 --checkpoint " + ck2.string())).code, 0);
    test::write_text(ck2 / foreign, "mine");
    const std::set<std::string> before = listing(ck2);
    for (const char* more : {"", " --force", " --resume"})
      expect_error(halo(train("--epochs 3 --checkpoint " + ck2.string() + std::string(more))), 2,
                   {ck2.string(), foreign, "not a halo checkpoint"});
    EXPECT_EQ(listing(ck2), before);
  }
  // A file given as the folder is named as what it is.
  test::write_text(t / "old.npy", "x");
  expect_error(halo(train("--epochs 1 --checkpoint " + (t / "old.npy").string())), 2,
               {"old.npy: is a regular file, not a folder"});
  // Outputs inside the checkpoint folder would make it a foreign one: refused before any work.
  ASSERT_EQ(halo(train("--epochs 1 --checkpoint " + (t / "ck3").string())).code, 0);
  expect_error(halo(train("--epochs 2 --resume --checkpoint " + (t / "ck3").string() + " --log " +
                          (t / "ck3" / "notes.log").string())),
               2, {"--log", "inside the checkpoint folder"});
  expect_error(halo(train("--epochs 2 --resume --checkpoint " + (t / "ck3").string() +
                          " --predictions-out " + (t / "ck3" / "run-0" / "p.npy").string())),
               2, {"--predictions-out", "inside the checkpoint folder"});
  // An empty value never silently turns an output off.
  for (const char* flag : {"--checkpoint", "--log", "--predictions-out"})
    expect_error(halo(train("--epochs 1 " + std::string(flag) + " ''")), 2, {flag, "empty string"});
  // A run that fails after its claim (no such split) leaves no new folder behind.
  const fs::path fresh = t / "fresh";
  expect_error(halo(train("--epochs 1 --split nosuch --checkpoint " + fresh.string())), 2,
               {"nosuch"});
  EXPECT_FALSE(fs::exists(fresh));
}

// Two trainings into one folder at once: exactly one succeeds, whatever the timing, and a folder
// another process holds is refused at once.
TEST_F(BadWriters, TwoTrainingsIntoOneFolderCannotBothSucceed) {
  TempDir t;
  const fs::path ck = t / "ck";
  fs::create_directories(ck);
  {  // a holder that never ends: this test process
    const int fd = ::open((ck / ".halo-lock-rank-0").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    expect_error(halo(train("--epochs 1 --checkpoint " + ck.string())), 2,
                 {ck.string(), "another halo training"});
    expect_error(halo(tgn("--epochs 1 --checkpoint " + ck.string())), 2, {"another halo training"});
    ::close(fd);
    fs::remove(ck / ".halo-lock-rank-0");
  }
  const std::string cmd = halo_bin() + " " + train("--epochs 5 --checkpoint " + ck.string());
  const test::Run both =
      test::shell_redirected("(" + cmd + "; echo rc=$?) & (" + cmd + "; echo rc=$?) & wait",
                             " >" + (t / "both.txt").string() + " 2>&1");
  const std::string out = test::read_bytes(t / "both.txt");
  EXPECT_EQ(both.code, 0);
  auto count = [&](const std::string& s) {
    std::size_t n = 0;
    for (std::size_t at = out.find(s); at != std::string::npos; at = out.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("rc=0"), 1u) << out;
  EXPECT_EQ(count("rc=2"), 1u) << out;
  EXPECT_EQ(count("error: "), 1u) << out;
  EXPECT_TRUE(out.find("another halo training") != std::string::npos ||
              out.find("earlier run") != std::string::npos)
      << out;
  EXPECT_EQ(listing(ck).count(".halo-lock-rank-0"), 0u);
}

// A rank folder that kept a newer epoch of another run (a node that missed the --force) does not
// block the resume: it continues from the newest epoch of its own options, bit for bit as an
// uninterrupted run, and the stale epoch is removed at its next checkpoint.
TEST_F(BadWriters, AResumeTakesTheNewestEpochOfItsOwnOptions) {
  TempDir t;
  const fs::path ck = t / "ck", stale = t / "stale";
  const std::string every = " --checkpoint-every 1 --checkpoint " + ck.string();
  ASSERT_EQ(halo(train("--epochs 12 --lr 0.05" + every)).code, 0);
  fs::copy(ck / "run-0" / "rank-0" / "epoch-12", stale, fs::copy_options::recursive);
  // Run B, fresh, killed after its epoch 6 checkpoint.
  const Result killed =
      halo(train("--epochs 10 --lr 0.01 --force" + every), "HALO_INJECT_FAULT=0:7:kill");
  EXPECT_NE(killed.code, 0);
  fs::copy(stale, ck / "run-0" / "rank-0" / "epoch-12", fs::copy_options::recursive);
  const fs::path log = t / "resumed.jsonl", whole = t / "whole.jsonl";
  const Result resumed =
      halo(train("--epochs 10 --lr 0.01 --resume --log " + log.string() + every));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_FALSE(fs::exists(ck / "run-0" / "rank-0" / "epoch-12"));
  ASSERT_EQ(halo(train("--epochs 10 --lr 0.01 --log " + whole.string())).code, 0);
  // Epochs 7-10 of the resumed run are those of the uninterrupted one, loss for loss.
  auto losses = [&log](const fs::path& f) {
    std::vector<std::string> out;
    std::istringstream in(test::read_bytes(f));
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.value("type", "") == "epoch" && (j.at("epoch").get<int>() >= 7 || f == log))
        out.push_back(j.at("loss").dump());
    }
    return out;
  };
  EXPECT_EQ(losses(log).size(), 4u);  // resumed after epoch 6, not 12
  EXPECT_EQ(losses(log), losses(whole));
}

// ---- special files --------------------------------------------------------------------------

// A log FIFO whose reader goes away mid-run ends the run in one line (EPIPE), not by a silent
// SIGPIPE, and the checkpoint folder's lock goes with it.
TEST_F(BadWriters, ALogFifoWhoseReaderLeavesEndsTheRunInOneLine) {
  TempDir t;
  const fs::path fifo = t / "log.fifo", ck = t / "ck";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const test::Run r = test::shell_redirected(
      "(head -c 10 " + fifo.string() + " >/dev/null &); timeout 60 " + halo_bin() + " " +
          train("--epochs 200 --log " + fifo.string() + " --checkpoint " + ck.string()),
      " >/dev/null 2>" + (t / "err.txt").string());
  const std::string err = test::read_bytes(t / "err.txt");
  EXPECT_EQ(r.code, 1) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(fifo.string() + ": write failed"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(ck / ".halo-lock-rank-0"));
}

// A log FIFO that nobody reads is refused at once (it would block forever); one with a reader is
// written.
TEST_F(BadWriters, ALogFifoWithoutAReaderIsRefused) {
  TempDir t;
  const fs::path fifo = t / "log.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expect_error(halo(train("--epochs 1 --log " + fifo.string())), 2,
               {fifo.string(), "FIFO", "no process is reading"});
  expect_error(halo(tgn("--epochs 1 --log " + fifo.string())), 2, {fifo.string(), "FIFO"});
  const test::Run r = test::shell_redirected(
      "cat " + fifo.string() + " >" + (t / "got.txt").string() + " & " + halo_bin() + " " +
          train("--epochs 1 --log " + fifo.string()) + "; wait",
      " >/dev/null 2>&1");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(test::read_bytes(t / "got.txt").find("\"summary\""), std::string::npos);
}

}  // namespace
}  // namespace halo

// Outputs as `halo` writes them (staging.h): a write the machine refuses (a full disk, /dev/full)
// fails the command with one line naming the file and leaves nothing; an output never replaces a
// device, a foreign folder or an input, and is written through a symbolic link; and what a
// killed writer left (staging entries, an old output moved aside) is cleaned or restored by the
// next writer in the same folder (an old output also by its next reader). Tests that need a full
// disk mount a 64 KiB tmpfs, and skip where they cannot (not root).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string err;
};

// Runs `env ENV halo ARGS` (ENV: VAR=value settings for halo alone), stderr captured.
Result halo(const std::string& args, const std::string& env = "") {
  const std::string halo_bin = test::configured("HALO_BINARY", HALO_BINARY);
  const fs::path err =
      fs::temp_directory_path() / ("halo-bad-output-err-" + std::to_string(getpid()));
  const int status = std::system(
      ("env " + env + " " + halo_bin + " " + args + " >/dev/null 2>" + err.string()).c_str());
  Result r;
  // A process SIGKILLed by a test hook reads as 128 + 9, as a shell reports it.
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = test::read_bytes(err);
  fs::remove(err);
  return r;
}

// Exit `code` and exactly one line "error: ..." holding every one of parts.
void expect_error(const Result& r, int code, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "'" << p << "' not in: " << r.err;
}

// Every entry under dir (recursive, links not followed), relative to it.
std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it)
    out.insert(it->path().lexically_relative(dir).string());  // not fs::relative: it follows links
  return out;
}

// The entries under dir named as staging (".NAME.halo-tmp-PID", ".NAME.halo-old-PID"), not
// what is inside them.
std::vector<std::string> staging_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : listing(dir)) {
    const std::string name = fs::path(e).filename().string();
    if (name.find(".halo-tmp-") != std::string::npos ||
        name.find(".halo-old-") != std::string::npos)
      out.push_back(e);
  }
  return out;
}

bool is_char_device(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

// A 64 KiB tmpfs mounted for one test, so that "the disk is full" is real and quick. Needs root.
class TinyFs {
 public:
  explicit TinyFs(const fs::path& dir) : dir_(dir) {
    fs::create_directories(dir);
    if (geteuid() != 0) {
      why_ = "mounting a tmpfs needs root";
    } else if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") != 0) {
      why_ = std::string("mount -t tmpfs failed: ") + std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~TinyFs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  // Fills the file system with dir/filler, then frees `leave` bytes of it.
  void fill(off_t leave) const {
    const fs::path f = dir_ / "filler";
    FILE* out = std::fopen(f.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    const std::string block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), out) == block.size() &&
           std::fflush(out) == 0) {
    }
    std::fclose(out);
    fs::resize_file(f, fs::file_size(f) - std::uintmax_t(leave));
  }

 private:
  fs::path dir_;
  bool mounted_ = false;
  std::string why_;
};

// Cora converted once for the suite; tests that must compare an input copy it first.
class BadOutput : public ::testing::Test {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-bad-output-" + std::to_string(getpid()));
  }
  static fs::path cora() { return dir() / "cora"; }
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);
    for (const std::string& step :
         {"convert " + test::bundled("cora").string() + " -o " + cora().string(),
          "convert " + test::bundled("uci-messages/graph.txt").string() + " --format konect -o " +
              (dir() / "uci").string()}) {
      const Result r = halo(step);
      ASSERT_EQ(r.code, 0) << step << ": " << r.err;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }
  static std::string train(const std::string& more) {
    return "train " + cora().string() + " --epochs 2 -q " + more;
  }
  // One short TGN epoch on UCI messages.
  static std::string tgn(const std::string& more) {
    return "tgn train " + (dir() / "uci").string() +
           " --epochs 1 --max-train-events 400 --skip-eval -q " + more;
  }
};

// ---- lost writes: every failed write fails the command and leaves nothing -----------------------

// A log on /dev/full: the first record's ENOSPC stops the run, naming the device.
TEST_F(BadOutput, LogOnDevFullFails) {
  expect_error(halo(train("--log /dev/full")), 1, {"/dev/full", "No space left on device"});
  EXPECT_TRUE(is_char_device("/dev/full"));
}

// TGN's log too: its first record's ENOSPC stops the run.
TEST_F(BadOutput, TgnLogOnDevFullFails) {
  expect_error(halo(tgn("--log /dev/full")), 1, {"/dev/full", "No space left on device"});
}

// A log on a full file system fails, and the log it created with nothing in it is removed.
TEST_F(BadOutput, LogOnFullFileSystemFails) {
  TempDir t;
  TinyFs tiny(t / "fs");
  if (!tiny.mounted()) GTEST_SKIP() << tiny.why();
  tiny.fill(0);
  const fs::path log = t / "fs" / "train.log";
  expect_error(halo(train("--log " + log.string())), 1, {log.string(), "No space left on device"});
  EXPECT_EQ(listing(t / "fs"), std::set<std::string>{"filler"});
}

// A log that fills the disk midway (~137 bytes a record, 4 KiB free) fails the run naming it, and
// keeps its whole records: the one cut short is removed, so the log still parses.
TEST_F(BadOutput, LogFillingTheDiskKeepsWholeRecords) {
  TempDir t;
  TinyFs tiny(t / "fs");
  if (!tiny.mounted()) GTEST_SKIP() << tiny.why();
  tiny.fill(4096);
  const fs::path log = t / "fs" / "train.log";
  expect_error(halo("train " + cora().string() + " --epochs 100 -q --log " + log.string()), 1,
               {log.string(), "No space left on device"});
  const std::string text = test::read_bytes(log);
  EXPECT_GT(text.size(), 2000u);
  EXPECT_EQ(text.back(), '\n');
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << line;
}

// Predictions (21 KiB) with 8 KiB free: the write fails midway and its staging file goes.
TEST_F(BadOutput, PredictionsOnFullFileSystemFail) {
  TempDir t;
  TinyFs tiny(t / "fs");
  if (!tiny.mounted()) GTEST_SKIP() << tiny.why();
  tiny.fill(8192);
  const fs::path pred = t / "fs" / "pred.npy";
  expect_error(halo(train("--predictions-out " + pred.string())), 1,
               {pred.string(), "No space left on device"});
  EXPECT_EQ(listing(t / "fs"), std::set<std::string>{"filler"});
}

// A checkpoint that does not fit (three 92 KiB arrays) fails the run naming its epoch, and
// leaves nothing: no staged epoch, nor the folders created for it.
TEST_F(BadOutput, CheckpointOnFullFileSystemFails) {
  TempDir t;
  TinyFs tiny(t / "fs");
  if (!tiny.mounted()) GTEST_SKIP() << tiny.why();
  const fs::path ck = t / "fs" / "ck";
  expect_error(halo(train("--checkpoint " + ck.string() + " --checkpoint-every 1")), 1,
               {(ck / "run-0" / "rank-0" / "epoch-1").string() + "/", "No space left on device"});
  EXPECT_TRUE(listing(t / "fs").empty());
}

// A TGN checkpoint that does not fit fails the run and leaves nothing, not even its folder.
TEST_F(BadOutput, TgnCheckpointOnFullFileSystemFails) {
  TempDir t;
  TinyFs tiny(t / "fs");
  if (!tiny.mounted()) GTEST_SKIP() << tiny.why();
  const fs::path ck = t / "fs" / "ck";
  expect_error(halo(tgn("--checkpoint " + ck.string())), 1,
               {(ck / "epoch-1").string() + "/", "No space left on device"});
  EXPECT_TRUE(listing(t / "fs").empty());
}

// Parts (15 MiB of features) onto 64 KiB: partition fails before partitioning, naming what the
// parts need and what is free, and leaves no staging folder.
TEST_F(BadOutput, PartitionOnFullFileSystemFails) {
  TempDir t;
  TinyFs tiny(t / "fs");
  if (!tiny.mounted()) GTEST_SKIP() << tiny.why();
  const fs::path parts = t / "fs" / "P";
  expect_error(halo("partition " + cora().string() + " -k 2 -o " + parts.string()), 1,
               {parts.string() + ": No space left on device: up to",
                "MiB for 2 parts of this dataset, " + (t / "fs").string() + " has", "KiB free"});
  EXPECT_TRUE(listing(t / "fs").empty());
}

// ---- clobbering: devices, foreign folders and inputs are never replaced ------------------------

// A device as --predictions-out is refused before training (it would be renamed over) and stays.
TEST_F(BadOutput, PredictionsNeverReplaceADevice) {
  TempDir t;
  expect_error(halo(train("--predictions-out /dev/full")), 2, {"/dev/full", "character device"});
  EXPECT_TRUE(is_char_device("/dev/full"));
  // A private null device and a link to it: the system's /dev/null is not the test's to risk.
  if (::mknod((t / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod needs root";
  fs::create_symlink(t / "null", t / "link");
  for (const std::string name : {"null", "link"}) {
    expect_error(halo(train("--predictions-out " + (t / name).string())), 2,
                 {(t / name).string(), "character device"});
    EXPECT_TRUE(is_char_device(t / "null"));
    EXPECT_TRUE(fs::is_symlink(t / "link"));
  }
  EXPECT_EQ(listing(t.path()), (std::set<std::string>{"null", "link"}));
}

// Outputs that are links to regular files are written through: the links stay, the targets change.
TEST_F(BadOutput, OutputsAreWrittenThroughLinks) {
  TempDir t;
  test::write_text(t / "real.npy", "old");
  test::write_text(t / "real.log", "old\n");
  fs::create_symlink("real.npy", t / "pred.npy");
  fs::create_symlink("real.log", t / "train.log");
  const Result r = halo(train("--predictions-out " + (t / "pred.npy").string() + " --log " +
                              (t / "train.log").string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(t / "pred.npy"));
  EXPECT_TRUE(fs::is_symlink(t / "train.log"));
  EXPECT_EQ(test::read_bytes(t / "real.npy").substr(0, 6), "\x93NUMPY");
  const std::string log = test::read_bytes(t / "real.log");
  EXPECT_EQ(log.rfind('{', 0), 0u) << log;  // truncated, then JSON records
  EXPECT_EQ(listing(t.path()),
            (std::set<std::string>{"real.npy", "real.log", "pred.npy", "train.log"}));
}

// An input file as an output, directly or through a link, is refused and stays byte-identical.
TEST_F(BadOutput, InputsAreNeverOutputs) {
  TempDir t;
  fs::copy(cora(), t / "cora", fs::copy_options::recursive);
  const fs::path meta = t / "cora" / "meta.json", features = t / "cora" / "features.bin";
  const std::string meta_bytes = test::read_bytes(meta),
                    features_bytes = test::read_bytes(features);
  fs::create_symlink(features, t / "link.npy");
  const std::string ds = (t / "cora").string();
  for (const auto& [flag, out] :
       std::vector<std::pair<std::string, fs::path>>{{"--log", meta},
                                                     {"--predictions-out", features},
                                                     {"--predictions-out", t / "link.npy"}}) {
    expect_error(halo("train " + ds + " --epochs 2 -q " + flag + " " + out.string()), 2,
                 {out.string(), "input"});
    EXPECT_EQ(test::read_bytes(meta), meta_bytes);
    EXPECT_EQ(test::read_bytes(features), features_bytes);
  }
  EXPECT_TRUE(staging_entries(t.path()).empty());
}

// --force replaces only a folder halo wrote: a foreign non-empty folder is refused untouched.
TEST_F(BadOutput, ForceRefusesAForeignFolder) {
  TempDir t;
  test::write_text(t / "mine" / "notes.txt", "my notes\n");
  const std::string src = test::bundled("cora").string(), out = (t / "mine").string();
  expect_error(halo("convert " + src + " -o " + out), 2, {out, "already exists"});
  expect_error(halo("convert " + src + " -o " + out + " --force"), 2, {out, "has no meta.json"});
  EXPECT_EQ(listing(t.path()), (std::set<std::string>{"mine", "mine/notes.txt"}));
  EXPECT_EQ(test::read_bytes(t / "mine" / "notes.txt"), "my notes\n");
}

// --force over a dataset halo wrote replaces it whole: nothing of the old one or of staging is
// left.
TEST_F(BadOutput, ForceReplacesAHaloDataset) {
  TempDir t;
  fs::copy(cora(), t / "out", fs::copy_options::recursive);
  test::write_text(t / "out" / "stale.txt", "from the old output\n");
  const Result r = halo("convert " + test::bundled("cora").string() + " -o " +
                        (t / "out").string() + " --force");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(t / "out" / "stale.txt"));
  EXPECT_EQ(test::read_bytes(t / "out" / "meta.json"), test::read_bytes(cora() / "meta.json"));
  EXPECT_TRUE(staging_entries(t.path()).empty());
  EXPECT_EQ(halo("info " + (t / "out").string()).code, 0);
}

// ---- leftovers: what a killed writer left, the next writer in the folder cleans or restores ----

// A convert killed before its rename leaves its staging folder; the next convert removes it.
TEST_F(BadOutput, KilledConvertStagingIsCleaned) {
  TempDir t;
  const std::string cmd =
      "convert " + test::bundled("cora").string() + " -o " + (t / "out").string();
  EXPECT_EQ(halo(cmd, "HALO_TEST_KILL_AT=staged").code, 128 + SIGKILL);
  const auto left = staging_entries(t.path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".out.halo-tmp-", 0), 0u) << left[0];
  EXPECT_FALSE(fs::exists(t / "out"));
  const Result r = halo(cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(staging_entries(t.path()).empty());
  EXPECT_TRUE(fs::exists(t / "out" / "meta.json"));
}

// A staging entry whose writer still holds its lock is never cleaned, even when its PID is not
// a halo process: only the lock's release (the writer's death) makes it stale.
TEST_F(BadOutput, LiveWritersStagingIsKept) {
  TempDir t;
  const fs::path live = t / (".out.halo-tmp-" + std::to_string(getpid()));
  fs::create_directories(live);
  const int fd = ::open(live.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const std::string cmd =
      "convert " + test::bundled("cora").string() + " -o " + (t / "other").string();
  ASSERT_EQ(halo(cmd).code, 0);
  EXPECT_TRUE(fs::exists(live));
  ::close(fd);  // as the kernel does when the writer dies
  ASSERT_EQ(halo(cmd + " --force").code, 0);
  EXPECT_FALSE(fs::exists(live));
}

// A predictions file killed before its rename leaves its staging file; the next writer removes it.
TEST_F(BadOutput, KilledPredictionsStagingIsCleaned) {
  TempDir t;
  const std::string cmd = train("--predictions-out " + (t / "pred.npy").string());
  EXPECT_EQ(halo(cmd, "HALO_TEST_KILL_AT=staged").code, 128 + SIGKILL);
  const auto left = staging_entries(t.path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".pred.npy.halo-tmp-", 0), 0u) << left[0];
  const Result r = halo(cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(listing(t.path()), std::set<std::string>{"pred.npy"});
}

// A replace killed between its two renames leaves the old output aside; the next reader of it,
// or the next writer in its folder, puts it back: the old output is lost at no instant.
TEST_F(BadOutput, ReplaceKilledAsideIsRestored) {
  const std::string src = test::bundled("cora").string();
  for (const bool by_writer : {false, true}) {
    TempDir t;
    fs::copy(cora(), t / "out", fs::copy_options::recursive);
    test::write_text(t / "out" / "marker", "old\n");
    EXPECT_EQ(halo("convert " + src + " -o " + (t / "out").string() + " --force",
                   "HALO_TEST_KILL_AT=aside HALO_TEST_NO_EXCHANGE=1")
                  .code,
              128 + SIGKILL);
    EXPECT_FALSE(fs::exists(t / "out"));
    bool aside = false;
    for (const auto& e : staging_entries(t.path()))
      aside |= e.rfind(".out.halo-old-", 0) == 0 && fs::exists(t / e / "marker");
    EXPECT_TRUE(aside) << "the old output is not aside";
    const Result r = halo(by_writer ? "convert " + src + " -o " + (t / "other").string()
                                    : "info " + (t / "out").string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("restored"), std::string::npos) << r.err;
    EXPECT_EQ(test::read_bytes(t / "out" / "marker"), "old\n");
    // A writer also removes the dead one's staging folder; a reader only restores.
    EXPECT_EQ(staging_entries(t.path()).size(), by_writer ? 0u : 1u);
  }
}

// A replace killed right after its swap leaves the new output in place and the old one staged
// for removal; the next writer removes it.
TEST_F(BadOutput, ReplaceKilledAfterSwapKeepsTheNewOutput) {
  TempDir t;
  fs::copy(cora(), t / "out", fs::copy_options::recursive);
  test::write_text(t / "out" / "marker", "old\n");
  const std::string cmd =
      "convert " + test::bundled("cora").string() + " -o " + (t / "out").string() + " --force";
  EXPECT_EQ(halo(cmd, "HALO_TEST_KILL_AT=swapped").code, 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(t / "out" / "marker"));
  EXPECT_TRUE(fs::exists(t / "out" / "meta.json"));
  EXPECT_EQ(staging_entries(t.path()).size(), 1u);
  ASSERT_EQ(halo(cmd).code, 0);
  EXPECT_EQ(listing(t.path()).count("out"), 1u);
  EXPECT_TRUE(staging_entries(t.path()).empty());
}

// A checkpoint killed before its rename leaves a staged epoch; resuming continues from the last
// committed epoch and the next checkpoint removes the staging folder.
TEST_F(BadOutput, KilledCheckpointStagingIsCleaned) {
  TempDir t;
  const std::string ck = " --checkpoint " + (t / "ck").string() + " --checkpoint-every 1";
  ASSERT_EQ(halo("train " + cora().string() + " --epochs 1 -q" + ck).code, 0);
  EXPECT_EQ(halo(train(ck + " --resume"), "HALO_TEST_KILL_AT=staged").code, 128 + SIGKILL);
  const fs::path rank = t / "ck" / "run-0" / "rank-0";
  const auto left = staging_entries(rank);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".epoch-2.halo-tmp-", 0), 0u) << left[0];
  const Result r = halo(train(ck + " --resume"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> top;
  for (const auto& e : fs::directory_iterator(rank)) top.insert(e.path().filename().string());
  EXPECT_EQ(top, std::set<std::string>{"epoch-2"});
}

}  // namespace
}  // namespace halo

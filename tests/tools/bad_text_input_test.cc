// Malformed text inputs and command lines as `halo` meets them (issue 17): lines longer than a
// reader block, binary data where text is expected, non-finite numbers, ids that would size a
// graph nobody meant, and command-line mistakes. Each must either parse or stop within seconds
// with exit 1 (bad data) or 2 (bad parameter) and one printable line "error: ..." naming the file
// or flag and the problem, never "internal:", and leave nothing in the output's folder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

using Result = test::Run;
using test::shell;

std::string halo() { return test::configured("HALO_BINARY", HALO_BINARY); }

// `halo args` under `timeout 30`: a hang shows as exit 124 instead of stalling the suite.
Result run(const std::string& args, const fs::path& dir) {
  return shell("timeout 30 " + halo() + " " + args, dir);
}

// Exit `code` (1: bad data, 2: bad parameter) within `seconds`, and one printable line
// "error: ..." holding every one of parts, without "internal:".
void expect_refused(const Result& r, const std::string& what, const std::vector<std::string>& parts,
                    int code = 1, double seconds = 10.0) {
  EXPECT_EQ(r.code, code) << what << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << ": " << r.err;
  EXPECT_EQ(r.err.find("internal:"), std::string::npos) << what << ": " << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << what << ": '" << p << "' not in: " << r.err;
  const bool printable = std::all_of(r.err.begin(), r.err.end(),
                                     [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7f); });
  EXPECT_TRUE(printable) << what << ": stderr holds control or non-ASCII bytes";
  EXPECT_LT(r.seconds, seconds) << what;
}

// Nothing in t but the inputs: no output folder, no ".out.halo-tmp-PID" staging entry.
void expect_nothing_written(const TempDir& t, const std::vector<std::string>& inputs) {
  for (const auto& e : fs::directory_iterator(t.path()))
    EXPECT_NE(std::find(inputs.begin(), inputs.end(), e.path().filename().string()), inputs.end())
        << "left behind: " << e.path();
}

// `halo convert IN -o t/out ARGS`, expected to be refused with nothing written.
void expect_convert_refused(const TempDir& t, const fs::path& in, const std::string& what,
                            const std::vector<std::string>& parts, int code = 1,
                            const std::string& args = "") {
  expect_refused(
      run("convert " + in.string() + " -o " + (t / "out").string() + " " + args, t.path()), what,
      parts, code);
  expect_nothing_written(t, {in.filename().string()});
}

// A 5-node OGB directory, 0-1-2-3 and 4 isolated, with 2 features per node.
struct MiniOgb {
  std::string edges = "0,1\n1,2\n2,3\n", num_edges = "3\n";
  std::string feat = "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,5\n";
  std::string train = "0\n1\n", valid = "2\n", test = "3\n4\n";
  void write(const fs::path& root) const {
    test::write_gz(root / "raw/num-node-list.csv.gz", "5\n");
    test::write_gz(root / "raw/num-edge-list.csv.gz", num_edges);
    test::write_gz(root / "raw/edge.csv.gz", edges);
    test::write_gz(root / "raw/node-feat.csv.gz", feat);
    test::write_gz(root / "raw/node-label.csv.gz", "0\n1\n1\n0\n1\n");
    test::write_gz(root / "split/s/train.csv.gz", train);
    test::write_gz(root / "split/s/valid.csv.gz", valid);
    test::write_gz(root / "split/s/test.csv.gz", test);
  }
};

// A METIS star whose hub line (ids 2..n, ~4.8 MB) is longer than a 4 MiB reader block parses.
TEST(BadTextInput, MetisLineLongerThanAReaderBlockParses) {
  TempDir t;
  const int n = 700000;
  std::string text = std::to_string(n) + " " + std::to_string(n - 1) + "\n";
  for (int v = 2; v <= n; ++v) text += std::to_string(v) + (v < n ? " " : "\n");
  ASSERT_GT(text.size(), std::size_t(4) << 20);
  for (int v = 2; v <= n; ++v) text += "1\n";
  test::write_text(t / "star.graph", text);
  const Result r =
      run("convert " + (t / "star.graph").string() + " -o " + (t / "out").string() + " --json",
          t.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"nodes\":700000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"edges\":1399998"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 10.0);
}

// An OGB edge line padded past 4 MiB parses; one whose 5 MB field is not a number is refused
// with the field cut short in the message.
TEST(BadTextInput, OgbEdgeLineLongerThanAReaderBlock) {
  TempDir t;
  MiniOgb ogb;
  ogb.edges = "0,1\n1," + std::string(5 << 20, ' ') + "2\n2,3\n";
  ogb.write(t / "in");
  const Result ok =
      run("convert " + (t / "in").string() + " -o " + (t / "out").string() + " --json", t.path());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"edges\":6"), std::string::npos) << ok.out;
  fs::remove_all(t / "out");
  ogb.edges = "0,1\n1," + std::string(5 << 20, '7') + "\n2,3\n";
  ogb.write(t / "in");
  const Result r = run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path());
  expect_refused(r, "5 MB id",
                 {"raw/edge.csv.gz: line 2: expected an integer for destination id in column 2"});
  EXPECT_LT(r.err.size(), 500u) << "the long field is echoed whole";
  expect_nothing_written(t, {"in"});
}

// /dev/zero inside an OGB folder is refused before it is read (a file there is a regular file);
// named as a .gz file it stops at its magic bytes; as a plain edge list, at its first NUL.
TEST(BadTextInput, EndlessBinaryInputStopsAtOnce) {
  TempDir t;
  MiniOgb().write(t / "in");
  fs::remove(t / "in/raw/edge.csv.gz");
  fs::create_symlink("/dev/zero", t / "in/raw/edge.csv.gz");
  expect_convert_refused(t, t / "in", "/dev/zero in an OGB folder",
                         {"raw/edge.csv.gz: is a character device, expected a regular file"});
  fs::remove_all(t / "in");
  fs::create_symlink("/dev/zero", t / "edges.gz");
  expect_convert_refused(
      t, t / "edges.gz", "/dev/zero as gzip",
      {"edges.gz: not a gzip file: starts with bytes 00 00, gzip starts with 1f 8b"}, 1,
      "--format edgelist");
  fs::remove(t / "edges.gz");
  fs::create_symlink("/dev/zero", t / "edges.txt");
  expect_convert_refused(t, t / "edges.txt", "/dev/zero as text",
                         {"edges.txt: line 1: binary data: byte 0x00"});
}

// Text without a newline is refused once a line passes kMaxLineBytes (1 GiB), naming the limit.
// The line comes through a pipe fed by a thread of this test, so that nothing goes to disk.
TEST(BadTextInput, EndlessLineIsRefusedNamingTheLimit) {
  TempDir t;
  const fs::path fifo = t / "endless.txt";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread feed([&] {
    sigset_t pipe;  // a write after halo exits fails with EPIPE instead of killing the test
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    int fd = -1;
    for (int i = 0; i < 3000 && fd < 0; ++i)  // halo opens the pipe within 30 s, or the test fails
      if ((fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) usleep(10000);
    if (fd < 0) return;
    fcntl(fd, F_SETFL, 0);
    fcntl(fd, F_SETPIPE_SZ, 1 << 20);
    const std::string block(1 << 20, '7');
    for (int i = 0; i < 2048 && write(fd, block.data(), block.size()) > 0; ++i) {
    }
    close(fd);
  });
  const Result r =
      run("convert " + fifo.string() + " --format edgelist -o " + (t / "out").string(), t.path());
  feed.join();
  // Reading the 1 GiB takes ~7 s alone and more beside other tests: `timeout 30` is the hang guard.
  expect_refused(r, "endless line",
                 {"endless.txt: line 1: line longer than 1024 MiB, the longest halo reads"}, 1,
                 29.0);
  expect_nothing_written(t, {"endless.txt"});
}

// Inf, NaN (any spelling) and overflowing values in features and weights are refused, naming
// the file, line and column.
TEST(BadTextInput, NonFiniteNumbersAreRefused) {
  TempDir t;
  for (const std::string v : {"inf", "-Infinity", "Nan", "+nan", "nan(0x1)", "1e400"}) {
    MiniOgb ogb;
    ogb.feat = "0.5,1\n1.5,2\n2.5," + v + "\n3.5,4\n4.5,5\n";
    ogb.write(t / "in");
    expect_convert_refused(t, t / "in", "feature " + v,
                           {"raw/node-feat.csv.gz: line 3: expected a ",
                            " for a feature value in column 2, found '" + v + "'"});
    fs::remove_all(t / "in");
  }
  for (const std::string v : {"inf", "NaN", "1e400"}) {
    test::write_text(t / "k.txt", "% sym positive\n1 2 1 10\n2 3 " + v + " 11\n");
    expect_convert_refused(t, t / "k.txt", "KONECT weight " + v,
                           {"k.txt: line 3: expected a ", "weight in column 3"});
    test::write_text(t / "k.txt", "% sym positive\n1 2 1 10\n2 3 1 " + v + "\n");
    expect_convert_refused(t, t / "k.txt", "KONECT time " + v,
                           {"k.txt: line 3: expected a ", "timestamp in column 4"});
    fs::remove(t / "k.txt");
    test::write_text(t / "j.csv",
                     "user_id,item_id,timestamp,state_label,f\n0,0,1,0,0.5\n0,1,2,0," + v + "\n");
    expect_convert_refused(t, t / "j.csv", "JODIE feature " + v,
                           {"j.csv: line 3: expected a ", "feature in column 5"});
    fs::remove(t / "j.csv");
  }
}

// Non-finite or absurd numbers on the command line are parameter errors naming the flag.
TEST(BadTextInput, NonFiniteFlagsAreRefused) {
  TempDir t;
  const std::string out = (t / "out").string();
  expect_refused(run("generate -o " + out + " --noise nan", t.path()), "--noise nan",
                 {"--noise", "nan"}, 2);
  expect_refused(run("generate -o " + out + " --avg-degree inf", t.path()), "--avg-degree inf",
                 {"--avg-degree", "inf"}, 2);
  expect_refused(run("train " + (t / "ds").string() + " --lr inf", t.path()), "--lr inf",
                 {"--lr", "inf"}, 2);
  expect_refused(run("train " + (t / "ds").string() + " --lr 1e999", t.path()), "--lr 1e999",
                 {"--lr"}, 2);
  expect_refused(run("tgn train " + (t / "ds").string() + " --memory-dim 1e9", t.path()),
                 "--memory-dim 1e9", {"--memory-dim"}, 2);
  expect_refused(run("generate -o " + out + " --avg-degree 4 --edges 100", t.path()),
                 "--avg-degree and --edges", {"--avg-degree", "--edges"}, 2);
  expect_nothing_written(t, {});
}

// One stray id of 594387432 in a 3-edge list would size a 594M-node graph: refused, naming the
// flags that size it on purpose; with --num-nodes the id is out of range instead.
TEST(BadTextInput, StrayHugeIdIsRefused) {
  TempDir t;
  test::write_text(t / "e.txt", "0 1\n1 2\n2 594387432\n");
  expect_convert_refused(
      t, t / "e.txt", "stray id",
      {"e.txt: line 3: node id 594387432 makes 594387433 nodes, but only 4 distinct ids appear",
       "--num-nodes", "--allow-sparse-ids"});
  expect_convert_refused(t, t / "e.txt", "--num-nodes 3",
                         {"e.txt: line 3: node id 594387432 out of range [0, 2]"}, 1,
                         "--num-nodes 3");
  expect_convert_refused(t, t / "e.txt", "--num-nodes -1", {"--num-nodes", "[1, 2147483647]"}, 2,
                         "--num-nodes -1");
  expect_convert_refused(t, t / "e.txt", "--num-nodes 0", {"--num-nodes"}, 2, "--num-nodes 0");
  fs::remove(t / "e.txt");
  test::write_text(t / "k.txt", "% sym positive\n1 2 1 10\n2 594387432 1 11\n");
  expect_convert_refused(t, t / "k.txt", "KONECT stray id",
                         {"k.txt: line 3: node id 594387432 makes", "--allow-sparse-ids"});
}

// Command-line parse errors are exit 2 with one line pointing at --help.
TEST(BadTextInput, CommandLineErrorsExitTwo) {
  TempDir t;
  test::write_text(t / "e.txt", "0 1\n");
  const std::string in = (t / "e.txt").string(), out = (t / "out").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"convert " + in + " -o " + out + " --bogus", "--bogus"},
      {"convert " + in + " -o", "--output"},
      {"convert " + in + " " + in + " -o " + out, in},
      {"generate -o " + out + " --nodes 12x", "--nodes"},
      {"generate -o " + out + " --nodes 0x10", "--nodes"},
      {"partition " + in + " -k two -o " + out, "--parts"},
      {"frobnicate", "frobnicate"}};
  for (const auto& [args, named] : cases)
    expect_refused(run(args, t.path()), args, {named, "--help"}, 2);
  expect_nothing_written(t, {"e.txt"});
}

// A symlink loop given as input is one clear line from every command, not a crash.
TEST(BadTextInput, SymlinkLoopInputIsOneLine) {
  TempDir t;
  fs::create_symlink(t / "loop", t / "loop");
  const std::string loop = (t / "loop").string(), out = (t / "out").string();
  for (const std::string& args :
       {"convert " + loop + " -o " + out, "info " + loop, "partition " + loop + " -k 2 -o " + out,
        "train " + loop + " --epochs 1", "tgn train " + loop + " --epochs 1"}) {
    const Result r = run(args, t.path());
    EXPECT_TRUE(r.code == 1 || r.code == 2) << args << ": " << r.code;
    expect_refused(r, args, {loop, "symbolic links"}, r.code);
  }
  expect_nothing_written(t, {"loop"});
}

// A .gz file that is not gzip is refused by its magic; its bytes (escape sequences included)
// never reach the terminal, nor do those of a garbled plain text field.
TEST(BadTextInput, BinaryBytesNeverReachTheTerminal) {
  TempDir t;
  const std::string junk = "\x1b[2J\x1b]0;owned\x07\xff\xfe\r\n";
  test::write_text(t / "e.txt.gz", junk);
  expect_convert_refused(t, t / "e.txt.gz", "junk .gz",
                         {"e.txt.gz: not a gzip file: starts with bytes 1b 5b"});
  fs::remove(t / "e.txt.gz");
  MiniOgb().write(t / "in");
  test::write_text(t / "in/raw/node-feat.csv.gz", junk);
  expect_convert_refused(t, t / "in", "junk node-feat", {"node-feat.csv.gz: not a gzip file"});
  fs::remove_all(t / "in");
  test::write_text(t / "e.txt", "0 1\n1 " + junk);
  expect_convert_refused(t, t / "e.txt", "junk text",
                         {"e.txt: line 2: expected an integer", "\\x1b"});
}

// Split files listing a node twice, or a test node also in train, are refused naming the file.
TEST(BadTextInput, OgbSplitsMustBeDisjoint) {
  TempDir t;
  MiniOgb ogb;
  ogb.train = "0\n1\n0\n";
  ogb.write(t / "in");
  expect_convert_refused(t, t / "in", "duplicate",
                         {"split/s/train.csv.gz: line 3: node id 0 listed twice"});
  ogb = MiniOgb();
  ogb.test = "3\n1\n";
  ogb.write(t / "in");
  expect_convert_refused(
      t, t / "in", "overlap",
      {"split/s/test.csv.gz: line 2: node id 1 is also in train.csv.gz", "must be disjoint"});
}

}  // namespace
}  // namespace halo

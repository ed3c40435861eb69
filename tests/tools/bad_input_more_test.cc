// Inputs of issue 35 as `halo` meets them: JSON nested deep enough to overflow any recursion
// (class 1), FIFOs and directories where a file belongs (classes 7 and 8), names with control
// bytes (class 4), and raw data `convert` used to write although every reader refuses it
// (class 3). Each must stop within seconds with one printable line "error: ..." naming the file
// and exit 1 (2 for a flag), never crash or hang, and leave nothing behind.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../test_util.h"
#include "halo/graph/npz.h"

namespace halo {
namespace {
using test::TempDir;
using json = nlohmann::json;
namespace fs = std::filesystem;

using Result = test::Run;

std::string halo() { return test::configured("HALO_BINARY", HALO_BINARY); }

// `halo args` under `timeout 30`: a hang shows as exit 124 instead of stalling the suite.
Result run(const std::string& args, const fs::path& dir) {
  return test::shell("timeout 30 " + halo() + " " + args, dir);
}

bool is_printable_line(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7f); });
}

// Exit `code` within 10 s, one printable line "error: ..." holding every one of parts, never
// "internal:".
void expect_refused(const Result& r, const std::string& what, const std::vector<std::string>& parts,
                    int code = 1) {
  EXPECT_EQ(r.code, code) << what << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << ": " << r.err;
  EXPECT_EQ(r.err.find("internal:"), std::string::npos) << what << ": " << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << what << ": '" << p << "' not in: " << r.err;
  EXPECT_TRUE(is_printable_line(r.err)) << what << ": stderr holds control bytes";
  EXPECT_LT(r.err.size(), 600u) << what << ": a long message";
  EXPECT_LT(r.seconds, 10.0) << what;
}

// Nothing in t but the inputs: no output folder, no staging entry.
void expect_nothing_written(const TempDir& t, const std::vector<std::string>& inputs) {
  for (const auto& e : fs::directory_iterator(t.path()))
    EXPECT_NE(std::find(inputs.begin(), inputs.end(), e.path().filename().string()), inputs.end())
        << "left behind: " << e.path();
}

// Cora converted once for the suite; each test copies it.
class BadSpecialInput : public ::testing::Test {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / ("halo-bad-special-" + std::to_string(getpid()));
  }
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);
    fs::create_directories(dir());
    const Result r = run(
        "convert " + test::bundled("cora").string() + " -o " + (dir() / "cora").string(), dir());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir()); }

  // A copy of cora as t/name.
  static fs::path cora(const TempDir& t, const std::string& name = "ds") {
    fs::copy(dir() / "cora", t / name, fs::copy_options::recursive);
    return t / name;
  }
  // Replaces meta.json's "name" by the JSON text `value` (the fingerprint covers the arrays
  // only, so the rest of the dataset stays valid).
  static void set_name(const fs::path& ds, const std::string& value) {
    std::string text = test::read_bytes(ds / "meta.json");
    const std::string from = "\"name\": \"cora\"";
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << text.substr(0, 200);
    text.replace(at, from.size(), "\"name\": " + value);
    test::write_text(ds / "meta.json", text);
  }
};

// info, partition and train each refuse ds with the same line, leaving nothing.
void expect_every_command_refuses(const fs::path& ds, const TempDir& t, const std::string& what,
                                  const std::vector<std::string>& parts) {
  expect_refused(run("info " + ds.string(), t.path()), what + " / info", parts);
  expect_refused(run("partition " + ds.string() + " -k 2 -o " + (t / "out").string(), t.path()),
                 what + " / partition", parts);
  expect_refused(run("train " + ds.string() + " --epochs 1 -q", t.path()), what + " / train",
                 parts);
  expect_nothing_written(t, {ds.filename().string()});
}

// A 5-node OGB directory (0-1-2-3, 4 isolated) with labels and one split.
void write_mini_ogb(const fs::path& root, const std::string& labels = "0\n1\n1\n0\n1\n") {
  test::write_gz(root / "raw/num-node-list.csv.gz", "5\n");
  test::write_gz(root / "raw/num-edge-list.csv.gz", "3\n");
  test::write_gz(root / "raw/edge.csv.gz", "0,1\n1,2\n2,3\n");
  test::write_gz(root / "raw/node-feat.csv.gz", "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,5\n");
  test::write_gz(root / "raw/node-label.csv.gz", labels);
  test::write_gz(root / "split/s/train.csv.gz", "0\n1\n");
  test::write_gz(root / "split/s/valid.csv.gz", "2\n");
  test::write_gz(root / "split/s/test.csv.gz", "3\n4\n");
}

// Class 1. meta.json's "name" nested 100,000 levels deep crashed every reader (nlohmann's
// dump() recursing while the message was built): now refused while parsing, in one line.
TEST_F(BadSpecialInput, DeeplyNestedJsonIsRefusedInOneLine) {
  TempDir t;
  const fs::path ds = cora(t);
  set_name(ds, std::string(100000, '[') + std::string(100000, ']'));
  expect_every_command_refuses(ds, t, "name nested 100,000 deep",
                               {ds.string() + "/meta.json: invalid JSON: arrays or objects nested "
                                              "deeper than 64 levels"});
}

// Class 1. A found value is shown by a short prefix, never whole: an array 60 deep (allowed)
// or of 100,000 entries where a string belongs.
TEST_F(BadSpecialInput, AFoundValueIsShownShort) {
  TempDir t;
  const fs::path deep = cora(t, "deep"), wide = cora(t, "wide");
  set_name(deep, std::string(60, '[') + std::string(60, ']'));
  expect_refused(run("info " + deep.string(), t.path()), "name nested 60 deep",
                 {deep.string() + "/meta.json: \"name\": expected a string, found [[["});
  std::string many = "[0";
  for (int i = 1; i < 100000; ++i) many += ",0";
  set_name(wide, many + "]");
  expect_refused(run("info " + wide.string(), t.path()), "name an array of 100,000",
                 {wide.string() + "/meta.json: \"name\": expected a string, found [0,0,"});
}

// Class 1. A speed table (--part-weights auto=FILE) nested 100,000 deep is refused too.
TEST_F(BadSpecialInput, DeeplyNestedSpeedTableIsRefused) {
  TempDir t;
  const fs::path ds = cora(t);
  test::write_text(t / "speed.json", std::string(100000, '[') + std::string(100000, ']'));
  expect_refused(run("partition " + ds.string() + " -k 2 --part-weights auto=" +
                         (t / "speed.json").string() + " -o " + (t / "out").string(),
                     t.path()),
                 "speed table nested 100,000 deep",
                 {"speed.json: invalid JSON: arrays or objects nested deeper than 64 levels"});
  expect_nothing_written(t, {"ds", "speed.json"});
}

// Class 7. A FIFO nobody writes to where a file belongs blocked every reader at open(): now
// its type is checked first (nothing is opened that could block), naming the file.
TEST_F(BadSpecialInput, AFifoWhereAFileBelongsIsRefusedAtOnce) {
  for (const std::string file : {"meta.json", "features.bin", "labels.bin"}) {
    TempDir t;
    const fs::path ds = cora(t);
    fs::remove(ds / file);
    ASSERT_EQ(mkfifo((ds / file).c_str(), 0600), 0);
    expect_every_command_refuses(ds, t, "FIFO " + file,
                                 {(ds / file).string() + ": is a FIFO (named pipe), expected a "
                                                         "regular file"});
  }
}

// Class 7. The same for convert's inputs inside a folder (OGB's text and binary layouts), the
// speed table of --part-weights auto= and an assignment file. A file named on the command
// line may still be a pipe (BadTextInput.EndlessLineIsRefusedNamingTheLimit feeds one).
TEST_F(BadSpecialInput, AFifoAmongConvertAndPartitionInputsIsRefusedAtOnce) {
  {
    TempDir t;
    write_mini_ogb(t / "in");
    fs::remove(t / "in/raw/edge.csv.gz");
    ASSERT_EQ(mkfifo((t / "in/raw/edge.csv.gz").c_str(), 0600), 0);
    expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                   "FIFO raw/edge.csv.gz", {"raw/edge.csv.gz: is a FIFO (named pipe)"});
    expect_nothing_written(t, {"in"});
  }
  {
    TempDir t;
    fs::create_directories(t / "in/raw");
    ASSERT_EQ(mkfifo((t / "in/raw/data.npz").c_str(), 0600), 0);
    expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                   "FIFO raw/data.npz", {"raw/data.npz: is a FIFO (named pipe)"});
    expect_nothing_written(t, {"in"});
  }
  {
    TempDir t;
    const fs::path ds = cora(t);
    ASSERT_EQ(mkfifo((t / "speed.json").c_str(), 0600), 0);
    expect_refused(run("partition " + ds.string() + " -k 2 --part-weights auto=" +
                           (t / "speed.json").string() + " -o " + (t / "out").string(),
                       t.path()),
                   "FIFO speed table", {"speed.json: is a FIFO (named pipe)"});
    for (const std::string a : {"a.part.2", "a.npy"}) {
      ASSERT_EQ(mkfifo((t / a).c_str(), 0600), 0);
      expect_refused(run("partition " + ds.string() + " -k 2 --assignment-in " + (t / a).string() +
                             " -o " + (t / "out").string(),
                         t.path()),
                     "FIFO assignment " + a, {a + ": is a FIFO (named pipe)"});
    }
    expect_nothing_written(t, {"ds", "speed.json", "a.part.2", "a.npy"});
  }
}

// Class 7. A text file named on the command line may be a pipe, read once: with --format it
// converts; without, detecting the format would consume its first line and then wait forever
// for a writer to open it again, so it is refused at once naming --format (exit 2).
TEST_F(BadSpecialInput, APipeNamedOnTheCommandLineIsReadOnceWhenItsFormatIsNamed) {
  TempDir t;
  const std::string out = (t / "out").string();
  const Result ok = test::shell("printf '0 1\\n1 2\\n' | timeout 30 " + halo() +
                                    " convert /dev/stdin --format edgelist --json -o " + out,
                                t.path());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"nodes\":3"), std::string::npos) << ok.out;
  fs::remove_all(t / "out");
  expect_refused(
      test::shell("printf '0 1\\n1 2\\n' | timeout 30 " + halo() + " convert /dev/stdin -o " + out,
                  t.path()),
      "a pipe without --format",
      {"/dev/stdin: a pipe, whose format cannot be detected without consuming it: name it with "
       "--format"},
      2);
  expect_nothing_written(t, {});
}

// Class 7. A FIFO in a TGN checkpoint: resuming looked for the newest epoch of these options
// through an ifstream, which blocked on it; now the epoch's meta.json is refused naming it.
TEST_F(BadSpecialInput, AFifoInACheckpointIsRefusedAtOnce) {
  TempDir t;
  const std::string uci = (t / "uci").string(), ck = (t / "ck").string();
  for (const std::string& step :
       {"convert " + test::bundled("uci-messages/graph.txt").string() + " -o " + uci,
        // A short epoch: the test is about the resume, and a whole UCI epoch under the
        // sanitizers takes tens of seconds.
        "tgn train " + uci + " --epochs 1 --max-train-events 400 --skip-eval --checkpoint " + ck +
            " -q"}) {
    const Result r = run(step, t.path());
    ASSERT_EQ(r.code, 0) << step << ": " << r.err;
  }
  const fs::path meta = t / "ck/epoch-1/meta.json";
  ASSERT_TRUE(fs::is_regular_file(meta));
  fs::remove(meta);
  ASSERT_EQ(mkfifo(meta.c_str(), 0600), 0);
  expect_refused(
      run("tgn train " + uci + " --epochs 2 --max-train-events 400 --skip-eval --checkpoint " + ck +
              " --resume -q",
          t.path()),
      "FIFO checkpoint meta.json",
      {meta.string() + ": is a FIFO (named pipe), expected a regular file"});
}

// The full-graph trainer's checkpoints and a folder replaced with --force go through the same
// rules: a FIFO epoch meta.json is refused at once on --resume, and a FIFO or a folder named
// meta.json in the output of `convert --force` is no halo folder's (neither waited on nor an
// internal error), so the folder is not replaced.
TEST_F(BadSpecialInput, AFifoInAGcnCheckpointOrAReplacedFolderIsRefusedAtOnce) {
  TempDir t;
  const fs::path ds = cora(t);
  const std::string ck = (t / "ck").string();
  const Result first =
      run("train " + ds.string() + " --epochs 1 --checkpoint " + ck + " -q", t.path());
  ASSERT_EQ(first.code, 0) << first.err;
  const fs::path meta = t / "ck/run-0/rank-0/epoch-1/meta.json";
  ASSERT_TRUE(fs::is_regular_file(meta));
  fs::remove(meta);
  ASSERT_EQ(mkfifo(meta.c_str(), 0600), 0);
  expect_refused(
      run("train " + ds.string() + " --epochs 2 --checkpoint " + ck + " --resume -q", t.path()),
      "FIFO GCN checkpoint meta.json",
      {meta.string() + ": is a FIFO (named pipe), expected a regular file"});
  for (const bool fifo : {true, false}) {
    const fs::path out = t / (fifo ? "out-fifo" : "out-dir");
    fs::create_directories(out);
    if (fifo)
      ASSERT_EQ(mkfifo((out / "meta.json").c_str(), 0600), 0);
    else
      fs::create_directories(out / "meta.json");
    expect_refused(
        run("convert " + test::bundled("cora").string() + " -o " + out.string() + " --force",
            t.path()),
        fifo ? "convert --force over a FIFO meta.json" : "over a folder meta.json",
        {out.string(), "--force replaces only a folder halo wrote"}, 2);
    EXPECT_TRUE(fs::exists(fs::symlink_status(out / "meta.json")));
  }
}

// Class 8. A directory where a file belongs was "internal: basic_filebuf::underflow" (exit 70)
// without the file's name: now exit 1 naming it, for meta.json, an array and convert's inputs.
TEST_F(BadSpecialInput, ADirectoryWhereAFileBelongsIsNamed) {
  for (const std::string file : {"meta.json", "indices.bin"}) {
    TempDir t;
    const fs::path ds = cora(t);
    fs::remove(ds / file);
    fs::create_directory(ds / file);
    expect_every_command_refuses(ds, t, "directory " + file,
                                 {(ds / file).string() + ": is a directory, expected a regular "
                                                         "file"});
  }
  TempDir t;
  write_mini_ogb(t / "in");
  fs::remove(t / "in/raw/node-label.csv.gz");
  fs::create_directory(t / "in/raw/node-label.csv.gz");
  expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                 "directory raw/node-label.csv.gz",
                 {"raw/node-label.csv.gz: is a directory, expected a regular file"});
  expect_nothing_written(t, {"in"});
}

// Class 4. A name with a NUL or an escape sequence reached the terminal raw (and a NUL cut off
// every later line of `info`): a dataset whose names are not text is refused, naming the
// field, the bytes shown escaped.
TEST_F(BadSpecialInput, NamesWithControlBytesAreRefusedAndShownEscaped) {
  for (const auto& [json_text, shown] :
       std::vector<std::pair<std::string, std::string>>{{"\"c\\u0000ra\"", "c\\x00ra"},
                                                        {"\"\\u001b[31mred\"", "\\x1b[31mred"},
                                                        {"\"c\\u009bra\"", "c\\xc2\\x9bra"}}) {
    TempDir t;
    const fs::path ds = cora(t);
    set_name(ds, json_text);
    expect_every_command_refuses(ds, t, "name " + shown,
                                 {ds.string() + "/meta.json: \"name\": control bytes in \"" +
                                  shown + "\" (expected printable text)"});
  }
}

// The same for a key: its bytes are shown escaped, and a NUL in it does not cut the message
// (what() is a C string).
TEST_F(BadSpecialInput, AKeyWithANulIsShownWholeAndEscaped) {
  TempDir t;
  const fs::path ds = cora(t);
  set_name(ds, "\"cora\", \"dee\\u0000p\": 1");
  expect_every_command_refuses(ds, t, "key with NUL",
                               {ds.string() + "/meta.json: \"dee\\x00p\": control bytes in "
                                              "\"dee\\x00p\" (expected printable text)"});
}

// Class 4. Nothing halo writes holds such a name: convert refuses --name with one (exit 2) and
// an OGB split folder named with one, and escapes a folder's name it takes as the dataset's,
// which `info` then shows whole.
TEST_F(BadSpecialInput, ConvertNeverWritesANameWithControlBytes) {
  TempDir t;
  write_mini_ogb(t / "in");
  expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string() +
                         " --name $(printf 'a\\033[2Jb')",
                     t.path()),
                 "--name with ESC", {"--name: control bytes in \"a\\x1b[2Jb\""}, 2);
  expect_nothing_written(t, {"in"});
  fs::rename(t / "in/split/s", t / "in/split/s\x1b[2J");
  expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                 "split folder with ESC",
                 {"s\\x1b[2J: a split name with control bytes (expected printable text)"});
  expect_nothing_written(t, {"in"});
  fs::rename(t / "in/split/s\x1b[2J", t / "in/split/s");
  fs::rename(t / "in", t / "in\x1b[2J");
  const Result r =
      run("convert '" + (t / "in\x1b[2J").string() + "' -o " + (t / "out").string(), t.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const Result info = run("info " + (t / "out").string(), t.path());
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_NE(info.out.find("dataset     in\\x1b[2J ("), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("split       s: train 2, valid 1, test 2"), std::string::npos)
      << info.out;
  EXPECT_TRUE(is_printable_line(info.out)) << info.out;
}

// Class 4. `info --json` is valid JSON whatever the path: one whose name is not UTF-8 (Latin-1)
// ended with "internal: [json.exception.type_error.316]", exit 70.
TEST_F(BadSpecialInput, InfoJsonIsValidJsonWhateverThePath) {
  TempDir t;
  const fs::path ds = cora(t, "c\xffra");
  const Result r = run("info --json '" + ds.string() + "'", t.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["path"], (t / "c\xef\xbf\xbdra").string());  // U+FFFD
  EXPECT_EQ(j["nodes"], 2708);
}

// Class 3. convert wrote labels every reader refuses: a label of 2^31-1 (its class count
// overflowed int32 to -2147483648), a multi-label row holding a 5, an npz node_label of three
// dimensions. Now convert applies the reader's checks first, and writes nothing.
TEST_F(BadSpecialInput, ConvertRefusesLabelsEveryReaderRefuses) {
  {
    TempDir t;
    write_mini_ogb(t / "in", "2147483647\n1\n1\n0\n1\n");
    expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                   "label 2^31-1",
                   {"raw/node-label.csv.gz: line 1: expected a non-negative integer label below "
                    "2147483647 or NaN, found 2147483647"});
    expect_nothing_written(t, {"in"});
  }
  {
    TempDir t;
    write_mini_ogb(t / "in", "0,1\n1,1\n1,5\n0,0\n1,0\n");
    expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                   "multi-label 5",
                   {"raw/node-label.csv.gz: entry 5 (row 2): label 5, expected 0, 1 or -1"});
    expect_nothing_written(t, {"in"});
  }
  {
    TempDir t;
    const std::int64_t nodes = 4, edges[] = {0, 1, 2, 1, 2, 3};
    const double labels[] = {0, 1, 1, 0, 1, 0, 0, 1};
    fs::create_directories(t / "in/raw");
    write_npz(t / "in/raw/data.npz", {{"num_nodes_list", "<i8", {1}, &nodes, sizeof nodes},
                                      {"edge_index", "<i8", {2, 3}, edges, sizeof edges}});
    write_npz(t / "in/raw/node-label.npz",
              {{"node_label", "<f8", {4, 1, 2}, labels, sizeof labels}});
    expect_refused(run("convert " + (t / "in").string() + " -o " + (t / "out").string(), t.path()),
                   "node_label (4, 1, 2)",
                   {"raw/node-label.npz: node_label: expected shape (4,) or (4, T), found 3 "
                    "dimensions"});
    expect_nothing_written(t, {"in"});
  }
}

}  // namespace
}  // namespace halo

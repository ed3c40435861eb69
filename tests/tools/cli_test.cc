// The `halo` binary as a user meets it: exit codes, one-line errors naming the file and line,
// no output left behind, and the JSON of `halo info`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

using Result = test::Run;

// Runs `halo args` with stdout and stderr captured apart.
Result run(const std::string& args, const TempDir& t) {
  return test::shell(test::configured("HALO_BINARY", HALO_BINARY) + " " + args, t.path());
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, ConvertAndInfoOnBundledCora) {
  TempDir t;
  const Result c =
      run("convert " + test::bundled("cora").string() + " -o " + (t / "cora").string(), t);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("peak memory"), std::string::npos) << c.err;
  const Result i = run("info --json " + (t / "cora").string(), t);
  ASSERT_EQ(i.code, 0) << i.err;
  const auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["nodes"], 2708);
  EXPECT_EQ(j["edges"], 10556);
  EXPECT_EQ(j["features"], 1433);
  EXPECT_EQ(j["classes"], 7);
  EXPECT_EQ(j["splits"]["public"]["train"], 140);
  EXPECT_EQ(j["components"], 78);
  const Result text = run("info " + (t / "cora").string(), t);
  EXPECT_NE(text.out.find("components  78"), std::string::npos) << text.out;
}

TEST(Cli, BadInputIsOneLineNonZeroAndLeavesNothing) {
  TempDir t;
  test::write_text(t / "bad.graph", "3 3\n2\n1 3\n2\n");
  const Result r = run("convert " + (t / "bad.graph").string() + " -o " + (t / "out").string(), t);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("bad.graph: line 1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(t / "out"));
  for (const auto& e : fs::directory_iterator(t.path()))
    EXPECT_EQ(e.path().filename(), "bad.graph");
}

TEST(Cli, ExistingOutputIsAParameterError) {
  TempDir t;
  fs::create_directories(t / "out");
  const Result r = run(
      "convert " + test::bundled("metis/test.mgraph").string() + " -o " + (t / "out").string(), t);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  const Result f = run("convert " + test::bundled("metis/test.mgraph").string() + " -o " +
                           (t / "out").string() + " --force",
                       t);
  EXPECT_EQ(f.code, 0) << f.err;
}

TEST(Cli, CorruptedDatasetIsReportedByInfo) {
  TempDir t;
  ASSERT_EQ(
      run("convert " + test::bundled("metis/4elt.graph").string() + " -o " + (t / "g").string(), t)
          .code,
      0);
  std::string bytes = test::read_bytes(t / "g/indices.bin");
  bytes[1000] ^= 1;
  test::write_text(t / "g/indices.bin", bytes);
  const Result r = run("info " + (t / "g").string(), t);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("indices.bin: checksum mismatch"), std::string::npos) << r.err;
}

TEST(Cli, UnknownFlagsAndFormatsAreRejected) {
  TempDir t;
  EXPECT_NE(run("convert x -o y --format xml", t).code, 0);
  EXPECT_NE(run("frobnicate", t).code, 0);
  EXPECT_EQ(run("--help", t).code, 0);
}

TEST(Cli, PartitionReportsAndInfoReadsItBack) {
  TempDir t;
  ASSERT_EQ(
      run("convert " + test::bundled("cora").string() + " -o " + (t / "cora").string(), t).code, 0);
  const Result p = run("partition " + (t / "cora").string() + " -k 2 -o " + (t / "parts").string() +
                           " --assignment-out " + (t / "cora.part.2").string(),
                       t);
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("edge cut"), std::string::npos) << p.out;
  EXPECT_NE(p.err.find("peak memory"), std::string::npos) << p.err;
  EXPECT_TRUE(fs::exists(t / "cora.part.2"));
  const auto j = nlohmann::json::parse(run("info --json " + (t / "parts").string(), t).out);
  EXPECT_EQ(j["k"], 2);
  EXPECT_EQ(j["parts"].size(), 2u);
  EXPECT_GT(j["edge_cut"].get<int>(), 0);
}

TEST(Cli, ReorderWritesADatasetThatInfoVerifies) {
  TempDir t;
  ASSERT_EQ(
      run("convert " + test::bundled("cora").string() + " -o " + (t / "cora").string(), t).code, 0);
  const Result r = run(
      "reorder " + (t / "cora").string() + " -o " + (t / "cora-m").string() + " --block 300", t);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("edges within a window of 300 ids"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(run("info --json " + (t / "cora-m").string(), t).out);
  EXPECT_EQ(j["nodes"], 2708);
  EXPECT_EQ(j["reorder"], "metis");
  const Result bad =
      run("reorder " + (t / "cora").string() + " -o " + (t / "x").string() + " --method spiral", t);
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
  EXPECT_FALSE(fs::exists(t / "x"));
}

TEST(Cli, PartitionBadParametersAreOneLine) {
  TempDir t;
  ASSERT_EQ(
      run("convert " + test::bundled("cora").string() + " -o " + (t / "cora").string(), t).code, 0);
  for (const std::string args : {"-k 0", "-k 99999", "-k 2 --method spectral",
                                 "-k 2 --balance colour", "-k 3 --part-weights 1,x,1"}) {
    const Result r =
        run("partition " + (t / "cora").string() + " -o " + (t / "parts").string() + " " + args, t);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(t / "parts")) << args;
  }
}

TEST(Cli, TrainPrintsEpochsAndTheFinalAccuracy) {
  TempDir t;
  ASSERT_EQ(
      run("convert " + test::bundled("cora").string() + " -o " + (t / "cora").string(), t).code, 0);
  const Result r = run("train " + (t / "cora").string() +
                           " --preset planetoid-gcn --epochs 30 --hidden 8 --eval-every 10 --log " +
                           (t / "log.jsonl").string(),
                       t);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines(r.out), 3 + 1 + 1) << r.out;  // 3 evaluated epochs, the run line, the summary
  EXPECT_NE(r.out.find("accuracy over 1 run"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("peak memory"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(t / "log.jsonl"));
  const Result bad = run("train " + (t / "cora").string() + " --preset nope", t);
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("planetoid-gcn"), std::string::npos) << bad.err;
}

TEST(Cli, TemporalConvertAndInfo) {
  TempDir t;
  ASSERT_EQ(run("convert " + test::bundled("uci-messages/graph.txt").string() + " -o " +
                    (t / "uci").string(),
                t)
                .code,
            0);
  const auto j = nlohmann::json::parse(run("info --json " + (t / "uci").string(), t).out);
  EXPECT_EQ(j["kind"], "temporal");
  EXPECT_EQ(j["events"], 59835);
  EXPECT_EQ(j["nodes"], 1899);
}

}  // namespace
}  // namespace halo

namespace halo {
namespace {

// `halo tgn train` end to end on a small prefix of the bundled UCI messages stream: the
// memoryless EdgeBank floor and one TGN epoch, both reporting AP and AUC.
TEST(Cli, TgnTrainsOnAnEventStream) {
  TempDir t;
  std::ifstream in(test::bundled("uci-messages/graph.txt"));
  std::ofstream part(t / "uci.txt");
  std::string line;
  for (int i = 0; i < 6000 && std::getline(in, line); ++i) part << line << "\n";
  part.close();
  ASSERT_EQ(
      run("convert " + (t / "uci.txt").string() + " --format konect -o " + (t / "uci").string(), t)
          .code,
      0);
  const Result bank = run("tgn train " + (t / "uci").string() + " --model edgebank", t);
  ASSERT_EQ(bank.code, 0) << bank.err;
  EXPECT_NE(bank.out.find("edgebank: test AP"), std::string::npos) << bank.out;
  // People message the same people again: "seen before" beats chance clearly on this stream.
  const double bank_ap = std::stod(bank.out.substr(bank.out.find("test AP") + 8));
  EXPECT_GT(bank_ap, 0.6) << bank.out;
  const Result tgn = run("tgn train " + (t / "uci").string() +
                             " --epochs 1 --memory-dim 16 --embed-dim 16 --time-dim 16 "
                             "--log " +
                             (t / "log.jsonl").string(),
                         t);
  ASSERT_EQ(tgn.code, 0) << tgn.err;
  std::ifstream log(t / "log.jsonl");
  std::vector<nlohmann::json> recs;
  for (std::string l; std::getline(log, l);) recs.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0]["type"], "epoch");
  const nlohmann::json& s = recs[1];
  EXPECT_EQ(s["type"], "summary");
  for (const char* k :
       {"test_ap", "test_auc", "test_inductive_ap"}) {  // one epoch: no quality claim
    EXPECT_GT(s[k].get<double>(), 0.0) << k;
    EXPECT_LE(s[k].get<double>(), 1.0) << k;
  }
  EXPECT_GT(s["events_per_s"].get<double>(), 0);
  const Result bad = run("tgn train " + (t / "uci").string() + " --neighbors 0", t);
  EXPECT_EQ(bad.code, 2);
}

}  // namespace
}  // namespace halo

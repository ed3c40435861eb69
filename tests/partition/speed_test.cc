// Parts sized by measured speed (speed.h): the table's format and its checks, the epoch model
// against a hand computation, and the search's shares against the speeds it was given.
#include "halo/partition/speed.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "../test_util.h"
#include "halo/graph/error.h"
#include "halo/graph/formats.h"
#include "halo/partition/parts.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::json;

// k ranks with the given seconds per row, no per-nonzero cost, every link at `link` bytes/s.
SpeedTable table_of(const std::vector<double>& row_s, double link, double row_bytes = 1000) {
  SpeedTable t;
  t.halo_row_bytes = row_bytes;
  for (std::size_t i = 0; i < row_s.size(); ++i) {
    RankSpeed s;
    s.host = "node" + std::to_string(i + 1);
    s.row_s = row_s[i];
    s.link_bytes_per_s.assign(row_s.size(), link);
    s.link_bytes_per_s[i] = 0;
    t.ranks.push_back(s);
  }
  return t;
}

const GraphDataset& mesh() {  // 4elt: 15,606 nodes, a 2-D mesh (METIS's test graph)
  static const GraphDataset d = [] {
    static TempDir dir;
    convert(test::bundled("metis/4elt.graph"), dir.path() / "4elt", {.overwrite = true});
    return read_graph_dataset(dir.path() / "4elt");
  }();
  return d;
}

std::vector<double> shares(const std::vector<PartId>& owner, int k) {
  std::vector<double> s(std::size_t(k), 0.0);
  for (PartId p : owner) s[std::size_t(p)] += 1.0 / double(owner.size());
  return s;
}

TEST(SpeedTable, RoundTripsThroughItsFile) {
  TempDir dir;
  SpeedTable t = table_of({2e-6, 4e-6}, 1e9, 2368);
  t.ranks[1].nonzero_s = 3e-8;
  t.model = {{"kind", "gcn"}};
  std::ofstream(dir.path() / "t.json") << t.to_json().dump(2);
  const SpeedTable back = read_speed_table(dir.path() / "t.json");
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.halo_row_bytes, 2368);
  EXPECT_EQ(back.ranks[1].row_s, 4e-6);
  EXPECT_EQ(back.ranks[1].nonzero_s, 3e-8);
  EXPECT_EQ(back.ranks[0].link_bytes_per_s, (std::vector<double>{0, 1e9}));
  EXPECT_EQ(back.ranks[1].host, "node2");
  EXPECT_EQ(back.model["kind"], "gcn");
}

TEST(SpeedTable, MalformedTablesNameTheFileAndTheField) {
  TempDir dir;
  const json good = table_of({2e-6, 4e-6}, 1e9).to_json();
  const auto expect_refused = [&](const json& j, const std::string& want) {
    const fs::path f = dir.path() / "bad.json";
    std::ofstream(f) << j.dump();
    try {
      read_speed_table(f);
      ADD_FAILURE() << "accepted: " << j.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(f.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  json j = good;
  j["format"] = "halo-parts";
  expect_refused(j, "expected a speed table");
  j = good;
  j["ranks"][1]["row_s"] = -1;
  expect_refused(j, "rank 1: \"row_s\"");
  j = good;
  j["ranks"][0]["row_s"] = 0;
  expect_refused(j, "rank 0: \"row_s\"");
  j = good;
  j["ranks"][0].erase("nonzero_s");
  expect_refused(j, "\"nonzero_s\": expected a number");
  j = good;
  j["ranks"][0]["link_bytes_per_s"] = {0};
  expect_refused(j, "expected 2 numbers");
  j = good;
  j["ranks"][1]["link_bytes_per_s"][0] = 0;  // a link to another rank must have a speed
  expect_refused(j, "\"link_bytes_per_s\"[0]");
  j = good;
  j["ranks"] = json::array();
  expect_refused(j, "non-empty array");
  const fs::path text = dir.path() / "text.json";
  std::ofstream(text) << "{ not json";
  EXPECT_THROW(read_speed_table(text), InputError);
  EXPECT_THROW(read_speed_table(dir.path() / "missing.json"), InputError);
}

// A path 0-1-2-3-4-5 cut into {0,1,2} and {3,4,5}: part 0 receives node 3, sends node 2.
TEST(SpeedModel, IsTheDocumentedSum) {
  EdgeList el;
  el.num_nodes = 6;
  for (NodeId v = 0; v + 1 < 6; ++v) {
    el.src.push_back(v);
    el.dst.push_back(v + 1);
  }
  const Csr g = build_csr(std::move(el));
  const std::vector<PartId> owner = {0, 0, 0, 1, 1, 1};
  const Quality q = measure_partition(g.view(), false, owner, 2, nullptr, {0.5, 0.5});
  SpeedTable t = table_of({1.0, 2.0}, 100.0, 50.0);
  t.ranks[0].nonzero_s = 0.25;
  t.ranks[1].link_bytes_per_s[0] = 25.0;
  const std::vector<PartTime> p = predict_part_times(q, t);
  ASSERT_EQ(p.size(), 2u);
  // Part 0: 3 rows, 5 nonzeros (0-1, 1-0, 1-2, 2-1, 2-3); 1 row in + 1 out at 50 / 2 bytes each
  // over 100 bytes/s. Part 1: 3 rows x 2 s; the same rows over its 25 bytes/s view of the link.
  EXPECT_DOUBLE_EQ(p[0].compute_s, 3 * 1.0 + 5 * 0.25);
  EXPECT_DOUBLE_EQ(p[0].comm_s, 2 * 50.0 / 2 / 100.0);
  EXPECT_DOUBLE_EQ(p[1].compute_s, 3 * 2.0);
  EXPECT_DOUBLE_EQ(p[1].comm_s, 2 * 50.0 / 2 / 25.0);
  EXPECT_THROW(predict_part_times(q, table_of({1, 1, 1}, 1)), ParamError);
}

TEST(SpeedSearch, SharesFollowTheMeasuredSpeeds) {
  const GraphDataset& d = mesh();
  PartitionOptions o;
  o.k = 3;
  for (const auto& [speeds, want] :
       std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{1e-6, 2e-6, 2e-6}, {0.5, 0.25, 0.25}},
           {{1e-6, 1e-6, 1e-6}, {1 / 3., 1 / 3., 1 / 3.}},
           {{3e-6, 1e-6, 3e-6}, {0.2, 0.6, 0.2}}}) {
    SpeedSearch found;
    const std::vector<PartId> owner = partition_for_speed(d, o, table_of(speeds, 1e12), &found);
    const std::vector<double> s = shares(owner, 3);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(s[i], want[i], 0.02) << "part " << i;
    // The parts' predicted times agree within METIS's imbalance.
    double lo = 1e30, hi = 0;
    for (const PartTime& t : found.times) {
      lo = std::min(lo, t.total());
      hi = std::max(hi, t.total());
    }
    EXPECT_LT(hi / lo, 1.06);
    EXPECT_EQ(found.rounds.size(), 4u);
  }
}

TEST(SpeedSearch, ASlowLinkShrinksItsPartAndTheSearchBeatsItsStart) {
  const GraphDataset& d = mesh();
  PartitionOptions o;
  o.k = 3;
  // Equal compute; rank 2's links 20x slower, with exchange costs comparable to compute.
  SpeedTable t = table_of({1e-5, 1e-5, 1e-5}, 1e6, 2000);
  for (int j = 0; j < 3; ++j)
    if (j != 2) t.ranks[2].link_bytes_per_s[j] = t.ranks[j].link_bytes_per_s[2] = 5e4;
  SpeedSearch found;
  const std::vector<PartId> owner = partition_for_speed(d, o, t, &found);
  const std::vector<double> s = shares(owner, 3);
  EXPECT_LT(s[2], 0.30);
  EXPECT_GT(s[0], 1 / 3.);
  // The first round used speed-proportional shares (equal here); the kept partition beats it.
  const double first = found.rounds[0]["epoch_s"].get<double>();
  double kept = 0;
  for (const PartTime& p : found.times) kept = std::max(kept, p.total());
  EXPECT_LT(kept, 0.95 * first);
  // Deterministic: the same search gives the same parts.
  EXPECT_EQ(partition_for_speed(d, o, t, nullptr), owner);
}

TEST(SpeedSearch, RefusesAMismatchedTableAndOptionsItCannotHonour) {
  const GraphDataset& d = mesh();
  PartitionOptions o;
  o.k = 2;
  EXPECT_THROW(partition_for_speed(d, o, table_of({1, 1, 1}, 1), nullptr), ParamError);
  o.speed_table = "t.json";
  o.check(100);
  o.part_weights = {1, 2};  // shares and a table
  EXPECT_THROW(o.check(100), ParamError);
  o.part_weights.clear();
  o.method = PartitionMethod::kPtScotch;  // the search needs the whole graph in one process
  EXPECT_THROW(o.check(100), ParamError);
  o.speed_table.clear();
  o.method = PartitionMethod::kAssignment;  // a file's parts are taken as they are
  o.assignment_in = "parts.txt";
  o.part_weights = {1, 2};
  EXPECT_THROW(o.check(100), ParamError);
}

}  // namespace
}  // namespace halo

// OGB node-property directories: the bundled Cora, label and split semantics, reordering, and
// every bad-input case of the conversion (each leaving no output behind).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "../test_util.h"
#include "halo/graph/algorithms.h"
#include "halo/graph/formats.h"
#include "halo/graph/summary.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

// A 5-node OGB directory:  0-1-2-3  4 (isolated), 2 features, labels with one NaN.
struct MiniOgb {
  std::string nodes = "5\n", num_edges = "3\n", edges = "0,1\n1,2\n2,3\n";
  std::string feat = "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,5\n";
  std::string label = "0\n1\nnan\n2\n1\n";
  std::string train = "0\n1\n", valid = "2\n", test = "3\n4\n";
  void write(const fs::path& root) const {
    test::write_gz(root / "raw/num-node-list.csv.gz", nodes);
    test::write_gz(root / "raw/num-edge-list.csv.gz", num_edges);
    test::write_gz(root / "raw/edge.csv.gz", edges);
    test::write_gz(root / "raw/node-feat.csv.gz", feat);
    test::write_gz(root / "raw/node-label.csv.gz", label);
    test::write_gz(root / "split/s/train.csv.gz", train);
    test::write_gz(root / "split/s/valid.csv.gz", valid);
    test::write_gz(root / "split/s/test.csv.gz", test);
  }
};

TEST(Ogb, BundledCoraMatchesItsPublishedFigures) {
  TempDir t;
  const ConvertReport r = convert(test::bundled("cora"), t / "cora", {});
  EXPECT_EQ(r.format, Format::kOgb);
  const nlohmann::json s = summarize_dataset(t / "cora");
  EXPECT_EQ(s["nodes"], 2708);
  EXPECT_EQ(s["edges"], 10556);
  EXPECT_EQ(s["features"], 1433);
  EXPECT_EQ(s["classes"], 7);
  EXPECT_EQ(s["splits"]["public"]["train"], 140);
  EXPECT_EQ(s["splits"]["public"]["valid"], 500);
  EXPECT_EQ(s["splits"]["public"]["test"], 1000);
  EXPECT_EQ(s["components"], 78);
  EXPECT_GT(r.text_bytes, 7'000'000u);  // 2708 x 1433 features as text
}

TEST(Ogb, MiniDatasetContent) {
  TempDir t;
  MiniOgb().write(t / "in");
  convert(t / "in", t / "out", {});
  const GraphDataset d = read_graph_dataset(t / "out");
  EXPECT_EQ(d.num_nodes(), 5);
  EXPECT_EQ(d.graph.num_edges(), 6);
  EXPECT_EQ(d.num_features, 2);
  EXPECT_FLOAT_EQ(d.features[7], 4.f);
  EXPECT_EQ(d.label_kind, LabelKind::kMulticlass);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(d.labels[2], -1);  // NaN = unlabelled
  EXPECT_EQ(d.split("s")->test.size(), 2u);
  std::int64_t comps = 0;
  connected_components(d.graph.view(), false, &comps);
  EXPECT_EQ(comps, 2);
}

TEST(Ogb, MultiLabelRowsWithMissingValues) {
  TempDir t;
  MiniOgb m;
  m.label = "0,1,1\n1,0,nan\n0,0,0\n1,1,1\n0,1,0\n";
  m.write(t / "in");
  convert(t / "in", t / "out", {});
  const GraphDataset d = read_graph_dataset(t / "out");
  EXPECT_EQ(d.label_kind, LabelKind::kMultilabel);
  EXPECT_EQ(d.label_cols, 3);
  EXPECT_EQ(d.labels[5], -1);
  EXPECT_EQ(d.labels[9], 1);
}

TEST(Ogb, EverySplitFolderIsKeptByName) {
  TempDir t;
  MiniOgb().write(t / "in");
  test::write_gz(t / "in/split/other/train.csv.gz", "4\n");
  test::write_gz(t / "in/split/other/valid.csv.gz", "");
  test::write_gz(t / "in/split/other/test.csv.gz", "0\n1\n2\n");
  convert(t / "in", t / "out", {});
  const GraphDataset d = read_graph_dataset(t / "out");
  ASSERT_EQ(d.splits.size(), 2u);
  EXPECT_EQ(d.split("other")->train.size(), 1u);
  EXPECT_EQ(d.split("other")->valid.size(), 0u);
  EXPECT_EQ(d.split("other")->test.size(), 3u);
}

TEST(Ogb, NoFeaturesOrLabelsIsFine) {
  TempDir t;
  MiniOgb().write(t / "in");
  fs::remove(t / "in/raw/node-feat.csv.gz");
  fs::remove(t / "in/raw/node-label.csv.gz");
  fs::remove_all(t / "in/split");
  convert(t / "in", t / "out", {});
  const GraphDataset d = read_graph_dataset(t / "out");
  EXPECT_EQ(d.num_features, 0);
  EXPECT_EQ(d.label_kind, LabelKind::kNone);
}

// OGB's binary layout (ogbn-papers100M): .npz archives written by NumPy.
TEST(Ogb, BinaryNpzLayout) {
  TempDir t;
  const ConvertReport r = convert(test::test_data("ogb-npz"), t / "out", {});
  EXPECT_EQ(r.nodes, 5);
  const GraphDataset d = read_graph_dataset(t / "out");
  EXPECT_EQ(d.graph.num_edges(), 6);
  ASSERT_EQ(d.num_features, 2);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(d.features[i], float(i) + 0.5f);
  EXPECT_EQ(d.label_kind, LabelKind::kMulticlass);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(std::vector<std::int32_t>(d.labels.begin(), d.labels.end()),
            (std::vector<std::int32_t>{0, 1, -1, 2, 1}));
  ASSERT_NE(d.split("time"), nullptr);
  EXPECT_EQ(d.split("time")->test.size(), 2u);
  EXPECT_EQ(read_dataset_meta(t / "out")["source"]["format"], "ogb-npz");
  // Reordered, features are written row by row at their new positions.
  convert(test::test_data("ogb-npz"), t / "rcm", {.reorder = NodeOrder::kRcm});
  const GraphDataset e = read_graph_dataset(t / "rcm");
  for (NodeId u = 0; u < 5; ++u)
    EXPECT_FLOAT_EQ(e.features[std::size_t(u) * 2],
                    float(2 * e.original_ids[std::size_t(u)]) + 0.5f);
}

// Reordering permutes every node-indexed array consistently: mapping back through
// original_ids gives the unreordered dataset.
TEST(Ogb, RcmReorderIsConsistentWithTheOriginal) {
  TempDir t;
  convert(test::bundled("cora"), t / "plain", {});
  convert(test::bundled("cora"), t / "rcm", {.reorder = NodeOrder::kRcm});
  const GraphDataset a = read_graph_dataset(t / "plain");
  const GraphDataset b = read_graph_dataset(t / "rcm");
  ASSERT_EQ(b.original_ids.size(), 2708u);
  EXPECT_EQ(b.reorder, "rcm");
  const CsrView ga = a.graph.view(), gb = b.graph.view();
  const auto& orig = b.original_ids;
  for (NodeId u = 0; u < 2708; ++u) {
    const NodeId o = orig[std::size_t(u)];
    ASSERT_EQ(b.labels[std::size_t(u)], a.labels[std::size_t(o)]);
    ASSERT_EQ(b.features[std::size_t(u) * 1433 + 17], a.features[std::size_t(o) * 1433 + 17]);
    std::set<NodeId> mapped;
    for (const NodeId* v = gb.begin(u); v != gb.end(u); ++v) mapped.insert(orig[std::size_t(*v)]);
    ASSERT_EQ(mapped, std::set<NodeId>(ga.begin(o), ga.end(o)));
  }
  std::set<NodeId> train;
  for (NodeId v : b.split("public")->train) train.insert(orig[std::size_t(v)]);
  EXPECT_EQ(train,
            std::set<NodeId>(a.split("public")->train.begin(), a.split("public")->train.end()));
  EXPECT_LT(total_bandwidth(gb), total_bandwidth(ga));
}

// ---- bad input: one-line error naming file and line, nothing left behind ------------------

class OgbBadInput : public ::testing::Test {
 protected:
  void expect_fails(const MiniOgb& m, std::initializer_list<std::string> parts) {
    m.write(t / "in");
    test::expect_input_error([&] { convert(t / "in", t / "out", {}); }, parts);
    EXPECT_FALSE(fs::exists(t / "out"));
    for (const auto& e : fs::directory_iterator(t.path()))
      EXPECT_EQ(e.path().filename(), "in") << "left behind: " << e.path();
  }
  TempDir t;
};

TEST_F(OgbBadInput, TruncatedGzip) {
  MiniOgb m;
  std::string big;
  for (int i = 0; i < 5000; ++i)
    big += std::to_string(i % 5) + "," + std::to_string((i + 1) % 5) + "\n";
  m.edges = big;
  m.num_edges = "5000\n";
  m.write(t / "in");
  const std::string gz = test::read_bytes(t / "in/raw/edge.csv.gz");
  test::write_text(t / "in/raw/edge.csv.gz", gz.substr(0, gz.size() * 2 / 3));
  test::expect_input_error([&] { convert(t / "in", t / "out", {}); },
                           {"edge.csv.gz", "truncated gzip"});
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST_F(OgbBadInput, CorruptGzip) {
  MiniOgb m;
  m.write(t / "in");
  std::string gz = test::read_bytes(t / "in/raw/node-feat.csv.gz");
  gz[gz.size() - 6] ^= 0x55;  // inside the CRC-32 trailer
  test::write_text(t / "in/raw/node-feat.csv.gz", gz);
  test::expect_input_error([&] { convert(t / "in", t / "out", {}); },
                           {"node-feat.csv.gz", "corrupt gzip"});
  EXPECT_FALSE(fs::exists(t / "out"));
  for (const auto& e : fs::directory_iterator(t.path())) EXPECT_EQ(e.path().filename(), "in");
}

TEST_F(OgbBadInput, NonNumericField) {
  MiniOgb m;
  m.feat = "0.5,1\n1.5,2\n2.5,abc\n3.5,4\n4.5,5\n";
  expect_fails(m, {"node-feat.csv.gz: line 3", "expected a finite number", "'abc'"});
}

TEST_F(OgbBadInput, WrongNumberOfColumns) {
  MiniOgb m;
  m.feat = "0.5,1\n1.5,2,7\n2.5,3\n3.5,4\n4.5,5\n";
  expect_fails(m, {"node-feat.csv.gz: line 2", "expected 2 columns, found 3"});
  MiniOgb e;
  e.edges = "0,1\n1\n2,3\n";
  expect_fails(e, {"edge.csv.gz: line 2", "destination id", "end of line"});
}

TEST_F(OgbBadInput, NodeIdOutOfRangeOrNegative) {
  MiniOgb m;
  m.edges = "0,1\n1,5\n2,3\n";
  expect_fails(m, {"edge.csv.gz: line 2", "node id 5 out of range [0, 5)"});
  MiniOgb n;
  n.edges = "0,1\n-1,2\n2,3\n";
  expect_fails(n, {"edge.csv.gz: line 2", "node id -1 out of range"});
  MiniOgb s;
  s.valid = "9\n";
  expect_fails(s, {"valid.csv.gz: line 1", "node id 9 out of range"});
}

TEST_F(OgbBadInput, NodeCountDisagreesWithFeatureRows) {
  MiniOgb fewer;
  fewer.nodes = "6\n";
  expect_fails(fewer, {"node-feat.csv.gz", "5 feature rows", "declares 6"});
  MiniOgb more;
  more.nodes = "4\n";
  more.edges = "0,1\n1,2\n2,3\n";
  more.train = "0\n";
  more.test = "3\n";
  expect_fails(more, {"node-feat.csv.gz: line 5", "more feature rows", "4 nodes"});
}

TEST_F(OgbBadInput, EdgeCountDisagreesWithEdgeFile) {
  MiniOgb m;
  m.num_edges = "4\n";
  expect_fails(m, {"edge.csv.gz", "has 3 edges", "declares 4"});
}

TEST_F(OgbBadInput, MissingSplitFile) {
  MiniOgb m;
  m.write(t / "in");
  fs::remove(t / "in/split/s/valid.csv.gz");
  test::expect_input_error([&] { convert(t / "in", t / "out", {}); },
                           {"split/s/valid.csv.gz", "missing"});
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST_F(OgbBadInput, BadLabel) {
  MiniOgb m;
  m.label = "0\n1\n2.5\n2\n1\n";
  expect_fails(m, {"node-label.csv.gz: line 3", "integer label"});
}

TEST_F(OgbBadInput, MissingRawFile) {
  MiniOgb m;
  m.write(t / "in");
  fs::remove(t / "in/raw/num-edge-list.csv.gz");
  test::expect_input_error([&] { convert(t / "in", t / "out", {}); },
                           {"num-edge-list.csv.gz", "missing"});
}

}  // namespace
}  // namespace halo

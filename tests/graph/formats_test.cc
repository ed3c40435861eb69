// METIS, edge-list and temporal readers on the bundled real files and on crafted bad inputs.
#include "halo/graph/formats.h"

#include <gtest/gtest.h>

#include "../test_util.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;

std::vector<NodeId> row(const GraphDataset& d, NodeId u) {
  const CsrView v = d.graph.view();
  return {v.begin(u), v.end(u)};
}

TEST(Metis, FourEltHasTheDocumentedSize) {
  const GraphDataset d = read_metis(test::bundled("metis/4elt.graph"));
  EXPECT_EQ(d.num_nodes(), 15606);
  EXPECT_EQ(d.graph.num_edges(), 91756);  // 45878 undirected edges, stored both ways
  EXPECT_EQ(d.ncon, 0);
  // First vertex line " 2 3 6 7": 1-based neighbours.
  EXPECT_EQ(row(d, 0), (std::vector<NodeId>{1, 2, 5, 6}));
}

TEST(Metis, MultiConstraintVertexWeightsAreKept) {
  const GraphDataset d = read_metis(test::bundled("metis/test.mgraph"));
  EXPECT_EQ(d.num_nodes(), 766);
  EXPECT_EQ(d.graph.num_edges(), 2 * 1314);
  ASSERT_EQ(d.ncon, 2);
  ASSERT_EQ(d.node_weights.size(), 766u * 2);
  // First vertex line "1 1 479 389 571 2".
  EXPECT_EQ(d.node_weights[0], 1);
  EXPECT_EQ(d.node_weights[1], 1);
  EXPECT_EQ(row(d, 0), (std::vector<NodeId>{1, 388, 478, 570}));
}

//  1 —(5)— 2 —(7)— 3
TEST(Metis, EdgeWeightsAndComments) {
  TempDir t;
  test::write_text(t / "w.graph", "% a comment\n3 2 011\n% between\n4 2 5\n1 1 5 3 7\n2 2 7\n");
  const GraphDataset d = read_metis(t / "w.graph");
  ASSERT_EQ(d.ncon, 1);
  EXPECT_EQ(d.node_weights[0], 4);
  EXPECT_EQ(d.node_weights[2], 2);
  ASSERT_FALSE(d.graph.values.empty());
  EXPECT_EQ(row(d, 1), (std::vector<NodeId>{0, 2}));
  EXPECT_EQ(d.graph.values[std::size_t(d.graph.offsets[1])], 5.f);
  EXPECT_EQ(d.graph.values[std::size_t(d.graph.offsets[1] + 1)], 7.f);
}

TEST(Metis, IsolatedVerticesAreBlankLines) {
  TempDir t;
  test::write_text(t / "iso.graph", "3 1\n2\n1\n\n");
  const GraphDataset d = read_metis(t / "iso.graph");
  EXPECT_EQ(d.num_nodes(), 3);
  EXPECT_EQ(d.graph.view().degree(2), 0);
}

TEST(Metis, HeaderEdgeCountDisagreeingWithBodyIsAnError) {
  TempDir t;
  test::write_text(t / "m.graph", "3 3\n2\n1 3\n2\n");
  test::expect_input_error([&] { read_metis(t / "m.graph"); },
                           {"m.graph: line 1", "declares 3 edges", "4 entries"});
}

TEST(Metis, HeaderVertexCountDisagreeingWithBodyIsAnError) {
  TempDir t;
  test::write_text(t / "few.graph", "4 1\n2\n1\n");
  test::expect_input_error([&] { read_metis(t / "few.graph"); },
                           {"few.graph", "4 vertices", "2 vertex lines"});
  test::write_text(t / "many.graph", "2 1\n2\n1\n1\n");
  test::expect_input_error([&] { read_metis(t / "many.graph"); },
                           {"many.graph: line 4", "more vertex lines"});
}

TEST(Metis, AsymmetricAdjacencyIsAnError) {
  TempDir t;
  // Counts agree (4 entries = 2 * 2 edges), but 1 lists 3 while 3 lists only 2.
  test::write_text(t / "a.graph", "3 2\n2 3\n1\n2\n");
  test::expect_input_error(
      [&] { read_metis(t / "a.graph"); },
      {"a.graph: line 2", "asymmetric", "vertex 1 lists 3", "vertex 3 does not list 1"});
}

TEST(Metis, AsymmetricEdgeWeightsAreAnError) {
  TempDir t;
  test::write_text(t / "w.graph", "2 1 1\n2 5\n1 6\n");
  test::expect_input_error([&] { read_metis(t / "w.graph"); },
                           {"w.graph", "asymmetric", "same weight"});
}

TEST(Metis, SelfLoopsDuplicatesAndBadIdsAreErrors) {
  TempDir t;
  test::write_text(t / "s.graph", "2 1\n1 2\n1\n");
  test::expect_input_error([&] { read_metis(t / "s.graph"); }, {"line 2", "lists itself"});
  test::write_text(t / "d.graph", "2 1\n2 2\n1 1\n");
  test::expect_input_error([&] { read_metis(t / "d.graph"); }, {"line 2", "twice"});
  test::write_text(t / "r.graph", "2 1\n3\n1\n");
  test::expect_input_error([&] { read_metis(t / "r.graph"); }, {"line 2", "out of range [1, 2]"});
  test::write_text(t / "n.graph", "2 1\n2\nx\n");
  test::expect_input_error([&] { read_metis(t / "n.graph"); }, {"line 3", "'x'"});
  test::write_text(t / "e.graph", "% only a comment\n");
  test::expect_input_error([&] { read_metis(t / "e.graph"); }, {"e.graph", "header"});
}

TEST(EdgeList, CommentsSeparatorsAndSymmetrisation) {
  TempDir t;
  test::write_text(t / "e.txt", "# comment\n% other comment\n0 1\n1,2\n 2\t0 \n\n2 2\n");
  const GraphDataset d = read_edge_list(t / "e.txt", {});
  EXPECT_EQ(d.num_nodes(), 3);
  EXPECT_EQ(d.graph.num_edges(), 6);  // a triangle, both ways; the self-loop dropped
  const GraphDataset dir = read_edge_list(t / "e.txt", {.directed = true});
  EXPECT_EQ(dir.graph.num_edges(), 3);
  EXPECT_TRUE(dir.directed);
}

TEST(EdgeList, OneBasedIdsAndWeights) {
  TempDir t;
  test::write_text(t / "w.txt", "1 2 0.5\n2 3 2\n");
  const GraphDataset d = read_edge_list(t / "w.txt", {.one_based = true});
  EXPECT_EQ(d.num_nodes(), 3);
  EXPECT_EQ(row(d, 1), (std::vector<NodeId>{0, 2}));
  ASSERT_EQ(d.graph.values.size(), 4u);
  EXPECT_EQ(d.graph.values[std::size_t(d.graph.offsets[1])], 0.5f);
  test::expect_input_error(
      [&] { read_edge_list(t / "w.txt", {.one_based = false, .num_nodes = 3}); },
      {"w.txt: line 2", "node id 3 out of range [0, 2]"});
}

TEST(EdgeList, BadLinesNameTheLine) {
  TempDir t;
  test::write_text(t / "c.txt", "0 1\n1 2 3 4\n");
  test::expect_input_error([&] { read_edge_list(t / "c.txt", {}); },
                           {"c.txt: line 2", "expected 2 columns, found 4"});
  test::write_text(t / "neg.txt", "0 1\n-1 2\n");
  test::expect_input_error([&] { read_edge_list(t / "neg.txt", {}); },
                           {"neg.txt: line 2", "node id -1 out of range"});
  test::write_text(t / "z.txt", "0 1\n0 b\n");
  test::expect_input_error([&] { read_edge_list(t / "z.txt", {}); },
                           {"z.txt: line 2", "destination id", "'b'"});
  test::write_text(t / "one.txt", "5\n");
  test::expect_input_error([&] { read_edge_list(t / "one.txt", {}); },
                           {"one.txt: line 1", "expected 2 columns"});
}

TEST(Temporal, KonectUciMessages) {
  const TemporalDataset d = read_konect(test::bundled("uci-messages/graph.txt"));
  EXPECT_EQ(d.num_events(), 59835);
  EXPECT_EQ(d.num_nodes, 1899);
  EXPECT_EQ(d.src[0], 0);  // "1 2 1 1082008561", 1-based
  EXPECT_EQ(d.dst[0], 1);
  EXPECT_EQ(d.time[0], 1082008561.0);
  for (std::size_t i = 1; i < d.time.size(); ++i) ASSERT_LE(d.time[i - 1], d.time[i]);
}

TEST(Temporal, SnapIsSortedStablyByTime) {
  TempDir t;
  test::write_text(t / "s.txt", "# src dst t\n0 1 30\n1 2 10\n2 0 30\n3 1 20\n");
  const TemporalDataset d = read_snap(t / "s.txt");
  EXPECT_EQ(std::vector<double>(d.time.begin(), d.time.end()),
            (std::vector<double>{10, 20, 30, 30}));
  EXPECT_EQ(std::vector<NodeId>(d.src.begin(), d.src.end()), (std::vector<NodeId>{1, 3, 0, 2}));
  test::write_text(t / "bad.txt", "0 1 30\n1 2\n");
  test::expect_input_error([&] { read_snap(t / "bad.txt"); },
                           {"bad.txt: line 2", "timestamp", "end of line"});
}

TEST(Temporal, JodieMapsItemsAfterUsers) {
  TempDir t;
  test::write_text(t / "j.csv",
                   "user_id,item_id,timestamp,state_label,comma_separated_list_of_features\n"
                   "0,0,0.0,0,0.1,0.2\n"
                   "2,1,1.5,1,0.3,0.4\n"
                   "1,0,3.0,0,0.5,0.6\n");
  const TemporalDataset d = read_jodie(t / "j.csv");
  EXPECT_EQ(d.num_users, 3);
  EXPECT_EQ(d.num_nodes, 5);
  EXPECT_EQ(std::vector<NodeId>(d.dst.begin(), d.dst.end()), (std::vector<NodeId>{3, 4, 3}));
  EXPECT_EQ(d.edge_feature_dim, 2);
  EXPECT_FLOAT_EQ(d.edge_features[5], 0.6f);
  EXPECT_EQ(d.labels[1], 1);
  test::write_text(t / "nohdr.csv", "0,0,0.0,0\n");
  test::expect_input_error([&] { read_jodie(t / "nohdr.csv"); }, {"nohdr.csv: line 1", "header"});
  test::write_text(t / "cols.csv",
                   "user_id,item_id,timestamp,state_label,f\n0,0,1,0,0.5\n0,1,2,0\n");
  test::expect_input_error([&] { read_jodie(t / "cols.csv"); }, {"cols.csv: line 3", "feature"});
}

TEST(DetectFormat, ByLayoutExtensionAndFirstLine) {
  TempDir t;
  EXPECT_EQ(detect_format(test::bundled("cora")), Format::kOgb);
  EXPECT_EQ(detect_format(test::bundled("metis/4elt.graph")), Format::kMetis);
  EXPECT_EQ(detect_format(test::bundled("uci-messages/graph.txt")), Format::kKonect);
  test::write_text(t / "j.csv", "user_id,item_id,timestamp,state_label\n");
  EXPECT_EQ(detect_format(t / "j.csv"), Format::kJodie);
  test::write_text(t / "e.txt", "0 1\n");
  EXPECT_EQ(detect_format(t / "e.txt"), Format::kEdgeList);
  EXPECT_THROW(detect_format(t / "missing"), InputError);
  EXPECT_THROW(parse_format("xml"), ParamError);
}

// The spellings --format and --reorder accept, and the exact line for one they do not.
TEST(OptionSpellings, FormatAndReorder) {
  test::expect_spellings<Format>(
      {{Format::kAuto, "auto"},
       {Format::kOgb, "ogb"},
       {Format::kMetis, "metis"},
       {Format::kEdgeList, "edgelist"},
       {Format::kKonect, "konect"},
       {Format::kSnap, "snap"},
       {Format::kJodie, "jodie"}},
      [](const char* s) { return parse_format(s); }, format_name);
  EXPECT_EQ(test::param_error([] { parse_format("xml"); }),
            "unknown format 'xml' (expected auto, ogb, metis, edgelist, konect, snap or jodie)");
  EXPECT_EQ(parse_node_order("none"), NodeOrder::kNone);
  EXPECT_EQ(parse_node_order("rcm"), NodeOrder::kRcm);
  EXPECT_EQ(test::param_error([] { parse_node_order("RCM"); }),
            "unknown --reorder 'RCM' (expected none or rcm)");
}

}  // namespace
}  // namespace halo

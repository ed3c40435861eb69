// Boost.Graph algorithms on halo's CSR (through the adaptor): components and RCM.
#include "halo/graph/algorithms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

namespace halo {
namespace {

Csr graph(std::int64_t n, const std::vector<std::pair<int, int>>& e, bool sym = true) {
  EdgeList el;
  el.num_nodes = n;
  for (auto [u, v] : e) {
    el.src.push_back(u);
    el.dst.push_back(v);
  }
  return build_csr(std::move(el), {.symmetrize = sym});
}

//  0-1-2   3-4   5
TEST(Components, CountsAndLabelsUndirected) {
  Csr g = graph(6, {{0, 1}, {1, 2}, {3, 4}});
  std::int64_t count = 0;
  auto c = connected_components(g.view(), false, &count);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(c[0], c[1]);
  EXPECT_EQ(c[1], c[2]);
  EXPECT_EQ(c[3], c[4]);
  EXPECT_NE(c[0], c[3]);
  EXPECT_NE(c[5], c[0]);
  EXPECT_NE(c[5], c[3]);
}

// 0->1, 2->1 are one weak component; 3 alone.
TEST(Components, DirectedGraphsUseWeakComponents) {
  Csr g = graph(4, {{0, 1}, {2, 1}}, false);
  std::int64_t count = 0;
  auto c = connected_components(g.view(), true, &count);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(c[0], c[2]);
  EXPECT_NE(c[0], c[3]);
}

TEST(Components, EmptyGraph) {
  Csr g = graph(0, {});
  std::int64_t count = -1;
  connected_components(g.view(), false, &count);
  EXPECT_EQ(count, 0);
}

// A 30x30 grid with shuffled labels has a large bandwidth; RCM brings it back near the
// grid's natural order (bandwidth ~30 per row).
TEST(Rcm, IsAPermutationAndShrinksBandwidth) {
  const int side = 30, n = side * side;
  std::vector<int> label(n);
  std::iota(label.begin(), label.end(), 0);
  std::shuffle(label.begin(), label.end(), std::mt19937(7));
  std::vector<std::pair<int, int>> e;
  for (int r = 0; r < side; ++r)
    for (int c = 0; c < side; ++c) {
      if (c + 1 < side) e.emplace_back(label[r * side + c], label[r * side + c + 1]);
      if (r + 1 < side) e.emplace_back(label[r * side + c], label[(r + 1) * side + c]);
    }
  Csr g = graph(n, e);
  auto order = rcm_order(g.view());
  ASSERT_EQ(order.size(), std::size_t(n));
  EXPECT_EQ(std::set<NodeId>(order.begin(), order.end()).size(), std::size_t(n));
  Csr p = permute_csr(g.view(), order);
  const auto before = total_bandwidth(g.view()), after = total_bandwidth(p.view());
  EXPECT_LT(after * 5, before) << "before " << before << " after " << after;
  EXPECT_LE(after, std::int64_t(n) * (side + 2));
}

TEST(Rcm, CoversEveryComponent) {
  Csr g = graph(7, {{0, 1}, {2, 3}, {3, 4}});  // 5 and 6 isolated
  auto order = rcm_order(g.view());
  EXPECT_EQ(std::set<NodeId>(order.begin(), order.end()).size(), 7u);
}

TEST(ReorderDataset, MovesEveryNodeIndexedArrayConsistently) {
  GraphDataset d;
  d.graph = graph(4, {{0, 1}, {1, 2}, {2, 3}});
  d.num_features = 2;
  d.features = Array<float>(std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3});
  d.label_cols = 1;
  d.labels = Array<std::int32_t>(std::vector<std::int32_t>{10, 11, 12, 13});
  Split s;
  s.name = "x";
  s.train = Array<NodeId>(std::vector<NodeId>{0, 3});
  d.splits.push_back(s);
  const std::vector<NodeId> order = {2, 0, 3, 1};
  reorder_dataset(d, order);
  for (NodeId u = 0; u < 4; ++u) {
    EXPECT_EQ(d.original_ids[std::size_t(u)], order[std::size_t(u)]);
    EXPECT_EQ(d.labels[std::size_t(u)], 10 + order[std::size_t(u)]);
    EXPECT_EQ(d.features[std::size_t(2 * u)], float(order[std::size_t(u)]));
  }
  // old train {0, 3} are new {1, 2}
  EXPECT_EQ(std::vector<NodeId>(d.split("x")->train.begin(), d.split("x")->train.end()),
            (std::vector<NodeId>{1, 2}));
  // every new edge maps back to an old one
  const CsrView v = d.graph.view();
  for (NodeId u = 0; u < 4; ++u)
    for (const NodeId* w = v.begin(u); w != v.end(u); ++w)
      EXPECT_EQ(std::abs(d.original_ids[std::size_t(u)] - d.original_ids[std::size_t(*w)]), 1);
}

}  // namespace
}  // namespace halo

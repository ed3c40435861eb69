// CSR builders on tiny hand-drawn graphs with known answers, and randomized graphs checked
// against a std::set reference.
#include "halo/graph/csr.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace halo {
namespace {

EdgeList make(std::int64_t n, const std::vector<std::pair<int, int>>& e,
              std::vector<float> w = {}) {
  EdgeList el;
  el.num_nodes = n;
  for (auto [u, v] : e) {
    el.src.push_back(u);
    el.dst.push_back(v);
  }
  el.weight = std::move(w);
  return el;
}

std::vector<std::vector<NodeId>> rows(const Csr& g) {
  std::vector<std::vector<NodeId>> r(std::size_t(g.num_nodes));
  const CsrView v = g.view();
  for (NodeId u = 0; u < g.num_nodes; ++u) r[std::size_t(u)].assign(v.begin(u), v.end(u));
  return r;
}

//   0 — 1 — 2     3 (isolated)
//    \_____/
// given as 0->1, 1->2, 2->0, plus a duplicate 1->0, a self-loop 2->2.
TEST(BuildCsr, SymmetrisesDedupesAndDropsSelfLoops) {
  Csr g = build_csr(make(4, {{0, 1}, {1, 2}, {2, 0}, {1, 0}, {2, 2}}));
  EXPECT_EQ(g.num_nodes, 4);
  EXPECT_EQ(g.num_edges(), 6);
  EXPECT_EQ(rows(g), (std::vector<std::vector<NodeId>>{{1, 2}, {0, 2}, {0, 1}, {}}));
  EXPECT_TRUE(is_symmetric(g.view()));
}

TEST(BuildCsr, DirectedKeepsArcsAsGiven) {
  Csr g = build_csr(make(3, {{0, 1}, {1, 2}, {0, 1}}), {.symmetrize = false});
  EXPECT_EQ(rows(g), (std::vector<std::vector<NodeId>>{{1}, {2}, {}}));
  NodeId bu = -1, bv = -1;
  EXPECT_FALSE(is_symmetric(g.view(), &bu, &bv));
  EXPECT_EQ(bu, 0);
  EXPECT_EQ(bv, 1);
}

TEST(BuildCsr, DuplicateWeightsMergeToTheLargest) {
  Csr g = build_csr(make(2, {{0, 1}, {1, 0}, {0, 1}}, {2.f, 5.f, 3.f}));
  ASSERT_EQ(g.num_edges(), 2);
  ASSERT_EQ(g.values.size(), 2u);
  EXPECT_EQ(g.values[0], 5.f);
  EXPECT_EQ(g.values[1], 5.f);
  EXPECT_TRUE(is_symmetric(g.view()));
}

TEST(BuildCsr, EmptyGraphs) {
  Csr g = build_csr(make(0, {}));
  EXPECT_EQ(g.num_edges(), 0);
  Csr h = build_csr(make(5, {}));
  EXPECT_EQ(h.num_edges(), 0);
  EXPECT_EQ(degree_stats(h.view()).max, 0);
}

// Sizes around SIMD and thread-chunk widths, random edges with repeats and loops.
TEST(BuildCsr, MatchesSetReferenceOnRandomGraphs) {
  for (int n : {1, 7, 31, 32, 33, 257, 3000}) {
    std::mt19937 rng{std::uint32_t(n)};
    std::uniform_int_distribution<int> id(0, n - 1);
    std::vector<std::pair<int, int>> e;
    std::vector<std::set<NodeId>> ref{static_cast<std::size_t>(n)};
    for (int i = 0; i < 4 * n; ++i) {
      const int u = id(rng), v = id(rng);
      e.emplace_back(u, v);
      if (u != v) {
        ref[std::size_t(u)].insert(v);
        ref[std::size_t(v)].insert(u);
      }
    }
    Csr g = build_csr(make(n, e));
    auto r = rows(g);
    for (int u = 0; u < n; ++u)
      ASSERT_EQ(r[std::size_t(u)],
                std::vector<NodeId>(ref[std::size_t(u)].begin(), ref[std::size_t(u)].end()))
          << "n=" << n << " u=" << u;
  }
}

TEST(PermuteCsr, RelabelsAndKeepsRowsSorted) {
  // path 0-1-2-3 relabelled by order {3,2,1,0}: still a path, reversed.
  Csr g = build_csr(make(4, {{0, 1}, {1, 2}, {2, 3}}));
  Csr p = permute_csr(g.view(), {3, 2, 1, 0});
  EXPECT_EQ(rows(p), (std::vector<std::vector<NodeId>>{{1}, {0, 2}, {1, 3}, {2}}));
  Csr q = permute_csr(g.view(), {1, 3, 0, 2});  // new u = old order[u]
  // old edges 0-1,1-2,2-3 -> new ids: old0=2, old1=0, old2=3, old3=1 -> 2-0, 0-3, 3-1
  EXPECT_EQ(rows(q), (std::vector<std::vector<NodeId>>{{2, 3}, {3}, {0}, {0, 1}}));
}

// A part's local CSR: a subset of rows, columns renamed; each row sorted again with its values.
TEST(RelabelRows, TakesRowsRenamesColumnsAndResorts) {
  //   0 - 1 - 2 - 3   (weights 1, 2, 3 on the edges, left to right)
  Csr g = build_csr(make(4, {{0, 1}, {1, 2}, {2, 3}}, {1.f, 2.f, 3.f}));
  const std::vector<NodeId> rows_taken = {2, 1};    // new row 0 = old 2, new row 1 = old 1
  const std::vector<NodeId> new_id = {3, 1, 0, 2};  // old column c becomes new_id[c]
  Csr l = relabel_rows(g.view(), rows_taken, new_id.data());
  EXPECT_EQ(l.num_nodes, 2);
  // old row 2 = {1, 3} -> {1, 2}; old row 1 = {0, 2} -> {3, 0} sorted to {0, 3}.
  EXPECT_EQ(rows(l), (std::vector<std::vector<NodeId>>{{1, 2}, {0, 3}}));
  EXPECT_EQ(std::vector<float>(l.values.begin(), l.values.end()),
            (std::vector<float>{2.f, 3.f, 2.f, 1.f}));
  Csr none = relabel_rows(g.view(), {}, new_id.data());
  EXPECT_EQ(none.num_nodes, 0);
  EXPECT_EQ(none.num_edges(), 0);
}

TEST(DegreeStats, MinMeanMax) {
  Csr g = build_csr(make(4, {{0, 1}, {0, 2}, {0, 3}}));  // a star
  const DegreeStats s = degree_stats(g.view());
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 1.5);
}

}  // namespace
}  // namespace halo

// The normalised operators on tiny hand-drawn graphs with hand-computed values.
#include "halo/gnn/graph_op.h"

#include <gtest/gtest.h>

#include <cmath>

#include "halo/graph/csr.h"

namespace halo {
namespace {

// GCN normalisation of A+I on the path 0-1-2: degrees (with self-loop) 2, 3, 2, so
// off-diagonal entries are 1/sqrt(2*3) and the diagonal is 1/(d_u+1).
TEST(GcnOperator, MatchesHandComputedValues) {
  EdgeList el;
  el.num_nodes = 3;
  el.src = {0, 1};
  el.dst = {1, 2};
  const Csr g = build_csr(std::move(el));
  const std::vector<std::int32_t> degree = {1, 2, 1};
  const SparseMatrix a = gcn_operator(g.view(), 3, degree.data()).fwd;
  // Rows keep columns sorted with the self-loop in place: 0:{0,1} 1:{0,1,2} 2:{1,2}.
  ASSERT_EQ(a.offsets, (std::vector<EdgeId>{0, 2, 5, 7}));
  ASSERT_EQ(a.indices, (std::vector<NodeId>{0, 1, 0, 1, 2, 1, 2}));
  const float e = float(1 / std::sqrt(6.0));
  EXPECT_FLOAT_EQ(a.values[1], e);        // 0->1
  EXPECT_FLOAT_EQ(a.values[2], e);        // 1->0
  EXPECT_FLOAT_EQ(a.values[4], e);        // 1->2
  EXPECT_FLOAT_EQ(a.values[5], e);        // 2->1
  EXPECT_FLOAT_EQ(a.values[0], 0.5f);     // self 0
  EXPECT_FLOAT_EQ(a.values[3], 1.f / 3);  // self 1
  EXPECT_FLOAT_EQ(a.values[6], 0.5f);     // self 2
  // Each row of D^-1/2 (A+I) D^-1/2 times sqrt(d_u+1) sums to sum_v 1/sqrt(d_v+1).
  EXPECT_NEAR(a.values[2] + a.values[3] + a.values[4], 1.f / 3 + 2 * e, 1e-6);
}

Csr path3() {
  EdgeList el;
  el.num_nodes = 3;
  el.src = {0, 1};
  el.dst = {1, 2};
  return build_csr(std::move(el));
}

// On a whole undirected graph GCN's operator is its own transpose, bit for bit, and is kept
// once: backward's view is the forward matrix.
TEST(GcnOperator, OnAWholeUndirectedGraphIsItsOwnTranspose) {
  const Csr g = path3();
  const std::vector<std::int32_t> degree = {1, 2, 1};
  const GraphOperator op = gcn_operator(g.view(), 3, degree.data());
  ASSERT_TRUE(op.symmetric);
  EXPECT_TRUE(op.bwd.indices.empty());
  const SparseMatrix t = transpose(op.fwd);
  EXPECT_EQ(t.offsets, op.fwd.offsets);
  EXPECT_EQ(t.indices, op.fwd.indices);
  EXPECT_EQ(t.values, op.fwd.values);
  const OperatorView v = op.view();
  EXPECT_EQ(v.bwd.values, op.fwd.values.data());
  EXPECT_EQ(v.bwd.indices, op.fwd.indices.data());
  // Inference asks for no transpose: none is made, and nothing claims symmetry.
  EXPECT_FALSE(gcn_operator(g.view(), 3, degree.data(), /*transpose=*/false).symmetric);
}

// A part's operator has halo columns: it is rectangular and keeps an explicit transpose; so
// does GraphSAGE's mean operator, whose rows are scaled by their own degree only.
TEST(GcnOperator, WithHaloColumnsOrMeanScalingKeepsTheTranspose) {
  const Csr g = path3();
  const std::vector<std::int32_t> degree = {1, 2, 1, 4};
  const GraphOperator part = gcn_operator(g.view(), 4, degree.data());
  EXPECT_FALSE(part.symmetric);
  EXPECT_EQ(part.bwd.rows, 4);
  EXPECT_EQ(part.bwd.indices.size(), part.fwd.indices.size());
  const GraphOperator mean = mean_operator(g.view(), 3);
  EXPECT_FALSE(mean.symmetric);  // 0->1 is 1/1, 1->0 is 1/2
  EXPECT_EQ(mean.bwd.values, transpose(mean.fwd).values);
  EXPECT_NE(mean.view().bwd.values, mean.fwd.values.data());
}

TEST(IsSymmetric, NeedsEqualBitsSortedRowsAndASquare) {
  const Csr g = path3();
  const std::vector<std::int32_t> degree = {1, 2, 1};
  const SparseMatrix a = gcn_operator(g.view(), 3, degree.data()).fwd;
  EXPECT_TRUE(is_symmetric(a));
  SparseMatrix b = a;
  b.values[1] = std::nextafter(b.values[1], 1.f);  // 0->1 one ulp off 1->0
  EXPECT_FALSE(is_symmetric(b));
  SparseMatrix c = a;
  std::swap(c.indices[2], c.indices[3]);  // row 1 unsorted: {1, 0, 2}
  std::swap(c.values[2], c.values[3]);
  EXPECT_FALSE(is_symmetric(c));
  SparseMatrix d = a;
  d.cols = 4;
  EXPECT_FALSE(is_symmetric(d));
}

}  // namespace
}  // namespace halo

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

}  // namespace
}  // namespace halo

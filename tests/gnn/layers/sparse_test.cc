// SparseMatrix on the host: copies into host memory keep the shape and the arrays in storage of
// their own, views show the arrays of wherever they live, and a move leaves the source empty.
// The GPU side (storage ids, uploads) is in cuda_backend_test.cc.
#include "halo/gnn/sparse.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "halo/gnn/device.h"
#include "halo/gnn/graph_op.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

// 3 x 4 with an empty middle row: [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4]].
SparseMatrix small_matrix() {
  SparseMatrix a;
  a.rows = 3;
  a.cols = 4;
  a.offsets = {0, 2, 2, 4};
  a.indices = {0, 2, 1, 3};
  a.values = {1.f, 2.f, 3.f, 4.f};
  return a;
}

// The view of a host matrix is its vectors, with no storage id.
void expect_view_of(const SparseMatrix& a) {
  const SparseView v = a.view();
  EXPECT_EQ(v.rows, a.rows);
  EXPECT_EQ(v.cols, a.cols);
  EXPECT_EQ(v.offsets, a.offsets.data());
  EXPECT_EQ(v.indices, a.indices.data());
  EXPECT_EQ(v.values, a.values.data());
  EXPECT_EQ(v.storage_id, 0u);
}

TEST(SparseMatrix, HostToDeviceCpuKeepsShapeAndArraysInNewStorage) {
  const SparseMatrix a = small_matrix();
  const SparseMatrix b = a.to_device(Device::kCpu);
  EXPECT_EQ(a.device(), Device::kCpu);
  EXPECT_EQ(b.device(), Device::kCpu);
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.cols, 4);
  EXPECT_EQ(b.offsets, a.offsets);
  EXPECT_EQ(b.indices, a.indices);
  EXPECT_EQ(b.values, a.values);
  EXPECT_NE(b.offsets.data(), a.offsets.data());
  EXPECT_NE(b.values.data(), a.values.data());
  expect_view_of(a);
  expect_view_of(b);
  EXPECT_EQ(b.view().nnz(), 4);
  // And back again: a round trip through to_device(kCpu) is the identity.
  const SparseMatrix c = b.to_device(Device::kCpu);
  EXPECT_EQ(c.offsets, a.offsets);
  EXPECT_EQ(c.indices, a.indices);
  EXPECT_EQ(c.values, a.values);
}

TEST(SparseMatrix, CopiesAreDeep) {
  const SparseMatrix a = small_matrix();
  SparseMatrix b = a;
  EXPECT_EQ(b.offsets, a.offsets);
  EXPECT_EQ(b.values, a.values);
  b.values[0] = 9.f;  // the copy's arrays are its own
  EXPECT_EQ(a.values[0], 1.f);
  SparseMatrix c;
  c = a;
  EXPECT_EQ(c.rows, a.rows);
  EXPECT_EQ(c.indices, a.indices);
  expect_view_of(c);
}

TEST(SparseMatrix, MovesHandOverTheArraysAndLeaveTheSourceEmpty) {
  SparseMatrix a = small_matrix();
  const float* values = a.values.data();
  SparseMatrix b = std::move(a);
  EXPECT_EQ(b.values.data(), values);  // the arrays, not a copy: views taken before stay valid
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.cols, 4);
  expect_view_of(b);
  // NOLINTNEXTLINE(bugprone-use-after-move): the state after a move is the contract
  EXPECT_EQ(a.rows, 0);
  EXPECT_EQ(a.cols, 0);
  EXPECT_TRUE(a.offsets.empty() && a.indices.empty() && a.values.empty());
  EXPECT_EQ(a.device(), Device::kCpu);
  EXPECT_EQ(a.view().nnz(), 0);
  EXPECT_EQ(a.view().offsets, nullptr);

  SparseMatrix c;
  c = std::move(b);
  EXPECT_EQ(c.values.data(), values);
  // NOLINTNEXTLINE(bugprone-use-after-move): as above
  EXPECT_EQ(b.rows, 0);
  EXPECT_TRUE(b.offsets.empty() && b.indices.empty() && b.values.empty());
  // A moved-from matrix is reusable: builders fill it again.
  b = small_matrix();
  EXPECT_EQ(b.view().nnz(), 4);
}

TEST(SparseMatrix, GraphOperatorToDeviceCpuKeepsBothMatrices) {
  EdgeList el;
  el.num_nodes = 3;
  el.src = {0, 1};
  el.dst = {1, 2};
  const Csr g = build_csr(std::move(el));
  const std::vector<std::int32_t> degree = {1, 2, 1, 1};
  const GraphOperator op = gcn_operator(g.view(), 4, degree.data());  // a halo column
  ASSERT_FALSE(op.symmetric);
  const GraphOperator host = op.to_device(Device::kCpu);
  for (const auto& [got, want] : {std::pair{&host.fwd, &op.fwd}, std::pair{&host.bwd, &op.bwd}}) {
    EXPECT_EQ(got->device(), Device::kCpu);
    EXPECT_EQ(got->rows, want->rows);
    EXPECT_EQ(got->cols, want->cols);
    EXPECT_EQ(got->offsets, want->offsets);
    EXPECT_EQ(got->indices, want->indices);
    EXPECT_EQ(got->values, want->values);
  }
  const OperatorView v = host.view();
  EXPECT_EQ(v.fwd.values, host.fwd.values.data());
  EXPECT_EQ(v.bwd.values, host.bwd.values.data());
  // A symmetric operator travels once and stays its own transpose.
  const GraphOperator sym = gcn_operator(g.view(), 3, degree.data()).to_device(Device::kCpu);
  ASSERT_TRUE(sym.symmetric);
  EXPECT_TRUE(sym.bwd.indices.empty());
  EXPECT_EQ(sym.view().bwd.values, sym.fwd.values.data());
}

// Without a GPU the copy to the device fails with the reason, as every device allocation does.
TEST(SparseMatrix, ToCudaWithoutDeviceIsASystemError) {
  if (cuda_devices().count > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(small_matrix().to_device(Device::kCuda), SystemError);
}

}  // namespace
}  // namespace halo

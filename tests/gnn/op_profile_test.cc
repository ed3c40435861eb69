// The Backend's public layer: shape, aliasing and memory-space checks that name the op before
// any kernel runs, and the per-thread OpProfile that --profile prints.
#include "halo/gnn/op_profile.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

// The message of the std::logic_error f throws ("" when it throws none), so a test can check
// the op and the shapes are named.
template <class Fn>
std::string contract_error(Fn&& f) {
  try {
    f();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

// An all-zero CSR operator, rows x cols, whose arrays outlive the view (one unused index and
// value, so no kernel meets a null array).
struct EmptyOperator {
  std::vector<EdgeId> offsets;
  std::vector<NodeId> indices{0};
  std::vector<float> values{0.f};
  SparseView view;
  EmptyOperator(std::int64_t rows, std::int64_t cols)
      : offsets(std::size_t(rows + 1), 0),
        view{rows, cols, offsets.data(), indices.data(), values.data()} {}
};

TEST(BackendChecks, SpmmShapeMismatchThrowsNamingTheOpAndTouchesNothing) {
  Backend& be = cpu_backend();
  const EmptyOperator A(3, 4);
  Matrix X(5, 2, 1.f), Y(3, 2, 7.f);
  const std::string msg = contract_error([&] { be.spmm(A.view, X.view(), Y.view()); });
  EXPECT_NE(msg.find("Backend::spmm:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("A 3x4, X 5x2, Y 3x2"), std::string::npos) << msg;
  EXPECT_EQ(Y.storage(), std::vector<float>(6, 7.f)) << "the check runs before the kernel";
  const std::string consume =
      contract_error([&] { be.spmm_consume(A.view, X.view(), Matrix(3, 3).view()); });
  EXPECT_NE(consume.find("Backend::spmm_consume:"), std::string::npos) << consume;
  // Y aliasing X: a square operator over one matrix.
  const EmptyOperator S(3, 3);
  Matrix Z(3, 2);
  const std::string alias = contract_error([&] { be.spmm(S.view, Z.view(), Z.view()); });
  EXPECT_NE(alias.find("alias"), std::string::npos) << alias;
  // A contract error is a bug in halo, not the user's mistake: not a halo::Error (exit 70).
  EXPECT_THROW(be.spmm(A.view, X.view(), Y.view()), std::logic_error);
  try {
    be.spmm(A.view, X.view(), Y.view());
  } catch (const Error&) {
    ADD_FAILURE() << "a shape mismatch must not read as a user error";
  } catch (const std::logic_error&) {
  }
  // Agreeing shapes pass, also when empty.
  Matrix X4(4, 2, 1.f);
  EXPECT_NO_THROW(be.spmm(A.view, X4.view(), Y.view()));
  EXPECT_EQ(Y.storage(), std::vector<float>(6, 0.f));
  const EmptyOperator E(0, 4);
  EXPECT_NO_THROW(be.spmm(E.view, X4.view(), Matrix(0, 2).view()));
}

TEST(BackendChecks, GemmShapeMismatchThrowsNamingTheOp) {
  Backend& be = cpu_backend();
  Matrix A(2, 3, 1.f), B(4, 5, 1.f), C(2, 5, 0.f);
  const std::string msg =
      contract_error([&] { be.gemm(false, false, 1.f, A.view(), B.view(), 0.f, C.view()); });
  EXPECT_NE(msg.find("Backend::gemm:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("A 2x3, B 4x5, C 2x5"), std::string::npos) << msg;
  // The transposes are part of the shapes: A^T B^T (3x2 by 5x4) does not fit, A^T B (by 2x5) does.
  const std::string t =
      contract_error([&] { be.gemm(true, true, 1.f, A.view(), B.view(), 0.f, C.view()); });
  EXPECT_NE(t.find("Backend::gemm(A^T, B^T):"), std::string::npos) << t;
  Matrix B2(2, 5, 1.f), C2(3, 5, 0.f);
  EXPECT_NO_THROW(be.gemm(true, false, 1.f, A.view(), B2.view(), 0.f, C2.view()));
  EXPECT_EQ(C2.at(0, 0), 2.f);
  // C must not alias an input.
  Matrix S(3, 3, 1.f);
  const std::string alias =
      contract_error([&] { be.gemm(false, false, 1.f, S.view(), S.view(), 0.f, S.view()); });
  EXPECT_NE(alias.find("alias"), std::string::npos) << alias;
}

TEST(BackendChecks, SameShapeOpsAndMemorySpaceAreChecked) {
  Backend& be = cpu_backend();
  Matrix a(2, 3, 1.f), b(3, 2, 5.f);
  const std::string msg = contract_error([&] { be.add(a.view(), b.view()); });
  EXPECT_NE(msg.find("Backend::add:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("src 2x3, dst 3x2"), std::string::npos) << msg;
  EXPECT_EQ(b.storage(), std::vector<float>(6, 5.f));
  EXPECT_THROW(be.copy(a.view(), b.view()), std::logic_error);
  EXPECT_THROW(be.relu_backward(a.view(), b.view()), std::logic_error);
  Matrix c(2, 3, 2.f);
  be.add(a.view(), c.view());
  EXPECT_EQ(c.storage(), std::vector<float>(6, 3.f));
  // A non-empty view tagged as device memory never reaches a CPU kernel; an empty one may.
  MatrixView on_gpu = c.view();
  on_gpu.device = Device::kCuda;
  const std::string dev = contract_error([&] { be.fill(on_gpu, 0.f); });
  EXPECT_NE(dev.find("Backend::fill: X is in device memory"), std::string::npos) << dev;
  EXPECT_EQ(c.storage(), std::vector<float>(6, 3.f));
  EXPECT_NO_THROW(be.fill(MatrixView{nullptr, 0, 3, Device::kCuda}, 0.f));
  // Counts are never negative.
  EXPECT_THROW(be.gather_rows(a.view(), nullptr, -1, a.view()), std::logic_error);
  const std::vector<NodeId> idx{1, 0, 1};
  const std::string rows =
      contract_error([&] { be.gather_rows(a.view(), idx.data(), 3, c.view()); });
  EXPECT_NE(rows.find("Backend::gather_rows:"), std::string::npos) << rows;
}

// Fills X once and adds it to itself through the ops a profile should see.
void run_ops(Backend& be, Matrix& X) {
  be.fill(X.view(), 1.f);
  be.add(X.view(), X.view());
}

TEST(OpProfile, RecordsCallsPerOpOnlyInScopeAndOnItsThread) {
  Backend& be = cpu_backend();
  Matrix X(4, 3), Y(4, 3), d(4, 3);
  const EmptyOperator A(4, 4);
  OpProfile profile;
  run_ops(be, X);  // before the scope: not recorded
  {
    const ProfileScope scope(profile);
    run_ops(be, X);
    run_ops(be, X);
    be.spmm_consume(A.view, X.view(), Y.view());  // reported as "spmm", as before
    be.spmm(A.view, X.view(), Y.view());
    std::vector<double> s(3), ss(3);
    be.column_moments(X.view(), s.data(), ss.data());
    // softmax_xent zeroes dlogits with fill itself: that fill is part of "loss", not counted.
    const std::vector<std::int32_t> labels{0, 1, 2, -1};
    const std::vector<NodeId> rows{0, 1, 2, 3};
    be.softmax_xent(X.view(), labels.data(), rows.data(), 4, 4.0, d.view(), nullptr);
    // Another thread's ops go to its own profile, or to none.
    OpProfile other;
    std::thread([&] {
      run_ops(be, X);
      const ProfileScope theirs(other);
      be.fill(X.view(), 0.f);
    }).join();
    EXPECT_EQ(other.totals().size(), 1u);
    EXPECT_EQ(other.totals().at("fill").calls, 1);
    // A nested scope takes over and gives the outer one back.
    OpProfile inner;
    {
      const ProfileScope nested(inner);
      be.relu(X.view());
    }
    be.relu(X.view());
    EXPECT_EQ(inner.totals().at("relu").calls, 1);
  }
  run_ops(be, X);  // after the scope: not recorded
  const auto& t = profile.totals();
  EXPECT_EQ(t.at("fill").calls, 2);
  EXPECT_EQ(t.at("add").calls, 2);
  EXPECT_EQ(t.at("spmm").calls, 2);
  EXPECT_EQ(t.at("batch_norm").calls, 1);
  EXPECT_EQ(t.at("loss").calls, 1);
  EXPECT_EQ(t.at("relu").calls, 1);
  EXPECT_EQ(t.size(), 6u);
  double sum = 0;
  for (const auto& [op, e] : t) {
    EXPECT_GE(e.seconds, 0.0) << op;
    sum += e.seconds;
  }
  EXPECT_DOUBLE_EQ(profile.seconds(), sum);  // the ops' total, in the table's order
  EXPECT_GT(profile.seconds(), 0.0);
  const std::string report = profile.report();
  EXPECT_EQ(report.rfind("op                      seconds   share   calls\n", 0), 0u) << report;
  EXPECT_NE(report.find("\nspmm "), std::string::npos) << report;
  EXPECT_EQ(OpProfile().report(), "op                      seconds   share   calls\n");
}

}  // namespace
}  // namespace halo

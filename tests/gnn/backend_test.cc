// Every CPU kernel against the plain reference, at sizes around the vector width and on skewed
// degree distributions; dropout masks' partition invariance; metrics with OGB semantics.
#include "halo/gnn/backend.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "halo/gnn/cpu_bf16.h"
#include "halo/gnn/graph_op.h"
#include "halo/gnn/metrics.h"
#include "halo/gnn/reference.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

Matrix random_matrix(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  Matrix m(r, c);
  std::mt19937 g{seed};
  std::normal_distribution<float> d;
  for (auto& v : m.storage()) v = d(g);
  return m;
}

void expect_close(const Matrix& got, const Matrix& ref, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.rows(), ref.rows()) << what;
  ASSERT_EQ(got.cols(), ref.cols()) << what;
  for (std::int64_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got.data()[i] - ref.data()[i]), atol + rtol * std::abs(ref.data()[i]))
        << what << " at " << i << ": " << got.data()[i] << " vs " << ref.data()[i];
}

// A skewed random graph: a few hubs hold most edges (power-law-ish degrees), plus isolated nodes.
SparseMatrix skewed_operator(std::int64_t n, std::uint32_t seed) {
  std::mt19937 g{seed};
  EdgeList el;
  el.num_nodes = n;
  std::uniform_int_distribution<NodeId> any(0, NodeId(n - 1));
  for (std::int64_t i = 0; i < 6 * n; ++i) {
    const NodeId hub = NodeId(std::min<std::int64_t>(
        n - 1, std::int64_t(std::pow(double(any(g)) / double(n), 4) * double(n))));
    el.src.push_back(hub);
    el.dst.push_back(any(g));
  }
  const Csr csr = build_csr(std::move(el));
  std::vector<std::int32_t> deg(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v)
    deg[std::size_t(v)] = std::int32_t(csr.view().degree(NodeId(v)));
  return gcn_operator(csr.view(), n, deg.data()).fwd;
}

TEST(CpuBackend, SpmmMatchesReferenceAtVectorBoundaries) {
  Backend& be = cpu_backend();
  const SparseMatrix A = skewed_operator(300, 1);
  for (std::int64_t f : {1, 7, 8, 9, 31, 32, 33, 257}) {
    const Matrix X = random_matrix(300, f, std::uint32_t(f));
    Matrix Y(300, f);
    be.spmm(A.view(), X.view(), Y.view());
    expect_close(Y, ref::spmm(A.view(), X), 1e-5, 1e-5, "spmm f=" + std::to_string(f));
  }
}

TEST(CpuBackend, SpmmIsDeterministicAcrossThreadCounts) {
  Backend& be = cpu_backend();
  const SparseMatrix A = skewed_operator(2000, 2);
  const Matrix X = random_matrix(2000, 64, 3);
  Matrix a(2000, 64), b(2000, 64);
  const int t = omp_get_max_threads();
  omp_set_num_threads(1);
  be.spmm(A.view(), X.view(), a.view());
  omp_set_num_threads(std::max(2, t));
  be.spmm(A.view(), X.view(), b.view());
  omp_set_num_threads(t);
  EXPECT_EQ(a.storage(), b.storage());
}

TEST(CpuBackend, TransposeOperatorIsTheTranspose) {
  const SparseMatrix A = skewed_operator(50, 4);
  const SparseMatrix T = transpose(A);
  const Matrix X = random_matrix(50, 5, 5);
  // (A^T X) computed two ways: the transposed operator, and gemm with the densified A.
  Matrix dense(50, 50);
  for (std::int64_t r = 0; r < 50; ++r)
    for (EdgeId e = A.offsets[std::size_t(r)]; e < A.offsets[std::size_t(r) + 1]; ++e)
      dense.at(r, A.indices[std::size_t(e)]) = A.values[std::size_t(e)];
  expect_close(ref::spmm(T.view(), X), ref::gemm(true, false, dense, X), 1e-5, 1e-5, "transpose");
}

TEST(CpuBackend, GemmAllTransposes) {
  Backend& be = cpu_backend();
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t k : {1, 9, 33}) {
        const Matrix A = ta ? random_matrix(k, 7, 1) : random_matrix(7, k, 1);
        const Matrix B = tb ? random_matrix(5, k, 2) : random_matrix(k, 5, 2);
        Matrix C(7, 5, 1.f);
        be.gemm(ta, tb, 2.f, A.view(), B.view(), 0.5f, C.view());
        Matrix want = ref::gemm(ta, tb, A, B);
        for (auto& v : want.storage()) v = 2.f * v + 0.5f;
        expect_close(C, want, 1e-4, 1e-4, "gemm");
      }
}

// bfloat16 rounding written from its definition (nearest, ties to even; subnormals to zero as
// the instruction does; a NaN stays a NaN): the oracle for the inputs --matmul-precision bf16
// multiplies.
float bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0)
    u &= 0x80000000u;
  else if ((u & 0x7f800000u) != 0x7f800000u)
    u += 0x7fffu + ((u >> 16) & 1u);
  else if (u & 0x007fffffu)
    u |= 0x00400000u;
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// Puts the shared CPU backend in bf16 with the given kernel (kAuto: the probe's) for a scope, or
// says why it cannot.
struct Bf16Scope {
  std::string unavailable;
  explicit Bf16Scope(Bf16Kernel k = Bf16Kernel::kAuto) {
    try {
      cpu_backend().set_matmul_precision(MatmulPrecision::kBf16);
      set_cpu_bf16_kernel(k);
    } catch (const SystemError& e) {
      unavailable = e.what();
    }
  }
  ~Bf16Scope() { cpu_backend().set_matmul_precision(MatmulPrecision::kFp32); }
};

// The bf16 kernels this build and CPU can run (both need AVX-512 BF16; none elsewhere).
constexpr Bf16Kernel kBf16Kernels[] = {Bf16Kernel::kDot, Bf16Kernel::kFma};

class Bf16Kernels : public ::testing::TestWithParam<Bf16Kernel> {};
INSTANTIATE_TEST_SUITE_P(CpuBackend, Bf16Kernels, ::testing::ValuesIn(kBf16Kernels),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST_P(Bf16Kernels, GemmIsExactOnRoundedInputsAtTileBoundaries) {
  Bf16Scope scope(GetParam());
  if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
  ASSERT_EQ(cpu_bf16_kernel(), GetParam());
  Backend& be = cpu_backend();
  // Products of bfloat16 numbers are exact in float32, so the only error left is float32
  // summation: within (k + 2) u of the sum of |terms| for any order. Shapes straddle the 6-row
  // tile, the 16-column vector, the 64-column panel and the 256-k block.
  int cases = 0;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t m : {1, 6, 7, 97})
        for (std::int64_t n : {1, 17, 40, 64, 65, 130})
          for (std::int64_t k : {1, 2, 31, 300, 1100}) {
            const std::uint32_t seed = std::uint32_t(m * 131 + n * 7 + k);
            const Matrix A = ta ? random_matrix(k, m, seed) : random_matrix(m, k, seed);
            const Matrix B = tb ? random_matrix(n, k, seed + 1) : random_matrix(k, n, seed + 1);
            const Matrix C0 = random_matrix(m, n, seed + 2);
            Matrix C = C0;
            const float alpha = 0.75f, beta = k % 2 ? 0.f : -1.5f;
            be.gemm(ta, tb, alpha, A.view(), B.view(), beta, C.view());
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                double s = 0, mag = 0;
                for (std::int64_t p = 0; p < k; ++p) {
                  const double t = double(bf16(ta ? A.at(p, i) : A.at(i, p))) *
                                   double(bf16(tb ? B.at(j, p) : B.at(p, j)));
                  s += t;
                  mag += std::abs(t);
                }
                const double want = alpha * s + beta * double(C0.at(i, j));
                const double tol =
                    double(k + 4) * 0x1p-24 * (alpha * mag + std::abs(beta * double(C0.at(i, j))));
                ASSERT_LE(std::abs(double(C.at(i, j)) - want), tol)
                    << "ta " << ta << " tb " << tb << " m " << m << " n " << n << " k " << k
                    << " at " << i << "," << j;
              }
            ++cases;
          }
  EXPECT_EQ(cases, 480);
}

// Tall FP32 products (16384 rows or more in the long dimension) run halo's AVX-512 kernel where
// the CPU has AVX-512; on any CPU the result must be an FP32 product: within (k + 4) u of the sum
// of |terms| of the exact one, for every transpose, at tile, vector and panel boundaries, and C
// must not be read when beta = 0.
TEST(CpuBackend, TallFp32GemmIsAnFp32Product) {
  Backend& be = cpu_backend();
  ASSERT_EQ(be.matmul_precision(), MatmulPrecision::kFp32);
  const std::int64_t tall = 16390;
  int cases = 0;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t n : {17, 130})
        for (std::int64_t small : {3, 70}) {
          // A transposed: the long dimension is k (a weight gradient); otherwise the rows of C.
          const std::int64_t m = ta ? small : tall, k = ta ? tall : small;
          const std::uint32_t seed = std::uint32_t(n * 7 + small + 100 * ta + 1000 * tb);
          const Matrix A = ta ? random_matrix(k, m, seed) : random_matrix(m, k, seed);
          const Matrix B = tb ? random_matrix(n, k, seed + 1) : random_matrix(k, n, seed + 1);
          const Matrix C0 = random_matrix(m, n, seed + 2);
          Matrix C = small == 3 ? Matrix(m, n, std::nanf("")) : C0;
          const float alpha = 1.25f, beta = small == 3 ? 0.f : 0.5f;
          be.gemm(ta, tb, alpha, A.view(), B.view(), beta, C.view());
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double sum = 0, mag = 0;
              for (std::int64_t p = 0; p < k; ++p) {
                const double t =
                    double(ta ? A.at(p, i) : A.at(i, p)) * double(tb ? B.at(j, p) : B.at(p, j));
                sum += t;
                mag += std::abs(t);
              }
              const double c0 = beta != 0.f ? double(C0.at(i, j)) : 0.0;
              const double want = alpha * sum + beta * c0;
              const double tol =
                  double(k + 4) * 0x1p-24 * (alpha * mag + std::abs(beta * c0)) + 1e-30;
              ASSERT_LE(std::abs(double(C.at(i, j)) - want), tol)
                  << "ta " << ta << " tb " << tb << " n " << n << " k " << k << " at " << i << ","
                  << j;
            }
          ++cases;
        }
  EXPECT_EQ(cases, 16);
}

// k = 1 and B = 1: each entry of C is one rounded element of A, the same bits from either kernel
// as the oracle gives: ties to even both ways, the carry into the exponent, the largest float
// rounding up to infinity, subnormals to zero, infinities and NaNs kept.
TEST_P(Bf16Kernels, GemmRoundsSpecialValuesAsTheOracle) {
  Bf16Scope scope(GetParam());
  if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
  const std::uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f7fffffu, 0x3f807fffu,
                                0xbf808000u, 0x7f7fffffu, 0xff7fffffu, 0x00400000u, 0x80000001u,
                                0x7f800000u, 0xff800000u, 0x7fc00001u, 0x80000000u, 0x00000000u,
                                0x00800000u, 0x3fffffffu, 0x7f800001u};
  const std::int64_t m = std::int64_t(std::size(bits));
  Matrix A(m, 1), B(1, 20, 1.f), C(m, 20, 0.f);
  for (std::int64_t i = 0; i < m; ++i) std::memcpy(&A.data()[i], &bits[i], 4);
  cpu_backend().gemm(false, false, 1.f, A.view(), B.view(), 0.f, C.view());
  for (std::int64_t i = 0; i < m; ++i) {
    const float want = bf16(A.at(i, 0)) + 0.f;  // the sum starts at +0: -0 comes out +0
    for (std::int64_t j = 0; j < 20; ++j) {
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(C.at(i, j))) << std::hex << bits[i];
      } else {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(C.at(i, j)), std::bit_cast<std::uint32_t>(want))
            << "input 0x" << std::hex << bits[i] << " column " << std::dec << j;
      }
    }
  }
}

// The two kernels compute the same rounded product, summed in different orders: close, and
// not the same bits (else one of them is not the kernel that ran).
TEST(CpuBackend, Bf16KernelsAgreeToFloatRounding) {
  const Matrix A = random_matrix(200, 300, 11), B = random_matrix(300, 70, 12);
  Matrix dot(200, 70), fma(200, 70);
  {
    Bf16Scope scope(Bf16Kernel::kDot);
    if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
    cpu_backend().gemm(false, false, 1.f, A.view(), B.view(), 0.f, dot.view());
  }
  {
    Bf16Scope scope(Bf16Kernel::kFma);
    cpu_backend().gemm(false, false, 1.f, A.view(), B.view(), 0.f, fma.view());
  }
  expect_close(fma, dot, 1e-5, 1e-5, "fma against dot");
  EXPECT_NE(fma.storage(), dot.storage());
}

// auto: the probe's times are positive and cached, the pick follows them with its 0.9 margin,
// and set_cpu_bf16_kernel(kAuto) lands on that pick, which the log line names.
TEST(CpuBackend, Bf16AutoPicksTheFasterKernelByTheProbe) {
  EXPECT_EQ(pick_bf16_kernel({1.0, 0.8}), Bf16Kernel::kFma);
  EXPECT_EQ(pick_bf16_kernel({1.0, 0.95}), Bf16Kernel::kDot);
  EXPECT_EQ(pick_bf16_kernel({0.6, 1.0}), Bf16Kernel::kDot);
  Bf16Scope scope(Bf16Kernel::kAuto);
  if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
  const Bf16Probe p = probe_bf16_kernels(), again = probe_bf16_kernels();
  EXPECT_GT(p.dot_s, 0);
  EXPECT_GT(p.fma_s, 0);
  EXPECT_EQ(p.dot_s, again.dot_s);
  EXPECT_EQ(cpu_bf16_kernel(), pick_bf16_kernel(p));
  const std::string line = describe_cpu_bf16(true);
  EXPECT_NE(line.find(std::string("bf16 products: ") + to_string(pick_bf16_kernel(p))),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("probe dot"), std::string::npos) << line;
  EXPECT_EQ(parse_bf16_kernel("fma"), Bf16Kernel::kFma);
  EXPECT_THROW(parse_bf16_kernel("amx"), ParamError);
}

TEST_P(Bf16Kernels, GemmRoundsItsInputsAndNeverReadsCWithBetaZero) {
  Bf16Scope scope(GetParam());
  if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
  const Matrix A = random_matrix(50, 256, 7), B = random_matrix(256, 70, 8);
  Matrix C(50, 70, std::nanf(""));
  cpu_backend().gemm(false, false, 1.f, A.view(), B.view(), 0.f, C.view());
  // The float32 product differs from the bf16 one by ~2^-9 sqrt(k) per entry; summation alone
  // would be ~1000 times closer. A kernel that skipped the rounding fails the first check.
  const Matrix exact = ref::gemm(false, false, A, B);
  double off = 0;
  for (std::int64_t i = 0; i < C.size(); ++i) {
    ASSERT_TRUE(std::isfinite(C.data()[i])) << "beta = 0 read C's NaN at " << i;
    off = std::max(off, double(std::abs(C.data()[i] - exact.data()[i])));
  }
  EXPECT_GT(off, 1e-3);
  EXPECT_LT(off, 0.5);
}

TEST_P(Bf16Kernels, GemmIsDeterministicAndLargeTransposedOutputsStayFp32) {
  Bf16Scope scope(GetParam());
  if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
  Backend& be = cpu_backend();
  const Matrix A = random_matrix(3000, 64, 1), G = random_matrix(3000, 48, 2);
  Matrix w1(64, 48), w2(64, 48);
  be.gemm(true, false, 1.f, A.view(), G.view(), 0.f, w1.view());
  be.gemm(true, false, 1.f, A.view(), G.view(), 0.f, w2.view());
  EXPECT_EQ(w1.storage(), w2.storage());
  // A transposed A with an output over 4 Mi entries is left to FP32 (the kernel's private
  // per-thread copies of C would be too large): bit for bit what the fp32 setting computes.
  const Matrix X = random_matrix(3, 2100, 3), Y = random_matrix(3, 2100, 4);
  Matrix big(2100, 2100), big32(2100, 2100);
  be.gemm(true, false, 1.f, X.view(), Y.view(), 0.f, big.view());
  be.set_matmul_precision(MatmulPrecision::kFp32);
  be.gemm(true, false, 1.f, X.view(), Y.view(), 0.f, big32.view());
  EXPECT_EQ(big.storage(), big32.storage());
}

// spmm_consume: plain spmm (X untouched) in fp32; in bf16 the aggregation of X rounded to
// bfloat16, at widths around the 16-lane vector, the 32-float conversion chunk and the
// 256-column block.
TEST(CpuBackend, SpmmConsumeRoundsItsDeadInputOnlyInBf16) {
  Backend& be = cpu_backend();
  const SparseMatrix A = skewed_operator(400, 6);
  for (std::int64_t f : {1, 15, 17, 33, 40, 256, 300}) {
    const std::string what = "f=" + std::to_string(f);
    const Matrix X = random_matrix(400, f, std::uint32_t(f));
    Matrix X1 = X, Y1(400, f), Y2(400, f);
    be.spmm(A.view(), X.view(), Y1.view());
    be.spmm_consume(A.view(), X1.view(), Y2.view());
    EXPECT_EQ(Y1.storage(), Y2.storage()) << what;
    EXPECT_EQ(X1.storage(), X.storage()) << what;
    Bf16Scope scope;
    if (!scope.unavailable.empty()) GTEST_SKIP() << scope.unavailable;
    Matrix Xr = X;
    for (auto& v : Xr.storage()) v = bf16(v);
    const Matrix want = ref::spmm(A.view(), Xr);
    Matrix X2 = X, Y3(400, f);
    be.spmm_consume(A.view(), X2.view(), Y3.view());
    double worst_vs_exact = 0;
    for (std::int64_t r = 0; r < 400; ++r) {
      double mag = 0;
      for (EdgeId e = A.offsets[std::size_t(r)]; e < A.offsets[std::size_t(r) + 1]; ++e)
        mag += std::abs(A.values[std::size_t(e)]);
      for (std::int64_t c = 0; c < f; ++c) {
        ASSERT_NEAR(Y3.at(r, c), want.at(r, c), 1e-5 * (1 + 4 * mag))
            << what << " at " << r << "," << c;
        worst_vs_exact = std::max(worst_vs_exact, double(std::abs(Y3.at(r, c) - Y1.at(r, c))));
      }
    }
    EXPECT_GT(worst_vs_exact, 1e-4) << what << ": the input was not rounded";
  }
}

// ELU's own expm1 (vectorised) against libm's: relative 4e-7 (a few ulp) over every magnitude,
// the same bits for any thread count; its backward is the slope from the output, undoing a
// dropout scale.
TEST(CpuBackend, EluMatchesExpm1AndItsSlope) {
  std::vector<float> xs;
  for (float x = -100.f; x < 5.f; x += 0.0137f) xs.push_back(x);
  for (float x = -1e-3f; x < 1e-3f; x += 1.3e-6f) xs.push_back(x);  // small: relative precision
  for (float x : {0.f, -0.f, -87.f, -88.f, -1e30f, 1e30f, -1e-30f}) xs.push_back(x);
  Matrix y(1, std::int64_t(xs.size()));
  y.assign(xs);
  Backend& be = cpu_backend();
  be.elu(y.view());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], want = x > 0 ? x : std::expm1(x);
    ASSERT_NEAR(y.data()[i], want, 4e-7 * std::abs(want) + 1e-38) << "x = " << x;
  }
  Matrix again(1, std::int64_t(xs.size()));
  again.assign(xs);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  be.elu(again.view());
  omp_set_num_threads(threads);
  EXPECT_EQ(again.storage(), y.storage());
  // Backward: after a dropout of p the kept outputs are ELU / (1 - p).
  const float p = 0.25f;
  Matrix out(1, std::int64_t(xs.size())), dy(1, std::int64_t(xs.size()), 1.f);
  for (std::size_t i = 0; i < xs.size(); ++i) out.data()[i] = y.data()[i] / (1.f - p);
  be.elu_backward(out.view(), dy.view(), 1.f - p);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], slope = x > 0 ? 1.0 : std::exp(x);
    ASSERT_NEAR(dy.data()[i], slope, 1e-6) << "x = " << x;
  }
}

TEST(CpuBackend, MatmulPrecisionNames) {
  EXPECT_EQ(parse_matmul_precision("bf16"), MatmulPrecision::kBf16);
  EXPECT_STREQ(to_string(parse_matmul_precision("tf32")), "tf32");
  EXPECT_THROW(parse_matmul_precision("fp16"), ParamError);
  // TF32 is a tensor-core format: the CPU says so instead of computing something else.
  EXPECT_THROW(cpu_backend().set_matmul_precision(MatmulPrecision::kTf32), SystemError);
  EXPECT_EQ(cpu_backend().matmul_precision(), MatmulPrecision::kFp32);
}

// The fused batch-norm activation ops give the bits of the ops they replace (which the base
// class composes), forward and backward, with and without dropout and row ids, at widths around
// the 64-column dropout block.
TEST(CpuBackend, FusedBatchNormActivationEqualsTheComposedOps) {
  Backend& be = cpu_backend();
  for (std::int64_t f : {1, 7, 63, 64, 65, 130, 256})
    for (float p : {0.f, 0.5f})
      for (bool ids : {false, true}) {
        const std::int64_t n = 97;
        const Matrix X = random_matrix(n, f, std::uint32_t(f));
        const Matrix G = random_matrix(4, f, std::uint32_t(f + 1));  // mean, inv_std, gamma, beta
        std::vector<float> stats[4];
        for (int i = 0; i < 4; ++i) stats[i].assign(G.data() + i * f, G.data() + (i + 1) * f);
        for (auto& v : stats[1]) v = std::abs(v) + 0.1f;
        std::vector<NodeId> rows(static_cast<std::size_t>(n));
        for (std::int64_t r = 0; r < n; ++r) rows[std::size_t(r)] = NodeId(1000 + 3 * r);
        const NodeId* row_ids = ids ? rows.data() : nullptr;
        const PhiloxKey key = philox_key(11, 5);
        const std::string what =
            "f=" + std::to_string(f) + " p=" + std::to_string(p) + (ids ? " ids" : "");
        Matrix h1 = X, y1(n, f), h2 = X, y2(n, f);
        const MatrixView hv1 = h1.view(), hv2 = h2.view();
        be.batch_norm_relu_dropout(h1.view(), stats[0].data(), stats[1].data(), stats[2].data(),
                                   stats[3].data(), &hv1, y1.view(), p, key, row_ids);
        be.Backend::batch_norm_relu_dropout(h2.view(), stats[0].data(), stats[1].data(),
                                            stats[2].data(), stats[3].data(), &hv2, y2.view(), p,
                                            key, row_ids);
        EXPECT_EQ(h1.storage(), h2.storage()) << what;
        EXPECT_EQ(y1.storage(), y2.storage()) << what;
        const Matrix dY = random_matrix(n, f, std::uint32_t(f + 2));
        Matrix d1 = dY, d2 = dY;
        std::vector<double> s1(2 * std::size_t(f)), s2(2 * std::size_t(f));
        be.batch_norm_relu_dropout_backward(h1.view(), stats[2].data(), stats[3].data(), p, key,
                                            row_ids, d1.view(), s1.data(), s1.data() + f);
        be.Backend::batch_norm_relu_dropout_backward(h1.view(), stats[2].data(), stats[3].data(), p,
                                                     key, row_ids, d2.view(), s2.data(),
                                                     s2.data() + f);
        EXPECT_EQ(d1.storage(), d2.storage()) << what;
        EXPECT_EQ(s1, s2) << what;
        // KeepBits: recorded by the first op, replayed by the later ones, same bits throughout;
        // the replay reads the cache (a flipped bit flips that element).
        const std::int64_t words = (f + 63) / 64;
        std::vector<std::uint64_t> cache(static_cast<std::size_t>(n * words));
        KeepBits bits{cache.data(), false};
        Matrix h3 = X, y3(n, f), y4(n, f), d3 = dY;
        const MatrixView hv3 = h3.view();
        be.batch_norm_relu_dropout(h3.view(), stats[0].data(), stats[1].data(), stats[2].data(),
                                   stats[3].data(), &hv3, y3.view(), p, key, row_ids, &bits);
        EXPECT_EQ(y3.storage(), y1.storage()) << what;
        EXPECT_EQ(bits.filled, p > 0) << what;
        if (p == 0) continue;
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t c = 0; c < f; ++c)
            ASSERT_EQ(bool(cache[std::size_t(r * words + c / 64)] >> (c % 64) & 1),
                      dropout_u16(key, ids ? std::uint64_t(rows[std::size_t(r)]) : std::uint64_t(r),
                                  std::uint32_t(c)) >= dropout_threshold(p))
                << what << " bit " << r << "," << c;
        be.batch_norm_relu_dropout_backward(h1.view(), stats[2].data(), stats[3].data(), p, key,
                                            row_ids, d3.view(), s2.data(), s2.data() + f, &bits);
        EXPECT_EQ(d3.storage(), d1.storage()) << what;
        EXPECT_EQ(s1, s2) << what;
        const std::int64_t r0 = n / 2, c0 = f - 1;
        cache[std::size_t(r0 * words + c0 / 64)] ^= std::uint64_t(1) << (c0 % 64);
        Matrix h4 = X;
        be.batch_norm_relu_dropout(h4.view(), stats[0].data(), stats[1].data(), stats[2].data(),
                                   stats[3].data(), nullptr, y4.view(), p, key, row_ids, &bits);
        for (std::int64_t i = 0; i < y4.size(); ++i) {
          if (i != r0 * f + c0) {
            ASSERT_EQ(y4.data()[i], y1.data()[i]) << what << " at " << i;
          } else if (y1.data()[i] != 0.f) {
            EXPECT_EQ(y4.data()[i], 0.f) << what;
          }
        }
        if (p > 0) {
          EXPECT_NE(d1.storage(), dY.storage()) << what;
        }
      }
}

TEST(CpuBackend, ElementwiseAndReductions) {
  Backend& be = cpu_backend();
  Matrix X = random_matrix(517, 33, 9);
  std::vector<float> b(33);
  for (int c = 0; c < 33; ++c) b[std::size_t(c)] = float(c);
  Matrix Y = X;
  be.add_bias(Y.view(), b.data());
  EXPECT_FLOAT_EQ(Y.at(10, 5), X.at(10, 5) + 5);
  std::vector<float> sums(33);
  be.column_sums(X.view(), sums.data());
  double s5 = 0;
  for (int r = 0; r < 517; ++r) s5 += X.at(r, 5);
  EXPECT_NEAR(sums[5], s5, 1e-4);
  Matrix R = X;
  be.relu(R.view());
  Matrix dR(517, 33, 1.f);
  be.relu_backward(R.view(), dR.view());
  for (std::int64_t i = 0; i < X.size(); ++i) {
    ASSERT_EQ(R.data()[i], std::max(X.data()[i], 0.f));
    ASSERT_EQ(dR.data()[i], X.data()[i] > 0 ? 1.f : 0.f);
  }
  std::vector<NodeId> idx = {5, 0, 5, 516};
  Matrix G(4, 33);
  be.gather_rows(X.view(), idx.data(), 4, G.view());
  EXPECT_EQ(G.at(2, 7), X.at(5, 7));
  Matrix S(517, 33);
  be.scatter_add_rows(G.view(), idx.data(), 4, S.view());
  EXPECT_FLOAT_EQ(S.at(5, 7), 2 * X.at(5, 7));
  EXPECT_EQ(S.at(1, 7), 0.f);
}

// Large enough for the threads to split the columns: every element is the float sum of its
// source rows in index order (repeats included), bit for bit, at one thread and at several.
TEST(CpuBackend, ScatterAddRowsSumsInRowOrderAtAnyThreadCount) {
  Backend& be = cpu_backend();
  const std::int64_t n = 4000, cols = 203, rows = 97;
  const Matrix X = random_matrix(n, cols, 21);
  std::vector<NodeId> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[std::size_t(i)] = NodeId((i * 37) % rows);
  Matrix want(rows, cols, 0.5f);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < cols; ++c) want.at(idx[std::size_t(i)], c) += X.at(i, c);
  const int t = omp_get_max_threads();
  for (int threads : {1, std::max(2, t)}) {
    omp_set_num_threads(threads);
    Matrix got(rows, cols, 0.5f);
    be.scatter_add_rows(X.view(), idx.data(), n, got.view());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * std::size_t(want.size())), 0)
        << threads << " threads";
  }
  omp_set_num_threads(t);
}

// smooth: one step of an exponential moving average, avg = g avg + (1 - g) x, per element (in
// double here: the float result is within a rounding or two); g = 0 takes x, aliasing is refused.
TEST(CpuBackend, SmoothIsOneStepOfAMovingAverage) {
  Backend& be = cpu_backend();
  const Matrix X = random_matrix(211, 19, 3), A0 = random_matrix(211, 19, 4);
  for (float g : {0.f, 0.5f, 0.9f, 0.99f}) {
    Matrix A = A0;
    be.smooth(X.view(), g, A.view());
    for (std::int64_t i = 0; i < X.size(); ++i) {
      const double want = double(g) * A0.data()[i] + (1.0 - double(g)) * X.data()[i];
      ASSERT_NEAR(A.data()[i], want, 3e-7 * (std::abs(want) + 1)) << "gamma " << g << " at " << i;
      if (g == 0.f) {
        ASSERT_EQ(A.data()[i], X.data()[i]);
      }
    }
  }
  Matrix A = A0;
  EXPECT_THROW(be.smooth(A.view(), 0.5f, A.view()), std::logic_error);
  EXPECT_THROW(be.smooth(X.view(), 0.5f, Matrix(3, 3).view()), std::logic_error);
}

// The bfloat16 nearest to finite x (|x| < 1e38), ties to even, from the two candidates around x
// compared in double: an oracle independent of the bit trick in bf16.h.
std::uint16_t nearest_bf16(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  const std::uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  float flo = 0, fhi = 0;
  std::memcpy(&flo, &lo, 4);
  std::memcpy(&fhi, &hi, 4);
  const double dlo = std::abs(double(x) - double(flo)), dhi = std::abs(double(fhi) - double(x));
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0)) return std::uint16_t(lo >> 16);
  return std::uint16_t(hi >> 16);
}

TEST(CpuBackend, PackBf16RoundsToNearestEvenAndUnpackIsExact) {
  Backend& be = cpu_backend();
  std::mt19937 g{41};
  std::normal_distribution<float> d;
  std::vector<float> x;
  x.reserve(10007 + 7);
  for (int i = 0; i < 10007; ++i) x.push_back(std::ldexp(d(g), int(i % 61) - 30));
  for (float t : {0.f, -0.f, 1.f + 1.f / 256, 1.f + 3.f / 256, -(1.f + 1.f / 256), 1e-40f, 3e38f})
    x.push_back(t);
  const auto n = std::int64_t(x.size());
  std::vector<std::uint16_t> h(x.size() + 1, 0xabcd);  // one sentinel past the end
  be.pack_bf16(x.data(), n, h.data());
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], nearest_bf16(x[i])) << "x = " << x[i];
  EXPECT_EQ(h.back(), 0xabcd) << "wrote past n";

  std::vector<float> y(x.size());
  be.unpack_bf16(h.data(), n, y.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &y[i], 4);
    ASSERT_EQ(bits, std::uint32_t(h[i]) << 16) << i;
  }
  // Special values: NaN stays NaN, infinities stay, and the largest floats round up to infinity.
  const float special[] = {std::nanf(""), -std::nanf(""), INFINITY, -INFINITY, 3.4028235e38f};
  std::uint16_t hs[5];
  float ys[5];
  be.pack_bf16(special, 5, hs);
  be.unpack_bf16(hs, 5, ys);
  EXPECT_TRUE(std::isnan(ys[0]));
  EXPECT_TRUE(std::isnan(ys[1]));
  EXPECT_EQ(ys[2], INFINITY);
  EXPECT_EQ(ys[3], -INFINITY);
  EXPECT_EQ(ys[4], INFINITY);
}

TEST(CpuBackend, DropoutMaskIsKeyedByGlobalRowAndColumn) {
  Backend& be = cpu_backend();
  const PhiloxKey key = philox_key(7, kStreamDropout + 3);
  for (std::int64_t f : {1, 7, 31, 32, 33, 63, 64, 65, 100, 257}) {
    Matrix Y(40, f, 1.f);
    std::vector<NodeId> ids(40);
    for (int i = 0; i < 40; ++i) ids[std::size_t(i)] = 1000 + 3 * i;
    be.dropout(Y.view(), 0.5f, key, ids.data());
    const Matrix M = ref::dropout_mask(40, f, 0.5f, key, ids.data());
    for (std::int64_t i = 0; i < Y.size(); ++i)
      ASSERT_EQ(Y.data()[i], M.data()[i] * 2.f) << "f=" << f;
    // The same global row on another "rank" (different local position) gets the same mask.
    Matrix one(1, f, 1.f);
    const NodeId id = ids[17];
    be.dropout(one.view(), 0.5f, key, &id);
    for (std::int64_t c = 0; c < f; ++c) ASSERT_EQ(one.at(0, c), Y.at(17, c));
  }
  Matrix big(1000, 100, 1.f);
  be.dropout(big.view(), 0.3f, key, nullptr);
  double kept = 0;
  for (float v : big.storage()) kept += v != 0;
  EXPECT_NEAR(kept / 100000.0, 0.7, 0.01);
}

TEST(CpuBackend, LossesMatchReference) {
  Backend& be = cpu_backend();
  const Matrix Z = random_matrix(20, 5, 11);
  std::vector<std::int32_t> y(20);
  for (int i = 0; i < 20; ++i) y[std::size_t(i)] = i % 7 == 3 ? -1 : i % 5;
  const std::vector<NodeId> rows = {0, 1, 3, 4, 9, 17};
  Matrix d(20, 5), dref;
  std::int64_t counted = 0;
  const double l = be.softmax_xent(Z.view(), y.data(), rows.data(), 6, 5.0, d.view(), &counted);
  EXPECT_NEAR(l, ref::softmax_xent(Z, y, rows, 5.0, &dref), 1e-5);
  EXPECT_EQ(counted, 4);  // rows 3 and 17 are unlabelled
  expect_close(d, dref, 1e-6, 1e-5, "xent grad");
  std::vector<std::int32_t> yb(100);
  for (int i = 0; i < 100; ++i) yb[std::size_t(i)] = i % 9 == 0 ? -1 : (i * 7) % 3 == 0;
  const double lb = be.bce_logits(Z.view(), yb.data(), rows.data(), 6, 3.0, d.view(), &counted);
  EXPECT_NEAR(lb, ref::bce_logits(Z, yb, rows, 3.0, &dref), 1e-5);
  expect_close(d, dref, 1e-6, 1e-5, "bce grad");
}

TEST(CpuBackend, BatchNormMatchesReference) {
  Backend& be = cpu_backend();
  const Matrix X = random_matrix(300, 9, 12);
  std::vector<float> gamma(9), beta(9);
  for (int c = 0; c < 9; ++c)
    gamma[std::size_t(c)] = 1 + 0.1f * float(c), beta[std::size_t(c)] = -0.2f * float(c);
  std::vector<double> s(9), sq(9);
  be.column_moments(X.view(), s.data(), sq.data());
  std::vector<float> mean(9), inv(9);
  for (int c = 0; c < 9; ++c) {
    mean[std::size_t(c)] = float(s[std::size_t(c)] / 300);
    inv[std::size_t(c)] =
        float(1 / std::sqrt(sq[std::size_t(c)] / 300 -
                            double(mean[std::size_t(c)]) * mean[std::size_t(c)] + 1e-5));
  }
  Matrix Y(300, 9), xhat(300, 9), xhat_ref;
  const MatrixView xv = xhat.view();
  be.batch_norm_apply(X.view(), mean.data(), inv.data(), gamma.data(), beta.data(), &xv, Y.view());
  expect_close(Y, ref::batch_norm(X, gamma, beta, 1e-5f, &xhat_ref), 1e-4, 1e-4, "bn");

  // The model keeps x-hat only: the output rebuilt from it (mean 0, inv_std 1) must be Y bit for
  // bit, and ReLU's mask taken from x-hat must be the mask on Y.
  const std::vector<float> zeros(9, 0.f), ones(9, 1.f);
  Matrix rebuilt(300, 9);
  be.batch_norm_apply(xhat.view(), zeros.data(), ones.data(), gamma.data(), beta.data(), nullptr,
                      rebuilt.view());
  ASSERT_EQ(rebuilt.storage(), Y.storage());
  Matrix R = Y, dR(300, 9, 1.f), dM(300, 9, 1.f);
  be.relu(R.view());
  be.relu_backward(R.view(), dR.view());
  be.bn_relu_backward(xhat.view(), gamma.data(), beta.data(), dM.view());
  ASSERT_EQ(dM.storage(), dR.storage());
  std::int64_t active = 0;
  for (float v : dM.storage()) active += v != 0.f;
  EXPECT_GT(active, 300 * 9 / 4);  // both signs present: the mask is not trivially all or nothing
  EXPECT_LT(active, 300 * 9 * 3 / 4);
}

TEST(CpuBackend, AdamMatchesTheTorchUpdate) {
  Backend& be = cpu_backend();
  float p = 1.f, g = 0.5f, m = 0, v = 0;
  AdamStep s;
  s.lr = 0.1f;
  s.weight_decay = 0.01f;
  // Step 1 by hand (torch.optim.Adam): g' = g + wd p = 0.51; m = 0.051; v = 0.00026010;
  // mhat = 0.51, vhat = 0.2601; p -= 0.1 * 0.51 / (0.51 + 1e-8) = 0.1.
  be.adam(&p, &g, &m, &v, 1, s);
  EXPECT_NEAR(p, 0.9f, 1e-6);
  EXPECT_NEAR(m, 0.051f, 1e-7);
}

// An element's update does not depend on where it sits (vector lanes or the scalar tail) nor on
// the thread count: the same inputs at other offsets and thread counts give the same bits, and
// each matches the torch update within float rounding.
TEST(CpuBackend, AdamGivesEveryElementTheSameBitsWhereverItIs) {
  Backend& be = cpu_backend();
  const std::int64_t n = 40003;
  const Matrix P0 = random_matrix(1, n, 31), G = random_matrix(1, n, 32),
               M0 = random_matrix(1, n, 33);
  Matrix V0 = random_matrix(1, n, 34);
  for (float& x : V0.storage()) x = x * x;
  AdamStep s;
  s.lr = 0.01f;
  s.weight_decay = 0.001f;
  s.step = 3;
  auto run = [&](std::int64_t offset, int threads) {
    std::vector<float> p(P0.storage().begin() + offset, P0.storage().end()),
        m(M0.storage().begin() + offset, M0.storage().end()),
        v(V0.storage().begin() + offset, V0.storage().end());
    const int t = omp_get_max_threads();
    omp_set_num_threads(threads);
    be.adam(p.data(), G.data() + offset, m.data(), v.data(), n - offset, s);
    omp_set_num_threads(t);
    return p;
  };
  const std::vector<float> base = run(0, 1);
  for (std::int64_t offset : {0, 1, 3, 7})
    for (int threads : {1, 2, 3}) {
      const std::vector<float> got = run(offset, threads);
      ASSERT_EQ(std::memcmp(got.data(), base.data() + offset, sizeof(float) * got.size()), 0)
          << "offset " << offset << ", " << threads << " threads";
    }
  for (std::int64_t i = 0; i + 5 <= n; i += 16) {  // 5 elements alone: all on the scalar path
    float p[5], m[5], v[5];
    std::copy_n(P0.data() + i, 5, p);
    std::copy_n(M0.data() + i, 5, m);
    std::copy_n(V0.data() + i, 5, v);
    be.adam(p, G.data() + i, m, v, 5, s);
    for (std::int64_t j = 0; j < 5; ++j)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(p[j]),
                std::bit_cast<std::uint32_t>(base[std::size_t(i + j)]))
          << "element " << i + j;
  }
  const double bc1 = 1 - std::pow(0.9, 3), bc2 = 1 - std::pow(0.999, 3);
  for (std::int64_t i = 0; i < n; i += 97) {
    const double g = double(G.data()[i]) + 0.001 * P0.data()[i];
    const double m = 0.9 * M0.data()[i] + 0.1 * g, v = 0.999 * V0.data()[i] + 0.001 * g * g;
    const double want = P0.data()[i] - 0.01 / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + 1e-8);
    ASSERT_NEAR(base[std::size_t(i)], want, 1e-5 * (1 + std::abs(want))) << i;
  }
}

// adam_all is adam on each tensor in turn, bit for bit, at any thread count: tensors of sizes
// around the vector width and the parallel threshold, empty ones, and a set small enough in all
// to stay on one thread.
TEST(CpuBackend, AdamAllIsAdamOnEachTensorInTurn) {
  Backend& be = cpu_backend();
  const std::vector<std::vector<std::int64_t>> sets = {
      {0, 1, 7, 8, 9, 33, 16385, 40003, 0, 5}, {3, 17, 100}, {20000}, {}};
  AdamStep s;
  s.lr = 0.01f;
  s.weight_decay = 0.001f;
  s.step = 4;
  for (const auto& sizes : sets)
    for (int threads : {1, 2, 3}) {
      std::vector<Matrix> p, g, m, v;
      std::uint32_t seed = 50;
      for (std::int64_t n : sizes) {
        p.push_back(random_matrix(1, n, seed++));
        g.push_back(random_matrix(1, n, seed++));
        m.push_back(random_matrix(1, n, seed++));
        v.push_back(random_matrix(1, n, seed++));
        for (float& x : v.back().storage()) x = x * x;
      }
      std::vector<Matrix> rp = p, rm = m, rv = v;
      std::vector<AdamTensor> t;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        be.adam(rp[i].data(), g[i].data(), rm[i].data(), rv[i].data(), sizes[i], s);
        t.push_back({p[i].data(), g[i].data(), m[i].data(), v[i].data(), sizes[i]});
      }
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      be.adam_all(t.data(), t.size(), s);
      omp_set_num_threads(saved);
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::string w = "tensor " + std::to_string(i) + " (" + std::to_string(sizes[i]) +
                              "), " + std::to_string(threads) + " threads";
        const auto bytes = sizeof(float) * std::size_t(sizes[i]);
        if (bytes == 0) continue;
        EXPECT_EQ(std::memcmp(p[i].data(), rp[i].data(), bytes), 0) << "p of " << w;
        EXPECT_EQ(std::memcmp(m[i].data(), rm[i].data(), bytes), 0) << "m of " << w;
        EXPECT_EQ(std::memcmp(v[i].data(), rv[i].data(), bytes), 0) << "v of " << w;
      }
    }
}

TEST(CpuBackend, AdamAllChecksItsSizes) {
  float x = 0;
  AdamTensor t{&x, &x, &x, &x, -1};
  EXPECT_THROW(cpu_backend().adam_all(&t, 1, AdamStep{}), std::logic_error);
}

TEST(Matrix, AMovedFromMatrixIsEmptyAndReusable) {
  Matrix a(3, 4, 2.f);
  Matrix b(std::move(a));
  EXPECT_EQ(b.rows(), 3);
  EXPECT_EQ(b.at(2, 3), 2.f);
  // NOLINTNEXTLINE(bugprone-use-after-move): the state after a move is the contract
  EXPECT_EQ(a.rows(), 0);
  EXPECT_EQ(a.size(), 0);
  a.resize(2, 2);  // reuse allocates again
  a.fill(5.f);
  EXPECT_EQ(a.at(1, 1), 5.f);
  Matrix c;
  c = std::move(b);
  EXPECT_EQ(c.size(), 12);
  EXPECT_EQ(b.size(), 0);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(b.storage().empty());
}

TEST(Metrics, AccuracyMasksMissingLabels) {
  Matrix Z(4, 3);
  Z.at(0, 2) = 1;  // predicts 2
  Z.at(1, 0) = 1;  // predicts 0
  Z.at(2, 1) = 1;
  Z.at(3, 1) = 1;
  const std::int32_t y[4] = {2, 1, -1, 1};
  const NodeId rows[4] = {0, 1, 2, 3};
  const Counts c = accuracy_counts(Z.view(), y, rows, 4);
  EXPECT_EQ(c.total, 3);
  EXPECT_EQ(c.correct, 2);
}

TEST(Metrics, RocAucWithTiesAndSkippedTasks) {
  // Task 0: scores 0.1 0.4 0.35 0.8 for labels 0 0 1 1 -> AUC 0.75 (sklearn's classic example).
  // Task 1: all labels 1 -> skipped. Task 2: a tie between a positive and a negative -> 0.5 each.
  const float scores[] = {0.1f, 0.f, 0.5f, 0.4f, 0.f, 0.5f, 0.35f, 0.f, 0.2f, 0.8f, 0.f, 0.9f};
  const std::int32_t labels[] = {0, 1, 1, 0, 1, 0, 1, 1, -1, 1, 1, 1};
  // Task 2 rows: (0.5,1) (0.5,0) (0.9,1); pairs pos>neg: 0.9>0.5 =1, 0.5 vs 0.5 = 0.5 -> 0.75.
  EXPECT_NEAR(rocauc(scores, labels, 4, 3), (0.75 + 0.75) / 2, 1e-12);
}

}  // namespace
}  // namespace halo

namespace halo {
namespace {

// Finite differences per op, in double through the op's own float kernels: perturb one input,
// re-run the op, compare the change of a fixed linear functional with the op's backward.
TEST(CpuBackend, OpGradientsMatchFiniteDifferences) {
  Backend& be = cpu_backend();
  const Matrix X0 = random_matrix(9, 5, 21), R = random_matrix(9, 5, 22);  // R: d(loss)/d(output)
  auto functional = [&](const Matrix& Y) {
    double s = 0;
    for (std::int64_t i = 0; i < Y.size(); ++i) s += double(Y.data()[i]) * R.data()[i];
    return s;
  };
  // Batch norm (training statistics) as a function of X.
  const std::vector<float> gamma = {1.f, 0.5f, 2.f, -1.f, 0.3f},
                           beta = {0.1f, 0.f, -0.2f, 0.3f, 0.f};
  auto bn = [&](const Matrix& X, Matrix* xhat, std::vector<float>* inv) {
    std::vector<double> s(5), sq(5);
    be.column_moments(X.view(), s.data(), sq.data());
    std::vector<float> mean(5);
    inv->resize(5);
    for (int c = 0; c < 5; ++c) {
      mean[std::size_t(c)] = float(s[std::size_t(c)] / 9);
      (*inv)[std::size_t(c)] =
          float(1 / std::sqrt(sq[std::size_t(c)] / 9 -
                              double(mean[std::size_t(c)]) * mean[std::size_t(c)] + 1e-5));
    }
    Matrix Y(9, 5);
    *xhat = Matrix(9, 5);
    const MatrixView xv = xhat->view();
    be.batch_norm_apply(X.view(), mean.data(), inv->data(), gamma.data(), beta.data(), &xv,
                        Y.view());
    return Y;
  };
  Matrix xhat;
  std::vector<float> inv;
  bn(X0, &xhat, &inv);
  std::vector<double> s(5), sx(5);
  be.batch_norm_grad_sums(R.view(), xhat.view(), s.data(), sx.data());
  std::vector<float> mdy(5), mdyx(5);
  for (int c = 0; c < 5; ++c)
    mdy[std::size_t(c)] = float(s[std::size_t(c)] / 9),
    mdyx[std::size_t(c)] = float(sx[std::size_t(c)] / 9);
  Matrix dX(9, 5);
  be.batch_norm_backward(R.view(), xhat.view(), gamma.data(), inv.data(), mdy.data(), mdyx.data(),
                         dX.view());
  for (std::int64_t i = 0; i < X0.size(); ++i) {
    Matrix up = X0, down = X0;
    up.data()[i] += 1e-2f;
    down.data()[i] -= 1e-2f;
    Matrix h;
    std::vector<float> v;
    const double numeric = (functional(bn(up, &h, &v)) - functional(bn(down, &h, &v))) / 2e-2;
    ASSERT_NEAR(dX.data()[i], numeric, 2e-3 + 2e-2 * std::abs(numeric))
        << "batch norm, element " << i;
  }
  // Softmax cross-entropy and BCE as functions of the logits.
  std::vector<std::int32_t> y(9 * 5);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 5 == 3 ? -1 : (i * 7) % 2);
  std::vector<std::int32_t> cls(9);
  for (int i = 0; i < 9; ++i) cls[std::size_t(i)] = i % 5;
  const std::vector<NodeId> rows = {0, 2, 3, 7, 8};
  for (int which = 0; which < 2; ++which) {
    auto loss = [&](const Matrix& Z, Matrix* d) {
      *d = Matrix(9, 5);
      return which == 0
                 ? be.softmax_xent(Z.view(), cls.data(), rows.data(), 5, 5.0, d->view(), nullptr) /
                       5.0
                 : be.bce_logits(Z.view(), y.data(), rows.data(), 5, 5.0, d->view(), nullptr) / 5.0;
    };
    Matrix d, unused;
    loss(X0, &d);
    for (std::int64_t i = 0; i < X0.size(); ++i) {
      Matrix up = X0, down = X0;
      up.data()[i] += 1e-2f;
      down.data()[i] -= 1e-2f;
      const double numeric = (loss(up, &unused) - loss(down, &unused)) / 2e-2;
      ASSERT_NEAR(d.data()[i], numeric, 1e-4 + 1e-2 * std::abs(numeric))
          << (which ? "bce" : "xent") << " " << i;
    }
  }
}

}  // namespace
}  // namespace halo

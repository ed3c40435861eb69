// The CUDA backend against the CPU backend, op by op, on the same random inputs: odd widths
// (1, 7, 33, 257), skewed sparse operators with empty rows, a row slice of a CSR. Element-wise
// results within atol + rtol |ref|; dropout masks, relu, gather, copy, fill and scatter-add
// (same additions in the same order) bitwise. GPU ops are also run twice where they reduce, to
// check they are deterministic. Without a GPU every test here skips with cuda_devices()'s reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "halo/gnn/attention.h"
#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/graph_op.h"
#include "halo/gnn/op_profile.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

const std::int64_t kWidths[] = {1, 7, 33, 257};
// SpMM widths: 1 and odd widths take halo's own kernel, multiples of 4 cuSPARSE (spmm_policy.h).
const std::int64_t kSpmmWidths[] = {1, 7, 8, 33, 64, 256};

// The label the SpMM counts give a call at width f when cuSPARSE `kernel` was asked for.
std::string spmm_label(const std::string& kernel, std::int64_t f) {
  if (f == 1) return "own (width 1)";
  if (f % 4 != 0) return "own (width not a multiple of 4: rows not 16-byte aligned)";
  return kernel;
}

// A device copy of a host array (RAII).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host)
      : n_(host.size()), p_(static_cast<T*>(device_alloc(sizeof(T) * host.size()))) {
    device_copy(p_, host.data(), sizeof(T) * n_, CopyKind::kHostToDevice);
  }
  ~DeviceArray() { device_free(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  std::vector<T> to_host() const {
    std::vector<T> out(n_);
    device_copy(out.data(), p_, sizeof(T) * n_, CopyKind::kDeviceToHost);
    return out;
  }

 private:
  std::size_t n_;
  T* p_;
};

std::vector<float> randn(std::int64_t n, std::uint32_t seed, float mean = 0.f, float sd = 1.f) {
  std::mt19937 g{seed};
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

Matrix host_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  Matrix m(rows, cols);
  m.storage() = randn(rows * cols, seed);
  return m;
}

Matrix upload(const Matrix& h) {
  Matrix d(h.rows(), h.cols(), 0.f, Device::kCuda);
  d.assign(h.storage());
  return d;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - double(ref[i])) <= atol + rtol * std::abs(double(ref[i])))) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

void expect_close(const std::vector<double>& got, const std::vector<double>& ref, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= atol + rtol * std::abs(ref[i]))) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

// Bitwise equality (memcmp, so -0 vs 0 and NaN payloads count too).
void expect_bitwise(const std::vector<float>& got, const std::vector<float>& ref,
                    const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): bitwise on purpose (see above)
    if (std::memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

// rows x cols CSR with skewed degrees (most rows short, a few near-dense), every fourth row and
// the last one empty, sorted distinct columns, random values.
SparseMatrix skewed_sparse(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 g{seed};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<NodeId> col(0, NodeId(cols - 1));
  std::normal_distribution<float> val;
  SparseMatrix a;
  a.rows = rows;
  a.cols = cols;
  a.offsets.push_back(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<NodeId> cs;
    if (r % 4 != 0 && r != rows - 1) {
      const auto deg = std::int64_t(std::pow(u(g), 6.0) * double(cols)) + 1;
      for (std::int64_t k = 0; k < deg; ++k) cs.push_back(col(g));
      std::sort(cs.begin(), cs.end());
      cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
    }
    for (NodeId c : cs) {
      a.indices.push_back(c);
      a.values.push_back(val(g));
    }
    a.offsets.push_back(EdgeId(a.indices.size()));
  }
  return a;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDevices d = cuda_devices();
    if (d.count == 0) GTEST_SKIP() << d.reason;
    // A cuSPARSE decline fails the test instead of passing on halo's own kernel.
    ::setenv("HALO_CUDA_SPMM_STRICT", "1", 1);
    cuda_backend().take_spmm_kernel_counts();
  }
  void TearDown() override { ::unsetenv("HALO_CUDA_SPMM_STRICT"); }
  Backend& cpu = cpu_backend();
};

TEST_F(CudaBackendTest, NameAndDevice) {
  Backend& gpu = cuda_backend();
  EXPECT_EQ(gpu.device(), Device::kCuda);
  EXPECT_STREQ(gpu.name(), "cuda");
  EXPECT_EQ(&gpu, &cuda_backend());
}

TEST_F(CudaBackendTest, SpmmMatchesCpuOnSkewedOperatorsAndIsDeterministic) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(301, 257, 11);
  const SparseMatrix dA = A.to_device(Device::kCuda);
  for (std::int64_t f : kSpmmWidths) {
    const std::string what = "spmm f=" + std::to_string(f);
    const Matrix X = host_matrix(A.cols, f, std::uint32_t(f));
    const Matrix dX = upload(X);
    Matrix Y(A.rows, f);
    cpu.spmm(A.view(), X.view(), Y.view());
    Matrix dY(A.rows, f, NAN, Device::kCuda);  // overwritten (beta 0), including empty rows
    gpu.spmm(dA.view(), dX.view(), dY.view());
    const std::vector<float> first = dY.to_host();
    expect_close(first, Y.storage(), 1e-4, 1e-4, what);
    gpu.fill(dY.view(), 7.f);
    gpu.spmm(dA.view(), dX.view(), dY.view());  // the cached plan
    expect_bitwise(dY.to_host(), first, what + " (second run)");
    // The cached plan with other dense buffers (two layers of one width share a plan).
    const Matrix X2 = host_matrix(A.cols, f, std::uint32_t(f + 1000));
    const Matrix dX2 = upload(X2);
    Matrix Y2(A.rows, f), dY2(A.rows, f, NAN, Device::kCuda);
    cpu.spmm(A.view(), X2.view(), Y2.view());
    gpu.spmm(dA.view(), dX2.view(), dY2.view());
    expect_close(dY2.to_host(), Y2.storage(), 1e-4, 1e-4, what + " (other buffers)");
    // The kernel that ran, as the counts report it: cuSPARSE's ALG3 wherever it may run.
    const std::map<std::string, std::int64_t> want{{spmm_label("alg3", f), 3}};
    EXPECT_EQ(gpu.take_spmm_kernel_counts(), want) << what;
  }
}

// The kernels HALO_CUDA_SPMM picks instead of cuSPARSE's ALG3, each on a fresh upload, every
// width: halo's own kernel (cuSPARSE's stand-in when it declines ALG3; deterministic) and
// cuSPARSE's ALG2 (opt-in, not bit-reproducible) give the CPU's sums; a bad name is refused.
// Sets HALO_CUDA_SPMM for one scope; unset again however the scope ends, so a failing test
// cannot leave the next ones on another kernel.
struct SpmmKernelChoice {
  explicit SpmmKernelChoice(const std::string& kernel) {
    ::setenv("HALO_CUDA_SPMM", kernel.c_str(), 1);
  }
  ~SpmmKernelChoice() { ::unsetenv("HALO_CUDA_SPMM"); }
  SpmmKernelChoice(const SpmmKernelChoice&) = delete;
  SpmmKernelChoice& operator=(const SpmmKernelChoice&) = delete;
};

TEST_F(CudaBackendTest, SpmmKernelChoicesMatchCpu) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(301, 257, 13);
  for (const std::string kernel : {"own", "alg2"}) {
    const SpmmKernelChoice choice(kernel);
    // A new storage id: plans are made (and the variable read) anew.
    const SparseMatrix dA = A.to_device(Device::kCuda);
    for (std::int64_t f : kSpmmWidths) {
      const std::string what = kernel + " spmm f=" + std::to_string(f);
      const Matrix X = host_matrix(A.cols, f, std::uint32_t(f + 7));
      const Matrix dX = upload(X);
      Matrix Y(A.rows, f), dY(A.rows, f, NAN, Device::kCuda);
      cpu.spmm(A.view(), X.view(), Y.view());
      gpu.spmm(dA.view(), dX.view(), dY.view());
      const std::vector<float> first = dY.to_host();
      expect_close(first, Y.storage(), 1e-4, 1e-4, what);
      if (kernel == "own") {
        gpu.spmm(dA.view(), dX.view(), dY.view());
        expect_bitwise(dY.to_host(), first, what + " (second run)");
      }
      const std::map<std::string, std::int64_t> want{
          {kernel == "own" ? "own" : spmm_label(kernel, f), kernel == "own" ? 2 : 1}};
      EXPECT_EQ(gpu.take_spmm_kernel_counts(), want) << what;
    }
  }
  const SpmmKernelChoice bad("fastest");
  const SparseMatrix dB = A.to_device(Device::kCuda);
  const Matrix dX = upload(host_matrix(A.cols, 7, 3));
  Matrix dY(A.rows, 7, 0.f, Device::kCuda);
  EXPECT_THROW(gpu.spmm(dB.view(), dX.view(), dY.view()), ParamError);
}

// An operator freed and another of the same shape uploaded (cudaMalloc readily hands back the
// same addresses) must not meet the first one's cached plan.
TEST_F(CudaBackendTest, SpmmPlansDoNotOutliveTheirOperator) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A1 = skewed_sparse(200, 150, 21), A2 = skewed_sparse(200, 150, 22);
  ASSERT_NE(A1.offsets.back(), A2.offsets.back());
  const Matrix X = host_matrix(150, 33, 5);
  const Matrix dX = upload(X);
  for (const SparseMatrix* A : {&A1, &A2}) {
    const SparseMatrix dA = A->to_device(Device::kCuda);
    Matrix Y(200, 33), dY(200, 33, NAN, Device::kCuda);
    cpu.spmm(A->view(), X.view(), Y.view());
    gpu.spmm(dA.view(), dX.view(), dY.view());
    expect_close(dY.to_host(), Y.storage(), 1e-4, 1e-4,
                 A == &A1 ? "first operator" : "second operator");
  }
}

TEST_F(CudaBackendTest, SpmmOnARowSliceOfACsr) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(300, 100, 12);
  const SparseMatrix dA = A.to_device(Device::kCuda);
  for (std::int64_t f : {std::int64_t(7), std::int64_t(8), std::int64_t(32), std::int64_t(33)}) {
    const Matrix X = host_matrix(A.cols, f, 99);
    const Matrix dX = upload(X);
    for (auto [r0, r1] : {std::pair<std::int64_t, std::int64_t>{101, 250}, {0, 37}, {263, 300}}) {
      const std::string what = "spmm slice [" + std::to_string(r0) + "," + std::to_string(r1) +
                               ") f=" + std::to_string(f);
      const SparseView hs{r1 - r0, A.cols, A.offsets.data() + r0, A.indices.data(),
                          A.values.data()};
      const SparseView dv = dA.view();
      const SparseView ds{r1 - r0, A.cols, dv.offsets + r0, dv.indices, dv.values, dv.storage_id};
      Matrix Y(r1 - r0, f);
      cpu.spmm(hs, X.view(), Y.view());
      // The output is a row range of a bigger matrix at an odd row (as the model's inner and
      // boundary rows are): only 4-byte aligned, and its neighbours must stay untouched.
      Matrix dBig(r1 - r0 + 4, f, NAN, Device::kCuda);
      gpu.spmm(ds, dX.view(), dBig.view().rows_range(3, 3 + r1 - r0));
      const std::vector<float> big = dBig.to_host();
      const std::vector<float> got(big.begin() + 3 * f, big.begin() + (3 + r1 - r0) * f);
      expect_close(got, Y.storage(), 1e-4, 1e-4, what);
      for (std::int64_t i = 0; i < 3 * f; ++i)
        ASSERT_TRUE(std::isnan(big[std::size_t(i)])) << what << " row before";
      for (std::int64_t i = (3 + r1 - r0) * f; i < std::int64_t(big.size()); ++i)
        ASSERT_TRUE(std::isnan(big[std::size_t(i)])) << what << " row after";
      // Slices whose arrays start unaligned (offsets[r0] % 4 != 0) still reach cuSPARSE
      // (through an aligned copy) at widths 8 and 32.
      const std::map<std::string, std::int64_t> want{{spmm_label("alg3", f), 1}};
      EXPECT_EQ(gpu.take_spmm_kernel_counts(), want)
          << what << ", offsets[r0] % 4 = " << A.offsets[std::size_t(r0)] % 4;
    }
  }
}

// Training alternates widths on one operator (forward at one width, backward at another, every
// epoch): each width keeps its own plan, so width 8 after width 64 gives width 8's first bits,
// and a fresh upload's.
TEST_F(CudaBackendTest, SpmmWidthsAlternatingOnOneOperatorKeepTheirPlans) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(500, 400, 51);
  const SparseMatrix dA = A.to_device(Device::kCuda), fresh = A.to_device(Device::kCuda);
  const Matrix dX8 = upload(host_matrix(A.cols, 8, 1)), dX64 = upload(host_matrix(A.cols, 64, 2));
  Matrix dY8(A.rows, 8, NAN, Device::kCuda), dY64(A.rows, 64, NAN, Device::kCuda);
  gpu.spmm(dA.view(), dX8.view(), dY8.view());
  const std::vector<float> first = dY8.to_host();
  for (int round = 0; round < 3; ++round) {
    gpu.spmm(dA.view(), dX64.view(), dY64.view());
    gpu.fill(dY8.view(), NAN);
    gpu.spmm(dA.view(), dX8.view(), dY8.view());
    expect_bitwise(dY8.to_host(), first, "width 8 after width 64, round " + std::to_string(round));
  }
  gpu.fill(dY8.view(), NAN);
  gpu.spmm(fresh.view(), dX8.view(), dY8.view());
  expect_bitwise(dY8.to_host(), first, "a fresh upload at width 8");
  const std::map<std::string, std::int64_t> want{{"alg3", 8}};
  EXPECT_EQ(gpu.take_spmm_kernel_counts(), want);
}

// Dense operands that start off 16-byte alignment (a view one float into a buffer) run on the
// own kernel for that call, with the CPU's result, and the plan keeps cuSPARSE for the next.
TEST_F(CudaBackendTest, SpmmOnUnalignedDenseOperandsRunsTheOwnKernel) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(150, 90, 41);
  const SparseMatrix dA = A.to_device(Device::kCuda);
  const std::int64_t f = 8;
  const Matrix X = host_matrix(A.cols, f, 17);
  Matrix Y(A.rows, f);
  cpu.spmm(A.view(), X.view(), Y.view());
  Matrix dXbuf(A.cols * f + 1, 1, 0.f, Device::kCuda), dYbuf(A.rows * f + 1, 1, NAN, Device::kCuda);
  std::vector<float> xs(std::size_t(A.cols * f + 1), 0.f);
  std::copy(X.storage().begin(), X.storage().end(), xs.begin() + 1);
  dXbuf.assign(xs);
  const MatrixView dX{dXbuf.data() + 1, A.cols, f, Device::kCuda},
      dY{dYbuf.data() + 1, A.rows, f, Device::kCuda};
  gpu.spmm(dA.view(), dX, dY);
  const std::vector<float> ys = dYbuf.to_host();
  expect_close(std::vector<float>(ys.begin() + 1, ys.end()), Y.storage(), 1e-4, 1e-4,
               "unaligned operands");
  const Matrix dXa = upload(X);
  Matrix dYa(A.rows, f, NAN, Device::kCuda);
  gpu.spmm(dA.view(), dXa.view(), dYa.view());
  expect_close(dYa.to_host(), Y.storage(), 1e-4, 1e-4, "aligned operands");
  const std::map<std::string, std::int64_t> want{{"own (unaligned dense operand)", 1}, {"alg3", 1}};
  EXPECT_EQ(gpu.take_spmm_kernel_counts(), want);
}

// --profile on the GPU books an op's work, not its launch: a GEMM that runs for milliseconds is
// booked at about its synchronised wall time (a launch takes microseconds).
TEST_F(CudaBackendTest, ProfileTimesTheWorkNotTheLaunch) {
  Backend& gpu = cuda_backend();
  const std::int64_t n = 4096;
  const Matrix A(n, n, 1.f, Device::kCuda), B(n, n, 0.5f, Device::kCuda);
  Matrix C(n, n, 0.f, Device::kCuda);
  gpu.gemm(false, false, 1.f, A.view(), B.view(), 0.f, C.view());  // warm up
  device_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  gpu.gemm(false, false, 1.f, A.view(), B.view(), 0.f, C.view());
  device_synchronize();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  OpProfile profile;
  {
    const ProfileScope scope(profile);
    gpu.gemm(false, false, 1.f, A.view(), B.view(), 0.f, C.view());
  }
  const double booked = profile.totals().at("gemm").seconds;
  EXPECT_GE(booked, 0.5 * wall) << "booked " << booked << " s, the GEMM takes " << wall << " s";
}

// What the plans of an operator hold on the GPU (rebased offsets, aligned copies, cuSPARSE's
// buffers, at several widths and row slices) is freed with the operator.
TEST_F(CudaBackendTest, SpmmStateIsFreedWithItsOperator) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(400, 300, 43);
  std::vector<Matrix> xs, ys;
  for (std::int64_t f : kSpmmWidths) {
    xs.push_back(upload(host_matrix(A.cols, f, 5)));
    ys.emplace_back(A.rows, f, 0.f, Device::kCuda);
  }
  gpu.take_spmm_kernel_counts();
  const std::size_t before = device_bytes_now();
  {
    const SparseMatrix dA = A.to_device(Device::kCuda);
    const std::size_t uploaded = device_bytes_now();
    const SparseView v = dA.view();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      gpu.spmm(v, xs[i].view(), ys[i].view());
      const SparseView slice{A.rows - 101, A.cols,   v.offsets + 101,
                             v.indices,    v.values, v.storage_id};
      gpu.spmm(slice, xs[i].view(), ys[i].view().rows_range(0, A.rows - 101));
    }
    EXPECT_GT(device_bytes_now(), uploaded);  // the plans hold memory
  }
  EXPECT_EQ(device_bytes_now(), before);
}

TEST_F(CudaBackendTest, SpmmWithoutNonzerosZeroesTheOutput) {
  Backend& gpu = cuda_backend();
  SparseMatrix A;
  A.rows = 20;
  A.cols = 10;
  A.offsets.assign(21, 0);
  const SparseMatrix dA = A.to_device(Device::kCuda);
  const Matrix dX = upload(host_matrix(10, 7, 5));
  Matrix dY(20, 7, 3.f, Device::kCuda);
  gpu.spmm(dA.view(), dX.view(), dY.view());
  expect_bitwise(dY.to_host(), std::vector<float>(140, 0.f), "empty spmm");
}

// SparseMatrix on the GPU: every copy to the device (to_device, or a copy of a device matrix) is
// a new storage with its own storage_id, which the SpMM plan cache keys on; each gives the CPU's
// product; a move hands the storage (and id) over and leaves the source empty; copied back to
// the host the arrays are the original's.
TEST_F(CudaBackendTest, SparseMatrixUploadsHaveTheirOwnStorageIds) {
  Backend& gpu = cuda_backend();
  const SparseMatrix A = skewed_sparse(120, 90, 31);
  const SparseMatrix d1 = A.to_device(Device::kCuda), d2 = A.to_device(Device::kCuda);
  SparseMatrix d3 = d1;  // a deep copy on the device
  const SparseView v1 = d1.view(), v2 = d2.view(), v3 = d3.view();
  EXPECT_EQ(d1.device(), Device::kCuda);
  EXPECT_EQ(d3.device(), Device::kCuda);
  EXPECT_EQ(A.view().storage_id, 0u);
  for (const SparseView* v : {&v1, &v2, &v3}) {
    EXPECT_NE(v->storage_id, 0u);
    EXPECT_EQ(v->rows, A.rows);
    EXPECT_EQ(v->cols, A.cols);
  }
  EXPECT_NE(v1.storage_id, v2.storage_id);
  EXPECT_NE(v1.storage_id, v3.storage_id);
  EXPECT_NE(v2.storage_id, v3.storage_id);
  EXPECT_NE(v1.offsets, v3.offsets);
  EXPECT_TRUE(d1.offsets.empty() && d1.indices.empty() && d1.values.empty());  // host-only
  const Matrix X = host_matrix(A.cols, 33, 8);
  const Matrix dX = upload(X);
  Matrix Y(A.rows, 33);
  cpu.spmm(A.view(), X.view(), Y.view());
  for (const SparseView* v : {&v1, &v2, &v3}) {
    Matrix dY(A.rows, 33, NAN, Device::kCuda);
    gpu.spmm(*v, dX.view(), dY.view());
    expect_close(dY.to_host(), Y.storage(), 1e-4, 1e-4, "upload " + std::to_string(v->storage_id));
  }
  const SparseMatrix moved = std::move(d3);
  EXPECT_EQ(moved.device(), Device::kCuda);
  EXPECT_EQ(moved.view().storage_id, v3.storage_id);
  EXPECT_EQ(moved.view().offsets, v3.offsets);
  // NOLINTNEXTLINE(bugprone-use-after-move): the state after a move is the contract
  const SparseView gone = d3.view();
  EXPECT_EQ(d3.device(), Device::kCpu);
  EXPECT_EQ(gone.rows, 0);
  EXPECT_EQ(gone.cols, 0);
  EXPECT_EQ(gone.offsets, nullptr);
  EXPECT_EQ(gone.storage_id, 0u);
  const SparseMatrix back = moved.to_device(Device::kCpu);
  EXPECT_EQ(back.device(), Device::kCpu);
  EXPECT_EQ(back.view().storage_id, 0u);
  EXPECT_EQ(back.rows, A.rows);
  EXPECT_EQ(back.cols, A.cols);
  EXPECT_EQ(back.offsets, A.offsets);
  EXPECT_EQ(back.indices, A.indices);
  EXPECT_EQ(back.values, A.values);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

// --matmul-precision on the GPU, every transpose: bf16 and tf32 are products of the right
// operands, at most about as far from the FP32 product as the CPU's bf16 kernel (cuBLAS's fast
// compute types may round differently or keep more bits: "never less precise" is the contract,
// not the CPU's bits). Precision is restored to fp32 on both after.
TEST_F(CudaBackendTest, GemmReducedPrecisionIsAsPreciseAsTheCpuKernel) {
  Backend& gpu = cuda_backend();
  try {
    cpu.set_matmul_precision(MatmulPrecision::kBf16);
    cpu.set_matmul_precision(MatmulPrecision::kFp32);
  } catch (const SystemError& e) {
    GTEST_SKIP() << "no CPU bf16 kernel to compare with: " << e.what();
  }
  const std::int64_t m = 300, n = 40, k = 256;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const std::string what = "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
    const Matrix A = ta ? host_matrix(k, m, 1) : host_matrix(m, k, 1);
    const Matrix B = tb ? host_matrix(n, k, 2) : host_matrix(k, n, 2);
    const Matrix dA = upload(A), dB = upload(B);
    Matrix exact(m, n), cpu_bf16(m, n);
    cpu.gemm(ta, tb, 1.f, A.view(), B.view(), 0.f, exact.view());
    cpu.set_matmul_precision(MatmulPrecision::kBf16);
    cpu.gemm(ta, tb, 1.f, A.view(), B.view(), 0.f, cpu_bf16.view());
    cpu.set_matmul_precision(MatmulPrecision::kFp32);
    const double bound = 2 * max_abs_diff(cpu_bf16.storage(), exact.storage()) + 1e-3;
    ASSERT_GT(bound, 2e-3) << "inputs too tame to tell bf16 from fp32";
    for (MatmulPrecision p : {MatmulPrecision::kBf16, MatmulPrecision::kTf32}) {
      Matrix dC(m, n, NAN, Device::kCuda);
      gpu.set_matmul_precision(p);
      gpu.gemm(ta, tb, 1.f, dA.view(), dB.view(), 0.f, dC.view());
      gpu.set_matmul_precision(MatmulPrecision::kFp32);
      EXPECT_LE(max_abs_diff(dC.to_host(), exact.storage()), bound) << to_string(p) << " " << what;
    }
  }
}

TEST_F(CudaBackendTest, GemmMatchesCpuForEveryTranspose) {
  Backend& gpu = cuda_backend();
  const std::int64_t m = 33;
  for (std::int64_t n : kWidths)
    for (std::int64_t k : {std::int64_t(1), std::int64_t(7), std::int64_t(33)})
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        const std::string what = "gemm m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                 " k=" + std::to_string(k) + " ta=" + std::to_string(ta) +
                                 " tb=" + std::to_string(tb);
        const Matrix A = ta ? host_matrix(k, m, 1) : host_matrix(m, k, 1);
        const Matrix B = tb ? host_matrix(n, k, 2) : host_matrix(k, n, 2);
        Matrix C = host_matrix(m, n, 3);
        const Matrix dA = upload(A), dB = upload(B);
        Matrix dC = upload(C);
        cpu.gemm(ta, tb, 0.75f, A.view(), B.view(), 0.5f, C.view());
        gpu.gemm(ta, tb, 0.75f, dA.view(), dB.view(), 0.5f, dC.view());
        expect_close(dC.to_host(), C.storage(), 1e-4, 1e-4, what);
      }
  // k = 0: C = beta C.
  Matrix C = host_matrix(5, 7, 4);
  Matrix dC = upload(C);
  const Matrix A0(5, 0), B0(0, 7);
  const Matrix dA0(5, 0, 0.f, Device::kCuda), dB0(0, 7, 0.f, Device::kCuda);
  cpu.gemm(false, false, 1.f, A0.view(), B0.view(), 0.25f, C.view());
  gpu.gemm(false, false, 1.f, dA0.view(), dB0.view(), 0.25f, dC.view());
  expect_close(dC.to_host(), C.storage(), 0, 0, "gemm k=0");
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchCpu) {
  Backend& gpu = cuda_backend();
  for (std::int64_t f : kWidths) {
    const std::string w = " f=" + std::to_string(f);
    const std::int64_t rows = 37;
    const std::vector<float> bias = randn(f, 7);
    const DeviceArray<float> dbias(bias);

    Matrix Y = host_matrix(rows, f, 8);
    Matrix dY = upload(Y);
    cpu.add_bias(Y.view(), bias.data());
    gpu.add_bias(dY.view(), dbias.get());
    expect_close(dY.to_host(), Y.storage(), 1e-6, 1e-6, "add_bias" + w);

    cpu.relu(Y.view());
    gpu.relu(dY.view());
    expect_bitwise(dY.to_host(), Y.storage(), "relu" + w);

    Matrix G = host_matrix(rows, f, 9);
    Matrix dG = upload(G);
    cpu.relu_backward(Y.view(), G.view());
    gpu.relu_backward(dY.view(), dG.view());
    expect_bitwise(dG.to_host(), G.storage(), "relu_backward" + w);

    const Matrix S = host_matrix(rows, f, 10);
    const Matrix dS = upload(S);
    cpu.add(S.view(), G.view());
    gpu.add(dS.view(), dG.view());
    expect_bitwise(dG.to_host(), G.storage(), "add" + w);

    cpu.copy(S.view(), G.view());
    gpu.copy(dS.view(), dG.view());
    expect_bitwise(dG.to_host(), G.storage(), "copy" + w);

    const Matrix A = host_matrix(rows, f, 11);
    Matrix cA = A, dA = upload(A);
    cpu.smooth(S.view(), 0.9f, cA.view());
    gpu.smooth(dS.view(), 0.9f, dA.view());
    expect_close(dA.to_host(), cA.storage(), 1e-6, 1e-6, "smooth" + w);

    for (float v : {0.f, -0.f, 2.5f}) {
      cpu.fill(G.view(), v);
      gpu.fill(dG.view(), v);
      expect_bitwise(dG.to_host(), G.storage(), "fill " + std::to_string(v) + w);
    }
  }
}

TEST_F(CudaBackendTest, DropoutMasksAreBitwiseTheCpus) {
  Backend& gpu = cuda_backend();
  const std::int64_t rows = 29;
  std::vector<NodeId> ids(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) ids[std::size_t(r)] = NodeId(2147483647 - 7919 * r);
  const DeviceArray<NodeId> dids(ids);
  for (std::int64_t f : {std::int64_t(1), std::int64_t(7), std::int64_t(33), std::int64_t(64),
                         std::int64_t(65), std::int64_t(257)})
    for (float p : {0.1f, 0.5f, 0.9f})
      for (bool with_ids : {false, true}) {
        const std::string what = "dropout f=" + std::to_string(f) + " p=" + std::to_string(p) +
                                 (with_ids ? " ids" : " rows");
        const PhiloxKey key = philox_key(42, kStreamDropout + std::uint64_t(f));
        Matrix Y = host_matrix(rows, f, 13);
        Matrix dY = upload(Y);
        cpu.dropout(Y.view(), p, key, with_ids ? ids.data() : nullptr);
        gpu.dropout(dY.view(), p, key, with_ids ? dids.get() : nullptr);
        expect_bitwise(dY.to_host(), Y.storage(), what);
      }
}

TEST_F(CudaBackendTest, ColumnReductionsMatchCpuAndAreDeterministic) {
  Backend& gpu = cuda_backend();
  // The last shape is tall enough for blocks of more than 256 rows (at most 2048 blocks).
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{0, 7},     {1, 1},      {1, 257},
                                                          {255, 7},   {1000, 1},   {1000, 7},
                                                          {1000, 33}, {1000, 257}, {600001, 3}};
  for (const auto& [rows, f] : shapes) {
    const std::string what = " rows=" + std::to_string(rows) + " f=" + std::to_string(f);
    const Matrix X = host_matrix(rows, f, 21);
    const Matrix H = host_matrix(rows, f, 22);
    const Matrix dX = upload(X), dH = upload(H);
    const auto n = static_cast<std::size_t>(f);

    std::vector<float> sums(n);
    cpu.column_sums(X.view(), sums.data());
    DeviceArray<float> dsums(std::vector<float>(n, 9.f));
    gpu.column_sums(dX.view(), dsums.get());
    expect_close(dsums.to_host(), sums, 1e-5, 1e-5, "column_sums" + what);

    std::vector<double> s(n), ss(n), gs(n, 9), gss(n, 9), gs2(n), gss2(n);
    cpu.column_moments(X.view(), s.data(), ss.data());
    gpu.column_moments(dX.view(), gs.data(), gss.data());
    gpu.column_moments(dX.view(), gs2.data(), gss2.data());
    expect_close(gs, s, 1e-9, 1e-9, "column_moments sum" + what);
    expect_close(gss, ss, 1e-9, 1e-9, "column_moments sumsq" + what);
    EXPECT_EQ(gs, gs2) << "column_moments not deterministic" << what;
    EXPECT_EQ(gss, gss2) << "column_moments not deterministic" << what;

    cpu.batch_norm_grad_sums(X.view(), H.view(), s.data(), ss.data());
    gpu.batch_norm_grad_sums(dX.view(), dH.view(), gs.data(), gss.data());
    gpu.batch_norm_grad_sums(dX.view(), dH.view(), gs2.data(), gss2.data());
    expect_close(gs, s, 1e-9, 1e-9, "batch_norm_grad_sums dy" + what);
    expect_close(gss, ss, 1e-9, 1e-9, "batch_norm_grad_sums dy*xhat" + what);
    EXPECT_EQ(gs, gs2) << "batch_norm_grad_sums not deterministic" << what;
    EXPECT_EQ(gss, gss2) << "batch_norm_grad_sums not deterministic" << what;
  }
}

TEST_F(CudaBackendTest, BatchNormApplyAndBackwardMatchCpu) {
  Backend& gpu = cuda_backend();
  for (std::int64_t f : kWidths) {
    const std::string w = " f=" + std::to_string(f);
    const std::int64_t rows = 41;
    // Host statistics, device parameters (the backend's memory-space convention).
    const std::vector<float> mean = randn(f, 31), gamma = randn(f, 33, 1.f, 0.2f),
                             beta = randn(f, 34);
    std::vector<float> inv_std = randn(f, 32, 1.f, 0.1f);
    for (auto& v : inv_std) v = std::abs(v) + 0.1f;
    const DeviceArray<float> dgamma(gamma), dbeta(beta);

    // In place (X = Y), as the model calls it, with xhat.
    Matrix Y = host_matrix(rows, f, 35), xhat(rows, f);
    Matrix dY = upload(Y), dxhat(rows, f, 0.f, Device::kCuda);
    const MatrixView hx = xhat.view(), dhx = dxhat.view();
    cpu.batch_norm_apply(Y.view(), mean.data(), inv_std.data(), gamma.data(), beta.data(), &hx,
                         Y.view());
    gpu.batch_norm_apply(dY.view(), mean.data(), inv_std.data(), dgamma.get(), dbeta.get(), &dhx,
                         dY.view());
    expect_close(dY.to_host(), Y.storage(), 1e-5, 1e-5, "batch_norm_apply y" + w);
    expect_close(dxhat.to_host(), xhat.storage(), 1e-5, 1e-5, "batch_norm_apply xhat" + w);

    // ReLU's backward from x-hat: the same mask on both devices, bit for bit.
    const Matrix xhat_on_gpu = upload(xhat);
    Matrix M = host_matrix(rows, f, 40);
    Matrix dM = upload(M);
    cpu.bn_relu_backward(xhat.view(), gamma.data(), beta.data(), M.view());
    gpu.bn_relu_backward(xhat_on_gpu.view(), dgamma.get(), dbeta.get(), dM.view());
    expect_bitwise(dM.to_host(), M.storage(), "bn_relu_backward" + w);

    // Inference: no xhat, separate output.
    const Matrix X = host_matrix(rows, f, 36);
    const Matrix dX = upload(X);
    Matrix Z(rows, f), dZ(rows, f, 0.f, Device::kCuda);
    cpu.batch_norm_apply(X.view(), mean.data(), inv_std.data(), gamma.data(), beta.data(), nullptr,
                         Z.view());
    gpu.batch_norm_apply(dX.view(), mean.data(), inv_std.data(), dgamma.get(), dbeta.get(), nullptr,
                         dZ.view());
    expect_close(dZ.to_host(), Z.storage(), 1e-5, 1e-5, "batch_norm_apply inference" + w);

    // Backward with dX aliasing dY.
    const std::vector<float> mean_dy = randn(f, 37, 0.f, 0.1f),
                             mean_dy_xhat = randn(f, 38, 0.f, 0.1f);
    Matrix G = host_matrix(rows, f, 39);
    Matrix dG = upload(G);
    cpu.batch_norm_backward(G.view(), xhat.view(), gamma.data(), inv_std.data(), mean_dy.data(),
                            mean_dy_xhat.data(), G.view());
    gpu.batch_norm_backward(dG.view(), dxhat.view(), dgamma.get(), inv_std.data(), mean_dy.data(),
                            mean_dy_xhat.data(), dG.view());
    expect_close(dG.to_host(), G.storage(), 1e-5, 1e-5, "batch_norm_backward" + w);
  }
}

TEST_F(CudaBackendTest, SoftmaxCrossEntropyMatchesCpu) {
  Backend& gpu = cuda_backend();
  const std::int64_t n = 300;
  for (std::int64_t k : kWidths) {
    const std::string w = " classes=" + std::to_string(k);
    std::mt19937 g{std::uint32_t(k)};
    std::uniform_int_distribution<std::int32_t> cls(0, std::int32_t(k - 1));
    std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = i % 5 == 3 ? -1 : cls(g);
    std::vector<NodeId> rows;
    for (NodeId r = 0; r < NodeId(n); r += 2)
      rows.push_back(NodeId(n) - 1 - r);  // every other row, reversed
    const DeviceArray<std::int32_t> dlabels(labels);
    const DeviceArray<NodeId> drows(rows);
    const Matrix Z = host_matrix(n, k, 41);
    const Matrix dZ = upload(Z);
    Matrix D(n, k, 5.f), dD(n, k, 5.f, Device::kCuda);  // rows not listed must be zeroed
    std::int64_t counted = -1, gcounted = -2;
    const double denom = 17.0;
    const double loss = cpu.softmax_xent(Z.view(), labels.data(), rows.data(),
                                         std::int64_t(rows.size()), denom, D.view(), &counted);
    const double gloss = gpu.softmax_xent(dZ.view(), dlabels.get(), drows.get(),
                                          std::int64_t(rows.size()), denom, dD.view(), &gcounted);
    EXPECT_EQ(gcounted, counted) << w;
    EXPECT_NEAR(gloss, loss, 1e-9 + 1e-9 * std::abs(loss)) << w;
    expect_close(dD.to_host(), D.storage(), 1e-7, 1e-5, "softmax_xent dlogits" + w);
    const double again = gpu.softmax_xent(dZ.view(), dlabels.get(), drows.get(),
                                          std::int64_t(rows.size()), denom, dD.view(), nullptr);
    EXPECT_EQ(again, gloss) << "softmax_xent not deterministic" << w;
  }
}

TEST_F(CudaBackendTest, BinaryCrossEntropyMatchesCpu) {
  Backend& gpu = cuda_backend();
  const std::int64_t n = 200;
  for (std::int64_t t : kWidths) {
    const std::string w = " tasks=" + std::to_string(t);
    std::mt19937 g{std::uint32_t(t) + 100};
    std::uniform_int_distribution<std::int32_t> y(-1, 1);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(n * t));
    for (auto& v : labels) v = y(g);
    std::vector<NodeId> rows;
    for (NodeId r = 1; r < NodeId(n); r += 3) rows.push_back(r);
    const DeviceArray<std::int32_t> dlabels(labels);
    const DeviceArray<NodeId> drows(rows);
    Matrix Z = host_matrix(n, t, 43);
    for (auto& v : Z.storage()) v *= 4.f;  // large logits too: the stable form matters
    const Matrix dZ = upload(Z);
    Matrix D(n, t, 5.f), dD(n, t, 5.f, Device::kCuda);
    std::int64_t counted = -1, gcounted = -2;
    const double denom = 3.0;
    const double loss = cpu.bce_logits(Z.view(), labels.data(), rows.data(),
                                       std::int64_t(rows.size()), denom, D.view(), &counted);
    const double gloss = gpu.bce_logits(dZ.view(), dlabels.get(), drows.get(),
                                        std::int64_t(rows.size()), denom, dD.view(), &gcounted);
    EXPECT_EQ(gcounted, counted) << w;
    EXPECT_NEAR(gloss, loss, 1e-9 + 1e-9 * std::abs(loss)) << w;
    expect_close(dD.to_host(), D.storage(), 1e-7, 1e-5, "bce_logits dlogits" + w);
    const double again = gpu.bce_logits(dZ.view(), dlabels.get(), drows.get(),
                                        std::int64_t(rows.size()), denom, dD.view(), nullptr);
    EXPECT_EQ(again, gloss) << "bce_logits not deterministic" << w;
  }
}

TEST_F(CudaBackendTest, AdamMatchesCpu) {
  Backend& gpu = cuda_backend();
  for (std::int64_t n : {std::int64_t(1), std::int64_t(7), std::int64_t(257), std::int64_t(4099)}) {
    std::vector<float> p = randn(n, 51), m = randn(n, 52, 0.f, 0.1f), v = randn(n, 53, 0.f, 0.1f);
    for (auto& x : v) x = x * x;
    const DeviceArray<float> dp(p), dm(m), dv(v);
    AdamStep s;
    s.lr = 0.01f;
    s.weight_decay = 5e-4f;
    for (std::int64_t step = 1; step <= 3; ++step) {
      s.step = step;
      const std::vector<float> grad = randn(n, std::uint32_t(60 + step));
      const DeviceArray<float> dgrad(grad);
      cpu.adam(p.data(), grad.data(), m.data(), v.data(), n, s);
      gpu.adam(dp.get(), dgrad.get(), dm.get(), dv.get(), n, s);
    }
    const std::string w = " n=" + std::to_string(n);
    expect_close(dp.to_host(), p, 1e-6, 1e-5, "adam p" + w);
    expect_close(dm.to_host(), m, 1e-6, 1e-5, "adam m" + w);
    expect_close(dv.to_host(), v, 1e-7, 1e-5, "adam v" + w);
  }
}

// The CUDA backend's adam_all (the default: adam per tensor) against the CPU's one-region op.
TEST_F(CudaBackendTest, AdamAllMatchesCpu) {
  Backend& gpu = cuda_backend();
  const std::vector<std::int64_t> sizes = {1, 7, 0, 257, 4099, 20000};
  std::vector<std::vector<float>> p, m, v, g;
  std::deque<DeviceArray<float>> dp, dm, dv, dg;  // not movable: a deque keeps them in place
  std::uint32_t seed = 70;
  for (std::int64_t n : sizes) {
    p.push_back(randn(n, seed++));
    m.push_back(randn(n, seed++, 0.f, 0.1f));
    v.push_back(randn(n, seed++, 0.f, 0.1f));
    for (auto& x : v.back()) x = x * x;
    g.push_back(randn(n, seed++));
    dp.emplace_back(p.back());
    dm.emplace_back(m.back());
    dv.emplace_back(v.back());
    dg.emplace_back(g.back());
  }
  std::vector<AdamTensor> host, dev;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    host.push_back({p[i].data(), g[i].data(), m[i].data(), v[i].data(), sizes[i]});
    dev.push_back({dp[i].get(), dg[i].get(), dm[i].get(), dv[i].get(), sizes[i]});
  }
  AdamStep s;
  s.lr = 0.01f;
  s.weight_decay = 5e-4f;
  s.step = 2;
  cpu.adam_all(host.data(), host.size(), s);
  gpu.adam_all(dev.data(), dev.size(), s);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) continue;
    const std::string w = " tensor " + std::to_string(i);
    expect_close(dp[i].to_host(), p[i], 1e-6, 1e-5, "adam_all p" + w);
    expect_close(dm[i].to_host(), m[i], 1e-6, 1e-5, "adam_all m" + w);
    expect_close(dv[i].to_host(), v[i], 1e-7, 1e-5, "adam_all v" + w);
  }
}

TEST_F(CudaBackendTest, GatherAndScatterAddRowsMatchCpu) {
  Backend& gpu = cuda_backend();
  const std::int64_t src_rows = 50, n = 120;
  std::mt19937 g{77};
  std::uniform_int_distribution<NodeId> any(0, NodeId(src_rows - 1));
  std::vector<NodeId> idx(static_cast<std::size_t>(n));
  for (auto& i : idx) i = any(g) % 9 == 0 ? 3 : any(g);  // repeats, and one heavy destination
  const DeviceArray<NodeId> didx(idx);
  for (std::int64_t f : kWidths) {
    const std::string w = " f=" + std::to_string(f);
    const Matrix S = host_matrix(src_rows, f, 71);
    const Matrix dS = upload(S);
    Matrix D(n, f), dD(n, f, 0.f, Device::kCuda);
    cpu.gather_rows(S.view(), idx.data(), n, D.view());
    gpu.gather_rows(dS.view(), didx.get(), n, dD.view());
    expect_bitwise(dD.to_host(), D.storage(), "gather_rows" + w);

    // Scatter-add the n rows back onto a non-zero destination: the GPU adds each destination's
    // rows in index order, as the CPU does, so the sums are bitwise equal.
    const Matrix R = host_matrix(n, f, 72);
    const Matrix dR = upload(R);
    Matrix T = host_matrix(src_rows, f, 73);
    Matrix dT = upload(T);
    cpu.scatter_add_rows(R.view(), idx.data(), n, T.view());
    gpu.scatter_add_rows(dR.view(), didx.get(), n, dT.view());
    expect_bitwise(dT.to_host(), T.storage(), "scatter_add_rows" + w);
    gpu.scatter_add_rows(dR.view(), didx.get(), 0, dT.view());  // n = 0: nothing
    expect_bitwise(dT.to_host(), T.storage(), "scatter_add_rows n=0" + w);
  }
}

// Halo rows narrowed on the GPU are the bits the CPU would send (the same bf16.h rounding).
TEST_F(CudaBackendTest, Bf16PackAndUnpackAreBitwiseTheCpus) {
  Backend& gpu = cuda_backend();
  std::vector<float> x = randn(100003, 81);
  for (std::size_t i = 0; i < x.size(); i += 7) x[i] = std::ldexp(x[i], int(i % 80) - 40);
  for (float t : {0.f, -0.f, 1.f + 1.f / 256, -(1.f + 3.f / 256), 1e-40f, 3.4028235e38f, INFINITY,
                  -INFINITY, std::nanf("")})
    x.push_back(t);
  const auto n = std::int64_t(x.size());
  std::vector<std::uint16_t> h(x.size());
  cpu.pack_bf16(x.data(), n, h.data());
  const DeviceArray<float> dx(x);
  const DeviceArray<std::uint16_t> dh(std::vector<std::uint16_t>(x.size(), 0));
  gpu.pack_bf16(dx.get(), n, dh.get());
  EXPECT_EQ(dh.to_host(), h);

  std::vector<float> y(x.size());
  cpu.unpack_bf16(h.data(), n, y.data());
  const DeviceArray<float> dy(std::vector<float>(x.size(), 0.f));
  gpu.unpack_bf16(dh.get(), n, dy.get());
  expect_bitwise(dy.to_host(), y, "unpack_bf16");
}

// Runs without a GPU (it is about the lack of one).
// The attention ops against the CPU's on a skewed graph with halo columns (cols > rows), heads
// of odd width: forward within float rounding, attention dropout bitwise (the same keyed
// draws), every backward within rounding; a dropped-out alpha takes its own gradient in place.
TEST_F(CudaBackendTest, GatOpsMatchCpu) {
  const std::int64_t rows = 300, cols = 420;
  const SparseMatrix s = skewed_sparse(rows, cols, 31);
  Csr csr;
  csr.num_nodes = rows;
  csr.offsets = Array<EdgeId>(std::vector<EdgeId>(s.offsets));
  csr.indices = Array<NodeId>(std::vector<NodeId>(s.indices));
  const AttentionGraph a = attention_graph(csr.view(), cols);
  const DeviceArray<EdgeId> off(a.offsets), toff(a.t_offsets), tedge(a.t_edge);
  const DeviceArray<NodeId> idx(a.indices), trows(a.t_rows);
  const AttentionView ha = a.view();
  const AttentionView da{a.rows,    a.cols,     a.nnz(),     off.get(),
                         idx.get(), toff.get(), trows.get(), tedge.get()};
  std::vector<NodeId> ids(static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = NodeId(7 * i + 3);
  const DeviceArray<NodeId> dids(ids);
  Backend& gpu = cuda_backend();
  for (const auto& [heads, width] : {std::pair<int, int>{1, 7}, {3, 33}, {2, 64}}) {
    const std::int64_t hf = std::int64_t(heads) * width, nnz = a.nnz();
    const std::string what = std::to_string(heads) + " x " + std::to_string(width);
    const Matrix z = host_matrix(cols, hf, 1), as = host_matrix(heads, width, 2),
                 ad = host_matrix(heads, width, 3), dout = host_matrix(rows, hf, 4);
    const Matrix gz = upload(z), gas = upload(as), gad = upload(ad), gdout = upload(dout);
    // Forward.
    Matrix el(cols, heads), er(rows, heads), alpha(nnz, heads), out(rows, hf);
    Matrix gel(cols, heads, 0.f, Device::kCuda), ger(rows, heads, 0.f, Device::kCuda),
        galpha(nnz, heads, 0.f, Device::kCuda), gout(rows, hf, 0.f, Device::kCuda);
    cpu.gat_head_dots(z.view(), as.view(), el.view());
    gpu.gat_head_dots(gz.view(), gas.view(), gel.view());
    cpu.gat_head_dots(z.view().rows_range(0, rows), ad.view(), er.view());
    gpu.gat_head_dots(gz.view().rows_range(0, rows), gad.view(), ger.view());
    expect_close(gel.to_host(), el.storage(), 1e-4, 1e-4, "el " + what);
    cpu.gat_edge_softmax(ha, el.view(), er.view(), 0.2f, alpha.view());
    gpu.gat_edge_softmax(da, gel.view(), ger.view(), 0.2f, galpha.view());
    expect_close(galpha.to_host(), alpha.storage(), 1e-5, 1e-4, "alpha " + what);
    Matrix drop = alpha, gdrop = galpha;
    const PhiloxKey key = philox_key(9, kStreamDropout + 40);
    cpu.gat_edge_dropout(ha, drop.view(), 0.4f, key, ids.data());
    gpu.gat_edge_dropout(da, gdrop.view(), 0.4f, key, dids.get());
    const std::vector<float> gd = gdrop.to_host();
    for (std::size_t i = 0; i < gd.size(); ++i)
      ASSERT_EQ(gd[i] == 0.f, drop.storage()[i] == 0.f) << "dropout mask " << what << " at " << i;
    cpu.gat_aggregate(ha, alpha.view(), z.view(), out.view());
    gpu.gat_aggregate(da, galpha.view(), gz.view(), gout.view());
    expect_close(gout.to_host(), out.storage(), 1e-4, 1e-4, "aggregate " + what);
    // Backward, alpha' overwritten by its own gradient on both sides.
    Matrix dz(cols, hf, 0.f), gdzm(cols, hf, 0.f, Device::kCuda);
    cpu.gat_aggregate_backward(ha, drop.view(), z.view(), dout.view(), drop.view(), dz.view());
    gpu.gat_aggregate_backward(da, gdrop.view(), gz.view(), gdout.view(), gdrop.view(),
                               gdzm.view());
    expect_close(gdzm.to_host(), dz.storage(), 1e-4, 1e-4, "aggregate d(z) " + what);
    expect_close(gdrop.to_host(), drop.storage(), 1e-4, 1e-4, "aggregate d(alpha) " + what);
    Matrix del(cols, heads, 0.f), der(rows, heads, 0.f);
    Matrix gdel(cols, heads, 0.f, Device::kCuda), gder(rows, heads, 0.f, Device::kCuda);
    cpu.gat_edge_softmax_backward(ha, el.view(), er.view(), 0.2f, alpha.view(), drop.view(),
                                  del.view(), der.view());
    gpu.gat_edge_softmax_backward(da, gel.view(), ger.view(), 0.2f, galpha.view(), gdrop.view(),
                                  gdel.view(), gder.view());
    expect_close(gdrop.to_host(), drop.storage(), 1e-4, 1e-3, "d(score) " + what);
    expect_close(gdel.to_host(), del.storage(), 1e-4, 1e-3, "d(el) " + what);
    expect_close(gder.to_host(), der.storage(), 1e-4, 1e-3, "d(er) " + what);
    Matrix das(heads, width, 0.f), gdas(heads, width, 0.f, Device::kCuda);
    cpu.gat_head_dots_backward(z.view(), as.view(), del.view(), dz.view(), das.view());
    gpu.gat_head_dots_backward(gz.view(), gas.view(), gdel.view(), gdzm.view(), gdas.view());
    expect_close(gdzm.to_host(), dz.storage(), 1e-4, 1e-3, "head dots d(z) " + what);
    expect_close(gdas.to_host(), das.storage(), 1e-3, 1e-3, "head dots d(a) " + what);
    // Deterministic: the reduction again gives the same bits.
    Matrix gdas2(heads, width, 0.f, Device::kCuda), gdz2(cols, hf, 0.f, Device::kCuda);
    gpu.gat_head_dots_backward(gz.view(), gas.view(), gdel.view(), gdz2.view(), gdas2.view());
    expect_bitwise(gdas2.to_host(), gdas.to_host(), "d(a) twice " + what);
  }
  // ELU and its slope.
  const Matrix x = host_matrix(37, 33, 5);
  Matrix y = x, gy = upload(x);
  cpu.elu(y.view());
  gpu.elu(gy.view());
  expect_close(gy.to_host(), y.storage(), 1e-6, 1e-6, "elu");
  Matrix d = host_matrix(37, 33, 6), gdm = upload(d);
  cpu.elu_backward(y.view(), d.view(), 0.5f);
  gpu.elu_backward(gy.view(), gdm.view(), 0.5f);
  expect_close(gdm.to_host(), d.storage(), 1e-6, 1e-6, "elu backward");
}

TEST(Device, CudaBackendWithoutDeviceIsASystemError) {
  if (cuda_devices().count > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(cuda_backend(), SystemError);
}

}  // namespace
}  // namespace halo

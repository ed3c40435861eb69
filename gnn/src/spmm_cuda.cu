// CUDA SpMM: Y = A X with cuSPARSE's generic API (CSR, row-major dense X and Y).
//
// Algorithm: CUSPARSE_SPMM_CSR_ALG3. The cuSPARSE documentation of cusparseSpMM
// (https://docs.nvidia.com/cuda/cusparse/#cusparsespmm, the routine's list of properties) states
// that it gives deterministic (bit-wise) results for each run only with CUSPARSE_SPMM_COO_ALG2,
// CUSPARSE_SPMM_CSR_ALG3 and CUSPARSE_SPMM_BSR_ALG1; CSR_ALG1 and CSR_ALG2 (the one tuned for
// row-major layouts) are documented as possibly differing slightly from run to run. ALG3
// supports CSR with opA = non-transpose only, which is all we need (the transposed operator is
// precomputed, see graph_op.h); its only documented restrictions are on opA / opB, not on the
// dense layout, so row-major X and Y are used as they are. Should a cuSPARSE release decline
// ALG3 anyway (NOT_SUPPORTED, INVALID_VALUE or INSUFFICIENT_RESOURCES from bufferSize,
// preprocess or the call; shapes are checked before, so these are not caller bugs), an own
// kernel takes over for that operator: one warp per row, register accumulators over columns,
// nonzeros added in CSR order — also deterministic, and the CPU's summation order. It also
// takes width 1, where cuSPARSE may hand over to SpMV (not documented deterministic).
//
// HALO_CUDA_SPMM (read when a plan is made, i.e. per uploaded operator and width) picks the
// kernel for A/B timings (halo_bench_spmm times all three) and tests: alg3 (the default), own,
// or alg2 (CUSPARSE_SPMM_CSR_ALG2, tuned for row-major dense matrices but documented as not
// bit-reproducible from run to run: opt-in only).
//
// Index types: halo stores offsets as int64 (EdgeId) and column indices as int32 (NodeId). The
// cuSPARSE documentation lists 32- and 64-bit index types for SpMM but does not document mixing
// the two in one CSR descriptor, so each plan holds a rebased int32 copy of the offsets (4 bytes
// a row) and operators with 2^31 or more nonzeros are rejected with ParamError.
//
// Plans: descriptor, int32 offsets and the external buffer (preprocessed with
// cusparseSpMM_preprocess, which ALG3 benefits from) are built once per (operator, dense width)
// and reused; the cache is keyed by the upload's storage_id (unique per device SparseMatrix:
// each to_device(kCuda), and each copy of a device matrix, gets a new one, so an operator
// allocated where a freed one lived never meets the old plan), every pointer the descriptor
// holds and the shape. Row slices of a bigger CSR (offsets shifted, offsets[0] != 0,
// indices and values not shifted) are handled by rebasing: offsets - offsets[0] over
// indices + offsets[0], values + offsets[0]. The offsets' first and last entries are read once
// per plan (SparseView::nnz() would dereference device memory on the host).
#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cuda_backend.h"
#include "halo/gnn/cuda_check.h"

namespace halo {
namespace {

constexpr std::size_t kMaxPlans = 64;  // beyond this the cache is dropped and rebuilt

__global__ void rebase_offsets_kernel(const EdgeId* off, std::int64_t n, EdgeId base,
                                      std::int32_t* out) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = std::int32_t(off[i] - base);
}

// The own kernel: one warp per row; the row's columns in chunks of 32 * V, each lane keeping V
// accumulators (columns lane, lane + 32, ...) in registers, so one pass over the row's nonzeros
// (in CSR order: the summation order of the CPU) issues V independent loads per nonzero.
template <int V>
__global__ void spmm_rows_kernel(const std::int32_t* off, const NodeId* idx, const float* val,
                                 const float* x, float* y, std::int64_t rows, std::int64_t f) {
  const int lane = int(threadIdx.x % 32);
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows;
       r += warps) {
    const std::int32_t begin = off[r], end = off[r + 1];
    for (std::int64_t c0 = 0; c0 < f; c0 += 32 * V) {
      float acc[V];
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = 0.f;
      for (std::int32_t k = begin; k < end; ++k) {
        const float a = val[k];
        const float* xr = x + std::int64_t(idx[k]) * f + c0 + lane;
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (c0 + lane + 32 * j < f) acc[j] += a * xr[32 * j];
      }
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (c0 + lane + 32 * j < f) y[r * f + c0 + lane + 32 * j] = acc[j];
    }
  }
}

// cuSPARSE declines an algorithm/shape combination with NOT_SUPPORTED or, in some releases,
// INVALID_VALUE (e.g. "SPMM_CSR_ALG3 is not supported when ...") or INSUFFICIENT_RESOURCES (an
// index width that cannot hold the input). True for those, said on stderr (once per plan: a
// few lines a run, and benchmarks can tell which kernel really ran): the caller hands the
// operator to the own kernel.
bool declined(cusparseStatus_t st, const char* call, std::int64_t rows, std::int64_t width) {
  if (st != CUSPARSE_STATUS_NOT_SUPPORTED && st != CUSPARSE_STATUS_INVALID_VALUE &&
      st != CUSPARSE_STATUS_INSUFFICIENT_RESOURCES)
    return false;
  std::cerr << "halo: " << call << " declined the CSR SpMM of " << rows << " rows at width "
            << width << " (" << cusparseGetErrorName(st)
            << "); halo's own deterministic SpMM kernel takes it\n";
  return true;
}

void check_status(cusparseStatus_t st, const char* call, int line) {
  if (st != CUSPARSE_STATUS_SUCCESS)
    throw SystemError(std::string(call) + "(CSR SpMM) failed at " + __FILE__ + ":" +
                      std::to_string(line) + ": " + cusparseGetErrorName(st) + " (" +
                      cusparseGetErrorString(st) + ")");
}

unsigned blocks_for(std::int64_t threads) {
  const std::int64_t b = (threads + 255) / 256;
  return unsigned(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

// Dense descriptors of one call (host-side objects, cheap to make).
struct ConstDense {
  cusparseConstDnMatDescr_t d = nullptr;
  explicit ConstDense(const MatrixView& m) {
    HALO_CUSPARSE_CHECK(cusparseCreateConstDnMat(&d, m.rows, m.cols, m.cols, m.data, CUDA_R_32F,
                                                 CUSPARSE_ORDER_ROW));
  }
  ~ConstDense() {
    if (d) cusparseDestroyDnMat(d);
  }
  ConstDense(const ConstDense&) = delete;
  ConstDense& operator=(const ConstDense&) = delete;
};

struct Dense {
  cusparseDnMatDescr_t d = nullptr;
  explicit Dense(const MatrixView& m) {
    HALO_CUSPARSE_CHECK(
        cusparseCreateDnMat(&d, m.rows, m.cols, m.cols, m.data, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  }
  ~Dense() {
    if (d) cusparseDestroyDnMat(d);
  }
  Dense(const Dense&) = delete;
  Dense& operator=(const Dense&) = delete;
};

}  // namespace

CudaBackend::SpmmPlan::~SpmmPlan() {
  if (mat) cusparseDestroySpMat(mat);
}

CudaBackend::SpmmPlan& CudaBackend::spmm_plan(const SparseView& A, const MatrixView& X,
                                              const MatrixView& Y) {
  const SpmmKey key{A.storage_id, A.offsets, A.indices, A.values, A.rows, A.cols, X.cols};
  if (auto it = spmm_plans_.find(key); it != spmm_plans_.end()) return *it->second;
  const char* choice = std::getenv("HALO_CUDA_SPMM");  // validated before any GPU work
  const std::string kernel = choice ? choice : "alg3";
  if (kernel != "alg3" && kernel != "alg2" && kernel != "own")
    throw ParamError("HALO_CUDA_SPMM=" + kernel + ": expected alg3, alg2 or own");
  if (spmm_plans_.size() >= kMaxPlans) {  // operators are few; this only bounds stale entries
    HALO_CUDA_CHECK(cudaStreamSynchronize(stream_));
    spmm_plans_.clear();
  }
  if (A.cols > INT_MAX || A.rows >= INT_MAX)
    throw ParamError("CudaBackend::spmm: 2^31-1 or more rows or columns");
  auto plan = std::make_unique<SpmmPlan>();
  EdgeId ends[2] = {0, 0};
  HALO_CUDA_CHECK(
      cudaMemcpyAsync(&ends[0], A.offsets, sizeof(EdgeId), cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaMemcpyAsync(&ends[1], A.offsets + A.rows, sizeof(EdgeId),
                                  cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const EdgeId base = ends[0];
  plan->nnz = ends[1] - base;
  if (plan->nnz < 0) throw ParamError("CudaBackend::spmm: offsets decrease");
  if (plan->nnz > INT_MAX)
    throw ParamError(
        "CudaBackend::spmm: " + std::to_string(plan->nnz) +
        " nonzeros in one operator; the CUDA backend supports up to 2^31-1 (int32 offsets)");
  plan->indices = A.indices + base;
  plan->values = A.values + base;
  auto* off32 = static_cast<std::int32_t*>(
      plan->offsets32.reserve(sizeof(std::int32_t) * std::size_t(A.rows + 1), stream_));
  rebase_offsets_kernel<<<blocks_for(A.rows + 1), 256, 0, stream_>>>(A.offsets, A.rows + 1, base,
                                                                     off32);
  check_launch();
  if (X.cols == 1 || kernel == "own") plan->own_kernel = true;
  if (kernel == "alg2") plan->alg = CUSPARSE_SPMM_CSR_ALG2;
  if (plan->nnz > 0 && !plan->own_kernel) {
    HALO_CUSPARSE_CHECK(cusparseCreateConstCsr(
        &plan->mat, A.rows, A.cols, plan->nnz, off32, plan->indices, plan->values,
        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    const ConstDense x(X);
    const Dense y(Y);
    const float alpha = 1.f, beta = 0.f;
    std::size_t bytes = 0;
    const cusparseStatus_t st = cusparseSpMM_bufferSize(
        cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
        plan->mat, x.d, &beta, y.d, CUDA_R_32F, plan->alg, &bytes);
    if (declined(st, "cusparseSpMM_bufferSize", A.rows, X.cols)) {
      plan->own_kernel = true;
    } else {
      check_status(st, "cusparseSpMM_bufferSize", __LINE__);
      void* work = plan->work.reserve(bytes, stream_);
      const cusparseStatus_t pre = cusparseSpMM_preprocess(
          cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
          plan->mat, x.d, &beta, y.d, CUDA_R_32F, plan->alg, work);
      if (declined(pre, "cusparseSpMM_preprocess", A.rows, X.cols))
        plan->own_kernel = true;
      else
        check_status(pre, "cusparseSpMM_preprocess", __LINE__);
    }
  }
  SpmmPlan& ref = *plan;
  spmm_plans_.emplace(key, std::move(plan));
  return ref;
}

void CudaBackend::do_spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  const std::int64_t f = X.cols;  // shapes checked by Backend::spmm
  if (A.rows == 0 || f == 0) return;
  SpmmPlan& p = spmm_plan(A, X, Y);
  if (p.nnz == 0) {
    HALO_CUDA_CHECK(cudaMemsetAsync(Y.data, 0, sizeof(float) * std::size_t(A.rows * f), stream_));
    return;
  }
  if (!p.own_kernel) {
    const ConstDense x(X);
    const Dense y(Y);
    const float alpha = 1.f, beta = 0.f;
    const cusparseStatus_t st =
        cusparseSpMM(cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                     &alpha, p.mat, x.d, &beta, y.d, CUDA_R_32F, p.alg, p.work.get());
    if (!declined(st, "cusparseSpMM", A.rows,
                  f)) {  // declined (e.g. for these buffers' alignment): own kernel
      check_status(st, "cusparseSpMM", __LINE__);
      return;
    }
    p.own_kernel = true;
  }
  const auto* off = static_cast<const std::int32_t*>(p.offsets32.get());
  const unsigned blocks = blocks_for(A.rows * 32);
  if (f <= 64)
    spmm_rows_kernel<2>
        <<<blocks, 256, 0, stream_>>>(off, p.indices, p.values, X.data, Y.data, A.rows, f);
  else if (f <= 128)
    spmm_rows_kernel<4>
        <<<blocks, 256, 0, stream_>>>(off, p.indices, p.values, X.data, Y.data, A.rows, f);
  else
    spmm_rows_kernel<8>
        <<<blocks, 256, 0, stream_>>>(off, p.indices, p.values, X.data, Y.data, A.rows, f);
  check_launch();
}

}  // namespace halo

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
// Which kernel runs, strict mode, alignment and the per-kernel call counts: spmm_policy.h.
//
// Index types: halo stores offsets as int64 (EdgeId) and column indices as int32 (NodeId). The
// cuSPARSE documentation lists 32- and 64-bit index types for SpMM but does not document mixing
// the two in one CSR descriptor, so each plan holds a rebased int32 copy of the offsets (4 bytes
// a row) and operators with 2^31 or more nonzeros are rejected with ParamError.
//
// Plans: an operator (one view of an upload: its storage_id, every pointer the descriptor holds
// and the shape) is prepared once: rebased int32 offsets and a 16-byte aligned copy of its
// indices and values when the view's are not (a row slice starts at offsets[0]). Each dense
// width then has its own plan: the kernel and, for cuSPARSE, its own descriptor over those
// arrays (a host-side object; cuSPARSE does not document that preprocess leaves a descriptor
// as it was, and training alternates widths on one operator) and work buffer, preprocessed on
// the first call whose dense operands are aligned; a plan whose setup throws is dropped. Row slices
// of a bigger CSR (offsets shifted, offsets[0] != 0, indices and values not) are rebased: offsets -
// offsets[0] over indices + offsets[0], values + offsets[0]; the offsets' ends are read once per
// operator (SparseView::nnz() would dereference device memory on the host). The storage_id (unique
// per upload, see sparse.h) means an operator allocated where a freed one lived never meets the old
// state, and the upload's release (a storage release hook) frees its operators' state with it. All
// of it is allocated through device_alloc, so it is part of the peak the trainer reports
// (peak_gpu_mb).
#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cuda/cuda_backend.h"
#include "halo/gnn/cuda_check.h"

namespace halo {
namespace {

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

SpmmStatus policy_status(cusparseStatus_t st) {
  switch (st) {
    case CUSPARSE_STATUS_SUCCESS:
      return SpmmStatus::kSuccess;
    case CUSPARSE_STATUS_NOT_SUPPORTED:
      return SpmmStatus::kNotSupported;
    case CUSPARSE_STATUS_INVALID_VALUE:
      return SpmmStatus::kInvalidValue;
    case CUSPARSE_STATUS_INSUFFICIENT_RESOURCES:
      return SpmmStatus::kInsufficientResources;
    default:
      return SpmmStatus::kOther;
  }
}

std::string shape(std::int64_t rows, std::int64_t width) {
  return "the CSR SpMM of " + std::to_string(rows) + " rows at width " + std::to_string(width);
}

// True when cuSPARSE declined at `stage` (the plan then takes the own kernel, said once on
// stderr); throws on errors and, in strict mode, on declines (spmm_declined).
bool declined(cusparseStatus_t st, SpmmStage stage, const SpmmSettings& s, const char* call,
              std::int64_t rows, std::int64_t width, std::string& label) {
  if (!spmm_declined(policy_status(st), stage, s, call, cusparseGetErrorName(st),
                     shape(rows, width)))
    return false;
  label =
      std::string("own (cuSPARSE declined: ") + cusparseGetErrorName(st) + " from " + call + ")";
  std::cerr << "halo: " << call << " declined " << shape(rows, width) << " ("
            << cusparseGetErrorName(st) << "); halo's own deterministic SpMM kernel takes it\n";
  return true;
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

cusparseSpMMAlg_t cusparse_alg(SpmmKernel k) {
  return k == SpmmKernel::kAlg2 ? CUSPARSE_SPMM_CSR_ALG2 : CUSPARSE_SPMM_CSR_ALG3;
}

}  // namespace

CudaBackend::SpmmWidthPlan::~SpmmWidthPlan() {
  if (mat) cusparseDestroySpMat(mat);
}

CudaBackend::SpmmOperator::~SpmmOperator() = default;

CudaBackend::SpmmOperator& CudaBackend::spmm_operator(const SparseView& A) {
  const SpmmKey key{A.storage_id, A.offsets, A.indices, A.values, A.rows, A.cols};
  if (auto it = spmm_ops_.find(key); it != spmm_ops_.end()) return *it->second;
  spmm_settings_ = spmm_settings_from_env();  // per new operator: tests switch kernels
  if (A.cols > INT_MAX || A.rows >= INT_MAX)
    throw ParamError("CudaBackend::spmm: 2^31-1 or more rows or columns");
  auto op = std::make_unique<SpmmOperator>();
  EdgeId ends[2] = {0, 0};
  HALO_CUDA_CHECK(
      cudaMemcpyAsync(&ends[0], A.offsets, sizeof(EdgeId), cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaMemcpyAsync(&ends[1], A.offsets + A.rows, sizeof(EdgeId),
                                  cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const EdgeId base = ends[0];
  op->nnz = ends[1] - base;
  if (op->nnz < 0) throw ParamError("CudaBackend::spmm: offsets decrease");
  if (op->nnz > INT_MAX)
    throw ParamError(
        "CudaBackend::spmm: " + std::to_string(op->nnz) +
        " nonzeros in one operator; the CUDA backend supports up to 2^31-1 (int32 offsets)");
  op->view_indices = op->indices = A.indices + base;
  op->view_values = op->values = A.values + base;
  auto* off32 = static_cast<std::int32_t*>(
      op->offsets32.reserve(sizeof(std::int32_t) * std::size_t(A.rows + 1), stream_));
  rebase_offsets_kernel<<<blocks_for(A.rows + 1), 256, 0, stream_>>>(A.offsets, A.rows + 1, base,
                                                                     off32);
  check_launch("spmm (rebasing the offsets)");
  SpmmOperator& ref = *op;
  spmm_ops_.emplace(key, std::move(op));
  return ref;
}

CudaBackend::SpmmWidthPlan& CudaBackend::spmm_width_plan(SpmmOperator& op, const SparseView& A,
                                                         std::int64_t width) {
  if (auto it = op.widths.find(width); it != op.widths.end()) return *it->second;
  auto plan = std::make_unique<SpmmWidthPlan>();
  std::string why;
  plan->kernel = spmm_first_choice(spmm_settings_, width, &why);
  plan->label = spmm_kernel_name(plan->kernel);
  if (!why.empty()) plan->label += " (" + why + ")";
  if (plan->kernel != SpmmKernel::kOwn && op.nnz > 0) {
    if (!cusparse_aligned(op.indices) || !cusparse_aligned(op.values)) {
      // A row slice starting mid-array: copy its indices and values once (this operator's
      // nnz x 8 bytes) so cuSPARSE gets aligned arrays.
      const std::size_t ib = sizeof(NodeId) * std::size_t(op.nnz);
      const std::size_t vat =
          (ib + kCusparseAlignment - 1) / kCusparseAlignment * kCusparseAlignment;
      char* buf = static_cast<char*>(
          op.aligned.reserve(vat + sizeof(float) * std::size_t(op.nnz), stream_));
      HALO_CUDA_CHECK(cudaMemcpyAsync(buf, op.view_indices, ib, cudaMemcpyDeviceToDevice, stream_));
      HALO_CUDA_CHECK(cudaMemcpyAsync(buf + vat, op.view_values,
                                      sizeof(float) * std::size_t(op.nnz), cudaMemcpyDeviceToDevice,
                                      stream_));
      check_launch("spmm (aligning a row slice)");
      op.indices = reinterpret_cast<const NodeId*>(buf);
      op.values = reinterpret_cast<const float*>(buf + vat);
    }
    HALO_CUSPARSE_CHECK(cusparseCreateConstCsr(
        &plan->mat, A.rows, A.cols, op.nnz, op.offsets32.get(), op.indices, op.values,
        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  }
  SpmmWidthPlan& ref = *plan;
  op.widths.emplace(width, std::move(plan));
  return ref;
}

void CudaBackend::spmm_prepare(SpmmWidthPlan& plan, const SparseView& A, const MatrixView& X,
                               const MatrixView& Y) {
  const ConstDense x(X);
  const Dense y(Y);
  const float alpha = 1.f, beta = 0.f;
  const cusparseSpMMAlg_t alg = cusparse_alg(plan.kernel);
  std::size_t bytes = 0;
  const cusparseStatus_t st = cusparseSpMM_bufferSize(
      cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
      plan.mat, x.d, &beta, y.d, CUDA_R_32F, alg, &bytes);
  if (declined(st, SpmmStage::kBufferSize, spmm_settings_, "cusparseSpMM_bufferSize", A.rows,
               X.cols, plan.label)) {
    plan.kernel = SpmmKernel::kOwn;
    return;
  }
  void* work = plan.work.reserve(bytes, stream_);
  const cusparseStatus_t pre = cusparseSpMM_preprocess(
      cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
      plan.mat, x.d, &beta, y.d, CUDA_R_32F, alg, work);
  check_launch("cusparseSpMM_preprocess");
  if (declined(pre, SpmmStage::kPreprocess, spmm_settings_, "cusparseSpMM_preprocess", A.rows,
               X.cols, plan.label)) {
    plan.kernel = SpmmKernel::kOwn;
    return;
  }
  plan.prepared = true;  // only now: a plan whose setup threw is made again on the next call
}

void CudaBackend::spmm_own_kernel(const SpmmOperator& op, const SparseView& A, const MatrixView& X,
                                  const MatrixView& Y) {
  const auto* off = static_cast<const std::int32_t*>(op.offsets32.get());
  const std::int64_t f = X.cols;
  const unsigned blocks = blocks_for(A.rows * 32);
  // The view's own arrays: the kernel reads 4-byte elements, any alignment will do.
  if (f <= 64)
    spmm_rows_kernel<2><<<blocks, 256, 0, stream_>>>(off, op.view_indices, op.view_values, X.data,
                                                     Y.data, A.rows, f);
  else if (f <= 128)
    spmm_rows_kernel<4><<<blocks, 256, 0, stream_>>>(off, op.view_indices, op.view_values, X.data,
                                                     Y.data, A.rows, f);
  else
    spmm_rows_kernel<8><<<blocks, 256, 0, stream_>>>(off, op.view_indices, op.view_values, X.data,
                                                     Y.data, A.rows, f);
  check_launch("spmm (halo's own kernel)");
}

void CudaBackend::do_spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  const std::int64_t f = X.cols;  // shapes checked by Backend::spmm
  if (A.rows == 0 || f == 0) return;
  SpmmOperator& op = spmm_operator(A);
  SpmmWidthPlan& plan = spmm_width_plan(op, A, f);
  if (op.nnz == 0) {
    HALO_CUDA_CHECK(cudaMemsetAsync(Y.data, 0, sizeof(float) * std::size_t(A.rows * f), stream_));
    check_launch("spmm (no nonzeros)");
    ++spmm_counts_["none (no nonzeros)"];
    return;
  }
  if (plan.kernel != SpmmKernel::kOwn && (!cusparse_aligned(X.data) || !cusparse_aligned(Y.data))) {
    // A row range of a bigger matrix, starting at a row that is not 16-byte aligned.
    spmm_own_kernel(op, A, X, Y);
    ++spmm_counts_["own (unaligned dense operand)"];
    return;
  }
  if (plan.kernel != SpmmKernel::kOwn && !plan.prepared) {
    try {
      spmm_prepare(plan, A, X, Y);
    } catch (...) {
      op.widths.erase(f);  // no half-made plan stays behind for the next call
      throw;
    }
  }
  if (plan.kernel != SpmmKernel::kOwn) {
    const ConstDense x(X);
    const Dense y(Y);
    const float alpha = 1.f, beta = 0.f;
    const cusparseStatus_t st = cusparseSpMM(
        cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
        plan.mat, x.d, &beta, y.d, CUDA_R_32F, cusparse_alg(plan.kernel), plan.work.get());
    check_launch("cusparseSpMM");
    if (!declined(st, SpmmStage::kCall, spmm_settings_, "cusparseSpMM", A.rows, f, plan.label)) {
      ++spmm_counts_[plan.label];
      return;
    }
    plan.kernel = SpmmKernel::kOwn;
  }
  spmm_own_kernel(op, A, X, Y);
  ++spmm_counts_[plan.label];
}

std::map<std::string, std::int64_t> CudaBackend::take_spmm_kernel_counts() {
  std::map<std::string, std::int64_t> out;
  out.swap(spmm_counts_);
  return out;
}

void CudaBackend::drop_spmm_operators(std::uint64_t storage_id) noexcept {
  const SpmmKey from{storage_id, nullptr, nullptr, nullptr, INT64_MIN, INT64_MIN};
  auto it = spmm_ops_.lower_bound(from);
  if (it == spmm_ops_.end() || std::get<0>(it->first) != storage_id) return;
  // No stream synchronisation here: the buffers go through device_free, whose cudaFree waits
  // for queued work (after cancelling communication that may never finish, while unwinding).
  while (it != spmm_ops_.end() && std::get<0>(it->first) == storage_id) it = spmm_ops_.erase(it);
}

}  // namespace halo

// The CUDA backend's class (private to gnn/src): kernels live in cuda_backend.cu, SpMM in
// spmm_cuda.cu. One stream owned by the backend carries every kernel, copy, cuBLAS and cuSPARSE
// call, so ops run in issue order; ops that return host values synchronise it. The stream is a
// blocking one (cudaStreamCreate, not cudaStreamNonBlocking): it orders against the legacy
// default stream that device_copy / Matrix::to_host use, so a host copy after an op sees its
// result without an explicit synchronisation.
//
// Determinism: no floating-point atomics anywhere. Reductions use a fixed row partition with
// per-block partials in double combined in block order; scatter_add_rows adds each destination's
// rows in index order; SpMM uses cuSPARSE's deterministic CSR algorithm (see spmm_cuda.cu);
// cuBLAS is bitwise reproducible on one stream for a given GPU model and toolkit.
//
// Not thread-safe: the scratch buffer and the SpMM plan cache are shared, so one host thread
// drives the backend (as the trainer does).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "halo/gnn/backend.h"
#include "halo/gnn/spmm_policy.h"

namespace halo {

// After an op's kernel launch or library call (cuBLAS, cuSPARSE, CUB, async copies): launch
// errors now; with HALO_CUDA_SYNC=1 (bring-up, tests) also the work's own faults, so an error
// names `op`, the op that caused it, rather than the next one that synchronises.
void check_launch(const char* op);

// Device memory with RAII; grows only (contents are not kept when it grows).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  // At least `bytes` of device memory; when it must grow, `stream` is synchronised first so no
  // queued kernel still uses the old allocation.
  void* reserve(std::size_t bytes, cudaStream_t stream);
  void* get() const { return p_; }
  std::size_t size() const { return bytes_; }  // bytes held

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaBackend final : public Backend {
 public:
  // Throws SystemError with cuda_devices()'s reason when no GPU is visible.
  CudaBackend();
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::kCuda; }
  const char* name() const override { return "cuda"; }
  // fp32 (cublasSgemm), tf32 or bf16 (cublasGemmEx with the matching fast compute type).
  void set_matmul_precision(MatmulPrecision p) override { precision_ = p; }
  MatmulPrecision matmul_precision() const override { return precision_; }
  void wait_for_queued_work() override;
  // The one stream every op of this backend is queued on.
  cudaStream_t stream() const { return stream_; }

 private:
  // The ops (backend.h); shapes are checked before they are called.
  void do_spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) override;
  void do_gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
               const MatrixView& C) override;
  void do_add_bias(const MatrixView& Y, const float* b) override;
  void do_column_sums(const MatrixView& X, float* out) override;
  void do_relu(const MatrixView& Y) override;
  void do_relu_backward(const MatrixView& Y, const MatrixView& dY) override;
  void do_bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                           const MatrixView& dY) override;
  void do_dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) override;
  void do_column_moments(const MatrixView& X, double* sum, double* sumsq) override;
  void do_batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                           const float* gamma, const float* beta, const MatrixView* xhat,
                           const MatrixView& Y) override;
  void do_batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat, double* sum_dy,
                               double* sum_dy_xhat) override;
  void do_batch_norm_backward(const MatrixView& dY, const MatrixView& xhat, const float* gamma,
                              const float* inv_std, const float* mean_dy, const float* mean_dy_xhat,
                              const MatrixView& dX) override;
  double do_softmax_xent(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                         std::int64_t nrows, double denom, const MatrixView& dlogits,
                         std::int64_t* counted) override;
  double do_bce_logits(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                       std::int64_t nrows, double denom, const MatrixView& dlogits,
                       std::int64_t* counted) override;
  void do_adam(float* p, const float* g, float* m, float* v, std::int64_t n,
               const AdamStep& s) override;
  void do_gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                      const MatrixView& dst) override;
  void do_scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                           const MatrixView& dst) override;
  void do_add(const MatrixView& src, const MatrixView& dst) override;
  void do_copy(const MatrixView& src, const MatrixView& dst) override;
  void do_smooth(const MatrixView& x, float gamma, const MatrixView& avg) override;
  void do_fill(const MatrixView& X, float v) override;
  void do_pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) override;
  void do_unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) override;
  // Temporal GNNs (temporal_ops_cuda.cu).
  void do_time_encode(const double* dt, std::int64_t n, const float* w, const float* b,
                      const MatrixView& out, const MatrixView& sin) override;
  void do_time_encode_backward(const double* dt, const MatrixView& sin, const MatrixView& dout,
                               float* dw, float* db) override;
  void do_gru_gates(const MatrixView& a, const MatrixView& c, const MatrixView& h,
                    const MatrixView& rzn, const MatrixView& h_out) override;
  void do_gru_gates_backward(const MatrixView& dh_out, const MatrixView& h, const MatrixView& c,
                             const MatrixView& rzn, const MatrixView& da, const MatrixView& dc,
                             const MatrixView& dh) override;
  void do_time_projection(const MatrixView& m, const float* delta, const float* w, const float* b,
                          const MatrixView& z) override;
  void do_time_projection_backward(const MatrixView& m, const float* delta, const float* w,
                                   const float* b, const MatrixView& dz, const MatrixView& dm,
                                   float* dw, float* db) override;
  void do_gather_rows_into(const MatrixView& src, const NodeId* idx, std::int64_t n,
                           const MatrixView& dst, std::int64_t dst_col) override;
  void do_scatter_add_rows_from(const MatrixView& src, std::int64_t src_col, std::int64_t width,
                                const NodeId* idx, std::int64_t n, const MatrixView& dst) override;
  void do_scale(const MatrixView& X, float alpha) override;
  void do_scatter_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                       const MatrixView& dst) override;
  void do_sum_rows_into(const MatrixView& src, const std::int32_t* first, const std::int32_t* rows,
                        const std::int32_t* divisor, std::int64_t n, const MatrixView& dst,
                        std::int64_t dst_col) override;
  void do_spread_rows(const MatrixView& src, std::int64_t src_col, const std::int32_t* first,
                      const std::int32_t* count, std::int64_t n, const MatrixView& dst) override;
  void do_gat_head_dots(const MatrixView& z, const MatrixView& a, const MatrixView& t) override;
  void do_gat_head_dots_backward(const MatrixView& z, const MatrixView& a, const MatrixView& dt,
                                 const MatrixView& dz, const MatrixView& da) override;
  void do_gat_edge_softmax(const AttentionView& A, const MatrixView& el, const MatrixView& er,
                           float slope, const MatrixView& alpha) override;
  void do_gat_edge_softmax_backward(const AttentionView& A, const MatrixView& el,
                                    const MatrixView& er, float slope, const MatrixView& alpha,
                                    const MatrixView& dalpha, const MatrixView& del,
                                    const MatrixView& der) override;
  void do_gat_aggregate(const AttentionView& A, const MatrixView& alpha, const MatrixView& z,
                        const MatrixView& out) override;
  void do_gat_aggregate_backward(const AttentionView& A, const MatrixView& alpha,
                                 const MatrixView& z, const MatrixView& dout,
                                 const MatrixView& dalpha, const MatrixView& dz) override;
  void do_gat_edge_dropout(const AttentionView& A, const MatrixView& x, float p, PhiloxKey key,
                           const NodeId* ids) override;
  void do_elu(const MatrixView& Y) override;
  void do_elu_backward(const MatrixView& Y, const MatrixView& dY, float y_scale) override;
  // TGN's temporal attention (tgat_ops_cpu.cc / tgat_ops_cuda.cu).
  void do_split_heads(const MatrixView& x, int heads, const MatrixView& out) override;
  void do_merge_heads(const MatrixView& x, int heads, const MatrixView& out,
                      bool accumulate) override;
  void do_copy_columns(const MatrixView& src, std::int64_t src_col, const MatrixView& dst,
                       std::int64_t dst_col, std::int64_t width, bool accumulate) override;
  void do_mask_rows(const MatrixView& X, const std::int32_t* keep) override;
  void do_tgat_attend(const TgatView& v, const float* bv, const MatrixView& alpha,
                      const MatrixView& ctx, const MatrixView& sbar) override;
  void do_tgat_attend_backward(const TgatView& v, const MatrixView& alpha, const MatrixView& dctx,
                               const MatrixView& dsbar, const MatrixView& dQ, const MatrixView& dK,
                               const MatrixView& dV, const MatrixView& dP, const MatrixView& dslots,
                               float* dbk) override;

  // SpMM state (spmm_cuda.cu). An operator: one view of an upload (storage id, pointers,
  // shape; a row slice is its own operator), prepared once for every width: int32 offsets and
  // 16-byte aligned indices and values (a copy when the view's are not). A width plan: the
  // kernel it runs, why, and, for cuSPARSE, its own descriptor (cuSPARSE does not document
  // that preprocess leaves the descriptor untouched, so widths never share one) and work buffer.
  struct SpmmWidthPlan {
    SpmmKernel kernel = SpmmKernel::kAlg3;
    std::string label;                        // the counts' key: "alg3", "own (width 1)", ...
    cusparseConstSpMatDescr_t mat = nullptr;  // this width's descriptor (cuSPARSE plans)
    bool prepared = false;  // bufferSize and preprocess succeeded (on the first aligned call)
    DeviceBuffer work;      // cuSPARSE's external buffer
    SpmmWidthPlan() = default;
    SpmmWidthPlan(const SpmmWidthPlan&) = delete;
    SpmmWidthPlan& operator=(const SpmmWidthPlan&) = delete;
    ~SpmmWidthPlan();
  };
  struct SpmmOperator {
    DeviceBuffer offsets32;                // offsets - offsets[0], rows + 1 entries
    DeviceBuffer aligned;                  // indices then values, when the view's are unaligned
    const NodeId* indices = nullptr;       // A.indices + offsets[0] (or the aligned copy)
    const float* values = nullptr;         // A.values + offsets[0] (or the aligned copy)
    const NodeId* view_indices = nullptr;  // A.indices + offsets[0], as the view has them
    const float* view_values = nullptr;
    std::int64_t nnz = 0;
    std::map<std::int64_t, std::unique_ptr<SpmmWidthPlan>> widths;
    SpmmOperator() = default;
    SpmmOperator(const SpmmOperator&) = delete;
    SpmmOperator& operator=(const SpmmOperator&) = delete;
    ~SpmmOperator();
  };
  // (storage id, offsets, indices, values, rows, cols): the upload and every pointer the
  // descriptor holds. Storage id first, so an upload's operators are one range of the map.
  using SpmmKey =
      std::tuple<std::uint64_t, const void*, const void*, const void*, std::int64_t, std::int64_t>;
  SpmmOperator& spmm_operator(const SparseView& A);
  SpmmWidthPlan& spmm_width_plan(SpmmOperator& op, const SparseView& A, std::int64_t width);
  // bufferSize and preprocess for a cuSPARSE width plan (X, Y: the first aligned call's).
  void spmm_prepare(SpmmWidthPlan& plan, const SparseView& A, const MatrixView& X,
                    const MatrixView& Y);
  void spmm_own_kernel(const SpmmOperator& op, const SparseView& A, const MatrixView& X,
                       const MatrixView& Y);
  // Drops the operators of a released upload (a storage release hook).
  void drop_spmm_operators(std::uint64_t storage_id) noexcept;

 public:
  std::map<std::string, std::int64_t> take_spmm_kernel_counts() override;

 private:
  // Destroys the plans, handles and stream (errors ignored).
  void release() noexcept;

  MatmulPrecision precision_ = MatmulPrecision::kFp32;

  // The scratch buffer, at least `bytes` long (temporaries of one op: partial sums, uploaded
  // per-column statistics, sort buffers). Reused by the next op in stream order.
  char* scratch(std::size_t bytes) { return static_cast<char*>(scratch_.reserve(bytes, stream_)); }
  // Copies n host floats into the scratch at byte offset `at` (stream-ordered).
  const float* upload(char* base, std::size_t at, const float* host, std::int64_t n);
  // Column reductions: Kind 0 = sum of a, 1 = sums of a and a^2, 2 = sums of a and a*h.
  // Results (outputs x cols) go to out_f (device, as float) when given, else to the scratch
  // (double) at the returned pointer.
  template <int Kind>
  const double* reduce_columns(const MatrixView& a, const float* h, float* out_f);
  // Sums n per-row losses and counts (device): fixed chunks reduced on the device into
  // psum/pcount (loss_chunks(n) entries each, device), then the chunks in order on the host.
  double sum_losses(const double* loss, const std::int32_t* count, std::int64_t n, double* psum,
                    long long* pcount, std::int64_t* counted);
  // The loss ops' common frame: zeroes dlogits, lays out per-row loss and count buffers in the
  // scratch, lets launch(loss, count) fill them, and returns their ordered sum.
  template <class Launch>
  double row_losses(const MatrixView& dlogits, std::int64_t nrows, std::int64_t* counted,
                    Launch&& launch);

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cusparseHandle_t cusparse_ = nullptr;
  DeviceBuffer scratch_;
  std::map<SpmmKey, std::unique_ptr<SpmmOperator>> spmm_ops_;
  std::map<std::string, std::int64_t> spmm_counts_;
  SpmmSettings spmm_settings_;  // read from the environment with each new operator
  int release_hook_ = 0;
};

}  // namespace halo

// The CPU backend's class (private to gnn/src): kernels live in cpu_backend.cc and spmm_cpu.cc.
#pragma once

#include "halo/gnn/backend.h"

namespace halo {

// Element-wise ops over fewer elements than this run on the calling thread. Below it a split
// over two threads saves under ~8 us of memory-bound work on an idle core, while each parallel
// region is a fork and a join: ~1-2 us idle, but up to a scheduler slice (ms) when another
// process holds one of the cores (measured on the 2-core AMD EPYC VM: TGN's batch-200 add_bias,
// 120k floats, 11 us on one thread, 780 us per call on two under load). TGN's per-batch
// element-wise ops at batch 200 fall below it; full-graph ones stay parallel. Element-wise work
// gives the same bits on any thread count, so the split is a matter of time only.
constexpr std::int64_t kSerialElements = std::int64_t(1) << 17;

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  const char* name() const override { return "cpu"; }
  // fp32 (OpenBLAS, or halo's AVX-512 kernel for tall products) or bf16 (halo's AVX-512 kernels
  // where the CPU has AVX-512 BF16; the first bf16 call picks dot or fma: cpu_bf16.h).
  void set_matmul_precision(MatmulPrecision p) override;
  MatmulPrecision matmul_precision() const override { return precision_; }

 private:
  // The ops (backend.h); shapes are checked before they are called.
  void do_spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) override;
  void do_spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y) override;
  void do_gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
               const MatrixView& C) override;
  void do_add_bias(const MatrixView& Y, const float* b) override;
  void do_column_sums(const MatrixView& X, float* out) override;
  void do_relu(const MatrixView& Y) override;
  void do_relu_backward(const MatrixView& Y, const MatrixView& dY) override;
  void do_bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                           const MatrixView& dY) override;
  void do_dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) override;
  void do_batch_norm_relu_dropout(const MatrixView& X, const float* mean, const float* inv_std,
                                  const float* gamma, const float* beta, const MatrixView* xhat,
                                  const MatrixView& Y, float p, PhiloxKey key,
                                  const NodeId* row_ids, KeepBits* bits) override;
  void do_batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                           const float* beta, float p, PhiloxKey key,
                                           const NodeId* row_ids, const MatrixView& dY,
                                           double* sum_dy, double* sum_dy_xhat,
                                           KeepBits* bits) override;
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
  void do_adam_all(const AdamTensor* t, std::size_t count, const AdamStep& s) override;
  void do_gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                      const MatrixView& dst) override;
  void do_scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                           const MatrixView& dst) override;
  void do_add(const MatrixView& src, const MatrixView& dst) override;
  void do_copy(const MatrixView& src, const MatrixView& dst) override;
  void do_smooth(const MatrixView& x, float gamma, const MatrixView& avg) override;
  void do_fill(const MatrixView& X, float v) override;
  void do_scale(const MatrixView& X, float alpha) override;
  void do_pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) override;
  void do_unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) override;
  // Temporal GNNs (temporal_ops_cpu.cc).
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

  MatmulPrecision precision_ = MatmulPrecision::kFp32;
};

}  // namespace halo

// The CPU backend's class (private to gnn/src): kernels live in cpu_backend.cc and spmm_cpu.cc.
#pragma once

#include "halo/gnn/backend.h"

namespace halo {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  const char* name() const override { return "cpu"; }
  void spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) override;
  void spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y) override;
  // fp32 (OpenBLAS) or bf16 (halo's AVX-512 BF16 kernel, where the CPU has it).
  void set_matmul_precision(MatmulPrecision p) override;
  MatmulPrecision matmul_precision() const override { return precision_; }
  void gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
            const MatrixView& C) override;
  void add_bias(const MatrixView& Y, const float* b) override;
  void column_sums(const MatrixView& X, float* out) override;
  void relu(const MatrixView& Y) override;
  void relu_backward(const MatrixView& Y, const MatrixView& dY) override;
  void bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                        const MatrixView& dY) override;
  void dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) override;
  void batch_norm_relu_dropout(const MatrixView& X, const float* mean, const float* inv_std,
                               const float* gamma, const float* beta, const MatrixView* xhat,
                               const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids,
                               KeepBits* bits = nullptr) override;
  void batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                        const float* beta, float p, PhiloxKey key,
                                        const NodeId* row_ids, const MatrixView& dY, double* sum_dy,
                                        double* sum_dy_xhat, KeepBits* bits = nullptr) override;
  void column_moments(const MatrixView& X, double* sum, double* sumsq) override;
  void batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                        const float* gamma, const float* beta, const MatrixView* xhat,
                        const MatrixView& Y) override;
  void batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat, double* sum_dy,
                            double* sum_dy_xhat) override;
  void batch_norm_backward(const MatrixView& dY, const MatrixView& xhat, const float* gamma,
                           const float* inv_std, const float* mean_dy, const float* mean_dy_xhat,
                           const MatrixView& dX) override;
  double softmax_xent(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                      std::int64_t nrows, double denom, const MatrixView& dlogits,
                      std::int64_t* counted) override;
  double bce_logits(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                    std::int64_t nrows, double denom, const MatrixView& dlogits,
                    std::int64_t* counted) override;
  void adam(float* p, const float* g, float* m, float* v, std::int64_t n,
            const AdamStep& s) override;
  void gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                   const MatrixView& dst) override;
  void scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                        const MatrixView& dst) override;
  void add(const MatrixView& src, const MatrixView& dst) override;
  void copy(const MatrixView& src, const MatrixView& dst) override;
  void fill(const MatrixView& X, float v) override;
  void pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) override;
  void unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) override;

 private:
  MatmulPrecision precision_ = MatmulPrecision::kFp32;
};

}  // namespace halo

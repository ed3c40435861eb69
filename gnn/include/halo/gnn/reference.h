// Plain reference implementations of the Backend's kernels: the obvious loops, in double where
// it matters, no threads. They are the oracle every fast kernel (CPU now, CUDA later) is tested
// against with tolerance atol + rtol * |ref|.
#pragma once

#include <vector>

#include "halo/gnn/backend.h"

namespace halo::ref {

// Y = A X.
Matrix spmm(const SparseView& A, const Matrix& X);
// C = op(A) op(B).
Matrix gemm(bool ta, bool tb, const Matrix& A, const Matrix& B);
// Keep mask of dropout (1 kept, 0 dropped) for rows with the given ids.
Matrix dropout_mask(std::int64_t rows, std::int64_t cols, float p, PhiloxKey key,
                    const NodeId* row_ids);
// Softmax cross-entropy sum over rows and its gradient / denom.
double softmax_xent(const Matrix& logits, const std::vector<std::int32_t>& labels,
                    const std::vector<NodeId>& rows, double denom, Matrix* dlogits);
double bce_logits(const Matrix& logits, const std::vector<std::int32_t>& labels,
                  const std::vector<NodeId>& rows, double denom, Matrix* dlogits);
// Batch norm over all rows with biased variance: returns Y, writes xhat.
Matrix batch_norm(const Matrix& X, const std::vector<float>& gamma, const std::vector<float>& beta,
                  float eps, Matrix* xhat);

}  // namespace halo::ref

// CPU SpMM: Y = A X over CSR, row-parallel (each thread owns whole output rows: no atomics),
// dynamically scheduled in small row blocks so skewed degrees balance, inner loop vectorised
// over the feature dimension. Rows are accumulated in the order of their nonzeros, so the result
// is bitwise deterministic whatever the thread count.
#include <cstring>

#include "cpu_backend.h"

namespace halo {

void CpuBackend::spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  const std::int64_t f = X.cols;
  const float* __restrict x = X.data;
#pragma omp parallel for schedule(dynamic, 32)
  for (std::int64_t r = 0; r < A.rows; ++r) {
    float* __restrict y = Y.data + r * f;
    const EdgeId b = A.offsets[r], e = A.offsets[r + 1];
    if (b == e) {
      std::memset(y, 0, sizeof(float) * std::size_t(f));
      continue;
    }
    {
      const float w = A.values[b];
      const float* __restrict xr = x + std::int64_t(A.indices[b]) * f;
#pragma omp simd
      for (std::int64_t c = 0; c < f; ++c) y[c] = w * xr[c];
    }
    for (EdgeId k = b + 1; k < e; ++k) {
      const float w = A.values[k];
      const float* __restrict xr = x + std::int64_t(A.indices[k]) * f;
#pragma omp simd
      for (std::int64_t c = 0; c < f; ++c) y[c] += w * xr[c];
    }
  }
}

}  // namespace halo

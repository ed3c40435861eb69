// CPU SpMM: Y = A X over CSR, row-parallel (each thread owns whole output rows: no atomics),
// dynamically scheduled in small row blocks so skewed degrees balance, inner loop vectorised
// over the feature dimension. Rows are accumulated in the order of their nonzeros, so the result
// is bitwise deterministic whatever the thread count.
//
// Measured choices (tools/bench/train.sh, docs/BENCHMARKS.md):
// - Columns are processed in blocks of at most 256 with the block's sums in a local array (hot in
//   L1), instead of read-modify-writing Y per nonzero. One pass over a 256-wide row rather than
//   two of 128 gathers each neighbour row once, as one contiguous 1 KiB run: 1.2-1.3x at width
//   256 on a locality-ordered arxiv-sized graph, 1.1-1.2x on random ids.
// - The rows of X a row gathers are scattered through memory, so the kernel waits on those
//   gathers: it prefetches the X row `distance` nonzeros ahead, 1.3-2x faster than the hardware
//   prefetcher alone. Up to 128 columns: the first 4 cache lines, about 4 KiB ahead (4 to 16
//   nonzeros); wider blocks: the whole block row, about 8 KiB ahead.
#include <algorithm>
#include <cstring>

#include "cpu_backend.h"

namespace halo {

void CpuBackend::spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  constexpr std::int64_t kBlock = 256;
  const std::int64_t f = X.cols;
  const float* __restrict x = X.data;
  const EdgeId nnz = A.nnz();
  for (std::int64_t c0 = 0; c0 < f; c0 += kBlock) {
    const std::int64_t w = std::min(kBlock, f - c0);
    const bool wide = w > 128;
    const EdgeId distance = std::clamp<EdgeId>((wide ? 8192 : 4096) / (w * 4), 4, 16);
    const int lines = int(std::min<std::int64_t>(wide ? 16 : 4, (w * 4 + 63) / 64));
#pragma omp parallel for schedule(dynamic, 32)
    for (std::int64_t r = 0; r < A.rows; ++r) {
      alignas(32) float acc[kBlock];
      std::memset(acc, 0, sizeof(float) * std::size_t(w));
      for (EdgeId k = A.offsets[r]; k < A.offsets[r + 1]; ++k) {
        if (k + distance < nnz) {
          const char* next = reinterpret_cast<const char*>(x + std::int64_t(A.indices[k + distance]) * f + c0);
          for (int l = 0; l < lines; ++l) __builtin_prefetch(next + 64 * l);
        }
        const float wt = A.values[k];
        const float* __restrict xr = x + std::int64_t(A.indices[k]) * f + c0;
#pragma omp simd
        for (std::int64_t c = 0; c < w; ++c) acc[c] += wt * xr[c];
      }
      std::memcpy(Y.data + r * f + c0, acc, sizeof(float) * std::size_t(w));
    }
  }
}

}  // namespace halo

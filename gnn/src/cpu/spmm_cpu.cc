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
// - On CPUs with AVX-512 a column block of up to 256 is summed in zmm registers (16 of them)
//   instead of the L1 array: 98 -> 71 ms at width 256 on the METIS-ordered arxiv-sized graph.
//   Same products in the same order with the same fused multiply-adds, so the same bits.
#include <algorithm>
#include <cstring>
#include <utility>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HALO_SPMM_AVX512 1
#else
#define HALO_SPMM_AVX512 0
#endif

#include "cpu/cpu_backend.h"

namespace halo {
namespace {

#if HALO_SPMM_AVX512
#define HALO_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

bool has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return yes;
}

// 16 elements of a row of X as floats (the lanes outside `mask` zero): float rows as they are,
// bfloat16 rows (X rounded in place by spmm_consume) widened exactly.
HALO_AVX512 inline __m512 load16(const float* p, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, p);
}
HALO_AVX512 inline __m512 load16(const std::uint16_t* p, __mmask16 mask) {
  // (maskz forms: GCC 12 warns about the unmasked ones' undefined pass-through operand)
  const __m512i wide =
      _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), _mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16(0xffff), wide, 16));
}

// Rows [r0, r1) of Y[:, c0, c0 + w) = A X[:, c0, c0 + w), w <= 16 NV, sums in NV registers. X
// holds T elements, `stride` of them per row: floats (stride f), or bfloat16 in the first half of
// each float row (stride 2f), so a row gathers half the cache lines.
template <class T, int NV>
HALO_AVX512 void spmm_rows(const SparseView& A, const T* __restrict x, std::int64_t stride,
                           std::int64_t f, std::int64_t c0, std::int64_t w, float* y,
                           std::int64_t r0, std::int64_t r1, EdgeId distance, int lines) {
  const EdgeId nnz = A.nnz();
  const __mmask16 tail =
      __mmask16((w - 16 * (NV - 1)) >= 16 ? 0xffff : (1u << (w - 16 * (NV - 1))) - 1u);
  for (std::int64_t r = r0; r < r1; ++r) {
    __m512 acc[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
    for (EdgeId k = A.offsets[r]; k < A.offsets[r + 1]; ++k) {
      if (k + distance < nnz) {
        const char* next =
            reinterpret_cast<const char*>(x + std::int64_t(A.indices[k + distance]) * stride + c0);
        for (int l = 0; l < lines; ++l) __builtin_prefetch(next + 64 * l);
      }
      const __m512 wt = _mm512_set1_ps(A.values[k]);
      const T* __restrict xr = x + std::int64_t(A.indices[k]) * stride + c0;
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v)
        acc[v] =
            _mm512_fmadd_ps(wt, load16(xr + 16 * v, v + 1 < NV ? __mmask16(0xffff) : tail), acc[v]);
    }
    float* yr = y + r * f + c0;
#pragma GCC unroll 16
    for (int v = 0; v + 1 < NV; ++v) _mm512_storeu_ps(yr + 16 * v, acc[v]);
    _mm512_mask_storeu_ps(yr + 16 * (NV - 1), tail, acc[NV - 1]);
  }
}

// Rounds row r of X (f floats) to bfloat16, nearest even, into the row's own first 2f bytes:
// each 32-float chunk is read before any write reaches it.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_rows_to_bf16(
    float* x, std::int64_t f, std::int64_t r0, std::int64_t r1) {
  for (std::int64_t r = r0; r < r1; ++r) {
    float* row = x + r * f;
    auto* out = reinterpret_cast<std::uint16_t*>(row);
    for (std::int64_t c = 0; c < f; c += 32) {
      const std::int64_t n = std::min<std::int64_t>(32, f - c);
      const __mmask16 lo = __mmask16(n >= 16 ? 0xffff : (1u << n) - 1u);
      const __mmask16 hi = __mmask16(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1u : 0u);
      const __m512 a = _mm512_maskz_loadu_ps(lo, row + c),
                   b = _mm512_maskz_loadu_ps(hi, row + c + 16);
      const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(b, a);
      _mm512_mask_storeu_epi16(out + c, n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1u, h);
    }
  }
}

template <class T>
using RowsKernel = void (*)(const SparseView&, const T*, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, float*, std::int64_t, std::int64_t, EdgeId, int);

// spmm_rows<T, nv> for nv in 1..16.
template <class T, int... NV>
constexpr RowsKernel<T> pick_kernel(int nv, std::integer_sequence<int, NV...>) {
  RowsKernel<T> k = nullptr;
  ((nv == NV + 1 ? (k = &spmm_rows<T, NV + 1>, 0) : 0), ...);
  return k;
}
#endif

// Prefetch distance (nonzeros ahead) and cache lines per gathered row for a block of `bytes`
// bytes per row (see the top of the file). A struct, not a pair unpacked by a structured
// binding: OpenMP regions cannot capture structured bindings before clang 16 (clang-tidy-14).
struct PrefetchPlan {
  EdgeId distance;
  int lines;
};
PrefetchPlan prefetch_plan(std::int64_t bytes) {
  const bool wide = bytes > 512;
  return {std::clamp<EdgeId>((wide ? 8192 : 4096) / bytes, 4, 16),
          int(std::min<std::int64_t>(wide ? 16 : 4, (bytes + 63) / 64))};
}

#if HALO_SPMM_AVX512
// Y = A X over X's T elements (stride per row), in column blocks of up to 256, 32 rows per task.
template <class T>
void spmm_avx512(const SparseView& A, const T* x, std::int64_t stride, std::int64_t f, float* y) {
  for (std::int64_t c0 = 0; c0 < f; c0 += 256) {
    const std::int64_t w = std::min<std::int64_t>(256, f - c0);
    const PrefetchPlan plan = prefetch_plan(w * std::int64_t(sizeof(T)));
    const RowsKernel<T> kernel =
        pick_kernel<T>(int((w + 15) / 16), std::make_integer_sequence<int, 16>{});
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t r = 0; r < A.rows; r += 32)
      kernel(A, x, stride, f, c0, w, y, r, std::min(A.rows, r + 32), plan.distance, plan.lines);
  }
}
#endif

}  // namespace

void CpuBackend::do_spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  constexpr std::int64_t kBlock = 256;
  const std::int64_t f = X.cols;
  const float* __restrict x = X.data;
#if HALO_SPMM_AVX512
  if (has_avx512()) return spmm_avx512(A, x, f, f, Y.data);
#endif
  const EdgeId nnz = A.nnz();
  for (std::int64_t c0 = 0; c0 < f; c0 += kBlock) {
    const std::int64_t w = std::min(kBlock, f - c0);
    const PrefetchPlan plan = prefetch_plan(w * 4);
#pragma omp parallel for schedule(dynamic, 32)
    for (std::int64_t r = 0; r < A.rows; ++r) {
      alignas(32) float acc[kBlock];
      std::memset(acc, 0, sizeof(float) * std::size_t(w));
      for (EdgeId k = A.offsets[r]; k < A.offsets[r + 1]; ++k) {
        if (k + plan.distance < nnz) {
          const char* next = reinterpret_cast<const char*>(
              x + std::int64_t(A.indices[k + plan.distance]) * f + c0);
          for (int l = 0; l < plan.lines; ++l) __builtin_prefetch(next + 64 * l);
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

void CpuBackend::do_spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
#if HALO_SPMM_AVX512
  // bf16 implies AVX-512 BF16 (set_matmul_precision checked it), hence AVX-512 F, BW and VL.
  if (precision_ == MatmulPrecision::kBf16) {
    const std::int64_t f = X.cols;
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < X.rows; r += 64)
      round_rows_to_bf16(X.data, f, r, std::min(X.rows, r + 64));
    return spmm_avx512(A, reinterpret_cast<const std::uint16_t*>(X.data), 2 * f, f, Y.data);
  }
#endif
  spmm(A, X, Y);
}

}  // namespace halo

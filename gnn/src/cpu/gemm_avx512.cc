// GEMM on AVX-512: mixed precision with AVX-512 BF16, and the same blocking in FP32 for tall
// products (see gemm_avx512.h). The FP32 twin (Fp32Math below) packs floats where bf16 packs pairs
// and runs fused multiply-adds one k at a time; everything said below of pairs holds for it
// with "one k" in place of "a pair".
//
// vdpbf16ps multiplies 16 pairs of bfloat16 and adds each pair's two products into one float32
// lane, so both operands are packed in pairs along the reduction dimension k: a "word" is two
// bfloat16 (k even in the low half, k + 1 in the high half). The micro-kernel keeps a 6 x 64 tile
// of C in 24 zmm registers; per k-pair it loads 4 vectors of packed B (64 columns) and broadcasts
// one word of A per row: 24 dot products per 10 loads, at one vdpbf16ps per cycle per core.
//
// Two drivers:
// - A not transposed (the forward T = H W and dX = dY W^T: thousands of rows): threads split the
//   rows; each converts blocks of 96 rows of A to bfloat16 (a row of A is its own words) and
//   multiplies them by the whole of B, packed once per call.
// - A transposed (the weight gradient dW = H^T dY: a small output, k = the node count): threads
//   split k; each packs blocks of 256 k into pair words for A and B and accumulates a private
//   copy of C, and the copies are summed in thread order (deterministic for a thread count).
//
// Everything that executes AVX-512 carries HALO_AVX512_TARGET (HALO_BF16_TARGET where it
// executes AVX-512 BF16) instead of a file-wide -m flag, so nothing else in the program can pick
// up instructions a CPU without them lacks; OpenMP regions only call such functions (their
// outlined bodies do not inherit the target).
#include "cpu/gemm_avx512.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HALO_BF16_KERNEL 1
#include <immintrin.h>
#define HALO_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define HALO_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#else
#define HALO_BF16_KERNEL 0
#endif

namespace halo::detail {

float round_to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) {  // inf stays, NaN stays a NaN
    if (u & 0x007fffffu) u |= 0x00400000u;
  } else if ((u & 0x7f800000u) == 0) {
    u &= 0x80000000u;  // subnormal: signed zero
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);  // nearest, ties to even
  }
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

#if HALO_BF16_KERNEL

bool fp32_gemm_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool bf16_gemm_supported() { return fp32_gemm_supported() && __builtin_cpu_supports("avx512bf16"); }

namespace {

using Word = std::uint32_t;
constexpr int kMr = 6;                    // rows of the register tile
constexpr int kPanel = 64;                // columns of a packed B panel (4 vectors of 16)
constexpr std::int64_t kRowBlock = 96;    // rows of A converted at a time (16 tiles)
constexpr std::int64_t kPairBlock = 128;  // k-pairs per block: 256 k

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Mask of the first n of 16 lanes.
inline __mmask16 lanes(std::int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u);
}

// out[j] = (bf16(r0[j]), bf16(r1[j])) for j < n, zeros up to width (a multiple of 16); r1 may be
// null (an odd k's missing partner).
HALO_BF16_TARGET void interleave_pairs(const float* r0, const float* r1, std::int64_t n,
                                       std::int64_t width, Word* out) {
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (std::int64_t j = 0; j < width; j += 16) {
    const __mmask16 m = j < n ? lanes(n - j) : __mmask16(0);
    const __m512 a = _mm512_maskz_loadu_ps(m, r0 + j);
    const __m512 b = r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
    // Low 16 halves: a; high 16: b. Then a0 b0 a1 b1 ...
    const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(b, a);
    _mm512_storeu_si512(out + j, _mm512_permutexvar_epi16(order, h));
  }
}

// out = bf16 of x[0, n), zero-padded to 2 * words halves: a row of A is its own words.
HALO_BF16_TARGET void convert_row(const float* x, std::int64_t n, std::int64_t words, Word* out) {
  for (std::int64_t w = 0; w < words; w += 16) {
    const std::int64_t k = 2 * w;
    const __m512 lo = _mm512_maskz_loadu_ps(k < n ? lanes(n - k) : 0, x + k);
    const __m512 hi = _mm512_maskz_loadu_ps(k + 16 < n ? lanes(n - k - 16) : 0, x + k + 16);
    const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    const __mmask16 m = lanes(words - w);
    _mm512_mask_storeu_epi32(out + w, m, h);
  }
}

// C's tile rows: alpha acc (+ beta C), the first `cols` columns of the first `rows` rows.
template <int NV>
HALO_AVX512_TARGET inline void store_tile(const __m512 (&acc)[kMr][NV], float* c, std::int64_t ldc,
                                          std::int64_t rows, std::int64_t cols, float alpha,
                                          float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < kMr; ++i) {
    if (i >= rows) break;
    float* cr = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (16 * v >= cols) break;
      const __mmask16 m = lanes(cols - 16 * v);
      __m512 r = _mm512_mul_ps(va, acc[i][v]);
      if (beta != 0.f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cr + 16 * v), r);
      _mm512_mask_storeu_ps(cr + 16 * v, m, r);
    }
  }
}

// Starts a register tile: zero sums, the tile rows' A words (row i at a + i * ai), and C's lines
// fetched now, while the loop computes, instead of stalling on the stores at the end (C is
// usually not in cache).
template <int NV>
HALO_AVX512_TARGET inline void start_tile(__m512 (&acc)[kMr][NV], const Word* (&a_row)[kMr],
                                          const Word* a, std::int64_t ai, const float* c,
                                          std::int64_t ldc, std::int64_t rows) {
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int i = 0; i < kMr; ++i) a_row[i] = a + i * ai;
  for (int i = 0; i < kMr && i < rows; ++i)
    for (int v = 0; v < NV; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
}

// C[rows x cols] (leading dimension ldc) = alpha * sum over q < pairs of A-words x B-words
// (+ beta C). A's word for tile row i and pair q sits at a[i * ai + q * aq]; B's 64-column panel
// holds pair q at b + 64 q. NV vectors of 16 columns are computed (cols <= 16 NV).
template <int NV>
HALO_BF16_TARGET void micro_kernel(std::int64_t pairs, const Word* a, std::int64_t ai,
                                   std::int64_t aq, const Word* b, float* c, std::int64_t ldc,
                                   std::int64_t rows, std::int64_t cols, float alpha, float beta) {
  __m512 acc[kMr][NV];
  const Word* a_row[kMr];
  start_tile<NV>(acc, a_row, a, ai, c, ldc, rows);
  for (std::int64_t q = 0; q < pairs; ++q) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + q * kPanel + 16 * v);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a_row[i][q * aq]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  store_tile<NV>(acc, c, ldc, rows, cols, alpha, beta);
}

// The FP32 twin: a word is one float, one k per step, fused multiply-adds.
template <int NV>
HALO_AVX512_TARGET void micro_kernel_fp32(std::int64_t steps, const Word* a, std::int64_t ai,
                                          std::int64_t aq, const Word* b, float* c,
                                          std::int64_t ldc, std::int64_t rows, std::int64_t cols,
                                          float alpha, float beta) {
  __m512 acc[kMr][NV];
  const Word* a_row[kMr];
  start_tile<NV>(acc, a_row, a, ai, c, ldc, rows);
  for (std::int64_t q = 0; q < steps; ++q) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = _mm512_loadu_ps(reinterpret_cast<const float*>(b + q * kPanel + 16 * v));
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_castsi512_ps(_mm512_set1_epi32(int(a_row[i][q * aq])));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  store_tile<NV>(acc, c, ldc, rows, cols, alpha, beta);
}

// round_to_bf16 on 16 lanes, in AVX-512 F integer operations (the fma kernel runs where
// vcvtneps2bf16 may be slow or absent, and must round exactly as the dot kernel's conversion).
HALO_AVX512_TARGET inline __m512 round_lanes_to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i exp = _mm512_and_si512(u, _mm512_set1_epi32(0x7f800000));
  const __mmask16 special = _mm512_cmpeq_epi32_mask(exp, _mm512_set1_epi32(0x7f800000));
  const __mmask16 tiny = _mm512_cmpeq_epi32_mask(exp, _mm512_setzero_si512());
  const __mmask16 nan = _mm512_mask_test_epi32_mask(special, u, _mm512_set1_epi32(0x007fffff));
  // maskz: GCC 12's plain _mm512_srli_epi32 trips -Wuninitialized on its undefined operand.
  const __m512i odd =
      _mm512_and_si512(_mm512_maskz_srli_epi32(__mmask16(0xffff), u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
  r = _mm512_mask_mov_epi32(r, special, u);                                   // inf stays
  r = _mm512_mask_or_epi32(r, nan, r, _mm512_set1_epi32(0x00400000));         // NaN stays a NaN
  r = _mm512_mask_and_epi32(r, tiny, u, _mm512_set1_epi32(int(0x80000000)));  // signed zero
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(int(0xffff0000))));
}

// out[j] = x[j] for j < n as words (rounded to bfloat16 when Round), zeros up to `words`.
template <bool Round>
HALO_AVX512_TARGET void copy_row(const float* x, std::int64_t n, std::int64_t words, Word* out) {
  for (std::int64_t w = 0; w < words; w += 16) {
    __m512 v = _mm512_maskz_loadu_ps(w < n ? lanes(n - w) : 0, x + w);
    if constexpr (Round) v = round_lanes_to_bf16(v);
    _mm512_mask_storeu_ps(reinterpret_cast<float*>(out + w), lanes(words - w), v);
  }
}

// The two arithmetics the drivers below are written for. A "word" holds kPerWord consecutive k
// of one row of op(A) or column of op(B); pack_row packs a row of A (its own words), pack_rows
// the words of k-rows r0 (and r1 = r0's successor, bf16 only) across columns, and tile runs one
// register tile against one B panel of `cols` columns (up to 64).
struct Bf16Math {
  static constexpr std::int64_t kPerWord = 2;
  static void pack_row(const float* x, std::int64_t n, std::int64_t words, Word* out) {
    convert_row(x, n, words, out);
  }
  static void pack_rows(const float* r0, const float* r1, std::int64_t n, std::int64_t width,
                        Word* out) {
    interleave_pairs(r0, r1, n, width, out);
  }
  HALO_BF16_TARGET static void tile(std::int64_t steps, const Word* a, std::int64_t ai,
                                    std::int64_t aq, const Word* b, float* c, std::int64_t ldc,
                                    std::int64_t rows, std::int64_t cols, float alpha, float beta) {
    switch (ceil_div(cols, 16)) {
      case 1:
        micro_kernel<1>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
      case 2:
        micro_kernel<2>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
      case 3:
        micro_kernel<3>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
      default:
        micro_kernel<4>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
    }
  }
};

// FP32 arithmetic; with Round, on the inputs rounded to bfloat16 as they are packed (the fma
// kernel of --matmul-precision bf16: a product of two bfloat16 is exact in float32, so it rounds
// the inputs as Bf16Math does and sums one k at a time, at the FP32 rate).
template <bool Round>
struct Fp32Math {
  static constexpr std::int64_t kPerWord = 1;
  static void pack_row(const float* x, std::int64_t n, std::int64_t words, Word* out) {
    copy_row<Round>(x, n, words, out);
  }
  static void pack_rows(const float* r0, const float*, std::int64_t n, std::int64_t width,
                        Word* out) {
    copy_row<Round>(r0, n, width, out);
  }
  HALO_AVX512_TARGET static void tile(std::int64_t steps, const Word* a, std::int64_t ai,
                                      std::int64_t aq, const Word* b, float* c, std::int64_t ldc,
                                      std::int64_t rows, std::int64_t cols, float alpha,
                                      float beta) {
    switch (ceil_div(cols, 16)) {
      case 1:
        micro_kernel_fp32<1>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
      case 2:
        micro_kernel_fp32<2>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
      case 3:
        micro_kernel_fp32<3>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
      default:
        micro_kernel_fp32<4>(steps, a, ai, aq, b, c, ldc, rows, cols, alpha, beta);
        break;
    }
  }
};

// op(B)'s words [q0, q0 + pairs) as panels: panel p's word q at out + (p * pairs + q) * 64.
template <class Math>
void pack_b(const MatrixView& B, bool tb, std::int64_t k_total, std::int64_t q0, std::int64_t pairs,
            std::int64_t n, Word* out) {
  constexpr std::int64_t per = Math::kPerWord;
  const std::int64_t panels = ceil_div(n, kPanel);
  if (!tb) {  // B is k x n: word q packs rows per * q (and its successor), read once for all panels
    for (std::int64_t q = 0; q < pairs; ++q)
      for (std::int64_t p = 0; p < panels; ++p) {
        const std::int64_t k = per * (q0 + q), j = p * kPanel;
        Math::pack_rows(B.row(k) + j, per == 2 && k + 1 < k_total ? B.row(k + 1) + j : nullptr,
                        std::min<std::int64_t>(kPanel, n - j), kPanel,
                        out + (p * pairs + q) * kPanel);
      }
    return;
  }
  // B is n x k: column j of op(B) is row j of B, which packs into its own words.
  std::vector<Word> row(static_cast<std::size_t>(pairs + 16));
  std::fill(out, out + panels * pairs * kPanel, Word(0));
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t k0 = per * q0;
    Math::pack_row(B.row(j) + k0, std::min(k_total - k0, per * pairs), pairs, row.data());
    Word* dst = out + (j / kPanel) * pairs * kPanel + j % kPanel;
    for (std::int64_t q = 0; q < pairs; ++q) dst[q * kPanel] = row[static_cast<std::size_t>(q)];
  }
}

// Rows [r0, r1) of C from A not transposed (see the top of the file). bp: all of op(B) packed.
template <class Math>
void rows_worker(const MatrixView& A, const Word* bp, std::int64_t k, std::int64_t n, float alpha,
                 float beta, const MatrixView& C, std::int64_t r0, std::int64_t r1) {
  constexpr std::int64_t per = Math::kPerWord;
  const std::int64_t pairs_all = ceil_div(k, per), panels = ceil_div(n, kPanel);
  const std::int64_t block_pairs = std::min(pairs_all, kPairBlock * 2);
  std::vector<Word> ap(static_cast<std::size_t>(kRowBlock * block_pairs + 16));
  for (std::int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const std::int64_t rows = std::min(kRowBlock, r1 - rb);
    for (std::int64_t qb = 0; qb < pairs_all; qb += block_pairs) {
      const std::int64_t pairs = std::min(block_pairs, pairs_all - qb);
      for (std::int64_t i = 0; i < rows; ++i)
        Math::pack_row(A.row(rb + i) + per * qb, std::min(k - per * qb, per * pairs), pairs,
                       ap.data() + i * pairs);
      std::fill(ap.begin() + rows * pairs, ap.begin() + ceil_div(rows, kMr) * kMr * pairs, Word(0));
      const float bt = qb == 0 ? beta : 1.f;
      for (std::int64_t p = 0; p < panels; ++p) {
        const Word* b = bp + (p * pairs_all + qb) * kPanel;
        const std::int64_t cols = std::min<std::int64_t>(kPanel, n - p * kPanel);
        for (std::int64_t i = 0; i < rows; i += kMr)
          Math::tile(pairs, ap.data() + i * pairs, pairs, 1, b, C.row(rb + i) + p * kPanel, C.cols,
                     std::min<std::int64_t>(kMr, rows - i), cols, alpha, bt);
      }
    }
  }
}

// Words [q0, q1) of the reduction for A transposed, into acc (m x n, overwritten).
template <class Math>
void pairs_worker(const MatrixView& A, const MatrixView& B, bool tb, std::int64_t k, std::int64_t m,
                  std::int64_t n, std::int64_t q0, std::int64_t q1, float* acc) {
  constexpr std::int64_t per = Math::kPerWord;
  const std::int64_t panels = ceil_div(n, kPanel), mp = ceil_div(m, kMr) * kMr;
  const std::int64_t width = ceil_div(mp, 16) * 16;
  std::vector<Word> ap(static_cast<std::size_t>(kPairBlock * width));
  std::vector<Word> bp(static_cast<std::size_t>(panels * kPairBlock * kPanel));
  if (q0 >= q1) std::fill(acc, acc + m * n, 0.f);
  for (std::int64_t qb = q0; qb < q1; qb += kPairBlock) {
    const std::int64_t pairs = std::min(kPairBlock, q1 - qb);
    // A is k x m: op(A)'s row i is column i of A; word q packs rows per * q (and its successor).
    for (std::int64_t q = 0; q < pairs; ++q) {
      const std::int64_t kk = per * (qb + q);
      Math::pack_rows(A.row(kk), per == 2 && kk + 1 < k ? A.row(kk + 1) : nullptr, m, width,
                      ap.data() + q * width);
    }
    pack_b<Math>(B, tb, k, qb, pairs, n, bp.data());
    const float bt = qb == q0 ? 0.f : 1.f;
    for (std::int64_t p = 0; p < panels; ++p) {
      const std::int64_t cols = std::min<std::int64_t>(kPanel, n - p * kPanel);
      for (std::int64_t i = 0; i < m; i += kMr)
        Math::tile(pairs, ap.data() + i, 1, width, bp.data() + p * pairs * kPanel,
                   acc + i * n + p * kPanel, n, std::min<std::int64_t>(kMr, m - i), cols, 1.f, bt);
    }
  }
}

// C = alpha * (sum of the threads' partial products, in thread order) + beta C, rows [r0, r1).
HALO_AVX512_TARGET void combine(const std::vector<std::vector<float>>& parts, float alpha,
                                float beta, const MatrixView& C, std::int64_t r0, std::int64_t r1) {
  const std::int64_t n = C.cols;
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t j = 0; j < n; j += 16) {
      const __mmask16 mk = lanes(n - j);
      __m512 s = _mm512_maskz_loadu_ps(mk, parts[0].data() + r * n + j);
      for (std::size_t t = 1; t < parts.size(); ++t)
        s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mk, parts[t].data() + r * n + j));
      s = _mm512_mul_ps(_mm512_set1_ps(alpha), s);
      if (beta != 0.f)
        s = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk, C.row(r) + j), s);
      _mm512_mask_storeu_ps(C.row(r) + j, mk, s);
    }
}

// The driver for either arithmetic (see gemm_bf16 and gemm_fp32).
template <class Math>
bool gemm_avx512(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B,
                 float beta, const MatrixView& C) {
  const std::int64_t m = C.rows, n = C.cols, k = ta ? A.rows : A.cols;
  if (m == 0 || n == 0 || k == 0)
    return false;  // nothing to multiply: the caller's FP32 path scales C
  const int threads = omp_get_max_threads();
  if (!ta) {
    const std::int64_t pairs = ceil_div(k, Math::kPerWord), panels = ceil_div(n, kPanel);
    std::vector<Word> bp(static_cast<std::size_t>(panels * pairs * kPanel));
    pack_b<Math>(B, tb, k, 0, pairs, n, bp.data());
    const std::int64_t tiles = ceil_div(m, kMr);
#pragma omp parallel num_threads(threads)
    {
      const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const std::int64_t r0 = std::min(m, tiles * t / nt * kMr),
                         r1 = std::min(m, tiles * (t + 1) / nt * kMr);
      if (r0 < r1) rows_worker<Math>(A, bp.data(), k, n, alpha, beta, C, r0, r1);
    }
    return true;
  }
  if (m * n > (std::int64_t(1) << 22)) return false;
  const std::int64_t pairs = ceil_div(k, Math::kPerWord);
  std::vector<std::vector<float>> parts(static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    auto& acc = parts[static_cast<std::size_t>(t)];
    acc.resize(static_cast<std::size_t>(m * n));
    pairs_worker<Math>(A, B, tb, k, m, n, pairs * t / nt, pairs * (t + 1) / nt, acc.data());
#pragma omp barrier
    if (t == 0) parts.resize(static_cast<std::size_t>(nt));
#pragma omp barrier
    combine(parts, alpha, beta, C, m * t / nt, m * (t + 1) / nt);
  }
  return true;
}

}  // namespace

bool gemm_bf16(Bf16Kernel kernel, bool ta, bool tb, float alpha, const MatrixView& A,
               const MatrixView& B, float beta, const MatrixView& C) {
  if (kernel == Bf16Kernel::kFma) return gemm_avx512<Fp32Math<true>>(ta, tb, alpha, A, B, beta, C);
  return gemm_avx512<Bf16Math>(ta, tb, alpha, A, B, beta, C);
}

bool gemm_fp32(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
               const MatrixView& C) {
  if ((ta ? A.rows : C.rows) < kFp32MinRows) return false;
  return gemm_avx512<Fp32Math<false>>(ta, tb, alpha, A, B, beta, C);
}

#else  // no x86-64 AVX-512 BF16 kernel in this build

bool fp32_gemm_supported() { return false; }
bool bf16_gemm_supported() { return false; }
bool gemm_bf16(Bf16Kernel, bool, bool, float, const MatrixView&, const MatrixView&, float,
               const MatrixView&) {
  return false;
}
bool gemm_fp32(bool, bool, float, const MatrixView&, const MatrixView&, float, const MatrixView&) {
  return false;
}

#endif

}  // namespace halo::detail

// CPU kernels other than SpMM. GEMM goes to OpenBLAS (OpenMP build, so it shares halo's thread
// pool); everything else is plain loops, parallel over rows, with reductions done per block and
// combined in a fixed order so results do not depend on scheduling.
#include "cpu/cpu_backend.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/gemm_avx512.h"
#include "halo/gnn/attention.h"
#include "halo/gnn/bf16.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

constexpr std::int64_t kBlock = 256;  // rows per reduction block

// Column reduction over row blocks: per-block partials combined in block order.
template <class Fn>
void reduce_columns(std::int64_t rows, std::int64_t cols, int outputs, double* const* out,
                    Fn&& fn) {
  const std::int64_t blocks = (rows + kBlock - 1) / kBlock;
  std::vector<double> part(std::size_t(blocks * cols * outputs), 0.0);
  // The blocks and their order do not depend on the threads: a small one stays on this thread.
#pragma omp parallel for schedule(static) if (rows * cols > kSerialElements)
  for (std::int64_t b = 0; b < blocks; ++b) {
    double* acc = part.data() + b * cols * outputs;
    for (std::int64_t r = b * kBlock; r < std::min(rows, (b + 1) * kBlock); ++r) fn(r, acc);
  }
  for (int o = 0; o < outputs; ++o) std::fill(out[o], out[o] + cols, 0.0);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (int o = 0; o < outputs; ++o)
      for (std::int64_t c = 0; c < cols; ++c)
        out[o][c] += part[std::size_t((b * outputs + o) * cols + c)];
}

}  // namespace

void CpuBackend::do_gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B,
                         float beta, const MatrixView& C) {
  const std::int64_t m = C.rows, n = C.cols, k = ta ? A.rows : A.cols;
  if (m == 0 || n == 0) return;
  if (precision_ == MatmulPrecision::kBf16 &&
      detail::gemm_bf16(cpu_bf16_kernel(), ta, tb, alpha, A, B, beta, C))
    return;
  // Tall FP32 products: halo's AVX-512 kernel (a quarter under OpenBLAS's time on the full-graph
  // shapes); HALO_GEMM=openblas keeps them in OpenBLAS (for comparisons).
  static const bool fp32_kernel = [] {
    const char* env = std::getenv("HALO_GEMM");
    return detail::fp32_gemm_supported() && !(env && std::string(env) == "openblas");
  }();
  if (precision_ == MatmulPrecision::kFp32 && fp32_kernel &&
      detail::gemm_fp32(ta, tb, alpha, A, B, beta, C))
    return;
  if (k == 0) {
    if (beta == 0)
      fill(C, 0);
    else
      for (std::int64_t i = 0; i < C.size(); ++i) C.data[i] *= beta;
    return;
  }
  // Rows [r0, r1) of C. Tall outputs go in row blocks: OpenBLAS packs the tall operand in panels
  // up to the size of its per-thread buffer (128 MB each), and a 169k-row product touched ~85 MB
  // of every buffer. Blocks of 4096 rows bound that to a few MB and measured no slower on the
  // arxiv-sized benchmark (peak RSS 1147 -> 989 MiB; the small operand is re-packed per block).
  auto rows_of_c = [&](std::int64_t r0, std::int64_t r1) {
    constexpr std::int64_t block = 4096;
    for (std::int64_t r = r0; r < r1; r += block) {
      const std::int64_t rows = std::min(block, r1 - r);
      // Row r of C is row r of op(A): of A itself, or column r of a transposed A.
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  blasint(rows), blasint(n), blasint(k), alpha, A.data + (ta ? r : r * A.cols),
                  blasint(A.cols), B.data, blasint(B.cols), beta, C.data + r * C.cols,
                  blasint(C.cols));
    }
  };
  // OpenBLAS threads small products poorly (measured on 2 cores: 600 x 200 x 200 at 90-120
  // GFLOP/s on two threads, 100 on one; 600 x 100 x 100 slower on two than on one), while one
  // thread's call runs near the core's peak. So each thread takes a block of C's rows (16-row
  // tiles) and calls OpenBLAS, which runs single-threaded inside a parallel region.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  constexpr std::int64_t tile = 16;
  const std::int64_t tiles = (m + tile - 1) / tile;
  if (threads > 1 && tiles >= 2 && m * n * k >= (std::int64_t(1) << 20)) {
    const int nt = int(std::min<std::int64_t>(threads, tiles));
#pragma omp parallel num_threads(nt)
    {
      const std::int64_t t = omp_get_thread_num(), parts = omp_get_num_threads();
      rows_of_c(std::min(m, tiles * t / parts * tile), std::min(m, tiles * (t + 1) / parts * tile));
    }
    return;
  }
  rows_of_c(0, m);
}

void CpuBackend::do_add_bias(const MatrixView& Y, const float* b) {
#pragma omp parallel for schedule(static) if (Y.size() > kSerialElements)
  for (std::int64_t r = 0; r < Y.rows; ++r) {
    float* y = Y.row(r);
#pragma omp simd
    for (std::int64_t c = 0; c < Y.cols; ++c) y[c] += b[c];
  }
}

void CpuBackend::do_column_sums(const MatrixView& X, float* out) {
  std::vector<double> s(std::size_t(X.cols));
  double* outs[1] = {s.data()};
  reduce_columns(X.rows, X.cols, 1, outs, [&](std::int64_t r, double* acc) {
    const float* x = X.row(r);
    for (std::int64_t c = 0; c < X.cols; ++c) acc[c] += x[c];
  });
  for (std::int64_t c = 0; c < X.cols; ++c) out[c] = float(s[std::size_t(c)]);
}

void CpuBackend::do_relu(const MatrixView& Y) {
#pragma omp parallel for schedule(static) if (Y.size() > kSerialElements)
  for (std::int64_t i = 0; i < Y.size(); ++i) Y.data[i] = std::max(Y.data[i], 0.f);
}

void CpuBackend::do_relu_backward(const MatrixView& Y, const MatrixView& dY) {
#pragma omp parallel for schedule(static) if (Y.size() > kSerialElements)
  for (std::int64_t i = 0; i < Y.size(); ++i) dY.data[i] = Y.data[i] > 0.f ? dY.data[i] : 0.f;
}

void CpuBackend::do_bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                                     const MatrixView& dY) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < xhat.rows; ++r) {
    const float* h = xhat.row(r);
    float* d = dY.row(r);
    for (std::int64_t c = 0; c < xhat.cols; ++c) {
      const float y = h[c] * gamma[c] + beta[c];
      d[c] = y > 0.f ? d[c] : 0.f;
    }
  }
}

// Philox on 8 counters at once with AVX2 (the dropout hot loop); the same numbers as 8 calls of
// philox4x32. _mm256_mul_epu32 multiplies the even 32-bit lanes, so odd lanes are shifted down,
// multiplied, and the high/low halves re-interleaved with blends.
#if defined(__AVX2__)
namespace {
inline void philox_x8(PhiloxKey key, __m256i& c0, __m256i& c1, __m256i& c2, __m256i& c3) {
  const __m256i m0 = _mm256_set1_epi32(int(0xD2511F53u)), m1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  std::uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const __m256i p0e = _mm256_mul_epu32(c0, m0),
                  p0o = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
    const __m256i p1e = _mm256_mul_epu32(c2, m1),
                  p1o = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
    const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0e, 32), p0o, 0xAA);
    const __m256i lo0 = _mm256_blend_epi32(p0e, _mm256_slli_epi64(p0o, 32), 0xAA);
    const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1e, 32), p1o, 0xAA);
    const __m256i lo1 = _mm256_blend_epi32(p1e, _mm256_slli_epi64(p1o, 32), 0xAA);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
}  // namespace
#endif

namespace {

// One row of dropout: y[c] = keep ? y[c] * scale : 0 with keep = philox_uniform(key, id, c) >= p
// (threshold and scale from p). Shared by dropout and the fused ops, so their masks and values are
// the same bits.
// bits (null: none) holds the row's keep mask, ceil(cols / 64) words: with replay the mask is read
// from it instead of the RNG, otherwise it is recorded there.
inline void dropout_row(float* y, std::int64_t cols, std::uint64_t id, PhiloxKey key,
                        std::uint32_t threshold, float scale, std::uint64_t* bits = nullptr,
                        bool replay = false) {
  std::int64_t c = 0;
#if defined(__AVX2__)
  // 64 columns per 8 Philox calls (the layout of dropout_u16), masks applied 8 lanes at a time;
  // bit half * 32 + j * 8 + lane of the block's word is lane `lane` of group (half, j).
  const __m256i thr = _mm256_set1_epi32(int(threshold) - 1);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256i low16 = _mm256_set1_epi32(0xffff);
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  for (; c + 64 <= cols; c += 64) {
    std::uint64_t word = 0;
    __m256i w[4];
    if (replay) {
      word = bits[c / 64];
    } else {
      w[0] = _mm256_set1_epi32(int(std::uint32_t(id)));
      w[1] = _mm256_set1_epi32(int(std::uint32_t(id >> 32)));
      w[2] = _mm256_add_epi32(_mm256_set1_epi32(int(c / 64 * 8)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      w[3] = _mm256_setzero_si256();
      philox_x8(key, w[0], w[1], w[2], w[3]);
    }
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < 4; ++j) {
        const int shift = half * 32 + j * 8;
        __m256 keep;
        if (replay) {
          const __m256i m =
              _mm256_and_si256(_mm256_set1_epi32(int((word >> shift) & 0xffu)), lane_bit);
          keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, lane_bit));
        } else {
          const __m256i u = half ? _mm256_srli_epi32(w[j], 16) : _mm256_and_si256(w[j], low16);
          keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(u, thr));  // u >= threshold
          word |= std::uint64_t(unsigned(_mm256_movemask_ps(keep))) << shift;
        }
        float* yy = y + c + shift;
        _mm256_storeu_ps(yy, _mm256_and_ps(keep, _mm256_mul_ps(_mm256_loadu_ps(yy), vscale)));
      }
    if (bits && !replay) bits[c / 64] = word;
  }
#endif
  for (; c < cols; ++c) {  // the tail (or everything without AVX2)
    const std::uint64_t bit = std::uint64_t(1) << (c % 64);
    bool keep;
    if (replay) {
      keep = bits[c / 64] & bit;
    } else {
      keep = dropout_u16(key, id, std::uint32_t(c)) >= threshold;
      if (bits) bits[c / 64] = (c % 64 ? bits[c / 64] : 0) | (keep ? bit : 0);
    }
    y[c] = keep ? y[c] * scale : 0.f;
  }
}

// One row of batch norm: h = (x - mean) * inv_std (when h is given), y = h * gamma + beta, then
// max(y, 0) with Relu. The one expression batch_norm_apply and the fused op share, so their
// outputs are the same bits.
template <bool Relu>
inline void batch_norm_row(const float* x, const float* mean, const float* inv_std,
                           const float* gamma, const float* beta, float* h, float* y,
                           std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c) {
    const float n = (x[c] - mean[c]) * inv_std[c];
    if (h) h[c] = n;
    const float v = n * gamma[c] + beta[c];
    y[c] = Relu ? std::max(v, 0.f) : v;
  }
}

// A dropout over the rows of a cols-wide matrix, applied a row at a time (by dropout, and inside
// the fused ops' row loops), recording into or replaying from KeepBits when given some.
struct RowDropout {
  float p, scale;
  std::uint32_t threshold;
  PhiloxKey key;
  const NodeId* row_ids;
  std::int64_t cols, words;
  KeepBits* bits;
  std::uint64_t* keep;  // bits' words when there is a mask to record or replay
  bool replay;

  RowDropout(float p_, PhiloxKey key_, const NodeId* row_ids_, std::int64_t cols_, KeepBits* bits_)
      : p(p_),
        scale(p_ > 0.f ? 1.f / (1.f - p_) : 1.f),
        threshold(p_ > 0.f ? dropout_threshold(p_) : 0),
        key(key_),
        row_ids(row_ids_),
        cols(cols_),
        words((cols_ + 63) / 64),
        bits(bits_),
        keep(bits_ && p_ > 0.f ? bits_->words : nullptr),
        replay(keep && bits_->filled) {}
  // Row r (its values at y) in place; nothing when p = 0.
  void apply(float* y, std::int64_t r) const {
    if (p <= 0.f) return;
    dropout_row(y, cols, row_ids ? std::uint64_t(row_ids[r]) : std::uint64_t(r), key, threshold,
                scale, keep ? keep + r * words : nullptr, replay);
  }
  // After every row: a recorded mask is now there to replay.
  void finish() const {
    if (keep) bits->filled = true;
  }
};

}  // namespace

void CpuBackend::do_dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) {
  if (p <= 0.f) return;
  const RowDropout drop(p, key, row_ids, Y.cols, nullptr);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < Y.rows; ++r) drop.apply(Y.row(r), r);
}

void CpuBackend::do_batch_norm_relu_dropout(const MatrixView& X, const float* mean,
                                            const float* inv_std, const float* gamma,
                                            const float* beta, const MatrixView* xhat,
                                            const MatrixView& Y, float p, PhiloxKey key,
                                            const NodeId* row_ids, KeepBits* bits) {
  // One pass instead of three: each output row is finished while it is in L1. The arithmetic is
  // batch_norm_apply's, relu's and dropout_row's, in their order, so the bits are theirs.
  const RowDropout drop(p, key, row_ids, Y.cols, bits);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < X.rows; ++r) {
    batch_norm_row<true>(X.row(r), mean, inv_std, gamma, beta, xhat ? xhat->row(r) : nullptr,
                         Y.row(r), X.cols);
    drop.apply(Y.row(r), r);
  }
  drop.finish();
}

void CpuBackend::do_batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                                     const float* beta, float p, PhiloxKey key,
                                                     const NodeId* row_ids, const MatrixView& dY,
                                                     double* sum_dy, double* sum_dy_xhat,
                                                     KeepBits* bits) {
  const RowDropout drop(p, key, row_ids, dY.cols, bits);
  double* outs[2] = {sum_dy, sum_dy_xhat};
  const std::int64_t cols = dY.cols;
  reduce_columns(dY.rows, cols, 2, outs, [&](std::int64_t r, double* __restrict acc) {
    float* __restrict d = dY.row(r);
    const float* __restrict h = xhat.row(r);
    drop.apply(d, r);
    // Two vectorisable loops over the row while it is in L1: ReLU's mask, then the sums.
    for (std::int64_t c = 0; c < cols; ++c) d[c] = h[c] * gamma[c] + beta[c] > 0.f ? d[c] : 0.f;
    for (std::int64_t c = 0; c < cols; ++c) {
      acc[c] += d[c];
      acc[cols + c] += double(d[c]) * h[c];
    }
  });
  drop.finish();
}

void CpuBackend::do_column_moments(const MatrixView& X, double* sum, double* sumsq) {
  double* outs[2] = {sum, sumsq};
  const std::int64_t cols = X.cols;
  reduce_columns(X.rows, cols, 2, outs, [&](std::int64_t r, double* acc) {
    const float* x = X.row(r);
    for (std::int64_t c = 0; c < cols; ++c) {
      acc[c] += x[c];
      acc[cols + c] += double(x[c]) * x[c];
    }
  });
}

void CpuBackend::do_batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                                     const float* gamma, const float* beta, const MatrixView* xhat,
                                     const MatrixView& Y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < X.rows; ++r)
    batch_norm_row<false>(X.row(r), mean, inv_std, gamma, beta, xhat ? xhat->row(r) : nullptr,
                          Y.row(r), X.cols);
}

void CpuBackend::do_batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat,
                                         double* sum_dy, double* sum_dy_xhat) {
  double* outs[2] = {sum_dy, sum_dy_xhat};
  const std::int64_t cols = dY.cols;
  reduce_columns(dY.rows, cols, 2, outs, [&](std::int64_t r, double* acc) {
    const float* d = dY.row(r);
    const float* h = xhat.row(r);
    for (std::int64_t c = 0; c < cols; ++c) {
      acc[c] += d[c];
      acc[cols + c] += double(d[c]) * h[c];
    }
  });
}

void CpuBackend::do_batch_norm_backward(const MatrixView& dY, const MatrixView& xhat,
                                        const float* gamma, const float* inv_std,
                                        const float* mean_dy, const float* mean_dy_xhat,
                                        const MatrixView& dX) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < dY.rows; ++r) {
    const float* d = dY.row(r);
    const float* h = xhat.row(r);
    float* o = dX.row(r);
    for (std::int64_t c = 0; c < dY.cols; ++c)
      o[c] = gamma[c] * inv_std[c] * (d[c] - mean_dy[c] - h[c] * mean_dy_xhat[c]);
  }
}

double CpuBackend::do_softmax_xent(const MatrixView& logits, const std::int32_t* labels,
                                   const NodeId* rows, std::int64_t nrows, double denom,
                                   const MatrixView& dlogits, std::int64_t* counted) {
  fill(dlogits, 0.f);
  std::vector<double> loss(std::size_t(nrows), 0.0);
  const std::int64_t k = logits.cols;
#pragma omp parallel
  {
    std::vector<double> e(
        static_cast<std::size_t>(k));  // one exp per logit, reused for the gradient
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < nrows; ++i) {
      const NodeId r = rows[i];
      const std::int32_t y = labels[r];
      if (y < 0) continue;
      const float* z = logits.row(r);
      float mx = z[0];
      for (std::int64_t c = 1; c < k; ++c) mx = std::max(mx, z[c]);
      double se = 0;
      for (std::int64_t c = 0; c < k; ++c) se += e[std::size_t(c)] = std::exp(double(z[c] - mx));
      loss[std::size_t(i)] = double(mx) + std::log(se) - z[y];
      float* g = dlogits.row(r);
      const double scale = 1.0 / (se * denom);
      for (std::int64_t c = 0; c < k; ++c) g[c] = float(e[std::size_t(c)] * scale);
      g[y] -= float(1.0 / denom);
    }
  }
  double total = 0;
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < nrows; ++i)
    if (labels[rows[i]] >= 0) {
      total += loss[std::size_t(i)];
      ++n;
    }
  if (counted) *counted = n;
  return total;
}

double CpuBackend::do_bce_logits(const MatrixView& logits, const std::int32_t* labels,
                                 const NodeId* rows, std::int64_t nrows, double denom,
                                 const MatrixView& dlogits, std::int64_t* counted) {
  fill(dlogits, 0.f);
  const std::int64_t t = logits.cols;
  std::vector<double> loss(std::size_t(nrows), 0.0);
  std::vector<std::int64_t> cnt(std::size_t(nrows), 0);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < nrows; ++i) {
    const NodeId r = rows[i];
    const float* z = logits.row(r);
    const std::int32_t* y = labels + std::int64_t(r) * t;
    float* g = dlogits.row(r);
    for (std::int64_t c = 0; c < t; ++c) {
      if (y[c] < 0) continue;
      const double x = z[c];
      // log(1 + e^-|x|) + max(x, 0) - x y: stable for any x.
      loss[std::size_t(i)] += std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0) - x * y[c];
      g[c] = float((1.0 / (1.0 + std::exp(-x)) - y[c]) / denom);
      ++cnt[std::size_t(i)];
    }
  }
  double total = 0;
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < nrows; ++i) {
    total += loss[std::size_t(i)];
    n += cnt[std::size_t(i)];
  }
  if (counted) *counted = n;
  return total;
}

void CpuBackend::do_gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                const MatrixView& dst) {
#pragma omp parallel for schedule(static) if (n * src.cols > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst.row(i), src.row(idx[i]), sizeof(float) * std::size_t(src.cols));
}

void CpuBackend::do_scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                     const MatrixView& dst) {
  // idx may repeat: rows are added in order i, each thread over its own block of columns, one
  // pass over the rows (so every element sees the same sequence of additions at any thread
  // count). Blocks are whole cache lines (16 floats).
  const std::int64_t cols = src.cols, lines = (cols + 15) / 16;
  const int threads =
      n * cols > kSerialElements ? int(std::min<std::int64_t>(omp_get_max_threads(), lines)) : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t c0 = std::min(cols, lines * t / nt * 16),
                       c1 = std::min(cols, lines * (t + 1) / nt * 16);
    for (std::int64_t i = 0; i < n && c0 < c1; ++i) {
      float* d = dst.row(idx[i]);
      const float* s = src.row(i);
      for (std::int64_t c = c0; c < c1; ++c) d[c] += s[c];
    }
  }
}

void CpuBackend::do_add(const MatrixView& src, const MatrixView& dst) {
  // Small adds (a bias gradient's row) stay on this thread: a fork costs more than they do.
#pragma omp parallel for schedule(static) if (src.size() > kSerialElements)
  for (std::int64_t i = 0; i < src.size(); ++i) dst.data[i] += src.data[i];
}

void CpuBackend::do_copy(const MatrixView& src, const MatrixView& dst) {
  // An empty matrix may have no storage, and memcpy from null is undefined even for 0 bytes.
  if (src.size() == 0) return;
  std::memcpy(dst.data, src.data, sizeof(float) * std::size_t(src.size()));
}

void CpuBackend::do_smooth(const MatrixView& x, float gamma, const MatrixView& avg) {
  const float keep = gamma, take = 1.f - gamma;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < x.size(); ++i) avg.data[i] = keep * avg.data[i] + take * x.data[i];
}

void CpuBackend::do_fill(const MatrixView& X, float v) {
#pragma omp parallel for schedule(static) if (X.size() > kSerialElements)
  for (std::int64_t i = 0; i < X.size(); ++i) X.data[i] = v;
}

void CpuBackend::do_pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void CpuBackend::do_unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
}

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

// Graph attention: the host kernels of attention.cc (H = the per-node arrays' columns).
void CpuBackend::do_gat_head_dots(const MatrixView& z, const MatrixView& a, const MatrixView& t) {
  head_dots(z.rows, int(a.rows), int(a.cols), z.data, a.data, t.data);
}

void CpuBackend::do_gat_head_dots_backward(const MatrixView& z, const MatrixView& a,
                                           const MatrixView& dt, const MatrixView& dz,
                                           const MatrixView& da) {
  head_dots_backward(z.rows, int(a.rows), int(a.cols), z.data, a.data, dt.data, dz.data, da.data);
}

void CpuBackend::do_gat_edge_softmax(const AttentionView& A, const MatrixView& el,
                                     const MatrixView& er, float slope, const MatrixView& alpha) {
  halo::gat_edge_softmax(A, int(el.cols), el.data, er.data, slope, alpha.data);
}

void CpuBackend::do_gat_edge_softmax_backward(const AttentionView& A, const MatrixView& el,
                                              const MatrixView& er, float slope,
                                              const MatrixView& alpha, const MatrixView& dalpha,
                                              const MatrixView& del, const MatrixView& der) {
  halo::gat_edge_softmax_backward(A, int(el.cols), el.data, er.data, slope, alpha.data, dalpha.data,
                                  del.data, der.data);
}

void CpuBackend::do_gat_aggregate(const AttentionView& A, const MatrixView& alpha,
                                  const MatrixView& z, const MatrixView& out) {
  const auto heads = int(alpha.cols);
  halo::gat_aggregate(A, heads, int(z.cols / heads), alpha.data, z.data, out.data);
}

void CpuBackend::do_gat_aggregate_backward(const AttentionView& A, const MatrixView& alpha,
                                           const MatrixView& z, const MatrixView& dout,
                                           const MatrixView& dalpha, const MatrixView& dz) {
  const auto heads = int(alpha.cols);
  halo::gat_aggregate_backward(A, heads, int(z.cols / heads), alpha.data, z.data, dout.data,
                               dalpha.data, dz.data);
}

void CpuBackend::do_gat_edge_dropout(const AttentionView& A, const MatrixView& x, float p,
                                     PhiloxKey key, const NodeId* ids) {
  halo::gat_edge_dropout(A, int(x.cols), p, key, ids, x.data);
}

namespace {

// exp(x) - 1 for x <= 0 in plain arithmetic the compiler vectorises (libm's expm1f is a scalar
// call: a second per 10^8 elements). x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two, Cody
// and Waite), expm1(r) by its Taylor series to r^8 (relative error < 1e-8), then
// 2^k expm1(r) + (2^k - 1), exact for k = 0, so small |x| keep their relative precision. Within
// 2 ulp of expm1f; x below -87 gives -1 (exp underflows float there).
inline float expm1_nonpositive(float x) {
  x = x < -87.f ? -87.f : x;
  const int k = int(x * 1.44269504f - 0.5f);  // round to nearest for x <= 0 (truncation toward 0)
  const float kf = float(k);
  const float r = (x - kf * 0.693145752f) - kf * 1.42860677e-6f;
  float p = 1.f / 40320.f;
  p = p * r + 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  const float em1 = p * r;
  const float two_k = std::bit_cast<float>(std::uint32_t(k + 127) << 23);
  return two_k * em1 + (two_k - 1.f);
}

}  // namespace

void CpuBackend::do_elu(const MatrixView& Y) {
  float* y = Y.data;
  const std::int64_t n = Y.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    // max(x, 0) + expm1(min(x, 0)): both terms computed for every element (a select between x
    // and the expm1 makes GCC branch around the expm1 instead of vectorising).
    const float x = y[i];
    y[i] = (x > 0.f ? x : 0.f) + expm1_nonpositive(x < 0.f ? x : 0.f);
  }
}

void CpuBackend::do_elu_backward(const MatrixView& Y, const MatrixView& dY, float y_scale) {
  const float* y = Y.data;
  float* dy = dY.data;
  const std::int64_t n = Y.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dy[i] *= y[i] > 0.f ? 1.f : y[i] * y_scale + 1.f;
}

}  // namespace halo

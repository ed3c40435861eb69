// The CPU backend's temporal-GNN ops (backend.h, "Temporal GNNs"): the loops TimeEncoder and
// GruCell ran inline before they were Backend ops, moved here unchanged so TGN's CPU results
// keep their bits. Deterministic at a fixed thread count: element-wise loops are parallel over
// rows; sums over rows either keep one double accumulator row per thread, added in thread order
// (time_encode_backward, as before), or give each thread a block of columns and run the rows in
// order (so every element sees the same additions at any thread count).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/cpu_backend.h"
#include "halo/gnn/temporal/cos_sin.h"

namespace halo {
namespace {

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// Runs fn(c0, c1) over column blocks of whole cache lines (16 floats), one per thread when the
// work is large enough; fn goes over the rows in order within its block.
template <class Fn>
void by_column_blocks(std::int64_t rows, std::int64_t cols, Fn&& fn) {
  const std::int64_t lines = (cols + 15) / 16;
  const int threads =
      rows * cols > kSerialElements ? int(std::min<std::int64_t>(omp_get_max_threads(), lines)) : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t c0 = std::min(cols, lines * t / nt * 16),
                       c1 = std::min(cols, lines * (t + 1) / nt * 16);
    if (c0 < c1) fn(c0, c1);
  }
}

// One row of the time encoding: cos and sin of w d + b (w, b in double) for gap d.
inline void encode_row(const double* wd, const double* bd, std::int64_t dim, double d, float* o,
                       float* si) {
#pragma omp simd
  for (std::int64_t k = 0; k < dim; ++k) cos_sin(wd[k] * d + bd[k], o[k], si[k]);
}

}  // namespace

void CpuBackend::do_time_encode(const double* dt, std::int64_t n, const float* w, const float* b,
                                const MatrixView& out, const MatrixView& sin) {
  const std::int64_t dim = out.cols;
  std::vector<double> wv(static_cast<std::size_t>(dim)), bv(static_cast<std::size_t>(dim));
  for (std::int64_t k = 0; k < dim; ++k) {
    wv[std::size_t(k)] = double(w[k]);
    bv[std::size_t(k)] = double(b[k]);
  }
  const double* wd = wv.data();
  const double* bd = bv.data();
  float* out_data = out.data;
  float* sin_data = sin.data;
  // A gap of exactly +0 (TGN's queries, padded neighbour slots, same-time events) gives the same
  // row every time: computed once by the same loop, then copied (a third to a half of UCI's rows
  // at batch 200).
  std::vector<float> zero_row(static_cast<std::size_t>(2 * dim));
  float* zc = zero_row.data();
  float* zs = zc + dim;
  encode_row(wd, bd, dim, 0.0, zc, zs);
#pragma omp parallel for schedule(static) \
    firstprivate(wd, bd, out_data, sin_data, dim, zc, zs) if (n * dim > 4096)
  for (std::int64_t i = 0; i < n; ++i) {
    float* o = out_data + i * dim;
    float* si = sin_data + i * dim;
    if (std::bit_cast<std::uint64_t>(dt[i]) == 0) {  // +0 only: -0 may differ in a zero's sign
      std::copy_n(zc, dim, o);
      std::copy_n(zs, dim, si);
    } else {
      encode_row(wd, bd, dim, dt[i], o, si);
    }
  }
}

void CpuBackend::do_time_encode_backward(const double* dt, const MatrixView& sin,
                                         const MatrixView& dout, float* dw, float* db) {
  // Row-major sweeps with one accumulator row per thread, added in thread order (deterministic
  // at a fixed thread count); a column-by-column sweep strided through the whole matrix.
  const std::int64_t n = sin.rows, d = sin.cols;
  const int threads = n * d > 4096 ? omp_get_max_threads() : 1;
  std::vector<double> acc(static_cast<std::size_t>(2 * d * threads), 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    double* gw = acc.data() + 2 * d * t;
    double* gb = gw + d;
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const float* si = sin.data + i * d;
      const float* g = dout.data + i * d;
      const double ti = dt[i];
      for (std::int64_t k = 0; k < d; ++k) {
        const double s = -double(si[k]) * double(g[k]);
        gw[k] += s * ti;
        gb[k] += s;
      }
    }
  }
  for (int t = 0; t < threads; ++t)
    for (std::int64_t k = 0; k < d; ++k) {
      dw[k] += float(acc[std::size_t(2 * d * t + k)]);
      db[k] += float(acc[std::size_t(2 * d * t + d + k)]);
    }
}

void CpuBackend::do_gru_gates(const MatrixView& a, const MatrixView& c, const MatrixView& h,
                              const MatrixView& rzn, const MatrixView& h_out) {
  const std::int64_t B = h.rows, H = h.cols;
#pragma omp parallel for schedule(static) if (B * H > 4096)
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j < H; ++j) {
      const float r = sigmoid(a.at(i, j) + c.at(i, j));
      const float z = sigmoid(a.at(i, H + j) + c.at(i, H + j));
      const float n = std::tanh(a.at(i, 2 * H + j) + r * c.at(i, 2 * H + j));
      rzn.at(i, j) = r;
      rzn.at(i, H + j) = z;
      rzn.at(i, 2 * H + j) = n;
      h_out.at(i, j) = (1.f - z) * n + z * h.at(i, j);
    }
}

void CpuBackend::do_gru_gates_backward(const MatrixView& dh_out, const MatrixView& h,
                                       const MatrixView& c, const MatrixView& rzn,
                                       const MatrixView& da, const MatrixView& dc,
                                       const MatrixView& dh) {
  const std::int64_t B = h.rows, H = h.cols;
#pragma omp parallel for schedule(static) if (B * H > 4096)
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j < H; ++j) {
      const float g = dh_out.at(i, j), r = rzn.at(i, j), z = rzn.at(i, H + j),
                  n = rzn.at(i, 2 * H + j);
      const float dn = g * (1.f - z) * (1.f - n * n);  // through tanh
      const float dz = g * (h.at(i, j) - n) * z * (1.f - z);
      const float dr = dn * c.at(i, 2 * H + j) * r * (1.f - r);
      da.at(i, j) = dc.at(i, j) = dr;
      da.at(i, H + j) = dc.at(i, H + j) = dz;
      da.at(i, 2 * H + j) = dn;
      dc.at(i, 2 * H + j) = dn * r;
      dh.at(i, j) = g * z;  // the direct path; the caller adds the gates' part
    }
}

void CpuBackend::do_time_projection(const MatrixView& m, const float* delta, const float* w,
                                    const float* b, const MatrixView& z) {
  const std::int64_t n = m.rows, d = m.cols;
#pragma omp parallel for schedule(static) if (n * d > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i) {
    const float* mi = m.row(i);
    float* zi = z.row(i);
    const float t = delta[i];
    for (std::int64_t c = 0; c < d; ++c) zi[c] = mi[c] * (1.f + w[c] * t + b[c]);
  }
}

void CpuBackend::do_time_projection_backward(const MatrixView& m, const float* delta,
                                             const float* w, const float* b, const MatrixView& dz,
                                             const MatrixView& dm, float* dw, float* db) {
  by_column_blocks(m.rows, m.cols, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t i = 0; i < m.rows; ++i) {
      const float* mi = m.row(i);
      const float* gi = dz.row(i);
      float* di = dm.row(i);
      const float t = delta[i];
      for (std::int64_t c = c0; c < c1; ++c) {
        const float g = gi[c];  // read before di[c] is written: dm may be dz
        dw[c] += g * mi[c] * t;
        db[c] += g * mi[c];
        di[c] = g * (1.f + w[c] * t + b[c]);
      }
    }
  });
}

void CpuBackend::do_gather_rows_into(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                     const MatrixView& dst, std::int64_t dst_col) {
  if (src.cols == 0) return;
#pragma omp parallel for schedule(static) if (n * src.cols > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i)
    if (idx[i] >= 0)
      std::memcpy(dst.row(i) + dst_col, src.row(idx[i]), sizeof(float) * std::size_t(src.cols));
}

void CpuBackend::do_scatter_add_rows_from(const MatrixView& src, std::int64_t src_col,
                                          std::int64_t width, const NodeId* idx, std::int64_t n,
                                          const MatrixView& dst) {
  // As scatter_add_rows: rows in order i, each thread over its own block of columns.
  by_column_blocks(n, width, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t i = 0; i < n; ++i) {
      if (idx[i] < 0) continue;
      float* d = dst.row(idx[i]);
      const float* s = src.row(i) + src_col;
      for (std::int64_t c = c0; c < c1; ++c) d[c] += s[c];
    }
  });
}

void CpuBackend::do_scale(const MatrixView& X, float alpha) {
  float* x = X.data;
  const std::int64_t n = X.size();
#pragma omp parallel for schedule(static) if (n > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void CpuBackend::do_scatter_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                 const MatrixView& dst) {
  if (src.cols == 0) return;
#pragma omp parallel for schedule(static) if (n * src.cols > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i)
    if (idx[i] >= 0)
      std::memcpy(dst.row(idx[i]), src.row(i), sizeof(float) * std::size_t(src.cols));
}

void CpuBackend::do_sum_rows_into(const MatrixView& src, const std::int32_t* first,
                                  const std::int32_t* rows, const std::int32_t* divisor,
                                  std::int64_t n, const MatrixView& dst, std::int64_t dst_col) {
  const std::int64_t d = src.cols;
#pragma omp parallel for schedule(static) if (n * d > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i) {
    float* out = dst.row(i) + dst_col;
    const std::int64_t r0 = first[i], nr = rows ? rows[i] : 1;
    std::copy_n(src.row(r0), d, out);
    for (std::int64_t m = 1; m < nr; ++m) {
      const float* s = src.row(r0 + m);
      for (std::int64_t c = 0; c < d; ++c) out[c] += s[c];
    }
    if (divisor) {
      const float inv = 1.f / float(divisor[i]);
      for (std::int64_t c = 0; c < d; ++c) out[c] *= inv;
    }
  }
}

void CpuBackend::do_spread_rows(const MatrixView& src, std::int64_t src_col,
                                const std::int32_t* first, const std::int32_t* count,
                                std::int64_t n, const MatrixView& dst) {
  const std::int64_t d = dst.cols;
#pragma omp parallel for schedule(static) if (n * d > kSerialElements)
  for (std::int64_t i = 0; i < n; ++i) {
    const float* s = src.row(i) + src_col;
    const float cnt = float(count[i]);
    for (std::int64_t m = 0; m < count[i]; ++m) {
      float* out = dst.row(std::int64_t(first[i]) + m);
      for (std::int64_t c = 0; c < d; ++c) out[c] = s[c] / cnt;
    }
  }
}

}  // namespace halo

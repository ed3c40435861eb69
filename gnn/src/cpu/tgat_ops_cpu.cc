// The CPU's temporal-attention ops (backend.h's TGN section): the loops TemporalAttention ran
// itself before they were Backend ops, unchanged, so results are bit for bit the same. Queries
// are independent, so the OpenMP split over them changes no rounding.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/cpu_backend.h"
#include "halo/gnn/tgat_view.h"

namespace halo {
namespace {

// a · b over n floats.
inline float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// y += a x over n floats.
inline void axpy(float a, const float* x, float* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) y[c] += a * x[c];
}

// Above this many elements of work an op splits its rows over threads (below, the fork costs
// more than it saves).
constexpr std::int64_t kParallelWork = 16384;

}  // namespace

void CpuBackend::do_split_heads(const MatrixView& x, int heads, const MatrixView& out) {
  const std::int64_t n = x.rows, w = out.cols;
  if (w == 0) return;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < n; ++i) std::copy_n(x.row(i) + h * w, w, out.row(h * n + i));
}

void CpuBackend::do_merge_heads(const MatrixView& x, int heads, const MatrixView& out,
                                bool accumulate) {
  const std::int64_t n = out.rows, w = x.cols;
  if (w == 0) return;
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < n; ++i) {
      const float* src = x.row(h * n + i);
      float* dst = out.row(i) + h * w;
      if (accumulate)
        for (std::int64_t c = 0; c < w; ++c) dst[c] += src[c];
      else
        std::copy_n(src, w, dst);
    }
}

void CpuBackend::do_copy_columns(const MatrixView& src, std::int64_t src_col, const MatrixView& dst,
                                 std::int64_t dst_col, std::int64_t width, bool accumulate) {
  if (width == 0) return;
#pragma omp parallel for schedule(static) if (src.rows * width > kSerialElements)
  for (std::int64_t i = 0; i < src.rows; ++i) {
    const float* s = src.row(i) + src_col;
    float* d = dst.row(i) + dst_col;
    if (accumulate)
      for (std::int64_t c = 0; c < width; ++c) d[c] += s[c];
    else
      for (std::int64_t c = 0; c < width; ++c) d[c] = s[c];
  }
}

void CpuBackend::do_mask_rows(const MatrixView& X, const std::int32_t* keep) {
  for (std::int64_t i = 0; i < X.rows; ++i)
    if (keep[i] == 0) std::fill_n(X.row(i), X.cols, 0.f);
}

void CpuBackend::do_tgat_attend(const TgatView& v, const float* bv, const MatrixView& alpha,
                                const MatrixView& ctx, const MatrixView& sbar) {
  const std::int64_t B = v.Q.rows, dq = v.Q.cols, dhd = dq / v.heads, ds = v.slots.cols;
  const int k = v.k, heads = v.heads;
  const float scale = float(1.0 / std::sqrt(double(dhd)));
  const float* bk = v.bk;
  // Each query's output rows are zeroed by its own thread just before it adds into them (in
  // cache, and in parallel), not in a pass of their own.
#pragma omp parallel for schedule(static) if (B * k * dq > kParallelWork)
  for (std::int64_t i = 0; i < B; ++i)
    for (int hd = 0; hd < heads; ++hd) {
      std::fill_n(ctx.row(i) + hd * dhd, dhd, 0.f);
      std::fill_n(sbar.row(hd * B + i), ds, 0.f);
      float* a = alpha.data + (i * heads + hd) * k;
      const std::int32_t* rows = v.row + i * k;
      const float* qi = v.Q.row(i) + hd * dhd;
      const float* pi = v.P.row(hd * B + i);
      const float qb = dot(qi, bk + hd * dhd, dhd);
      float mx = -1e30f;
      bool any = false;
      for (int j = 0; j < k; ++j) {
        a[j] = 0.f;
        if (rows[j] < 0) continue;
        const std::int64_t c = rows[j];
        float s = dot(qi, v.Kn.row(v.node[c]) + hd * dhd, dhd) + qb;
        if (ds > 0) s += dot(pi, v.slots.row(c), ds);
        a[j] = s * scale;
        mx = any ? std::max(mx, a[j]) : a[j];
        any = true;
      }
      if (!any) continue;  // no neighbours: the attention output stays 0
      double sum = 0;
      for (int j = 0; j < k; ++j)
        if (rows[j] >= 0) sum += (a[j] = std::exp(a[j] - mx));
      float* ci = ctx.row(i) + hd * dhd;
      float* si = sbar.row(hd * B + i);
      for (int j = 0; j < k; ++j) {
        a[j] = rows[j] >= 0 ? float(a[j] / sum) : 0.f;
        if (rows[j] < 0) continue;
        const std::int64_t c = rows[j];
        axpy(a[j], v.Vn.row(v.node[c]) + hd * dhd, ci, dhd);
        if (ds > 0) axpy(a[j], v.slots.row(c), si, ds);
      }
      for (std::int64_t c = 0; c < dhd; ++c) ci[c] += bv[hd * dhd + c];  // the weights sum to 1
    }
}

void CpuBackend::do_tgat_attend_backward(const TgatView& v, const MatrixView& alpha,
                                         const MatrixView& dctx, const MatrixView& dsbar,
                                         const MatrixView& dQ, const MatrixView& dK,
                                         const MatrixView& dV, const MatrixView& dP,
                                         const MatrixView& dslots, float* dbk) {
  const std::int64_t B = v.Q.rows, dq = v.Q.cols, dhd = dq / v.heads, ds = v.slots.cols;
  const int k = v.k, heads = v.heads;
  std::vector<double> gsum(static_cast<std::size_t>(B * heads), 0.0);
  const float scale = float(1.0 / std::sqrt(double(dhd)));
  const float* bk = v.bk;
#pragma omp parallel if (B * k * dq > kParallelWork)
  {
    std::vector<float> da(static_cast<std::size_t>(k));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < B; ++i) {
      // Query i's rows of dQ, dP and dslots (slots i * k ..) are zeroed by its own thread just
      // before it adds into them (in cache, and in parallel), not in a pass of their own.
      std::fill_n(dQ.row(i), dq, 0.f);
      std::fill_n(dslots.row(i * k), k * ds, 0.f);
      for (int hd = 0; hd < heads; ++hd) {
        std::fill_n(dP.row(hd * B + i), ds, 0.f);
        const float* a = alpha.data + (i * heads + hd) * k;
        const std::int32_t* rows = v.row + i * k;
        const float* gi = dctx.row(i) + hd * dhd;
        const float* gs = dsbar.row(hd * B + i);
        const float* qi = v.Q.row(i) + hd * dhd;
        const float* pi = v.P.row(hd * B + i);
        float* dqi = dQ.row(i) + hd * dhd;
        float* dpi = dP.row(hd * B + i);
        // d alpha_j = dctx · V_j (node part, slot part through sbar; the bias is the same for
        // every j and drops out of the softmax); ds_j = a_j (dalpha_j − Σ a dalpha).
        double sum = 0;
        for (int j = 0; j < k; ++j) {
          da[std::size_t(j)] = 0.f;
          if (rows[j] < 0) continue;
          const std::int64_t c = rows[j];
          float s = dot(gi, v.Vn.row(v.node[c]) + hd * dhd, dhd);
          if (ds > 0) {
            s += dot(gs, v.slots.row(c), ds);
            axpy(a[j], gs, dslots.row(i * k + j), ds);
          }
          float* dv = dV.row(c) + hd * dhd;
          for (std::int64_t e = 0; e < dhd; ++e) dv[e] = a[j] * gi[e];
          da[std::size_t(j)] = s;
          sum += double(a[j]) * s;
        }
        for (int j = 0; j < k; ++j) {
          if (rows[j] < 0) continue;
          const std::int64_t c = rows[j];
          const float g = a[j] * (da[std::size_t(j)] - float(sum)) * scale;
          gsum[std::size_t(i * heads + hd)] += double(g);
          const float* kn = v.Kn.row(v.node[c]) + hd * dhd;
          for (std::int64_t e = 0; e < dhd; ++e) dqi[e] += g * (kn[e] + bk[hd * dhd + e]);
          float* dk = dK.row(c) + hd * dhd;
          for (std::int64_t e = 0; e < dhd; ++e) dk[e] = g * qi[e];
          if (ds > 0) {
            axpy(g, v.slots.row(c), dpi, ds);
            axpy(g, pi, dslots.row(i * k + j), ds);
          }
        }
      }
    }
  }
  // b_k's gradient, per query rather than per slot: Σ_slots g Q_i = Σ_i (Σ_j g_j) Q_i.
  std::vector<double> acc(static_cast<std::size_t>(dq), 0.0);
  for (std::int64_t i = 0; i < B; ++i)
    for (int hd = 0; hd < heads; ++hd) {
      const double g = gsum[std::size_t(i * heads + hd)];
      const float* qi = v.Q.row(i) + hd * dhd;
      for (std::int64_t e = 0; e < dhd; ++e) acc[std::size_t(hd * dhd + e)] += g * double(qi[e]);
    }
  for (std::int64_t j = 0; j < dq; ++j) dbk[j] += float(acc[std::size_t(j)]);
}

}  // namespace halo

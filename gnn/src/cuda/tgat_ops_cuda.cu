// The CUDA twins of tgat_ops_cpu.cc (backend.h's TGN section) on the backend's one stream.
//
// Determinism (no floating-point atomics): the reshuffles and copies write each element from one
// thread. The attention core runs one warp per (query, head) forward and one warp per query
// backward (its heads in order, so a slot's gradient adds its heads in the CPU's order); a warp
// owns every row it writes, each lane its columns of them, and dot products are lane partials
// combined by a fixed butterfly. b_k's gradient is one thread per column summing the queries in
// order in double. So results are the same on every run; they differ from the CPU's by
// roundings (the dots' summation order, expf, fused multiply-adds), as the tests allow.
#include <cmath>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_launch.h"
#include "halo/gnn/tgat_view.h"

namespace halo {
namespace {

using namespace cuda_launch;  // NOLINT(google-build-using-namespace): the kernels' vocabulary

__global__ void split_heads_kernel(const float* x, float* out, std::int64_t n, std::int64_t w,
                                   int heads, std::int64_t total) {
  for (std::int64_t o = grid_start(); o < total; o += grid_stride()) {
    const std::int64_t r = o / w, c = o % w, h = r / n, i = r % n;
    out[o] = x[(i * heads + h) * w + c];
  }
}

__global__ void merge_heads_kernel(const float* x, float* out, std::int64_t n, std::int64_t w,
                                   int heads, bool accumulate, std::int64_t total) {
  const std::int64_t hw = std::int64_t(heads) * w;
  for (std::int64_t o = grid_start(); o < total; o += grid_stride()) {
    const std::int64_t i = o / hw, rest = o % hw, h = rest / w, c = rest % w;
    const float v = x[(h * n + i) * w + c];
    out[o] = accumulate ? out[o] + v : v;
  }
}

__global__ void copy_columns_kernel(const float* src, std::int64_t src_cols, std::int64_t src_col,
                                    float* dst, std::int64_t dst_cols, std::int64_t dst_col,
                                    std::int64_t width, bool accumulate, std::int64_t total) {
  for (std::int64_t o = grid_start(); o < total; o += grid_stride()) {
    const std::int64_t i = o / width, c = o % width;
    const float v = src[i * src_cols + src_col + c];
    float& d = dst[i * dst_cols + dst_col + c];
    d = accumulate ? d + v : v;
  }
}

__global__ void mask_rows_kernel(float* x, const std::int32_t* keep, std::int64_t cols,
                                 std::int64_t total) {
  for (std::int64_t o = grid_start(); o < total; o += grid_stride())
    if (keep[o / cols] == 0) x[o] = 0.f;
}

// a · b over n floats, in every lane of the warp (lane partials, then the butterfly).
__device__ inline float warp_dot(const float* a, const float* b, std::int64_t n, int lane) {
  float s = 0.f;
  for (std::int64_t c = lane; c < n; c += 32) s += a[c] * b[c];
  return warp_sum_f(s);
}

// The warp's index and count, for one-warp-per-item kernels (blocks of whole warps).
__device__ inline std::int64_t warp_start() { return grid_start() / 32; }
__device__ inline std::int64_t warp_stride() { return grid_stride() / 32; }

// One warp per (query i, head hd): scores, masked softmax, ctx and sbar (CPU: do_tgat_attend).
__global__ void tgat_attend_kernel(TgatView v, const float* bv, float* alpha, float* ctx,
                                   float* sbar) {
  const std::int64_t B = v.Q.rows, dq = v.Q.cols, dhd = dq / v.heads, ds = v.slots.cols;
  const int k = v.k, heads = v.heads, lane = int(threadIdx.x & 31);
  const float scale = float(1.0 / sqrt(double(dhd)));
  for (std::int64_t w = warp_start(); w < B * heads; w += warp_stride()) {
    const std::int64_t i = w / heads;
    const int hd = int(w % heads);
    float* a = alpha + (i * heads + hd) * k;
    const std::int32_t* rows = v.row + i * k;
    const float* qi = v.Q.data + i * dq + hd * dhd;
    const float* pi = v.P.data + (hd * B + i) * ds;
    float* ci = ctx + i * dq + hd * dhd;
    float* si = sbar + (hd * B + i) * ds;
    const float qb = warp_dot(qi, v.bk + hd * dhd, dhd, lane);
    // Raw scores into alpha (lane 0 writes; every lane holds the same value).
    float mx = -1e30f;
    bool any = false;
    for (int j = 0; j < k; ++j) {
      if (rows[j] < 0) {
        if (lane == 0) a[j] = 0.f;
        continue;
      }
      const std::int64_t c = rows[j];
      float s = warp_dot(qi, v.Kn.data + std::int64_t(v.node[c]) * dq + hd * dhd, dhd, lane) + qb;
      if (ds > 0) s += warp_dot(pi, v.slots.data + c * ds, ds, lane);
      const float sc = s * scale;
      if (lane == 0) a[j] = sc;
      mx = any ? fmaxf(mx, sc) : sc;
      any = true;
    }
    for (std::int64_t c = lane; c < dhd; c += 32) ci[c] = 0.f;
    for (std::int64_t c = lane; c < ds; c += 32) si[c] = 0.f;
    __syncwarp();
    if (!any) continue;  // no neighbours: ctx and sbar stay 0, alpha is 0
    double sum = 0;
    for (int j = 0; j < k; ++j)
      if (rows[j] >= 0) sum += double(expf(a[j] - mx));
    for (int j = 0; j < k; ++j) {
      if (rows[j] < 0) continue;
      const float aj = float(double(expf(a[j] - mx)) / sum);
      __syncwarp();  // every lane has read a[j] before lane 0 overwrites it
      if (lane == 0) a[j] = aj;
      const std::int64_t c = rows[j];
      const float* vn = v.Vn.data + std::int64_t(v.node[c]) * dq + hd * dhd;
      for (std::int64_t e = lane; e < dhd; e += 32) ci[e] += aj * vn[e];
      const float* sl = v.slots.data + c * ds;
      for (std::int64_t e = lane; e < ds; e += 32) si[e] += aj * sl[e];
    }
    for (std::int64_t e = lane; e < dhd; e += 32) ci[e] += bv[hd * dhd + e];
    __syncwarp();
  }
}

// One warp per query i, its heads in order (CPU: do_tgat_attend_backward's parallel loop). da:
// B * heads * k floats of scratch for the score gradients' inputs; gsum: B * heads doubles.
__global__ void tgat_attend_backward_kernel(TgatView v, const float* alpha, const float* dctx,
                                            const float* dsbar, float* dQ, float* dK, float* dV,
                                            float* dP, float* dslots, float* da, double* gsum) {
  const std::int64_t B = v.Q.rows, dq = v.Q.cols, dhd = dq / v.heads, ds = v.slots.cols;
  const int k = v.k, heads = v.heads, lane = int(threadIdx.x & 31);
  const float scale = float(1.0 / sqrt(double(dhd)));
  for (std::int64_t i = warp_start(); i < B; i += warp_stride()) {
    const std::int32_t* rows = v.row + i * k;
    for (int j = 0; j < k; ++j)  // each lane zeroes the columns it later adds into
      for (std::int64_t e = lane; e < ds; e += 32) dslots[(i * k + j) * ds + e] = 0.f;
    for (int hd = 0; hd < heads; ++hd) {
      const float* a = alpha + (i * heads + hd) * k;
      float* dai = da + (i * heads + hd) * k;
      const float* gi = dctx + i * dq + hd * dhd;
      const float* gs = dsbar + (hd * B + i) * ds;
      const float* qi = v.Q.data + i * dq + hd * dhd;
      const float* pi = v.P.data + (hd * B + i) * ds;
      float* dqi = dQ + i * dq + hd * dhd;
      float* dpi = dP + (hd * B + i) * ds;
      for (std::int64_t e = lane; e < dhd; e += 32) dqi[e] = 0.f;
      for (std::int64_t e = lane; e < ds; e += 32) dpi[e] = 0.f;
      double sum = 0;
      for (int j = 0; j < k; ++j) {
        if (rows[j] < 0) continue;
        const std::int64_t c = rows[j];
        const float aj = a[j];
        float s = warp_dot(gi, v.Vn.data + std::int64_t(v.node[c]) * dq + hd * dhd, dhd, lane);
        if (ds > 0) {
          s += warp_dot(gs, v.slots.data + c * ds, ds, lane);
          float* dsl = dslots + (i * k + j) * ds;
          for (std::int64_t e = lane; e < ds; e += 32) dsl[e] += aj * gs[e];
        }
        float* dv = dV + c * dq + hd * dhd;
        for (std::int64_t e = lane; e < dhd; e += 32) dv[e] = aj * gi[e];
        if (lane == 0) dai[j] = s;
        sum += double(aj) * s;
      }
      __syncwarp();  // lane 0's da before every lane reads it
      double gacc = 0;
      for (int j = 0; j < k; ++j) {
        if (rows[j] < 0) continue;
        const std::int64_t c = rows[j];
        const float g = a[j] * (dai[j] - float(sum)) * scale;
        gacc += double(g);
        const float* kn = v.Kn.data + std::int64_t(v.node[c]) * dq + hd * dhd;
        for (std::int64_t e = lane; e < dhd; e += 32) dqi[e] += g * (kn[e] + v.bk[hd * dhd + e]);
        float* dk = dK + c * dq + hd * dhd;
        for (std::int64_t e = lane; e < dhd; e += 32) dk[e] = g * qi[e];
        if (ds > 0) {
          const float* sl = v.slots.data + c * ds;
          float* dsl = dslots + (i * k + j) * ds;
          for (std::int64_t e = lane; e < ds; e += 32) {
            dpi[e] += g * sl[e];
            dsl[e] += g * pi[e];
          }
        }
      }
      if (lane == 0) gsum[i * heads + hd] = gacc;
      __syncwarp();
    }
  }
}

// dbk[e] += Σ_i gsum[i, head of e] Q[i, e], over the queries in order in double.
__global__ void tgat_bias_grad_kernel(const float* Q, const double* gsum, std::int64_t B,
                                      std::int64_t dq, int heads, float* dbk) {
  const std::int64_t dhd = dq / heads;
  for (std::int64_t e = grid_start(); e < dq; e += grid_stride()) {
    const std::int64_t hd = e / dhd;
    double acc = 0;
    for (std::int64_t i = 0; i < B; ++i) acc += gsum[i * heads + hd] * double(Q[i * dq + e]);
    dbk[e] += float(acc);
  }
}

}  // namespace

void CudaBackend::do_split_heads(const MatrixView& x, int heads, const MatrixView& out) {
  if (out.size() == 0) return;
  split_heads_kernel<<<grid_for(out.size()), kThreads, 0, stream_>>>(x.data, out.data, x.rows,
                                                                     out.cols, heads, out.size());
  check_launch(__func__);
}

void CudaBackend::do_merge_heads(const MatrixView& x, int heads, const MatrixView& out,
                                 bool accumulate) {
  if (out.size() == 0) return;
  merge_heads_kernel<<<grid_for(out.size()), kThreads, 0, stream_>>>(
      x.data, out.data, out.rows, x.cols, heads, accumulate, out.size());
  check_launch(__func__);
}

void CudaBackend::do_copy_columns(const MatrixView& src, std::int64_t src_col,
                                  const MatrixView& dst, std::int64_t dst_col, std::int64_t width,
                                  bool accumulate) {
  const std::int64_t total = src.rows * width;
  if (total == 0) return;
  copy_columns_kernel<<<grid_for(total), kThreads, 0, stream_>>>(
      src.data, src.cols, src_col, dst.data, dst.cols, dst_col, width, accumulate, total);
  check_launch(__func__);
}

void CudaBackend::do_mask_rows(const MatrixView& X, const std::int32_t* keep) {
  if (X.size() == 0) return;
  mask_rows_kernel<<<grid_for(X.size()), kThreads, 0, stream_>>>(X.data, keep, X.cols, X.size());
  check_launch(__func__);
}

void CudaBackend::do_tgat_attend(const TgatView& v, const float* bv, const MatrixView& alpha,
                                 const MatrixView& ctx, const MatrixView& sbar) {
  const std::int64_t warps = v.Q.rows * v.heads;
  if (warps == 0) return;
  tgat_attend_kernel<<<grid_for(warps * 32), kThreads, 0, stream_>>>(v, bv, alpha.data, ctx.data,
                                                                     sbar.data);
  check_launch(__func__);
}

void CudaBackend::do_tgat_attend_backward(const TgatView& v, const MatrixView& alpha,
                                          const MatrixView& dctx, const MatrixView& dsbar,
                                          const MatrixView& dQ, const MatrixView& dK,
                                          const MatrixView& dV, const MatrixView& dP,
                                          const MatrixView& dslots, float* dbk) {
  const std::int64_t B = v.Q.rows;
  if (B == 0) return;
  Layout lay;
  const std::size_t da_at = lay.take(sizeof(float) * std::size_t(B * v.heads * v.k));
  const std::size_t gsum_at = lay.take(sizeof(double) * std::size_t(B * v.heads));
  char* base = scratch(lay.bytes);
  float* da = reinterpret_cast<float*>(base + da_at);
  double* gsum = reinterpret_cast<double*>(base + gsum_at);
  tgat_attend_backward_kernel<<<grid_for(B * 32), kThreads, 0, stream_>>>(
      v, alpha.data, dctx.data, dsbar.data, dQ.data, dK.data, dV.data, dP.data, dslots.data, da,
      gsum);
  check_launch(__func__);
  if (v.Q.cols == 0) return;
  tgat_bias_grad_kernel<<<grid_for(v.Q.cols), kThreads, 0, stream_>>>(v.Q.data, gsum, B, v.Q.cols,
                                                                      v.heads, dbk);
  check_launch(__func__);
}

}  // namespace halo

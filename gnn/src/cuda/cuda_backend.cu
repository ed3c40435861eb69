// CUDA kernels other than SpMM: the GPU twin of cpu_backend.cc, op for op with the same
// semantics. GEMM goes to cuBLAS (FP32 by default; TF32/BF16 tensor ops with
// --matmul-precision); everything else is own kernels on the backend's stream.
//
// Determinism (no floating-point atomics anywhere):
// - column_sums, column_moments, batch_norm_grad_sums: rows are cut into fixed blocks (256 rows,
//   as on the CPU, or more for tall matrices so there are at most 2048 blocks: a function of the
//   row count alone); one thread per (block, column) sums its rows in order in double into a
//   partials buffer, then one thread per column adds the partials in block order. The result
//   is independent of scheduling and of the launch configuration.
// - softmax_xent, bce_logits: one warp per listed row (its lanes' shares combined by a fixed
//   shuffle tree) writes the row's loss in double; the losses are summed in fixed chunks of
//   4096 rows (a fixed shared-memory tree per chunk), and the chunk sums in order on the host.
// - scatter_add_rows: the row list is sorted by destination with a stable radix sort (CUB), so
//   rows going to one destination stay in index order; then one thread per (destination,
//   column) adds them in that order: the same additions in the same order as the CPU's
//   sequential loop, so the result is bitwise the CPU's, with parallelism over destinations x
//   columns instead of columns alone.
// - dropout draws dropout_u16 exactly (one Philox call per 8 columns, as the CPU's AVX2 path),
//   so masks are bitwise the CPU's; so does attention dropout (per edge and head).
// - graph attention: gathers only, as on the CPU. A row's (or a column's) sums run in edge
//   order in one thread, or over one warp's lanes combined by a fixed shuffle tree; the
//   attention vectors' gradients are column reductions (fixed row blocks in double, then the
//   blocks in order).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cub/device/device_radix_sort.cuh>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_launch.h"
#include "halo/gnn/attention_view.h"
#include "halo/gnn/bf16.h"
#include "halo/gnn/cuda_check.h"
#include "halo/gnn/device.h"

namespace halo {

void check_launch(const char* op) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess)
    throw SystemError(std::string(op) + ": launch failed: " + cudaGetErrorString(launch));
  static const bool sync = [] {
    const char* v = std::getenv("HALO_CUDA_SYNC");
    return v && std::string(v) == "1";
  }();
  if (!sync) return;
  try {
    device_synchronize();  // the backend's work, not NCCL's in-flight exchanges
  } catch (const SystemError& e) {
    throw SystemError(std::string(op) + " failed on the GPU (HALO_CUDA_SYNC=1): " + e.what());
  }
}

namespace {

using namespace cuda_launch;  // NOLINT(google-build-using-namespace): the kernels' vocabulary

constexpr std::int64_t kLossChunk = 4096;  // rows per partial in loss sums

std::int64_t loss_chunks(std::int64_t n) { return (n + kLossChunk - 1) / kLossChunk; }

// ---- element-wise ---------------------------------------------------------------------------

__global__ void add_bias_kernel(float* y, const float* b, std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) y[i] += b[mod_of(i, cols)];
}

__global__ void scale_kernel(float* y, float s, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) y[i] *= s;
}

__global__ void fill_kernel(float* y, float v, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) y[i] = v;
}

__global__ void pack_bf16_kernel(const float* src, std::uint16_t* dst, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) dst[i] = to_bf16(src[i]);
}

__global__ void unpack_bf16_kernel(const std::uint16_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) dst[i] = from_bf16(src[i]);
}

__global__ void relu_kernel(float* y, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    y[i] = y[i] < 0.f ? 0.f : y[i];  // std::max(y, 0.f)
}

__global__ void relu_backward_kernel(const float* y, float* dy, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) dy[i] = y[i] > 0.f ? dy[i] : 0.f;
}

__global__ void bn_relu_backward_kernel(const float* xhat, const float* gamma, const float* beta,
                                        float* dy, std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) {
    const std::int64_t c = mod_of(i, cols);
    const float y = xhat[i] * gamma[c] + beta[c];
    dy[i] = y > 0.f ? dy[i] : 0.f;
  }
}

__global__ void add_kernel(const float* src, float* dst, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) dst[i] += src[i];
}

// avg = keep * avg + take * x.
__global__ void smooth_kernel(const float* x, float keep, float take, float* avg, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    avg[i] = keep * avg[i] + take * x[i];
}

// One thread per (row, 64-column block, j < 8): one Philox call at counter (id, block * 8 + j)
// decides columns block * 64 + j + 8 t, t < 8: word t % 4, low half for t < 4 (dropout_u16).
__global__ void dropout_kernel(float* y, std::int64_t rows, std::int64_t cols, float scale,
                               std::uint32_t threshold, PhiloxKey key, const NodeId* row_ids) {
  const std::int64_t blocks = (cols + 63) / 64;
  const std::int64_t n = rows * blocks * 8;
  for (std::int64_t t = grid_start(); t < n; t += grid_stride()) {
    const std::int64_t r = div_of(t, blocks * 8);
    const std::int64_t rem = t - r * (blocks * 8);
    const std::uint32_t b = std::uint32_t(rem / 8), j = std::uint32_t(rem % 8);
    const std::uint64_t id = row_ids ? std::uint64_t(row_ids[r]) : std::uint64_t(r);
    std::uint32_t c[4] = {std::uint32_t(id), std::uint32_t(id >> 32), b * 8 + j, 0};
    philox4x32(key, c);
    float* yr = y + r * cols;
#pragma unroll
    for (std::uint32_t k = 0; k < 8; ++k) {
      const std::int64_t col = std::int64_t(b) * 64 + j + 8 * k;
      if (col >= cols) break;
      const std::uint32_t w = c[k % 4];
      const std::uint32_t u = k < 4 ? (w & 0xffffu) : (w >> 16);
      yr[col] = u >= threshold ? yr[col] * scale : 0.f;
    }
  }
}

__global__ void batch_norm_apply_kernel(const float* x, const float* mean, const float* inv_std,
                                        const float* gamma, const float* beta, float* xhat,
                                        float* y, std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) {
    const std::int64_t c = mod_of(i, cols);
    const float v = (x[i] - mean[c]) * inv_std[c];
    if (xhat) xhat[i] = v;
    y[i] = v * gamma[c] + beta[c];
  }
}

__global__ void batch_norm_backward_kernel(const float* dy, const float* xhat, const float* gamma,
                                           const float* inv_std, const float* mean_dy,
                                           const float* mean_dy_xhat, float* dx, std::int64_t n,
                                           std::int64_t cols) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) {
    const std::int64_t c = mod_of(i, cols);
    dx[i] = gamma[c] * inv_std[c] * (dy[i] - mean_dy[c] - xhat[i] * mean_dy_xhat[c]);
  }
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, std::int64_t n,
                            float beta1, float beta2, float eps, float weight_decay,
                            float step_size, float bc2_sqrt) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) {
    const float gi = g[i] + weight_decay * p[i];
    const float mi = beta1 * m[i] + (1.f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
  }
}

__global__ void gather_rows_kernel(const float* src, const NodeId* idx, float* dst, std::int64_t n,
                                   std::int64_t cols) {
  for (std::int64_t t = grid_start(); t < n * cols; t += grid_stride()) {
    const std::int64_t i = div_of(t, cols), c = t - i * cols;
    dst[t] = src[std::int64_t(idx[i]) * cols + c];
  }
}

__global__ void iota_kernel(std::int32_t* v, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) v[i] = std::int32_t(i);
}

// keys: destinations sorted stably, order: the source row of each. The thread at the first
// position of a destination's run adds the run's rows in order (the CPU's order).
__global__ void scatter_add_sorted_kernel(const float* src, const NodeId* keys,
                                          const std::int32_t* order, float* dst, std::int64_t n,
                                          std::int64_t cols) {
  for (std::int64_t t = grid_start(); t < n * cols; t += grid_stride()) {
    const std::int64_t j = div_of(t, cols), c = t - j * cols;
    const NodeId d = keys[j];
    if (j > 0 && keys[j - 1] == d) continue;
    float* out = dst + std::int64_t(d) * cols + c;
    float acc = *out;
    for (std::int64_t k = j; k < n && keys[k] == d; ++k)
      acc += src[std::int64_t(order[k]) * cols + c];
    *out = acc;
  }
}

// ---- graph attention ------------------------------------------------------------------------

__device__ inline float leaky(float x, float slope) { return x > 0.f ? x : slope * x; }

// t[r, h] = <z[r, h, :], a[h, :]>, one thread per (row, head).
__global__ void gat_head_dots_kernel(const float* z, const float* a, std::int64_t n, int heads,
                                     int width, float* t) {
  const std::int64_t hf = std::int64_t(heads) * width;
  for (std::int64_t i = grid_start(); i < n * heads; i += grid_stride()) {
    const std::int64_t r = div_of(i, heads), h = i - r * heads;
    const float* zr = z + r * hf + h * width;
    const float* ah = a + h * width;
    float s = 0.f;
    for (int f = 0; f < width; ++f) s += zr[f] * ah[f];
    t[i] = s;
  }
}

// dz[r, j] += dt[r, j / F] a[j], element-wise over [n x H*F].
__global__ void gat_head_dots_dz_kernel(const float* a, const float* dt, std::int64_t n, int heads,
                                        int width, float* dz) {
  const std::int64_t hf = std::int64_t(heads) * width;
  for (std::int64_t i = grid_start(); i < n * hf; i += grid_stride()) {
    const std::int64_t r = div_of(i, hf), j = i - r * hf;
    dz[i] += dt[r * heads + div_of(j, width)] * a[j];
  }
}

// Pass 1 of d(a): part[b * H*F + j] = sum over block b's rows, in order, of dt[r, j / F] z[r, j].
__global__ void gat_head_dots_da_partials_kernel(const float* z, const float* dt, std::int64_t n,
                                                 int heads, int width, std::int64_t block_rows,
                                                 std::int64_t blocks, double* part) {
  const std::int64_t hf = std::int64_t(heads) * width;
  const std::int64_t j = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= hf) return;
  const std::int64_t h = div_of(j, width);
  for (std::int64_t b = blockIdx.y; b < blocks; b += gridDim.y) {
    double s = 0;
    const std::int64_t end = n < (b + 1) * block_rows ? n : (b + 1) * block_rows;
    for (std::int64_t r = b * block_rows; r < end; ++r)
      s += double(dt[r * heads + h]) * z[r * hf + j];
    part[b * hf + j] = s;
  }
}

// out[k] += float(sum[k]).
__global__ void add_double_kernel(const double* sum, std::int64_t n, float* out) {
  for (std::int64_t k = grid_start(); k < n; k += grid_stride()) out[k] += float(sum[k]);
}

// alpha over row u, head h: the max-subtracted softmax of LeakyReLU(el[v] + er[u]); one thread
// per (row, head), the row's edges in order (the CPU's arithmetic: the sum in double).
__global__ void gat_softmax_kernel(AttentionView g, const float* el, const float* er, int heads,
                                   float slope, float* alpha) {
  for (std::int64_t i = grid_start(); i < g.rows * heads; i += grid_stride()) {
    const std::int64_t u = div_of(i, heads), h = i - u * heads;
    const EdgeId b = g.offsets[u], e = g.offsets[u + 1];
    const float ru = er[i];
    float top = -INFINITY;
    for (EdgeId k = b; k < e; ++k) {
      const float s = leaky(el[std::int64_t(g.indices[k]) * heads + h] + ru, slope);
      alpha[k * heads + h] = s;
      top = fmaxf(top, s);
    }
    double sum = 0;
    for (EdgeId k = b; k < e; ++k) {
      const float x = expf(alpha[k * heads + h] - top);
      alpha[k * heads + h] = x;
      sum += x;
    }
    const float inv = float(1.0 / sum);  // every row has its self-loop: sum >= 1
    for (EdgeId k = b; k < e; ++k) alpha[k * heads + h] *= inv;
  }
}

// out[u, j] = sum over u's edges e of alpha[e, j / F] z[v, j]; a block per row, its threads over
// the H*F columns, each column's sum in edge order.
__global__ void gat_aggregate_kernel(AttentionView g, const float* alpha, const float* z, int heads,
                                     int width, float* out) {
  const std::int64_t hf = std::int64_t(heads) * width;
  for (std::int64_t u = blockIdx.x; u < g.rows; u += gridDim.x)
    for (std::int64_t j = threadIdx.x; j < hf; j += blockDim.x) {
      const std::int64_t h = div_of(j, width);
      float acc = 0.f;
      for (EdgeId k = g.offsets[u]; k < g.offsets[u + 1]; ++k)
        acc += alpha[k * heads + h] * z[std::int64_t(g.indices[k]) * hf + j];
      out[u * hf + j] = acc;
    }
}

// d(z)[v, j] += sum over v's transposed entries of alpha[e, j / F] dout[u, j]: a block per
// column, in the transpose's order.
__global__ void gat_aggregate_dz_kernel(AttentionView g, const float* alpha, const float* dout,
                                        int heads, int width, float* dz) {
  const std::int64_t hf = std::int64_t(heads) * width;
  for (std::int64_t v = blockIdx.x; v < g.cols; v += gridDim.x)
    for (std::int64_t j = threadIdx.x; j < hf; j += blockDim.x) {
      const std::int64_t h = div_of(j, width);
      float acc = dz[v * hf + j];
      for (EdgeId t = g.t_offsets[v]; t < g.t_offsets[v + 1]; ++t)
        acc += alpha[g.t_edge[t] * heads + h] * dout[std::int64_t(g.t_rows[t]) * hf + j];
      dz[v * hf + j] = acc;
    }
}

// dalpha[e, h] = <dout[u, h, :], z[v, h, :]>: a warp per row, its lanes over the features,
// combined by the shuffle tree. Runs after gat_aggregate_dz_kernel, so dalpha may be alpha.
__global__ void gat_aggregate_dalpha_kernel(AttentionView g, const float* z, const float* dout,
                                            int heads, int width, float* dalpha) {
  const std::int64_t hf = std::int64_t(heads) * width;
  const int lane = int(threadIdx.x % 32);
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t u = grid_start() / 32; u < g.rows; u += warps) {
    const float* d = dout + u * hf;
    for (EdgeId k = g.offsets[u]; k < g.offsets[u + 1]; ++k) {
      const float* zv = z + std::int64_t(g.indices[k]) * hf;
      for (int h = 0; h < heads; ++h) {
        float s = 0.f;
        for (int f = lane; f < width; f += 32) s += d[h * width + f] * zv[h * width + f];
        s = warp_sum_f(s);
        if (lane == 0) dalpha[k * heads + h] = s;
      }
    }
  }
}

// The softmax's backward over row u, head h: d(score) into dalpha, der += its row sum.
__global__ void gat_softmax_backward_rows_kernel(AttentionView g, const float* el, const float* er,
                                                 int heads, float slope, const float* alpha,
                                                 float* dalpha, float* der) {
  for (std::int64_t i = grid_start(); i < g.rows * heads; i += grid_stride()) {
    const std::int64_t u = div_of(i, heads), h = i - u * heads;
    const EdgeId b = g.offsets[u], e = g.offsets[u + 1];
    double dot = 0;
    for (EdgeId k = b; k < e; ++k) dot += double(alpha[k * heads + h]) * dalpha[k * heads + h];
    const float ru = er[i];
    double row = 0;
    for (EdgeId k = b; k < e; ++k) {
      const std::int64_t x = k * heads + h;
      const float pre = el[std::int64_t(g.indices[k]) * heads + h] + ru;
      const float ds = alpha[x] * float(dalpha[x] - dot) * (pre > 0.f ? 1.f : slope);
      dalpha[x] = ds;
      row += ds;
    }
    der[i] += float(row);
  }
}

// del[v, h] += the sum over v's transposed entries of d(score), in the transpose's order.
__global__ void gat_softmax_backward_cols_kernel(AttentionView g, const float* dscore, int heads,
                                                 float* del) {
  for (std::int64_t i = grid_start(); i < g.cols * heads; i += grid_stride()) {
    const std::int64_t v = div_of(i, heads), h = i - v * heads;
    double s = 0;
    for (EdgeId t = g.t_offsets[v]; t < g.t_offsets[v + 1]; ++t)
      s += dscore[g.t_edge[t] * heads + h];
    del[i] += float(s);
  }
}

// Attention dropout, bitwise the CPU's: keep iff dropout_u16(key, id(u) << 32 | id(v), h) >=
// threshold; a thread per row.
__global__ void gat_edge_dropout_kernel(AttentionView g, int heads, std::uint32_t threshold,
                                        float scale, PhiloxKey key, const NodeId* ids, float* x) {
  for (std::int64_t u = grid_start(); u < g.rows; u += grid_stride()) {
    const std::uint64_t du = std::uint64_t(std::uint32_t(ids ? ids[u] : NodeId(u))) << 32;
    for (EdgeId k = g.offsets[u]; k < g.offsets[u + 1]; ++k) {
      const NodeId v = g.indices[k];
      const std::uint64_t row = du | std::uint64_t(std::uint32_t(ids ? ids[v] : v));
      for (int h = 0; h < heads; ++h) {
        float& e = x[k * heads + h];
        e = dropout_u16(key, row, std::uint32_t(h)) >= threshold ? e * scale : 0.f;
      }
    }
  }
}

__global__ void elu_kernel(float* y, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    if (y[i] <= 0.f) y[i] = expm1f(y[i]);
}

__global__ void elu_backward_kernel(const float* y, float* dy, float y_scale, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    if (y[i] <= 0.f) dy[i] *= y[i] * y_scale + 1.f;
}

// ---- column reductions ----------------------------------------------------------------------

// Pass 1: part[(b * outputs + o) * cols + c] = the sum over rows of block b, in row order.
template <int Kind>
__global__ void column_partials_kernel(const float* a, const float* h, std::int64_t rows,
                                       std::int64_t cols, std::int64_t block_rows,
                                       std::int64_t blocks, double* part) {
  constexpr int outputs = Kind == 0 ? 1 : 2;
  const std::int64_t c = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (std::int64_t b = blockIdx.y; b < blocks; b += gridDim.y) {
    double s0 = 0, s1 = 0;
    const std::int64_t end = rows < (b + 1) * block_rows ? rows : (b + 1) * block_rows;
#pragma unroll 4
    for (std::int64_t r = b * block_rows; r < end; ++r) {
      const float x = a[r * cols + c];
      s0 += x;
      if (Kind == 1) s1 += double(x) * x;
      if (Kind == 2) s1 += double(x) * h[r * cols + c];
    }
    part[(b * outputs) * cols + c] = s0;
    if (outputs == 2) part[(b * outputs + 1) * cols + c] = s1;
  }
}

// Pass 2: out[k] = sum over blocks in order of part[b * width + k], k < width.
__global__ void combine_partials_kernel(const double* part, std::int64_t blocks, std::int64_t width,
                                        double* out_d, float* out_f) {
  for (std::int64_t k = grid_start(); k < width; k += grid_stride()) {
    double s = 0;
#pragma unroll 4
    for (std::int64_t b = 0; b < blocks; ++b) s += part[b * width + k];
    if (out_d) out_d[k] = s;
    if (out_f) out_f[k] = float(s);
  }
}

// ---- losses ---------------------------------------------------------------------------------

__device__ inline double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline int warp_sum(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp per listed row: loss[i] (0 when unlabelled), has[i] = labelled, and the row's
// gradient (dlogits was zeroed beforehand).
__global__ void softmax_xent_kernel(const float* z, std::int64_t k, const std::int32_t* labels,
                                    const NodeId* rows, std::int64_t nrows, double denom, float* g,
                                    double* loss, std::int32_t* has) {
  const int lane = int(threadIdx.x % 32);
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t i = grid_start() / 32; i < nrows; i += warps) {
    const NodeId r = rows[i];
    const std::int32_t y = labels[r];
    if (y < 0) {
      if (lane == 0) {
        loss[i] = 0;
        has[i] = 0;
      }
      continue;
    }
    const float* zr = z + std::int64_t(r) * k;
    float mx = zr[0];
    for (std::int64_t c = lane; c < k; c += 32) mx = fmaxf(mx, zr[c]);
    mx = warp_max(mx);
    double se = 0;
    for (std::int64_t c = lane; c < k; c += 32) se += exp(double(zr[c] - mx));
    se = warp_sum(se);
    const double lse = double(mx) + log(se);
    float* gr = g + std::int64_t(r) * k;
    const float one = float(1.0 / denom);
    for (std::int64_t c = lane; c < k; c += 32) {
      float v = float(exp(double(zr[c]) - lse) / denom);
      if (c == y) v -= one;
      gr[c] = v;
    }
    if (lane == 0) {
      loss[i] = lse - zr[y];
      has[i] = 1;
    }
  }
}

// One warp per listed row: loss[i] = the row's summed BCE over labelled tasks, cnt[i] = their
// number, gradient on labelled entries (dlogits was zeroed beforehand).
__global__ void bce_logits_kernel(const float* z, std::int64_t t, const std::int32_t* labels,
                                  const NodeId* rows, std::int64_t nrows, double denom, float* g,
                                  double* loss, std::int32_t* cnt) {
  const int lane = int(threadIdx.x % 32);
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t i = grid_start() / 32; i < nrows; i += warps) {
    const std::int64_t r = rows[i];
    const float* zr = z + r * t;
    const std::int32_t* yr = labels + r * t;
    float* gr = g + r * t;
    double l = 0;
    int n = 0;
    for (std::int64_t c = lane; c < t; c += 32) {
      const std::int32_t y = yr[c];
      if (y < 0) continue;
      const double x = zr[c];
      l += log1p(exp(-fabs(x))) + fmax(x, 0.0) - x * y;
      gr[c] = float((1.0 / (1.0 + exp(-x)) - y) / denom);
      ++n;
    }
    l = warp_sum(l);
    n = warp_sum(n);
    if (lane == 0) {
      loss[i] = l;
      cnt[i] = n;
    }
  }
}

// Block b sums entries [b * kLossChunk, (b + 1) * kLossChunk) with a fixed tree.
__global__ void sum_chunks_kernel(const double* v, const std::int32_t* cnt, std::int64_t n,
                                  double* psum, long long* pcount) {
  __shared__ double s[kThreads];
  __shared__ long long sc[kThreads];
  const std::int64_t begin = std::int64_t(blockIdx.x) * kLossChunk;
  const std::int64_t end = n < begin + kLossChunk ? n : begin + kLossChunk;
  double a = 0;
  long long ac = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    a += v[i];
    ac += cnt[i];
  }
  s[threadIdx.x] = a;
  sc[threadIdx.x] = ac;
  __syncthreads();
  for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) {
      s[threadIdx.x] += s[threadIdx.x + o];
      sc[threadIdx.x] += sc[threadIdx.x + o];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    psum[blockIdx.x] = s[0];
    pcount[blockIdx.x] = sc[0];
  }
}

}  // namespace

// ---- infrastructure -------------------------------------------------------------------------

DeviceBuffer::~DeviceBuffer() {
  device_free(p_);  // errors at teardown are ignored: nothing useful to do with them
}

void* DeviceBuffer::reserve(std::size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_ && p_) return p_;
  if (p_) {
    HALO_CUDA_CHECK(cudaStreamSynchronize(stream));
    device_free(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  const std::size_t grown = std::max<std::size_t>(align_up(bytes), 4096);
  p_ = device_alloc(grown);  // through halo's allocator: counted in the peak it reports
  bytes_ = grown;
  return p_;
}

CudaBackend::CudaBackend() {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) throw SystemError(devs.reason);
  try {
    HALO_CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: orders against the legacy stream
    HALO_CUBLAS_CHECK(cublasCreate(&cublas_));
    HALO_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // Plain FP32: no TF32 tensor-op math (the CPU computes in FP32 too).
    HALO_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    HALO_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
    HALO_CUSPARSE_CHECK(cusparseCreate(&cusparse_));
    HALO_CUSPARSE_CHECK(cusparseSetStream(cusparse_, stream_));
    // An upload's SpMM state goes with it (the backend outlives most operators).
    release_hook_ = add_storage_release_hook([this](std::uint64_t id) { drop_spmm_operators(id); });
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::wait_for_queued_work() { HALO_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::release() noexcept {
  // Teardown ignores errors (the runtime may already be shutting down at process exit).
  if (release_hook_) remove_storage_release_hook(release_hook_);
  release_hook_ = 0;
  if (stream_) cudaStreamSynchronize(stream_);
  spmm_ops_.clear();
  if (cusparse_) cusparseDestroy(cusparse_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
  cusparse_ = nullptr;
  cublas_ = nullptr;
  stream_ = nullptr;
}

const float* CudaBackend::upload(char* base, std::size_t at, const float* host, std::int64_t n) {
  float* d = reinterpret_cast<float*>(base + at);
  HALO_CUDA_CHECK(
      cudaMemcpyAsync(d, host, sizeof(float) * std::size_t(n), cudaMemcpyHostToDevice, stream_));
  return d;
}

template <int Kind>
const double* CudaBackend::reduce_columns(const MatrixView& a, const float* h, float* out_f) {
  constexpr int outputs = Kind == 0 ? 1 : 2;
  const std::int64_t cols = a.cols, block_rows = reduce_block_rows(a.rows);
  const std::int64_t blocks = std::max<std::int64_t>(1, (a.rows + block_rows - 1) / block_rows);
  Layout lay;
  const std::size_t part_at = lay.take(sizeof(double) * std::size_t(blocks * outputs * cols));
  const std::size_t out_at = lay.take(out_f ? 0 : sizeof(double) * std::size_t(outputs * cols));
  char* base = scratch(lay.bytes);
  double* part = reinterpret_cast<double*>(base + part_at);
  double* out = out_f ? nullptr : reinterpret_cast<double*>(base + out_at);
  const int threads = int(std::min<std::int64_t>(kThreads, (cols + 31) / 32 * 32));
  const dim3 grid(unsigned((cols + threads - 1) / threads),
                  unsigned(std::min<std::int64_t>(blocks, 65535)));
  column_partials_kernel<Kind>
      <<<grid, threads, 0, stream_>>>(a.data, h, a.rows, cols, block_rows, blocks, part);
  check_launch(__func__);
  combine_partials_kernel<<<grid_for(outputs * cols), kThreads, 0, stream_>>>(
      part, blocks, outputs * cols, out, out_f);
  check_launch(__func__);
  return out;
}

double CudaBackend::sum_losses(const double* loss, const std::int32_t* count, std::int64_t n,
                               double* psum, long long* pcount, std::int64_t* counted) {
  const std::int64_t chunks = loss_chunks(n);
  std::vector<double> hs(std::size_t(chunks), 0.0);
  std::vector<long long> hc(std::size_t(chunks), 0);
  if (chunks > 0) {
    sum_chunks_kernel<<<unsigned(chunks), kThreads, 0, stream_>>>(loss, count, n, psum, pcount);
    check_launch(__func__);
    HALO_CUDA_CHECK(cudaMemcpyAsync(hs.data(), psum, sizeof(double) * hs.size(),
                                    cudaMemcpyDeviceToHost, stream_));
    HALO_CUDA_CHECK(cudaMemcpyAsync(hc.data(), pcount, sizeof(long long) * hc.size(),
                                    cudaMemcpyDeviceToHost, stream_));
  }
  HALO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  double total = 0;
  long long c = 0;
  for (std::size_t i = 0; i < hs.size(); ++i) {
    total += hs[i];
    c += hc[i];
  }
  if (counted) *counted = std::int64_t(c);
  return total;
}

// ---- ops ------------------------------------------------------------------------------------

void CudaBackend::do_gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B,
                          float beta, const MatrixView& C) {
  const std::int64_t m = C.rows, n = C.cols, k = ta ? A.rows : A.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0)
      fill(C, 0);
    else {
      scale_kernel<<<grid_for(C.size()), kThreads, 0, stream_>>>(C.data, beta, C.size());
      check_launch(__func__);
    }
    return;
  }
  for (std::int64_t d : {m, n, k, A.cols, B.cols})
    if (d > INT_MAX)
      throw ParamError("CudaBackend::gemm: dimension " + std::to_string(d) +
                       " exceeds cuBLAS's int range");
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: a row-major matrix is its
  // transpose in column-major, so B goes first with the same transpose flags, ld = its cols.
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                          opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (precision_ == MatmulPrecision::kFp32) {
    HALO_CUBLAS_CHECK(cublasSgemm(cublas_, opb, opa, int(n), int(m), int(k), &alpha, B.data,
                                  int(B.cols), A.data, int(A.cols), &beta, C.data, int(C.cols)));
    check_launch("cublasSgemm (gemm)");
    return;
  }
  // float32 storage, inputs rounded to TF32 or BF16 on the tensor cores, float32 sums.
  const cublasComputeType_t compute = precision_ == MatmulPrecision::kTf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F_FAST_16BF;
  HALO_CUBLAS_CHECK(cublasGemmEx(cublas_, opb, opa, int(n), int(m), int(k), &alpha, B.data,
                                 CUDA_R_32F, int(B.cols), A.data, CUDA_R_32F, int(A.cols), &beta,
                                 C.data, CUDA_R_32F, int(C.cols), compute, CUBLAS_GEMM_DEFAULT));
  check_launch("cublasGemmEx (gemm)");
}

void CudaBackend::do_add_bias(const MatrixView& Y, const float* b) {
  if (Y.size() == 0) return;
  add_bias_kernel<<<grid_for(Y.size()), kThreads, 0, stream_>>>(Y.data, b, Y.size(), Y.cols);
  check_launch(__func__);
}

void CudaBackend::do_column_sums(const MatrixView& X, float* out) {
  if (X.cols == 0) return;
  if (X.rows == 0) {
    HALO_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float) * std::size_t(X.cols), stream_));
    check_launch(__func__);
    return;
  }
  reduce_columns<0>(X, nullptr, out);
}

void CudaBackend::do_relu(const MatrixView& Y) {
  if (Y.size() == 0) return;
  relu_kernel<<<grid_for(Y.size()), kThreads, 0, stream_>>>(Y.data, Y.size());
  check_launch(__func__);
}

void CudaBackend::do_relu_backward(const MatrixView& Y, const MatrixView& dY) {
  if (Y.size() == 0) return;
  relu_backward_kernel<<<grid_for(Y.size()), kThreads, 0, stream_>>>(Y.data, dY.data, Y.size());
  check_launch(__func__);
}

void CudaBackend::do_bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                                      const MatrixView& dY) {
  if (xhat.size() == 0) return;
  bn_relu_backward_kernel<<<grid_for(xhat.size()), kThreads, 0, stream_>>>(
      xhat.data, gamma, beta, dY.data, xhat.size(), xhat.cols);
  check_launch(__func__);
}

void CudaBackend::do_dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) {
  if (p <= 0.f || Y.size() == 0) return;
  const float scale = 1.f / (1.f - p);
  const std::uint32_t threshold = dropout_threshold(p);
  const std::int64_t threads = Y.rows * ((Y.cols + 63) / 64) * 8;
  dropout_kernel<<<grid_for(threads), kThreads, 0, stream_>>>(Y.data, Y.rows, Y.cols, scale,
                                                              threshold, key, row_ids);
  check_launch(__func__);
}

void CudaBackend::do_column_moments(const MatrixView& X, double* sum, double* sumsq) {
  const std::int64_t cols = X.cols;
  if (cols == 0) return;
  if (X.rows == 0) {
    std::fill(sum, sum + cols, 0.0);
    std::fill(sumsq, sumsq + cols, 0.0);
    return;
  }
  const double* out = reduce_columns<1>(X, nullptr, nullptr);
  HALO_CUDA_CHECK(cudaMemcpyAsync(sum, out, sizeof(double) * std::size_t(cols),
                                  cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaMemcpyAsync(sumsq, out + cols, sizeof(double) * std::size_t(cols),
                                  cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::do_batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                                      const float* gamma, const float* beta, const MatrixView* xhat,
                                      const MatrixView& Y) {
  if (X.size() == 0) return;
  const std::int64_t cols = X.cols;
  Layout lay;
  const std::size_t mean_at = lay.take(sizeof(float) * std::size_t(cols));
  const std::size_t inv_at = lay.take(sizeof(float) * std::size_t(cols));
  char* base = scratch(lay.bytes);
  const float* d_mean = upload(base, mean_at, mean, cols);
  const float* d_inv = upload(base, inv_at, inv_std, cols);
  batch_norm_apply_kernel<<<grid_for(X.size()), kThreads, 0, stream_>>>(
      X.data, d_mean, d_inv, gamma, beta, xhat ? xhat->data : nullptr, Y.data, X.size(), cols);
  check_launch(__func__);
}

void CudaBackend::do_batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat,
                                          double* sum_dy, double* sum_dy_xhat) {
  const std::int64_t cols = dY.cols;
  if (cols == 0) return;
  if (dY.rows == 0) {
    std::fill(sum_dy, sum_dy + cols, 0.0);
    std::fill(sum_dy_xhat, sum_dy_xhat + cols, 0.0);
    return;
  }
  const double* out = reduce_columns<2>(dY, xhat.data, nullptr);
  HALO_CUDA_CHECK(cudaMemcpyAsync(sum_dy, out, sizeof(double) * std::size_t(cols),
                                  cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaMemcpyAsync(sum_dy_xhat, out + cols, sizeof(double) * std::size_t(cols),
                                  cudaMemcpyDeviceToHost, stream_));
  HALO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::do_batch_norm_backward(const MatrixView& dY, const MatrixView& xhat,
                                         const float* gamma, const float* inv_std,
                                         const float* mean_dy, const float* mean_dy_xhat,
                                         const MatrixView& dX) {
  if (dY.size() == 0) return;
  const std::int64_t cols = dY.cols;
  Layout lay;
  const std::size_t inv_at = lay.take(sizeof(float) * std::size_t(cols));
  const std::size_t mdy_at = lay.take(sizeof(float) * std::size_t(cols));
  const std::size_t mdx_at = lay.take(sizeof(float) * std::size_t(cols));
  char* base = scratch(lay.bytes);
  const float* d_inv = upload(base, inv_at, inv_std, cols);
  const float* d_mdy = upload(base, mdy_at, mean_dy, cols);
  const float* d_mdx = upload(base, mdx_at, mean_dy_xhat, cols);
  batch_norm_backward_kernel<<<grid_for(dY.size()), kThreads, 0, stream_>>>(
      dY.data, xhat.data, gamma, d_inv, d_mdy, d_mdx, dX.data, dY.size(), cols);
  check_launch(__func__);
}

template <class Launch>
double CudaBackend::row_losses(const MatrixView& dlogits, std::int64_t nrows, std::int64_t* counted,
                               Launch&& launch) {
  fill(dlogits, 0.f);
  if (nrows <= 0 || dlogits.cols == 0) {
    if (counted) *counted = 0;
    return 0;
  }
  const std::int64_t chunks = loss_chunks(nrows);
  Layout lay;
  const std::size_t loss_at = lay.take(sizeof(double) * std::size_t(nrows));
  const std::size_t count_at = lay.take(sizeof(std::int32_t) * std::size_t(nrows));
  const std::size_t psum_at = lay.take(sizeof(double) * std::size_t(chunks));
  const std::size_t pcnt_at = lay.take(sizeof(long long) * std::size_t(chunks));
  char* base = scratch(lay.bytes);
  double* loss = reinterpret_cast<double*>(base + loss_at);
  std::int32_t* count = reinterpret_cast<std::int32_t*>(base + count_at);
  launch(loss, count);
  check_launch(__func__);
  return sum_losses(loss, count, nrows, reinterpret_cast<double*>(base + psum_at),
                    reinterpret_cast<long long*>(base + pcnt_at), counted);
}

double CudaBackend::do_softmax_xent(const MatrixView& logits, const std::int32_t* labels,
                                    const NodeId* rows, std::int64_t nrows, double denom,
                                    const MatrixView& dlogits, std::int64_t* counted) {
  return row_losses(dlogits, nrows, counted, [&](double* loss, std::int32_t* has) {
    softmax_xent_kernel<<<grid_for(nrows * 32), kThreads, 0, stream_>>>(
        logits.data, logits.cols, labels, rows, nrows, denom, dlogits.data, loss, has);
  });
}

double CudaBackend::do_bce_logits(const MatrixView& logits, const std::int32_t* labels,
                                  const NodeId* rows, std::int64_t nrows, double denom,
                                  const MatrixView& dlogits, std::int64_t* counted) {
  return row_losses(dlogits, nrows, counted, [&](double* loss, std::int32_t* cnt) {
    bce_logits_kernel<<<grid_for(nrows * 32), kThreads, 0, stream_>>>(
        logits.data, logits.cols, labels, rows, nrows, denom, dlogits.data, loss, cnt);
  });
}

void CudaBackend::do_adam(float* p, const float* g, float* m, float* v, std::int64_t n,
                          const AdamStep& s) {
  if (n <= 0) return;
  // The step constants exactly as the CPU computes them (on the host, in double).
  const double bc1 = 1.0 - std::pow(double(s.beta1), double(s.step));
  const double bc2 = 1.0 - std::pow(double(s.beta2), double(s.step));
  const float step_size = float(double(s.lr) / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));
  adam_kernel<<<grid_for(n), kThreads, 0, stream_>>>(p, g, m, v, n, s.beta1, s.beta2, s.eps,
                                                     s.weight_decay, step_size, bc2_sqrt);
  check_launch(__func__);
}

void CudaBackend::do_gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                 const MatrixView& dst) {
  if (n <= 0 || src.cols == 0) return;
  gather_rows_kernel<<<grid_for(n * src.cols), kThreads, 0, stream_>>>(src.data, idx, dst.data, n,
                                                                       src.cols);
  check_launch(__func__);
}

void CudaBackend::do_scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                      const MatrixView& dst) {
  if (n <= 0 || src.cols == 0) return;
  if (n > INT_MAX) throw ParamError("CudaBackend::scatter_add_rows: more than 2^31-1 rows");
  // Keys are in [0, dst.rows): sorting on the low bits that can be set is enough.
  int end_bit = 1;
  while (end_bit < 31 && (std::int64_t(1) << end_bit) < dst.rows) ++end_bit;
  std::size_t temp_bytes = 0;
  HALO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, idx, static_cast<NodeId*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), int(n), 0,
      end_bit, stream_));
  Layout lay;
  const std::size_t keys_at = lay.take(sizeof(NodeId) * std::size_t(n));
  const std::size_t iota_at = lay.take(sizeof(std::int32_t) * std::size_t(n));
  const std::size_t order_at = lay.take(sizeof(std::int32_t) * std::size_t(n));
  const std::size_t temp_at = lay.take(temp_bytes);
  char* base = scratch(lay.bytes);
  NodeId* keys = reinterpret_cast<NodeId*>(base + keys_at);
  std::int32_t* iota = reinterpret_cast<std::int32_t*>(base + iota_at);
  std::int32_t* order = reinterpret_cast<std::int32_t*>(base + order_at);
  iota_kernel<<<grid_for(n), kThreads, 0, stream_>>>(iota, n);
  check_launch(__func__);
  // LSD radix sort is stable: rows with one destination keep their index order.
  HALO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + temp_at, temp_bytes, idx, keys, iota,
                                                  order, int(n), 0, end_bit, stream_));
  check_launch("cub::DeviceRadixSort::SortPairs (scatter_add_rows)");
  scatter_add_sorted_kernel<<<grid_for(n * src.cols), kThreads, 0, stream_>>>(
      src.data, keys, order, dst.data, n, src.cols);
  check_launch(__func__);
}

void CudaBackend::do_add(const MatrixView& src, const MatrixView& dst) {
  if (src.size() == 0) return;
  add_kernel<<<grid_for(src.size()), kThreads, 0, stream_>>>(src.data, dst.data, src.size());
  check_launch(__func__);
}

void CudaBackend::do_smooth(const MatrixView& x, float gamma, const MatrixView& avg) {
  if (x.size() == 0) return;
  smooth_kernel<<<grid_for(x.size()), kThreads, 0, stream_>>>(x.data, gamma, 1.f - gamma, avg.data,
                                                              x.size());
  check_launch(__func__);
}

void CudaBackend::do_copy(const MatrixView& src, const MatrixView& dst) {
  if (src.size() == 0 || src.data == dst.data) return;
  HALO_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, sizeof(float) * std::size_t(src.size()),
                                  cudaMemcpyDeviceToDevice, stream_));
  check_launch(__func__);
}

void CudaBackend::do_fill(const MatrixView& X, float v) {
  if (X.size() == 0) return;
  if (v == 0.f && !std::signbit(v)) {
    HALO_CUDA_CHECK(cudaMemsetAsync(X.data, 0, sizeof(float) * std::size_t(X.size()), stream_));
    check_launch(__func__);
    return;
  }
  fill_kernel<<<grid_for(X.size()), kThreads, 0, stream_>>>(X.data, v, X.size());
  check_launch(__func__);
}

void CudaBackend::do_pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) {
  if (n <= 0) return;
  pack_bf16_kernel<<<grid_for(n), kThreads, 0, stream_>>>(src, dst, n);
  check_launch(__func__);
}

void CudaBackend::do_unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) {
  if (n <= 0) return;
  unpack_bf16_kernel<<<grid_for(n), kThreads, 0, stream_>>>(src, dst, n);
  check_launch(__func__);
}

Backend& cuda_backend() {
  // Constructed on first use; a constructor that throws (no GPU) leaves it unconstructed, so a
  // later call tries again.
  static CudaBackend backend;
  return backend;
}

// ---- graph attention ------------------------------------------------------------------------

void CudaBackend::do_gat_head_dots(const MatrixView& z, const MatrixView& a, const MatrixView& t) {
  if (t.size() == 0) return;
  gat_head_dots_kernel<<<grid_for(t.size()), kThreads, 0, stream_>>>(
      z.data, a.data, z.rows, int(a.rows), int(a.cols), t.data);
  check_launch(__func__);
}

void CudaBackend::do_gat_head_dots_backward(const MatrixView& z, const MatrixView& a,
                                            const MatrixView& dt, const MatrixView& dz,
                                            const MatrixView& da) {
  const int heads = int(a.rows), width = int(a.cols);
  const std::int64_t n = z.rows, hf = z.cols;
  if (n == 0) return;
  gat_head_dots_dz_kernel<<<grid_for(n * hf), kThreads, 0, stream_>>>(a.data, dt.data, n, heads,
                                                                      width, dz.data);
  check_launch(__func__);
  const std::int64_t block_rows = reduce_block_rows(n);
  const std::int64_t blocks = (n + block_rows - 1) / block_rows;
  Layout lay;
  const std::size_t part_at = lay.take(sizeof(double) * std::size_t(blocks * hf));
  const std::size_t sum_at = lay.take(sizeof(double) * std::size_t(hf));
  char* base = scratch(lay.bytes);
  double* part = reinterpret_cast<double*>(base + part_at);
  double* sum = reinterpret_cast<double*>(base + sum_at);
  const int threads = int(std::min<std::int64_t>(kThreads, (hf + 31) / 32 * 32));
  const dim3 grid(unsigned((hf + threads - 1) / threads),
                  unsigned(std::min<std::int64_t>(blocks, 65535)));
  gat_head_dots_da_partials_kernel<<<grid, threads, 0, stream_>>>(z.data, dt.data, n, heads, width,
                                                                  block_rows, blocks, part);
  check_launch(__func__);
  combine_partials_kernel<<<grid_for(hf), kThreads, 0, stream_>>>(part, blocks, hf, sum, nullptr);
  check_launch(__func__);
  add_double_kernel<<<grid_for(hf), kThreads, 0, stream_>>>(sum, hf, da.data);
  check_launch(__func__);
}

void CudaBackend::do_gat_edge_softmax(const AttentionView& A, const MatrixView& el,
                                      const MatrixView& er, float slope, const MatrixView& alpha) {
  if (A.rows == 0) return;
  const int heads = int(el.cols);
  gat_softmax_kernel<<<grid_for(A.rows * heads), kThreads, 0, stream_>>>(A, el.data, er.data, heads,
                                                                         slope, alpha.data);
  check_launch(__func__);
}

void CudaBackend::do_gat_edge_softmax_backward(const AttentionView& A, const MatrixView& el,
                                               const MatrixView& er, float slope,
                                               const MatrixView& alpha, const MatrixView& dalpha,
                                               const MatrixView& del, const MatrixView& der) {
  const int heads = int(el.cols);
  if (A.rows > 0) {
    gat_softmax_backward_rows_kernel<<<grid_for(A.rows * heads), kThreads, 0, stream_>>>(
        A, el.data, er.data, heads, slope, alpha.data, dalpha.data, der.data);
    check_launch(__func__);
  }
  if (A.cols > 0) {
    gat_softmax_backward_cols_kernel<<<grid_for(A.cols * heads), kThreads, 0, stream_>>>(
        A, dalpha.data, heads, del.data);
    check_launch(__func__);
  }
}

void CudaBackend::do_gat_aggregate(const AttentionView& A, const MatrixView& alpha,
                                   const MatrixView& z, const MatrixView& out) {
  if (A.rows == 0) return;
  const int heads = int(alpha.cols), width = int(z.cols / heads);
  const int threads = int(std::min<std::int64_t>(kThreads, (z.cols + 31) / 32 * 32));
  gat_aggregate_kernel<<<unsigned(std::min<std::int64_t>(A.rows, kMaxBlocks)), threads, 0,
                         stream_>>>(A, alpha.data, z.data, heads, width, out.data);
  check_launch(__func__);
}

void CudaBackend::do_gat_aggregate_backward(const AttentionView& A, const MatrixView& alpha,
                                            const MatrixView& z, const MatrixView& dout,
                                            const MatrixView& dalpha, const MatrixView& dz) {
  const int heads = int(alpha.cols), width = int(z.cols / heads);
  const int threads = int(std::min<std::int64_t>(kThreads, (z.cols + 31) / 32 * 32));
  if (A.cols > 0) {
    gat_aggregate_dz_kernel<<<unsigned(std::min<std::int64_t>(A.cols, kMaxBlocks)), threads, 0,
                              stream_>>>(A, alpha.data, dout.data, heads, width, dz.data);
    check_launch(__func__);
  }
  if (A.rows > 0) {  // after d(z): it read alpha, which dalpha may be
    gat_aggregate_dalpha_kernel<<<grid_for(A.rows * 32), kThreads, 0, stream_>>>(
        A, z.data, dout.data, heads, width, dalpha.data);
    check_launch(__func__);
  }
}

void CudaBackend::do_gat_edge_dropout(const AttentionView& A, const MatrixView& x, float p,
                                      PhiloxKey key, const NodeId* ids) {
  if (p <= 0.f || A.rows == 0) return;
  gat_edge_dropout_kernel<<<grid_for(A.rows), kThreads, 0, stream_>>>(
      A, int(x.cols), dropout_threshold(p), 1.f / (1.f - p), key, ids, x.data);
  check_launch(__func__);
}

void CudaBackend::do_elu(const MatrixView& Y) {
  if (Y.size() == 0) return;
  elu_kernel<<<grid_for(Y.size()), kThreads, 0, stream_>>>(Y.data, Y.size());
  check_launch(__func__);
}

void CudaBackend::do_elu_backward(const MatrixView& Y, const MatrixView& dY, float y_scale) {
  if (Y.size() == 0) return;
  elu_backward_kernel<<<grid_for(Y.size()), kThreads, 0, stream_>>>(Y.data, dY.data, y_scale,
                                                                    Y.size());
  check_launch(__func__);
}

}  // namespace halo

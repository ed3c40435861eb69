// The CUDA backend's temporal-GNN ops (backend.h, "Temporal GNNs"): the GPU twins of
// temporal_ops_cpu.cc, op for op with the same semantics, on the backend's stream.
//
// Determinism (no floating-point atomics):
// - time_encode_backward: rows cut into fixed blocks (reduce_block_rows: a function of the row
//   count alone); one thread per (block, column) sums its rows in order in double, then one
//   thread per column adds the blocks' partials in block order and adds the float of the total
//   to the gradient. The CPU's partition is its threads', so the two agree to rounding only.
// - time_projection_backward: one thread per column adds the rows' terms in row order in float,
//   the CPU's sequence of additions (the compilers may contract a product into an add
//   differently, so agreement is to rounding).
// - scatter_add_rows_from: as scatter_add_rows (cuda_backend.cu), a stable radix sort of the
//   destinations, then each destination's rows added in index order by one thread per column:
//   bitwise the CPU's additions. Skipped rows (idx < 0) sort last under a key no row has.
// Element-wise kernels use CUDA's expf and tanhf where the CPU calls libm: within a few ulps.
#include <climits>
#include <cub/device/device_radix_sort.cuh>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_launch.h"
#include "halo/gnn/cuda_check.h"
#include "halo/gnn/temporal/cos_sin.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

using namespace cuda_launch;  // NOLINT(google-build-using-namespace): the kernels' vocabulary

__device__ inline float sigmoid_f(float x) { return 1.f / (1.f + expf(-x)); }

__global__ void time_encode_kernel(const double* dt, const float* w, const float* b, std::int64_t n,
                                   std::int64_t d, float* out, float* sin) {
  for (std::int64_t t = grid_start(); t < n * d; t += grid_stride()) {
    const std::int64_t i = div_of(t, d), k = t - i * d;
    cos_sin(double(w[k]) * dt[i] + double(b[k]), out[t], sin[t]);
  }
}

// Pass 1: part[(blk * 2 + o) * d + k], o = 0: sum of -sin dout dt, o = 1: sum of -sin dout,
// over the rows of block blk in order.
__global__ void time_encode_partials_kernel(const double* dt, const float* sin, const float* dout,
                                            std::int64_t n, std::int64_t d, std::int64_t block_rows,
                                            std::int64_t blocks, double* part) {
  const std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= d) return;
  for (std::int64_t blk = blockIdx.y; blk < blocks; blk += gridDim.y) {
    double gw = 0, gb = 0;
    const std::int64_t end = n < (blk + 1) * block_rows ? n : (blk + 1) * block_rows;
    for (std::int64_t i = blk * block_rows; i < end; ++i) {
      const double s = -double(sin[i * d + k]) * double(dout[i * d + k]);
      gw += s * dt[i];
      gb += s;
    }
    part[(blk * 2) * d + k] = gw;
    part[(blk * 2 + 1) * d + k] = gb;
  }
}

// Pass 2: the partials of column k in block order, added to dw[k] (o = 0) or db[k] (o = 1).
__global__ void time_encode_combine_kernel(const double* part, std::int64_t blocks, std::int64_t d,
                                           float* dw, float* db) {
  for (std::int64_t t = grid_start(); t < 2 * d; t += grid_stride()) {
    const std::int64_t o = t < d ? 0 : 1, k = t - o * d;
    double s = 0;
    for (std::int64_t blk = 0; blk < blocks; ++blk) s += part[(blk * 2 + o) * d + k];
    (o == 0 ? dw : db)[k] += float(s);
  }
}

__global__ void gru_gates_kernel(const float* a, const float* c, const float* h, std::int64_t B,
                                 std::int64_t H, float* rzn, float* h_out) {
  for (std::int64_t t = grid_start(); t < B * H; t += grid_stride()) {
    const std::int64_t i = div_of(t, H), j = t - i * H, g = i * 3 * H + j;
    const float r = sigmoid_f(a[g] + c[g]);
    const float z = sigmoid_f(a[g + H] + c[g + H]);
    const float n = tanhf(a[g + 2 * H] + r * c[g + 2 * H]);
    rzn[g] = r;
    rzn[g + H] = z;
    rzn[g + 2 * H] = n;
    h_out[t] = (1.f - z) * n + z * h[t];
  }
}

__global__ void gru_gates_backward_kernel(const float* dh_out, const float* h, const float* c,
                                          const float* rzn, std::int64_t B, std::int64_t H,
                                          float* da, float* dc, float* dh) {
  for (std::int64_t t = grid_start(); t < B * H; t += grid_stride()) {
    const std::int64_t i = div_of(t, H), j = t - i * H, g = i * 3 * H + j;
    const float gr = dh_out[t], r = rzn[g], z = rzn[g + H], n = rzn[g + 2 * H];
    const float dn = gr * (1.f - z) * (1.f - n * n);
    const float dz = gr * (h[t] - n) * z * (1.f - z);
    const float dr = dn * c[g + 2 * H] * r * (1.f - r);
    da[g] = dc[g] = dr;
    da[g + H] = dc[g + H] = dz;
    da[g + 2 * H] = dn;
    dc[g + 2 * H] = dn * r;
    dh[t] = gr * z;
  }
}

__global__ void time_projection_kernel(const float* m, const float* delta, const float* w,
                                       const float* b, std::int64_t n, std::int64_t d, float* z) {
  for (std::int64_t t = grid_start(); t < n * d; t += grid_stride()) {
    const std::int64_t i = div_of(t, d), c = t - i * d;
    z[t] = m[t] * (1.f + w[c] * delta[i] + b[c]);
  }
}

// dw[c] += dz m delta and db[c] += dz m, rows in order, one thread per column (before dm is
// written: dm may be dz).
__global__ void time_projection_sums_kernel(const float* m, const float* delta, const float* dz,
                                            std::int64_t n, std::int64_t d, float* dw, float* db) {
  for (std::int64_t c = grid_start(); c < d; c += grid_stride()) {
    float gw = dw[c], gb = db[c];
    for (std::int64_t i = 0; i < n; ++i) {
      const float g = dz[i * d + c];
      gw += g * m[i * d + c] * delta[i];
      gb += g * m[i * d + c];
    }
    dw[c] = gw;
    db[c] = gb;
  }
}

__global__ void time_projection_dm_kernel(const float* delta, const float* w, const float* b,
                                          const float* dz, std::int64_t n, std::int64_t d,
                                          float* dm) {
  for (std::int64_t t = grid_start(); t < n * d; t += grid_stride()) {
    const std::int64_t i = div_of(t, d), c = t - i * d;
    dm[t] = dz[t] * (1.f + w[c] * delta[i] + b[c]);
  }
}

__global__ void gather_rows_into_kernel(const float* src, std::int64_t src_cols, const NodeId* idx,
                                        std::int64_t n, float* dst, std::int64_t dst_cols,
                                        std::int64_t dst_col) {
  for (std::int64_t t = grid_start(); t < n * src_cols; t += grid_stride()) {
    const std::int64_t i = div_of(t, src_cols), c = t - i * src_cols;
    const NodeId r = idx[i];
    if (r >= 0) dst[i * dst_cols + dst_col + c] = src[std::int64_t(r) * src_cols + c];
  }
}

// key[i] = idx[i], or `skip` (larger than every destination) where idx[i] < 0; order[i] = i.
__global__ void scatter_keys_kernel(const NodeId* idx, std::int64_t n, NodeId skip, NodeId* key,
                                    std::int32_t* order) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) {
    key[i] = idx[i] < 0 ? skip : idx[i];
    order[i] = std::int32_t(i);
  }
}

// keys: destinations sorted stably, order: the source row of each. The thread at the first
// position of a destination's run adds the run's rows in order (the CPU's order).
__global__ void scatter_add_from_sorted_kernel(const float* src, std::int64_t src_cols,
                                               std::int64_t src_col, const NodeId* keys,
                                               const std::int32_t* order, NodeId skip, float* dst,
                                               std::int64_t n, std::int64_t width) {
  for (std::int64_t t = grid_start(); t < n * width; t += grid_stride()) {
    const std::int64_t j = div_of(t, width), c = t - j * width;
    const NodeId d = keys[j];
    if (d == skip || (j > 0 && keys[j - 1] == d)) continue;
    float* out = dst + std::int64_t(d) * width + c;
    float acc = *out;
    for (std::int64_t k = j; k < n && keys[k] == d; ++k)
      acc += src[std::int64_t(order[k]) * src_cols + src_col + c];
    *out = acc;
  }
}

__global__ void scale_kernel(float* x, std::int64_t n, float alpha) {
  for (std::int64_t t = grid_start(); t < n; t += grid_stride()) x[t] *= alpha;
}

__global__ void scatter_rows_kernel(const float* src, const NodeId* idx, std::int64_t n,
                                    std::int64_t cols, float* dst) {
  for (std::int64_t t = grid_start(); t < n * cols; t += grid_stride()) {
    const std::int64_t i = div_of(t, cols), c = t - i * cols;
    const NodeId r = idx[i];
    if (r >= 0) dst[std::int64_t(r) * cols + c] = src[t];
  }
}

// One thread per output element: its row's sum left to right from the first row, then the
// scale (the CPU's float order).
__global__ void sum_rows_into_kernel(const float* src, std::int64_t d, const std::int32_t* first,
                                     const std::int32_t* rows, const std::int32_t* divisor,
                                     std::int64_t n, float* dst, std::int64_t dst_cols,
                                     std::int64_t dst_col) {
  for (std::int64_t t = grid_start(); t < n * d; t += grid_stride()) {
    const std::int64_t i = div_of(t, d), c = t - i * d;
    const std::int64_t r0 = first[i], nr = rows ? rows[i] : 1;
    float s = src[r0 * d + c];
    for (std::int64_t m = 1; m < nr; ++m) s += src[(r0 + m) * d + c];
    if (divisor) s *= 1.f / float(divisor[i]);
    dst[i * dst_cols + dst_col + c] = s;
  }
}

// One thread per (source row, column): writes that value to each of the row's count[i] rows.
__global__ void spread_rows_kernel(const float* src, std::int64_t src_cols, std::int64_t src_col,
                                   const std::int32_t* first, const std::int32_t* count,
                                   std::int64_t n, float* dst, std::int64_t d) {
  for (std::int64_t t = grid_start(); t < n * d; t += grid_stride()) {
    const std::int64_t i = div_of(t, d), c = t - i * d;
    const float v = __fdiv_rn(src[i * src_cols + src_col + c], float(count[i]));
    for (std::int64_t m = 0; m < count[i]; ++m) dst[(std::int64_t(first[i]) + m) * d + c] = v;
  }
}

}  // namespace

void CudaBackend::do_time_encode(const double* dt, std::int64_t n, const float* w, const float* b,
                                 const MatrixView& out, const MatrixView& sin) {
  if (out.size() == 0) return;
  time_encode_kernel<<<grid_for(out.size()), kThreads, 0, stream_>>>(dt, w, b, n, out.cols,
                                                                     out.data, sin.data);
  check_launch(__func__);
}

void CudaBackend::do_time_encode_backward(const double* dt, const MatrixView& sin,
                                          const MatrixView& dout, float* dw, float* db) {
  const std::int64_t n = sin.rows, d = sin.cols;
  if (n == 0 || d == 0) return;
  const std::int64_t block_rows = reduce_block_rows(n);
  const std::int64_t blocks = (n + block_rows - 1) / block_rows;
  double* part = reinterpret_cast<double*>(scratch(sizeof(double) * std::size_t(2 * blocks * d)));
  const int threads = int(std::min<std::int64_t>(kThreads, (d + 31) / 32 * 32));
  const dim3 grid(unsigned((d + threads - 1) / threads),
                  unsigned(std::min<std::int64_t>(blocks, 65535)));
  time_encode_partials_kernel<<<grid, threads, 0, stream_>>>(dt, sin.data, dout.data, n, d,
                                                             block_rows, blocks, part);
  check_launch(__func__);
  time_encode_combine_kernel<<<grid_for(2 * d), kThreads, 0, stream_>>>(part, blocks, d, dw, db);
  check_launch(__func__);
}

void CudaBackend::do_gru_gates(const MatrixView& a, const MatrixView& c, const MatrixView& h,
                               const MatrixView& rzn, const MatrixView& h_out) {
  if (h.size() == 0) return;
  gru_gates_kernel<<<grid_for(h.size()), kThreads, 0, stream_>>>(a.data, c.data, h.data, h.rows,
                                                                 h.cols, rzn.data, h_out.data);
  check_launch(__func__);
}

void CudaBackend::do_gru_gates_backward(const MatrixView& dh_out, const MatrixView& h,
                                        const MatrixView& c, const MatrixView& rzn,
                                        const MatrixView& da, const MatrixView& dc,
                                        const MatrixView& dh) {
  if (h.size() == 0) return;
  gru_gates_backward_kernel<<<grid_for(h.size()), kThreads, 0, stream_>>>(
      dh_out.data, h.data, c.data, rzn.data, h.rows, h.cols, da.data, dc.data, dh.data);
  check_launch(__func__);
}

void CudaBackend::do_time_projection(const MatrixView& m, const float* delta, const float* w,
                                     const float* b, const MatrixView& z) {
  if (m.size() == 0) return;
  time_projection_kernel<<<grid_for(m.size()), kThreads, 0, stream_>>>(m.data, delta, w, b, m.rows,
                                                                       m.cols, z.data);
  check_launch(__func__);
}

void CudaBackend::do_time_projection_backward(const MatrixView& m, const float* delta,
                                              const float* w, const float* b, const MatrixView& dz,
                                              const MatrixView& dm, float* dw, float* db) {
  if (m.size() == 0) return;
  time_projection_sums_kernel<<<grid_for(m.cols), kThreads, 0, stream_>>>(m.data, delta, dz.data,
                                                                          m.rows, m.cols, dw, db);
  check_launch(__func__);
  time_projection_dm_kernel<<<grid_for(m.size()), kThreads, 0, stream_>>>(delta, w, b, dz.data,
                                                                          m.rows, m.cols, dm.data);
  check_launch(__func__);
}

void CudaBackend::do_gather_rows_into(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                      const MatrixView& dst, std::int64_t dst_col) {
  if (n <= 0 || src.cols == 0) return;
  gather_rows_into_kernel<<<grid_for(n * src.cols), kThreads, 0, stream_>>>(
      src.data, src.cols, idx, n, dst.data, dst.cols, dst_col);
  check_launch(__func__);
}

void CudaBackend::do_scatter_add_rows_from(const MatrixView& src, std::int64_t src_col,
                                           std::int64_t width, const NodeId* idx, std::int64_t n,
                                           const MatrixView& dst) {
  if (n <= 0 || width == 0) return;
  if (n > INT_MAX || dst.rows >= INT_MAX)
    throw ParamError("CudaBackend::scatter_add_rows_from: more than 2^31-2 rows");
  // Keys are in [0, dst.rows], dst.rows marking a skipped row: sort on the bits that can be set.
  const NodeId skip = NodeId(dst.rows);
  int end_bit = 1;
  while (end_bit < 31 && (std::int64_t(1) << end_bit) <= dst.rows) ++end_bit;
  std::size_t temp_bytes = 0;
  HALO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const NodeId*>(nullptr), static_cast<NodeId*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), int(n), 0,
      end_bit, stream_));
  Layout lay;
  const std::size_t key_at = lay.take(sizeof(NodeId) * std::size_t(n));
  const std::size_t sorted_at = lay.take(sizeof(NodeId) * std::size_t(n));
  const std::size_t iota_at = lay.take(sizeof(std::int32_t) * std::size_t(n));
  const std::size_t order_at = lay.take(sizeof(std::int32_t) * std::size_t(n));
  const std::size_t temp_at = lay.take(temp_bytes);
  char* base = scratch(lay.bytes);
  NodeId* key = reinterpret_cast<NodeId*>(base + key_at);
  NodeId* sorted = reinterpret_cast<NodeId*>(base + sorted_at);
  std::int32_t* iota = reinterpret_cast<std::int32_t*>(base + iota_at);
  std::int32_t* order = reinterpret_cast<std::int32_t*>(base + order_at);
  scatter_keys_kernel<<<grid_for(n), kThreads, 0, stream_>>>(idx, n, skip, key, iota);
  check_launch(__func__);
  // LSD radix sort is stable: rows with one destination keep their index order.
  HALO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + temp_at, temp_bytes, key, sorted, iota,
                                                  order, int(n), 0, end_bit, stream_));
  check_launch("cub::DeviceRadixSort::SortPairs (scatter_add_rows_from)");
  scatter_add_from_sorted_kernel<<<grid_for(n * width), kThreads, 0, stream_>>>(
      src.data, src.cols, src_col, sorted, order, skip, dst.data, n, width);
  check_launch(__func__);
}

void CudaBackend::do_scale(const MatrixView& X, float alpha) {
  if (X.size() == 0) return;
  scale_kernel<<<grid_for(X.size()), kThreads, 0, stream_>>>(X.data, X.size(), alpha);
  check_launch(__func__);
}

void CudaBackend::do_scatter_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                  const MatrixView& dst) {
  if (n <= 0 || src.cols == 0) return;
  scatter_rows_kernel<<<grid_for(n * src.cols), kThreads, 0, stream_>>>(src.data, idx, n, src.cols,
                                                                        dst.data);
  check_launch(__func__);
}

void CudaBackend::do_sum_rows_into(const MatrixView& src, const std::int32_t* first,
                                   const std::int32_t* rows, const std::int32_t* divisor,
                                   std::int64_t n, const MatrixView& dst, std::int64_t dst_col) {
  if (n <= 0 || src.cols == 0) return;
  sum_rows_into_kernel<<<grid_for(n * src.cols), kThreads, 0, stream_>>>(
      src.data, src.cols, first, rows, divisor, n, dst.data, dst.cols, dst_col);
  check_launch(__func__);
}

void CudaBackend::do_spread_rows(const MatrixView& src, std::int64_t src_col,
                                 const std::int32_t* first, const std::int32_t* count,
                                 std::int64_t n, const MatrixView& dst) {
  if (n <= 0 || dst.cols == 0) return;
  spread_rows_kernel<<<grid_for(n * dst.cols), kThreads, 0, stream_>>>(
      src.data, src.cols, src_col, first, count, n, dst.data, dst.cols);
  check_launch(__func__);
}

}  // namespace halo

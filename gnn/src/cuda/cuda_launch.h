// Launch helpers shared by the CUDA backend's kernel files (cuda_backend.cu,
// temporal_ops_cuda.cu, tgat_ops_cuda.cu; private to gnn/src): the block size, grid sizes for
// grid-stride loops, cheap index division, the layout of an op's temporaries in the scratch
// buffer, the fixed row partition of column reductions (a function of the row count alone, so
// every rounding is the same on every run and every GPU) and the warp sum.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace halo::cuda_launch {

inline constexpr int kThreads = 256;
static_assert(
    kThreads % 32 == 0 && (kThreads & (kThreads - 1)) == 0,
    "the one-warp-per-row kernels and the partial-sum tree need whole warps and a power of two");
inline constexpr std::int64_t kReduceRows = 256;     // least rows per partial in column reductions
inline constexpr std::int64_t kMaxPartials = 2048;   // most partials per column (bounds pass 2)
inline constexpr std::int64_t kMaxBlocks = 1 << 20;  // grid cap; kernels loop with a grid stride

// Blocks of `threads` for n grid-stride items (at least 1, at most kMaxBlocks).
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
  const std::int64_t b = (n + threads - 1) / threads;
  return unsigned(std::clamp<std::int64_t>(b, 1, kMaxBlocks));
}

inline std::size_t align_up(std::size_t n) { return (n + 255) / 256 * 256; }

// Byte offsets of one op's temporaries in the scratch buffer (each 256-byte aligned).
struct Layout {
  std::size_t bytes = 0;
  std::size_t take(std::size_t n) {
    const std::size_t at = bytes;
    bytes += align_up(n);
    return at;
  }
};

// Rows per partial of a column reduction: a function of the row count only, so the partition
// (and with it every rounding) is the same on every run and every GPU.
inline std::int64_t reduce_block_rows(std::int64_t rows) {
  return std::max(kReduceRows, (rows + kMaxPartials - 1) / kMaxPartials);
}

#ifdef __CUDACC__
__device__ inline std::int64_t grid_start() {
  return std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return std::int64_t(gridDim.x) * blockDim.x; }

// i / d and i % d for 0 <= i, 0 < d: in 32-bit arithmetic while i fits (every activation below
// 2^32 elements: 2.45 M rows x 256 is 627 M), since a 64-bit division is a software routine of
// tens of instructions on the GPU, comparable to the memory time of these kernels.
__device__ inline std::int64_t div_of(std::int64_t i, std::int64_t d) {
  return i <= 0xffffffffLL && d <= 0xffffffffLL ? std::int64_t(std::uint32_t(i) / std::uint32_t(d))
                                                : i / d;
}
__device__ inline std::int64_t mod_of(std::int64_t i, std::int64_t d) {
  return i <= 0xffffffffLL && d <= 0xffffffffLL ? std::int64_t(std::uint32_t(i) % std::uint32_t(d))
                                                : i % d;
}

// The sum of v over the warp's 32 lanes, in every lane (a fixed xor butterfly: deterministic).
__device__ inline float warp_sum_f(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
#endif

}  // namespace halo::cuda_launch

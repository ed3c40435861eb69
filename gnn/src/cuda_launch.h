// Launch helpers shared by the CUDA backend's kernel files (private to gnn/src; CUDA sources
// only): the block size, grid sizing with a grid-stride cap, a grid-stride loop's bounds, the
// scratch layout, and the warp sum (a fixed butterfly, so every lane gets the same bits).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace halo {

constexpr int kThreads = 256;
static_assert(
    kThreads % 32 == 0 && (kThreads & (kThreads - 1)) == 0,
    "the one-warp-per-row kernels and the partial-sum tree need whole warps and a power of two");
constexpr std::int64_t kMaxBlocks = 1 << 20;  // grid cap; kernels loop with a grid stride

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

__device__ inline std::int64_t grid_start() {
  return std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return std::int64_t(gridDim.x) * blockDim.x; }

// The sum of v over the warp's 32 lanes, in every lane (a fixed xor butterfly: deterministic).
__device__ inline float warp_sum_f(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace halo

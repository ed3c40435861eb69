// float <-> bfloat16 conversion shared by host and device code, so a halo row rounded on the CPU
// and the same row rounded on a GPU are the same bits (round to nearest even; a NaN stays a
// quiet NaN instead of rounding into infinity).
#pragma once

#include <cstdint>
#include <cstring>

#include "halo/gnn/host_device.h"

namespace halo {

// The bfloat16 nearest to f (ties to even).
HALO_HOST_DEVICE inline std::uint16_t to_bf16(float f) {
#ifdef __CUDA_ARCH__
  std::uint32_t u = __float_as_uint(f);
#else
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
#endif
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return std::uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

// The float equal to h (exact).
HALO_HOST_DEVICE inline float from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

}  // namespace halo

// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11): the value at
// (key, counter) is a pure function, so any backend, any thread and any partitioning of the rows
// draws the same number for the same (seed, epoch, layer, row, column). This is what lets a
// K-rank run reproduce a 1-rank run and a GPU run reproduce a CPU run exactly.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HALO_HD __host__ __device__
#else
#define HALO_HD
#endif

namespace halo {

struct PhiloxKey {
  std::uint32_t k0, k1;
};

// Four 32-bit random words for counter (c0, c1, c2, c3) under key.
HALO_HD inline void philox4x32(PhiloxKey key, std::uint32_t c[4]) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t(kM0) * c[0];
    const std::uint64_t p1 = std::uint64_t(kM1) * c[2];
    const std::uint32_t hi0 = std::uint32_t(p0 >> 32), lo0 = std::uint32_t(p0);
    const std::uint32_t hi1 = std::uint32_t(p1 >> 32), lo1 = std::uint32_t(p1);
    c[0] = hi1 ^ c[1] ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k1;
    c[3] = lo0;
    k0 += kW0;
    k1 += kW1;
  }
}

// Key for one use: seed plus a stream id (e.g. epoch * 64 + layer for dropout).
HALO_HD inline PhiloxKey philox_key(std::uint64_t seed, std::uint64_t stream) {
  std::uint32_t c[4] = {std::uint32_t(stream), std::uint32_t(stream >> 32), 0x5eed5eedu,
                        0x1234abcdu};
  philox4x32({std::uint32_t(seed), std::uint32_t(seed >> 32)}, c);
  return {c[0], c[1]};
}

// Uniform floats in [0, 1) (24 random bits each) for elements (row, 4*block .. 4*block+3) of a
// stream: one Philox call serves four consecutive columns.
HALO_HD inline void philox_uniform4(PhiloxKey key, std::uint64_t row, std::uint32_t block,
                                    float u[4]) {
  std::uint32_t c[4] = {std::uint32_t(row), std::uint32_t(row >> 32), block, 0};
  philox4x32(key, c);
  for (int i = 0; i < 4; ++i) u[i] = float(c[i] >> 8) * (1.0f / 16777216.0f);
}

// Uniform float in [0, 1) for element (row, col) of a stream; equal to the matching element of
// philox_uniform4(key, row, col / 4).
HALO_HD inline float philox_uniform(PhiloxKey key, std::uint64_t row, std::uint32_t col) {
  float u[4];
  philox_uniform4(key, row, col / 4, u);
  return u[col % 4];
}

// The 16-bit uniform (in units of 2^-16) that decides whether dropout keeps element (row, col):
// columns go in blocks of 64 per 8 Philox calls, so a SIMD lane of 8 consecutive columns reads
// one word of 8 consecutive calls: block b = col / 64, q = col % 64, call counter
// (row, b * 8 + q % 8), word (q / 8) % 4, low half for q < 32 and high half otherwise.
// Kernels on every backend must produce exactly this value for (row, col).
HALO_HD inline std::uint32_t dropout_u16(PhiloxKey key, std::uint64_t row, std::uint32_t col) {
  const std::uint32_t q = col % 64;
  std::uint32_t c[4] = {std::uint32_t(row), std::uint32_t(row >> 32), (col / 64) * 8 + q % 8, 0};
  philox4x32(key, c);
  const std::uint32_t w = c[(q / 8) % 4];
  return q < 32 ? (w & 0xffffu) : (w >> 16);
}

// Dropout keeps an element iff dropout_u16 >= dropout_threshold(p) (probability 1 - p, to 2^-16).
HALO_HD inline std::uint32_t dropout_threshold(float p) {
  const double t = double(p) * 65536.0;
  const std::uint32_t i = std::uint32_t(t);
  return double(i) < t ? i + 1 : i;  // ceil
}

// Stream ids: one space per use, so no two uses share random numbers.
enum : std::uint64_t { kStreamInit = 1ull << 40, kStreamDropout = 2ull << 40 };

}  // namespace halo

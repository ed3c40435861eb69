// The time encoding's cos and sin, shared by host and device code (the CPU's TimeEncoder loop
// and the CUDA time_encode kernel), so both evaluate the same expression; the host's bits are
// what they were when this lived in layers.h.
#pragma once

#include <cmath>

#include "halo/gnn/host_device.h"

namespace halo {

// cos(x) and sin(x) for any double x of magnitude up to ~1e12, within 2e-7 of libm (the float
// rounding of the result): x reduced by multiples of π/2 in double, then Taylor polynomials on
// [-π/4, π/4]. Branch-free, so loops over it vectorise; time encodings call it ~10^6 times per
// batch, where libm's cos and sin took a fifth of TGN's epoch.
HALO_HOST_DEVICE inline void cos_sin(double x, float& c, float& s) {
  const double k = std::floor(x * 0.63661977236758134308 + 0.5);  // nearest multiple of π/2
  // x - k π/2 with π/2 in two parts (Cody-Waite): each fma rounds once, near |r| <= π/4.
  const double r = std::fma(-k, 6.123233995736766036e-17, std::fma(-k, 1.5707963267948965580, x));
  const double r2 = r * r;
  const double sr =
      r * (1 + r2 * (-1 / 6. +
                     r2 * (1 / 120. +
                           r2 * (-1 / 5040. +
                                 r2 * (1 / 362880. + r2 * (-1 / 39916800. + r2 / 6227020800.))))));
  const double cr =
      1 + r2 * (-0.5 +
                r2 * (1 / 24. + r2 * (-1 / 720. +
                                      r2 * (1 / 40320. + r2 * (-1 / 3628800. + r2 / 479001600.)))));
  // Quadrant 0..3 as exact 0/1 doubles, and the swaps and signs as arithmetic (multiplying by
  // 0, 1 or -1 is exact): no branch, so the caller's loop vectorises.
  const double q = k - 4.0 * std::floor(k * 0.25);
  const double h = std::floor(q * 0.5), odd = q - 2.0 * h;
  const double flip = odd + h - 2.0 * odd * h;  // quadrants 1 and 2: cos is negative
  c = float((1.0 - 2.0 * flip) * (odd * sr + (1.0 - odd) * cr));
  s = float((1.0 - 2.0 * h) * (odd * cr + (1.0 - odd) * sr));
}

}  // namespace halo

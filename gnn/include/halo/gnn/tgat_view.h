// The operands of TGN's temporal attention core as the Backend's tgat_attend ops see them. Apart
// from temporal/layers.h so that CUDA sources, compiled as C++17, can include it.
#pragma once

#include <cstdint>

#include "halo/gnn/matrix.h"

namespace halo {

// B queries of k slots each, heads of width dhd = dq / heads; S compact rows (the slots that
// hold a neighbour), U distinct neighbours; ds per-slot columns (0 when there are none). Every
// pointer and view is in the backend's memory. temporal/layers.h states the maths.
struct TgatView {
  MatrixView Q;      // B x dq: the projected queries (with their bias)
  MatrixView P;      // (heads * B) x ds: row h * B + i = query i's head-h fold Q_h W_k,hᵀ
  MatrixView Kn;     // U x dq: the neighbours' key node parts (no bias)
  MatrixView Vn;     // U x dq: the neighbours' value node parts (no bias)
  MatrixView slots;  // S x ds: the compact rows' per-slot columns (S x 0 without them)
  const std::int32_t* row = nullptr;   // B * k: compact row of slot i * k + j, -1 = padded
  const std::int32_t* node = nullptr;  // S: the row of Kn and Vn of compact row c
  const float* bk = nullptr;           // dq: the key bias
  int heads = 1;
  int k = 0;
};

}  // namespace halo

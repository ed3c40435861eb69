// The structure graph attention runs over, as kernels see it (host or device memory). Apart from
// attention.h so that CUDA sources, compiled as C++17, can include it.
#pragma once

#include <cstdint>

#include "halo/graph/types.h"

namespace halo {

// An AttentionGraph's arrays (attention.h): rows x cols with a self-loop per row, and the
// transpose whose entries name the edge they mirror.
struct AttentionView {
  std::int64_t rows = 0, cols = 0;
  EdgeId nnz = 0;
  const EdgeId* offsets = nullptr;    // [rows + 1]
  const NodeId* indices = nullptr;    // [nnz]
  const EdgeId* t_offsets = nullptr;  // [cols + 1]
  const NodeId* t_rows = nullptr;     // [nnz]
  const EdgeId* t_edge = nullptr;     // [nnz]
};

}  // namespace halo

// Id types shared by every layer of halo. Node ids are 32-bit (graphs up to 2^31-1 nodes, which
// covers ogbn-papers100M); edge offsets are 64-bit because edge counts pass 2^31 long before
// node counts do.
#pragma once

#include <cstdint>

namespace halo {

using NodeId = std::int32_t;  // a node, or a row of a node-indexed array
using EdgeId = std::int64_t;  // a position in a CSR index array
using PartId = std::int32_t;  // a part of a partition (one rank)

static_assert(sizeof(NodeId) == 4, "node ids are stored as int32 on disk");
static_assert(sizeof(EdgeId) == 8, "CSR offsets are stored as int64 on disk");

inline constexpr std::int64_t kMaxNodes = INT32_MAX;

}  // namespace halo

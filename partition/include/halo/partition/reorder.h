// Node orders for locality. SpMM gathers one row of X per nonzero; on a graph whose ids are
// scattered (generated graphs, hashed ids) every gather misses the caches. Numbering each METIS
// part of a few thousand nodes contiguously puts most neighbours of a row within a window of X
// that stays in cache — the same idea the distributed runtime applies at the scale of ranks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "halo/graph/dataset.h"

namespace halo {

// metis: k-way parts of about `block` nodes, numbered part by part, ids ascending within a
// part; rcm: reverse Cuthill-McKee.
enum class LocalityMethod { kMetis, kRcm };
// "metis" | "rcm" (the reorder --method spellings); throws ParamError naming the expected ones.
LocalityMethod parse_locality_method(std::string_view s);
// The --method spelling of m, as the dataset's "reorder" field records it.
const char* to_string(LocalityMethod m);

// New node u is old node order[u], by method. Throws ParamError for a directed graph or
// block < 1.
std::vector<NodeId> locality_order(const GraphDataset& d, LocalityMethod method, std::int64_t block,
                                   std::uint64_t seed = 0);

// Share of stored edges (u, v) whose ends lie in the same window of `block` consecutive ids:
// the locality figure the orders above raise.
double window_locality(const CsrView& g, std::int64_t block);

}  // namespace halo

// Whole-graph algorithms from Boost.Graph, run directly on halo's CSR through the adaptor in
// boost_adaptor.h (no copy of the graph): connected components and reverse Cuthill-McKee.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "halo/graph/csr.h"
#include "halo/graph/dataset.h"

namespace halo {

// Component id of every node; components through *count. A directed graph's components are
// its weakly connected ones.
std::vector<std::int32_t> connected_components(const CsrView& g, bool directed,
                                               std::int64_t* count);

// Reverse Cuthill-McKee order of a symmetric graph: new node u is old node order[u].
// Each component starts from a pseudo-peripheral node (Boost's choice).
std::vector<NodeId> rcm_order(const CsrView& g);

// Sum over rows of (max |u - v| over the row's entries): the bandwidth-like figure RCM shrinks.
std::int64_t total_bandwidth(const CsrView& g);

// Row u of the result is row order[u] of a (rows of `cols` elements); empty stays empty.
template <class T>
Array<T> permute_rows(const Array<T>& a, std::size_t cols, const std::vector<NodeId>& order) {
  if (a.empty()) return a;
  std::vector<T> out(a.size());
  for (std::size_t u = 0; u < order.size(); ++u)
    std::copy_n(a.data() + std::size_t(order[u]) * cols, cols, out.data() + u * cols);
  return Array<T>(std::move(out));
}

// Relabels every node-indexed part of d: node u of the result is node order[u] of d.
// Splits are mapped and kept sorted; original_ids records the mapping back.
void reorder_dataset(GraphDataset& d, const std::vector<NodeId>& order);

}  // namespace halo

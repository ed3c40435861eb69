// Compressed sparse row graphs and the builders that make them from edge lists.
//
// Invariants of every Csr a builder returns: offsets has n+1 entries, offsets[0] = 0,
// non-decreasing; every row's indices are sorted ascending with no duplicates; values, when
// present, has one entry per index. Self-loops are never stored (GCN normalisation adds them).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "halo/graph/array.h"
#include "halo/graph/types.h"

namespace halo {

// A non-owning view of a CSR matrix: what kernels and algorithms take.
struct CsrView {
  std::int64_t num_nodes = 0;
  const EdgeId* offsets = nullptr;  // num_nodes + 1 entries
  const NodeId* indices = nullptr;  // offsets[num_nodes] entries
  const float* values = nullptr;    // nullptr when unweighted

  EdgeId num_edges() const { return num_nodes == 0 ? 0 : offsets[num_nodes]; }
  EdgeId degree(NodeId v) const { return offsets[v + 1] - offsets[v]; }
  const NodeId* begin(NodeId v) const { return indices + offsets[v]; }
  const NodeId* end(NodeId v) const { return indices + offsets[v + 1]; }
};

// A CSR matrix over owned or memory-mapped storage.
struct Csr {
  std::int64_t num_nodes = 0;
  Array<EdgeId> offsets;
  Array<NodeId> indices;
  Array<float> values;  // empty when unweighted

  CsrView view() const {
    return {num_nodes, offsets.data(), indices.data(), values.empty() ? nullptr : values.data()};
  }
  EdgeId num_edges() const { return view().num_edges(); }
};

// Edges as parallel arrays (src[i] -> dst[i], optional weight[i]); ids must lie in [0, n).
struct EdgeList {
  std::int64_t num_nodes = 0;
  std::vector<NodeId> src;
  std::vector<NodeId> dst;
  std::vector<float> weight;  // empty, or one per edge
};

struct BuildOptions {
  bool symmetrize = true;  // store u->v and v->u for every input edge
  // Duplicate entries are merged (keeping the largest weight) and self-loops dropped: both
  // are always on, because every consumer (normalisation, METIS) needs a simple graph.
};

// Builds a CSR from edges, consuming them to bound peak memory to one edge list plus one CSR.
// Contract: ids already validated in [0, num_nodes); result satisfies the invariants above.
Csr build_csr(EdgeList&& edges, const BuildOptions& options = {});

// Returns the relabelled graph: new node u is old node order[u] (order is a permutation).
Csr permute_csr(const CsrView& g, const std::vector<NodeId>& order);

// The rows `rows` of g as a CSR of rows.size() rows, row i being old row rows[i] with every
// column c renamed new_id[c] and the row sorted again (values follow their columns). new_id must
// be one-to-one on the columns these rows hold, so rows stay duplicate-free. Parallel over rows;
// permute_csr and a part's local CSR (partition/parts.cc) are both this relabelling.
Csr relabel_rows(const CsrView& g, std::span<const NodeId> rows, const NodeId* new_id);

// True when every stored u->v has a v->u (with an equal value when weighted).
// On false, *bad_u / *bad_v (if given) receive one offending entry.
bool is_symmetric(const CsrView& g, NodeId* bad_u = nullptr, NodeId* bad_v = nullptr);

struct DegreeStats {
  EdgeId min = 0, max = 0;
  double mean = 0;
};
// Out-degree min / mean / max over all nodes (zeros for an empty graph).
DegreeStats degree_stats(const CsrView& g);

}  // namespace halo

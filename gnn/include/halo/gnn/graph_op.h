// The sparse operators layers multiply by, built once per graph:
//   gcn  = D^-1/2 (A + I) D^-1/2 restricted to owned rows, over owned + halo columns, with the
//          degrees of the whole graph (so a part computes exactly the rows one process would);
//   mean = D^-1 A (GraphSAGE's mean aggregator; rows without neighbours stay zero);
// each with its transpose (rows = owned + halo), which backward multiplies by — precomputed so
// backward is a gather, never a scatter with atomics.
#pragma once

#include <vector>

#include "halo/gnn/backend.h"
#include "halo/graph/csr.h"

namespace halo {

// A sparse operator with owned storage.
struct SparseMatrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<EdgeId> offsets;
  std::vector<NodeId> indices;
  std::vector<float> values;
  SparseView view() const { return {rows, cols, offsets.data(), indices.data(), values.data()}; }
};

struct GraphOperator {
  SparseMatrix fwd;  // rows x cols
  SparseMatrix bwd;  // its transpose: cols x rows
};

// g: rows = owned nodes, columns over [0, cols) where the first g.num_nodes columns are the
// owned rows themselves; degree[c] = global degree of local column c.
GraphOperator gcn_operator(const CsrView& g, std::int64_t cols, const std::int32_t* degree);
GraphOperator mean_operator(const CsrView& g, std::int64_t cols);

// The transpose of a CSR operator, rows sorted by column (deterministic).
SparseMatrix transpose(const SparseMatrix& a);

}  // namespace halo

// The sparse operators layers multiply by, built once per graph:
//   gcn  = D^-1/2 (A + I) D^-1/2 restricted to owned rows, over owned + halo columns, with the
//          degrees of the whole graph (so a part computes exactly the rows one process would);
//   mean = D^-1 A (GraphSAGE's mean aggregator; rows without neighbours stay zero);
// each with its transpose (rows = owned + halo), which backward multiplies by — precomputed so
// backward is a gather, never a scatter with atomics. An operator equal to its transpose (GCN's
// on a whole undirected graph: one process, or one part) is its own: no second copy is stored.
#pragma once

#include <cstdint>

#include "halo/gnn/sparse.h"
#include "halo/graph/csr.h"

namespace halo {

// An operator and its transpose as kernels see them (host or device memory).
struct OperatorView {
  SparseView fwd, bwd;
};

// An operator and its transpose, owned together in one memory (host or device: SparseMatrix).
struct GraphOperator {
  SparseMatrix fwd;        // rows x cols
  SparseMatrix bwd;        // its transpose: cols x rows (empty when symmetric)
  bool symmetric = false;  // fwd equals its transpose bit for bit, and stands for it
  // Both views, wherever the matrices live (a symmetric operator's are the same matrix).
  OperatorView view() const { return {fwd.view(), symmetric ? fwd.view() : bwd.view()}; }
  // Both copied into d's memory (SparseMatrix::to_device: on the GPU, a storage_id each).
  GraphOperator to_device(Device d) const {
    return {fwd.to_device(d), symmetric ? SparseMatrix() : bwd.to_device(d), symmetric};
  }
};

// g: rows = owned nodes, columns over [0, cols) where the first g.num_nodes columns are the
// owned rows themselves; degree[c] = global degree of local column c. Both build host matrices
// (to_device moves them on). transpose = false leaves bwd empty: inference never multiplies by it.
GraphOperator gcn_operator(const CsrView& g, std::int64_t cols, const std::int32_t* degree,
                           bool transpose = true);
GraphOperator mean_operator(const CsrView& g, std::int64_t cols, bool transpose = true);

// The transpose of a host CSR operator, rows sorted by column (deterministic; a host matrix).
SparseMatrix transpose(const SparseMatrix& a);
// True when the host matrix a is square, its rows are sorted, and each stored (u, v) has a
// (v, u) of the same bits: then transpose(a) == a exactly.
bool is_symmetric(const SparseMatrix& a);

}  // namespace halo

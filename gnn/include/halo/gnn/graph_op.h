// The sparse operators layers multiply by, built once per graph:
//   gcn  = D^-1/2 (A + I) D^-1/2 restricted to owned rows, over owned + halo columns, with the
//          degrees of the whole graph (so a part computes exactly the rows one process would);
//   mean = D^-1 A (GraphSAGE's mean aggregator; rows without neighbours stay zero);
// each with its transpose (rows = owned + halo), which backward multiplies by — precomputed so
// backward is a gather, never a scatter with atomics.
#pragma once

#include <memory>
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

// A SparseMatrix copied to GPU memory (RAII), for the CUDA backend.
class DeviceSparse {
 public:
  DeviceSparse() = default;
  explicit DeviceSparse(const SparseMatrix& a);
  SparseView view() const { return view_; }

 private:
  struct Free {
    void operator()(void* p) const noexcept;
  };
  std::unique_ptr<void, Free> offsets_, indices_, values_;
  SparseView view_;
};

// An operator and its transpose as kernels see them (host or device memory).
struct OperatorView {
  SparseView fwd, bwd;
};

struct GraphOperator {
  SparseMatrix fwd;  // rows x cols
  SparseMatrix bwd;  // its transpose: cols x rows
  OperatorView view() const { return {fwd.view(), bwd.view()}; }
};

// A GraphOperator copied to the GPU.
struct DeviceOperator {
  DeviceSparse fwd, bwd;
  DeviceOperator() = default;
  explicit DeviceOperator(const GraphOperator& op) : fwd(op.fwd), bwd(op.bwd) {}
  OperatorView view() const { return {fwd.view(), bwd.view()}; }
};

// g: rows = owned nodes, columns over [0, cols) where the first g.num_nodes columns are the
// owned rows themselves; degree[c] = global degree of local column c.
GraphOperator gcn_operator(const CsrView& g, std::int64_t cols, const std::int32_t* degree);
GraphOperator mean_operator(const CsrView& g, std::int64_t cols);

// The transpose of a CSR operator, rows sorted by column (deterministic).
SparseMatrix transpose(const SparseMatrix& a);

}  // namespace halo

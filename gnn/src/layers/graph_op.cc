// Normalised sparse operators and their transposes.
#include "halo/gnn/graph_op.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace halo {

SparseMatrix transpose(const SparseMatrix& a) {
  SparseMatrix t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.offsets.assign(std::size_t(t.rows) + 1, 0);
  for (NodeId c : a.indices) ++t.offsets[std::size_t(c) + 1];
  for (std::int64_t r = 0; r < t.rows; ++r)
    t.offsets[std::size_t(r) + 1] += t.offsets[std::size_t(r)];
  t.indices.resize(a.indices.size());
  t.values.resize(a.values.size());
  std::vector<EdgeId> cursor(t.offsets.begin(), t.offsets.end() - 1);
  for (std::int64_t r = 0; r < a.rows; ++r)  // rows in order: each transposed row ends up sorted
    for (EdgeId e = a.offsets[std::size_t(r)]; e < a.offsets[std::size_t(r) + 1]; ++e) {
      const EdgeId at = cursor[std::size_t(a.indices[std::size_t(e)])]++;
      t.indices[std::size_t(at)] = NodeId(r);
      t.values[std::size_t(at)] = a.values[std::size_t(e)];
    }
  return t;
}

bool is_symmetric(const SparseMatrix& a) {
  if (a.rows != a.cols || a.device() != Device::kCpu) return false;
  const EdgeId* off = a.offsets.data();
  const NodeId* idx = a.indices.data();
  const float* val = a.values.data();
  bool ok = true;
#pragma omp parallel for schedule(dynamic, 4096) reduction(&& : ok)
  for (std::int64_t u = 0; u < a.rows; ++u) {
    if (!ok) continue;  // another row already failed: skip the rest cheaply
    for (EdgeId e = off[u]; e < off[u + 1]; ++e) {
      const NodeId v = idx[e];
      if (e > off[u] && v <= idx[e - 1]) {  // unsorted or repeated: no binary search
        ok = false;
        break;
      }
      const NodeId* b = idx + off[v];
      const NodeId* end = idx + off[v + 1];
      const NodeId* it = std::lower_bound(b, end, NodeId(u));
      if (it == end || *it != NodeId(u) ||
          std::bit_cast<std::uint32_t>(val[off[v] + (it - b)]) !=
              std::bit_cast<std::uint32_t>(val[e])) {
        ok = false;
        break;
      }
    }
  }
  return ok;
}

GraphOperator gcn_operator(const CsrView& g, std::int64_t cols, const std::int32_t* degree,
                           bool transpose) {
  GraphOperator op;
  SparseMatrix& a = op.fwd;
  a.rows = g.num_nodes;
  a.cols = cols;
  a.offsets.resize(std::size_t(a.rows) + 1);
  a.indices.resize(std::size_t(g.num_edges() + a.rows));
  a.values.resize(a.indices.size());
  std::vector<float> inv_sqrt(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c)
    inv_sqrt[std::size_t(c)] = float(1.0 / std::sqrt(double(degree[c]) + 1.0));
  EdgeId pos = 0;
  for (std::int64_t u = 0; u < a.rows; ++u) {
    a.offsets[std::size_t(u)] = pos;
    bool self_done = false;
    auto self = [&] {  // the added self-loop, kept in column order
      a.indices[std::size_t(pos)] = NodeId(u);
      a.values[std::size_t(pos)] = inv_sqrt[std::size_t(u)] * inv_sqrt[std::size_t(u)];
      ++pos;
      self_done = true;
    };
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
      const NodeId v = g.indices[e];
      if (!self_done && v > u) self();
      a.indices[std::size_t(pos)] = v;
      a.values[std::size_t(pos)] = inv_sqrt[std::size_t(u)] * inv_sqrt[std::size_t(v)];
      ++pos;
    }
    if (!self_done) self();
  }
  a.offsets[std::size_t(a.rows)] = pos;
  // On a whole undirected graph the operator is its own transpose (the product of the two
  // scales commutes exactly): backward multiplies by fwd, and a second copy would only cost
  // memory (about a gigabyte at ogbn-products' size, on the host and again on the GPU).
  if (transpose) {
    op.symmetric = is_symmetric(a);
    if (!op.symmetric) op.bwd = halo::transpose(a);
  }
  return op;
}

GraphOperator mean_operator(const CsrView& g, std::int64_t cols, bool transpose) {
  GraphOperator op;
  SparseMatrix& a = op.fwd;
  a.rows = g.num_nodes;
  a.cols = cols;
  a.offsets.assign(g.offsets, g.offsets + g.num_nodes + 1);
  a.indices.assign(g.indices, g.indices + g.num_edges());
  a.values.resize(a.indices.size());
  for (std::int64_t u = 0; u < a.rows; ++u) {
    const float w = g.degree(NodeId(u)) ? 1.f / float(g.degree(NodeId(u))) : 0.f;
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) a.values[std::size_t(e)] = w;
  }
  if (transpose) {
    op.symmetric = is_symmetric(a);
    if (!op.symmetric) op.bwd = halo::transpose(a);
  }
  return op;
}

}  // namespace halo

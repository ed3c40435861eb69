// CSR builders. build_csr is a counting sort (two passes over the edges) followed by a
// per-row sort + merge of duplicates, parallel over rows; peak memory is the input edge list
// plus the output CSR, never a second copy of either.
#include "halo/graph/csr.h"

#include <omp.h>

#include <algorithm>
#include <numeric>

namespace halo {
namespace {

// Sorts row [b, e) by column, merging duplicates (max value); returns the new row length.
EdgeId sort_unique_row(NodeId* idx, float* val, EdgeId len,
                       std::vector<std::pair<NodeId, float>>& scratch) {
  if (len <= 1) return len;
  if (!val) {
    std::sort(idx, idx + len);
    return EdgeId(std::unique(idx, idx + len) - idx);
  }
  scratch.resize(std::size_t(len));
  for (EdgeId i = 0; i < len; ++i) scratch[std::size_t(i)] = {idx[i], val[i]};
  std::sort(scratch.begin(), scratch.end());  // equal columns: ascending value, max is last
  EdgeId out = 0;
  for (std::size_t i = 0; i < scratch.size(); ++i) {
    if (i + 1 < scratch.size() && scratch[i + 1].first == scratch[i].first) continue;
    idx[out] = scratch[i].first;
    val[out] = scratch[i].second;
    ++out;
  }
  return out;
}

// Sorts and dedupes every row in place, then compacts rows to the left.
void finish_rows(std::int64_t n, std::vector<EdgeId>& offsets, std::vector<NodeId>& indices,
                 std::vector<float>& values) {
  std::vector<EdgeId> new_len(std::size_t(n), 0);
  float* val = values.empty() ? nullptr : values.data();
#pragma omp parallel
  {
    std::vector<std::pair<NodeId, float>> scratch;
#pragma omp for schedule(dynamic, 1024)
    for (std::int64_t u = 0; u < n; ++u) {
      const EdgeId b = offsets[std::size_t(u)];
      new_len[std::size_t(u)] = sort_unique_row(indices.data() + b, val ? val + b : nullptr,
                                                offsets[std::size_t(u) + 1] - b, scratch);
    }
  }
  // Compact left to right: a row's new start never exceeds its old start, so moves are safe.
  EdgeId pos = 0;
  for (std::int64_t u = 0; u < n; ++u) {
    const EdgeId b = offsets[std::size_t(u)];
    const EdgeId len = new_len[std::size_t(u)];
    if (pos != b) {
      std::copy(indices.begin() + b, indices.begin() + b + len, indices.begin() + pos);
      if (val) std::copy(val + b, val + b + len, val + pos);
    }
    offsets[std::size_t(u)] = pos;
    pos += len;
  }
  offsets[std::size_t(n)] = pos;
  indices.resize(std::size_t(pos));
  indices.shrink_to_fit();
  if (val) {
    values.resize(std::size_t(pos));
    values.shrink_to_fit();
  }
}

}  // namespace

Csr build_csr(EdgeList&& edges, const BuildOptions& options) {
  const std::int64_t n = edges.num_nodes;
  const std::size_t m = edges.src.size();
  const bool weighted = !edges.weight.empty();
  std::vector<EdgeId> offsets(std::size_t(n) + 1, 0);
  for (std::size_t i = 0; i < m; ++i) {
    const NodeId u = edges.src[i], v = edges.dst[i];
    if (u == v) continue;
    ++offsets[std::size_t(u) + 1];
    if (options.symmetrize) ++offsets[std::size_t(v) + 1];
  }
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  std::vector<NodeId> indices(static_cast<std::size_t>(offsets.back()));
  std::vector<float> values(weighted ? indices.size() : 0);
  {
    std::vector<EdgeId> cursor(offsets.begin(), offsets.end() - 1);
    for (std::size_t i = 0; i < m; ++i) {
      const NodeId u = edges.src[i], v = edges.dst[i];
      if (u == v) continue;
      const EdgeId a = cursor[std::size_t(u)]++;
      indices[std::size_t(a)] = v;
      if (weighted) values[std::size_t(a)] = edges.weight[i];
      if (options.symmetrize) {
        const EdgeId b = cursor[std::size_t(v)]++;
        indices[std::size_t(b)] = u;
        if (weighted) values[std::size_t(b)] = edges.weight[i];
      }
    }
  }
  edges = EdgeList{};  // release the input before the sort allocates scratch
  finish_rows(n, offsets, indices, values);
  Csr g;
  g.num_nodes = n;
  g.offsets = Array<EdgeId>(std::move(offsets));
  g.indices = Array<NodeId>(std::move(indices));
  if (weighted) g.values = Array<float>(std::move(values));
  return g;
}

Csr permute_csr(const CsrView& g, const std::vector<NodeId>& order) {
  std::vector<NodeId> inv(static_cast<std::size_t>(g.num_nodes));
  for (std::int64_t u = 0; u < g.num_nodes; ++u)
    inv[std::size_t(order[std::size_t(u)])] = NodeId(u);
  return relabel_rows(g, order, inv.data());
}

Csr relabel_rows(const CsrView& g, std::span<const NodeId> rows, const NodeId* new_id) {
  const auto n = std::int64_t(rows.size());
  std::vector<EdgeId> offsets(std::size_t(n) + 1, 0);
  for (std::int64_t u = 0; u < n; ++u)
    offsets[std::size_t(u) + 1] = offsets[std::size_t(u)] + g.degree(rows[std::size_t(u)]);
  std::vector<NodeId> indices(static_cast<std::size_t>(offsets.back()));
  std::vector<float> values(g.values ? indices.size() : 0);
#pragma omp parallel
  {
    std::vector<std::pair<NodeId, float>> scratch;
#pragma omp for schedule(dynamic, 1024)
    for (std::int64_t u = 0; u < n; ++u) {
      const NodeId old = rows[std::size_t(u)];
      const EdgeId ob = g.offsets[old], len = g.degree(old), nb = offsets[std::size_t(u)];
      for (EdgeId k = 0; k < len; ++k) {
        indices[std::size_t(nb + k)] = new_id[g.indices[ob + k]];
        if (g.values) values[std::size_t(nb + k)] = g.values[ob + k];
      }
      // Rows were duplicate-free and new_id is one-to-one on them, so this only sorts.
      sort_unique_row(indices.data() + nb, g.values ? values.data() + nb : nullptr, len, scratch);
    }
  }
  Csr out;
  out.num_nodes = n;
  out.offsets = Array<EdgeId>(std::move(offsets));
  out.indices = Array<NodeId>(std::move(indices));
  if (g.values) out.values = Array<float>(std::move(values));
  return out;
}

bool is_symmetric(const CsrView& g, NodeId* bad_u, NodeId* bad_v) {
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
      const NodeId v = g.indices[e];
      const NodeId* b = g.begin(v);
      const NodeId* end = g.end(v);
      const NodeId* it = std::lower_bound(b, end, NodeId(u));
      const bool ok =
          it != end && *it == u && (!g.values || g.values[g.offsets[v] + (it - b)] == g.values[e]);
      if (!ok) {
        if (bad_u) *bad_u = NodeId(u);
        if (bad_v) *bad_v = v;
        return false;
      }
    }
  }
  return true;
}

DegreeStats degree_stats(const CsrView& g) {
  DegreeStats s;
  if (g.num_nodes == 0) return s;
  s.min = g.degree(0);
  s.max = s.min;
  for (std::int64_t u = 1; u < g.num_nodes; ++u) {
    const EdgeId d = g.degree(NodeId(u));
    s.min = std::min(s.min, d);
    s.max = std::max(s.max, d);
  }
  s.mean = double(g.num_edges()) / double(g.num_nodes);
  return s;
}

}  // namespace halo

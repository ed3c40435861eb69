// Boost.Graph algorithms over CsrView (see boost_adaptor.h) and dataset relabelling.
#include "halo/graph/algorithms.h"

#include <algorithm>
#include <boost/graph/cuthill_mckee_ordering.hpp>
#include <boost/pending/disjoint_sets.hpp>
#include <boost/property_map/property_map.hpp>
#include <cstdlib>

#include "halo/graph/boost_adaptor.h"
#include "halo/graph/error.h"

namespace halo {

std::vector<std::int32_t> connected_components(const CsrView& g, bool directed,
                                               std::int64_t* count) {
  const std::size_t n = std::size_t(g.num_nodes);
  std::vector<std::int32_t> comp(n, 0);
  if (n == 0) {
    if (count) *count = 0;
    return comp;
  }
  // Union-find over the stored arcs, for both kinds of graph: 12 bytes a node whatever the
  // graph's shape, where a depth-first search keeps a stack that can grow to the whole graph
  // (ogbn-papers100M-sized graphs must fit `halo info` in a few GiB). Components are numbered
  // by their first node, as the search numbered them.
  std::vector<NodeId> rank(n, 0), parent(n);
  boost::disjoint_sets<NodeId*, NodeId*> sets(rank.data(), parent.data());
  for (std::size_t v = 0; v < n; ++v) sets.make_set(NodeId(v));
  for (std::int64_t u = 0; u < g.num_nodes; ++u)
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e)
      if (directed || g.indices[e] < u)
        sets.union_set(NodeId(u), g.indices[e]);  // one way is enough
  std::vector<std::int32_t>& id_of_root = rank;   // ranks are done with: reuse their memory
  std::fill(id_of_root.begin(), id_of_root.end(), -1);
  std::int32_t next = 0;
  for (std::size_t v = 0; v < n; ++v) {
    const NodeId r = sets.find_set(NodeId(v));
    if (id_of_root[std::size_t(r)] < 0) id_of_root[std::size_t(r)] = next++;
    comp[v] = id_of_root[std::size_t(r)];
  }
  if (count) *count = next;
  return comp;
}

std::vector<NodeId> rcm_order(const CsrView& g) {
  const std::size_t n = std::size_t(g.num_nodes);
  std::vector<NodeId> order(n);
  if (n == 0) return order;
  std::vector<boost::default_color_type> color(n);
  std::vector<EdgeId> deg(n);
  for (std::size_t v = 0; v < n; ++v) deg[v] = g.degree(NodeId(v));
  // Writing through a reverse iterator turns Cuthill-McKee into reverse Cuthill-McKee.
  boost::cuthill_mckee_ordering(
      g, order.rbegin(),
      boost::make_iterator_property_map(color.begin(), boost::identity_property_map()),
      boost::make_iterator_property_map(deg.begin(), boost::identity_property_map()));
  return order;
}

std::int64_t total_bandwidth(const CsrView& g) {
  std::int64_t total = 0;
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    std::int64_t w = 0;
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e)
      w = std::max<std::int64_t>(w, std::llabs(std::int64_t(g.indices[e]) - u));
    total += w;
  }
  return total;
}

namespace {
Array<NodeId> map_ids(const Array<NodeId>& ids, const std::vector<NodeId>& inv) {
  std::vector<NodeId> out(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) out[i] = inv[std::size_t(ids[i])];
  std::sort(out.begin(), out.end());
  return Array<NodeId>(std::move(out));
}
}  // namespace

void reorder_dataset(GraphDataset& d, const std::vector<NodeId>& order) {
  const std::size_t n = std::size_t(d.num_nodes());
  if (order.size() != n) throw ParamError("reorder: permutation size differs from node count");
  std::vector<NodeId> inv(n);
  for (std::size_t u = 0; u < n; ++u) inv[std::size_t(order[u])] = NodeId(u);
  d.graph = permute_csr(d.graph.view(), order);
  d.node_weights = permute_rows(d.node_weights, std::size_t(d.ncon), order);
  d.features = permute_rows(d.features, std::size_t(d.num_features), order);
  d.labels = permute_rows(d.labels, std::size_t(d.label_cols), order);
  for (auto& s : d.splits) {
    s.train = map_ids(s.train, inv);
    s.valid = map_ids(s.valid, inv);
    s.test = map_ids(s.test, inv);
  }
  std::vector<NodeId> original(n);
  for (std::size_t u = 0; u < n; ++u)
    original[u] = d.original_ids.empty() ? order[u] : d.original_ids[std::size_t(order[u])];
  d.original_ids = Array<NodeId>(std::move(original));
}

}  // namespace halo

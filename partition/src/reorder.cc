// Locality orders (see reorder.h).
#include "halo/partition/reorder.h"

#include <algorithm>
#include <numeric>

#include "halo/graph/algorithms.h"
#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"
#include "halo/partition/partition.h"

namespace halo {

namespace {
constexpr EnumName<LocalityMethod> kLocalityMethods[] = {{LocalityMethod::kMetis, "metis"},
                                                         {LocalityMethod::kRcm, "rcm"}};
}  // namespace

LocalityMethod parse_locality_method(std::string_view s) {
  return parse_enum(kLocalityMethods, "--method", s);
}

const char* to_string(LocalityMethod m) { return enum_name(kLocalityMethods, m); }

std::vector<NodeId> locality_order(const GraphDataset& d, LocalityMethod method, std::int64_t block,
                                   std::uint64_t seed) {
  if (block < 1) throw ParamError("--block must be at least 1");
  if (d.directed)
    throw ParamError("reordering needs an undirected graph; this dataset is directed");
  if (method == LocalityMethod::kRcm) return rcm_order(d.graph.view());
  const std::int64_t n = d.num_nodes();
  std::vector<NodeId> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), NodeId(0));
  const std::int64_t k = (n + block - 1) / block;
  if (k < 2) return order;
  PartitionOptions o;
  o.k = int(std::min<std::int64_t>(k, 1 << 20));
  o.method = PartitionMethod::kMetis;
  o.balance = "nodes";
  o.seed = seed;
  const std::vector<PartId> owner = partition_nodes(d, o);
  std::stable_sort(order.begin(), order.end(), [&](NodeId a, NodeId b) {
    return owner[std::size_t(a)] < owner[std::size_t(b)];
  });
  return order;
}

double window_locality(const CsrView& g, std::int64_t block) {
  if (block < 1) throw ParamError("window_locality: block must be at least 1");
  std::int64_t near = 0;
  for (NodeId u = 0; u < g.num_nodes; ++u)
    for (const NodeId* v = g.begin(u); v != g.end(u); ++v)
      near += (std::int64_t(u) / block) == (std::int64_t(*v) / block);
  return g.num_edges() ? double(near) / double(g.num_edges()) : 0.0;
}

}  // namespace halo

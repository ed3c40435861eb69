// --method lp-metis: two-level partitioning in a fraction of METIS's memory. Size-constrained
// label propagation clusters the memory-mapped CSR (clusters of at most n / (200 K) nodes,
// --passes passes, O(n) ids), the clusters are contracted into a weighted coarse graph, METIS
// k-way partitions that, and label propagation refines the projection on the fine graph within
// the balance cap. Sequential, so deterministic for a seed. On graphs with communities it cuts
// like METIS (products-sized: 0.91x); on meshes LP clusters poorly (4elt K = 2: 2x METIS).
#include <metis.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "halo/graph/error.h"
#include "halo/partition/partition.h"

namespace halo {

namespace {

// Size-constrained label propagation, in id order: a node moves to the label most of its
// neighbours hold (strictly more than its own) when that label's size stays <= limit; until a
// pass moves none or after `passes`. Both the clustering and the refinement are this sweep.
template <class Label, class Size>
void lp_sweeps(const CsrView& g, std::vector<Label>& label, std::vector<Size>& size, double limit,
               int passes) {
  std::vector<Size> count(size.size(), 0);  // neighbours per label: a size bounds it
  std::vector<Label> touched;
  for (int pass = 0; pass < passes; ++pass) {
    std::int64_t moved = 0;
    for (std::int64_t v = 0; v < g.num_nodes; ++v) {
      touched.clear();
      for (EdgeId e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
        const Label c = label[std::size_t(g.indices[e])];
        if (count[std::size_t(c)]++ == 0) touched.push_back(c);
      }
      const Label own = label[std::size_t(v)];
      Label best = own;
      for (Label c : touched)
        if (count[std::size_t(c)] > count[std::size_t(best)] &&
            double(size[std::size_t(c)]) + 1 <= limit)
          best = c;
      for (Label c : touched) count[std::size_t(c)] = 0;
      if (best != own) {
        --size[std::size_t(own)];
        ++size[std::size_t(best)];
        label[std::size_t(v)] = best;
        ++moved;
      }
    }
    if (moved == 0) break;
  }
}

// Step 1: each node joins the neighbouring cluster it has most edges to, if that cluster stays
// under max_w nodes (a fraction of a part, so METIS keeps room to balance). Cluster ids 0..C-1.
std::vector<NodeId> cluster_lp(const CsrView& g, std::int64_t max_w, int passes,
                               NodeId* count_out) {
  const std::int64_t n = g.num_nodes;
  std::vector<NodeId> cluster(static_cast<std::size_t>(n));
  std::vector<std::int32_t> weight(static_cast<std::size_t>(n), 1);
  for (std::int64_t v = 0; v < n; ++v) cluster[std::size_t(v)] = NodeId(v);
  lp_sweeps(g, cluster, weight, double(max_w), passes);
  std::vector<NodeId> id(static_cast<std::size_t>(n), -1);  // cluster -> dense id
  NodeId c_count = 0;
  for (std::int64_t v = 0; v < n; ++v) {
    NodeId& c = id[std::size_t(cluster[std::size_t(v)])];
    if (c < 0) c = c_count++;
  }
  for (std::int64_t v = 0; v < n; ++v)
    cluster[std::size_t(v)] = id[std::size_t(cluster[std::size_t(v)])];
  *count_out = c_count;
  return cluster;
}

// A weighted graph in METIS's arrays.
struct Coarse {
  std::vector<idx_t> xadj, adj, ewgt, vwgt;
};

// Step 2: the clusters as nodes (weight = members), edges between clusters summed.
Coarse contract(const CsrView& g, const std::vector<NodeId>& cluster, NodeId c_count) {
  const std::int64_t n = g.num_nodes;
  std::vector<std::int64_t> start(std::size_t(c_count) + 1, 0);
  for (std::int64_t v = 0; v < n; ++v) ++start[std::size_t(cluster[std::size_t(v)]) + 1];
  for (NodeId c = 0; c < c_count; ++c) start[std::size_t(c) + 1] += start[std::size_t(c)];
  std::vector<NodeId> members(static_cast<std::size_t>(n));
  {
    std::vector<std::int64_t> at(start.begin(), start.end() - 1);
    for (std::int64_t v = 0; v < n; ++v)
      members[std::size_t(at[std::size_t(cluster[std::size_t(v)])]++)] = NodeId(v);
  }
  Coarse c;
  c.xadj.assign(std::size_t(c_count) + 1, 0);
  c.vwgt.resize(static_cast<std::size_t>(c_count));
  std::vector<idx_t> slot(static_cast<std::size_t>(c_count), -1);
  for (NodeId u = 0; u < c_count; ++u) {
    const std::size_t first = c.adj.size();
    c.vwgt[std::size_t(u)] = idx_t(start[std::size_t(u) + 1] - start[std::size_t(u)]);
    for (std::int64_t i = start[std::size_t(u)]; i < start[std::size_t(u) + 1]; ++i) {
      const NodeId v = members[std::size_t(i)];
      for (EdgeId e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
        const NodeId d = cluster[std::size_t(g.indices[e])];
        if (d == u) continue;
        idx_t& s = slot[std::size_t(d)];
        if (s >= 0 && std::size_t(s) >= first) {  // already an edge of u
          ++c.ewgt[std::size_t(s)];
          continue;
        }
        if (c.adj.size() >= std::size_t(std::numeric_limits<idx_t>::max()))
          throw ParamError(
              "lp-metis: the coarse graph has more edges than METIS's 32-bit "
              "idx_t can index; use --method fennel");
        s = idx_t(c.adj.size());
        c.adj.push_back(d);
        c.ewgt.push_back(1);
      }
    }
    c.xadj[std::size_t(u) + 1] = idx_t(c.adj.size());
  }
  return c;
}

// Step 4: nodes move to the part holding most of their neighbours, strictly better and within
// cap, in id order, until a pass moves none (or 8 passes).
void refine_lp(const CsrView& g, double cap, std::vector<PartId>& owner,
               std::vector<std::int64_t>& size) {
  lp_sweeps(g, owner, size, cap, 8);
}

}  // namespace

std::vector<PartId> partition_lp_metis(const CsrView& g, const PartitionOptions& o) {
  const std::int64_t n = g.num_nodes;
  const int k = o.k;
  if (k == 1) return std::vector<PartId>(static_cast<std::size_t>(n), 0);
  NodeId c_count = 0;
  const std::int64_t max_w = std::max<std::int64_t>(1, n / (std::int64_t(k) * 200));
  const std::vector<NodeId> cluster = cluster_lp(g, max_w, o.passes, &c_count);
  Coarse c = contract(g, cluster, c_count);
  // Step 3: METIS k-way on the coarse graph.
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  if (o.seed) options[METIS_OPTION_SEED] = idx_t(*o.seed);  // else METIS's own, as metis.cc
  if (o.ufactor >= 0) options[METIS_OPTION_UFACTOR] = o.ufactor;
  idx_t nv = c_count, nc = 1, np = k, obj = 0;
  std::vector<idx_t> cpart(static_cast<std::size_t>(c_count), 0);
  if (METIS_PartGraphKway(&nv, &nc, c.xadj.data(), c.adj.data(), c.vwgt.data(), nullptr,
                          c.ewgt.data(), &np, nullptr, nullptr, options, &obj,
                          cpart.data()) != METIS_OK)
    throw SystemError("METIS failed on the coarse graph");
  c = Coarse();  // freed before the fine graph's arrays grow
  std::vector<PartId> owner(static_cast<std::size_t>(n));
  std::vector<std::int64_t> size(std::size_t(k), 0);
  for (std::int64_t v = 0; v < n; ++v) {
    owner[std::size_t(v)] = PartId(cpart[std::size_t(cluster[std::size_t(v)])]);
    ++size[std::size_t(owner[std::size_t(v)])];
  }
  const double slack = 1.0 + (o.ufactor >= 0 ? o.ufactor : 30) / 1000.0;
  refine_lp(g, std::ceil(slack * double(n) / k), owner, size);
  return owner;
}

}  // namespace halo

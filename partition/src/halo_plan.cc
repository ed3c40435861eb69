// Halo plans from a graph and its owner array (layout in halo_plan.h). One sweep finds every
// part's halo lists; each rank's plan is then assembled from its own lists and its peers' lists
// of its nodes, so a send list is by construction the peer's receive list.
#include "halo/partition/halo_plan.h"

#include <algorithm>

namespace halo {

HaloPlanView HaloPlan::view() const {
  return {k, num_owned, num_halo(), send_offsets.data(), send.data(), recv_offsets.data()};
}

namespace {

// Members of each part: inner nodes first, then boundary, each in global id order.
void find_owned(const CsrView& g, std::span<const PartId> owner, PartitionHalos& h) {
  const std::int64_t n = g.num_nodes;
  std::vector<std::uint8_t> boundary(std::size_t(n), 0);
#pragma omp parallel for schedule(dynamic, 4096)
  for (std::int64_t u = 0; u < n; ++u)
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e)
      if (owner[std::size_t(g.indices[e])] != owner[std::size_t(u)]) {
        boundary[std::size_t(u)] = 1;
        break;
      }
  h.owned.assign(std::size_t(h.k), {});
  h.num_inner.assign(std::size_t(h.k), 0);
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t v = 0; v < n; ++v)
      if (boundary[std::size_t(v)] == pass) {
        h.owned[std::size_t(owner[std::size_t(v)])].push_back(NodeId(v));
        h.num_inner[std::size_t(owner[std::size_t(v)])] += pass == 0;
      }
}

// needs[r][q] = nodes of q that part r's rows reference, sorted by global id. Only boundary rows
// reference other parts, so only they are scanned.
void find_needs(const CsrView& g, std::span<const PartId> owner, PartitionHalos& h) {
  const auto k = std::size_t(h.k);
  h.needs.assign(k, std::vector<std::vector<NodeId>>(k));
  std::vector<PartId> seen(std::size_t(g.num_nodes), -1);  // the last part that listed the node
  for (std::size_t r = 0; r < k; ++r) {
    const auto& own = h.owned[r];
    for (std::size_t i = std::size_t(h.num_inner[r]); i < own.size(); ++i) {
      const NodeId u = own[i];
      for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
        const NodeId w = g.indices[e];
        const PartId q = owner[std::size_t(w)];
        if (std::size_t(q) != r && seen[std::size_t(w)] != PartId(r)) {
          seen[std::size_t(w)] = PartId(r);
          h.needs[r][std::size_t(q)].push_back(w);
        }
      }
    }
    for (auto& list : h.needs[r]) std::sort(list.begin(), list.end());
  }
}

}  // namespace

PartitionHalos find_partition_halos(const CsrView& g, std::span<const PartId> owner, int k) {
  PartitionHalos h;
  h.k = k;
  h.num_nodes = g.num_nodes;
  find_owned(g, owner, h);
  find_needs(g, owner, h);
  return h;
}

HaloPlan build_halo_plan(const PartitionHalos& h, int rank, std::vector<NodeId>& local_of) {
  const auto r = std::size_t(rank), k = std::size_t(h.k);
  HaloPlan p;
  p.rank = rank;
  p.k = h.k;
  p.num_owned = std::int64_t(h.owned[r].size());
  p.num_inner = h.num_inner[r];
  // Rows: owned, then the halo from each peer in turn.
  p.global_ids.assign(h.owned[r].begin(), h.owned[r].end());
  p.recv_offsets.assign(k + 1, 0);
  for (std::size_t q = 0; q < k; ++q) {
    p.recv_offsets[q + 1] = p.recv_offsets[q] + EdgeId(h.needs[r][q].size());
    p.global_ids.insert(p.global_ids.end(), h.needs[r][q].begin(), h.needs[r][q].end());
  }
  local_of.resize(std::size_t(h.num_nodes));
  for (std::size_t i = 0; i < p.global_ids.size(); ++i)
    local_of[std::size_t(p.global_ids[i])] = NodeId(i);
  // Sends: what each peer q needs from r, in q's order, as r's local rows.
  p.send_offsets.assign(k + 1, 0);
  for (std::size_t q = 0; q < k; ++q) {
    for (NodeId w : h.needs[q][r]) p.send.push_back(local_of[std::size_t(w)]);
    p.send_offsets[q + 1] = EdgeId(p.send.size());
  }
  return p;
}

std::vector<HaloPlan> build_halo_plans(const CsrView& g, std::span<const PartId> owner, int k) {
  const PartitionHalos halos = find_partition_halos(g, owner, k);
  std::vector<NodeId> local_of(std::size_t(g.num_nodes), -1);
  std::vector<HaloPlan> plans;
  plans.reserve(std::size_t(k));
  for (int r = 0; r < k; ++r) plans.push_back(build_halo_plan(halos, r, local_of));
  return plans;
}

}  // namespace halo

// Halo plans: which local rows each rank sends to and receives from every peer, derived from a
// graph and its owner array alone (no files). write_parts writes a plan into every part-r, and
// the runtime's HaloExchanger runs one through a HaloPlanView over a mapped Part.
//
// A rank's local rows are its owned nodes, inner first (no neighbour in another part), then
// boundary, each run in increasing global id; then its halo rows (nodes of other parts that its
// owned rows reference), grouped by owning peer, each group in increasing global id. Rank q's
// send list to r is, element for element, r's receive list from q: both come from one list of
// global ids, the halo of r owned by q.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "halo/graph/csr.h"
#include "halo/graph/types.h"

namespace halo {

// A non-owning view of one rank's plan: what the exchanger takes (arrays of a HaloPlan or of a
// mapped Part; see Part::halo_plan). The arrays must outlive every user of the view.
struct HaloPlanView {
  int k = 1;
  std::int64_t owned = 0, halo = 0;
  const EdgeId* send_offsets = nullptr;  // [k + 1]
  const NodeId* send = nullptr;          // owned local rows, grouped by peer
  const EdgeId* recv_offsets = nullptr;  // [k + 1]: rows from q start at owned + recv_offsets[q]

  std::int64_t send_rows() const { return send_offsets[k]; }
};

// One rank's plan, owning its arrays: the rows, send and receive arrays of part-r (parts.h).
struct HaloPlan {
  int rank = 0, k = 1;
  std::int64_t num_owned = 0, num_inner = 0;
  std::vector<NodeId> global_ids;  // [owned + halo]: the global id of every local row
  // [k + 1]: the rows sent to q are send[send_offsets[q] .. send_offsets[q + 1]).
  std::vector<EdgeId> send_offsets;
  std::vector<NodeId> send;  // owned local rows each peer needs, in the order it receives them
  // [k + 1]: the rows from q are local rows [owned + recv_offsets[q], owned + recv_offsets[q + 1]).
  std::vector<EdgeId> recv_offsets;

  std::int64_t num_halo() const { return std::int64_t(global_ids.size()) - num_owned; }
  // Owned rows first: the rows of the rank's local CSR.
  std::span<const NodeId> owned_ids() const { return {global_ids.data(), std::size_t(num_owned)}; }
  HaloPlanView view() const;
};

// Every part's owned nodes and the halo each part needs from each peer: what one sweep over the
// graph finds, and the input of every rank's build_halo_plan. Memory: one entry per node plus
// one per halo row of every part.
struct PartitionHalos {
  int k = 0;
  std::int64_t num_nodes = 0;
  // owned[r]: part r's inner nodes, then its boundary nodes, each by global id.
  std::vector<std::vector<NodeId>> owned;
  std::vector<std::int64_t> num_inner;  // num_inner[r]: the inner prefix of owned[r]
  // needs[r][q]: the nodes of q that owned rows of r reference, by global id (empty for q = r).
  std::vector<std::vector<std::vector<NodeId>>> needs;
};

// The one sweep, O(nodes + edges): owner holds g.num_nodes part ids in [0, k) (checked by the
// caller). Rows are taken as out-edges, so a directed graph's halo is what its rows reference.
PartitionHalos find_partition_halos(const CsrView& g, std::span<const PartId> owner, int k);

// Rank `rank`'s plan, O(its rows + its sends). local_of is a global -> local map with one entry
// per node that the caller allocates once and passes to every call (so k plans cost O(nodes),
// not O(k nodes)); on return local_of[v] is v's local row for every node v of this plan, and its
// other entries are stale. write_parts reuses it to relabel the part's CSR and splits.
HaloPlan build_halo_plan(const PartitionHalos& halos, int rank, std::vector<NodeId>& local_of);

// Every rank's plan of g cut by owner into k parts: find_partition_halos, then build_halo_plan
// for each rank. Holds all k plans at once (write_parts instead builds and writes one at a time).
std::vector<HaloPlan> build_halo_plans(const CsrView& g, std::span<const PartId> owner, int k);

}  // namespace halo

// What a partition will cost at training time, computed from scratch from the graph and the
// owner array: edge cut, communication volume, halo sizes, rows exchanged between every pair of
// parts, and balance.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "halo/graph/dataset.h"

namespace halo {

struct PartStats {
  std::int64_t nodes = 0;        // owned
  std::int64_t inner = 0;        // owned nodes with no neighbour in another part
  std::int64_t local_edges = 0;  // stored entries of owned rows
  std::int64_t halo = 0;         // distinct non-owned neighbours of owned rows
  std::int64_t train = 0, valid = 0, test = 0;
  std::vector<std::int64_t> recv;  // rows received from each peer (halo rows it owns)
  std::vector<std::int64_t> send;  // rows sent to each peer
  double share = 0, target = 0;    // achieved and target share of the nodes
};

struct Quality {
  int k = 0;
  std::int64_t edge_cut = 0;     // undirected edges (arcs, when directed) crossing parts
  std::int64_t comm_volume = 0;  // sum over nodes of distinct other parts among neighbours
  double node_balance = 0, edge_balance = 0, train_balance = 0;  // max / mean
  std::vector<PartStats> parts;
};

// Measures owner (values in [0, k)) on g; split (may be null) gives train/valid/test counts;
// targets (size k) are reported next to the achieved shares.
Quality measure_partition(const CsrView& g, bool directed, const std::vector<PartId>& owner, int k,
                          const Split* split, const std::vector<double>& targets);
// The figures measure_partition derives from the per-part counts: train/valid/test counts of
// split (may be null), balances, shares and targets. q.k, q.parts' nodes and local_edges must be
// set; a caller that sums the counts elsewhere (one slice of rows per MPI rank) finishes here.
void finish_quality(Quality& q, const std::vector<PartId>& owner, const Split* split,
                    const std::vector<double>& targets);

nlohmann::json quality_json(const Quality& q);
// The report `halo partition` prints: one line per part and the totals.
std::string format_quality(const nlohmann::json& q);

}  // namespace halo

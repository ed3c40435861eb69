// The temporal graph side of TGN: a temporal CSR (every node's events, as either endpoint, in
// time order), the sampler of the k most recent neighbours strictly before a time, and the
// chronological train/valid/test split with TGN's inductive (new-node) protocol.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/graph/types.h"

namespace halo {

// Every node's events in time order (ties keep event order): for event e = (u, v, t), u's list
// holds (v, e, t) and v's list holds (u, e, t).
struct TemporalCsr {
  std::int64_t num_nodes = 0;
  std::vector<EdgeId> offsets;   // [num_nodes + 1]
  std::vector<NodeId> neighbor;  // [2 * events]
  std::vector<EdgeId> event;     // event id of each entry
  std::vector<double> time;      // timestamp of each entry, non-decreasing within a node
};

// Builds the temporal CSR of events [0, n) sorted by time (checked: throws ParamError when not).
// keep[e] == 0 leaves event e out (TGN drops training events that touch held-out new nodes);
// keep may be null.
TemporalCsr build_temporal_csr(std::int64_t num_nodes, const NodeId* src, const NodeId* dst,
                               const double* time, std::int64_t n,
                               const std::uint8_t* keep = nullptr);

// Up to k neighbours per query, most recent first, padded with -1 (node, event) and 0 (time).
struct NeighborBatch {
  int k = 0;
  std::vector<NodeId> node;   // [queries * k]
  std::vector<EdgeId> event;  // [queries * k]
  std::vector<double> time;   // [queries * k]
  std::vector<int> count;     // [queries] neighbours found (<= k)
};

// The k most recent neighbours of v strictly before t. Keeps, per node, how many of its events
// precede the latest time it was asked about, and advances that pointer as time moves on (TGL's
// trick): a stream processed in time order costs O(1) amortised per query instead of a binary
// search. Queries out of time order are answered exactly too (by binary search).
class RecentSampler {
 public:
  RecentSampler(const TemporalCsr& g, int k);
  // Answers queries (nodes[i], times[i]), i < n, in parallel over the batch.
  void sample(const NodeId* nodes, const double* times, std::int64_t n, NeighborBatch& out);
  // The k most recent neighbours among events with id < limits[i] (events are in time order, so
  // this is "before the batch that starts at event limits[i]": a batch never sees its own
  // events, whatever their timestamps). Same pointer trick; limits may go backwards too.
  void sample_before(const NodeId* nodes, const EdgeId* limits, std::int64_t n, NeighborBatch& out);
  // Forgets the pointers (a new pass over the stream).
  void reset();
  int k() const { return k_; }

 private:
  template <class Key>
  void sample_by(const std::vector<Key>& list, const NodeId* nodes, const Key* limits,
                 std::int64_t n, NeighborBatch& out);
  const TemporalCsr& g_;
  int k_;
  std::vector<EdgeId> ptr_;  // per node: events before its latest query time
};

// The chronological split at the 70% / 85% time quantiles, and TGN's inductive protocol: a
// fraction of the nodes that appear in validation or test events is held out ("new nodes"),
// training events touching them are dropped, and new-node evaluation uses the validation and test
// events with at least one endpoint never seen in training.
struct TemporalSplit {
  std::int64_t train_end = 0, valid_end = 0, events = 0;  // [0, train_end) train, ... test
  double valid_time = 0, test_time = 0;                   // first timestamps of valid and test
  std::vector<std::uint8_t> train_keep;  // [events]: 1 for training events used (no new node)
  std::vector<std::uint8_t> new_node;    // [num_nodes]: held out of training
  std::vector<std::uint8_t> inductive;   // [events]: valid/test event touching an unseen node
};

TemporalSplit chronological_split(std::int64_t num_nodes, const NodeId* src, const NodeId* dst,
                                  const double* time, std::int64_t n, std::uint64_t seed,
                                  double valid_q = 0.70, double test_q = 0.85,
                                  double new_node_fraction = 0.10);

}  // namespace halo

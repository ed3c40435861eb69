// TGN's node state between batches: every node's memory vector and the messages it received
// since that memory last changed. Plain storage: the model (temporal/tgn.h) reads and updates it,
// and runtime broadcasts it field by field when replicas must agree (--parallel segments).
#pragma once

#include <cstdint>
#include <vector>

#include "halo/gnn/matrix.h"
#include "halo/graph/types.h"

namespace halo {

// A time-sorted event stream: event e goes from src[e] to dst[e] at time[e]. A view: the arrays
// belong to the caller and must outlive every user of the stream.
struct EventStream {
  std::int64_t nodes = 0, events = 0, de = 0;  // de: edge features per event
  const NodeId *src = nullptr, *dst = nullptr;
  const double* time = nullptr;
  const float* efeat = nullptr;  // events x de, or null
};

// Each node's memory row and the time it last changed.
struct NodeMemory {
  Matrix rows;                      // nodes x memory_dim
  std::vector<double> last_update;  // per node; the stream's first time before any update

  // All rows zero, every node last updated at the stream's start.
  void reset(const EventStream& events, std::int64_t memory_dim);
  float* row(NodeId v) { return rows.data() + std::int64_t(v) * rows.cols(); }
  const float* row(NodeId v) const { return rows.data() + std::int64_t(v) * rows.cols(); }
};

// The messages each node received since its memory last changed. Event (a, b) sends a the message
// [memory of a ‖ memory of b ‖ edge features ‖ φ(t − a's last update)]. "last" keeps the latest
// message per node; "mean" keeps the sums of the b-memory and edge parts and every message's time
// (the model divides by the count). Either way a node needs one row, not one per message. The
// model writes the tables (Tgn::store_messages, with the backend's row ops) and this bookkeeping.
struct MessageStore {
  bool mean = false;         // the "mean" aggregator
  Matrix self, other, edge;  // nodes x memory_dim, x memory_dim, x max(de, 1)
  std::vector<double> time;  // the latest message's time
  std::vector<std::uint8_t> has_message;
  std::vector<std::int32_t> count;         // messages stored since the last update
  std::vector<std::vector<double>> times;  // "mean": each stored message's time; empty otherwise
  std::vector<NodeId> pending;             // the nodes with a stored message, in arrival order

  // No node has a message.
  void reset(const EventStream& events, std::int64_t memory_dim, bool mean_aggregator);
  // Node v's messages are spent (its memory took them in).
  void clear(NodeId v);
};

}  // namespace halo

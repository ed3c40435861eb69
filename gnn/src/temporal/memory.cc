// TGN's node memory and message store (see memory.h).
#include "halo/gnn/temporal/memory.h"

#include <algorithm>

namespace halo {

// Both resets zero the tables in place: a fresh Matrix assigned over the old one would hold both
// while it is built (one more nodes x memory_dim table at the peak of every epoch's start).
void NodeMemory::reset(const EventStream& events, std::int64_t memory_dim) {
  rows.resize(events.nodes, memory_dim);
  rows.fill(0.f);
  last_update.assign(std::size_t(events.nodes), events.events ? events.time[0] : 0.0);
}

void MessageStore::reset(const EventStream& events, std::int64_t memory_dim, bool mean_aggregator) {
  mean = mean_aggregator;
  has_message.assign(std::size_t(events.nodes), 0);
  count.assign(std::size_t(events.nodes), 0);
  times.assign(mean ? std::size_t(events.nodes) : 0, {});
  pending.clear();
  for (Matrix* m : {&self, &other}) m->resize(events.nodes, memory_dim);
  edge.resize(events.nodes, std::max<std::int64_t>(events.de, 1));
  for (Matrix* m : {&self, &other, &edge}) m->fill(0.f);
  time.assign(std::size_t(events.nodes), 0.0);
}

void MessageStore::clear(NodeId v) {
  has_message[std::size_t(v)] = 0;
  count[std::size_t(v)] = 0;
  if (mean) times[std::size_t(v)].clear();
}

}  // namespace halo

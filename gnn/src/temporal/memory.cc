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

void MessageStore::store(const EventStream& events, const std::vector<std::int64_t>& ids,
                         const NodeMemory& memory) {
  const std::int64_t dm = memory.rows.cols(), de = events.de;
  for (std::int64_t e : ids)
    for (int side = 0; side < 2; ++side) {
      const NodeId a = side ? events.dst[e] : events.src[e],
                   b = side ? events.src[e] : events.dst[e];
      // "last" keeps the latest message; "mean" sums every message until the node updates.
      const bool fresh = !mean || !has_message[std::size_t(a)];
      std::copy_n(memory.row(a), dm, self.data() + a * dm);
      float* sum_other = other.data() + a * dm;
      const float* memory_b = memory.row(b);
      for (std::int64_t c = 0; c < dm; ++c)
        sum_other[c] = fresh ? memory_b[c] : sum_other[c] + memory_b[c];
      if (de) {
        float* sum_edge = edge.data() + a * de;
        const float* features = events.efeat + e * de;
        for (std::int64_t c = 0; c < de; ++c)
          sum_edge[c] = fresh ? features[c] : sum_edge[c] + features[c];
      }
      count[std::size_t(a)] = fresh ? 1 : count[std::size_t(a)] + 1;
      if (mean) times[std::size_t(a)].push_back(events.time[e]);
      time[std::size_t(a)] = events.time[e];
      if (!has_message[std::size_t(a)]) pending.push_back(a);
      has_message[std::size_t(a)] = 1;
    }
}

}  // namespace halo

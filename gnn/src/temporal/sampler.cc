// Temporal CSR, recent-neighbour sampler and chronological split.
#include "halo/gnn/temporal/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "halo/gnn/rng.h"
#include "halo/graph/error.h"

namespace halo {

TemporalCsr build_temporal_csr(std::int64_t num_nodes, const NodeId* src, const NodeId* dst,
                               const double* time, std::int64_t n, const std::uint8_t* keep) {
  TemporalCsr g;
  g.num_nodes = num_nodes;
  g.offsets.assign(std::size_t(num_nodes) + 1, 0);
  for (std::int64_t e = 0; e < n; ++e) {
    if (e > 0 && time[e] < time[e - 1])
      throw ParamError("events are not sorted by time: event " + std::to_string(e) +
                       " is earlier than event " + std::to_string(e - 1));
    if (src[e] < 0 || src[e] >= num_nodes || dst[e] < 0 || dst[e] >= num_nodes)
      throw ParamError("event " + std::to_string(e) + " has a node id outside [0, " +
                       std::to_string(num_nodes) + ")");
    if (keep && !keep[e]) continue;
    ++g.offsets[std::size_t(src[e]) + 1];
    if (dst[e] != src[e]) ++g.offsets[std::size_t(dst[e]) + 1];  // a self-event is listed once
  }
  for (std::int64_t v = 0; v < num_nodes; ++v)
    g.offsets[std::size_t(v) + 1] += g.offsets[std::size_t(v)];
  const auto total = static_cast<std::size_t>(g.offsets.back());
  g.neighbor.resize(total);
  g.event.resize(total);
  g.time.resize(total);
  std::vector<EdgeId> at(g.offsets.begin(), g.offsets.end() - 1);
  auto put = [&](NodeId v, NodeId u,
                 std::int64_t e) {  // events in time order: each list stays sorted
    const std::size_t p = std::size_t(at[std::size_t(v)]++);
    g.neighbor[p] = u;
    g.event[p] = e;
    g.time[p] = time[e];
  };
  for (std::int64_t e = 0; e < n; ++e) {
    if (keep && !keep[e]) continue;
    put(src[e], dst[e], e);
    if (dst[e] != src[e]) put(dst[e], src[e], e);
  }
  return g;
}

RecentSampler::RecentSampler(const TemporalCsr& g, int k) : g_(g), k_(k) {
  if (k < 1) throw ParamError("--neighbors must be at least 1");
  reset();
}

void RecentSampler::reset() { ptr_.assign(std::size_t(g_.num_nodes), 0); }

// One implementation for both kinds of bound: `list` is the per-entry key array (times or event
// ids, non-decreasing within a node) and limits[i] the exclusive bound of query i.
template <class Key>
void RecentSampler::sample_by(const std::vector<Key>& list, const NodeId* nodes, const Key* limits,
                              std::int64_t n, NeighborBatch& out) {
  out.k = k_;
  out.node.assign(std::size_t(n * k_), -1);
  out.event.assign(std::size_t(n * k_), -1);
  out.time.assign(std::size_t(n * k_), 0.0);
  out.count.assign(std::size_t(n), 0);
  std::vector<EdgeId> found(static_cast<std::size_t>(n));  // per query: entries before its bound
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const NodeId v = nodes[i];
    const Key limit = limits[i];
    const EdgeId begin = g_.offsets[std::size_t(v)], end = g_.offsets[std::size_t(v) + 1];
    EdgeId p = begin + ptr_[std::size_t(v)];  // read only here: pointers move after the batch
    if (p > begin && list[std::size_t(p - 1)] >= limit) {
      // Out of order: search the whole list.
      p = EdgeId(std::lower_bound(list.begin() + begin, list.begin() + end, limit) - list.begin());
    } else {
      while (p < end && list[std::size_t(p)] < limit) ++p;
    }
    found[std::size_t(i)] = p - begin;
    const int c = int(std::min<EdgeId>(k_, p - begin));
    out.count[std::size_t(i)] = c;
    for (int j = 0; j < c; ++j) {  // most recent first
      const std::size_t src = std::size_t(p - 1 - j), dst = std::size_t(i * k_ + j);
      out.node[dst] = g_.neighbor[src];
      out.event[dst] = g_.event[src];
      out.time[dst] = g_.time[src];
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {  // the pointers only move forward
    EdgeId& q = ptr_[std::size_t(nodes[i])];
    q = std::max(q, found[std::size_t(i)]);
  }
}

void RecentSampler::sample(const NodeId* nodes, const double* times, std::int64_t n,
                           NeighborBatch& out) {
  sample_by(g_.time, nodes, times, n, out);
}

void RecentSampler::sample_before(const NodeId* nodes, const EdgeId* limits, std::int64_t n,
                                  NeighborBatch& out) {
  sample_by(g_.event, nodes, limits, n, out);
}

TemporalSplit chronological_split(std::int64_t num_nodes, const NodeId* src, const NodeId* dst,
                                  const double* time, std::int64_t n, std::uint64_t seed,
                                  double valid_q, double test_q, double new_node_fraction) {
  if (n < 3) throw ParamError("a temporal split needs at least 3 events");
  TemporalSplit s;
  s.events = n;
  // Quantiles of the timestamps (events are sorted): the first event at or after each.
  s.valid_time = time[std::min<std::int64_t>(n - 1, std::int64_t(std::floor(valid_q * double(n))))];
  s.test_time = time[std::min<std::int64_t>(n - 1, std::int64_t(std::floor(test_q * double(n))))];
  s.train_end = std::int64_t(std::lower_bound(time, time + n, s.valid_time) - time);
  s.valid_end = std::int64_t(std::lower_bound(time, time + n, s.test_time) - time);
  // Held-out nodes: a fraction of those in valid/test events, chosen by a keyed draw per node.
  s.new_node.assign(std::size_t(num_nodes), 0);
  const PhiloxKey key = philox_key(seed, kStreamInit + 0x7e57);
  std::vector<std::uint8_t> later(std::size_t(num_nodes), 0);
  for (std::int64_t e = s.train_end; e < n; ++e)
    later[std::size_t(src[e])] = later[std::size_t(dst[e])] = 1;
  for (std::int64_t v = 0; v < num_nodes; ++v)
    if (later[std::size_t(v)] && philox_uniform(key, std::uint64_t(v), 0) < new_node_fraction)
      s.new_node[std::size_t(v)] = 1;
  s.train_keep.assign(std::size_t(n), 0);
  std::vector<std::uint8_t> seen(std::size_t(num_nodes), 0);
  for (std::int64_t e = 0; e < s.train_end; ++e) {
    if (s.new_node[std::size_t(src[e])] || s.new_node[std::size_t(dst[e])]) continue;
    s.train_keep[std::size_t(e)] = 1;
    seen[std::size_t(src[e])] = seen[std::size_t(dst[e])] = 1;
  }
  s.inductive.assign(std::size_t(n), 0);
  for (std::int64_t e = s.train_end; e < n; ++e)
    s.inductive[std::size_t(e)] = !seen[std::size_t(src[e])] || !seen[std::size_t(dst[e])];
  return s;
}

}  // namespace halo

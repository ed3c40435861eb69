// The temporal graph pieces of TGN: temporal CSR, the recent-neighbour sampler against brute
// force (in and out of time order, with ties), and the chronological split's inductive protocol.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "halo/gnn/temporal/sampler.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

struct Stream {
  std::int64_t nodes = 0;
  std::vector<NodeId> src, dst;
  std::vector<double> time;
};

// Random events over `nodes` nodes with skewed activity, integer timestamps (many ties) and a
// few self-events.
Stream random_stream(std::int64_t nodes, std::int64_t events, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int> hub(0.05);
  Stream s;
  s.nodes = nodes;
  double t = 0;
  for (std::int64_t e = 0; e < events; ++e) {
    t += double(rng() % 3);  // 0 = same timestamp as the previous event
    s.src.push_back(NodeId(std::min<std::int64_t>(nodes - 1, hub(rng))));
    s.dst.push_back(NodeId(rng() % std::uint32_t(nodes)));
    s.time.push_back(t);
  }
  return s;
}

// The k most recent events of v strictly before t, most recent first, by scanning everything.
std::vector<EdgeId> brute(const Stream& s, NodeId v, double t, int k) {
  std::vector<EdgeId> out;
  for (std::int64_t e = std::int64_t(s.src.size()) - 1; e >= 0 && int(out.size()) < k; --e)
    if (s.time[std::size_t(e)] < t && (s.src[std::size_t(e)] == v || s.dst[std::size_t(e)] == v))
      out.push_back(e);
  return out;
}

TEST(TemporalCsr, EveryNodeListsItsEventsInTimeOrder) {
  const Stream s = random_stream(50, 2000, 1);
  const TemporalCsr g =
      build_temporal_csr(s.nodes, s.src.data(), s.dst.data(), s.time.data(), 2000);
  for (NodeId v = 0; v < s.nodes; ++v) {
    std::vector<EdgeId> want;
    for (std::int64_t e = 0; e < 2000; ++e)
      if (s.src[std::size_t(e)] == v || s.dst[std::size_t(e)] == v)
        want.push_back(e);  // self-events once
    const std::vector<EdgeId> got(g.event.begin() + g.offsets[std::size_t(v)],
                                  g.event.begin() + g.offsets[std::size_t(v) + 1]);
    ASSERT_EQ(got, want) << "node " << v;
    for (EdgeId p = g.offsets[std::size_t(v)]; p < g.offsets[std::size_t(v) + 1]; ++p) {
      const EdgeId e = g.event[std::size_t(p)];
      EXPECT_EQ(g.time[std::size_t(p)], s.time[std::size_t(e)]);
      const NodeId other =
          s.src[std::size_t(e)] == v ? s.dst[std::size_t(e)] : s.src[std::size_t(e)];
      EXPECT_EQ(g.neighbor[std::size_t(p)], other);
    }
  }
}

TEST(TemporalCsr, UnsortedEventsAreRefused) {
  const std::vector<NodeId> a = {0, 1}, b = {1, 0};
  const std::vector<double> t = {2.0, 1.0};
  EXPECT_THROW(build_temporal_csr(2, a.data(), b.data(), t.data(), 2), ParamError);
}

TEST(RecentSampler, MatchesBruteForceOverAStreamInTimeOrder) {
  const std::int64_t E = 3000;
  const Stream s = random_stream(80, E, 2);
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src.data(), s.dst.data(), s.time.data(), E);
  for (int k : {1, 3, 10}) {
    RecentSampler sampler(g, k);
    std::mt19937 rng(7);
    NeighborBatch nb;
    for (std::int64_t b0 = 0; b0 < E; b0 += 200) {  // batches of 200 events: src, dst, a negative
      std::vector<NodeId> q;
      std::vector<double> qt;
      for (std::int64_t e = b0; e < std::min(E, b0 + 200); ++e) {
        for (NodeId v : {s.src[std::size_t(e)], s.dst[std::size_t(e)], NodeId(rng() % 80)}) {
          q.push_back(v);
          qt.push_back(s.time[std::size_t(e)]);
        }
      }
      sampler.sample(q.data(), qt.data(), std::int64_t(q.size()), nb);
      for (std::size_t i = 0; i < q.size(); ++i) {
        const std::vector<EdgeId> want = brute(s, q[i], qt[i], k);
        ASSERT_EQ(nb.count[i], int(want.size())) << "k " << k << " query " << i;
        for (std::size_t j = 0; j < want.size(); ++j) {
          const std::size_t at = i * std::size_t(k) + j;
          ASSERT_EQ(nb.event[at], want[j]);
          EXPECT_LT(nb.time[at], qt[i])
              << "a neighbour at or after the query time leaks the future";
        }
        for (int j = int(want.size()); j < k; ++j)
          EXPECT_EQ(nb.node[i * std::size_t(k) + std::size_t(j)], -1);
      }
    }
  }
}

TEST(RecentSampler, QueriesOutOfTimeOrderAreExactToo) {
  const std::int64_t E = 2000;
  const Stream s = random_stream(40, E, 3);
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src.data(), s.dst.data(), s.time.data(), E);
  RecentSampler sampler(g, 5);
  std::mt19937 rng(11);
  NeighborBatch nb;
  for (int round = 0; round < 20; ++round) {
    std::vector<NodeId> q;
    std::vector<double> qt;
    for (int i = 0; i < 100; ++i) {
      q.push_back(NodeId(rng() % 40));
      qt.push_back(double(rng() % std::uint32_t(s.time.back() + 2)));
    }
    sampler.sample(q.data(), qt.data(), 100, nb);
    for (std::size_t i = 0; i < q.size(); ++i) {
      const std::vector<EdgeId> want = brute(s, q[i], qt[i], 5);
      ASSERT_EQ(nb.count[i], int(want.size()));
      for (std::size_t j = 0; j < want.size(); ++j) ASSERT_EQ(nb.event[i * 5 + j], want[j]);
    }
  }
}

TEST(RecentSampler, BeforeABatchMatchesBruteForce) {
  const std::int64_t E = 3000;
  const Stream s = random_stream(60, E, 5);
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src.data(), s.dst.data(), s.time.data(), E);
  RecentSampler sampler(g, 4);
  NeighborBatch nb;
  std::mt19937 rng(2);
  for (int pass = 0; pass < 2; ++pass)  // in order, then again from the start (backwards)
    for (std::int64_t b0 = 0; b0 < E; b0 += 250) {
      std::vector<NodeId> q;
      std::vector<EdgeId> lim;
      for (int i = 0; i < 300; ++i) {
        q.push_back(NodeId(rng() % 60));
        lim.push_back(b0);
      }
      sampler.sample_before(q.data(), lim.data(), 300, nb);
      for (std::size_t i = 0; i < q.size(); ++i) {
        std::vector<EdgeId> want;  // the last 4 events of q[i] with id < b0, newest first
        for (std::int64_t e = b0 - 1; e >= 0 && want.size() < 4; --e)
          if (s.src[std::size_t(e)] == q[i] || s.dst[std::size_t(e)] == q[i]) want.push_back(e);
        ASSERT_EQ(nb.count[i], int(want.size()));
        for (std::size_t j = 0; j < want.size(); ++j) ASSERT_EQ(nb.event[i * 4 + j], want[j]);
      }
    }
}

TEST(ChronologicalSplit, HoldsOutNewNodesAsTgnDoes) {
  const std::int64_t E = 5000;
  const Stream s = random_stream(400, E, 4);
  const TemporalSplit sp =
      chronological_split(s.nodes, s.src.data(), s.dst.data(), s.time.data(), E, 0);
  EXPECT_NEAR(double(sp.train_end) / E, 0.70, 0.01);
  EXPECT_NEAR(double(sp.valid_end) / E, 0.85, 0.01);
  for (std::int64_t e = 0; e < E; ++e) {
    const bool train = e < sp.train_end;
    EXPECT_EQ(s.time[std::size_t(e)] < sp.valid_time, train) << "event " << e;
  }
  std::int64_t held = 0, kept = 0, inductive = 0;
  std::vector<std::uint8_t> seen(400, 0);
  for (std::int64_t e = 0; e < sp.train_end; ++e) {
    const bool touches = sp.new_node[std::size_t(s.src[std::size_t(e)])] ||
                         sp.new_node[std::size_t(s.dst[std::size_t(e)])];
    EXPECT_EQ(sp.train_keep[std::size_t(e)], touches ? 0 : 1);
    if (sp.train_keep[std::size_t(e)]) {
      ++kept;
      seen[std::size_t(s.src[std::size_t(e)])] = seen[std::size_t(s.dst[std::size_t(e)])] = 1;
    }
  }
  for (std::int64_t v = 0; v < 400; ++v) {
    held += sp.new_node[std::size_t(v)];
    if (sp.new_node[std::size_t(v)]) {
      EXPECT_FALSE(seen[std::size_t(v)]) << "a held-out node trained";
    }
  }
  for (std::int64_t e = sp.train_end; e < E; ++e) {
    const bool unseen =
        !seen[std::size_t(s.src[std::size_t(e)])] || !seen[std::size_t(s.dst[std::size_t(e)])];
    EXPECT_EQ(sp.inductive[std::size_t(e)], unseen ? 1 : 0);
    inductive += unseen;
  }
  EXPECT_GT(held, 0);
  EXPECT_LT(kept, sp.train_end);
  EXPECT_GT(inductive, 0);
  // The same seed holds out the same nodes.
  const TemporalSplit again =
      chronological_split(s.nodes, s.src.data(), s.dst.data(), s.time.data(), E, 0);
  EXPECT_EQ(again.new_node, sp.new_node);
}

}  // namespace
}  // namespace halo

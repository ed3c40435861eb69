// Halo plans on tiny hand-drawn graphs with known answers (row order, inner first, send lists),
// the invariants on a generated graph, and agreement with what write_parts writes.
#include "halo/partition/halo_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

#include "../test_util.h"
#include "halo/graph/formats.h"
#include "halo/partition/parts.h"
#include "halo/partition/quality.h"

namespace halo {
namespace {
using test::TempDir;
namespace fs = std::filesystem;
using Ids = std::vector<NodeId>;
using Offsets = std::vector<EdgeId>;

Csr graph(std::int64_t n, const std::vector<std::pair<NodeId, NodeId>>& edges,
          bool symmetrize = true) {
  EdgeList el;
  el.num_nodes = n;
  for (auto [u, v] : edges) {
    el.src.push_back(u);
    el.dst.push_back(v);
  }
  return build_csr(std::move(el), {.symmetrize = symmetrize});
}

void expect_plan(const HaloPlan& p, std::int64_t inner, const Ids& global_ids,
                 const Offsets& recv_offsets, const Offsets& send_offsets, const Ids& send) {
  SCOPED_TRACE("rank " + std::to_string(p.rank));
  EXPECT_EQ(p.num_inner, inner);
  EXPECT_EQ(p.global_ids, global_ids);
  EXPECT_EQ(p.recv_offsets, recv_offsets);
  EXPECT_EQ(p.send_offsets, send_offsets);
  EXPECT_EQ(p.send, send);
}

// Every rank's send list to q is q's receive list from it, element for element (global ids).
void expect_sends_match_receives(const std::vector<HaloPlan>& plans) {
  const auto k = plans.size();
  for (std::size_t r = 0; r < k; ++r)
    for (std::size_t q = 0; q < k; ++q) {
      const HaloPlan& a = plans[r];
      const HaloPlan& b = plans[q];
      Ids sent, received;
      for (EdgeId i = a.send_offsets[q]; i < a.send_offsets[q + 1]; ++i) {
        ASSERT_LT(a.send[std::size_t(i)], a.num_owned);
        sent.push_back(a.global_ids[std::size_t(a.send[std::size_t(i)])]);
      }
      for (EdgeId i = b.recv_offsets[r]; i < b.recv_offsets[r + 1]; ++i)
        received.push_back(b.global_ids[std::size_t(b.num_owned + i)]);
      EXPECT_EQ(sent, received) << r << " -> " << q;
    }
}

//   0 - 1 - 2 - 3 - 4 - 5
//   A   A   B   B   A   A      (A = part 0, B = part 1)
// Part 0 owns 0, 1, 4, 5: 0 and 5 are inner, 1 and 4 boundary, so its rows are 0 5 1 4, then
// its halo 2 3 from part 1. Part 1 owns 2 3 (both boundary), then its halo 1 4 from part 0.
TEST(HaloPlan, PathPutsInnerRowsFirstAndHaloByPeer) {
  const Csr g = graph(6, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}});
  const std::vector<HaloPlan> plans =
      build_halo_plans(g.view(), std::vector<PartId>{0, 0, 1, 1, 0, 0}, 2);
  ASSERT_EQ(plans.size(), 2u);
  // Part 0 sends 1 and 4 (local rows 2 and 3) to part 1; part 1 sends 2 and 3 (rows 0, 1).
  expect_plan(plans[0], 2, {0, 5, 1, 4, 2, 3}, {0, 0, 2}, {0, 0, 2}, {2, 3});
  expect_plan(plans[1], 0, {2, 3, 1, 4}, {0, 2, 2}, {0, 2, 2}, {0, 1});
  EXPECT_EQ(plans[0].num_owned, 4);
  EXPECT_EQ(plans[0].num_halo(), 2);
  EXPECT_EQ(plans[1].num_owned, 2);
  expect_sends_match_receives(plans);
}

//   1 4              owner: 0 -> A, 3 6 -> A, 1 4 -> B, 2 5 -> C
//    \|
//  3 - 0 - 6         (every leaf hangs off the centre 0)
//    /|
//   2 5
// The centre is part 0's only boundary row; every leaf of B and C is a boundary row of its part.
TEST(HaloPlan, StarSendsTheCentreToEveryPeer) {
  const Csr g = graph(7, {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}});
  const std::vector<HaloPlan> plans =
      build_halo_plans(g.view(), std::vector<PartId>{0, 1, 2, 0, 1, 2, 0}, 3);
  expect_plan(plans[0], 2, {3, 6, 0, 1, 4, 2, 5}, {0, 0, 2, 4}, {0, 0, 1, 2}, {2, 2});
  expect_plan(plans[1], 0, {1, 4, 0}, {0, 1, 1, 1}, {0, 2, 2, 2}, {0, 1});
  expect_plan(plans[2], 0, {2, 5, 0}, {0, 1, 1, 1}, {0, 2, 2, 2}, {0, 1});
  expect_sends_match_receives(plans);
}

// One part: every row is inner, in global id order, and nothing is exchanged.
TEST(HaloPlan, OnePartHasNoHalo) {
  const Csr g = graph(4, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
  const std::vector<HaloPlan> plans = build_halo_plans(g.view(), std::vector<PartId>(4, 0), 1);
  ASSERT_EQ(plans.size(), 1u);
  expect_plan(plans[0], 4, {0, 1, 2, 3}, {0, 0}, {0, 0}, {});
  const HaloPlanView v = plans[0].view();
  EXPECT_EQ(v.k, 1);
  EXPECT_EQ(v.owned, 4);
  EXPECT_EQ(v.halo, 0);
  EXPECT_EQ(v.send_rows(), 0);
}

// 0 - 1 - 2 with part 1 empty: its plan has no rows, and the others exchange as usual.
TEST(HaloPlan, EmptyPartHasAnEmptyPlan) {
  const Csr g = graph(3, {{0, 1}, {1, 2}});
  const std::vector<HaloPlan> plans = build_halo_plans(g.view(), std::vector<PartId>{0, 0, 2}, 3);
  expect_plan(plans[0], 1, {0, 1, 2}, {0, 0, 0, 1}, {0, 0, 0, 1}, {1});
  expect_plan(plans[1], 0, {}, {0, 0, 0, 0}, {0, 0, 0, 0}, {});
  expect_plan(plans[2], 0, {2, 1}, {0, 1, 1, 1}, {0, 1, 1, 1}, {0});
  expect_sends_match_receives(plans);
}

// 0 -> 1 -> 2 -> 3 -> 4 -> 5 (directed), owner A A B B A A. Rows reference their out-neighbours
// only: part 0's boundary is 1 (-> 2), and part 1 references 4, an inner row of part 0 (it has
// no out-edge leaving part 0), which part 0 must still send.
TEST(HaloPlan, DirectedGraphSendsReferencedInnerRows) {
  const Csr g = graph(6, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}, /*symmetrize=*/false);
  const std::vector<HaloPlan> plans =
      build_halo_plans(g.view(), std::vector<PartId>{0, 0, 1, 1, 0, 0}, 2);
  expect_plan(plans[0], 3, {0, 4, 5, 1, 2}, {0, 0, 1}, {0, 0, 1}, {1});
  expect_plan(plans[1], 1, {2, 3, 4}, {0, 1, 1}, {0, 1, 1}, {0});
  expect_sends_match_receives(plans);
}

// A random graph cut at random: the rows are exactly the owned nodes (inner first, each run
// sorted) and then the referenced nodes of other parts, grouped by peer and sorted.
TEST(HaloPlan, InvariantsOnARandomGraph) {
  const std::int64_t n = 300;
  const int k = 5;
  std::mt19937 rng(7);
  std::vector<std::pair<NodeId, NodeId>> edges;
  edges.reserve(900);
  for (int i = 0; i < 900; ++i) edges.emplace_back(NodeId(rng() % n), NodeId(rng() % n));
  const Csr g = graph(n, edges);
  std::vector<PartId> owner(static_cast<std::size_t>(n));
  for (auto& o : owner) o = PartId(rng() % k);
  const std::vector<HaloPlan> plans = build_halo_plans(g.view(), owner, k);
  const CsrView v = g.view();
  for (int r = 0; r < k; ++r) {
    const HaloPlan& p = plans[std::size_t(r)];
    Ids inner, boundary;
    std::vector<std::set<NodeId>> halo(static_cast<std::size_t>(k));
    for (NodeId u = 0; u < n; ++u) {
      if (owner[std::size_t(u)] != r) continue;
      bool is_boundary = false;
      for (const NodeId* w = v.begin(u); w != v.end(u); ++w)
        if (owner[std::size_t(*w)] != r) {
          is_boundary = true;
          halo[std::size_t(owner[std::size_t(*w)])].insert(*w);
        }
      (is_boundary ? boundary : inner).push_back(u);
    }
    Ids rows = inner;
    rows.insert(rows.end(), boundary.begin(), boundary.end());
    Offsets recv = {0};
    for (const auto& h : halo) {
      rows.insert(rows.end(), h.begin(), h.end());
      recv.push_back(recv.back() + EdgeId(h.size()));
    }
    EXPECT_EQ(p.global_ids, rows) << "rank " << r;
    EXPECT_EQ(p.num_inner, std::int64_t(inner.size()));
    EXPECT_EQ(p.num_owned, std::int64_t(inner.size() + boundary.size()));
    EXPECT_EQ(p.recv_offsets, recv);
  }
  expect_sends_match_receives(plans);
}

// write_parts writes exactly the builder's plans: part-r's rows and send/recv arrays, and the
// view a mapped Part gives the exchanger.
TEST(HaloPlan, WritePartsWritesTheBuildersPlans) {
  TempDir t;
  convert(test::bundled("cora"), t / "cora", {});
  const GraphDataset d = read_graph_dataset(t / "cora");
  PartitionOptions o;
  o.k = 4;
  o.method = PartitionMethod::kRandom;
  const std::vector<PartId> owner = partition_nodes(d, o);
  const Quality q = measure_partition(d.graph.view(), d.directed, owner, o.k,
                                      choose_split(d, o.split), o.targets());
  write_parts(d, owner, o, q, t / "parts", false, nlohmann::json::object());
  const std::vector<HaloPlan> plans = build_halo_plans(d.graph.view(), owner, o.k);
  for (int r = 0; r < o.k; ++r) {
    const HaloPlan& want = plans[std::size_t(r)];
    const Part p = read_part(t / "parts", r);
    EXPECT_EQ(p.num_owned, want.num_owned);
    EXPECT_EQ(p.num_inner, want.num_inner);
    EXPECT_EQ(p.num_halo, want.num_halo());
    EXPECT_EQ(Ids(p.global_ids.begin(), p.global_ids.end()), want.global_ids);
    EXPECT_EQ(Offsets(p.send_offsets.begin(), p.send_offsets.end()), want.send_offsets);
    EXPECT_EQ(Ids(p.send.begin(), p.send.end()), want.send);
    EXPECT_EQ(Offsets(p.recv_offsets.begin(), p.recv_offsets.end()), want.recv_offsets);
    const HaloPlanView v = p.halo_plan();
    EXPECT_EQ(v.k, o.k);
    EXPECT_EQ(v.owned, want.num_owned);
    EXPECT_EQ(v.halo, want.num_halo());
    EXPECT_EQ(v.send_offsets, p.send_offsets.data());
    EXPECT_EQ(v.send, p.send.data());
    EXPECT_EQ(v.recv_offsets, p.recv_offsets.data());
  }
}

// What a ptscotch rank gathers for part r (PartRows), taken here straight from the dataset: the
// part's rows in id order and the degrees of its halo.
PartRows gather_rows(const GraphDataset& d, const std::vector<PartId>& owner,
                     const HaloPlan& plan) {
  const CsrView g = d.graph.view();
  const auto f = std::size_t(d.num_features), c = std::size_t(d.label_cols);
  PartRows r;
  r.offsets.push_back(0);
  for (NodeId v = 0; v < NodeId(g.num_nodes); ++v) {
    if (owner[std::size_t(v)] != plan.rank) continue;
    r.ids.push_back(v);
    r.indices.insert(r.indices.end(), g.begin(v), g.end(v));
    if (g.values)
      r.values.insert(r.values.end(), g.values + g.offsets[v], g.values + g.offsets[v + 1]);
    r.offsets.push_back(EdgeId(r.indices.size()));
    r.features.insert(r.features.end(), d.features.data() + std::size_t(v) * f,
                      d.features.data() + std::size_t(v + 1) * f);
    r.labels.insert(r.labels.end(), d.labels.data() + std::size_t(v) * c,
                    d.labels.data() + std::size_t(v + 1) * c);
    for (const Split& s : d.splits) {
      auto in = [v](const Array<NodeId>& ids) {
        return std::find(ids.begin(), ids.end(), v) != ids.end();
      };
      r.splits.push_back(
          std::uint8_t((in(s.train) ? 1 : 0) | (in(s.valid) ? 2 : 0) | (in(s.test) ? 4 : 0)));
    }
  }
  r.halo_ids.assign(plan.global_ids.begin() + plan.num_owned, plan.global_ids.end());
  std::sort(r.halo_ids.begin(), r.halo_ids.end());
  for (NodeId v : r.halo_ids) r.halo_degree.push_back(std::int32_t(g.degree(v)));
  return r;
}

// write_part from gathered rows (ptscotch's writer) writes the files write_part from the dataset
// does, byte for byte: on Cora (features, labels, splits) made weighted, four random parts.
TEST(HaloPlan, PartFromGatheredRowsIsThePartFromTheDataset) {
  TempDir t;
  convert(test::bundled("cora"), t / "cora", {});
  GraphDataset d = read_graph_dataset(t / "cora");
  const CsrView g0 = d.graph.view();
  std::vector<float> w(std::size_t(g0.num_edges()));
  for (NodeId u = 0; u < NodeId(g0.num_nodes); ++u)
    for (EdgeId e = g0.offsets[u]; e < g0.offsets[u + 1]; ++e)
      w[std::size_t(e)] =
          float(1 + (std::min(u, g0.indices[e]) * 7 + std::max(u, g0.indices[e])) % 5);
  d.graph.values = Array<float>(std::move(w));
  PartitionOptions o;
  o.k = 4;
  o.method = PartitionMethod::kRandom;
  const std::vector<PartId> owner = partition_nodes(d, o);
  const PartitionHalos halos = find_partition_halos(d.graph.view(), owner, o.k);
  std::vector<NodeId> local_of(std::size_t(d.num_nodes()), -1);
  for (int r = 0; r < o.k; ++r) {
    const HaloPlan plan = build_halo_plan(halos, r, local_of);
    const std::string a = write_part(t / "a", d, owner, plan, local_of, "partition");
    PartRows rows = gather_rows(d, owner, plan);
    EXPECT_EQ(write_part(t / "b", d, rows, plan, local_of, "partition"), a) << "part " << r;
    const std::string dir = "part-" + std::to_string(r);
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(t / "a" / dir)) {
      ++files;
      EXPECT_EQ(test::read_bytes(e.path()), test::read_bytes(t / "b" / dir / e.path().filename()))
          << dir << "/" << e.path().filename().string();
    }
    EXPECT_GE(files, 12u);  // plan, CSR, weights, degrees, features, labels, splits, meta
    // Rows that do not match the plan are refused, not written.
    rows.halo_ids.pop_back();
    rows.halo_degree.pop_back();
    EXPECT_THROW(write_part(t / "c", d, rows, plan, local_of, "partition"), SystemError);
  }
}

// write_parts groups the splits by part once (K parts read each split once, not K times): its
// parts are write_part's, which scans the splits for each part, byte for byte (the fingerprints
// hash every file). Cora, 37 random parts, so that splits cross every part.
TEST(HaloPlan, PartsWrittenTogetherAreThePartsWrittenOneByOne) {
  TempDir t;
  convert(test::bundled("cora"), t / "cora", {});
  const GraphDataset d = read_graph_dataset(t / "cora");
  PartitionOptions o;
  o.k = 37;
  o.method = PartitionMethod::kRandom;
  const std::vector<PartId> owner = partition_nodes(d, o);
  const Quality q =
      measure_partition(d.graph.view(), d.directed, owner, o.k, &d.splits.front(), o.targets());
  const nlohmann::json meta =
      write_parts(d, owner, o, q, t / "all", false, nlohmann::json::object());
  const PartitionHalos halos = find_partition_halos(d.graph.view(), owner, o.k);
  std::vector<NodeId> local_of(std::size_t(d.num_nodes()), -1);
  ASSERT_FALSE(d.splits.empty());
  for (int r = 0; r < o.k; ++r) {
    const HaloPlan plan = build_halo_plan(halos, r, local_of);
    std::ifstream f(t / "all" / ("part-" + std::to_string(r)) / "meta.json");
    const std::string partition_fp = nlohmann::json::parse(f)["partition"].get<std::string>();
    EXPECT_EQ(write_part(t / "one", d, owner, plan, local_of, partition_fp),
              meta["part_fingerprints"][std::size_t(r)].get<std::string>())
        << "part " << r;
  }
}

}  // namespace
}  // namespace halo

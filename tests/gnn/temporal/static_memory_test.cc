// DistTGL's static node memory (gnn/temporal/static_memory.h): the rows it writes and the
// gradients it gathers, and, inside TGN, that it is learned at the nodes a batch reads (and only
// there) and that it changes the model's scores.
#include "halo/gnn/temporal/static_memory.h"

#include <gtest/gtest.h>

#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/gnn/temporal/tgn.h"

namespace halo {
namespace {

// fill() writes node[i]'s row into row i at the column given; add_gradient() sums a repeated
// node's rows into its one gradient row and leaves the other rows alone.
TEST(StaticMemory, FillsAndGathersTheRowsOfTheGivenNodes) {
  StaticMemory s(4, 3);
  ASSERT_EQ(s.param().value.rows(), 4);
  for (std::int64_t i = 0; i < 12; ++i) s.param().value.data()[i] = float(i);
  const std::vector<NodeId> node = {2, 0, 2};
  Matrix out(3, 5, -1.f);
  s.fill(node.data(), 3, out, 1);
  for (std::int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.at(i, 0), -1.f);  // columns outside [1, 4) untouched
    EXPECT_EQ(out.at(i, 4), -1.f);
    for (std::int64_t c = 0; c < 3; ++c)
      EXPECT_EQ(out.at(i, 1 + c), float(node[std::size_t(i)] * 3 + c));
  }
  Matrix g(3, 5);
  for (std::int64_t i = 0; i < 15; ++i) g.data()[i] = float(i + 1);
  s.add_gradient(node.data(), 3, g, 1);
  const Matrix& sg = s.param().grad;
  for (std::int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(sg.at(2, c), g.at(0, 1 + c) + g.at(2, 1 + c));
    EXPECT_EQ(sg.at(0, c), g.at(1, 1 + c));
    EXPECT_EQ(sg.at(1, c), 0.f);
    EXPECT_EQ(sg.at(3, c), 0.f);
  }
  StaticMemory off(4, 0);  // off: nothing allocated, nothing written
  EXPECT_EQ(off.param().value.size(), 0);
  off.fill(node.data(), 3, out, 1);
  EXPECT_EQ(out.at(0, 1), float(2 * 3));
}

// A stream over nodes 0..29 of a 40-node graph: nodes 30..39 never take part.
struct SmallStream {
  std::vector<NodeId> src, dst;
  std::vector<double> time;
  EventStream s;
  SmallStream() {
    for (std::int64_t e = 0; e < 200; ++e) {
      src.push_back(NodeId((e * 7) % 30));
      dst.push_back(NodeId((e * 11 + 3) % 30));
      time.push_back(double(e));
    }
    s.nodes = 40;
    s.events = 200;
    s.src = src.data();
    s.dst = dst.data();
    s.time = time.data();
  }
};

// Trained with Adam, the rows of S of the nodes the batches read move away from zero, the rows
// of nodes no batch reads stay exactly zero (they get no gradient), and the learned S changes
// the next batch's scores: zeroing it gives other scores, restoring it the same ones.
TEST(StaticMemory, IsLearnedWhereBatchesReadItAndChangesTheScores) {
  const SmallStream st;
  TgnConfig c;
  c.memory_dim = c.embed_dim = c.time_dim = 8;
  c.static_dim = 4;
  Tgn model(st.s, c);
  const TemporalCsr g = build_temporal_csr(st.s.nodes, st.s.src, st.s.dst, st.s.time, 200);
  RecentSampler sampler(g, 4);
  Backend& be = cpu_backend();
  std::vector<Param*> params = model.params();
  ASSERT_EQ(params.back()->name, "static_memory");
  const Matrix& S = params.back()->value;
  auto batch = [](std::int64_t b) {
    std::vector<std::int64_t> ids;
    for (std::int64_t e = b * 20; e < b * 20 + 20; ++e) ids.push_back(e);
    return ids;
  };
  auto negatives = [](const std::vector<std::int64_t>& ids) {
    std::vector<NodeId> neg;
    neg.reserve(ids.size());
    for (std::int64_t e : ids) neg.push_back(NodeId((e * 13 + 5) % 30));
    return neg;
  };
  std::vector<float> ps, ns;
  for (std::int64_t b = 0; b < 6; ++b) {
    const auto ids = batch(b);
    model.score(be, sampler, ids, {0, 20}, negatives(ids), true, &ps, &ns);
    for (Param* p : params) {
      AdamStep a;
      a.lr = 1e-2f;
      a.step = b + 1;
      be.adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size(), a);
    }
    model.commit(ids);
  }
  int moved = 0;
  for (NodeId v = 0; v < 30; ++v)
    for (std::int64_t c2 = 0; c2 < 4; ++c2) moved += S.at(v, c2) != 0.f;
  EXPECT_GT(moved, 30 * 4 / 2) << "S should be learned at the nodes the batches read";
  for (NodeId v = 30; v < 40; ++v)
    for (std::int64_t c2 = 0; c2 < 4; ++c2) EXPECT_EQ(S.at(v, c2), 0.f) << "node " << v;
  const auto ids = batch(6);
  auto scores = [&] {
    std::vector<float> p, n;
    model.score(be, sampler, ids, {0, 20}, negatives(ids), false, &p, &n);
    p.insert(p.end(), n.begin(), n.end());
    return p;
  };
  const std::vector<float> learned = scores();
  const Matrix saved = S;
  params.back()->value.fill(0.f);
  const std::vector<float> zeroed = scores();
  params.back()->value = saved;
  EXPECT_NE(learned, zeroed);
  EXPECT_EQ(learned, scores());
}

}  // namespace
}  // namespace halo

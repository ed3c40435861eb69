// Graph attention kernels against a naive double-precision GAT written out in the test: the
// structure (self-loops, transpose), forward values, and every backward against central finite
// differences of the reference.
#include "halo/gnn/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "halo/graph/error.h"

namespace halo {
namespace {

// A random graph of `rows` owned rows over `cols` columns (rows first), no self-loops stored,
// some rows empty, some with halo columns only.
Csr random_rows(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Csr g;
  g.num_nodes = rows;
  std::vector<EdgeId> off{0};
  std::vector<NodeId> idx;
  for (std::int64_t u = 0; u < rows; ++u) {
    std::set<NodeId> row;
    const int d = int(rng() % 6);
    for (int i = 0; i < d; ++i) {
      const auto v = NodeId(rng() % std::uint32_t(cols));
      if (v != u) row.insert(v);
    }
    idx.insert(idx.end(), row.begin(), row.end());
    off.push_back(EdgeId(idx.size()));
  }
  g.offsets = Array<EdgeId>(std::move(off));
  g.indices = Array<NodeId>(std::move(idx));
  return g;
}

struct Inputs {
  int H = 3, F = 4;
  std::vector<float> z, a_src, a_dst, w;  // w: the loss's weights on the output
};

// loss = sum(out * w) of a GAT head set computed naively in double; `rows`/`cols` as g.
double reference_loss(const AttentionGraph& g, const Inputs& in, float slope,
                      std::vector<double>* out = nullptr) {
  const int H = in.H, F = in.F;
  auto zz = [&](std::int64_t r, int h, int f) {
    return double(in.z[std::size_t((r * H + h) * F + f)]);
  };
  auto dot = [&](std::int64_t r, int h, const std::vector<float>& a) {
    double s = 0;
    for (int f = 0; f < F; ++f)
      s += zz(r, h, f) * a[std::size_t(h) * std::size_t(F) + std::size_t(f)];
    return s;
  };
  double loss = 0;
  if (out) out->assign(std::size_t(g.rows * H * F), 0.0);
  for (std::int64_t u = 0; u < g.rows; ++u)
    for (int h = 0; h < H; ++h) {
      std::vector<double> s;
      for (EdgeId i = g.offsets[std::size_t(u)]; i < g.offsets[std::size_t(u) + 1]; ++i) {
        const double x = dot(g.indices[std::size_t(i)], h, in.a_src) + dot(u, h, in.a_dst);
        s.push_back(x > 0 ? x : slope * x);
      }
      double top = -1e300, sum = 0;
      for (double x : s) top = std::max(top, x);
      for (double& x : s) sum += (x = std::exp(x - top));
      for (int f = 0; f < F; ++f) {
        double o = 0;
        for (std::size_t j = 0; j < s.size(); ++j)
          o += s[j] / sum * zz(g.indices[std::size_t(g.offsets[std::size_t(u)]) + j], h, f);
        loss += o * in.w[std::size_t((u * H + h) * F + f)];
        if (out) (*out)[std::size_t((u * H + h) * F + f)] = o;
      }
    }
  return loss;
}

// The kernels' forward (out) and the gradients of sum(out * w) wrt z, a_src and a_dst.
struct KernelRun {
  std::vector<float> out, dz, da_src, da_dst;
};
KernelRun run_kernels(const AttentionGraph& g, const Inputs& in, float slope) {
  const int H = in.H, F = in.F;
  const auto nnz = std::size_t(g.nnz());
  std::vector<float> el(std::size_t(g.cols * H)), er(std::size_t(g.rows * H)), alpha(nnz * H);
  head_dots(g.cols, H, F, in.z.data(), in.a_src.data(), el.data());
  head_dots(g.rows, H, F, in.z.data(), in.a_dst.data(), er.data());
  gat_edge_softmax(g.view(), H, el.data(), er.data(), slope, alpha.data());
  KernelRun k;
  k.out.resize(std::size_t(g.rows * H * F));
  gat_aggregate(g.view(), H, F, alpha.data(), in.z.data(), k.out.data());
  k.dz.assign(in.z.size(), 0.0f);
  k.da_src.assign(in.a_src.size(), 0.0f);
  k.da_dst.assign(in.a_dst.size(), 0.0f);
  std::vector<float> dalpha(nnz * H), del(el.size(), 0.0f), der(er.size(), 0.0f);
  gat_aggregate_backward(g.view(), H, F, alpha.data(), in.z.data(), in.w.data(), dalpha.data(),
                         k.dz.data());
  gat_edge_softmax_backward(g.view(), H, el.data(), er.data(), slope, alpha.data(), dalpha.data(),
                            del.data(), der.data());
  head_dots_backward(g.cols, H, F, in.z.data(), in.a_src.data(), del.data(), k.dz.data(),
                     k.da_src.data());
  head_dots_backward(g.rows, H, F, in.z.data(), in.a_dst.data(), der.data(), k.dz.data(),
                     k.da_dst.data());
  return k;
}

Inputs random_inputs(const AttentionGraph& g, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Inputs in;
  auto fill = [&](std::vector<float>& v, std::size_t size) {
    v.resize(size);
    for (float& x : v) x = n(rng);
  };
  fill(in.z, std::size_t(g.cols * in.H * in.F));
  fill(in.a_src, std::size_t(in.H) * std::size_t(in.F));
  fill(in.a_dst, std::size_t(in.H) * std::size_t(in.F));
  fill(in.w, std::size_t(g.rows * in.H * in.F));
  return in;
}

TEST(Attention, GraphAddsOneSelfLoopPerRowAndMirrorsEveryEdge) {
  const Csr g = random_rows(40, 55, 1);
  const AttentionGraph a = attention_graph(g.view(), 55);
  ASSERT_EQ(a.nnz(), g.num_edges() + 40);
  for (std::int64_t u = 0; u < 40; ++u) {
    int self = 0;
    for (EdgeId i = a.offsets[std::size_t(u)]; i < a.offsets[std::size_t(u) + 1]; ++i) {
      self += a.indices[std::size_t(i)] == u;
      if (i > a.offsets[std::size_t(u)]) {
        EXPECT_LT(a.indices[std::size_t(i) - 1], a.indices[std::size_t(i)]);
      }
    }
    EXPECT_EQ(self, 1) << "row " << u;
  }
  std::vector<int> seen(std::size_t(a.nnz()), 0);
  for (std::int64_t c = 0; c < 55; ++c)
    for (EdgeId t = a.t_offsets[std::size_t(c)]; t < a.t_offsets[std::size_t(c) + 1]; ++t) {
      const EdgeId e = a.t_edge[std::size_t(t)];
      EXPECT_EQ(a.indices[std::size_t(e)], NodeId(c));
      EXPECT_GE(e, a.offsets[std::size_t(a.t_rows[std::size_t(t)])]);
      EXPECT_LT(e, a.offsets[std::size_t(a.t_rows[std::size_t(t)]) + 1]);
      ++seen[std::size_t(e)];
    }
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_THROW(attention_graph(g.view(), 39), ParamError);
}

TEST(Attention, ForwardMatchesTheNaiveGat) {
  const Csr g = random_rows(60, 80, 2);
  const AttentionGraph a = attention_graph(g.view(), 80);
  const Inputs in = random_inputs(a, 3);
  std::vector<double> want;
  reference_loss(a, in, 0.2f, &want);
  const KernelRun k = run_kernels(a, in, 0.2f);
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(k.out[i], want[i], 1e-5) << i;
}

// Large logits: the max-subtracted softmax stays finite where a plain one overflows.
TEST(Attention, SoftmaxIsSafeForLargeScores) {
  const Csr g = random_rows(20, 20, 4);
  const AttentionGraph a = attention_graph(g.view(), 20);
  Inputs in = random_inputs(a, 5);
  for (float& x : in.a_src) x *= 100.0f;  // scores of order 1e2-1e3: exp overflows float
  const KernelRun k = run_kernels(a, in, 0.2f);
  for (float x : k.out) ASSERT_TRUE(std::isfinite(x));
  std::vector<double> want;
  reference_loss(a, in, 0.2f, &want);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(k.out[i], want[i], 1e-3 * (1 + std::abs(want[i])));
}

// Every gradient against central differences of the double reference.
TEST(Attention, BackwardMatchesFiniteDifferences) {
  const Csr g = random_rows(25, 35, 6);
  const AttentionGraph a = attention_graph(g.view(), 35);
  const Inputs in = random_inputs(a, 7);
  const float slope = 0.2f;
  const KernelRun k = run_kernels(a, in, slope);
  auto check = [&](std::vector<float> Inputs::*field, const std::vector<float>& grad,
                   const char* name) {
    for (std::size_t i = 0; i < grad.size(); ++i) {
      Inputs p = in, m = in;
      const double eps = 1e-3;
      (p.*field)[i] += float(eps);
      (m.*field)[i] -= float(eps);
      const double fd = (reference_loss(a, p, slope) - reference_loss(a, m, slope)) /
                        (double((p.*field)[i]) - double((m.*field)[i]));
      ASSERT_NEAR(grad[i], fd, 2e-3 * (1 + std::abs(fd))) << name << "[" << i << "]";
    }
  };
  check(&Inputs::z, k.dz, "z");
  check(&Inputs::a_src, k.da_src, "a_src");
  check(&Inputs::a_dst, k.da_dst, "a_dst");
}

// Gathers only: the same bits with one thread as with several.
TEST(Attention, SameBitsForAnyThreadCount) {
  const Csr g = random_rows(3000, 3500, 8);
  const AttentionGraph a = attention_graph(g.view(), 3500);
  const Inputs in = random_inputs(a, 9);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const KernelRun one = run_kernels(a, in, 0.2f);
  omp_set_num_threads(4);
  const KernelRun four = run_kernels(a, in, 0.2f);
  omp_set_num_threads(threads);
  EXPECT_EQ(one.out, four.out);
  EXPECT_EQ(one.dz, four.dz);
  EXPECT_EQ(one.da_src, four.da_src);
  EXPECT_EQ(one.da_dst, four.da_dst);
}

// The aggregation's backward may write d(alpha) over alpha (the model's dropped-out alpha' takes
// its own gradient): the same d(z) and d(alpha) as with two arrays.
TEST(Attention, AggregateBackwardMayOverwriteAlpha) {
  const Csr g = random_rows(40, 50, 10);
  const AttentionGraph a = attention_graph(g.view(), 50);
  const Inputs in = random_inputs(a, 11);
  const int H = in.H, F = in.F;
  std::vector<float> el(std::size_t(a.cols * H)), er(std::size_t(a.rows * H));
  std::vector<float> alpha(std::size_t(a.nnz() * H));
  head_dots(a.cols, H, F, in.z.data(), in.a_src.data(), el.data());
  head_dots(a.rows, H, F, in.z.data(), in.a_dst.data(), er.data());
  gat_edge_softmax(a.view(), H, el.data(), er.data(), 0.2f, alpha.data());
  std::vector<float> dalpha(alpha.size()), dz(in.z.size(), 0.f), dz2(in.z.size(), 0.f);
  gat_aggregate_backward(a.view(), H, F, alpha.data(), in.z.data(), in.w.data(), dalpha.data(),
                         dz.data());
  std::vector<float> shared = alpha;
  gat_aggregate_backward(a.view(), H, F, shared.data(), in.z.data(), in.w.data(), shared.data(),
                         dz2.data());
  EXPECT_EQ(shared, dalpha);
  EXPECT_EQ(dz2, dz);
}

// Attention dropout is keyed by the ids of an edge's two ends: renumbering the nodes (as a part
// does) and passing the original ids as `ids` keeps every edge's mask; about p of the entries
// are dropped and the rest scaled by 1 / (1 - p).
TEST(Attention, EdgeDropoutFollowsGlobalIds) {
  const int n = 300, H = 3;
  const float p = 0.4f;
  const Csr g = random_rows(n, n, 12);
  const AttentionGraph a = attention_graph(g.view(), n);
  // The same graph with local id = n - 1 - global id.
  Csr gr;
  gr.num_nodes = n;
  std::vector<EdgeId> off{0};
  std::vector<NodeId> idx;
  for (NodeId ur = 0; ur < n; ++ur) {
    const NodeId u = n - 1 - ur;
    std::set<NodeId> row;
    for (const NodeId* v = g.view().begin(u); v != g.view().end(u); ++v) row.insert(n - 1 - *v);
    idx.insert(idx.end(), row.begin(), row.end());
    off.push_back(EdgeId(idx.size()));
  }
  gr.offsets = Array<EdgeId>(std::move(off));
  gr.indices = Array<NodeId>(std::move(idx));
  const AttentionGraph ar = attention_graph(gr.view(), n);
  ASSERT_EQ(ar.nnz(), a.nnz());
  std::vector<NodeId> ids(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ids[std::size_t(i)] = NodeId(n - 1 - i);
  const PhiloxKey key = philox_key(7, kStreamDropout + 3);
  std::vector<float> x(std::size_t(a.nnz() * H), 1.f), xr = x;
  gat_edge_dropout(a.view(), H, p, key, nullptr, x.data());
  gat_edge_dropout(ar.view(), H, p, key, ids.data(), xr.data());
  std::int64_t dropped = 0;
  for (NodeId u = 0; u < n; ++u)
    for (EdgeId e = a.offsets[std::size_t(u)]; e < a.offsets[std::size_t(u) + 1]; ++e) {
      const NodeId v = a.indices[std::size_t(e)];
      const NodeId ur = n - 1 - u, vr = n - 1 - v;  // the same edge in the renumbered graph
      const NodeId* b = ar.indices.data() + ar.offsets[std::size_t(ur)];
      const NodeId* end = ar.indices.data() + ar.offsets[std::size_t(ur) + 1];
      const auto er = std::size_t(std::lower_bound(b, end, vr) - ar.indices.data());
      for (int h = 0; h < H; ++h) {
        const float got = x[std::size_t(e) * H + std::size_t(h)];
        ASSERT_EQ(got, xr[er * H + std::size_t(h)]) << u << " <- " << v << " head " << h;
        ASSERT_TRUE(got == 0.f || got == 1.f / (1.f - p));
        dropped += got == 0.f;
      }
    }
  EXPECT_NEAR(double(dropped) / double(x.size()), p, 0.03);
}

}  // namespace
}  // namespace halo

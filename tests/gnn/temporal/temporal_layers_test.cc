// TGN's layers against PyTorch (golden values from tests/data/golden/make_tgn_golden.py, float64
// there) and against finite differences.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <vector>

#include "../../test_util.h"
#include "halo/gnn/temporal/layers.h"

namespace halo {
namespace {

using nlohmann::json;

void fill(Matrix& m, const json& j) {
  const bool mat = j[0].is_array();
  m.resize(mat ? std::int64_t(j.size()) : 1,
           mat ? std::int64_t(j[0].size()) : std::int64_t(j.size()));
  for (std::int64_t r = 0; r < m.rows(); ++r)
    for (std::int64_t c = 0; c < m.cols(); ++c)
      m.at(r, c) =
          mat ? j[std::size_t(r)][std::size_t(c)].get<float>() : j[std::size_t(c)].get<float>();
}

void expect_near(const Matrix& got, const json& want, double tol, const char* what) {
  Matrix w;
  fill(w, want);
  ASSERT_EQ(got.size(), w.size()) << what;
  for (std::int64_t i = 0; i < w.size(); ++i)
    EXPECT_NEAR(got.data()[i], w.data()[i], tol * (1 + std::abs(w.data()[i])))
        << what << "[" << i << "]";
}

json golden() {
  std::ifstream f(test::test_data("golden/tgn_golden.json"));
  return json::parse(f);
}

TEST(GruCell, MatchesPyTorch) {
  const json g = golden()["gru"];
  Matrix x, h, G;
  fill(x, g["x"]);
  fill(h, g["h"]);
  fill(G, g["G"]);
  GruCell cell(x.cols(), h.cols(), 1, 0);
  auto p = cell.params();
  fill(p[0]->value, g["W"]);
  fill(p[1]->value, g["U"]);
  fill(p[2]->value, g["bw"]);
  fill(p[3]->value, g["bu"]);
  Matrix out, dx, dh;
  cell.forward(cpu_backend(), x.view(), h.view(), out);
  expect_near(out, g["out"], 1e-5, "h'");
  cell.zero_grad();
  cell.backward(cpu_backend(), G.view(), dx, dh);
  expect_near(dx, g["dx"], 1e-5, "dx");
  expect_near(dh, g["dh"], 1e-5, "dh");
  expect_near(p[0]->grad, g["dW"], 1e-5, "dW");
  expect_near(p[1]->grad, g["dU"], 1e-5, "dU");
  expect_near(p[2]->grad, g["dbw"], 1e-5, "dbw");
  expect_near(p[3]->grad, g["dbu"], 1e-5, "dbu");
}

TEST(GruCell, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  GruCell cell(6, 5, 9, 0);
  Matrix x(4, 6), h(4, 5), G(4, 5), out, dx, dh;
  for (auto* m : {&x, &h, &G})
    for (auto& v : m->storage()) v = nd(rng);
  auto loss = [&] {
    cell.forward(cpu_backend(), x.view(), h.view(), out);
    double s = 0;
    for (std::int64_t i = 0; i < out.size(); ++i) s += double(out.data()[i]) * G.data()[i];
    return s;
  };
  loss();
  cell.zero_grad();
  cell.backward(cpu_backend(), G.view(), dx, dh);
  auto check = [&](float* value, float analytic, const std::string& what) {
    const double numeric = test::central_difference(*value, 1e-2f, loss);
    EXPECT_NEAR(analytic, numeric, 1e-3 + 1e-2 * std::abs(numeric)) << what;
  };
  for (Param* p : cell.params()) {
    const Matrix grad = p->grad;
    for (std::int64_t i = 0; i < p->value.size(); i += 3)
      check(p->value.data() + i, grad.data()[i], p->name);
  }
  const Matrix gx = dx, gh = dh;
  for (std::int64_t i = 0; i < x.size(); ++i) check(x.data() + i, gx.data()[i], "x");
  for (std::int64_t i = 0; i < h.size(); ++i) check(h.data() + i, gh.data()[i], "h");
}

TEST(TimeEncoder, MatchesPyTorchAndStartsAtTgnFrequencies) {
  TimeEncoder fresh(6);
  for (int k = 0; k < 6; ++k)
    EXPECT_FLOAT_EQ(fresh.params()[0]->value.at(0, k), float(std::pow(10.0, -9.0 * k / 5.0)));
  const json g = golden()["time"];
  TimeEncoder enc(6);
  fill(enc.params()[0]->value, g["w"]);
  fill(enc.params()[1]->value, g["b"]);
  const std::vector<double> dt = g["dt"].get<std::vector<double>>();
  Matrix out, G;
  enc.forward(dt.data(), std::int64_t(dt.size()), out);
  expect_near(out, g["out"], 1e-5, "phi");
  fill(G, g["G"]);
  enc.backward(G);
  // dw scales with dt (up to 1e4): compare relative to the gradients' size.
  expect_near(enc.params()[0]->grad, g["dw"], 1e-4, "dw");
  expect_near(enc.params()[1]->grad, g["db"], 1e-5, "db");
}

// The fast cos/sin behind the encoder, against libm over the magnitudes time gaps reach (seconds
// times frequencies up to 1: 0 to 10^9 and beyond), including quadrant edges and negatives.
TEST(TimeEncoder, FastCosSinMatchesLibm) {
  std::mt19937_64 g{5};
  std::vector<double> xs = {0.0,      -0.0,      1e-12, M_PI / 4, M_PI / 2,      M_PI, 3 * M_PI / 2,
                            2 * M_PI, -M_PI / 2, 1e9,   -1e9,     123456789.123, 1e12};
  for (int e = -6; e <= 10; ++e)
    for (int i = 0; i < 200; ++i)
      xs.push_back(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(g),
                              int(std::log2(std::pow(10.0, e)))));
  double worst = 0;
  for (double x : xs) {
    float c, s;
    cos_sin(x, c, s);
    worst = std::max({worst, std::abs(double(c) - std::cos(x)), std::abs(double(s) - std::sin(x))});
  }
  EXPECT_LT(worst, 2e-7);  // float rounding of the result dominates (6e-8) plus the reduction
}

TEST(TimeEncoder, GradientsMatchFiniteDifferences) {
  TimeEncoder enc(5);
  const std::vector<double> dt = {0.0, 0.5, 3.0, 10.0, 40.0};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  Matrix G(5, 5), out;
  for (auto& v : G.storage()) v = nd(rng);
  for (Param* p : enc.params())
    for (auto& v : p->value.storage()) v += 0.1f * nd(rng);  // off the initial values
  auto loss = [&] {
    enc.forward(dt.data(), 5, out);
    double s = 0;
    for (std::int64_t i = 0; i < out.size(); ++i) s += double(out.data()[i]) * G.data()[i];
    return s;
  };
  loss();
  enc.backward(G);
  for (Param* p : enc.params()) {
    const Matrix grad = p->grad;
    for (std::int64_t i = 0; i < p->value.size(); ++i) {
      // w moves the argument by dt * h: keep h small.
      const double numeric = test::central_difference(p->value.data()[i], 1e-4f, loss);
      EXPECT_NEAR(grad.data()[i], numeric, 1e-2 + 1e-2 * std::abs(numeric))
          << p->name << "[" << i << "]";
    }
  }
}

TEST(TemporalAttention, MatchesPyTorchMultiheadAttentionAndTgnMerger) {
  const json g = golden()["attention"];
  Matrix q, kv, h, G;
  fill(q, g["q"]);
  fill(kv, g["kv"]);
  fill(h, g["h"]);
  fill(G, g["G"]);
  const int k = g["k"];
  TemporalAttention att(h.cols(), q.cols(), kv.cols(), G.cols(), 2, 1, 0);
  const auto p = att.params();  // wq bq wk bk wv bv wo bo w1 b1 w2 b2
  const char* names[] = {"wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1", "w2", "b2"};
  for (std::size_t i = 0; i < p.size(); ++i) fill(p[i]->value, g[names[i]]);
  const std::vector<std::uint8_t> valid = g["valid"].get<std::vector<std::uint8_t>>();
  Matrix z, dq, dkv, dh;
  att.forward(cpu_backend(), q.view(), kv.view(), valid.data(), k, h.view(), z);
  expect_near(z, g["z"], 1e-5, "z");
  att.zero_grad();
  att.backward(cpu_backend(), G.view(), dq, dkv, dh);
  expect_near(dq, g["dq"], 1e-5, "dq");
  expect_near(dkv, g["dkv"], 1e-5, "dkv");
  expect_near(dh, g["dh"], 1e-5, "dh");
  expect_near(p[0]->grad, g["dwq"], 1e-5, "dwq");
  expect_near(p[6]->grad, g["dwo"], 1e-5, "dwo");
  expect_near(p[8]->grad, g["dw1"], 1e-5, "dw1");
}

// The factored key/value input (distinct neighbours once, per-slot columns apart, padded slots
// skipped) is the same attention as the whole (B * k) x dk input: outputs and every gradient.
TEST(TemporalAttention, FactoredKeyValuesEqualTheWholeInput) {
  const std::int64_t B = 4, dh = 3, dq = 6, dn = 3, ds = 2, dout = 5, U = 3;
  const int k = 3;
  TemporalAttention whole(dh, dq, dn + ds, dout, 2, 11, 0),
      factored(dh, dq, dn + ds, dout, 2, 11, 0);
  std::mt19937 rng(12);
  std::normal_distribution<float> nd;
  Matrix q(B, dq), nodes(U, dn), slots(B * k, ds), h(B, dh), G(B, dout);
  for (auto* m : {&q, &nodes, &slots, &h, &G})
    for (auto& v : m->storage()) v = nd(rng);
  for (Param* p : whole.params())
    if (p->name.find(".b") != std::string::npos)
      for (auto& v : p->value.storage()) v = 0.1f * nd(rng);
  const auto pw = whole.params(), pf = factored.params();
  for (std::size_t i = 0; i < pw.size(); ++i) pf[i]->value = pw[i]->value;
  // Node 1 repeats across queries; query 3 has no neighbour.
  const std::vector<std::int32_t> node = {0, 1, -1, 1, 2, 1, 2, -1, -1, -1, -1, -1};
  Matrix kv(B * k, dn + ds);
  std::vector<std::uint8_t> valid(static_cast<std::size_t>(B * k));
  for (std::int64_t r = 0; r < B * k; ++r) {
    valid[std::size_t(r)] = node[std::size_t(r)] >= 0;
    if (node[std::size_t(r)] < 0) continue;
    for (std::int64_t c = 0; c < dn; ++c) kv.at(r, c) = nodes.at(node[std::size_t(r)], c);
    for (std::int64_t c = 0; c < ds; ++c) kv.at(r, dn + c) = slots.at(r, c);
  }
  Matrix zw, zf, dqw, dqf, dkv, dnodes, dslots, dhw, dhf;
  whole.forward(cpu_backend(), q.view(), kv.view(), valid.data(), k, h.view(), zw);
  KeyValueInput in;
  in.nodes = nodes.view();
  in.node = node.data();
  in.slots = slots.view();
  factored.forward(cpu_backend(), q.view(), in, k, h.view(), zf);
  for (std::int64_t i = 0; i < zw.size(); ++i) ASSERT_NEAR(zf.data()[i], zw.data()[i], 1e-5);
  whole.zero_grad();
  factored.zero_grad();
  whole.backward(cpu_backend(), G.view(), dqw, dkv, dhw);
  factored.backward(cpu_backend(), G.view(), dqf, dnodes, dslots, dhf);
  for (std::int64_t i = 0; i < dqw.size(); ++i) EXPECT_NEAR(dqf.data()[i], dqw.data()[i], 1e-5);
  for (std::int64_t i = 0; i < dhw.size(); ++i) EXPECT_NEAR(dhf.data()[i], dhw.data()[i], 1e-5);
  for (std::int64_t u = 0; u < U; ++u)
    for (std::int64_t c = 0; c < dn; ++c) {
      double sum = 0;  // a node's gradient is the sum over the slots it fills
      for (std::int64_t r = 0; r < B * k; ++r)
        if (node[std::size_t(r)] == u) sum += dkv.at(r, c);
      EXPECT_NEAR(dnodes.at(u, c), sum, 1e-5) << u << "," << c;
    }
  for (std::int64_t r = 0; r < B * k; ++r)
    for (std::int64_t c = 0; c < ds; ++c)
      EXPECT_NEAR(dslots.at(r, c), valid[std::size_t(r)] ? dkv.at(r, dn + c) : 0.f, 1e-5);
  for (std::size_t i = 0; i < pw.size(); ++i)
    for (std::int64_t j = 0; j < pw[i]->grad.size(); ++j)
      EXPECT_NEAR(pf[i]->grad.data()[j], pw[i]->grad.data()[j], 1e-5)
          << pw[i]->name << "[" << j << "]";
}

// backward into a caller's view of the slot gradients (TGN's time-code gradient rows): the same
// bits as into a Matrix of its own, padded slots zeroed over whatever the view held, the rows
// around it untouched; a view of the wrong shape is refused.
TEST(TemporalAttention, SlotGradientsIntoAViewAreTheMatrixOnes) {
  const std::int64_t B = 4, dh = 3, dq = 6, dn = 3, ds = 2, dout = 5, U = 3;
  const int k = 3;
  TemporalAttention att(dh, dq, dn + ds, dout, 2, 13, 0);
  std::mt19937 rng(14);
  std::normal_distribution<float> nd;
  Matrix q(B, dq), nodes(U, dn), slots(B * k, ds), h(B, dh), G(B, dout);
  for (auto* m : {&q, &nodes, &slots, &h, &G})
    for (auto& v : m->storage()) v = nd(rng);
  const std::vector<std::int32_t> node = {0, 1, -1, 1, 2, 1, 2, -1, -1, -1, -1, -1};
  KeyValueInput in;
  in.nodes = nodes.view();
  in.node = node.data();
  in.slots = slots.view();
  Matrix z, dq1, dq2, dn1, dn2, dslots, dh1, dh2;
  att.forward(cpu_backend(), q.view(), in, k, h.view(), z);
  att.zero_grad();
  att.backward(cpu_backend(), G.view(), dq1, dn1, dslots, dh1);
  std::vector<std::vector<float>> grads;
  for (Param* p : att.params()) grads.push_back(p->grad.storage());
  Matrix block(B * k + 2, ds, 7.f);  // one row of 7s either side of the view
  att.zero_grad();
  att.backward(cpu_backend(), G.view(), dq2, dn2, MatrixView(block.view().rows_range(1, 1 + B * k)),
               dh2);
  for (std::int64_t r = 0; r < B * k; ++r)
    for (std::int64_t c = 0; c < ds; ++c)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(block.at(1 + r, c)),
                std::bit_cast<std::uint32_t>(dslots.at(r, c)))
          << r << "," << c;
  for (std::int64_t c = 0; c < ds; ++c) {
    EXPECT_EQ(block.at(0, c), 7.f);
    EXPECT_EQ(block.at(B * k + 1, c), 7.f);
    EXPECT_EQ(block.at(1 + 2, c), 0.f);  // slot 2: padded
  }
  EXPECT_EQ(dq1.storage(), dq2.storage());
  EXPECT_EQ(dn1.storage(), dn2.storage());
  EXPECT_EQ(dh1.storage(), dh2.storage());
  const auto params = att.params();
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i]->grad.storage(), grads[i]) << params[i]->name;
  EXPECT_THROW(att.backward(cpu_backend(), G.view(), dq2, dn2,
                            MatrixView(block.view().rows_range(0, B * k - 1)), dh2),
               std::logic_error);
}

TEST(TemporalAttention, GradientsMatchFiniteDifferences) {
  // 3 queries, k = 4 slots: query 0 has 4 neighbours, query 1 has 2, query 2 none.
  const std::int64_t B = 3, dh = 3, dq = 6, dk = 5, dout = 4;
  const int k = 4;
  TemporalAttention att(dh, dq, dk, dout, 2, 7, 0);
  std::mt19937 rng(8);
  std::normal_distribution<float> nd;
  Matrix q(B, dq), kv(B * k, dk), h(B, dh), G(B, dout), z, dq_, dkv, dh_;
  for (auto* m : {&q, &kv, &h, &G})
    for (auto& v : m->storage()) v = nd(rng);
  for (Param* p : att.params())
    if (p->name.find(".b") != std::string::npos)
      for (auto& v : p->value.storage()) v = 0.1f * nd(rng);  // off ReLU's kink
  const std::vector<std::uint8_t> valid = {1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0};
  auto loss = [&] {
    att.forward(cpu_backend(), q.view(), kv.view(), valid.data(), k, h.view(), z);
    double s = 0;
    for (std::int64_t i = 0; i < z.size(); ++i) s += double(z.data()[i]) * G.data()[i];
    return s;
  };
  loss();
  att.zero_grad();
  att.backward(cpu_backend(), G.view(), dq_, dkv, dh_);
  auto check = [&](float* value, float analytic, const std::string& what) {
    const double numeric = test::central_difference(*value, 1e-3f, loss);
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::abs(numeric)) << what;
  };
  for (Param* p : att.params()) {
    const Matrix grad = p->grad;
    for (std::int64_t i = 0; i < p->value.size(); i += 2)
      check(p->value.data() + i, grad.data()[i], p->name);
  }
  const Matrix gq = dq_, gkv = dkv, gh = dh_;
  for (std::int64_t i = 0; i < q.size(); ++i) check(q.data() + i, gq.data()[i], "q");
  for (std::int64_t i = 0; i < kv.size(); ++i) check(kv.data() + i, gkv.data()[i], "kv");
  for (std::int64_t i = 0; i < h.size(); ++i) check(h.data() + i, gh.data()[i], "h");
  // Masked slots and the query without neighbours get no gradient through attention.
  for (std::int64_t c = 0; c < dk; ++c) {
    EXPECT_EQ(gkv.at(5, c), 0.f);
    EXPECT_EQ(gkv.at(8, c), 0.f);
  }
  for (std::int64_t c = 0; c < dq; ++c) EXPECT_EQ(gq.at(2, c), 0.f);
}

}  // namespace
}  // namespace halo

// The CPU backend's temporal-GNN ops (backend.h, "Temporal GNNs") against plain reference loops
// written from their contracts, at sizes on both sides of the ops' parallel thresholds; row
// moves bitwise (they only copy and add in a stated order), arithmetic within a few ulps of the
// reference (the compiler may contract products into adds differently in the two loops). And
// the checks: a broken shape or aliasing rule throws std::logic_error naming the op.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/op_profile.h"
#include "halo/gnn/temporal/cos_sin.h"
#include "halo/gnn/temporal/layers.h"

namespace halo {
namespace {

Matrix random_matrix(std::int64_t r, std::int64_t c, std::uint32_t seed, float sd = 1.f) {
  Matrix m(r, c);
  std::mt19937 g{seed};
  std::normal_distribution<float> d(0.f, sd);
  for (auto& v : m.storage()) v = d(g);
  return m;
}

std::vector<float> random_vector(std::int64_t n, std::uint32_t seed, float sd = 1.f) {
  return random_matrix(1, n, seed, sd).storage();
}

// Row indices in [0, rows), repeating, with about one in five -1 (skipped) when skips is set.
std::vector<NodeId> random_index(std::int64_t n, std::int64_t rows, std::uint32_t seed,
                                 bool skips) {
  std::mt19937 g{seed};
  std::uniform_int_distribution<NodeId> any(0, NodeId(rows - 1));
  std::vector<NodeId> idx(static_cast<std::size_t>(n));
  for (auto& v : idx) v = skips && g() % 5 == 0 ? -1 : any(g);
  return idx;
}

void expect_close(const float* got, const float* ref, std::int64_t n, double tol,
                  const std::string& what) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!(std::abs(double(got[i]) - double(ref[i])) <= tol * (1 + std::abs(double(ref[i]))))) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << ref[i];
      return;
    }
}

void expect_close(const Matrix& got, const Matrix& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.rows(), ref.rows()) << what;
  ASSERT_EQ(got.cols(), ref.cols()) << what;
  expect_close(got.data(), ref.data(), got.size(), tol, what);
}

void expect_bitwise(const Matrix& got, const Matrix& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (std::int64_t i = 0; i < got.size(); ++i)
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): bitwise on purpose
    if (std::memcmp(got.data() + i, ref.data() + i, sizeof(float)) != 0) {
      ADD_FAILURE() << what << " at " << i << ": " << got.data()[i] << " vs " << ref.data()[i];
      return;
    }
}

// (rows, width) pairs: tiny, odd, and past the 4096- and 65536-element parallel thresholds.
const std::pair<std::int64_t, std::int64_t> kShapes[] = {
    {1, 1}, {7, 7}, {50, 33}, {300, 100}, {3000, 33}};

std::string shape_name(std::int64_t n, std::int64_t d) {
  return std::to_string(n) + "x" + std::to_string(d);
}

TEST(TemporalOps, TimeEncodeIsCosSinOfTheAffineGap) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    std::vector<double> dt(static_cast<std::size_t>(n));
    std::mt19937_64 g{std::uint64_t(n * d)};
    for (auto& v : dt) v = std::ldexp(std::uniform_real_distribution<double>(0, 1)(g), 20);
    const std::vector<float> w = random_vector(d, 1), b = random_vector(d, 2);
    Matrix out(n, d, NAN), sin(n, d, NAN), ref_out(n, d), ref_sin(n, d);
    be.time_encode(dt.data(), n, w.data(), b.data(), out.view(), sin.view());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < d; ++k) {
        const double x = double(w[std::size_t(k)]) * dt[std::size_t(i)] + double(b[std::size_t(k)]);
        cos_sin(x, ref_out.at(i, k), ref_sin.at(i, k));
        // cos_sin is libm's cos and sin to float rounding (layers' FastCosSinMatchesLibm).
        ASSERT_NEAR(ref_out.at(i, k), std::cos(x), 2e-7);
      }
    expect_close(out, ref_out, 1e-6, "time_encode out " + shape_name(n, d));
    expect_close(sin, ref_sin, 1e-6, "time_encode sin " + shape_name(n, d));
  }
}

// Gaps of exactly +0 (TGN's queries and padded slots) take a row computed once: the same bits as
// the loop gives the same argument by way of a -0 gap (w * -0 + b = b for b != 0), and the other
// rows are untouched by it.
TEST(TemporalOps, TimeEncodeOfAZeroGapIsTheLoopsRow) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    std::vector<double> dt(static_cast<std::size_t>(n)), minus(dt.size());
    std::mt19937_64 g{std::uint64_t(n + d)};
    for (std::size_t i = 0; i < dt.size(); ++i) {
      const bool zero = g() % 3 == 0;
      dt[i] = zero ? 0.0 : std::ldexp(std::uniform_real_distribution<double>(0, 1)(g), 20);
      minus[i] = zero ? -0.0 : dt[i];
    }
    const std::vector<float> w = random_vector(d, 3), b = random_vector(d, 4);
    Matrix out(n, d, NAN), sin(n, d, NAN), ref_out(n, d, NAN), ref_sin(n, d, NAN);
    be.time_encode(dt.data(), n, w.data(), b.data(), out.view(), sin.view());
    be.time_encode(minus.data(), n, w.data(), b.data(), ref_out.view(), ref_sin.view());
    expect_bitwise(out, ref_out, "time_encode +0 vs -0 gaps, out " + shape_name(n, d));
    expect_bitwise(sin, ref_sin, "time_encode +0 vs -0 gaps, sin " + shape_name(n, d));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < d; ++k) {
        const double x = double(w[std::size_t(k)]) * dt[std::size_t(i)] + double(b[std::size_t(k)]);
        ASSERT_NEAR(out.at(i, k), std::cos(x), 1e-6) << shape_name(n, d) << " " << i << "," << k;
        ASSERT_NEAR(sin.at(i, k), std::sin(x), 1e-6) << shape_name(n, d) << " " << i << "," << k;
      }
  }
}

TEST(TemporalOps, TimeEncodeBackwardAddsTheGradientSums) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    std::vector<double> dt(static_cast<std::size_t>(n));
    std::mt19937_64 g{std::uint64_t(n + d)};
    for (auto& v : dt) v = std::uniform_real_distribution<double>(0, 100)(g);
    const Matrix sin = random_matrix(n, d, 3), dout = random_matrix(n, d, 4);
    std::vector<float> dw = random_vector(d, 5), db = random_vector(d, 6);  // accumulated into
    std::vector<float> ref_w = dw, ref_b = db;
    be.time_encode_backward(dt.data(), sin.view(), dout.view(), dw.data(), db.data());
    for (std::int64_t k = 0; k < d; ++k) {
      double sw = 0, sb = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double s = -double(sin.at(i, k)) * double(dout.at(i, k));
        sw += s * dt[std::size_t(i)];
        sb += s;
      }
      ref_w[std::size_t(k)] += float(sw);
      ref_b[std::size_t(k)] += float(sb);
    }
    // Partial sums rounded to float one thread at a time: a few float roundings of the sum.
    const double scale = 100.0 * std::sqrt(double(n));
    for (std::int64_t k = 0; k < d; ++k) {
      ASSERT_NEAR(dw[std::size_t(k)], ref_w[std::size_t(k)], 1e-6 * scale) << shape_name(n, d);
      ASSERT_NEAR(db[std::size_t(k)], ref_b[std::size_t(k)], 1e-6 * scale) << shape_name(n, d);
    }
  }
}

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

TEST(TemporalOps, GruGatesAndTheirBackwardFollowTheGruEquations) {
  Backend& be = cpu_backend();
  for (const auto& [B, H] : kShapes) {
    const std::string what = shape_name(B, H);
    const Matrix a = random_matrix(B, 3 * H, 7), c = random_matrix(B, 3 * H, 8),
                 h = random_matrix(B, H, 9), dh_out = random_matrix(B, H, 10);
    Matrix rzn(B, 3 * H, NAN), h_out(B, H, NAN), ref_rzn(B, 3 * H), ref_h(B, H);
    be.gru_gates(a.view(), c.view(), h.view(), rzn.view(), h_out.view());
    Matrix da(B, 3 * H, NAN), dc(B, 3 * H, NAN), dh(B, H, NAN);
    Matrix ref_da(B, 3 * H), ref_dc(B, 3 * H), ref_dh(B, H);
    be.gru_gates_backward(dh_out.view(), h.view(), c.view(), rzn.view(), da.view(), dc.view(),
                          dh.view());
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t j = 0; j < H; ++j) {
        const float r = sigmoid(a.at(i, j) + c.at(i, j));
        const float z = sigmoid(a.at(i, H + j) + c.at(i, H + j));
        const float n = std::tanh(a.at(i, 2 * H + j) + r * c.at(i, 2 * H + j));
        ref_rzn.at(i, j) = r;
        ref_rzn.at(i, H + j) = z;
        ref_rzn.at(i, 2 * H + j) = n;
        ref_h.at(i, j) = (1 - z) * n + z * h.at(i, j);
        // d h' / d n = 1 - z, d n / d (pre-tanh) = 1 - n^2; d h' / d z = h - n; σ' = σ (1 - σ).
        const float g = dh_out.at(i, j);
        const float dn = g * (1 - z) * (1 - n * n);
        const float dz = g * (h.at(i, j) - n) * z * (1 - z);
        const float dr = dn * c.at(i, 2 * H + j) * r * (1 - r);
        ref_da.at(i, j) = ref_dc.at(i, j) = dr;
        ref_da.at(i, H + j) = ref_dc.at(i, H + j) = dz;
        ref_da.at(i, 2 * H + j) = dn;
        ref_dc.at(i, 2 * H + j) = dn * r;
        ref_dh.at(i, j) = g * z;
      }
    expect_close(rzn, ref_rzn, 1e-6, "gru_gates rzn " + what);
    expect_close(h_out, ref_h, 1e-6, "gru_gates h_out " + what);
    expect_close(da, ref_da, 1e-5, "gru_gates_backward da " + what);
    expect_close(dc, ref_dc, 1e-5, "gru_gates_backward dc " + what);
    expect_close(dh, ref_dh, 1e-6, "gru_gates_backward dh " + what);
  }
}

TEST(TemporalOps, TimeProjectionAndItsBackwardInPlaceOrNot) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes)
    for (const bool in_place : {false, true}) {
      const std::string what = shape_name(n, d) + (in_place ? " in place" : "");
      const Matrix m = random_matrix(n, d, 11), dz = random_matrix(n, d, 12);
      const std::vector<float> delta = random_vector(n, 13), w = random_vector(d, 14, 0.1f),
                               b = random_vector(d, 15, 0.1f);
      Matrix z = in_place ? m : Matrix(n, d, NAN);
      be.time_projection(in_place ? z.view() : m.view(), delta.data(), w.data(), b.data(),
                         z.view());
      Matrix dm = in_place ? dz : Matrix(n, d, NAN);
      std::vector<float> dw = random_vector(d, 16), db = random_vector(d, 17);
      std::vector<float> ref_w = dw, ref_b = db;
      be.time_projection_backward(m.view(), delta.data(), w.data(), b.data(),
                                  in_place ? dm.view() : dz.view(), dm.view(), dw.data(),
                                  db.data());
      Matrix ref_z(n, d), ref_dm(n, d);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < d; ++c) {
          const float t = delta[std::size_t(i)], wc = w[std::size_t(c)], bc = b[std::size_t(c)];
          ref_z.at(i, c) = m.at(i, c) * (1 + wc * t + bc);
          ref_dm.at(i, c) = dz.at(i, c) * (1 + wc * t + bc);
          ref_w[std::size_t(c)] += dz.at(i, c) * m.at(i, c) * t;  // rows in order, in float
          ref_b[std::size_t(c)] += dz.at(i, c) * m.at(i, c);
        }
      expect_close(z, ref_z, 1e-6, "time_projection " + what);
      expect_close(dm, ref_dm, 1e-6, "time_projection_backward dm " + what);
      expect_close(dw.data(), ref_w.data(), d, 1e-6 * double(n), "dw " + what);
      expect_close(db.data(), ref_b.data(), d, 1e-6 * double(n), "db " + what);
    }
}

TEST(TemporalOps, GatherRowsIntoFillsItsColumnsAndSkipsNegativeRows) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    const Matrix s1 = random_matrix(40, d, 20), s2 = random_matrix(9, d, 21);
    // Two sources into columns [2, 2 + d) of a wider batch, -1 where the other one fills.
    std::vector<NodeId> i1 = random_index(n, 40, 22, true), i2(i1.size());
    for (std::size_t i = 0; i < i1.size(); ++i) i2[i] = i1[i] < 0 ? NodeId(i % 9) : -1;
    Matrix dst = random_matrix(n + 3, d + 5, 23);
    Matrix ref = dst;
    be.gather_rows_into(s1.view(), i1.data(), n, dst.view(), 2);
    be.gather_rows_into(s2.view(), i2.data(), n, dst.view(), 2);
    for (std::int64_t i = 0; i < n; ++i) {
      const bool first = i1[std::size_t(i)] >= 0;
      const Matrix& s = first ? s1 : s2;
      const NodeId r = first ? i1[std::size_t(i)] : i2[std::size_t(i)];
      for (std::int64_t c = 0; c < d; ++c) ref.at(i, 2 + c) = s.at(r, c);
    }
    expect_bitwise(dst, ref, "gather_rows_into " + what);
  }
}

TEST(TemporalOps, ScatterAddRowsFromAddsAColumnRangeInIndexOrder) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    const Matrix src = random_matrix(n + 2, d + 4, 30);
    const std::vector<NodeId> idx = random_index(n, 17, 31, true);
    Matrix dst = random_matrix(17, d, 32);
    Matrix ref = dst;
    be.scatter_add_rows_from(src.view(), 3, d, idx.data(), n, dst.view());
    for (std::int64_t i = 0; i < n; ++i)  // the same float additions in the same order
      if (idx[std::size_t(i)] >= 0)
        for (std::int64_t c = 0; c < d; ++c) ref.at(idx[std::size_t(i)], c) += src.at(i, 3 + c);
    expect_bitwise(dst, ref, "scatter_add_rows_from " + what);
  }
}

TEST(TemporalOps, ScatterRowsWritesListedRowsOnly) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    const std::int64_t rows = 2 * n + 5;
    std::vector<NodeId> idx(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)  // distinct, out of order, every third skipped
      idx[std::size_t(i)] = i % 3 == 2 ? -1 : NodeId((i * 7919) % rows);
    const Matrix src = random_matrix(n, d, 40);
    Matrix dst = random_matrix(rows, d, 41);
    Matrix ref = dst;
    be.scatter_rows(src.view(), idx.data(), n, dst.view());
    for (std::int64_t i = 0; i < n; ++i)
      if (idx[std::size_t(i)] >= 0)
        for (std::int64_t c = 0; c < d; ++c) ref.at(idx[std::size_t(i)], c) = src.at(i, c);
    expect_bitwise(dst, ref, "scatter_rows " + what);
  }
}

// scale: every element times alpha, the float product (the averaging of independent memories'
// gradients on the GPU).
TEST(TemporalOps, ScaleMultipliesEveryElement) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    Matrix x = random_matrix(n, d, 42);
    Matrix ref = x;
    be.scale(x.view(), 1.f / 3.f);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < d; ++c) ref.at(i, c) *= 1.f / 3.f;
    expect_bitwise(x, ref, "scale " + shape_name(n, d));
  }
}

// TGN's message aggregation: runs of rows summed left to right from the first, times 1 / divisor
// (the model's "mean" and "last" rows), and its backward spreading a row / count over its run.
TEST(TemporalOps, SumRowsIntoAndSpreadRowsFollowTheRunsInOrder) {
  Backend& be = cpu_backend();
  for (const auto& [n, d] : kShapes) {
    const std::string what = shape_name(n, d);
    // Runs of 1..4 rows laid end to end; divisors 1..3 (independent of the run lengths).
    std::vector<std::int32_t> first(static_cast<std::size_t>(n)), rows(first.size()),
        divisor(first.size());
    std::int32_t total = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      first[std::size_t(i)] = total;
      rows[std::size_t(i)] = std::int32_t(1 + (i * 7) % 4);
      divisor[std::size_t(i)] = std::int32_t(1 + i % 3);
      total += rows[std::size_t(i)];
    }
    const Matrix src = random_matrix(total, d, 50);
    Matrix dst = random_matrix(n + 2, d + 3, 51);
    Matrix ref = dst, plain = dst, plain_ref = dst;
    be.sum_rows_into(src.view(), first.data(), rows.data(), divisor.data(), n, dst.view(), 3);
    be.sum_rows_into(src.view(), first.data(), nullptr, nullptr, n, plain.view(), 0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < d; ++c) {
        float s = src.at(first[std::size_t(i)], c);
        for (std::int32_t m = 1; m < rows[std::size_t(i)]; ++m)
          s += src.at(first[std::size_t(i)] + m, c);
        ref.at(i, 3 + c) = s * (1.f / float(divisor[std::size_t(i)]));
        plain_ref.at(i, c) = src.at(first[std::size_t(i)], c);  // one row, unscaled
      }
    expect_bitwise(dst, ref, "sum_rows_into " + what);
    expect_bitwise(plain, plain_ref, "sum_rows_into, one row each " + what);

    const Matrix g = random_matrix(n, d + 2, 52);
    Matrix spread = random_matrix(total, d, 53);
    Matrix spread_ref = spread;
    be.spread_rows(g.view(), 2, first.data(), rows.data(), n, spread.view());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int32_t m = 0; m < rows[std::size_t(i)]; ++m)
        for (std::int64_t c = 0; c < d; ++c)
          spread_ref.at(first[std::size_t(i)] + m, c) =
              g.at(i, 2 + c) / float(rows[std::size_t(i)]);
    expect_bitwise(spread, spread_ref, "spread_rows " + what);
  }
}

// The time encoder's and the GRU cell's forward and backward are Backend ops and nothing else
// (what lets them run on a GPU): their calls, op by op, as --profile counts them. On CUDA each
// call is one launch (a kernel, a cuBLAS call or an async copy), except column_sums and
// time_encode_backward (two kernels each: partial sums, then their combination) and the
// encoder's upload of dt (one copy, not an op).
TEST(TemporalOps, TimeEncoderAndGruCellRunAsTheseOps) {
  Backend& be = cpu_backend();
  TimeEncoder enc(8);
  GruCell gru(5, 4, 1, 0);
  const std::vector<double> dt = {0.0, 1.5, 3.0};
  const Matrix x = random_matrix(3, 5, 50), h = random_matrix(3, 4, 51),
               g = random_matrix(3, 4, 52), gt = random_matrix(3, 8, 53);
  Matrix out, h_out, dx, dh;
  OpProfile profile;
  {
    const ProfileScope scope(profile);
    enc.forward(be, dt.data(), 3, out);
    enc.backward(be, gt.view());
  }
  std::map<std::string, std::int64_t> calls;
  for (const auto& [op, e] : profile.totals()) calls[op] = e.calls;
  EXPECT_EQ(calls,
            (std::map<std::string, std::int64_t>{{"time_encode", 1}, {"time_encode_backward", 1}}));
  OpProfile gru_profile;
  {
    const ProfileScope scope(gru_profile);
    gru.forward(be, x.view(), h.view(), h_out);
    gru.backward(be, g.view(), dx, dh);
  }
  calls.clear();
  for (const auto& [op, e] : gru_profile.totals()) calls[op] = e.calls;
  EXPECT_EQ(calls, (std::map<std::string, std::int64_t>{{"copy", 2},
                                                        {"gemm", 6},
                                                        {"add_bias", 2},
                                                        {"gru_gates", 1},
                                                        {"gru_gates_backward", 1},
                                                        {"column_sums", 2},
                                                        {"add", 2}}));
}

// The message names the op (and, for a shape, the operands).
template <class Fn>
void expect_contract_error(Fn&& fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << op << ": no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("Backend::" + op + ":"), std::string::npos) << e.what();
  }
}

TEST(TemporalOpsChecks, BrokenShapesAndAliasesThrowNamingTheOp) {
  Backend& be = cpu_backend();
  Matrix a(4, 6), c(4, 6), h(4, 2), rzn(4, 6), out(4, 2), wide(4, 9);
  const std::vector<float> v(16, 0.f);
  const std::vector<double> dt(4, 0.0);
  const std::vector<NodeId> idx(4, 0);
  expect_contract_error(
      [&] { be.time_encode(dt.data(), 3, v.data(), v.data(), h.view(), out.view()); },
      "time_encode");  // out.rows != n
  expect_contract_error(
      [&] { be.time_encode(dt.data(), 4, v.data(), v.data(), h.view(), h.view()); },
      "time_encode");  // out and sin one buffer
  expect_contract_error(
      [&] {
        be.gru_gates(a.view(), c.view(), wide.view().rows_range(0, 4), rzn.view(), out.view());
      },
      "gru_gates");  // h not B x H
  expect_contract_error([&] { be.gru_gates(a.view(), c.view(), h.view(), a.view(), out.view()); },
                        "gru_gates");  // rzn overwrites a
  expect_contract_error(
      [&] {
        be.gru_gates_backward(out.view(), h.view(), c.view(), rzn.view(), a.view(), a.view(),
                              h.view());
      },
      "gru_gates_backward");
  // In place is allowed; a shifted overlap is not.
  Matrix m(4, 2);
  expect_contract_error(
      [&] {
        be.time_projection(m.view(), v.data(), v.data(), v.data(),
                           MatrixView{m.data() + 1, 4, 2, Device::kCpu});
      },
      "time_projection");
  expect_contract_error(
      [&] {
        be.time_projection_backward(m.view(), v.data(), v.data(), v.data(), out.view(), m.view(),
                                    nullptr, nullptr);
      },
      "time_projection_backward");  // dm overwrites m
  expect_contract_error([&] { be.gather_rows_into(h.view(), idx.data(), 4, wide.view(), 8); },
                        "gather_rows_into");  // columns [8, 10) of a 9-wide dst
  expect_contract_error([&] { be.gather_rows_into(h.view(), idx.data(), 5, wide.view(), 0); },
                        "gather_rows_into");  // n > dst.rows
  expect_contract_error(
      [&] { be.scatter_add_rows_from(wide.view(), 8, 2, idx.data(), 4, out.view()); },
      "scatter_add_rows_from");  // columns [8, 10) of a 9-wide src
  expect_contract_error(
      [&] { be.scatter_add_rows_from(wide.view(), 0, 3, idx.data(), 4, out.view()); },
      "scatter_add_rows_from");  // dst.cols != width
  expect_contract_error([&] { be.scatter_rows(h.view(), idx.data(), 4, wide.view()); },
                        "scatter_rows");  // widths differ
  expect_contract_error([&] { be.scatter_rows(h.view(), idx.data(), -1, out.view()); },
                        "scatter_rows");  // negative count
  expect_contract_error(
      [&] { be.sum_rows_into(h.view(), idx.data(), nullptr, nullptr, 4, wide.view(), 8); },
      "sum_rows_into");  // columns [8, 10) of a 9-wide dst
  expect_contract_error(
      [&] { be.sum_rows_into(h.view(), idx.data(), nullptr, nullptr, 4, h.view(), 0); },
      "sum_rows_into");  // dst is src
  expect_contract_error([&] { be.spread_rows(h.view(), 1, idx.data(), idx.data(), 4, out.view()); },
                        "spread_rows");  // columns [1, 3) of a 2-wide src
  expect_contract_error(
      [&] { be.spread_rows(wide.view(), 0, idx.data(), idx.data(), 5, out.view()); },
      "spread_rows");  // n > src.rows
}

}  // namespace
}  // namespace halo

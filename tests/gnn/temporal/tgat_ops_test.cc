// The CPU's temporal-attention ops (backend.h's TGN section) against plain reference loops: the
// head reshuffles and column copies exactly, the attention core and its backward against the
// slot-by-slot definitions in double (tgat_case.h), with padded slots, a query without
// neighbours, repeated nodes, one and two heads, with and without per-slot columns.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "halo/gnn/backend.h"
#include "tgat_case.h"

namespace halo {
namespace {

void expect_near_all(const Matrix& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(std::size_t(got.size()), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data()[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

TEST(TgatOps, SplitAndMergeHeadsAreTheHeadReshuffle) {
  Backend& be = cpu_backend();
  std::mt19937 g{1};
  for (int heads : {1, 2, 3})
    for (std::int64_t w : {1, 5, 33}) {
      const std::int64_t n = 7;
      const Matrix x = test::random_host(n, heads * w, g);
      Matrix split(heads * n, w, -1.f);
      be.split_heads(x.view(), heads, split.view());
      for (int h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t c = 0; c < w; ++c)
            ASSERT_EQ(split.at(h * n + i, c), x.at(i, h * w + c)) << heads << " " << w;
      Matrix back(n, heads * w, 5.f);
      be.merge_heads(split.view(), heads, back.view(), false);
      EXPECT_EQ(back.storage(), x.storage());
      Matrix acc = test::random_host(n, heads * w, g);
      const Matrix before = acc;
      be.merge_heads(split.view(), heads, acc.view(), true);
      for (std::int64_t i = 0; i < acc.size(); ++i)
        ASSERT_EQ(acc.data()[i], before.data()[i] + x.data()[i]);
    }
}

TEST(TgatOps, SplitHeadsOfARowRangeIsTheSlicesOfW) {
  // W's rows [dn, dn + ds) head by head: row h * ds + c is W[dn + c] over head h's columns.
  Backend& be = cpu_backend();
  std::mt19937 g{2};
  const std::int64_t dn = 3, ds = 4, heads = 2, dhd = 5;
  Matrix w = test::random_host(dn + ds, heads * dhd, g);
  Matrix out(heads * ds, dhd);
  be.split_heads(w.view().rows_range(dn, dn + ds), int(heads), out.view());
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t c = 0; c < ds; ++c)
      for (std::int64_t j = 0; j < dhd; ++j)
        ASSERT_EQ(out.at(h * ds + c, j), w.at(dn + c, h * dhd + j));
  // And back into the same rows only.
  const Matrix before = w;
  be.merge_heads(out.view(), int(heads), w.view().rows_range(dn, dn + ds), true);
  for (std::int64_t r = 0; r < dn + ds; ++r)
    for (std::int64_t c = 0; c < heads * dhd; ++c)
      ASSERT_EQ(w.at(r, c), r < dn ? before.at(r, c) : 2.f * before.at(r, c));
}

TEST(TgatOps, CopyColumnsWritesOrAddsItsRangeOnly) {
  Backend& be = cpu_backend();
  std::mt19937 g{3};
  // Above and below the size where the CPU splits rows over threads.
  for (std::int64_t rows : {5, 3000}) {
    const Matrix src = test::random_host(rows, 9, g);
    for (bool accumulate : {false, true}) {
      Matrix dst = test::random_host(rows, 12, g);
      const Matrix before = dst;
      be.copy_columns(src.view(), 2, dst.view(), 4, 6, accumulate);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t c = 0; c < 12; ++c) {
          const float want = c < 4 || c >= 10 ? before.at(i, c)
                             : accumulate     ? before.at(i, c) + src.at(i, c - 2)
                                              : src.at(i, c - 2);
          ASSERT_EQ(dst.at(i, c), want) << rows << " " << accumulate << " " << i << "," << c;
        }
    }
  }
}

TEST(TgatOps, MaskRowsZeroesTheFlaggedRowsOnly) {
  Backend& be = cpu_backend();
  std::mt19937 g{4};
  Matrix x = test::random_host(5, 3, g);
  const Matrix before = x;
  const std::vector<std::int32_t> keep = {1, 0, 1, 0, 7};
  be.mask_rows(x.view(), keep.data());
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t c = 0; c < 3; ++c)
      ASSERT_EQ(x.at(i, c), keep[std::size_t(i)] ? before.at(i, c) : 0.f);
}

struct Shape {
  std::int64_t B;
  int heads;
  std::int64_t dhd, ds, U;
  int k;
};
// One and two heads, with and without per-slot columns, one slot, a batch big enough for the
// CPU's threads; heads of width 1 and 33.
const Shape kShapes[] = {{4, 1, 3, 0, 3, 2},  {6, 2, 5, 4, 4, 3},       {3, 2, 1, 1, 2, 1},
                         {9, 1, 33, 7, 5, 4}, {200, 2, 50, 0, 150, 10}, {200, 2, 50, 40, 150, 10}};

std::string name(const Shape& s) {
  return "B=" + std::to_string(s.B) + " heads=" + std::to_string(s.heads) +
         " dhd=" + std::to_string(s.dhd) + " ds=" + std::to_string(s.ds) +
         " k=" + std::to_string(s.k);
}

TEST(TgatOps, AttendIsTheSlotBySlotAttention) {
  Backend& be = cpu_backend();
  for (const Shape& s : kShapes) {
    const test::TgatCase c(s.B, s.heads, s.dhd, s.ds, s.U, s.k, 5);
    const test::TgatReference r = test::tgat_reference(c);
    Matrix alpha(c.B * c.heads, c.k, -1.f), ctx(c.B, c.dq, -1.f), sbar(c.heads * c.B, c.ds, -1.f);
    be.tgat_attend(c.host_view(), c.bv.data(), alpha.view(), ctx.view(), sbar.view());
    expect_near_all(alpha, r.alpha, 1e-5, name(s) + " alpha");
    expect_near_all(ctx, r.ctx, 1e-5, name(s) + " ctx");
    expect_near_all(sbar, r.sbar, 1e-5, name(s) + " sbar");
    // The query without neighbours: exactly 0 everywhere (no bias).
    for (std::int64_t e = 0; e < c.dq; ++e) EXPECT_EQ(ctx.at(c.B - 1, e), 0.f) << name(s);
  }
}

TEST(TgatOps, AttendBackwardIsTheSlotBySlotGradient) {
  Backend& be = cpu_backend();
  for (const Shape& s : kShapes) {
    const test::TgatCase c(s.B, s.heads, s.dhd, s.ds, s.U, s.k, 6);
    const test::TgatReference r = test::tgat_reference(c);
    Matrix alpha(c.B * c.heads, c.k), ctx(c.B, c.dq), sbar(c.heads * c.B, c.ds);
    be.tgat_attend(c.host_view(), c.bv.data(), alpha.view(), ctx.view(), sbar.view());
    // Outputs start as garbage (overwritten), dbk as a gradient so far (added to).
    Matrix dQ(c.B, c.dq, 9.f), dK(c.S, c.dq, 9.f), dV(c.S, c.dq, 9.f), dP(c.heads * c.B, c.ds, 9.f),
        dslots(c.B * c.k, c.ds, 9.f), dbk(1, c.dq, 0.5f);
    be.tgat_attend_backward(c.host_view(), alpha.view(), c.dctx.view(), c.dsbar.view(), dQ.view(),
                            dK.view(), dV.view(), dP.view(), dslots.view(), dbk.data());
    expect_near_all(dQ, r.dQ, 1e-4, name(s) + " dQ");
    expect_near_all(dK, r.dK, 1e-4, name(s) + " dK");
    expect_near_all(dV, r.dV, 1e-5, name(s) + " dV");
    expect_near_all(dP, r.dP, 1e-4, name(s) + " dP");
    expect_near_all(dslots, r.dslots, 1e-4, name(s) + " dslots");
    std::vector<double> want_bk = r.dbk;
    for (double& v : want_bk) v += 0.5;
    expect_near_all(dbk, want_bk, 1e-4, name(s) + " dbk");
  }
}

TEST(TgatOps, ShapeErrorsNameTheOp) {
  Backend& be = cpu_backend();
  const test::TgatCase c(4, 2, 3, 2, 3, 2, 7);
  Matrix alpha(c.B * c.heads, c.k), ctx(c.B, c.dq), sbar(c.heads * c.B, c.ds);
  Matrix short_alpha(c.B, c.k);  // one head's rows
  try {
    be.tgat_attend(c.host_view(), c.bv.data(), short_alpha.view(), ctx.view(), sbar.view());
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("Backend::tgat_attend: needs"), std::string::npos)
        << e.what();
  }
  // An output aliasing an input.
  Matrix q = c.Q;
  TgatView v = c.host_view();
  v.Q = q.view();
  EXPECT_THROW(be.tgat_attend(v, c.bv.data(), alpha.view(), q.view(), sbar.view()),
               std::logic_error);
  Matrix x(3, 4), out(6, 2);
  EXPECT_THROW(be.split_heads(x.view(), 3, out.view()), std::logic_error);  // 4 % 3 != 0
  EXPECT_THROW(be.copy_columns(x.view(), 2, out.view(), 0, 3, false), std::logic_error);
}

}  // namespace
}  // namespace halo

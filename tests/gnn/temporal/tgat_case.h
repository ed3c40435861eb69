// Random inputs of the temporal-attention core ops (backend.h's TGN section) and plain
// reference loops in double for them, shared by the CPU and the CPU-vs-CUDA op tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "halo/gnn/matrix.h"
#include "halo/gnn/tgat_view.h"

namespace halo::test {

inline Matrix random_host(std::int64_t rows, std::int64_t cols, std::mt19937& g, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  Matrix m(rows, cols);
  for (float& v : m.storage()) v = d(g);
  return m;
}

// B queries of k slots over U distinct nodes, heads of width dhd, ds per-slot columns. Query 0
// fills every slot, the last query has none, the rest about two thirds (nodes repeat); the
// gradients flowing in (dctx, dsbar) are random.
struct TgatCase {
  std::int64_t B = 0, dq = 0, ds = 0, U = 0, S = 0;
  int heads = 1, k = 0;
  Matrix Q, P, Kn, Vn, slots, bk, bv, dctx, dsbar;
  std::vector<std::int32_t> row, node, keep;  // per slot, per compact row, per query

  TgatCase(std::int64_t b, int h, std::int64_t dhd, std::int64_t d_s, std::int64_t u, int kk,
           std::uint32_t seed)
      : B(b), dq(h * dhd), ds(d_s), U(u), heads(h), k(kk) {
    std::mt19937 g{seed};
    std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(U - 1));
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    keep.assign(std::size_t(B), 0);
    for (std::int64_t i = 0; i < B; ++i)
      for (int j = 0; j < k; ++j) {
        const bool filled = i != B - 1 && (i == 0 || coin(g) < 0.67);
        row.push_back(filled ? std::int32_t(node.size()) : -1);
        if (filled) {
          node.push_back(pick(g));
          keep[std::size_t(i)] = 1;
        }
      }
    S = std::int64_t(node.size());
    Q = random_host(B, dq, g);
    P = random_host(heads * B, ds, g);
    Kn = random_host(U, dq, g);
    Vn = random_host(U, dq, g);
    slots = random_host(S, ds, g);
    bk = random_host(1, dq, g, 0.1f);
    bv = random_host(1, dq, g, 0.1f);
    dctx = random_host(B, dq, g);
    dsbar = random_host(heads * B, ds, g);
  }

  // The view over this case's host arrays (or over device copies the caller passes).
  TgatView view(const Matrix& q, const Matrix& p, const Matrix& kn, const Matrix& vn,
                const Matrix& sl, const std::int32_t* r, const std::int32_t* n,
                const float* b) const {
    TgatView v;
    v.Q = q.view();
    v.P = p.view();
    v.Kn = kn.view();
    v.Vn = vn.view();
    v.slots = sl.view();
    v.row = r;
    v.node = n;
    v.bk = b;
    v.heads = heads;
    v.k = k;
    return v;
  }
  TgatView host_view() const {
    return view(Q, P, Kn, Vn, slots, row.data(), node.data(), bk.data());
  }
};

// What the ops compute, in double from the definitions (backend.h), slot by slot.
struct TgatReference {
  std::vector<double> alpha, ctx, sbar;             // forward
  std::vector<double> dQ, dK, dV, dP, dslots, dbk;  // backward
};

inline TgatReference tgat_reference(const TgatCase& c) {
  const std::int64_t B = c.B, dq = c.dq, dhd = dq / c.heads, ds = c.ds;
  const int k = c.k, H = c.heads;
  const double scale = 1.0 / std::sqrt(double(dhd));
  TgatReference r;
  r.alpha.assign(std::size_t(B * H * k), 0.0);
  r.ctx.assign(std::size_t(B * dq), 0.0);
  r.sbar.assign(std::size_t(H * B * ds), 0.0);
  r.dQ.assign(std::size_t(B * dq), 0.0);
  r.dK.assign(std::size_t(c.S * dq), 0.0);
  r.dV.assign(std::size_t(c.S * dq), 0.0);
  r.dP.assign(std::size_t(H * B * ds), 0.0);
  r.dslots.assign(std::size_t(B * k * ds), 0.0);
  r.dbk.assign(std::size_t(dq), 0.0);
  for (std::int64_t i = 0; i < B; ++i)
    for (int h = 0; h < H; ++h) {
      const std::int64_t o = h * dhd, ph = h * B + i;
      std::vector<double> s(std::size_t(k), 0.0), a(std::size_t(k), 0.0), da(std::size_t(k), 0.0);
      double mx = -1e300, sum = 0;
      bool any = false;
      for (int j = 0; j < k; ++j) {
        const std::int32_t cr = c.row[std::size_t(i * k + j)];
        if (cr < 0) continue;
        const std::int32_t n = c.node[std::size_t(cr)];
        double t = 0;
        for (std::int64_t e = 0; e < dhd; ++e)
          t += double(c.Q.at(i, o + e)) * (double(c.Kn.at(n, o + e)) + c.bk.at(0, o + e));
        for (std::int64_t e = 0; e < ds; ++e) t += double(c.P.at(ph, e)) * c.slots.at(cr, e);
        s[std::size_t(j)] = t * scale;
        mx = std::max(mx, s[std::size_t(j)]);
        any = true;
      }
      if (!any) continue;
      for (int j = 0; j < k; ++j)
        if (c.row[std::size_t(i * k + j)] >= 0) sum += std::exp(s[std::size_t(j)] - mx);
      double adot = 0;  // Σ_j a_j dalpha_j
      for (int j = 0; j < k; ++j) {
        const std::int32_t cr = c.row[std::size_t(i * k + j)];
        if (cr < 0) continue;
        const std::int32_t n = c.node[std::size_t(cr)];
        const double aj = std::exp(s[std::size_t(j)] - mx) / sum;
        a[std::size_t(j)] = aj;
        r.alpha[std::size_t((i * H + h) * k + j)] = aj;
        for (std::int64_t e = 0; e < dhd; ++e) {
          r.ctx[std::size_t(i * dq + o + e)] += aj * c.Vn.at(n, o + e);
          da[std::size_t(j)] += double(c.dctx.at(i, o + e)) * c.Vn.at(n, o + e);
          r.dV[std::size_t(cr * dq + o + e)] = aj * c.dctx.at(i, o + e);
        }
        for (std::int64_t e = 0; e < ds; ++e) {
          r.sbar[std::size_t(ph * ds + e)] += aj * c.slots.at(cr, e);
          da[std::size_t(j)] += double(c.dsbar.at(ph, e)) * c.slots.at(cr, e);
          r.dslots[std::size_t((i * k + j) * ds + e)] += aj * c.dsbar.at(ph, e);
        }
        adot += aj * da[std::size_t(j)];
      }
      for (std::int64_t e = 0; e < dhd; ++e)
        r.ctx[std::size_t(i * dq + o + e)] += c.bv.at(0, o + e);
      for (int j = 0; j < k; ++j) {
        const std::int32_t cr = c.row[std::size_t(i * k + j)];
        if (cr < 0) continue;
        const std::int32_t n = c.node[std::size_t(cr)];
        const double g = a[std::size_t(j)] * (da[std::size_t(j)] - adot) * scale;
        for (std::int64_t e = 0; e < dhd; ++e) {
          r.dQ[std::size_t(i * dq + o + e)] += g * (double(c.Kn.at(n, o + e)) + c.bk.at(0, o + e));
          r.dK[std::size_t(cr * dq + o + e)] = g * c.Q.at(i, o + e);
          r.dbk[std::size_t(o + e)] += g * c.Q.at(i, o + e);
        }
        for (std::int64_t e = 0; e < ds; ++e) {
          r.dP[std::size_t(ph * ds + e)] += g * c.slots.at(cr, e);
          r.dslots[std::size_t((i * k + j) * ds + e)] += g * c.P.at(ph, e);
        }
      }
    }
  return r;
}

}  // namespace halo::test

// Graph attention kernels on the host (attention.h): rows in parallel for everything a
// destination row owns, the transpose's rows in parallel for what a source column receives.
#include "halo/gnn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "halo/graph/error.h"

namespace halo {
namespace {

// <a, b> over n floats in 8 interleaved float partial sums added in a fixed tree: the compiler
// vectorises it (one running sum is a dependency chain it may not reorder), and the order, so
// the bits, depend on n alone.
float dot8(const float* a, const float* b, std::size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (std::size_t j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

}  // namespace

AttentionGraph attention_graph(const CsrView& g, std::int64_t cols) {
  if (cols < g.num_nodes)
    throw ParamError("attention_graph: " + std::to_string(cols) + " columns for " +
                     std::to_string(g.num_nodes) + " rows (rows are the first columns)");
  AttentionGraph a;
  a.rows = g.num_nodes;
  a.cols = cols;
  a.offsets.assign(std::size_t(a.rows) + 1, 0);
  a.indices.reserve(std::size_t(g.num_edges() + a.rows));
  for (std::int64_t u = 0; u < a.rows; ++u) {
    bool self = false;
    for (const NodeId* v = g.begin(NodeId(u)); v != g.end(NodeId(u)); ++v) {
      if (!self && *v >= u) {  // the self-loop in column order, once
        if (*v != u) a.indices.push_back(NodeId(u));
        self = true;
      }
      a.indices.push_back(*v);
    }
    if (!self) a.indices.push_back(NodeId(u));
    a.offsets[std::size_t(u) + 1] = EdgeId(a.indices.size());
  }
  a.t_offsets.assign(std::size_t(cols) + 1, 0);
  for (NodeId c : a.indices) ++a.t_offsets[std::size_t(c) + 1];
  for (std::int64_t c = 0; c < cols; ++c)
    a.t_offsets[std::size_t(c) + 1] += a.t_offsets[std::size_t(c)];
  a.t_rows.resize(a.indices.size());
  a.t_edge.resize(a.indices.size());
  std::vector<EdgeId> cursor(a.t_offsets.begin(), a.t_offsets.end() - 1);
  for (std::int64_t u = 0; u < a.rows; ++u)  // rows in order: each transposed row is ascending
    for (EdgeId e = a.offsets[std::size_t(u)]; e < a.offsets[std::size_t(u) + 1]; ++e) {
      const EdgeId at = cursor[std::size_t(a.indices[std::size_t(e)])]++;
      a.t_rows[std::size_t(at)] = NodeId(u);
      a.t_edge[std::size_t(at)] = e;
    }
  return a;
}

void head_dots(std::int64_t n, int heads, int width, const float* z, const float* a, float* t) {
  const auto hf = std::size_t(heads) * std::size_t(width);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r)
    for (int h = 0; h < heads; ++h) {
      const float* zr = z + std::size_t(r) * hf + std::size_t(h) * std::size_t(width);
      const float* ah = a + std::size_t(h) * std::size_t(width);
      t[std::size_t(r) * std::size_t(heads) + std::size_t(h)] = dot8(zr, ah, std::size_t(width));
    }
}

void head_dots_backward(std::int64_t n, int heads, int width, const float* z, const float* a,
                        const float* dt, float* dz, float* da) {
  const auto H = std::size_t(heads), F = std::size_t(width), hf = H * F;
  // One pass over the rows: d(z) row by row, and d(a), a reduction over rows, in fixed blocks of
  // rows, each summed in double in row order by one thread, then the blocks in order (the same
  // bits for any thread count; a column walk per (head, feature) would read a cache line per
  // element).
  constexpr std::int64_t kBlock = 512;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> part(std::size_t(blocks) * hf, 0.0);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    double* acc = part.data() + std::size_t(b) * hf;
    for (std::int64_t r = b * kBlock; r < std::min(n, (b + 1) * kBlock); ++r) {
      const float* zr = z + std::size_t(r) * hf;
      float* dzr = dz + std::size_t(r) * hf;
      for (std::size_t h = 0; h < H; ++h) {
        const float g = dt[std::size_t(r) * H + h];
        const float* ah = a + h * F;
        double* acch = acc + h * F;
        for (std::size_t f = 0; f < F; ++f) {
          dzr[h * F + f] += g * ah[f];
          acch[f] += double(g) * zr[h * F + f];
        }
      }
    }
  }
  for (std::size_t j = 0; j < hf; ++j) {
    double s = 0;
    for (std::int64_t b = 0; b < blocks; ++b) s += part[std::size_t(b) * hf + j];
    da[j] += float(s);
  }
}

namespace {
float leaky(float x, float slope) { return x > 0 ? x : slope * x; }
}  // namespace

void gat_edge_softmax(const AttentionView& g, int heads, const float* el, const float* er,
                      float slope, float* alpha) {
  const auto H = std::size_t(heads);
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t u = 0; u < g.rows; ++u) {
    const EdgeId b = g.offsets[std::size_t(u)], e = g.offsets[std::size_t(u) + 1];
    for (std::size_t h = 0; h < H; ++h) {
      const float ru = er[std::size_t(u) * H + h];
      float top = -std::numeric_limits<float>::infinity();
      for (EdgeId i = b; i < e; ++i) {
        const float s = leaky(el[std::size_t(g.indices[std::size_t(i)]) * H + h] + ru, slope);
        alpha[std::size_t(i) * H + h] = s;
        top = std::max(top, s);
      }
      double sum = 0;
      for (EdgeId i = b; i < e; ++i) {
        const float x = std::exp(alpha[std::size_t(i) * H + h] - top);
        alpha[std::size_t(i) * H + h] = x;
        sum += x;
      }
      const auto inv = float(1.0 / sum);  // every row has its self-loop: sum >= 1
      for (EdgeId i = b; i < e; ++i) alpha[std::size_t(i) * H + h] *= inv;
    }
  }
}

void gat_aggregate(const AttentionView& g, int heads, int width, const float* alpha, const float* z,
                   float* out) {
  const auto H = std::size_t(heads), F = std::size_t(width), hf = H * F;
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t u = 0; u < g.rows; ++u) {
    float* o = out + std::size_t(u) * hf;
    std::fill(o, o + hf, 0.0f);
    for (EdgeId i = g.offsets[std::size_t(u)]; i < g.offsets[std::size_t(u) + 1]; ++i) {
      const float* zv = z + std::size_t(g.indices[std::size_t(i)]) * hf;
      for (std::size_t h = 0; h < H; ++h) {
        const float w = alpha[std::size_t(i) * H + h];
        for (std::size_t f = 0; f < F; ++f) o[h * F + f] += w * zv[h * F + f];
      }
    }
  }
}

void gat_aggregate_backward(const AttentionView& g, int heads, int width, const float* alpha,
                            const float* z, const float* dout, float* dalpha, float* dz) {
  const auto H = std::size_t(heads), F = std::size_t(width), hf = H * F;
  // One pass over the transpose: column v gathers the rows u that read it, and each row's
  // d(out) serves both d(z[v]) and the edge's d(alpha) while it is in cache (two passes read
  // every gathered row twice). Each edge appears once in the transpose, so d(alpha[e]) is
  // written by one iteration, after that iteration read alpha[e]: dalpha may be alpha.
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t v = 0; v < g.cols; ++v) {
    float* dzv = dz + std::size_t(v) * hf;
    const float* zv = z + std::size_t(v) * hf;
    for (EdgeId t = g.t_offsets[std::size_t(v)]; t < g.t_offsets[std::size_t(v) + 1]; ++t) {
      const float* d = dout + std::size_t(g.t_rows[std::size_t(t)]) * hf;
      const std::size_t i = std::size_t(g.t_edge[std::size_t(t)]);
      for (std::size_t h = 0; h < H; ++h) {
        const float w = alpha[i * H + h];
        for (std::size_t f = 0; f < F; ++f) dzv[h * F + f] += w * d[h * F + f];
        dalpha[i * H + h] = dot8(d + h * F, zv + h * F, F);
      }
    }
  }
}

void gat_edge_softmax_backward(const AttentionView& g, int heads, const float* el, const float* er,
                               float slope, const float* alpha, float* dalpha, float* del,
                               float* der) {
  const auto H = std::size_t(heads);
  // d(score) = alpha (d(alpha) - sum_row alpha d(alpha)), times LeakyReLU's slope at the score.
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t u = 0; u < g.rows; ++u) {
    const EdgeId b = g.offsets[std::size_t(u)], e = g.offsets[std::size_t(u) + 1];
    for (std::size_t h = 0; h < H; ++h) {
      double dot = 0;
      for (EdgeId i = b; i < e; ++i)
        dot += double(alpha[std::size_t(i) * H + h]) * dalpha[std::size_t(i) * H + h];
      const float ru = er[std::size_t(u) * H + h];
      double row = 0;
      for (EdgeId i = b; i < e; ++i) {
        const std::size_t k = std::size_t(i) * H + h;
        const float pre = el[std::size_t(g.indices[std::size_t(i)]) * H + h] + ru;
        const float ds = alpha[k] * float(dalpha[k] - dot) * (pre > 0 ? 1.0f : slope);
        dalpha[k] = ds;
        row += ds;
      }
      der[std::size_t(u) * H + h] += float(row);
    }
  }
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t v = 0; v < g.cols; ++v)
    for (std::size_t h = 0; h < H; ++h) {
      double s = 0;
      for (EdgeId t = g.t_offsets[std::size_t(v)]; t < g.t_offsets[std::size_t(v) + 1]; ++t)
        s += dalpha[std::size_t(g.t_edge[std::size_t(t)]) * H + h];
      del[std::size_t(v) * H + h] += float(s);
    }
}

void gat_edge_dropout(const AttentionView& g, int heads, float p, PhiloxKey key, const NodeId* ids,
                      float* x) {
  if (p <= 0.f) return;
  const auto H = std::size_t(heads);
  const std::uint32_t threshold = dropout_threshold(p);
  const float scale = 1.f / (1.f - p);
  auto id = [ids](NodeId n) { return std::uint64_t(std::uint32_t(ids ? ids[n] : n)); };
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t u = 0; u < g.rows; ++u) {
    const std::uint64_t du = id(NodeId(u)) << 32;
    for (EdgeId i = g.offsets[std::size_t(u)]; i < g.offsets[std::size_t(u) + 1]; ++i) {
      const std::uint64_t key_row = du | id(g.indices[std::size_t(i)]);
      float* xe = x + std::size_t(i) * H;
      for (std::size_t h = 0; h < H; ++h)
        xe[h] = dropout_u16(key, key_row, std::uint32_t(h)) >= threshold ? xe[h] * scale : 0.f;
    }
  }
}

}  // namespace halo

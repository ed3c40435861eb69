// Synthetic graphs: a degree-corrected stochastic block model with one block per class.
//   class(v)  uniform over C;  propensity theta_v ~ Pareto(skew), capped;
//   edge: u ~ theta over all nodes; with probability homophily v ~ theta within class(u),
//         else v ~ theta over all nodes (resampled while v == u);
//   x_v = mu_class(v) + noise * N(0, I), mu_c ~ N(0, I);  split 50/25/25 by a per-node hash.
// Every random draw is a pure function of (seed, stream, index), so chunks can be drawn in any
// order on any number of threads and the output is identical.
#include "halo/graph/generate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <vector>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/gzip_writer.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"

namespace halo {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kEdgeChunk = 1 << 20;
constexpr std::int64_t kNodeChunk = 1 << 14;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A counter-based stream: draw k of stream (seed, id) is mix(key + k).
class Stream {
 public:
  Stream(std::uint64_t seed, std::uint64_t stream, std::uint64_t id)
      : key_(mix(mix(seed ^ (stream << 56)) ^ id)) {}
  std::uint64_t next() { return mix(key_ + ctr_++); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller; one value per call keeps the stream position simple
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t key_;
  std::uint64_t ctr_ = 0;
};

enum : std::uint64_t { kClass = 1, kTheta, kEdges, kFeatures, kMeans, kSplit };

// Vose's alias table over items with the given weights: O(1) weighted draws.
struct Alias {
  std::vector<float> prob;
  std::vector<NodeId> alias;
  std::vector<NodeId> item;  // the node behind each slot

  Alias(std::vector<NodeId> items, const std::vector<double>& weight) : item(std::move(items)) {
    const std::size_t k = item.size();
    prob.resize(k);
    alias.resize(k);
    double total = 0;
    for (NodeId v : item) total += weight[std::size_t(v)];
    std::vector<double> scaled(k);
    std::vector<std::size_t> small, large;
    for (std::size_t i = 0; i < k; ++i) {
      scaled[i] = weight[std::size_t(item[i])] * double(k) / total;
      (scaled[i] < 1 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      const std::size_t s = small.back(), l = large.back();
      small.pop_back();
      prob[s] = float(scaled[s]);
      alias[s] = NodeId(l);
      scaled[l] -= 1 - scaled[s];
      if (scaled[l] < 1) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (std::size_t i : large) prob[i] = 1, alias[i] = NodeId(i);
    for (std::size_t i : small) prob[i] = 1, alias[i] = NodeId(i);
  }
  NodeId draw(Stream& r) const {
    const std::size_t slot = std::size_t(r.next() % item.size());
    return item[r.uniform() < prob[slot] ? slot : std::size_t(alias[slot])];
  }
};

struct Model {
  GenerateOptions o;
  std::int64_t m = 0;
  std::vector<std::int32_t> cls;
  std::vector<double> theta;
  std::vector<float> means;  // classes x features
  std::unique_ptr<Alias> all;
  std::vector<Alias> by_class;

  explicit Model(const GenerateOptions& opt) : o(opt) {
    const std::int64_t n = o.nodes;
    m = o.edges > 0 ? o.edges : std::int64_t(std::llround(double(n) * o.avg_degree / 2));
    cls.resize(std::size_t(n));
    theta.resize(std::size_t(n));
#pragma omp parallel for schedule(static)
    for (std::int64_t v = 0; v < n; ++v) {
      Stream c(o.seed, kClass, std::uint64_t(v)), t(o.seed, kTheta, std::uint64_t(v));
      cls[std::size_t(v)] = std::int32_t(c.next() % std::uint64_t(o.classes));
      // Pareto(skew) with x_min = 1, capped so one hub cannot take a large share of all edges.
      theta[std::size_t(v)] = std::min(std::pow(1.0 - t.uniform(), -1.0 / (o.skew - 1.0)), 300.0);
    }
    std::vector<NodeId> every(static_cast<std::size_t>(n));
    std::vector<std::vector<NodeId>> members(static_cast<std::size_t>(o.classes));
    for (std::int64_t v = 0; v < n; ++v) {
      every[std::size_t(v)] = NodeId(v);
      members[std::size_t(cls[std::size_t(v)])].push_back(NodeId(v));
    }
    all = std::make_unique<Alias>(std::move(every), theta);
    for (auto& mem : members) {
      if (mem.empty()) mem.push_back(0);  // a class nobody drew: fall back to node 0
      by_class.emplace_back(std::move(mem), theta);
    }
    means.resize(std::size_t(o.classes * o.features));
    for (std::int64_t c = 0; c < o.classes; ++c) {
      Stream r(o.seed, kMeans, std::uint64_t(c));
      for (std::int64_t k = 0; k < o.features; ++k)
        means[std::size_t(c * o.features + k)] = float(r.normal());
    }
  }

  // Edges [chunk * kEdgeChunk, ...) into src/dst (cleared first).
  void edges(std::int64_t chunk, std::vector<NodeId>& src, std::vector<NodeId>& dst) const {
    const std::int64_t b = chunk * kEdgeChunk, e = std::min(m, b + kEdgeChunk);
    src.clear();
    dst.clear();
    Stream r(o.seed, kEdges, std::uint64_t(chunk));
    for (std::int64_t i = b; i < e; ++i) {
      const NodeId u = all->draw(r);
      NodeId v = u;
      for (int tries = 0; v == u && tries < 64; ++tries)
        v = r.uniform() < o.homophily ? by_class[std::size_t(cls[std::size_t(u)])].draw(r)
                                      : all->draw(r);
      if (v == u) v = NodeId((u + 1) % o.nodes);  // a class of one node: any other node
      src.push_back(u);
      dst.push_back(v);
    }
  }

  void features(std::int64_t v, float* out) const {
    Stream r(o.seed, kFeatures, std::uint64_t(v));
    const float* mu = means.data() + std::size_t(cls[std::size_t(v)]) * std::size_t(o.features);
    for (std::int64_t k = 0; k < o.features; ++k) out[k] = mu[k] + float(o.noise * r.normal());
  }

  int split_of(std::int64_t v) const {  // 0 train, 1 valid, 2 test
    Stream r(o.seed, kSplit, std::uint64_t(v));
    const double u = r.uniform();
    return u < 0.5 ? 0 : u < 0.75 ? 1 : 2;
  }
  std::int64_t edge_chunks() const { return (m + kEdgeChunk - 1) / kEdgeChunk; }
  std::int64_t node_chunks() const { return (o.nodes + kNodeChunk - 1) / kNodeChunk; }
};

void check(const GenerateOptions& o) {
  if (o.nodes < 2 || o.nodes > kMaxNodes) throw ParamError("--nodes must be in [2, 2^31)");
  if (o.edges < 0 || (o.edges == 0 && !(o.avg_degree > 0)))
    throw ParamError("--avg-degree must be positive (or give --edges)");
  if (o.features < 0) throw ParamError("--features must be >= 0");
  if (o.classes < 1 || o.classes > o.nodes) throw ParamError("--classes must be in [1, nodes]");
  if (!(o.homophily >= 0 && o.homophily <= 1)) throw ParamError("--homophily must be in [0, 1]");
  if (!(o.skew > 1)) throw ParamError("skew must be > 1");
  if (o.format != "native" && o.format != "ogb")
    throw ParamError("--format must be native or ogb, not '" + o.format + "'");
}

void write_native(const Model& g, const fs::path& dir) {
  const auto& o = g.o;
  GraphDataset d;
  d.name = dir.filename().string();
  EdgeList el;
  el.num_nodes = o.nodes;
  el.src.reserve(std::size_t(g.m));
  el.dst.reserve(std::size_t(g.m));
  std::vector<NodeId> s, t;
  for (std::int64_t c = 0; c < g.edge_chunks(); ++c) {
    g.edges(c, s, t);
    el.src.insert(el.src.end(), s.begin(), s.end());
    el.dst.insert(el.dst.end(), t.begin(), t.end());
  }
  d.graph = build_csr(std::move(el));
  DatasetWriter w(dir, o.overwrite);
  w.put("offsets", d.graph.offsets.data(), std::uint64_t(o.nodes + 1));
  w.put("indices", d.graph.indices);
  if (o.features > 0) {
    auto out = w.open("features", DType::kFloat32, std::uint64_t(o.nodes), std::uint64_t(o.features));
    std::vector<float> buf(static_cast<std::size_t>(kNodeChunk * o.features));
    for (std::int64_t c = 0; c < g.node_chunks(); ++c) {
      const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
#pragma omp parallel for schedule(static)
      for (std::int64_t v = b; v < e; ++v) g.features(v, buf.data() + (v - b) * o.features);
      out->write_rows(std::uint64_t(b), buf.data(), std::uint64_t(e - b));
    }
    w.record("features", out->finish());
    d.num_features = o.features;
  }
  d.label_cols = 1;
  d.label_kind = LabelKind::kMulticlass;
  d.num_classes = o.classes;
  d.labels = Array<std::int32_t>(g.cls);
  w.put("labels", d.labels);
  Split sp;
  sp.name = "random";
  std::vector<NodeId> parts[3];
  for (std::int64_t v = 0; v < o.nodes; ++v) parts[g.split_of(v)].push_back(NodeId(v));
  sp.train = Array<NodeId>(std::move(parts[0]));
  sp.valid = Array<NodeId>(std::move(parts[1]));
  sp.test = Array<NodeId>(std::move(parts[2]));
  w.put("split.random.train", sp.train);
  w.put("split.random.valid", sp.valid);
  w.put("split.random.test", sp.test);
  d.splits.push_back(std::move(sp));
  nlohmann::json meta = graph_meta(d);
  meta["source"] = {{"format", "generate"},
                    {"seed", o.seed},
                    {"edges_drawn", g.m},
                    {"homophily", o.homophily},
                    {"noise", o.noise}};
  w.commit(std::move(meta));
}

char* put_int(char* p, std::int64_t v) { return std::to_chars(p, p + 24, v).ptr; }

// One gzip text file whose blocks are made by make_block(i, text) for i in [0, blocks).
template <class Fn>
void write_gz(const fs::path& path, std::int64_t blocks, Fn&& make_block, const char* label) {
  GzipWriter gz(path);
  Progress progress(label, std::uint64_t(blocks));
  const std::int64_t group = 8;  // blocks in flight: bounds memory at ~8 blocks of text
  for (std::int64_t g0 = 0; g0 < blocks; g0 += group) {
    const std::int64_t g1 = std::min(blocks, g0 + group);
    std::vector<std::string> text(static_cast<std::size_t>(g1 - g0));
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = g0; i < g1; ++i) make_block(i, text[std::size_t(i - g0)]);
    gz.write_blocks(text);
    progress.update(std::uint64_t(g1));
  }
  gz.close();
}

void write_ogb(const Model& g, const fs::path& dir) {
  const auto& o = g.o;
  StagingDir stage(dir, o.overwrite);
  const fs::path raw = stage.path() / "raw";
  const fs::path split = stage.path() / "split" / "random";
  fs::create_directories(raw);
  fs::create_directories(split);
  auto one_number = [](std::int64_t v) {
    return [v](std::int64_t, std::string& s) { s = std::to_string(v) + "\n"; };
  };
  write_gz(raw / "num-node-list.csv.gz", 1, one_number(o.nodes), "");
  write_gz(raw / "num-edge-list.csv.gz", 1, one_number(g.m), "");
  write_gz(raw / "edge.csv.gz", g.edge_chunks(), [&](std::int64_t c, std::string& s) {
    std::vector<NodeId> src, dst;
    g.edges(c, src, dst);
    s.resize(src.size() * 24);
    char* p = s.data();
    for (std::size_t i = 0; i < src.size(); ++i) {
      p = put_int(p, src[i]);
      *p++ = ',';
      p = put_int(p, dst[i]);
      *p++ = '\n';
    }
    s.resize(std::size_t(p - s.data()));
  }, "writing edges");
  if (o.features > 0)
    write_gz(raw / "node-feat.csv.gz", g.node_chunks(), [&](std::int64_t c, std::string& s) {
      const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
      std::vector<float> x(static_cast<std::size_t>(o.features));
      s.resize(std::size_t((e - b) * o.features * 16));
      char* p = s.data();
      for (std::int64_t v = b; v < e; ++v) {
        g.features(v, x.data());
        for (std::int64_t k = 0; k < o.features; ++k) {
          if (k) *p++ = ',';
          p = std::to_chars(p, p + 16, x[std::size_t(k)], std::chars_format::fixed, 5).ptr;
        }
        *p++ = '\n';
      }
      s.resize(std::size_t(p - s.data()));
    }, "writing features");
  write_gz(raw / "node-label.csv.gz", g.node_chunks(), [&](std::int64_t c, std::string& s) {
    const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
    for (std::int64_t v = b; v < e; ++v) (s += std::to_string(g.cls[std::size_t(v)])) += '\n';
  }, "");
  const char* names[3] = {"train", "valid", "test"};
  for (int part = 0; part < 3; ++part)
    write_gz(split / (std::string(names[part]) + ".csv.gz"), g.node_chunks(),
             [&](std::int64_t c, std::string& s) {
               const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
               for (std::int64_t v = b; v < e; ++v)
                 if (g.split_of(v) == part) (s += std::to_string(v)) += '\n';
             }, "");
  stage.commit();
}

}  // namespace

GenerateReport generate(const fs::path& dir, const GenerateOptions& options) {
  Stopwatch clock;
  check(options);
  const Model g(options);
  if (options.format == "ogb")
    write_ogb(g, dir);
  else
    write_native(g, dir);
  return {options.nodes, g.m, clock.seconds()};
}

}  // namespace halo

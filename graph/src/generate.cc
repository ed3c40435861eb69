// halo generate: checks the options, then writes the model's graph (generate_model.h, where the
// model and its math are) as a native dataset or as an OGB raw layout, in chunks drawn on any
// number of threads with the same output.
#include "halo/graph/generate.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "generate_model.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/gzip_writer.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
using namespace generate_model;

namespace {

// Bounds on sizes, far above any use and checked before anything is allocated: 2^34 edges is
// ten times ogbn-papers100M; feature rows are built kNodeChunk at a time (a 4096-wide chunk
// is 256 MiB of floats, 1 GiB of OGB text); one alias table is built per class.
constexpr std::int64_t kMaxGeneratedEdges = std::int64_t(1) << 34;
constexpr std::int64_t kMaxGeneratedFeatures = 4096;
constexpr std::int64_t kMaxGeneratedClasses = 16384;

// Bytes a native dataset of these options takes at most while it is written (the CSR counted
// before duplicates merge, and the spilled edges); the OGB text is of the same order.
std::uint64_t dataset_bytes(const GenerateOptions& o) {
  const auto n = std::uint64_t(o.nodes), m = std::uint64_t(drawn_edges(o));
  // The CSR, and the edges spilled while it is built (two ids an edge).
  const std::uint64_t csr = 4 * m * sizeof(NodeId) + (n + 1) * sizeof(EdgeId);
  return csr + n * std::uint64_t(o.features) * sizeof(float) + 2 * n * sizeof(std::int32_t) +
         (1 << 20);  // labels, splits, headers and meta
}

// Every real option is finite (DESIGN.md, invariant 7): comparisons alone let inf through
// (inf > 0), and NaN fails every comparison, so each check is written to be false for NaN.
// Sizes are bounded before anything is allocated: a typo must be a one-line error, not an
// allocation of terabytes.
void check(const GenerateOptions& o) {
  if (o.nodes < 2 || o.nodes > kMaxNodes) throw ParamError("--nodes must be in [2, 2^31)");
  if (o.edges < 0 || o.edges > kMaxGeneratedEdges)
    throw ParamError("--edges must be in [1, " + std::to_string(kMaxGeneratedEdges) + "], got " +
                     std::to_string(o.edges));
  if (o.edges == 0 && !(std::isfinite(o.avg_degree) && o.avg_degree > 0))
    throw ParamError("--avg-degree must be a finite number > 0 (or give --edges)");
  if (o.edges == 0 && double(o.nodes) * o.avg_degree / 2 > double(kMaxGeneratedEdges))
    throw ParamError("--avg-degree " + std::to_string(o.avg_degree) + " draws more than " +
                     std::to_string(kMaxGeneratedEdges) + " edges for " + std::to_string(o.nodes) +
                     " nodes");
  if (o.features < 0 || o.features > kMaxGeneratedFeatures)
    throw ParamError("--features must be in [0, " + std::to_string(kMaxGeneratedFeatures) + "]");
  if (o.classes < 1 || o.classes > o.nodes || o.classes > kMaxGeneratedClasses)
    throw ParamError("--classes must be in [1, min(nodes, " + std::to_string(kMaxGeneratedClasses) +
                     ")]");
  if (!(o.homophily >= 0 && o.homophily <= 1)) throw ParamError("--homophily must be in [0, 1]");
  if (!(std::isfinite(o.skew) && o.skew > 1)) throw ParamError("skew must be a finite number > 1");
  if (!(std::isfinite(o.noise) && o.noise >= 0))
    throw ParamError("--noise must be a finite number >= 0");
  if (!(o.locality >= 0 && o.locality <= 1)) throw ParamError("--locality must be in [0, 1]");
  if (o.community_size < 1) throw ParamError("--community-size must be >= 1");
  if (o.neighbourhood_classes < 1) throw ParamError("--neighbourhood-classes must be >= 1");
  // Community ids are int32 per node; only absurd sizes come near the bound.
  if (o.locality > 0 && double(o.nodes) / double(o.community_size) + double(o.classes) >= 2e9)
    throw ParamError("--community-size too small for this many nodes");
  if (o.format != "native" && o.format != "ogb")
    throw ParamError("--format must be native or ogb, not '" + o.format + "'");
}

// The edge chunks are dealt to `groups` contiguous runs, each walked by one thread at a time,
// so that whatever a group counts or places needs no atomics: an atomic add per entry, on a
// cache line that misses, serialises the misses and made the placing pass 2.3x slower.
int edge_groups() { return std::clamp(omp_get_max_threads(), 1, 8); }

// The drawn edges, spilled once to a file (8 bytes an edge, at the edge's place in the stream,
// so chunks are written in any order): the placing passes read them back instead of drawing
// them again, since a draw costs about two cache misses on GiB-sized tables (16 minutes a pass
// at ogbn-papers100M size on 2 cores) and reading 8 bytes back costs little next to that.
class EdgeSpill {
 public:
  EdgeSpill(fs::path path, std::int64_t edges)
      : path_(std::move(path)),
        writer_(std::make_unique<ArrayFileWriter>(path_, DType::kInt32, std::uint64_t(edges), 2)) {}
  ~EdgeSpill() {
    writer_.reset();
    if (fd_ >= 0) ::close(fd_);
    std::error_code ec;
    fs::remove(path_, ec);
  }
  EdgeSpill(const EdgeSpill&) = delete;
  EdgeSpill& operator=(const EdgeSpill&) = delete;

  // Stores chunk c's edges (s[i], t[i]); safe to call from several threads for other chunks.
  void write(std::int64_t c, const std::vector<NodeId>& s, const std::vector<NodeId>& t,
             std::vector<NodeId>& scratch) const {
    scratch.resize(2 * s.size());
    for (std::size_t i = 0; i < s.size(); ++i) scratch[2 * i] = s[i], scratch[2 * i + 1] = t[i];
    writer_->write_rows(std::uint64_t(c * kEdgeChunk), scratch.data(), s.size());
  }
  // Ends the writing: read() may be called from then on.
  void seal() {
    writer_.reset();
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_system(path_, "cannot open");
  }
  // Reads chunk c's `count` edges back into s and t; safe from several threads.
  void read(std::int64_t c, std::int64_t count, std::vector<NodeId>& s, std::vector<NodeId>& t,
            std::vector<NodeId>& scratch) const {
    scratch.resize(std::size_t(2 * count));
    auto* p = reinterpret_cast<char*>(scratch.data());
    std::size_t left = scratch.size() * sizeof(NodeId);
    auto at = off_t(kArrayHeaderBytes + std::uint64_t(c * kEdgeChunk) * 2 * sizeof(NodeId));
    while (left > 0) {
      const ssize_t got = ::pread(fd_, p, left, at);
      if (got <= 0) throw_system(path_, got == 0 ? "unexpected end of file" : "read failed");
      p += got, at += got, left -= std::size_t(got);
    }
    s.resize(std::size_t(count));
    t.resize(std::size_t(count));
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = scratch[2 * i], t[i] = scratch[2 * i + 1];
  }

 private:
  fs::path path_;
  std::unique_ptr<ArrayFileWriter> writer_;
  int fd_ = -1;
};

// Calls place(group, u, v) for every edge of the stream, whose chunk c source(c, s, t, scratch)
// puts in s and t; calls for one group never overlap.
template <class Source, class Fn>
void for_each_edge(const Model& g, int groups, const std::string& label, Source&& source,
                   Fn&& place) {
  const std::int64_t chunks = g.edge_chunks();
  Progress progress(label, std::uint64_t(chunks));
  std::atomic<std::int64_t> done{0};
#pragma omp parallel
  {
    std::vector<NodeId> s, t, scratch;
#pragma omp for schedule(dynamic, 1)
    for (int k = 0; k < groups; ++k)
      for (std::int64_t c = chunks * k / groups; c < chunks * (k + 1) / groups; ++c) {
        source(c, s, t, scratch);
        for (std::size_t i = 0; i < s.size(); ++i) place(k, s[i], t[i]);
        const std::int64_t d = done.fetch_add(1, std::memory_order_relaxed) + 1;
        if (omp_get_thread_num() == 0) progress.update(std::uint64_t(d));
      }
  }
}

// Draws the edge stream once, spilling it, and returns the entries of each row (before
// duplicates merge) that each group draws: group k's count of row r is at [k * n + r]. Each
// drawn edge u-v is an entry of row u and one of row v (never u == v).
std::vector<std::int32_t> group_degrees(const Model& g, int groups, const EdgeSpill& spill) {
  const auto n = std::size_t(g.o.nodes);
  std::vector<std::int32_t> cnt(std::size_t(groups) * n, 0);
  auto draw = [&](std::int64_t c, std::vector<NodeId>& s, std::vector<NodeId>& t,
                  std::vector<NodeId>& scratch) {
    g.edges(c, s, t);
    spill.write(c, s, t, scratch);
  };
  for_each_edge(g, groups, "drawing edges", draw, [&](int k, NodeId u, NodeId v) {
    ++cnt[std::size_t(k) * n + std::size_t(u)];
    ++cnt[std::size_t(k) * n + std::size_t(v)];
  });
  return cnt;
}

// The symmetric CSR (rows sorted, duplicates merged), built without holding the edge list:
// one pass draws the edges, spills them and counts the degrees, then each pass over the
// spilled edges places the entries of the rows whose raw entries fit batch_entries (4 bytes
// each) and writes them out sorted and merged. Memory: 8 + 4 * groups bytes a node and one
// batch, whatever the edge count; disk: 8 bytes an edge while it runs.
// Returns the number of entries written (rows of "indices").
EdgeId write_csr(const Model& g, DatasetWriter& w) {
  const std::int64_t n = g.o.nodes;
  const int groups = edge_groups();
  EdgeSpill spill(w.staging_dir() / ".edges.spill", g.m);  // removed before the commit
  const std::vector<std::int32_t> cnt = group_degrees(g, groups, spill);
  spill.seal();
  std::vector<EdgeId> raw(std::size_t(n + 1), 0);  // offsets before duplicates merge
  for (std::int64_t r = 0; r < n; ++r) {
    EdgeId d = 0;
    for (int k = 0; k < groups; ++k) d += cnt[std::size_t(k * n + r)];
    raw[std::size_t(r + 1)] = raw[std::size_t(r)] + d;
  }
  auto indices = w.open("indices", DType::kInt32, std::uint64_t(raw.back()), 1);
  auto offsets = w.open("offsets", DType::kInt64, std::uint64_t(n + 1), 1);
  const EdgeId zero = 0;
  offsets->write_rows(0, &zero, 1);
  const auto budget = std::max<EdgeId>(1, g.o.batch_entries);
  const auto batches = std::max<EdgeId>(1, (raw.back() + budget - 1) / budget);
  std::vector<NodeId> buf;
  std::vector<EdgeId> cur;  // [k * rows + i]: group k's next slot in row a + i; then offsets
  EdgeId written = 0;
  for (std::int64_t a = 0, pass = 1; a < n; ++pass) {
    // The longest run of rows from a whose entries fit the budget, at least one row.
    const auto it = std::upper_bound(raw.begin() + a + 1, raw.end(), raw[std::size_t(a)] + budget);
    const std::int64_t b = std::max(a + 1, std::int64_t(it - raw.begin()) - 1), rows = b - a;
    const EdgeId base = raw[std::size_t(a)];
    buf.resize(std::size_t(raw[std::size_t(b)] - base));
    cur.resize(std::size_t(groups * rows));
    for (std::int64_t i = 0; i < rows; ++i) {  // group k writes after groups 0..k-1
      EdgeId at = raw[std::size_t(a + i)] - base;
      for (int k = 0; k < groups; ++k) {
        cur[std::size_t(k * rows + i)] = at;
        at += cnt[std::size_t(k * n + a + i)];
      }
    }
    auto put = [&](int k, NodeId row, NodeId col) {
      if (row >= a && row < b) buf[std::size_t(cur[std::size_t(k * rows + row - a)]++)] = col;
    };
    const std::string label = batches > 1 ? "placing edges (pass " + std::to_string(pass) +
                                                " of ~" + std::to_string(batches) + ")"
                                          : "placing edges";
    auto reread = [&](std::int64_t c, std::vector<NodeId>& s, std::vector<NodeId>& t,
                      std::vector<NodeId>& scratch) {
      spill.read(c, std::min(g.m, (c + 1) * kEdgeChunk) - c * kEdgeChunk, s, t, scratch);
    };
    for_each_edge(g, groups, label, reread,
                  [&](int k, NodeId u, NodeId v) { put(k, u, v), put(k, v, u); });
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t r = a; r < b; ++r) {  // sort and merge each row in place
      NodeId* first = buf.data() + (raw[std::size_t(r)] - base);
      NodeId* last = buf.data() + (raw[std::size_t(r) + 1] - base);
      std::sort(first, last);
      cur[std::size_t(r - a)] = std::unique(first, last) - first;  // merged degree
    }
    EdgeId end = 0;  // compact the merged rows to the front; a row never moves right
    for (std::int64_t r = a; r < b; ++r) {
      const EdgeId d = cur[std::size_t(r - a)];
      std::memmove(buf.data() + end, buf.data() + (raw[std::size_t(r)] - base),
                   std::size_t(d) * sizeof(NodeId));
      end += d;
      cur[std::size_t(r - a)] = written + end;  // offsets[r + 1]
    }
    indices->write_rows(std::uint64_t(written), buf.data(), std::uint64_t(end));
    offsets->write_rows(std::uint64_t(a + 1), cur.data(), std::uint64_t(rows));
    written += end;
    a = b;
  }
  indices->shrink_rows(std::uint64_t(written));
  w.record("indices", indices->finish());
  w.record("offsets", offsets->finish());
  return written;
}

void write_native(const Model& g, const fs::path& dir) {
  const auto& o = g.o;
  GraphDataset d;  // the metadata only: arrays are written as they are made
  d.name = printable(dir.filename().string(), 255);  // shown as is: text only
  DatasetWriter w(dir, o.overwrite);
  const EdgeId entries = write_csr(g, w);
  if (o.features > 0) {
    auto out =
        w.open("features", DType::kFloat32, std::uint64_t(o.nodes), std::uint64_t(o.features));
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
  w.put("labels", g.cls.data(), std::uint64_t(o.nodes));
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
  meta["nodes"] = o.nodes;  // d holds no graph
  meta["edges"] = entries;
  meta["source"] = {{"format", "generate"},
                    {"seed", o.seed},
                    {"edges_drawn", g.m},
                    {"homophily", o.homophily},
                    {"noise", o.noise}};
  if (o.locality > 0) {  // only with the knob: without it meta.json stays byte for byte the same
    meta["source"]["locality"] = o.locality;
    meta["source"]["community_size"] = o.community_size;
    meta["source"]["neighbourhood_classes"] = g.layout.run_len;
    meta["source"]["communities"] = g.layout.communities(o);
    meta["source"]["neighbourhoods"] = g.layout.neighbourhoods();
  }
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
  StagingDir stage(dir, "ogb", o.overwrite);
  const fs::path raw = stage.path() / "raw";
  const fs::path split = stage.path() / "split" / "random";
  fs::create_directories(raw);
  fs::create_directories(split);
  auto one_number = [](std::int64_t v) {
    return [v](std::int64_t, std::string& s) { s = std::to_string(v) + "\n"; };
  };
  write_gz(raw / "num-node-list.csv.gz", 1, one_number(o.nodes), "");
  write_gz(raw / "num-edge-list.csv.gz", 1, one_number(g.m), "");
  write_gz(
      raw / "edge.csv.gz", g.edge_chunks(),
      [&](std::int64_t c, std::string& s) {
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
      },
      "writing edges");
  if (o.features > 0)
    write_gz(
        raw / "node-feat.csv.gz", g.node_chunks(),
        [&](std::int64_t c, std::string& s) {
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
        },
        "writing features");
  write_gz(
      raw / "node-label.csv.gz", g.node_chunks(),
      [&](std::int64_t c, std::string& s) {
        const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
        for (std::int64_t v = b; v < e; ++v) (s += std::to_string(g.cls[std::size_t(v)])) += '\n';
      },
      "");
  const char* names[3] = {"train", "valid", "test"};
  for (int part = 0; part < 3; ++part)
    write_gz(
        split / (std::string(names[part]) + ".csv.gz"), g.node_chunks(),
        [&](std::int64_t c, std::string& s) {
          const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
          for (std::int64_t v = b; v < e; ++v)
            if (g.split_of(v) == part) (s += std::to_string(v)) += '\n';
        },
        "");
  stage.commit();
}

}  // namespace

std::int64_t generated_neighbourhoods(const GenerateOptions& options) {
  check(options);
  return Layout(options).neighbourhoods();
}

GeneratedPlace generated_place(const GenerateOptions& options, std::int64_t v) {
  check(options);
  if (v < 0 || v >= options.nodes) throw ParamError("node id out of range [0, nodes)");
  GeneratedPlace p;
  p.cls = class_of(options, v);
  const Layout layout(options);
  if (layout.slots > 0) {
    const std::int64_t slot = layout.slot_of(options, v);
    p.community = layout.community(p.cls, slot);
    p.neighbourhood = layout.neighbourhood(options, p.cls, slot);
  }
  return p;
}

GenerateReport generate(const fs::path& dir, const GenerateOptions& options) {
  Stopwatch clock;
  check(options);
  resolve_dir_output(dir, options.format == "ogb" ? "ogb" : "halo-dataset",
                     options.overwrite);  // before the work
  check_free_space(dir, dataset_bytes(options), "this graph");
  const Model g(options);
  if (options.format == "ogb")
    write_ogb(g, dir);
  else
    write_native(g, dir);
  return {options.nodes, g.m, g.layout.neighbourhoods(), clock.seconds()};
}

}  // namespace halo

// `halo convert`: format detection and the conversion pipeline. OGB directories are streamed
// (edges -> CSR in memory; features straight to the output file, permuted on the fly when
// reordering) so peak memory stays near one edge list plus one CSR; the other formats are
// small enough to read whole.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "halo/graph/algorithms.h"
#include "halo/graph/enum_names.h"
#include "halo/graph/formats.h"
#include "halo/graph/npz.h"
#include "halo/graph/progress.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr EnumName<Format> kFormats[] = {
    {Format::kAuto, "auto"},         {Format::kOgb, "ogb"},       {Format::kMetis, "metis"},
    {Format::kEdgeList, "edgelist"}, {Format::kKonect, "konect"}, {Format::kSnap, "snap"},
    {Format::kJodie, "jodie"}};
constexpr EnumName<NodeOrder> kNodeOrders[] = {{NodeOrder::kNone, "none"},
                                               {NodeOrder::kRcm, "rcm"}};
}  // namespace

Format parse_format(const std::string& name) { return parse_enum(kFormats, "format", name); }

const char* format_name(Format f) { return enum_name(kFormats, f); }

NodeOrder parse_node_order(std::string_view s) { return parse_enum(kNodeOrders, "--reorder", s); }

bool is_temporal(Format f) {
  return f == Format::kKonect || f == Format::kSnap || f == Format::kJodie;
}

namespace {

// fs::exists without the exception: a path that cannot be looked at (a symlink loop, a
// directory without permission) is the input's problem, reported like any other.
bool present(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (st.type() == fs::file_type::not_found) return false;
  if (ec) throw InputError(p.string() + ": cannot read: " + ec.message());
  return true;
}

bool is_dir(const fs::path& p) { return present(p) && fs::is_directory(fs::status(p)); }

}  // namespace

Format detect_format(const fs::path& path) {
  if (!present(path)) throw InputError(path.string() + ": no such file or directory");
  if (is_dir(path)) {
    if (is_dir(path / "raw")) return Format::kOgb;
    if (present(path / "meta.json"))
      throw InputError(path.string() +
                       ": a halo dataset or partition already (meta.json): convert reads "
                       "raw formats (an OGB root with raw/, METIS, edge or event lists)");
    throw InputError(path.string() + ": a directory without raw/: expected an OGB dataset root");
  }
  const std::string ext = path.extension().string();
  if (ext == ".graph" || ext == ".mgraph" || ext == ".metis") return Format::kMetis;
  // Detecting reads the first line, then the reader opens the file again: a pipe would have
  // lost what was read (an empty dataset, silently) or wait for a writer that is gone.
  std::error_code ec;
  if (fs::status(path, ec).type() == fs::file_type::fifo)
    throw ParamError(printable(path.string()) +
                     ": a pipe, whose format cannot be detected without consuming it: name it "
                     "with --format (edgelist, konect, snap, jodie or metis)");
  const std::string first = read_first_line(path, InputKind::kStream);
  if (first.rfind("user_id", 0) == 0) return Format::kJodie;
  if (first.rfind('%', 0) == 0) {
    const auto p = first.find_first_not_of("% \t");
    const std::string word =
        p == std::string::npos ? "" : first.substr(p, first.find_first_of(" \t", p) - p);
    if (word == "sym" || word == "asym" || word == "bip") return Format::kKonect;
  }
  return Format::kEdgeList;
}

namespace {

struct OgbPaths {
  fs::path root, raw;
  bool binary = false;  // ogbn-papers100M: raw/data.npz + raw/node-label.npz
};

fs::path require(const fs::path& p, const std::string& why) {
  if (!present(p)) throw InputError(p.string() + ": missing (" + why + ")");
  return p;
}

// Streams node-feat.csv.gz rows into the features array, row r landing at inv[r] (or r).
std::int64_t stream_text_features(const fs::path& path, std::int64_t n, DatasetWriter& w,
                                  const std::vector<NodeId>& inv, std::uint64_t* text_bytes) {
  const std::string first = read_first_line(path);
  LineCursor head(path, first, 1);
  head.next_line();
  const int f = head.count_fields();
  if (f == 0) throw_input(path, 1, "expected feature values, found an empty line");
  auto out = w.open("features", DType::kFloat32, std::uint64_t(n), std::uint64_t(f));
  // Rows are written 4096 at a time, fewer when rows are wide: the batch stays within 16 MiB
  // whatever the column count of the first line claims.
  const std::int64_t kBatch =
      std::clamp<std::int64_t>((std::int64_t(16) << 20) / (4 * std::int64_t(f)), 1, 4096);
  std::vector<float> batch(static_cast<std::size_t>(kBatch * f));
  std::int64_t rows = 0, batch_start = 0, in_batch = 0;
  *text_bytes += for_each_line(
      path,
      [&](LineCursor& c) {
        if (rows >= n)
          c.fail("more feature rows than the " + std::to_string(n) +
                 " nodes num-node-list.csv.gz declares");
        float* row = batch.data() + in_batch * f;
        for (int k = 0; k < f; ++k) row[k] = c.next_float("a feature value");
        c.expect_end(f);
        if (!inv.empty()) {
          out->write_rows(std::uint64_t(inv[std::size_t(rows)]), row, 1);
        } else if (++in_batch == kBatch) {
          out->write_rows(std::uint64_t(batch_start), batch.data(), std::uint64_t(in_batch));
          batch_start += in_batch;
          in_batch = 0;
        }
        ++rows;
      },
      "reading features");
  if (inv.empty())
    out->write_rows(std::uint64_t(batch_start), batch.data(), std::uint64_t(in_batch));
  if (rows != n)
    throw_input(path, 0,
                "has " + std::to_string(rows) + " feature rows, num-node-list.csv.gz declares " +
                    std::to_string(n) + " nodes");
  w.record("features", out->finish());
  return f;
}

// Binary layout: streams node_feat from data.npz, converting to float32.
std::int64_t stream_npz_features(const NpzReader& npz, const fs::path& path, std::int64_t n,
                                 DatasetWriter& w, const std::vector<NodeId>& inv) {
  const NpyArrayInfo info = npz.info("node_feat");
  if (info.shape.size() != 2 || std::int64_t(info.shape[0]) != n)
    throw_input(path, 0, "node_feat: expected shape [" + std::to_string(n) + ", F]");
  const std::uint64_t f = info.shape[1];
  auto out = w.open("features", DType::kFloat32, std::uint64_t(n), f);
  std::vector<float> row(f);
  stream_as<float>(npz, "node_feat", [&](const float* v, std::size_t count, std::uint64_t first) {
    // Features are finite whatever format they come in (DESIGN.md, invariant 7).
    for (std::size_t i = 0; i < count; ++i)
      if (!std::isfinite(v[i]))
        throw_input(path, 0,
                    "node_feat[" + std::to_string((first + i) / f) + ", " +
                        std::to_string((first + i) % f) + "] is " +
                        (std::isnan(v[i]) ? "NaN" : "infinite") + ": expected finite features");
    if (inv.empty()) {
      // Whole rows go straight out; a partial row is completed through the row buffer.
      std::uint64_t i = 0;
      while (i < count) {
        const std::uint64_t idx = first + i;
        const std::uint64_t r = idx / f, col = idx % f;
        if (col == 0 && count - i >= f) {
          const std::uint64_t whole = (count - i) / f;
          out->write_rows(r, v + i, whole);
          i += whole * f;
          continue;
        }
        row[col] = v[i++];
        if (col + 1 == f) out->write_rows(r, row.data(), 1);
      }
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t idx = first + i;
        row[idx % f] = v[i];
        if (idx % f + 1 == f) out->write_rows(std::uint64_t(inv[idx / f]), row.data(), 1);
      }
    }
  });
  w.record("features", out->finish());
  return std::int64_t(f);
}

EdgeList read_npz_edges(const NpzReader& npz, const fs::path& path, std::int64_t n) {
  const NpyArrayInfo info = npz.info("edge_index");
  if (info.shape.size() != 2 || info.shape[0] != 2)
    throw_input(path, 0, "edge_index: expected shape [2, E]");
  const std::uint64_t e = info.shape[1];
  EdgeList edges;
  edges.num_nodes = n;
  edges.src.resize(e);
  edges.dst.resize(e);
  stream_as<std::int64_t>(
      npz, "edge_index", [&](const std::int64_t* v, std::size_t count, std::uint64_t first) {
        for (std::size_t i = 0; i < count; ++i) {
          const std::uint64_t idx = first + i;
          if (v[i] < 0 || v[i] >= n)
            throw_input(path, 0,
                        "edge_index[" + std::to_string(idx / e) + ", " + std::to_string(idx % e) +
                            "] = " + std::to_string(v[i]) + " out of range [0, " +
                            std::to_string(n) + ")");
          (idx < e ? edges.src[idx] : edges.dst[idx - e]) = NodeId(v[i]);
        }
      });
  return edges;
}

std::int64_t npz_count(const NpzReader& npz, const fs::path& path, const char* key) {
  const auto v = read_all_as<std::int64_t>(npz, key);
  if (v.size() != 1)
    throw_input(path, 0,
                std::string(key) + ": expected one graph (a node-property dataset), found " +
                    std::to_string(v.size()));
  return v[0];
}

// Reads the node count and the edge list, from data.npz (kept open in *npz for the features)
// or from the CSV files; separate because the two layouts differ only here and below.
EdgeList read_ogb_graph(const OgbPaths& p, std::unique_ptr<NpzReader>& npz, std::int64_t* n_out,
                        std::uint64_t* text_bytes) {
  std::int64_t n = 0;
  EdgeList edges;
  if (p.binary) {
    const fs::path data = p.raw / "data.npz";
    npz = std::make_unique<NpzReader>(data);
    n = npz_count(*npz, data, "num_nodes_list");
    if (n > kMaxNodes) throw_input(data, 0, "more nodes than halo's int32 node ids allow");
    edges = read_npz_edges(*npz, data, n);
  } else {
    n = read_count_file(require(p.raw / "num-node-list.csv.gz", "OGB raw layout"));
    if (n > kMaxNodes)
      throw_input(p.raw / "num-node-list.csv.gz", 0, "more nodes than int32 ids allow");
    const std::int64_t e =
        read_count_file(require(p.raw / "num-edge-list.csv.gz", "OGB raw layout"));
    const fs::path ef = require(p.raw / "edge.csv.gz", "OGB raw layout");
    edges = read_ogb_edges(ef, n, e, text_bytes);
  }
  *n_out = n;
  return edges;
}

// Reads node_label of node-label.npz at lp (NaN: unlabelled, -1) and sets *label_cols; separate
// because the binary layout's labels need their own shape and value checks.
std::vector<std::int32_t> read_npz_labels(const fs::path& lp, std::int64_t n,
                                          std::int64_t* label_cols) {
  std::vector<std::int32_t> labels;
  NpzReader lab(lp);
  const NpyArrayInfo info = lab.info("node_label");
  if (info.shape.empty() || info.shape.size() > 2 || std::int64_t(info.shape[0]) != n)
    throw_input(lp, 0,
                "node_label: expected shape (" + std::to_string(n) + ",) or (" + std::to_string(n) +
                    ", T), found " + std::to_string(info.shape.size()) + " dimensions");
  *label_cols = info.shape.size() > 1 ? std::int64_t(info.shape[1]) : 1;
  labels.reserve(std::size_t(n * *label_cols));
  stream_as<double>(lab, "node_label",
                    [&](const double* v, std::size_t count, std::uint64_t first) {
                      for (std::size_t i = 0; i < count; ++i) {
                        if (std::isnan(v[i])) {
                          labels.push_back(-1);
                        } else if (v[i] < 0 || v[i] >= INT32_MAX || v[i] != std::floor(v[i])) {
                          throw_input(lp, 0,
                                      "node_label[" + std::to_string(first + i) +
                                          "]: expected a non-negative integer below " +
                                          std::to_string(INT32_MAX) + " or NaN");
                        } else {
                          labels.push_back(std::int32_t(v[i]));
                        }
                      }
                    });
  return labels;
}

// Reads the labels of either layout into d, checks them and writes them (permuted by order when
// reordering); separate because labels are optional and have their own checks.
void convert_ogb_labels(const OgbPaths& p, std::int64_t n, const std::vector<NodeId>& order,
                        GraphDataset& d, DatasetWriter& w, std::uint64_t* text_bytes) {
  std::vector<std::int32_t> labels;
  const fs::path label_file =
      p.raw /
      (p.binary && present(p.raw / "node-label.npz") ? "node-label.npz" : "node-label.csv.gz");
  if (p.binary && present(p.raw / "node-label.npz")) {
    labels = read_npz_labels(label_file, n, &d.label_cols);
  } else if (present(p.raw / "node-label.csv.gz")) {
    labels = read_ogb_labels(p.raw / "node-label.csv.gz", n, &d.label_cols, text_bytes);
  }
  if (d.label_cols > 0) {
    d.label_kind = d.label_cols > 1 ? LabelKind::kMultilabel : LabelKind::kMulticlass;
    std::int32_t mx = -1;
    for (std::int32_t v : labels) mx = std::max(mx, v);
    d.num_classes = d.label_kind == LabelKind::kMultilabel ? 2 : std::int64_t(mx) + 1;
    d.labels = Array<std::int32_t>(std::move(labels));
    // What a reader checks, checked before anything is committed (multilabel: 0, 1 or -1).
    check_labels(label_file, d.labels, d.label_kind, d.label_cols, d.num_classes);
    if (!order.empty()) d.labels = permute_rows(d.labels, std::size_t(d.label_cols), order);
    w.put("labels", d.labels, std::uint64_t(d.label_cols));
  }
}

// Reads every split under split/ (train, valid and test node ids, renumbered by inv when
// reordering) into d and writes them; separate because splits are optional and many.
void convert_ogb_splits(const OgbPaths& p, std::int64_t n, const std::vector<NodeId>& inv,
                        GraphDataset& d, DatasetWriter& w, std::uint64_t* text_bytes) {
  const fs::path split_root = p.root / "split";
  if (!is_dir(split_root)) return;
  std::vector<fs::path> names;
  for (const auto& entry : fs::directory_iterator(split_root))
    if (is_dir(entry.path())) names.push_back(entry.path());
  std::sort(names.begin(), names.end());
  std::vector<std::uint8_t> owner;  // per node: 0, or 1/2/3 for train/valid/test of this split
  for (const auto& dir : names) {
    Split s;
    s.name = dir.filename().string();
    // A split's name is what --split takes and what every report shows: text only.
    if (!is_printable(s.name))
      throw InputError(printable(dir.string()) +
                       ": a split name with control bytes (expected printable text)");
    owner.assign(std::size_t(n), 0);
    std::vector<std::string> files;  // the set files read so far, named in overlap errors
    auto load = [&](const char* part) {
      fs::path f = dir / (std::string(part) + ".csv.gz");
      if (!present(f) && present(dir / (std::string(part) + ".csv")))
        f = dir / (std::string(part) + ".csv");
      require(f, std::string("split '") + s.name + "' needs train, valid and test");
      files.push_back(f.filename().string());
      std::vector<NodeId> ids =
          read_index_file(f, n, owner, std::uint8_t(files.size()), files, text_bytes);
      if (!inv.empty()) {
        for (auto& v : ids) v = inv[std::size_t(v)];
        std::sort(ids.begin(), ids.end());
      }
      return Array<NodeId>(std::move(ids));
    };
    s.train = load("train");
    s.valid = load("valid");
    s.test = load("test");
    w.put("split." + s.name + ".train", s.train);
    w.put("split." + s.name + ".valid", s.valid);
    w.put("split." + s.name + ".test", s.test);
    d.splits.push_back(std::move(s));
  }
}

ConvertReport convert_ogb(const fs::path& input, const fs::path& output,
                          const ConvertOptions& opt) {
  ConvertReport rep;
  OgbPaths p;
  p.root = input;
  p.raw = input / "raw";
  p.binary = present(p.raw / "data.npz") && !present(p.raw / "edge.csv.gz");
  GraphDataset d;
  d.name = opt.name.empty() ? fs::absolute(input).lexically_normal().filename().string() : opt.name;
  if (d.name.empty()) d.name = fs::absolute(input).parent_path().filename().string();
  d.name = printable(d.name, 255);  // a folder's name may hold any byte; a dataset's is text
  d.directed = opt.directed;

  std::int64_t n = 0;
  std::unique_ptr<NpzReader> npz;
  EdgeList edges = read_ogb_graph(p, npz, &n, &rep.text_bytes);
  d.graph = build_csr(std::move(edges), {.symmetrize = !opt.directed});

  std::vector<NodeId> order, inv;
  if (opt.reorder == NodeOrder::kRcm) {
    order = rcm_order(d.graph.view());
    d.graph = permute_csr(d.graph.view(), order);
    inv.resize(order.size());
    for (std::size_t u = 0; u < order.size(); ++u) inv[std::size_t(order[u])] = NodeId(u);
    d.reorder = "rcm";
    d.original_ids = Array<NodeId>(order);
  }

  DatasetWriter w(output, opt.overwrite);
  w.put("offsets", d.graph.offsets.data(), std::uint64_t(n + 1));
  w.put("indices", d.graph.indices);

  if (p.binary) {
    if (npz->contains("node_feat"))
      d.num_features = stream_npz_features(*npz, p.raw / "data.npz", n, w, inv);
  } else if (present(p.raw / "node-feat.csv.gz")) {
    d.num_features = stream_text_features(p.raw / "node-feat.csv.gz", n, w, inv, &rep.text_bytes);
  }

  convert_ogb_labels(p, n, order, d, w, &rep.text_bytes);
  convert_ogb_splits(p, n, inv, d, w, &rep.text_bytes);
  if (!d.original_ids.empty()) w.put("original_ids", d.original_ids);

  json meta = graph_meta(d);
  meta["source"] = {{"format", p.binary ? "ogb-npz" : "ogb"},
                    {"path", printable(fs::absolute(input).string(), 4096)}};
  w.commit(std::move(meta));
  rep.kind = "graph";
  rep.nodes = n;
  rep.edges = d.graph.num_edges();
  return rep;
}

}  // namespace

ConvertReport convert(const fs::path& input, const fs::path& output, const ConvertOptions& opt) {
  Stopwatch clock;
  // Before any reading (staging.h): an output that exists without --force, is not a halo
  // dataset, or would replace or write into the input is refused.
  resolve_dir_output(output, "halo-dataset", opt.overwrite, {input});
  if (opt.num_nodes < 0 || opt.num_nodes > kMaxNodes)
    throw ParamError("--num-nodes must be in [1, " + std::to_string(kMaxNodes) + "], got " +
                     std::to_string(opt.num_nodes));
  if (!is_printable(opt.name))
    throw ParamError("--name: control bytes in \"" + printable(opt.name, 40) +
                     "\" (a dataset's name is printable text)");
  const Format f = opt.format == Format::kAuto ? detect_format(input) : opt.format;
  if (opt.reorder == NodeOrder::kRcm && (opt.directed || is_temporal(f)))
    throw ParamError("--reorder rcm needs an undirected graph");
  // A flag the format ignores would be silently dropped: say so instead.
  if (f != Format::kEdgeList && (opt.num_nodes > 0 || opt.one_based))
    throw ParamError(std::string(opt.num_nodes > 0 ? "--num-nodes" : "--one-based") +
                     " applies to edge lists only, not to " + format_name(f) + " input");
  if (opt.allow_sparse_ids && f != Format::kEdgeList && !is_temporal(f))
    throw ParamError(
        std::string("--allow-sparse-ids applies to edge and event lists only, not to ") +
        format_name(f) + " input");
  ConvertReport rep;
  if (f == Format::kOgb) {
    if (!is_dir(input)) throw InputError(input.string() + ": expected an OGB dataset directory");
    rep = convert_ogb(input, output, opt);
  } else if (is_temporal(f)) {
    TemporalDataset t = f == Format::kKonect ? read_konect(input, opt.allow_sparse_ids)
                        : f == Format::kSnap ? read_snap(input, opt.allow_sparse_ids)
                                             : read_jodie(input, opt.allow_sparse_ids);
    if (!opt.name.empty()) t.name = opt.name;
    write_temporal_dataset(t, output, opt.overwrite);
    rep.kind = "temporal";
    rep.nodes = t.num_nodes;
    rep.events = t.num_events();
  } else {
    GraphDataset d = f == Format::kMetis
                         ? read_metis(input)
                         : read_edge_list(input, {.one_based = opt.one_based,
                                                  .directed = opt.directed,
                                                  .num_nodes = opt.num_nodes,
                                                  .allow_sparse_ids = opt.allow_sparse_ids});
    if (!opt.name.empty()) d.name = opt.name;
    if (opt.reorder == NodeOrder::kRcm) {
      reorder_dataset(d, rcm_order(d.graph.view()));
      d.reorder = "rcm";
    }
    const json extra = {
        {"source",
         {{"format", format_name(f)}, {"path", printable(fs::absolute(input).string(), 4096)}}}};
    write_graph_dataset(d, output, opt.overwrite, &extra);
    rep.kind = "graph";
    rep.nodes = d.num_nodes();
    rep.edges = d.graph.num_edges();
  }
  rep.format = f;
  rep.seconds = clock.seconds();
  return rep;
}

}  // namespace halo

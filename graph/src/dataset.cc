// Native datasets, reading: meta.json (its fields checked once, read_meta) and the array files
// it lists, mapped and checked against it. Writing is in dataset_writer.cc, the structure
// checks (check_offsets, check_symmetric, ...) in dataset_checks.cc.
#include "halo/graph/dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "dataset_internal.h"
#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace dataset_internal;  // shared by the three dataset files (dataset_internal.h)

namespace dataset_internal {

// The first string or key under j (at `where`) that printable() would change, a control byte
// (NUL, ESC, DEL, C1) or invalid UTF-8, as {where, text}; none when there is none. Names reach
// terminals and logs, and a NUL cuts them short in every C API. Nesting is bounded by
// parse_json (and by the writers), so the recursion is too. "source" (where a dataset came
// from, a path of any bytes) is never shown and not searched.
std::optional<std::pair<std::string, std::string>> find_unprintable(const json& j,
                                                                    const std::string& where) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (!is_printable(s)) return std::pair{where, s};
  } else if (j.is_object()) {
    for (const auto& [key, v] : j.items()) {
      // Where it is, as a message shows it: a key's own bytes escaped (a NUL would cut the
      // message, which is a C string to what()).
      const std::string shown = printable(key, 40);
      const std::string at = where.empty() ? shown : where + "." + shown;
      if (!is_printable(key)) return std::pair{at, key};
      if (where.empty() && key == "source") continue;
      if (auto bad = find_unprintable(v, at)) return bad;
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      if (auto bad = find_unprintable(j[i], where + "[" + std::to_string(i) + "]")) return bad;
  }
  return std::nullopt;
}

}  // namespace dataset_internal

const char* label_kind_name(LabelKind k) {
  switch (k) {
    case LabelKind::kNone:
      return "none";
    case LabelKind::kMulticlass:
      return "multiclass";
    case LabelKind::kMultilabel:
      return "multilabel";
  }
  return "none";
}

LabelKind label_kind_from_name(const std::string& name) {
  return name == "multiclass"   ? LabelKind::kMulticlass
         : name == "multilabel" ? LabelKind::kMultilabel
                                : LabelKind::kNone;
}

const Split* GraphDataset::split(const std::string& n) const {
  for (const auto& s : splits)
    if (s.name == n) return &s;
  return nullptr;
}

// ---- meta.json fields ----------------------------------------------------------------------

namespace {
// A found value in a message: short and printable, never the whole untrusted value.
std::string shown(const json& v) { return json_shown(v); }
}  // namespace

std::int64_t meta_int(const json& j, const std::string& key, const fs::path& file, std::int64_t lo,
                      std::int64_t hi, std::optional<std::int64_t> fallback) {
  const auto range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!j.is_object() || !j.contains(key)) {
    if (fallback) return *fallback;
    throw_input(file, 0, "\"" + key + "\" is missing (expected " + range + ")");
  }
  const json& v = j[key];
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      throw_input(file, 0, "\"" + key + "\": expected " + range + ", found " + shown(v));
    x = std::int64_t(u);
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else {
    throw_input(file, 0, "\"" + key + "\": expected " + range + ", found " + shown(v));
  }
  if (x < lo || x > hi)
    throw_input(file, 0, "\"" + key + "\": expected " + range + ", found " + shown(v));
  return x;
}

std::string meta_string(const json& j, const std::string& key, const fs::path& file,
                        std::optional<std::string> fallback) {
  if (!j.is_object() || !j.contains(key)) {
    if (fallback) return *fallback;
    throw_input(file, 0, "\"" + key + "\" is missing (expected a string)");
  }
  if (!j[key].is_string())
    throw_input(file, 0, "\"" + key + "\": expected a string, found " + shown(j[key]));
  return j[key].get<std::string>();
}

bool meta_bool(const json& j, const std::string& key, const fs::path& file, bool fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  if (!j[key].is_boolean())
    throw_input(file, 0, "\"" + key + "\": expected true or false, found " + shown(j[key]));
  return j[key].get<bool>();
}

const json& meta_object(const json& j, const std::string& key, const fs::path& file) {
  if (!j.is_object() || !j.contains(key))
    throw_input(file, 0, "\"" + key + "\" is missing (expected an object)");
  if (!j[key].is_object())
    throw_input(file, 0, "\"" + key + "\": expected an object, found " + shown(j[key]));
  return j[key];
}

// ---- reader ------------------------------------------------------------------------------

json read_meta(const fs::path& dir, const std::string& format, int version) {
  const fs::path p = dir / "meta.json";
  // A replace killed midway leaves the old folder aside until someone restores it: a reader may.
  if (!fs::exists(dir) && !restore_set_aside(dir))
    throw_input(dir, 0, "missing (not a directory; expected a " + format + ")");
  if (!fs::is_directory(dir)) throw_input(dir, 0, "not a directory (expected a " + format + ")");
  if (!fs::exists(p)) throw_input(p, 0, "missing: not a halo " + format + " directory");
  // A regular file only (a FIFO would block, a directory is no file), depth-limited.
  json j = read_json_file(p);
  const json* fmt = j.is_object() && j.contains("format") ? &j["format"] : nullptr;
  if (!fmt || !fmt->is_string() || fmt->get<std::string>() != format) {
    std::string what =
        "not a " + format + " (\"format\" is " + (fmt ? shown(*fmt) : "missing") + ")";
    // The usual mix-up: a partition where a dataset is expected, or the reverse.
    if (fmt && *fmt == "halo-parts")
      what += ": a partition (halo partition's output) where a dataset is expected";
    if (fmt && *fmt == "halo-dataset")
      what += ": a dataset where a partition or one of its parts is expected";
    throw_input(p, 0, what);
  }
  const json* ver = j.contains("version") ? &j["version"] : nullptr;
  if (!ver || !ver->is_number_integer() || ver->get<std::int64_t>() != version)
    throw_input(p, 0,
                format + " version " + (ver ? shown(*ver) : "missing") +
                    ", this halo reads version " + std::to_string(version));
  if (!j.contains("arrays") || !j["arrays"].is_object())
    throw_input(p, 0, "malformed: no \"arrays\" table");
  for (const auto& [name, entry] : j["arrays"].items()) {
    const std::string where = "arrays." + name;
    // Array files live in this directory under their own name: a listed path can never reach
    // outside it (no '/', no "..").
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
        !entry.is_object() || meta_string(entry, "file", p, name + ".bin") != name + ".bin")
      throw_input(p, 0,
                  "\"" + where + "\": expected {\"file\": \"" + name +
                      ".bin\", \"crc32\": ...}, found " + shown(entry));
    meta_int(entry, "crc32", p, 0, 0xffffffffll);
  }
  if (j.contains("fingerprint")) meta_string(j, "fingerprint", p);
  return j;
}

namespace {

// Checks every field a graph or temporal dataset reader (and `halo info`) takes from meta.json,
// so that later .at() / .get() calls cannot throw and no size is negative or absurd. Sizes are
// bounded by what the id types hold; shapes are checked against the files before mapping.
void check_dataset_meta(const json& meta, const fs::path& p) {
  constexpr std::int64_t kMaxCount = std::int64_t(1) << 62;
  // Names (the dataset's, its splits' and arrays') are shown as they are: refused unless text.
  if (const auto bad = find_unprintable(meta, ""))
    throw_input(p, 0,
                "\"" + bad->first + "\": control bytes in \"" + printable(bad->second, 40) +
                    "\" (expected printable text)");
  const std::string kind = meta_string(meta, "kind", p, "graph");
  meta_string(meta, "name", p, "");
  meta_string(meta, "fingerprint", p, "");
  if (kind == "temporal") {
    const std::int64_t n = meta_int(meta, "nodes", p, 0, kMaxNodes);
    meta_int(meta, "users", p, 0, n, 0);
    meta_int(meta, "events", p, 0, kMaxCount);
    meta_int(meta, "edge_features", p, 0, INT32_MAX, 0);
    return;
  }
  if (kind != "graph")
    throw_input(p, 0, "\"kind\": expected \"graph\" or \"temporal\", found " + shown(meta["kind"]));
  const std::int64_t n = meta_int(meta, "nodes", p, 0, kMaxNodes);
  meta_int(meta, "edges", p, 0, kMaxCount);
  meta_bool(meta, "directed", p, false);
  meta_bool(meta, "edge_weights", p, false);
  meta_int(meta, "node_weights", p, 0, 1 << 16, 0);
  meta_int(meta, "features", p, 0, INT32_MAX, 0);
  meta_string(meta, "reorder", p, "none");
  check_labels_meta(meta_object(meta, "labels", p), p);
  for (const auto& [name, counts] : meta_object(meta, "splits", p).items()) {
    if (!counts.is_object())
      throw_input(p, 0, "\"splits." + name + "\": expected {\"train\", \"valid\", \"test\"}");
    for (const char* set : {"train", "valid", "test"}) meta_int(counts, set, p, 0, n);
  }
}

}  // namespace

json labels_meta(const GraphDataset& d) {
  return {{"kind", label_kind_name(d.label_kind)},
          {"columns", d.label_cols},
          {"classes", d.num_classes}};
}

void check_labels_meta(const json& lab, const fs::path& p) {
  const std::string lk = meta_string(lab, "kind", p, "none");
  if (lk != "none" && lk != "multiclass" && lk != "multilabel")
    throw_input(p, 0,
                "\"labels.kind\": expected \"none\", \"multiclass\" or \"multilabel\", found " +
                    shown(lab["kind"]));
  const std::int64_t cols = meta_int(lab, "columns", p, 0, INT32_MAX, 0);
  const std::int64_t classes = meta_int(lab, "classes", p, 0, INT32_MAX, 0);
  if (lk == "none" && cols != 0)
    throw_input(p, 0,
                "\"labels\": kind \"none\" with " + std::to_string(cols) + " columns (expected 0)");
  if (lk == "multiclass" && cols != 1)
    throw_input(p, 0,
                "\"labels\": multiclass labels need 1 column, found " + std::to_string(cols) +
                    " columns and " + std::to_string(classes) + " classes");
  if (lk == "multilabel" && (cols < 1 || classes != 2))
    throw_input(p, 0,
                "\"labels\": multilabel labels need at least 1 column and classes 2, found " +
                    std::to_string(cols) + " columns and " + std::to_string(classes) + " classes");
}

json read_dataset_meta(const fs::path& dir) {
  json meta = read_meta(dir, kFormat, kVersion);
  const fs::path p = dir / "meta.json";
  check_dataset_meta(meta, p);
  if (meta.contains("fingerprint") && meta["fingerprint"] != arrays_fingerprint(meta["arrays"]))
    throw_input(p, 0,
                "\"fingerprint\" " + shown(meta["fingerprint"]) + " disagrees with its arrays (" +
                    arrays_fingerprint(meta["arrays"]) + "): meta.json edited by hand?");
  return meta;
}

std::string dataset_kind(const fs::path& dir) {
  return read_dataset_meta(dir).value("kind", "graph");
}

template <class T>
Array<T> map_listed(const fs::path& dir, const json& meta, const std::string& name,
                    const ReadOptions& opt, std::uint64_t expect_rows, std::uint64_t expect_cols,
                    bool required) {
  const fs::path metap = dir / "meta.json";
  const json& arrays = meta.at("arrays");
  if (!arrays.contains(name)) {
    if (required) throw_input(metap, 0, "array '" + name + "' is missing from \"arrays\"");
    return {};
  }
  // read_meta has checked the entry: the file is name.bin in dir and crc32 an integer.
  const fs::path path = dir / (name + ".bin");
  ArrayInfo info;
  Array<T> a = map_array<T>(path, &info, opt.verify_checksums);
  if (arrays[name].value("crc32", std::uint64_t(info.crc32)) != info.crc32)
    throw_input(path, 0, "checksum disagrees with meta.json (file replaced or corrupted)");
  if ((expect_rows != kAnyShape && info.rows != expect_rows) ||
      (expect_cols != kAnyShape && info.cols != expect_cols))
    throw_input(path, 0,
                "expected shape " + std::to_string(expect_rows) + "x" +
                    std::to_string(expect_cols) + ", found " + std::to_string(info.rows) + "x" +
                    std::to_string(info.cols));
  return a;
}

#define HALO_INSTANTIATE(T)                                                         \
  template Array<T> map_listed<T>(const fs::path&, const json&, const std::string&, \
                                  const ReadOptions&, std::uint64_t, std::uint64_t, bool);
HALO_INSTANTIATE(std::int8_t)
HALO_INSTANTIATE(std::int32_t)
HALO_INSTANTIATE(std::int64_t)
HALO_INSTANTIATE(float)
HALO_INSTANTIATE(double)
#undef HALO_INSTANTIATE

GraphDataset read_graph_dataset(const fs::path& dir, const ReadOptions& opt) {
  GraphDataset d = map_graph_dataset(dir, opt);
  validate_graph_dataset(d, dir);
  return d;
}

GraphDataset map_graph_dataset(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_dataset_meta(dir);  // every field below is type- and range-checked
  const fs::path metap = dir / "meta.json";
  if (meta.value("kind", "graph") != "graph")
    throw_input(metap, 0,
                "a " + meta.value("kind", std::string()) + " dataset, expected a graph dataset");
  try {
    GraphDataset d;
    d.name = meta.value("name", "");
    d.fingerprint = meta.value("fingerprint", "");
    d.directed = meta.value("directed", false);
    const auto n = meta.at("nodes").get<std::int64_t>();
    const auto m = meta.at("edges").get<std::int64_t>();
    d.graph.num_nodes = n;
    d.graph.offsets = map_listed<EdgeId>(dir, meta, "offsets", opt, std::uint64_t(n + 1), 1);
    d.graph.indices = map_listed<NodeId>(dir, meta, "indices", opt, std::uint64_t(m), 1);
    if (meta.value("edge_weights", false))
      d.graph.values = map_listed<float>(dir, meta, "edge_weights", opt, std::uint64_t(m), 1);
    d.ncon = int(meta.value("node_weights", 0));
    if (d.ncon > 0)
      d.node_weights = map_listed<std::int32_t>(dir, meta, "node_weights", opt, std::uint64_t(n),
                                                std::uint64_t(d.ncon));
    d.num_features = meta.value("features", std::int64_t(0));
    if (d.num_features > 0)
      d.features = map_listed<float>(dir, meta, "features", opt, std::uint64_t(n),
                                     std::uint64_t(d.num_features));
    const json& lab = meta.at("labels");
    d.label_cols = lab.value("columns", std::int64_t(0));
    d.num_classes = lab.value("classes", std::int64_t(0));
    d.label_kind = label_kind_from_name(lab.value("kind", "none"));
    if (d.label_cols > 0)
      d.labels = map_listed<std::int32_t>(dir, meta, "labels", opt, std::uint64_t(n),
                                          std::uint64_t(d.label_cols));
    for (const auto& [name, counts] : meta.at("splits").items()) {
      Split s;
      s.name = name;
      s.train = map_listed<NodeId>(dir, meta, "split." + name + ".train", opt,
                                   counts.at("train").get<std::uint64_t>(), 1);
      s.valid = map_listed<NodeId>(dir, meta, "split." + name + ".valid", opt,
                                   counts.at("valid").get<std::uint64_t>(), 1);
      s.test = map_listed<NodeId>(dir, meta, "split." + name + ".test", opt,
                                  counts.at("test").get<std::uint64_t>(), 1);
      d.splits.push_back(std::move(s));
    }
    d.reorder = meta.value("reorder", "none");
    d.original_ids = map_listed<NodeId>(dir, meta, "original_ids", opt, std::uint64_t(n), 1, false);
    return d;
  } catch (const json::exception& e) {
    throw_input(metap, 0, std::string("malformed: ") + e.what());
  }
}

TemporalDataset read_temporal_dataset(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_dataset_meta(dir);
  const fs::path metap = dir / "meta.json";
  if (meta.value("kind", "graph") != "temporal")
    throw_input(
        metap, 0,
        "a " + meta.value("kind", std::string("graph")) + " dataset, expected a temporal dataset");
  try {
    TemporalDataset d;
    d.name = meta.value("name", "");
    d.num_nodes = meta.at("nodes").get<std::int64_t>();
    d.num_users = meta.value("users", std::int64_t(0));
    const auto e = meta.at("events").get<std::uint64_t>();
    d.src = map_listed<NodeId>(dir, meta, "events.src", opt, e, 1);
    d.dst = map_listed<NodeId>(dir, meta, "events.dst", opt, e, 1);
    d.time = map_listed<double>(dir, meta, "events.time", opt, e, 1);
    d.weight = map_listed<float>(dir, meta, "events.weight", opt, e, 1, false);
    d.edge_feature_dim = meta.value("edge_features", std::int64_t(0));
    if (d.edge_feature_dim > 0)
      d.edge_features = map_listed<float>(dir, meta, "events.features", opt, e,
                                          std::uint64_t(d.edge_feature_dim));
    d.labels = map_listed<std::int32_t>(dir, meta, "events.labels", opt, e, 1, false);
    // The stream as the temporal trainer indexes it: node ids address memory rows, and batches
    // are cut by time, which must be finite and non-decreasing.
    check_ids(dir / "events.src.bin", d.src, d.num_nodes);
    check_ids(dir / "events.dst.bin", d.dst, d.num_nodes);
    const double* t = d.time.data();
    const auto events = std::int64_t(d.time.size());
    const std::int64_t i = first_bad(
        events, [&](std::int64_t j) { return !std::isfinite(t[j]) || (j > 0 && t[j] < t[j - 1]); });
    if (i < events)
      throw_input(
          dir / "events.time.bin", 0,
          entry(i) + ": time " + std::to_string(t[i]) +
              (std::isfinite(t[i]) ? " before the previous event's " + std::to_string(t[i - 1]) +
                                         " (expected non-decreasing times)"
                                   : ", expected a finite number"));
    check_finite(dir / "events.weight.bin", d.weight);
    check_finite(dir / "events.features.bin", d.edge_features);
    return d;
  } catch (const json::exception& ex) {
    throw_input(metap, 0, std::string("malformed: ") + ex.what());
  }
}

}  // namespace halo
// Native datasets: meta.json + array files, committed by renaming a staging directory.
#include "halo/graph/dataset.h"

#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <utility>

#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr const char* kFormat = "halo-dataset";
constexpr int kVersion = 1;

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

// Checked and synced (staging.h): the folder's rename commits it.
void write_json_file(const fs::path& path, const json& j) { write_file(path, j.dump(2) + "\n"); }
}  // namespace

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

// ---- writer ------------------------------------------------------------------------------

ArrayDir::ArrayDir(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw SystemError(dir_.string() + ": cannot create directory: " + ec.message());
}

template <class T>
void ArrayDir::put(const std::string& name, const T* data, std::uint64_t rows, std::uint64_t cols) {
  record(name, write_array(dir_ / (name + ".bin"), data, rows, cols));
}

std::unique_ptr<ArrayFileWriter> ArrayDir::open(const std::string& name, DType dtype,
                                                std::uint64_t rows, std::uint64_t cols) {
  return std::make_unique<ArrayFileWriter>(dir_ / (name + ".bin"), dtype, rows, cols);
}

void ArrayDir::record(const std::string& name, const ArrayInfo& info) { arrays_[name] = info; }

namespace {
json arrays_table(const std::map<std::string, ArrayInfo>& arrays) {
  json table = json::object();
  for (const auto& [name, info] : arrays)
    table[name] = {{"file", name + ".bin"},
                   {"dtype", dtype_name(info.dtype)},
                   {"shape", {info.rows, info.cols}},
                   {"crc32", info.crc32}};
  return table;
}
}  // namespace

std::string arrays_fingerprint(const json& arrays, const std::string& derived_from) {
  uLong fingerprint = crc32(0L, Z_NULL, 0);
  // json objects iterate in key order (std::map), so the fingerprint is stable.
  for (const auto& [name, entry] : arrays.items()) {
    const std::string key = name + ":" + std::to_string(entry.at("crc32").get<std::uint64_t>());
    fingerprint = crc32(fingerprint, reinterpret_cast<const Bytef*>(key.data()), uInt(key.size()));
  }
  // What the arrays derive from (a partition: its dataset), so that equal arrays cut from two
  // different datasets still get two fingerprints. Empty leaves the historical value.
  if (!derived_from.empty()) {
    const std::string key = "from:" + derived_from;
    fingerprint = crc32(fingerprint, reinterpret_cast<const Bytef*>(key.data()), uInt(key.size()));
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08lx", fingerprint);
  return hex;
}

std::string ArrayDir::fingerprint(const std::string& derived_from) const {
  return arrays_fingerprint(arrays_table(arrays_), derived_from);
}

std::string ArrayDir::write_meta(json meta, const std::string& format, int version,
                                 const std::string& derived_from) {
  const json arrays = arrays_table(arrays_);
  std::string hex = arrays_fingerprint(arrays, derived_from);  // not const: returned by move
  meta["format"] = format;
  meta["version"] = version;
  meta["arrays"] = arrays;
  meta["fingerprint"] = hex;
  write_json_file(dir_ / "meta.json", meta);
  return hex;
}

#define HALO_INSTANTIATE(T) \
  template void ArrayDir::put<T>(const std::string&, const T*, std::uint64_t, std::uint64_t);
HALO_INSTANTIATE(std::int8_t)
HALO_INSTANTIATE(std::int32_t)
HALO_INSTANTIATE(std::int64_t)
HALO_INSTANTIATE(float)
HALO_INSTANTIATE(double)
#undef HALO_INSTANTIATE

DatasetWriter::DatasetWriter(const fs::path& dir, bool overwrite)
    : staging_(dir, kFormat, overwrite), arrays_(staging_.path()) {}

void DatasetWriter::commit(json meta) {
  // What the reader refuses is never committed: a name from a caller (Python, --name) or a file
  // name with control bytes ends here, and the staging folder is removed.
  if (const auto bad = find_unprintable(meta, ""))
    throw ParamError("\"" + bad->first + "\": control bytes in \"" + printable(bad->second, 40) +
                     "\" (a dataset's names are printable text)");
  arrays_.write_meta(std::move(meta), kFormat, kVersion);
  staging_.commit();
}

json graph_meta(const GraphDataset& d) {
  json splits = json::object();
  for (const auto& s : d.splits)
    splits[s.name] = {
        {"train", s.train.size()}, {"valid", s.valid.size()}, {"test", s.test.size()}};
  return {{"kind", "graph"},
          {"name", d.name},
          {"nodes", d.graph.num_nodes},
          {"edges", d.graph.num_edges()},
          {"directed", d.directed},
          {"edge_weights", !d.graph.values.empty()},
          {"node_weights", d.ncon},
          {"features", d.num_features},
          {"labels", labels_meta(d)},
          {"splits", splits},
          {"reorder", d.reorder}};
}

void write_graph_dataset(const GraphDataset& d, const fs::path& dir, bool overwrite,
                         const json* extra_meta) {
  // The content checks a reader applies that a caller's arrays may fail (the structure is
  // build_csr's by construction): what the reader would refuse is never written.
  check_finite(dir / "features.bin", d.features);
  if (d.graph.values.size() > 0) check_finite(dir / "edge_weights.bin", d.graph.values);
  check_labels(dir / "labels.bin", d.labels, d.label_kind, d.label_cols, d.num_classes);
  check_splits(dir, d.splits, d.graph.num_nodes);
  DatasetWriter w(dir, overwrite);
  const std::int64_t n = d.graph.num_nodes;
  w.put("offsets", d.graph.offsets.data(), std::uint64_t(n + 1));
  w.put("indices", d.graph.indices);
  if (!d.graph.values.empty()) w.put("edge_weights", d.graph.values);
  if (d.ncon > 0) w.put("node_weights", d.node_weights, std::uint64_t(d.ncon));
  if (d.num_features > 0) w.put("features", d.features, std::uint64_t(d.num_features));
  if (d.label_cols > 0) w.put("labels", d.labels, std::uint64_t(d.label_cols));
  for (const auto& s : d.splits) {
    w.put("split." + s.name + ".train", s.train);
    w.put("split." + s.name + ".valid", s.valid);
    w.put("split." + s.name + ".test", s.test);
  }
  if (!d.original_ids.empty()) w.put("original_ids", d.original_ids);
  json meta = graph_meta(d);
  if (extra_meta) meta.update(*extra_meta);
  w.commit(std::move(meta));
}

void write_temporal_dataset(const TemporalDataset& d, const fs::path& dir, bool overwrite) {
  DatasetWriter w(dir, overwrite);
  w.put("events.src", d.src);
  w.put("events.dst", d.dst);
  w.put("events.time", d.time);
  if (!d.weight.empty()) w.put("events.weight", d.weight);
  if (d.edge_feature_dim > 0)
    w.put("events.features", d.edge_features, std::uint64_t(d.edge_feature_dim));
  if (!d.labels.empty()) w.put("events.labels", d.labels);
  json meta = {{"kind", "temporal"},
               {"name", d.name},
               {"nodes", d.num_nodes},
               {"users", d.num_users},
               {"events", d.num_events()},
               {"edge_features", d.edge_feature_dim},
               {"event_labels", !d.labels.empty()},
               {"weights", !d.weight.empty()}};
  if (d.num_events() > 0) {
    meta["time_min"] = d.time[0];
    meta["time_max"] = d.time[d.time.size() - 1];
  }
  w.commit(std::move(meta));
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

// ---- structure checks ----------------------------------------------------------------------

namespace {

// Smallest i in [0, n) with bad(i), or n when there is none. Parallel; the answer does not
// depend on the thread count, so a message names the same entry on every machine.
template <class Bad>
std::int64_t first_bad(std::int64_t n, Bad&& bad, std::int64_t chunk = 1 << 14) {
  std::int64_t first = n;
#pragma omp parallel for schedule(dynamic, chunk) reduction(min : first)
  for (std::int64_t i = 0; i < n; ++i)
    if (i < first && bad(i)) first = i;
  return std::min(first, n);
}

std::string range(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

std::string entry(std::int64_t i) { return "entry " + std::to_string(i); }

// The first entry (row, index) of a CSR for which bad(row, e) holds, rows searched in parallel;
// row == num_nodes when there is none.
template <class Bad>
std::pair<std::int64_t, EdgeId> first_bad_entry(const CsrView& g, Bad&& bad) {
  const std::int64_t u = first_bad(
      g.num_nodes,
      [&](std::int64_t r) {
        for (EdgeId e = g.offsets[r]; e < g.offsets[r + 1]; ++e)
          if (bad(r, e)) return true;
        return false;
      },
      1024);
  if (u == g.num_nodes) return {u, 0};
  EdgeId e = g.offsets[u];
  while (!bad(u, e)) ++e;
  return {u, e};
}

}  // namespace

void check_offsets(const fs::path& file, const Array<EdgeId>& offsets, std::int64_t count) {
  const auto n = std::int64_t(offsets.size());
  if (n == 0) throw_input(file, 0, "no offsets (expected at least one entry)");
  const EdgeId* o = offsets.data();
  if (o[0] != 0)
    throw_input(file, 0, entry(0) + ": first offset " + std::to_string(o[0]) + ", expected 0");
  const std::int64_t i = first_bad(n - 1, [&](std::int64_t j) { return o[j + 1] < o[j]; });
  if (i < n - 1)
    throw_input(file, 0,
                entry(i + 1) + ": offset " + std::to_string(o[i + 1]) +
                    " below the previous one (" + std::to_string(o[i]) +
                    "): offsets must not decrease");
  if (o[n - 1] != count)
    throw_input(file, 0,
                entry(n - 1) + ": last offset " + std::to_string(o[n - 1]) +
                    ", expected the index count " + std::to_string(count));
}

void check_csr_columns(const fs::path& file, const CsrView& g, std::int64_t cols) {
  // A row is bad when any of its entries is: out of range, not above its predecessor, or its
  // own row (a self-loop, which the GCN normalisation adds itself).
  auto bad_entry = [&](std::int64_t u, EdgeId e) {
    const NodeId v = g.indices[e];
    return v < 0 || v >= cols || v == u || (e > g.offsets[u] && v <= g.indices[e - 1]);
  };
  const auto [u, e] = first_bad_entry(g, bad_entry);
  if (u == g.num_nodes) return;
  const NodeId v = g.indices[e];
  const std::string where = entry(e) + " (row " + std::to_string(u) + "): ";
  if (v < 0 || v >= cols)
    throw_input(file, 0, where + "column " + std::to_string(v) + " out of range " + range(0, cols));
  if (v == u)
    throw_input(file, 0,
                where + "self-loop " + std::to_string(u) + " -> " + std::to_string(v) +
                    " (a row never stores itself)");
  throw_input(file, 0,
              where + "column " + std::to_string(v) + " not above the previous one (" +
                  std::to_string(g.indices[e - 1]) + "): rows must be sorted, without duplicates");
}

namespace {
// splitmix64's finaliser: a bijection of 64-bit words whose output bits each depend on every
// input bit.
std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Whether the multiset of entries (u, v, weight) equals that of (v, u, weight), as two sums of a
// keyed hash: one streaming pass over the arrays instead of a binary search per entry (10x
// faster on a 25M-entry graph). A random key per process makes a false "equal" a 2^-64 chance
// that no input can aim at.
bool entries_look_symmetric(const CsrView& g) {
  static const std::uint64_t key = [] {
    std::random_device rd;
    return (std::uint64_t(rd()) << 32) ^ rd();
  }();
  // An unweighted graph hashes the pair alone; a weighted one mixes the weight's bits in after.
  const bool weighted = g.values != nullptr;
  auto hash = [weighted](std::uint64_t a, std::uint64_t b, std::uint32_t w) {
    const std::uint64_t h = mix64(((a << 32) | b) ^ key);
    return weighted ? mix64(h ^ (std::uint64_t(w) * 0x9e3779b97f4a7c15ULL)) : h;
  };
  std::uint64_t forward = 0, backward = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : forward, backward)
  for (std::int64_t u = 0; u < g.num_nodes; ++u)
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
      const auto v = std::uint64_t(std::uint32_t(g.indices[e]));
      std::uint32_t w = 0;
      if (g.values) std::memcpy(&w, &g.values[e], sizeof w);
      forward += hash(std::uint64_t(u), v, w);
      backward += hash(v, std::uint64_t(u), w);
    }
  return forward == backward;
}
}  // namespace

void check_symmetric(const fs::path& file, const CsrView& g) {
  if (entries_look_symmetric(g)) return;
  // Not symmetric: find the first entry to name. The reverse of entry e = (u, v), or -1: rows
  // are sorted (checked before), so a binary search in row v.
  auto reverse = [&](std::int64_t u, EdgeId e) -> EdgeId {
    const NodeId v = g.indices[e];
    const NodeId* b = g.begin(v);
    const NodeId* end = g.end(v);
    const NodeId* it = std::lower_bound(b, end, NodeId(u));
    return it != end && *it == u ? g.offsets[v] + (it - b) : -1;
  };
  auto bad_entry = [&](std::int64_t u, EdgeId e) {
    const EdgeId r = reverse(u, e);
    return r < 0 || (g.values && !(g.values[r] == g.values[e]));
  };
  const auto [u, e] = first_bad_entry(g, bad_entry);
  if (u == g.num_nodes) return;
  const std::string edge = std::to_string(u) + " -> " + std::to_string(g.indices[e]);
  throw_input(file, 0,
              entry(e) + " (row " + std::to_string(u) + "): edge " + edge +
                  (reverse(u, e) < 0 ? " has no reverse" : " has a reverse of another weight") +
                  ", but meta.json says the graph is undirected");
}

void check_increasing(const fs::path& file, const NodeId* ids, std::int64_t begin, std::int64_t end,
                      const std::string& what) {
  if (end - begin < 2) return;
  const std::int64_t i = first_bad(
      end - begin - 1, [&](std::int64_t j) { return ids[begin + j + 1] <= ids[begin + j]; });
  if (i < end - begin - 1)
    throw_input(file, 0,
                entry(begin + i + 1) + ": id " + std::to_string(ids[begin + i + 1]) +
                    " not above the previous one (" + std::to_string(ids[begin + i]) +
                    "): " + what + " must be in increasing id order");
}

void check_ids(const fs::path& file, const Array<NodeId>& ids, std::int64_t bound,
               std::vector<std::uint64_t>* seen, const std::string& clash) {
  const auto n = std::int64_t(ids.size());
  const NodeId* x = ids.data();
  const std::int64_t i = first_bad(n, [&](std::int64_t j) { return x[j] < 0 || x[j] >= bound; });
  if (i < n)
    throw_input(file, 0,
                entry(i) + ": id " + std::to_string(x[i]) + " out of range " + range(0, bound));
  if (!seen) return;
  seen->resize(std::size_t((bound + 63) / 64), 0);
  // Fast path: mark in parallel; only when some id was marked already, find the first one
  // again serially on a copy, so the message is the same on every machine.
  const std::vector<std::uint64_t> before = *seen;
  std::int64_t clashes = 0;
#pragma omp parallel for schedule(static) reduction(+ : clashes)
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t bit = std::uint64_t(1) << (x[j] & 63);
    clashes +=
        (std::atomic_ref<std::uint64_t>((*seen)[std::size_t(x[j] >> 6)]).fetch_or(bit) & bit) != 0;
  }
  if (clashes == 0) return;
  std::vector<std::uint64_t> mark = before;
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t bit = std::uint64_t(1) << (x[j] & 63);
    std::uint64_t& w = mark[std::size_t(x[j] >> 6)];
    if (w & bit) {
      const bool earlier_here = (before[std::size_t(x[j] >> 6)] & bit) == 0;
      throw_input(
          file, 0,
          entry(j) + ": id " + std::to_string(x[j]) +
              (earlier_here || clash.empty() ? " repeated (ids must be distinct)"
                                             : " also in " + clash + " (expected disjoint sets)"));
    }
    w |= bit;
  }
}

void check_finite(const fs::path& file, const Array<float>& values) {
  const auto n = std::int64_t(values.size());
  const float* x = values.data();
  // A branch-free pass first (it vectorises: all exponent bits set is an infinity or a NaN);
  // the first bad entry is looked for only when there is one.
  // In blocks whose pages are dropped once checked: the check is often the only reader of
  // the features (`info`, `partition`), which would otherwise keep them all resident.
  std::uint32_t any_bad = 0;
  constexpr std::int64_t kBlock = std::int64_t(1) << 24;  // 64 MiB of floats
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = std::min(n, b + kBlock);
#pragma omp parallel for schedule(static) reduction(| : any_bad)
    for (std::int64_t j = b; j < e; ++j) {
      std::uint32_t bits;
      std::memcpy(&bits, x + j, sizeof bits);
      any_bad |= std::uint32_t((bits & 0x7f800000u) == 0x7f800000u);
    }
    values.release(std::size_t(b), std::size_t(e));
  }
  if (!any_bad) return;
  const std::int64_t i = first_bad(
      n, [&](std::int64_t j) { return !std::isfinite(x[j]); }, 1 << 16);
  if (i < n)
    throw_input(file, 0,
                entry(i) + ": value " + std::to_string(x[i]) + ", expected a finite number");
}

void check_labels(const fs::path& file, const Array<std::int32_t>& labels, LabelKind kind,
                  std::int64_t cols, std::int64_t classes) {
  if (kind == LabelKind::kNone || cols == 0) return;
  const std::int32_t* y = labels.data();
  const auto n = std::int64_t(labels.size());
  const bool multi = kind == LabelKind::kMultilabel;
  const std::int64_t hi = multi ? 2 : classes;  // multilabel: 0/1 per task, -1 = missing
  const std::int64_t i = first_bad(n, [&](std::int64_t j) { return y[j] < -1 || y[j] >= hi; });
  if (i < n)
    throw_input(file, 0,
                entry(i) + " (row " + std::to_string(i / cols) + "): label " +
                    std::to_string(y[i]) +
                    (multi ? ", expected 0, 1 or -1 (missing)"
                           : " out of range [-1, " + std::to_string(classes) + ") (" +
                                 std::to_string(classes) + " classes, -1 = missing)"));
}

void check_splits(const fs::path& dir, const std::vector<Split>& splits, std::int64_t n) {
  std::vector<std::uint64_t> seen;
  for (const Split& s : splits) {
    seen.assign(std::size_t((n + 63) / 64), 0);
    const std::string base = "split." + s.name + ".";
    check_ids(dir / (base + "train.bin"), s.train, n, &seen);
    check_ids(dir / (base + "valid.bin"), s.valid, n, &seen, "the train set");
    check_ids(dir / (base + "test.bin"), s.test, n, &seen, "the train or valid set");
  }
}

void validate_graph_dataset(const GraphDataset& d, const fs::path& dir) {
  const CsrView g = d.graph.view();
  const std::int64_t n = g.num_nodes;
  check_offsets(dir / "offsets.bin", d.graph.offsets, std::int64_t(d.graph.indices.size()));
  check_csr_columns(dir / "indices.bin", g, n);
  if (!d.graph.values.empty()) check_finite(dir / "edge_weights.bin", d.graph.values);
  if (!d.directed) check_symmetric(dir / "indices.bin", g);
  if (d.ncon > 0) {
    const std::int32_t* w = d.node_weights.data();
    const auto size = std::int64_t(d.node_weights.size());
    const std::int64_t i = first_bad(size, [&](std::int64_t j) { return w[j] < 0; });
    if (i < size)
      throw_input(
          dir / "node_weights.bin", 0,
          entry(i) + ": weight " + std::to_string(w[i]) + ", expected a non-negative integer");
  }
  check_finite(dir / "features.bin", d.features);
  check_labels(dir / "labels.bin", d.labels, d.label_kind, d.label_cols, d.num_classes);
  check_splits(dir, d.splits, n);
  if (!d.original_ids.empty()) {
    std::vector<std::uint64_t> seen;  // n distinct ids in [0, n): a permutation
    check_ids(dir / "original_ids.bin", d.original_ids, n, &seen);
  }
}

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

// Native datasets: meta.json + array files, committed by renaming a staging directory.
#include "halo/graph/dataset.h"

#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "halo/graph/error.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr const char* kFormat = "halo-dataset";
constexpr int kVersion = 1;

void write_json_file(const fs::path& path, const json& j) {
  std::ofstream f(path);
  if (!f) throw_system(path, "cannot create");
  f << j.dump(2) << "\n";
  f.close();
  if (!f) throw_system(path, "write failed");
}
}  // namespace

const char* label_kind_name(LabelKind k) {
  switch (k) {
    case LabelKind::kNone: return "none";
    case LabelKind::kMulticlass: return "multiclass";
    case LabelKind::kMultilabel: return "multilabel";
  }
  return "none";
}

LabelKind label_kind_from_name(const std::string& name) {
  return name == "multiclass" ? LabelKind::kMulticlass
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

std::string ArrayDir::write_meta(json meta, const std::string& format, int version) {
  json arrays = json::object();
  uLong fingerprint = crc32(0L, Z_NULL, 0);
  for (const auto& [name, info] : arrays_) {  // std::map: sorted, so the fingerprint is stable
    arrays[name] = {{"file", name + ".bin"},
                    {"dtype", dtype_name(info.dtype)},
                    {"shape", {info.rows, info.cols}},
                    {"crc32", info.crc32}};
    const std::string key = name + ":" + std::to_string(info.crc32);
    fingerprint = crc32(fingerprint, reinterpret_cast<const Bytef*>(key.data()), uInt(key.size()));
  }
  meta["format"] = format;
  meta["version"] = version;
  meta["arrays"] = arrays;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08lx", fingerprint);
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
    : staging_(dir, overwrite), arrays_(staging_.path()) {}

void DatasetWriter::commit(json meta) {
  arrays_.write_meta(std::move(meta), kFormat, kVersion);
  staging_.commit();
}

json graph_meta(const GraphDataset& d) {
  json splits = json::object();
  for (const auto& s : d.splits)
    splits[s.name] = {{"train", s.train.size()}, {"valid", s.valid.size()}, {"test", s.test.size()}};
  return {{"kind", "graph"},
          {"name", d.name},
          {"nodes", d.graph.num_nodes},
          {"edges", d.graph.num_edges()},
          {"directed", d.directed},
          {"edge_weights", !d.graph.values.empty()},
          {"node_weights", d.ncon},
          {"features", d.num_features},
          {"labels",
           {{"kind", label_kind_name(d.label_kind)},
            {"columns", d.label_cols},
            {"classes", d.num_classes}}},
          {"splits", splits},
          {"reorder", d.reorder}};
}

void write_graph_dataset(const GraphDataset& d, const fs::path& dir, bool overwrite,
                         const json* extra_meta) {
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

// ---- reader ------------------------------------------------------------------------------

json read_meta(const fs::path& dir, const std::string& format, int version) {
  const fs::path p = dir / "meta.json";
  if (!fs::is_directory(dir)) throw_input(dir, 0, "not a directory (expected a halo " + format + ")");
  std::ifstream f(p);
  if (!f) throw_input(p, 0, "missing: not a halo " + format + " directory");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    throw_input(p, 0, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != format)
    throw_input(p, 0, "not a halo " + format + " (\"format\" is " +
                          (j.is_object() ? j.value("format", json("missing")).dump() : "missing") + ")");
  if (j.value("version", 0) != version)
    throw_input(p, 0, format + " version " + j.value("version", json(0)).dump() +
                          ", this halo reads version " + std::to_string(version));
  if (!j.contains("arrays") || !j["arrays"].is_object())
    throw_input(p, 0, "malformed: no \"arrays\" table");
  return j;
}

json read_dataset_meta(const fs::path& dir) { return read_meta(dir, kFormat, kVersion); }

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
  const fs::path path = dir / arrays[name].value("file", name + ".bin");
  ArrayInfo info;
  Array<T> a = map_array<T>(path, &info, opt.verify_checksums);
  if (arrays[name].value("crc32", std::uint64_t(info.crc32)) != info.crc32)
    throw_input(path, 0, "checksum disagrees with meta.json (file replaced or corrupted)");
  if ((expect_rows != kAnyShape && info.rows != expect_rows) ||
      (expect_cols != kAnyShape && info.cols != expect_cols))
    throw_input(path, 0, "expected shape " + std::to_string(expect_rows) + "x" +
                             std::to_string(expect_cols) + ", found " + std::to_string(info.rows) +
                             "x" + std::to_string(info.cols));
  return a;
}

#define HALO_INSTANTIATE(T)                                                                      \
  template Array<T> map_listed<T>(const fs::path&, const json&, const std::string&,              \
                                  const ReadOptions&, std::uint64_t, std::uint64_t, bool);
HALO_INSTANTIATE(std::int8_t)
HALO_INSTANTIATE(std::int32_t)
HALO_INSTANTIATE(std::int64_t)
HALO_INSTANTIATE(float)
HALO_INSTANTIATE(double)
#undef HALO_INSTANTIATE

GraphDataset read_graph_dataset(const fs::path& dir, const ReadOptions& opt) {
  const json meta = read_dataset_meta(dir);
  const fs::path metap = dir / "meta.json";
  if (meta.value("kind", "graph") != "graph")
    throw_input(metap, 0, "a " + meta.value("kind", std::string()) +
                              " dataset, expected a graph dataset");
  try {
    GraphDataset d;
    d.name = meta.value("name", "");
    d.directed = meta.value("directed", false);
    const auto n = meta.at("nodes").get<std::int64_t>();
    const auto m = meta.at("edges").get<std::int64_t>();
    d.graph.num_nodes = n;
    d.graph.offsets = map_listed<EdgeId>(dir, meta, "offsets", opt, std::uint64_t(n + 1), 1);
    if (d.graph.offsets[0] != 0 || d.graph.offsets[std::size_t(n)] != m)
      throw_input(dir / "offsets.bin", 0, "offsets do not span the " + std::to_string(m) +
                                              " edges that meta.json declares");
    d.graph.indices = map_listed<NodeId>(dir, meta, "indices", opt, std::uint64_t(m), 1);
    if (meta.value("edge_weights", false))
      d.graph.values = map_listed<float>(dir, meta, "edge_weights", opt, std::uint64_t(m), 1);
    d.ncon = meta.value("node_weights", 0);
    if (d.ncon > 0)
      d.node_weights = map_listed<std::int32_t>(dir, meta, "node_weights", opt, std::uint64_t(n),
                                          std::uint64_t(d.ncon));
    d.num_features = meta.value("features", std::int64_t(0));
    if (d.num_features > 0)
      d.features =
          map_listed<float>(dir, meta, "features", opt, std::uint64_t(n), std::uint64_t(d.num_features));
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
    throw_input(metap, 0, "a " + meta.value("kind", std::string("graph")) +
                              " dataset, expected a temporal dataset");
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
    return d;
  } catch (const json::exception& ex) {
    throw_input(metap, 0, std::string("malformed: ") + ex.what());
  }
}

}  // namespace halo

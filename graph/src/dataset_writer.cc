// Native datasets, writing: array files and meta.json (with its fingerprint) into a staging
// folder, committed by renaming it into place. Reading is in dataset.cc.
#include <zlib.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "dataset_internal.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace dataset_internal;

namespace {
// Checked and synced (staging.h): the folder's rename commits it.
void write_json_file(const fs::path& path, const json& j) { write_file(path, j.dump(2) + "\n"); }
}  // namespace

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

}  // namespace halo

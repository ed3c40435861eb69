// The native dataset: a directory with meta.json plus one array file per array (see
// array_file.h), written atomically (temporary directory renamed when complete) and read back
// by memory mapping. Two kinds share the layout:
//   graph    — CSR (+ edge and node weights), node features, labels, named splits;
//   temporal — a time-sorted event stream (src, dst, t, weight, edge features, labels).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "halo/graph/array.h"
#include "halo/graph/array_file.h"
#include "halo/graph/csr.h"
#include "halo/graph/staging.h"

namespace halo {

enum class LabelKind { kNone, kMulticlass, kMultilabel };
const char* label_kind_name(LabelKind k);
// Inverse of label_kind_name; unknown names give kNone.
LabelKind label_kind_from_name(const std::string& name);

struct Split {
  std::string name;
  Array<NodeId> train, valid, test;
};

// A node-property graph dataset. Labels are int32 rows x label_cols with -1 for "missing".
struct GraphDataset {
  std::string name;
  bool directed = false;
  Csr graph;                   // values = edge weights, when the source had them
  Array<std::int32_t> node_weights;  // rows x ncon (METIS vertex weights), or empty
  int ncon = 0;
  Array<float> features;  // rows x num_features, or empty
  std::int64_t num_features = 0;
  Array<std::int32_t> labels;  // rows x label_cols, or empty
  std::int64_t label_cols = 0;
  LabelKind label_kind = LabelKind::kNone;
  std::int64_t num_classes = 0;  // multiclass: max label + 1; multilabel: 2
  std::vector<Split> splits;
  Array<NodeId> original_ids;  // when reordered: original id of each node; else empty
  std::string reorder = "none";

  std::int64_t num_nodes() const { return graph.num_nodes; }
  const Split* split(const std::string& name) const;
};

// A temporal event stream sorted by time (ties keep file order).
struct TemporalDataset {
  std::string name;
  std::int64_t num_nodes = 0;
  std::int64_t num_users = 0;  // bipartite (JODIE): ids [0, num_users) are users; else 0
  Array<NodeId> src, dst;
  Array<double> time;
  Array<float> weight;     // one per event, or empty
  Array<float> edge_features;  // events x edge_feature_dim, or empty
  std::int64_t edge_feature_dim = 0;
  Array<std::int32_t> labels;  // one per event (JODIE state label), or empty

  std::int64_t num_events() const { return std::int64_t(src.size()); }
};

// A directory of array files plus the meta.json that lists them (file, dtype, shape, CRC-32)
// and a fingerprint over all of them. A dataset is one ArrayDir; a partition is one per part.
class ArrayDir {
 public:
  // Creates dir (and parents) if needed.
  explicit ArrayDir(std::filesystem::path dir);
  const std::filesystem::path& path() const { return dir_; }
  // Writes array `name` (file name.bin) and records it for meta.json.
  template <class T>
  void put(const std::string& name, const T* data, std::uint64_t rows, std::uint64_t cols = 1);
  template <class T>
  void put(const std::string& name, const Array<T>& a, std::uint64_t cols = 1) {
    put(name, a.data(), cols ? a.size() / cols : 0, cols);
  }
  template <class T>
  void put(const std::string& name, const std::vector<T>& v, std::uint64_t cols = 1) {
    put(name, v.data(), cols ? v.size() / cols : 0, cols);
  }
  // Starts an array filled row by row (large features); call record() with its finish().
  std::unique_ptr<ArrayFileWriter> open(const std::string& name, DType dtype,
                                        std::uint64_t rows, std::uint64_t cols);
  void record(const std::string& name, const ArrayInfo& info);
  // Writes meta.json = meta + {"format", "version", "arrays", "fingerprint"}; returns the
  // fingerprint (hex CRC-32 over the sorted array names and checksums).
  std::string write_meta(nlohmann::json meta, const std::string& format, int version);

 private:
  std::filesystem::path dir_;
  std::map<std::string, ArrayInfo> arrays_;
};

// Builds a dataset directory under a temporary name next to its destination; commit() writes
// meta.json and renames it into place. Destroyed uncommitted, it removes everything it wrote,
// so a failed conversion leaves nothing behind.
class DatasetWriter {
 public:
  // Throws ParamError when dir exists and !overwrite.
  DatasetWriter(const std::filesystem::path& dir, bool overwrite);
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  const std::filesystem::path& staging_dir() const { return staging_.path(); }
  template <class T, class... Rest>
  void put(const std::string& name, const T& data, Rest... rest) {
    arrays_.put(name, data, rest...);
  }
  std::unique_ptr<ArrayFileWriter> open(const std::string& name, DType dtype,
                                        std::uint64_t rows, std::uint64_t cols) {
    return arrays_.open(name, dtype, rows, cols);
  }
  void record(const std::string& name, const ArrayInfo& info) { arrays_.record(name, info); }
  // Writes meta.json (meta + the array table + fingerprint) and renames into place.
  void commit(nlohmann::json meta);

 private:
  StagingDir staging_;
  ArrayDir arrays_;
};

// Writes a whole in-memory dataset (used by generators and tests).
void write_graph_dataset(const GraphDataset& d, const std::filesystem::path& dir,
                         bool overwrite = false, const nlohmann::json* extra_meta = nullptr);
void write_temporal_dataset(const TemporalDataset& d, const std::filesystem::path& dir,
                            bool overwrite = false);

struct ReadOptions {
  bool verify_checksums = true;
};

// "graph" or "temporal", from DIR/meta.json; throws InputError if it is not a halo dataset.
std::string dataset_kind(const std::filesystem::path& dir);
// Maps a graph dataset; throws InputError naming the file on any mismatch.
GraphDataset read_graph_dataset(const std::filesystem::path& dir, const ReadOptions& = {});
TemporalDataset read_temporal_dataset(const std::filesystem::path& dir, const ReadOptions& = {});
// meta.json of a dataset, parsed.
nlohmann::json read_dataset_meta(const std::filesystem::path& dir);

// DIR/meta.json parsed, checked to have "format": format and "version": version.
nlohmann::json read_meta(const std::filesystem::path& dir, const std::string& format,
                         int version);

inline constexpr std::uint64_t kAnyShape = ~0ull;
// Maps array `name` listed in meta["arrays"] of dir, checking it against the listed checksum
// and the expected shape (kAnyShape = any). Missing and !required gives an empty Array.
template <class T>
Array<T> map_listed(const std::filesystem::path& dir, const nlohmann::json& meta,
                    const std::string& name, const ReadOptions& opt, std::uint64_t rows,
                    std::uint64_t cols, bool required = true);

// Meta fields describing a graph dataset (counts, labels, splits): written by
// write_graph_dataset and by the streaming converters alike.
nlohmann::json graph_meta(const GraphDataset& d);

}  // namespace halo

// The native dataset: a directory with meta.json plus one array file per array (see
// array_file.h), written atomically (temporary directory renamed when complete) and read back
// by memory mapping. Two kinds share the layout:
//   graph    — CSR (+ edge and node weights), node features, labels, named splits;
//   temporal — a time-sorted event stream (src, dst, t, weight, edge features, labels).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

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
  Csr graph;                         // values = edge weights, when the source had them
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
  std::string fingerprint;  // meta.json's, when read from disk; else empty

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
  Array<float> weight;         // one per event, or empty
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
  std::unique_ptr<ArrayFileWriter> open(const std::string& name, DType dtype, std::uint64_t rows,
                                        std::uint64_t cols);
  void record(const std::string& name, const ArrayInfo& info);
  // Writes meta.json = meta + {"format", "version", "arrays", "fingerprint"}; returns the
  // fingerprint (hex CRC-32 over the sorted array names and checksums, then `derived_from`).
  std::string write_meta(nlohmann::json meta, const std::string& format, int version,
                         const std::string& derived_from = "");
  // The fingerprint write_meta would give for the arrays recorded so far.
  std::string fingerprint(const std::string& derived_from = "") const;

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
  std::unique_ptr<ArrayFileWriter> open(const std::string& name, DType dtype, std::uint64_t rows,
                                        std::uint64_t cols) {
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
// Maps a graph dataset and validates it (validate_graph_dataset); throws InputError naming the
// file on any mismatch, before any caller can index with a bad id.
GraphDataset read_graph_dataset(const std::filesystem::path& dir, const ReadOptions& = {});
// The arrays of a graph dataset mapped, with meta.json and every array's shape checked but no
// content validated (and no checksum verified unless opt asks): for readers that validate only
// the rows they use, such as the ranks of a distributed partitioner, each checking its slice.
// The caller must validate whatever it indexes with.
GraphDataset map_graph_dataset(const std::filesystem::path& dir, const ReadOptions& opt);
// Maps a temporal dataset and validates it (ids in range, time finite and non-decreasing).
TemporalDataset read_temporal_dataset(const std::filesystem::path& dir, const ReadOptions& = {});
// meta.json of a dataset, parsed, with every field the readers use type- and range-checked.
nlohmann::json read_dataset_meta(const std::filesystem::path& dir);

// DIR/meta.json parsed, checked to have "format": format and "version": version and a
// well-formed "arrays" table (plain file names, integer checksums).
nlohmann::json read_meta(const std::filesystem::path& dir, const std::string& format, int version);
// Hex CRC-32 over the names and checksums of an "arrays" table, then derived_from: what
// ArrayDir::write_meta records as "fingerprint".
std::string arrays_fingerprint(const nlohmann::json& arrays, const std::string& derived_from = "");

// ---- meta.json fields, checked ----------------------------------------------------------
// Each throws InputError "FILE: \"KEY\": expected ..., found ..." so a hand-edited meta.json
// cannot reach a caller as a JSON type error or an absurd size.

// j[key], an integer in [lo, hi]; absent gives fallback when it is set, else an error.
std::int64_t meta_int(const nlohmann::json& j, const std::string& key,
                      const std::filesystem::path& file, std::int64_t lo, std::int64_t hi,
                      std::optional<std::int64_t> fallback = std::nullopt);
// j[key], a string; absent gives fallback when it is set, else an error.
std::string meta_string(const nlohmann::json& j, const std::string& key,
                        const std::filesystem::path& file,
                        std::optional<std::string> fallback = std::nullopt);
// j[key], a boolean; absent gives fallback.
bool meta_bool(const nlohmann::json& j, const std::string& key, const std::filesystem::path& file,
               bool fallback);
// The "labels" object of d's meta.json (datasets and parts write the same one).
nlohmann::json labels_meta(const GraphDataset& d);
// A "labels" object: kind none/multiclass/multilabel with the columns and classes it needs.
void check_labels_meta(const nlohmann::json& labels, const std::filesystem::path& file);
// j[key], an object; absent is an error.
const nlohmann::json& meta_object(const nlohmann::json& j, const std::string& key,
                                  const std::filesystem::path& file);

// ---- structure checks (invariant 7) ------------------------------------------------------
// Shared by every reader of datasets and parts: each is O(size), parallel, reports the first
// bad entry (the same one whatever the thread count) as "FILE: entry I: what, expected ...".

// offsets[0] = 0, non-decreasing, offsets.back() = count.
void check_offsets(const std::filesystem::path& file, const Array<EdgeId>& offsets,
                   std::int64_t count);
// Every row's columns in [0, cols), strictly increasing (sorted, no duplicates), and no
// self-loop (column == row): the CSR invariants of csr.h. Offsets must have passed
// check_offsets.
void check_csr_columns(const std::filesystem::path& file, const CsrView& g, std::int64_t cols);
// Every stored u->v has v->u, with an equal weight when weighted (what "directed": false
// promises, and what METIS and the halo lists assume). g must have passed check_csr_columns.
void check_symmetric(const std::filesystem::path& file, const CsrView& g);
// ids[begin, end) strictly increasing; `what` names the run in the message.
void check_increasing(const std::filesystem::path& file, const NodeId* ids, std::int64_t begin,
                      std::int64_t end, const std::string& what);
// Every id in [0, bound). With seen (bound bits, shared across calls) also distinct from each
// other and from every id seen before; `clash` names what an id seen before belongs to.
void check_ids(const std::filesystem::path& file, const Array<NodeId>& ids, std::int64_t bound,
               std::vector<std::uint64_t>* seen = nullptr, const std::string& clash = "");
// Every value finite (no NaN or infinity).
void check_finite(const std::filesystem::path& file, const Array<float>& values);
// Labels as LabelKind promises: none has no columns; multiclass one column of values in
// [-1, classes); multilabel values in {-1, 0, 1} with classes 2.
void check_labels(const std::filesystem::path& file, const Array<std::int32_t>& labels,
                  LabelKind kind, std::int64_t cols, std::int64_t classes);
// Splits: ids in [0, n), each node in at most one of a split's train/valid/test.
void check_splits(const std::filesystem::path& dir, const std::vector<Split>& splits,
                  std::int64_t n);
// Every check above that applies to a graph dataset read from dir (file names for messages).
void validate_graph_dataset(const GraphDataset& d, const std::filesystem::path& dir);

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

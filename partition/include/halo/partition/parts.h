// The partitioned dataset: PARTS/meta.json (options, quality, per-part figures), PARTS/owner.bin
// (the part of every node), and one self-contained directory per part — everything its rank
// needs, so parts can be copied to machines without a shared file system:
//
//   part-r/global_ids.bin   int32 [owned + halo]  global id of every local row
//   part-r/offsets.bin      int64 [owned + 1]     local CSR rows = owned nodes, inner first
//   part-r/indices.bin      int32 [nnz]           columns in [0, owned + halo)
//   part-r/edge_weights.bin float32 [nnz]         when the dataset has them
//   part-r/degree.bin       int32 [owned + halo]  global degree (exact GCN normalisation)
//   part-r/features.bin, labels.bin               owned rows
//   part-r/split.NAME.{train,valid,test}.bin      local ids of owned nodes
//   part-r/send_offsets.bin int64 [K + 1], send.bin int32: owned local rows each peer needs,
//                                                  in the order the peer receives them
//   part-r/recv_offsets.bin int64 [K + 1]: halo rows from peer q are local rows
//                                                  [owned + recv_offsets[q], owned + recv_offsets[q+1])
//
//   original_ids.bin       int32 [nodes]          (root, reordered datasets only) input order
//
// Halo rows are ordered by owning peer, then by global id; a peer's send list to r is r's
// receive list from it, element for element.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "halo/graph/dataset.h"
#include "halo/partition/partition.h"
#include "halo/partition/quality.h"

namespace halo {

struct Part {
  int rank = 0, k = 0;
  std::int64_t global_nodes = 0;
  std::int64_t num_owned = 0, num_inner = 0, num_halo = 0;
  Array<NodeId> global_ids;  // owned then halo
  Csr graph;                 // num_owned rows, columns over owned + halo
  Array<std::int32_t> degree;
  Array<float> features;
  std::int64_t num_features = 0;
  Array<std::int32_t> labels;
  std::int64_t label_cols = 0;
  LabelKind label_kind = LabelKind::kNone;
  std::int64_t num_classes = 0;
  std::vector<Split> splits;
  Array<EdgeId> send_offsets, recv_offsets;
  Array<NodeId> send;

  const Split* split(const std::string& name) const;
};

// Writes PARTS atomically from a dataset and its owner array; returns the root meta.json.
// extra is merged into the root meta (e.g. timing).
nlohmann::json write_parts(const GraphDataset& d, const std::vector<PartId>& owner,
                           const PartitionOptions& options, const Quality& quality,
                           const std::filesystem::path& dir, bool overwrite,
                           const nlohmann::json& extra);

// `halo partition`: reads the dataset at `dataset` (verifying checksums), partitions it,
// measures the result and writes PARTS (and the gpmetis-style assignment file when
// assignment_out is non-empty). Returns the root meta.json, with timings and peak memory.
nlohmann::json partition_dataset(const std::filesystem::path& dataset,
                                 const std::filesystem::path& out, const PartitionOptions& options,
                                 bool overwrite, const std::filesystem::path& assignment_out = {});

// PARTS/meta.json, checked.
nlohmann::json read_parts_meta(const std::filesystem::path& dir);
// The owner array (part of every global node).
Array<PartId> read_owner(const std::filesystem::path& dir, const ReadOptions& = {});
// The dataset's input order of every global node (empty when the dataset was not reordered).
Array<NodeId> read_original_ids(const std::filesystem::path& dir, const ReadOptions& = {});
// Maps part `rank` of PARTS; throws InputError naming the file on any mismatch.
Part read_part(const std::filesystem::path& dir, int rank, const ReadOptions& = {});

// True when dir holds a partitioned dataset (meta.json format "halo-parts").
bool is_parts_dir(const std::filesystem::path& dir);

// Writes one part id per line in node order (gpmetis's .part.K format), atomically.
void write_assignment(const std::filesystem::path& path, const std::vector<PartId>& owner);

}  // namespace halo

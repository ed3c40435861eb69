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
//                                                  [owned + recv_offsets[q], owned +
//                                                  recv_offsets[q+1])
//
//   original_ids.bin       int32 [nodes]          (root, reordered datasets only) input order
//
// Halo rows are ordered by owning peer, then by global id; a peer's send list to r is r's
// receive list from it, element for element. The rows and send/recv arrays are the part's
// HaloPlan (halo_plan.h), which write_parts builds with build_halo_plan.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "halo/graph/dataset.h"
#include "halo/partition/halo_plan.h"
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
  std::string fingerprint;          // of this part's arrays, as PARTS/meta.json records it
  std::string partition;            // fingerprint of the partition it belongs to
  std::string dataset_fingerprint;  // of the dataset that partition cut

  const Split* split(const std::string& name) const;
  // The part's send and receive arrays as the exchanger takes them (valid while the part lives).
  HaloPlanView halo_plan() const;
};

inline constexpr const char* kPartsFormat = "halo-parts";  // PARTS/meta.json "format"

// The three steps of write_parts, for writers that share the parts among processes (ptscotch:
// MPI rank r writes parts r, r + P, ...). Together they write the same files write_parts does.
// owner.bin (and original_ids.bin) into the root; returns the partition's fingerprint, which
// every part records.
std::string write_parts_owner(ArrayDir& root, const GraphDataset& d,
                              const std::vector<PartId>& owner);
// part-R of plan.rank under root: its plan, local CSR, degrees, features, labels and splits.
// local_of maps the plan's global ids to local rows (build_halo_plan). Reads only the rows of
// d that the part owns (and the offsets of its halo rows). Returns the part's fingerprint.
std::string write_part(const std::filesystem::path& root, const GraphDataset& d,
                       const std::vector<PartId>& owner, const HaloPlan& plan,
                       const std::vector<NodeId>& local_of, const std::string& partition_fp);
// One part's rows of a dataset, gathered by the process that writes the part when no process
// reads the whole dataset (ptscotch: each rank reads a slice of rows and sends every part's
// rows to the rank writing it). Rows are in increasing global id.
struct PartRows {
  std::vector<NodeId> ids;                // the part's nodes, ascending
  std::vector<EdgeId> offsets;            // [ids + 1]: their rows in indices
  std::vector<NodeId> indices;            // global columns, each row sorted
  std::vector<float> values;              // edge weights, or empty
  std::vector<float> features;            // ids x num_features
  std::vector<std::int32_t> labels;       // ids x label_cols
  std::vector<std::uint8_t> splits;       // ids x the dataset's splits: 1 train, 2 valid, 4 test
  std::vector<NodeId> halo_ids;           // ascending: the nodes of other parts the rows reference
  std::vector<std::int32_t> halo_degree;  // their global degrees

  // The rows as a graph of ids.size() nodes whose columns are global ids (not its own nodes).
  CsrView view() const;
};
// write_part from gathered rows: the same files as from the dataset; d gives only what
// describes the dataset (sizes, label kind, split names, fingerprint), none of its rows.
std::string write_part(const std::filesystem::path& root, const GraphDataset& d,
                       const PartRows& rows, const HaloPlan& plan,
                       const std::vector<NodeId>& local_of, const std::string& partition_fp);
// PARTS/meta.json (quality, options, dataset, part fingerprints, then extra); returns it.
nlohmann::json write_parts_meta(ArrayDir& root, const GraphDataset& d,
                                const PartitionOptions& options, const Quality& quality,
                                const std::vector<std::string>& part_fps,
                                const nlohmann::json& extra);

// Bytes the K parts of d will take on disk (an upper estimate), for the free-space check made
// before partitioning.
std::uint64_t parts_bytes(const GraphDataset& d, int k);

// Writes PARTS atomically from a dataset and its owner array, one part (build_halo_plan) at a
// time; returns the root meta.json.
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

// partition_dataset for --method ptscotch, run by every rank of an MPI job (or one process,
// which then initialises MPI alone): rank r maps the dataset, validates and hands PT-Scotch only
// its slice of rows, the ranks gather the assignment, measure it from their slices, send each
// part's rows to the rank writing it (rank r writes parts r, r + P, ...), and write the parts
// into one staging folder that rank 0 commits. Each rank reads only its slice of the dataset
// (plus the node-sized split lists), which must be at the same path on every rank; PARTS must
// be on a file system every rank sees. Rank 0 returns the root meta.json, the others null. An
// error on any rank leaves no output and reaches the caller of the lowest failing rank; the
// other ranks wait for the job to be aborted (halo's main does so on any error). ParamError
// when halo was built without PT-Scotch.
nlohmann::json partition_dataset_ptscotch(const std::filesystem::path& dataset,
                                          const std::filesystem::path& out,
                                          const PartitionOptions& options, bool overwrite,
                                          const std::filesystem::path& assignment_out);

// PARTS/meta.json, with every field the readers, `halo info` and the trainer use type- and
// range-checked, and its fingerprint consistent with its arrays and dataset.
nlohmann::json read_parts_meta(const std::filesystem::path& dir);
// The owner array (part of every global node), every entry checked to be in [0, k).
Array<PartId> read_owner(const std::filesystem::path& dir, const ReadOptions& = {});
// The dataset's input order of every global node (empty when the dataset was not reordered),
// checked to be a permutation.
Array<NodeId> read_original_ids(const std::filesystem::path& dir, const ReadOptions& = {});
// Maps part `rank` of PARTS and validates it (validate_part); first checks that part-R was cut
// by the partition and from the dataset PARTS/meta.json names (fingerprints), so every rank
// refuses a foreign part before training. Throws InputError naming the file on any mismatch.
Part read_part(const std::filesystem::path& dir, int rank, const ReadOptions& = {});
// Every structural promise of a part that one rank can check alone (layout above): global ids
// distinct, in range and in run order; CSR offsets and columns; degrees of owned rows equal to
// their row lengths; send and receive offsets and lists in range; labels, splits, finite floats.
// pd names the part's directory in messages. O(size of the part).
void validate_part(const Part& p, const std::filesystem::path& pd);
// `halo info PARTS`: reads every part (presence, checksums, fingerprints, validate_part), then
// checks them against each other: owner.bin agrees with every part's rows, the parts cover
// every node once, and each send list is its peer's receive list. Throws InputError naming
// the part and file.
void verify_parts(const std::filesystem::path& dir);

// True when dir holds a partitioned dataset (meta.json format "halo-parts").
bool is_parts_dir(const std::filesystem::path& dir);

// Writes one part id per line in node order (gpmetis's .part.K format), atomically.
void write_assignment(const std::filesystem::path& path, const std::vector<PartId>& owner);

}  // namespace halo

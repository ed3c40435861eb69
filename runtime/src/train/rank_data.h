// What one rank of a full-graph job (training or inference) computes on: a native dataset in
// one process, or part r of PARTS for rank r, read and checked, as one view. Private to runtime/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halo/gnn/device.h"
#include "halo/gnn/graph_op.h"
#include "halo/gnn/matrix.h"
#include "halo/gnn/model.h"
#include "halo/graph/dataset.h"
#include "halo/partition/parts.h"
#include "halo/runtime/comm/comm.h"

namespace halo {

// What one rank computes on: its owned rows (inner rows first) and the halo rows after them.
struct RankData {
  std::string source;               // the dataset or PARTS directory, for messages
  std::string dataset_fingerprint;  // of the dataset (a checkpoint's key)
  std::string partition;            // fingerprint of PARTS; empty for one process
  std::int64_t owned = 0, all = 0, inner = 0, global_nodes = 0;
  bool directed = false;                 // the dataset's arcs go one way (no symmetric operator)
  CsrView graph;                         // owned rows, columns over [owned | halo]
  const std::int32_t* degree = nullptr;  // [all] global degrees
  const NodeId* global_ids = nullptr;    // [all]; null = identity (one process)
  MatrixView features;                   // owned x num_features
  const std::int32_t* labels = nullptr;  // owned x label_cols
  std::int64_t label_cols = 0, num_classes = 0;
  LabelKind label_kind = LabelKind::kNone;
  const std::vector<Split>* splits = nullptr;  // local ids
  std::string default_split;
  HaloPlanView plan;
  const NodeId* original_ids = nullptr;  // [global_nodes] input order (rank 0), or null
};

// A RankData and the arrays it views (mapped from the files: release_graph and release_features
// drop their resident pages once a job has no more use for them).
struct RankInput {
  RankData data;
  std::optional<GraphDataset> dataset;  // one process
  std::optional<Part> part;             // rank r of PARTS
  std::vector<std::int32_t> degree;     // one process: the degrees RankData::degree views
  Array<NodeId> original;               // PARTS' original ids (rank 0)
  // Drops the resident pages of the mapped graph (the operator has its own copy).
  void release_graph() const;
  // Drops the resident pages of the mapped features.
  void release_features() const;
};

// OpenMP threads of a rank: `threads` if > 0, else OMP_NUM_THREADS, else (ranks > 1) the cores
// this rank's share of the machine gives it.
void set_rank_threads(int threads, int ranks);

// x with every row divided by its sum (rows summing to 0 stay 0): Planetoid's --norm-features.
Matrix row_normalised(const MatrixView& x);

// The model's inputs on one rank: the features (as mapped, or row-normalised) and the graph
// operator of the model's kind, on the host, and under CUDA a device copy of each.
struct ModelInputs {
  Matrix xnorm;  // the row-normalised copy x views (--norm-features)
  MatrixView x;  // owned x features, in the memory of the device placed on
  GraphOperator gcn, mean;
  AttentionGraph attention;  // --model gat
  Matrix x_dev;              // device copies (CUDA)
  Matrix x_agg;              // layer 0's A X, when the model reads x only through it
  GraphOperator gcn_dev, mean_dev;
  DeviceArray<EdgeId> att_offsets, att_t_offsets, att_t_edge;
  DeviceArray<NodeId> att_indices, att_t_rows, gids_dev;

  // Builds x and the operator of `kind` on the host; transpose = false leaves out the transpose
  // that only backward multiplies by.
  void load(const RankData& d, ModelKind kind, bool norm_features, bool transpose = true);
  // Copies x and the operator to `dev` (CUDA; nothing on the host), and fills the graph fields of
  // ctx (rows, operator, global ids) with views of them: the exchange is the caller's.
  void place(const RankData& d, ModelKind kind, Device dev, GraphContext& ctx);
  // Frees the normalised and device copies of the features (once layer 0 has read them).
  void drop_features();
  // For a model that reads x only through A X (reads_input_only_aggregated): computes A X once
  // (collective: the halo rows are exchanged) into ctx.input_aggregate and drops the copies of
  // the features, which nothing reads again; x keeps its shape without data. Else nothing.
  void aggregate_input_once(Backend& be, const ModelConfig& model, GraphContext& ctx);
};

// One property of a rank's input that every rank of a job must share: its name in messages
// ("dataset fingerprint") and this rank's value.
struct InputField {
  std::string name, value;
};

// That every rank of comm computes on the same input (`source`: the path, the same on every
// node): each field agrees across ranks, else every rank throws the same InputError naming the
// rank and host that differ from the most ranks, and both values, ending in `hint`. A node whose
// copy is of another dataset or partition would otherwise train a mix of both. Collective.
void check_inputs_agree(const std::string& source, const std::vector<InputField>& fields,
                        const std::string& hint, Communicator& comm);

// The native dataset at `dataset` for one process.
std::unique_ptr<RankInput> open_dataset_rank(const std::filesystem::path& dataset);
// PARTS/part-r for rank r of comm, refusing a job of another size and parts whose send and
// receive counts disagree (parts of different partitions). Collective.
std::unique_ptr<RankInput> open_parts_rank(const std::filesystem::path& parts, Communicator& comm);

}  // namespace halo

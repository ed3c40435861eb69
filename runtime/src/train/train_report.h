// What the full-graph trainer reports: the metrics of the three split row sets over all ranks,
// the per-rank figures of an epoch gathered on rank 0, the summary of the runs, and the
// predictions file. Private to runtime/.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "halo/gnn/matrix.h"
#include "halo/graph/dataset.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/train/trainer.h"
#include "train/train_checkpoint.h"

namespace halo {

// Host buffers the multi-label metrics reuse from one evaluation to the next.
struct MetricBuffers {
  std::vector<float> scores;
  std::vector<std::int32_t> labels;
};

// Accuracy (or ROC-AUC, multilabel) of logits on the train, valid and test rows of split, over
// all ranks (labels: owned x label_cols). Collective; every rank gets the same three values.
std::array<double, 3> split_metrics(Communicator& comm, const MatrixView& logits,
                                    const std::int32_t* labels, std::int64_t label_cols,
                                    bool multilabel, const Split& split, MetricBuffers& bufs);

// Per-rank figures of one epoch, gathered on rank 0 for the log.
struct RankFigures {
  double bytes = 0, eval_bytes = 0, wait_s = 0, allreduce_s = 0, compute_s = 0, epoch_s = 0;
};

// Rank 0's record of every training epoch: all ranks' halo bytes, the slowest rank's times.
struct FigureHistory {
  std::vector<double> bytes, wait, allreduce, compute;
};

// Gathers every rank's fig on rank 0, which adds them to rec ("halo_bytes", "ranks") and to
// history. Collective.
void gather_figures(Communicator& comm, const RankFigures& fig, FigureHistory& history,
                    nlohmann::json& rec);

// The summary of the runs: results, mean and std over seeds, median times and exchange figures,
// and the peak memory over ranks (rank 0 also gets every rank's rows and peak). Collective.
TrainSummary summarize_runs(Communicator& comm, const std::vector<RunState>& states,
                            const FigureHistory& history, std::int64_t owned, std::int64_t halo,
                            bool gpu);

// Writes eval's rows (classes, or sigmoid scores when multilabel) to path on rank 0, in input
// order: every rank sends its owned rows under their global ids (global_ids; null = identity),
// original_ids (null = identity) maps them to input order. Collective.
void write_predictions(Communicator& comm, const std::filesystem::path& path,
                       const MatrixView& eval, bool multilabel, std::int64_t label_cols,
                       const NodeId* global_ids, const NodeId* original_ids);

}  // namespace halo

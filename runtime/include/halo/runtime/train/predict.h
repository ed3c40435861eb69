// Full-graph inference from a training checkpoint: `halo predict`. The model a checkpoint holds
// (the best-validation epoch's weights, or the newest) runs over the whole graph layer by layer
// with nothing kept for backward (Model::infer), on one process or K ranks and on any partition:
// checkpoints name no partition's rows. Writes the predictions in input order and, optionally, one
// layer's output as embeddings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

#include "halo/runtime/train/trainer.h"

namespace halo {

struct PredictOptions {
  std::filesystem::path checkpoint;      // halo train --checkpoint DIR
  std::string epoch = "best";            // best | last | N (the best or the newest epoch's number)
  int run = -1;                          // DIR/run-R; -1: the run with the best validation score
  std::filesystem::path out;             // .npy: class ids (int64) or, multi-label, sigmoid scores
  std::filesystem::path embeddings_out;  // .npy float32 [nodes x width] of layer `layer`
  int layer = -1;                        // 0-based; -1: the last hidden layer (the output of one)
  int threads = 0;                       // 0 = OpenMP's default
  DeviceChoice device = DeviceChoice::kCpu;
  // Throws ParamError for impossible values.
  void check() const;
};

struct PredictSummary {
  int run = 0, epoch = 0;
  bool best = false;  // the weights are the best-validation epoch's
  std::uint64_t seed = 0;
  std::string model;          // the --model of the checkpoint
  int embeddings_layer = -1;  // the layer written, or -1
  std::int64_t embeddings_width = 0;
  std::string metric;                     // acc | rocauc
  double train = 0, valid = 0, test = 0;  // on the checkpoint's split
  double inference_s = 0;                 // the forward pass, exchange included (slowest rank)
  double peak_rss_mb = 0;                 // the largest over ranks, whole process
  int ranks = 1;
  // The CPU's bf16 kernel the checkpoint's run computed with ("" when none): predict runs it too.
  std::string bf16_kernel;
};

// Inference over a native dataset in this process. Lines go to out.
PredictSummary predict_dataset(const std::filesystem::path& dataset, const PredictOptions& opt,
                               std::ostream& out);
// Rank r of comm's share of inference over PARTS (rank 0 writes the files). Collective: every
// rank calls it with the same options.
PredictSummary predict_parts(const std::filesystem::path& parts, Communicator& comm,
                             const PredictOptions& opt, std::ostream& out);

}  // namespace halo

// Full-batch node-classification training: presets that reproduce published configurations,
// OGB's evaluation protocol (test at the best validation epoch, mean ± std over seeds), JSON-line
// logs, predictions for independent scoring, and atomic checkpoints that resume bit-identically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "halo/gnn/model.h"

namespace halo {

struct TrainOptions {
  ModelConfig model;               // kind, layers, hidden, dropout, input_dropout, batch_norm
  float lr = 0.01f;
  float weight_decay = 0.f;
  bool decay_first_layer_only = false;  // Kipf & Welling regularise the first layer only
  int epochs = 200;
  bool norm_features = false;      // row-normalise the input features (Planetoid)
  std::string split;               // split name ("" = "public" if present, else the first)
  std::uint64_t seed = 0;
  int runs = 1;                    // seeds seed .. seed + runs - 1
  int eval_every = 1;
  int threads = 0;                 // 0 = OpenMP's default
  std::filesystem::path log;             // JSON lines
  std::filesystem::path checkpoint;      // directory; empty = none
  int checkpoint_every = 10;
  bool resume = false;
  std::filesystem::path predictions_out;  // .npy of the best-validation model's outputs
  bool quiet = false;              // no per-epoch lines
  bool profile = false;            // time every kernel and print the table at the end

  // Throws ParamError for out-of-range values.
  void check() const;
};

// The named configurations (planetoid-gcn, ogbn-arxiv-gcn, ogbn-products-gcn,
// ogbn-proteins-gcn) applied onto opt; throws ParamError naming the known ones.
void apply_preset(const std::string& name, TrainOptions& opt);
std::vector<std::string> preset_names();

struct RunResult {
  std::uint64_t seed = 0;
  int best_epoch = 0;
  double best_valid = 0, test_at_best = 0, train_at_best = 0;
  double final_loss = 0;
  std::vector<double> epoch_seconds;
};

struct TrainSummary {
  std::string metric;  // acc | rocauc
  std::vector<RunResult> runs;
  double valid_mean = 0, valid_std = 0, test_mean = 0, test_std = 0;
  double epoch_time_median_s = 0;
  double peak_rss_mb = 0;
  nlohmann::json to_json() const;  // the "summary" log record
};

// Trains on a native dataset in this process. Epoch lines go to out (unless quiet).
TrainSummary train_dataset(const std::filesystem::path& dataset, const TrainOptions& opt,
                           std::ostream& out);

}  // namespace halo

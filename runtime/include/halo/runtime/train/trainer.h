// Full-batch node-classification training: presets that reproduce published configurations,
// OGB's evaluation protocol (test at the best validation epoch, mean ± std over seeds), JSON-line
// logs, predictions for independent scoring, and atomic checkpoints of the dataset's model (no
// partition's rows) that resume bit-identically on the same ranks and on any other number of
// ranks continue the same trajectory (up to float summation order).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "halo/gnn/cpu_bf16.h"
#include "halo/gnn/model.h"
#include "halo/graph/error.h"
#include "halo/runtime/comm/halo_exchange.h"

namespace halo {

// Where training runs: the CPU, the GPU, or the GPU when one is visible (else the CPU).
enum class DeviceChoice { kCpu, kCuda, kAuto };
// "cpu" | "cuda" | "auto" (the --device spellings); throws ParamError naming the expected ones.
DeviceChoice parse_device_choice(std::string_view s);
// The --device spelling of d, for messages.
const char* to_string(DeviceChoice d);

// How an injected fault fails its rank: an exception, SIGKILL, or a hang.
enum class FaultMode { kThrow, kKill, kHang, kAlloc };

struct TrainOptions {
  ModelConfig model;  // kind, layers, hidden, dropout, input_dropout, batch_norm
  float lr = 0.01f;
  float weight_decay = 0.f;
  bool decay_first_layer_only = false;  // Kipf & Welling regularise the first layer only
  int epochs = 200;
  bool norm_features = false;  // row-normalise the input features (Planetoid)
  std::string split;           // split name ("" = "public" if present, else the first)
  std::uint64_t seed = 0;
  int runs = 1;  // seeds seed .. seed + runs - 1
  int eval_every = 1;
  int threads = 0;                   // 0 = OpenMP's default
  std::filesystem::path log;         // JSON lines
  std::filesystem::path checkpoint;  // directory; empty = none. Rank r writes run-R/rank-r/
  int checkpoint_every = 10;
  bool resume = false;  // from the newest epoch of these options any rank sees, on any ranks
  // A fresh run may replace an earlier run's checkpoint in `checkpoint` (refused otherwise).
  bool force = false;
  std::filesystem::path predictions_out;  // .npy of the best-validation model's outputs
  bool quiet = false;                     // no per-epoch lines
  bool profile = false;                   // time every kernel and print the table at the end
  DeviceChoice device = DeviceChoice::kCpu;
  // tf32 (CUDA) | bf16: the products' inputs.
  MatmulPrecision matmul_precision = MatmulPrecision::kFp32;
  // The CPU's bf16 kernel (cpu_bf16.h): auto = the faster by a start-up probe, agreed by all
  // ranks from their summed times. Needs matmul_precision bf16; not for --device cuda.
  Bf16Kernel bf16_kernel = Bf16Kernel::kAuto;
  // Distributed runs (halo train PARTS under mpirun); ignored by one process.
  HaloDtype halo_dtype = HaloDtype::kF32;  // bf16: half the bytes of the halo exchange
  int halo_staleness = 0;  // 0 exact | 1 use the previous epoch's halo rows (PipeGCN)
  // GAMMA in [0, 1): stale halo rows and gradients become their moving average (PipeGCN-F/G;
  // halo_exchange.h); 0 = plain staleness. Needs halo_staleness 1.
  float halo_smoothing = 0.f;
  // Testing aid (HALO_INJECT_FAULT=RANK:EPOCH[:throw|kill|hang|alloc]): that rank fails at the
  // start of that epoch, to prove a failure ends the whole job.
  struct Fault {
    int rank = -1, epoch = 0;
    FaultMode mode = FaultMode::kThrow;
  } fault;

  // Throws ParamError for out-of-range values.
  void check() const;
};

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
  double peak_rss_mb = 0;  // the largest over ranks
  // GPU memory halo allocated at most (CUDA runs; largest rank): every tensor, operator, SpMM
  // plan (offsets, aligned copies, cuSPARSE work buffers) and scratch buffer, as PyTorch's
  // max_memory_allocated counts its tensors; not the CUDA context, cuBLAS's and cuSPARSE's
  // internal workspaces or NCCL's buffers (nvidia-smi sees those).
  double peak_gpu_mb = 0;
  std::string matmul_precision = "fp32";
  std::string bf16_kernel;  // "dot" | "fma": the CPU's bf16 kernel; empty when none ran
  // Distributed figures (medians over the training epochs; times are the slowest rank's).
  int ranks = 1;
  double halo_bytes_per_epoch = 0;  // all ranks together, one training step
  // All ranks together, once before the first epoch: the input rows layer 0's A X reads (a GCN
  // that aggregates first computes it once; no epoch exchanges them again).
  double setup_halo_bytes = 0;
  double halo_wait_s = 0, allreduce_s = 0, compute_s = 0;
  // Per rank, in rank order (rank 0's summary only; empty for one process): its part's owned and
  // halo rows and its peak resident memory, the figures the per-rank memory model predicts.
  std::vector<std::int64_t> rank_owned_rows, rank_halo_rows;
  std::vector<double> rank_peak_rss_mb;
  nlohmann::json to_json() const;  // the "summary" log record
};

struct Split;
// The split training uses when --split is not given: "public" when there is one, else the split
// a partition was balanced for (partitioned_for; "" for a dataset), else the first; "" if none.
std::string default_split(const std::vector<Split>& splits, const std::string& partitioned_for);
// The error for a split `name` (asked for, or default_split's) that `where` does not have: its
// splits named, or, when it has none, that it has none and how to write one.
ParamError missing_split(const std::string& where, const std::string& name,
                         const std::vector<Split>& splits);

// Trains on a native dataset in this process. Epoch lines go to out (unless quiet).
TrainSummary train_dataset(const std::filesystem::path& dataset, const TrainOptions& opt,
                           std::ostream& out);

class Communicator;
// One rank of a distributed run: rank r of comm trains on PARTS/part-r, exchanging halo rows
// with the other ranks. Same model, protocol, logs and checkpoints as train_dataset (a checkpoint
// of PARTS' dataset resumes whatever partition or rank count wrote it); rank 0 prints, logs and
// writes predictions. Collective: every rank calls it with the same options.
TrainSummary train_parts(const std::filesystem::path& parts, Communicator& comm,
                         const TrainOptions& opt, std::ostream& out);

}  // namespace halo

// `halo train DATASET` (one process) and `mpirun -np K halo train PARTS` (rank r trains on
// PARTS/part-r): full-batch training with presets, OGB protocol, logs, checkpoints.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/partition/parts.h"
#include "halo/runtime/cluster/calibrate.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/train/presets.h"
#include "halo/runtime/train/trainer.h"

namespace halo::cli {
namespace {

// `halo train ... --dry-run`: every rank's predicted peak memory from its part's shape (or the
// dataset's, for one process), without training, MPI or touching the data (nothing is
// checksummed: only sizes are read).
void print_dry_run(const std::string& path, const TrainOptions& o) {
  const JobShape job = job_shape(path, o);
  const std::vector<RankShape>& ranks = job.ranks;
  const ModelShape& model = job.model;
  // The model knows one configuration.
  if (o.device != DeviceChoice::kCpu || o.matmul_precision != MatmulPrecision::kFp32)
    std::printf("note: --device %s --matmul-precision %s: host memory of the CPU FP32 run shown\n",
                to_string(o.device), to_string(o.matmul_precision));
  std::printf(
      "predicted peak memory per rank (halo train, CPU backend, FP32; the model is in "
      "docs/BENCHMARKS.md):\n");
  std::printf("%4s %11s %11s %13s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", "rank", "owned", "halo",
              "nonzeros", "features", "graph", "operator", "activ.", "grads", "exchange", "weights",
              "other", "peak (MiB)");
  const auto mib = [](std::int64_t b) { return double(b) / double(1 << 20); };
  std::size_t worst = 0;
  std::vector<MemoryEstimate> est;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    est.push_back(estimate_rank_memory(ranks[r], model));
    const MemoryEstimate& e = est.back();
    if (e.total() > est[worst].total()) worst = r;
    std::printf("%4zu %11lld %11lld %13lld %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f  %.1f\n",
                r, static_cast<long long>(ranks[r].owned), static_cast<long long>(ranks[r].halo),
                static_cast<long long>(ranks[r].nnz), mib(e.features), mib(e.graph), mib(e.op),
                mib(e.activations), mib(e.gradients), mib(e.exchange), mib(e.weights),
                mib(e.transient + e.predictions + e.overhead), mib(e.total()));
  }
  std::printf(
      "largest: rank %zu, %s (other = transient %s + overhead %s%s)\n", worst,
      format_bytes(std::uint64_t(est[worst].total())).c_str(),
      format_bytes(std::uint64_t(est[worst].transient)).c_str(),
      format_bytes(std::uint64_t(est[worst].overhead)).c_str(),
      model.predictions
          ? (" + predictions " + format_bytes(std::uint64_t(est[worst].predictions))).c_str()
          : "");
}

// `halo train PATH --calibrate TABLE`: every rank measures itself (calibrate.h) for the model
// the options describe on PATH's widths and mean degree (a dataset, or PARTS, under any number of
// ranks); rank 0 writes the table, staged so that a failed run leaves none, and prints it.
int run_calibration(Communicator& comm, const std::string& path, const TrainOptions& opt,
                    const std::string& table_path) {
  // The widths training would use and the graph's mean degree, from headers only: a PARTS rank
  // reads its own part (on a cluster a node holds only its ranks' parts), a dataset its meta.
  std::int64_t rows = 0, nnz = 0, in = 0, out = 0;
  const ReadOptions lazy{.verify_checksums = false};
  if (is_parts_dir(path)) {
    const nlohmann::json meta = read_parts_meta(path);
    rows = meta["dataset"]["nodes"].get<std::int64_t>();
    nnz = meta["dataset"]["edges"].get<std::int64_t>();
    const Part p = read_part(path, comm.rank() % meta["k"].get<int>(), lazy);
    in = p.num_features;
    out = p.label_kind == LabelKind::kMultilabel ? p.label_cols : p.num_classes;
  } else {
    const GraphDataset d = read_graph_dataset(path, lazy);
    rows = d.num_nodes();
    nnz = d.graph.num_edges();
    in = d.num_features;
    out = d.label_kind == LabelKind::kMultilabel ? d.label_cols : d.num_classes;
  }
  if (in == 0 || out == 0)
    throw ParamError(path + ": calibration needs node features and labels (the model's widths)");
  std::optional<StagedFile> file;
  if (comm.rank() == 0) file.emplace(table_path, std::vector<std::filesystem::path>{path});
  Stopwatch clock;
  CalibrateOptions c;
  c.rows = std::clamp<std::int64_t>(rows, 16, c.rows);  // a small graph: its own size
  if (const char* mb = std::getenv("HALO_CALIBRATE_LINK_MB"); mb && std::atof(mb) > 0)
    c.link_bytes = std::size_t(std::atof(mb) * double(1 << 20));
  const SpeedTable t =
      calibrate_speed(comm, opt, in, out, rows > 0 ? double(nnz) / double(rows) : 0.0, c);
  if (comm.rank() != 0) return 0;
  file->write(t.to_json().dump(2) + "\n");
  file->commit();
  std::printf("%s: speed of %zu rank%s for %s x %lld, %.0f bytes per halo row per epoch\n",
              table_path.c_str(), t.ranks.size(), t.ranks.size() == 1 ? "" : "s",
              to_string(opt.model.kind), static_cast<long long>(opt.model.hidden),
              t.halo_row_bytes);
  std::printf("%4s  %-16s %7s %14s %14s %18s  %s\n", "rank", "host", "threads", "us/row",
              "ns/nonzero", "epoch s/100k rows", "links (MB/s)");
  const double degree = rows > 0 ? double(nnz) / double(rows) : 0.0;
  for (std::size_t r = 0; r < t.ranks.size(); ++r) {
    const RankSpeed& s = t.ranks[r];
    std::string links;
    for (std::size_t p = 0; p < s.link_bytes_per_s.size(); ++p)
      if (p != r)
        links +=
            (links.empty() ? "" : " ") + std::to_string(std::lround(s.link_bytes_per_s[p] / 1e6));
    std::printf("%4zu  %-16s %7d %14.3f %14.3f %18.3f  %s\n", r, s.host.c_str(), s.threads,
                s.row_s * 1e6, s.nonzero_s * 1e9, 1e5 * (s.row_s + s.nonzero_s * degree),
                links.empty() ? "-" : links.c_str());
  }
  print_footer("calibrate", clock.seconds());
  return 0;
}

}  // namespace

// An option table: one declaration per flag, read top to bottom (exempt from the 80-line rule).
// NOLINTNEXTLINE(readability-function-size)
Action add_train(CLI::App& app) {
  struct Args {
    std::string dataset, preset, model = "gcn", split, log, checkpoint, predictions, calibrate,
                                 halo_dtype = "f32", device = "cpu", matmul_precision = "fp32",
                                 bf16_kernel = "auto";
    int layers = 2, epochs = 200, runs = 1, eval_every = 1, threads = 0, checkpoint_every = 10,
        staleness = 0, heads = 1, out_heads = 1;
    std::int64_t hidden = 16;
    float dropout = 0.5f, lr = 0.01f, weight_decay = 0.f, attn_dropout = 0.f, smoothing = 0.f;
    bool residual = false, batch_norm = false, norm_features = false, input_dropout = false,
         resume = false, force = false, quiet = false, profile = false, dry_run = false;
    std::uint64_t seed = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("train", "Train a GNN on a dataset (full batch)");
  cmd->add_option(
         "dataset", a->dataset,
         "Native dataset directory (one process), or PARTS from halo partition (mpirun -np K)")
      ->required();
  auto* preset =
      cmd->add_option("--preset", a->preset,
                      "planetoid-gcn | planetoid-gat | ogbn-arxiv-gcn | ogbn-arxiv-gat | "
                      "ogbn-products-gcn | ogbn-proteins-gcn");
  std::vector<std::pair<CLI::Option*, std::function<void(TrainOptions&)>>> overrides;
  auto over = [&](CLI::Option* o, std::function<void(TrainOptions&)> set) {
    overrides.emplace_back(o, std::move(set));
  };
  over(cmd->add_option("--model", a->model, "gcn | sage | gat")->capture_default_str(),
       [a](TrainOptions& t) { t.model.kind = parse_model_kind(a->model); });
  // Depth and width bounded far above any published model (deep GCNs reach ~100 layers, widths
  // a few thousand) so that a typo is an error, not an allocation of nodes x width floats.
  over(cmd->add_option("--layers", a->layers, "Number of layers")
           ->capture_default_str()
           ->check(int_range(1, 1024)),
       [a](TrainOptions& t) { t.model.layers = a->layers; });
  over(cmd->add_option("--hidden", a->hidden, "Hidden width")
           ->capture_default_str()
           ->check(int_range(1, 65536)),
       [a](TrainOptions& t) { t.model.hidden = a->hidden; });
  over(cmd->add_option("--dropout", a->dropout, "Dropout probability")
           ->capture_default_str()
           ->check(real_range(0, 1, false, true)),
       [a](TrainOptions& t) { t.model.dropout = a->dropout; });
  over(cmd->add_option("--heads", a->heads,
                       "GAT: attention heads of the hidden layers (concatenated; --hidden each)")
           ->capture_default_str()
           ->check(int_range(1, 1024)),
       [a](TrainOptions& t) { t.model.heads = a->heads; });
  over(cmd->add_option("--out-heads", a->out_heads, "GAT: heads of the output layer (averaged)")
           ->capture_default_str()
           ->check(int_range(1, 1024)),
       [a](TrainOptions& t) { t.model.out_heads = a->out_heads; });
  over(cmd->add_option("--attn-dropout", a->attn_dropout,
                       "GAT: dropout on the attention coefficients")
           ->capture_default_str()
           ->check(real_range(0, 1, false, true)),
       [a](TrainOptions& t) { t.model.attn_dropout = a->attn_dropout; });
  over(cmd->add_flag("--residual", a->residual, "GAT: residual connections (x W_res, or x)"),
       [a](TrainOptions& t) { t.model.residual = a->residual; });
  over(cmd->add_flag("--input-dropout", a->input_dropout, "Dropout on the input features too"),
       [a](TrainOptions& t) { t.model.input_dropout = a->input_dropout; });
  over(cmd->add_flag("--batch-norm", a->batch_norm, "Batch norm between layers"),
       [a](TrainOptions& t) { t.model.batch_norm = a->batch_norm; });
  over(cmd->add_option("--lr", a->lr, "Adam learning rate")
           ->capture_default_str()
           ->check(real_range(0, kMaxLearningRate, true)),
       [a](TrainOptions& t) { t.lr = a->lr; });
  over(cmd->add_option("--weight-decay", a->weight_decay, "L2 weight decay (Adam)")
           ->capture_default_str()
           ->check(real_range(0, kMaxWeightDecay)),
       [a](TrainOptions& t) { t.weight_decay = a->weight_decay; });
  over(cmd->add_option("--epochs", a->epochs, "Epochs")
           ->capture_default_str()
           ->check(int_range(1, kMaxEpochs)),
       [a](TrainOptions& t) { t.epochs = a->epochs; });
  over(cmd->add_flag("--norm-features", a->norm_features, "Row-normalise the input features"),
       [a](TrainOptions& t) { t.norm_features = a->norm_features; });
  over(cmd->add_option("--split", a->split, "Split name (default: public, else the first)"),
       [a](TrainOptions& t) { t.split = a->split; });
  over(cmd->add_option("--seed", a->seed, "Seed of the first run")
           ->capture_default_str()
           ->check(uint_range(0, std::numeric_limits<std::uint64_t>::max())),
       [a](TrainOptions& t) { t.seed = a->seed; });
  over(cmd->add_option("--runs", a->runs, "Runs with seeds S..S+R-1 (mean ± std reported)")
           ->capture_default_str()
           ->check(int_range(1, kMaxRuns)),
       [a](TrainOptions& t) { t.runs = a->runs; });
  over(cmd->add_option("--eval-every", a->eval_every, "Evaluate every N epochs")
           ->capture_default_str()
           ->check(int_range(1, kMaxEpochs)),
       [a](TrainOptions& t) { t.eval_every = a->eval_every; });
  over(cmd->add_option("--threads", a->threads, "OpenMP threads (0 = default)")
           ->capture_default_str()
           ->check(thread_count()),
       [a](TrainOptions& t) { t.threads = a->threads; });
  over(cmd->add_option("--log", a->log, "JSON-lines log file"),
       [a](TrainOptions& t) { t.log = a->log; });
  over(cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory"),
       [a](TrainOptions& t) { t.checkpoint = a->checkpoint; });
  over(cmd->add_option("--checkpoint-every", a->checkpoint_every, "Checkpoint every N epochs")
           ->capture_default_str()
           ->check(int_range(1, kMaxEpochs)),
       [a](TrainOptions& t) { t.checkpoint_every = a->checkpoint_every; });
  over(cmd->add_flag("--resume", a->resume, "Continue from --checkpoint"),
       [a](TrainOptions& t) { t.resume = a->resume; });
  over(cmd->add_flag("--force", a->force,
                     "Start a new run in a --checkpoint folder that holds an earlier run's "
                     "checkpoint, removing it"),
       [a](TrainOptions& t) { t.force = a->force; });
  over(
      cmd->add_option("--predictions-out", a->predictions, "Write the best model's outputs (.npy)"),
      [a](TrainOptions& t) { t.predictions_out = a->predictions; });
  over(cmd->add_flag("-q,--quiet", a->quiet, "No per-epoch lines"),
       [a](TrainOptions& t) { t.quiet = a->quiet; });
  over(cmd->add_flag("--profile", a->profile, "Time every kernel and print the table"),
       [a](TrainOptions& t) { t.profile = a->profile; });
  over(cmd->add_option("--device", a->device, "cpu | cuda | auto (cuda when a GPU is visible)")
           ->capture_default_str(),
       [a](TrainOptions& t) { t.device = parse_device_choice(a->device); });
  over(cmd->add_option("--matmul-precision", a->matmul_precision,
                       "Inputs of the matrix products: fp32 (exact) | bf16 (CPU with AVX-512 BF16, "
                       "or GPU) | tf32 "
                       "(GPU); sums stay float32")
           ->capture_default_str(),
       [a](TrainOptions& t) { t.matmul_precision = parse_matmul_precision(a->matmul_precision); });
  over(cmd->add_option("--bf16-kernel", a->bf16_kernel,
                       "The CPU's bf16 products: auto (the faster on this CPU, by a start-up "
                       "probe) | dot (AVX-512 BF16 vdpbf16ps) | fma (FP32 FMAs on bf16-rounded "
                       "inputs)")
           ->capture_default_str(),
       [a](TrainOptions& t) { t.bf16_kernel = parse_bf16_kernel(a->bf16_kernel); });
  over(cmd->add_option("--halo-dtype", a->halo_dtype,
                       "Halo payload: f32 (exact) | bf16 (half the bytes)")
           ->capture_default_str(),
       [a](TrainOptions& t) { t.halo_dtype = parse_halo_dtype(a->halo_dtype); });
  over(cmd->add_option("--halo-staleness", a->staleness,
                       "0 (exact) | 1: use the previous epoch's halo rows, overlapping the "
                       "exchange (PipeGCN)")
           ->capture_default_str()
           ->check(int_range(0, 1)),
       [a](TrainOptions& t) { t.halo_staleness = a->staleness; });
  over(cmd->add_option("--halo-smoothing", a->smoothing,
                       "GAMMA in [0, 1) with --halo-staleness 1: use the moving average of the "
                       "stale halo rows and gradients (PipeGCN-F/G; 0 = none)")
           ->capture_default_str()
           ->check(real_range(0, 1, false, true)),
       [a](TrainOptions& t) { t.halo_smoothing = a->smoothing; });
  cmd->add_option("--calibrate", a->calibrate,
                  "Measure each rank's speed for this model and its links to the other ranks, "
                  "write the speed table here (for halo partition --part-weights auto=TABLE) "
                  "and exit without training");
  cmd->add_flag(
      "--dry-run", a->dry_run,
      "Print every rank's predicted peak memory (from the parts' sizes) and exit without training");
  return [a, preset, overrides] {
    Communicator& comm = world();
    const bool parts = is_parts_dir(a->dataset);
    TrainOptions opt;
    opt.model.kind = parse_model_kind(a->model);
    opt.model.layers = a->layers;
    opt.model.hidden = a->hidden;
    opt.model.dropout = a->dropout;
    opt.epochs = a->epochs;
    if (preset->count() > 0) apply_preset(a->preset, opt);
    for (const auto& [o, set] : overrides)  // explicit flags win over the preset
      if (o->count() > 0) set(opt);
    if (!a->calibrate.empty()) return run_calibration(comm, a->dataset, opt, a->calibrate);
    if (!parts && comm.size() > 1)
      throw ParamError(a->dataset + " is a dataset, which trains on one process; for " +
                       std::to_string(comm.size()) + " ranks split it first: halo partition " +
                       a->dataset + " -k " + std::to_string(comm.size()) +
                       " -o PARTS, then mpirun -np " + std::to_string(comm.size()) +
                       " halo train PARTS");
    if (const char* f = std::getenv("HALO_INJECT_FAULT"); f && *f) opt.fault = parse_fault(f);
    if (a->dry_run) {  // no training: rank 0 (or the one process) prints every rank's figures
      if (comm.rank() == 0) print_dry_run(a->dataset, opt);
      return 0;
    }
    std::ostringstream quiet;  // ranks other than 0 print nothing
    std::ostream& out = comm.rank() == 0 ? std::cout : quiet;
    const TrainSummary s =
        parts ? train_parts(a->dataset, comm, opt, out) : train_dataset(a->dataset, opt, out);
    if (comm.rank() != 0) return 0;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s over %zu run%s: valid %.4f ± %.4f, test %.4f ± %.4f; median epoch %.4f s\n",
                  s.metric == "acc" ? "accuracy" : "ROC-AUC", s.runs.size(),
                  s.runs.size() == 1 ? "" : "s", s.valid_mean, s.valid_std, s.test_mean, s.test_std,
                  s.epoch_time_median_s);
    std::cout << line;
    if (s.ranks > 1) {
      std::snprintf(line, sizeof line,
                    "%d ranks: halo exchange %.2f MB per epoch; median epoch: compute %.4f s, halo "
                    "wait %.4f s, "
                    "all-reduce %.4f s (slowest rank)\n",
                    s.ranks, s.halo_bytes_per_epoch / 1e6, s.compute_s, s.halo_wait_s,
                    s.allreduce_s);
      std::cout << line;
      std::cout << "per rank: owned + halo rows, peak memory:";
      for (std::size_t r = 0; r < s.rank_peak_rss_mb.size(); ++r) {
        std::snprintf(line, sizeof line, "%s %lld + %lld, %.0f MiB", r ? ";" : "",
                      (long long)s.rank_owned_rows[r], (long long)s.rank_halo_rows[r],
                      s.rank_peak_rss_mb[r]);
        std::cout << line;
      }
      std::cout << "\n";
    }
    double total = 0;
    for (const auto& r : s.runs)
      for (double t : r.epoch_seconds) total += t;
    print_footer("train", total);
    return 0;
  };
}

}  // namespace halo::cli

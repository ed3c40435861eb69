// `halo tgn train DATASET`: memory-based temporal GNN (TGN) link prediction on an event stream.
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>

#include "commands.h"
#include "halo/graph/progress.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo::cli {
namespace {

// `halo tgn train ... --dry-run`: the memory model's terms for one rank of the run; with
// --device cuda|auto also its GPU memory for either --memory-on placement (the peak line stays
// the last "peak " of the output: the tests read it).
void print_tgn_dry_run(const TgnMemoryPrediction& p, const TgnOptions& o, int ranks) {
  const auto mib = [](std::int64_t bytes) { return double(bytes) / double(1 << 20); };
  if (o.device != DeviceChoice::kCpu && o.model != TgnModel::kEdgebank) {
    std::printf(
        "predicted GPU memory of %s (--device cuda; halo's own allocations), by --memory-on:\n",
        ranks > 1 ? "each rank" : "the process");
    std::printf("  %-11s %12s %12s\n", "", "device", "host");
    for (std::size_t i = 0; i < p.gpu_device.terms().size(); ++i)
      std::printf("  %-11s %12.1f %12.1f MiB\n", p.gpu_device.terms()[i].first.c_str(),
                  mib(p.gpu_device.terms()[i].second), mib(p.gpu_host.terms()[i].second));
    std::printf("  %-11s %12.1f %12.1f MiB (auto: device when it fits 90%% of the free memory)\n",
                "total", mib(p.gpu_device.total()), mib(p.gpu_host.total()));
  }
  const TgnMemoryEstimate& e = p.host;
  std::printf(
      "predicted peak memory of %s (halo tgn train, CPU backend; the model is in "
      "docs/BENCHMARKS.md \"TGN memory model\"):\n",
      ranks > 1 ? "each rank" : "the process");
  for (const auto& [name, bytes] : e.terms())
    std::printf("  %-11s %12.1f MiB\n", name.c_str(), mib(bytes));
  std::printf("  %-11s %12.1f MiB (largest term: %s)\n", "peak", mib(e.total()), e.largest());
}

}  // namespace

// An option table: one declaration per flag, read top to bottom (exempt from the 80-line rule).
// NOLINTNEXTLINE(readability-function-size)
Action add_tgn(CLI::App& app) {
  auto o = std::make_shared<TgnOptions>();
  auto path = std::make_shared<std::string>();
  auto log = std::make_shared<std::string>();
  struct Choices {  // the spellings the user typed, parsed into o's enums by the action
    std::string model = "tgn", parallel = "exact", aggregator = "last", embedding = "attn";
    std::string neighbors_before = "event", device = "cpu", memory_on = "auto";
  };
  auto c = std::make_shared<Choices>();
  auto* tgn = app.add_subcommand("tgn", "Temporal GNNs on event streams");
  tgn->require_subcommand(1);
  auto* cmd = tgn->add_subcommand(
      "train", "Train TGN (or score EdgeBank) for link prediction on a temporal dataset");
  cmd->add_option("dataset", *path, "Temporal dataset (halo convert --format konect|snap|jodie)")
      ->required();
  cmd->add_option("--model", c->model,
                  "tgn | jodie (tgn with --embedding time) | edgebank (memoryless floor)")
      ->capture_default_str();
  cmd->add_option("--parallel", c->parallel,
                  "Across ranks: exact (same model as one process) | segments (independent "
                  "memories per time segment)")
      ->capture_default_str();
  cmd->add_option("--aggregator", c->aggregator,
                  "last | mean: a node's messages between its memory updates")
      ->capture_default_str();
  cmd->add_option("--device", c->device,
                  "cpu | cuda | auto (cuda when a GPU is visible); edgebank runs on the host")
      ->capture_default_str();
  cmd->add_option("--memory-on", c->memory_on,
                  "device | host | auto: where the node memory and stored messages live with "
                  "--device cuda (host: pinned staging of each batch's rows, for streams whose "
                  "memory exceeds the GPU; auto: device when the memory model says it fits)")
      ->capture_default_str();
  cmd->add_option("--embedding", c->embedding,
                  "attn (temporal attention) | identity (the memory) | time (JODIE)")
      ->capture_default_str();
  // Widths bounded far above any published model (TGN uses 100-172) so that a typo is an
  // error, not an allocation of nodes x width x several floats.
  cmd->add_option("--memory-dim", o->memory_dim, "Node memory width")
      ->capture_default_str()
      ->check(int_range(1, kMaxTgnWidth));
  cmd->add_option("--embed-dim", o->embed_dim, "Embedding width")
      ->capture_default_str()
      ->check(int_range(1, kMaxTgnWidth));
  cmd->add_option("--time-dim", o->time_dim, "Time encoding width")
      ->capture_default_str()
      ->check(int_range(1, kMaxTgnWidth));
  cmd->add_option("--static-memory", o->static_memory,
                  "DistTGL's static node memory: a learned row of this width per node, next to "
                  "the memory in the attention (0 = off; --model tgn, --embedding attn)")
      ->capture_default_str()
      ->check(int_range(0, kMaxTgnWidth));
  cmd->add_option("--neighbors", o->neighbors, "Most recent neighbours attended to")
      ->capture_default_str()
      ->check(int_range(1, kMaxTgnNeighbors));
  cmd->add_option(
         "--neighbors-before", c->neighbors_before,
         "event: neighbours strictly before each event's time (TGN) | batch: before the batch")
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Events per batch")
      ->capture_default_str()
      ->check(int_range(1, kMaxBatchSize));
  cmd->add_option("--epochs", o->epochs, "Epochs")
      ->capture_default_str()
      ->check(int_range(1, kMaxEpochs));
  cmd->add_option("--lr", o->lr, "Adam learning rate")
      ->capture_default_str()
      ->check(real_range(0, kMaxLearningRate, true));
  cmd->add_option("--patience", o->patience,
                  "Stop after this many epochs without a better validation AP")
      ->capture_default_str()
      ->check(int_range(1, kMaxEpochs));
  cmd->add_flag("--learn-time-frequencies", o->learn_time_frequencies,
                "Train the time encoding's frequencies too (TGN's original; less stable)");
  cmd->add_option("--seed", o->seed, "Seed")
      ->capture_default_str()
      ->check(uint_range(0, std::numeric_limits<std::uint64_t>::max()));
  cmd->add_option("--threads", o->threads, "OpenMP threads (0 = default)")
      ->capture_default_str()
      ->check(thread_count());
  cmd->add_option("--max-train-events", o->max_train_events,
                  "Train on at most this many events per epoch (0 = all; throughput runs)")
      ->capture_default_str()
      ->check(int_range(0, std::numeric_limits<std::int64_t>::max()));
  cmd->add_option(
         "--eval-negatives", o->eval_negatives,
         "Also rank each evaluation event against N uniform negatives and report MRR (0 = off)")
      ->capture_default_str()
      ->check(int_range(0, kMaxEvalNegatives));
  cmd->add_flag("--skip-eval", o->skip_eval,
                "No validation or test pass (throughput runs; no AP is reported)");
  cmd->add_option("--log", *log, "JSON-lines log");
  auto ck = std::make_shared<std::string>();
  cmd->add_option("--checkpoint", *ck,
                  "Save parameters and optimiser state here after every epoch");
  cmd->add_flag("--resume", o->resume, "Continue from the newest epoch in --checkpoint");
  cmd->add_flag("--force", o->force,
                "Start a new run in a --checkpoint folder that holds an earlier run's checkpoint, "
                "removing it");
  cmd->add_flag("-q,--quiet", o->quiet, "No per-epoch lines");
  cmd->add_flag("--profile", o->profile,
                "Time every kernel of the training batches and print the table");
  auto dry_run = std::make_shared<bool>(false);
  cmd->add_flag("--dry-run", *dry_run,
                "Print the predicted peak memory of a rank of this run, term by term, and exit "
                "without training");
  // `halo tgn split`: what a peer needs to train and score on exactly halo's split.
  auto split_out = std::make_shared<std::string>();
  auto split_seed = std::make_shared<std::uint64_t>(0);
  auto* split = tgn->add_subcommand(
      "split", "Write the events, split and evaluation negatives of halo tgn train as .npz");
  split->add_option("dataset", *path, "Temporal dataset")->required();
  split->add_option("-o,--output", *split_out, "The .npz to write")->required();
  split->add_option("--seed", *split_seed, "Seed (as halo tgn train --seed)")
      ->capture_default_str()
      ->check(uint_range(0, std::numeric_limits<std::uint64_t>::max()));
  return [o, c, path, log, ck, split, split_out, split_seed, dry_run] {
    if (split->parsed()) {
      Stopwatch clock;
      require_dataset(*path);
      write_tgn_split(*path, *split_out, *split_seed);
      print_footer("tgn split -> " + *split_out, clock.seconds());
      return 0;
    }
    o->log = *log;
    o->checkpoint = *ck;
    Stopwatch clock;
    require_dataset(*path);
    o->model = parse_tgn_model(c->model);
    o->parallel = parse_tgn_parallel(c->parallel);
    o->aggregator = parse_tgn_aggregator(c->aggregator);
    o->embedding = parse_tgn_embedding(c->embedding);
    o->neighbors_before = parse_tgn_neighbors_before(c->neighbors_before);
    o->device = parse_device_choice(c->device);
    o->memory_on = parse_tgn_memory_choice(c->memory_on);
    if (*dry_run) {  // every rank may compute it; one prints it
      const TgnMemoryPrediction p = predict_tgn_memory(*path, *o, world().size());
      if (world().rank() == 0) print_tgn_dry_run(p, *o, world().size());
      return 0;
    }
    const TgnSummary s = train_tgn(*path, world(), *o, std::cout);
    if (world().rank() != 0) return 0;  // every rank holds the summary; one prints it
    // On std::cout, as the epoch lines are, so that a library caller can drop them all (python/).
    char line[320];
    if (o->skip_eval) {
      std::snprintf(line, sizeof line, "%s: %.0f training events/s (median epoch; no evaluation)\n",
                    to_string(o->model), s.events_per_s);
      std::cout << line;
      print_footer("tgn train", clock.seconds());
      return 0;
    }
    std::snprintf(
        line, sizeof line,
        "%s: test AP %.4f, AUC %.4f; new nodes AP %.4f, AUC %.4f (per-batch means, TGN's protocol; "
        "pooled AP %.4f, "
        "new nodes %.4f) (best epoch %d, %.0f events/s)\n",
        to_string(o->model), s.test_ap, s.test_auc, s.test_inductive_ap, s.test_inductive_auc,
        s.test_ap_pooled, s.test_inductive_ap_pooled, s.best_epoch, s.events_per_s);
    std::cout << line;
    if (o->eval_negatives > 0) {
      std::snprintf(line, sizeof line, "%s: test MRR %.4f against %lld negatives\n",
                    to_string(o->model), s.test_mrr, (long long)o->eval_negatives);
      std::cout << line;
    }
    print_footer("tgn train", clock.seconds());
    return 0;
  };
}

}  // namespace halo::cli

// `halo predict DATASET --checkpoint DIR -o PRED.npy` (one process) and `mpirun -np K halo
// predict PARTS ...`: a trained model over the whole graph, layer by layer, predictions and
// optionally one layer's output (embeddings) in input order.
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/partition/parts.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/train/predict.h"

namespace halo::cli {

Action add_predict(CLI::App& app) {
  struct Args {
    std::string dataset, checkpoint, out, embeddings, epoch = "best", device = "cpu";
    int run = -1, layer = -1, threads = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "predict", "Run a trained model over the whole graph: predictions and embeddings (.npy)");
  cmd->add_option("dataset", a->dataset,
                  "Native dataset directory (one process), or PARTS from halo partition (mpirun "
                  "-np K); any partition of the training's dataset")
      ->required();
  cmd->add_option("--checkpoint", a->checkpoint, "The --checkpoint directory of halo train")
      ->required();
  cmd->add_option("--epoch", a->epoch,
                  "best (the best-validation epoch's weights) | last (the newest) | N (either's "
                  "epoch number)")
      ->capture_default_str();
  cmd->add_option("--run", a->run, "Run R of a --runs training (default: the best validation)")
      ->check(int_range(0, 1 << 20));
  cmd->add_option("-o,--out", a->out,
                  "Predictions .npy in input order: class ids (int64), or sigmoid scores "
                  "(multi-label)")
      ->required();
  cmd->add_option("--embeddings-out", a->embeddings,
                  "Also write layer --layer's output, float32 [nodes x width], in input order");
  cmd->add_option("--layer", a->layer,
                  "The layer --embeddings-out writes, from 0 (default: the last hidden layer)")
      ->check(int_range(0, 1024));
  cmd->add_option("--threads", a->threads, "OpenMP threads (0 = default)")
      ->capture_default_str()
      ->check(thread_count());
  cmd->add_option("--device", a->device, "cpu | cuda | auto (cuda when a GPU is visible)")
      ->capture_default_str();
  return [a] {
    const Stopwatch wall;
    Communicator& comm = world();
    const bool parts = is_parts_dir(a->dataset);
    if (!parts && comm.size() > 1)
      throw ParamError(a->dataset + " is a dataset, which runs on one process; for " +
                       std::to_string(comm.size()) + " ranks split it first: halo partition " +
                       a->dataset + " -k " + std::to_string(comm.size()) + " -o PARTS");
    PredictOptions opt;
    opt.checkpoint = a->checkpoint;
    opt.epoch = a->epoch;
    opt.run = a->run;
    opt.out = a->out;
    opt.embeddings_out = a->embeddings;
    opt.layer = a->layer;
    opt.threads = a->threads;
    opt.device = parse_device_choice(a->device);
    std::ostringstream quiet;  // ranks other than 0 print nothing
    std::ostream& out = comm.rank() == 0 ? std::cout : quiet;
    const PredictSummary s =
        parts ? predict_parts(a->dataset, comm, opt, out) : predict_dataset(a->dataset, opt, out);
    if (comm.rank() != 0) return 0;
    char line[320];
    std::snprintf(line, sizeof line,
                  "%s, run %d (seed %llu), epoch %d (%s): %s train %.4f valid %.4f test %.4f\n",
                  s.model.c_str(), s.run, static_cast<unsigned long long>(s.seed), s.epoch,
                  s.best ? "best validation" : "newest", s.metric == "acc" ? "accuracy" : "ROC-AUC",
                  s.train, s.valid, s.test);
    std::cout << line;
    std::cout << "predictions: " << a->out << "\n";
    if (s.embeddings_layer >= 0)
      std::cout << "embeddings: " << a->embeddings << " (layer " << s.embeddings_layer << ", "
                << s.embeddings_width << " wide)\n";
    std::snprintf(line, sizeof line,
                  "inference %.3f s on %d rank%s, peak memory %.0f MiB (largest rank)\n",
                  s.inference_s, s.ranks, s.ranks == 1 ? "" : "s", s.peak_rss_mb);
    std::cout << line;
    print_footer("predict", wall.seconds());
    return 0;
  };
}

}  // namespace halo::cli

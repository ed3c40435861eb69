// `halo reorder DATASET -o OUT`: renumber a dataset's nodes for cache locality (see
// halo/partition/reorder.h); predictions and parts still map back through original_ids.bin.
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "halo/graph/algorithms.h"
#include "halo/graph/dataset.h"
#include "halo/graph/progress.h"
#include "halo/graph/types.h"
#include "halo/partition/reorder.h"

namespace halo::cli {

Action add_reorder(CLI::App& app) {
  struct Args {
    std::string dataset, output, method = "metis";
    std::int64_t block = 4096;
    std::uint64_t seed = 0;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "reorder", "Renumber a dataset's nodes so that neighbours sit close (SpMM locality)");
  cmd->add_option("dataset", a->dataset, "Native dataset directory")->required();
  cmd->add_option("-o,--output", a->output, "Dataset directory to create")->required();
  cmd->add_option("--method", a->method,
                  "metis (parts of --block nodes, numbered part by part) | rcm")
      ->capture_default_str();
  cmd->add_option("--block", a->block,
                  "Nodes per METIS part (rows of X that should stay in cache together)")
      ->capture_default_str()
      ->check(int_range(1, kMaxNodes));
  // METIS takes its seed as a 32-bit idx_t (Debian's build), and -1 means its own default.
  cmd->add_option("--seed", a->seed, "METIS seed")
      ->capture_default_str()
      ->check(int_range(0, std::numeric_limits<std::int32_t>::max()));
  cmd->add_flag("-f,--force", a->force, "Replace the output if it exists");
  return [a] {
    require_dataset(a->dataset);
    const LocalityMethod method = parse_locality_method(a->method);
    Stopwatch clock;
    resolve_dir_output(a->output, "halo-dataset", a->force,
                       {a->dataset});  // never the input (staging.h)
    GraphDataset d = read_graph_dataset(a->dataset);
    const double before = window_locality(d.graph.view(), a->block);
    reorder_dataset(d, locality_order(d, method, a->block, a->seed));
    d.reorder = to_string(method);
    const double after = window_locality(d.graph.view(), a->block);
    const nlohmann::json extra = {{"source", {{"format", "native"}, {"path", a->dataset}}}};
    write_graph_dataset(d, a->output, a->force, &extra);
    std::printf("reorder: %lld nodes by %s; edges within a window of %lld ids: %.1f%% -> %.1f%%\n",
                (long long)d.num_nodes(), to_string(method), (long long)a->block, 100 * before,
                100 * after);
    print_footer("reorder: " + a->output, clock.seconds());
    return 0;
  };
}

}  // namespace halo::cli

// `halo partition DATASET -k K -o PARTS`: cut a dataset into K parts with halo plans.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>

#include "commands.h"
#include "halo/graph/error.h"
#include "halo/graph/types.h"
#include "halo/partition/parts.h"

namespace halo::cli {

// An option table: one declaration per flag, read top to bottom (exempt from the 80-line rule).
// NOLINTNEXTLINE(readability-function-size)
Action add_partition(CLI::App& app) {
  struct Args {
    std::string dataset, output, weights, assignment, assignment_in;
    std::string method = "metis", objective = "cut", ptype = "auto";  // parsed into opt
    PartitionOptions opt;
    std::uint64_t seed = 0;  // into opt.seed only when given (else METIS's own default)
    bool force = false, json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("partition", "Partition a dataset into K parts with halo plans");
  cmd->add_option("dataset", a->dataset, "Native dataset directory")->required();
  cmd->add_option("-k,--parts", a->opt.k, "Number of parts (one per rank; at most the nodes)")
      ->required()
      ->check(int_range(1, kMaxNodes));
  cmd->add_option("-o,--output", a->output, "Directory to create")->required();
  auto* method =
      cmd->add_option("--method", a->method,
                      "metis|fennel|random|contiguous|kaminpar|lp-metis|ptscotch (ptscotch: "
                      "under mpirun -np P, each rank reading 1/P of the rows)")
          ->capture_default_str();
  cmd->add_option("--objective", a->objective, "METIS objective: cut|vol")->capture_default_str();
  cmd->add_option("--balance", a->opt.balance,
                  "Balance constraints, comma separated: nodes, edges, train, weights")
      ->capture_default_str();
  cmd->add_option(
         "--ptype", a->ptype,
         "METIS scheme: auto (= kway, gpmetis's default)|kway|rb|best (both, the lower cut)")
      ->capture_default_str();
  cmd->add_option("--part-weights", a->weights,
                  "Target share of each part, e.g. 2,1,1; or auto=TABLE: shares searched for "
                  "under a speed table from halo train --calibrate");
  cmd->add_option("--ufactor", a->opt.ufactor,
                  "Allowed imbalance in 1/1000 (METIS default: 30 kway, 1 rb)")
      ->check(int_range(1, kMaxUfactor));
  cmd->add_flag("--contiguous", a->opt.contiguous, "METIS: make every part contiguous");
  cmd->add_option("--passes", a->opt.passes, "Fennel: streaming passes")
      ->capture_default_str()
      ->check(int_range(1, kMaxPasses));
  auto* seed =
      cmd->add_option("--seed", a->seed,
                      "Random seed (metis, lp-metis: at most 2^31 - 1; default: METIS's own, as "
                      "gpmetis; the other methods 0)")
          ->check(uint_range(0, std::numeric_limits<std::uint64_t>::max()));
  cmd->add_option("--split", a->opt.split,
                  "Split whose train nodes --balance train uses (default: first)");
  cmd->add_option("--assignment-out", a->assignment,
                  "Write one part id per line (gpmetis .part.K format)");
  cmd->add_option("--assignment-in", a->assignment_in,
                  "Write the parts of this assignment instead of partitioning (gpmetis .part.K "
                  "text, or an int32/int64 .npy)")
      ->excludes(method);
  cmd->add_flag("-f,--force", a->force, "Replace the output if it exists");
  cmd->add_flag("--json", a->json, "Print the report as JSON");
  return [a, seed] {
    require_dataset(a->dataset);
    if (seed->count() > 0) a->opt.seed = a->seed;
    a->opt.method =
        a->assignment_in.empty() ? parse_partition_method(a->method) : PartitionMethod::kAssignment;
    a->opt.assignment_in = a->assignment_in;
    a->opt.objective = parse_metis_objective(a->objective);
    a->opt.ptype = parse_metis_ptype(a->ptype);
    if (a->weights.rfind("auto=", 0) == 0) {
      a->opt.speed_table = a->weights.substr(5);
      if (a->opt.speed_table.empty())
        throw ParamError("--part-weights auto=TABLE: name the speed table");
    } else if (!a->weights.empty()) {
      std::stringstream ss(a->weights);
      std::string item;
      while (std::getline(ss, item, ',')) {
        std::string copy = item;
        // The checks every real flag gets, and the range PartitionOptions::check holds.
        std::string why = finite_number()(copy);
        if (why.empty()) why = real_range(kMinPartWeight, kMaxPartWeight)(copy);
        if (!why.empty()) throw ParamError("--part-weights: " + why);
        a->opt.part_weights.push_back(std::strtod(item.c_str(), nullptr));
      }
    }
    const nlohmann::json meta =
        partition_dataset(a->dataset, a->output, a->opt, a->force, a->assignment);
    if (meta.is_null()) return 0;  // a ptscotch rank other than 0: rank 0 reports
    if (a->json) {
      nlohmann::json shown = meta;
      shown.erase("arrays");
      // Invalid UTF-8 (a Latin-1 path) as U+FFFD: the output stays valid JSON.
      std::printf("%s\n",
                  shown.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::string by = to_string(a->opt.method);
      if (a->opt.method == PartitionMethod::kMetis)  // the scheme that made it (auto, best)
        by += " (" + meta["options"]["ptype"].get<std::string>() + ")";
      std::printf("%s: %d parts by %s\n%s", a->output.c_str(), a->opt.k, by.c_str(),
                  format_quality(meta).c_str());
      if (meta.contains("speed_model")) {  // what the cost model expects of each part
        const auto& parts = meta["speed_model"]["predicted"];
        double slowest = 0;
        std::printf("predicted epoch by the speed table (compute + exchange):");
        for (std::size_t i = 0; i < parts.size(); ++i) {
          const double c = parts[i]["compute_s"].get<double>(),
                       x = parts[i]["comm_s"].get<double>();
          slowest = std::max(slowest, c + x);
          std::printf("%s part %zu %.3f + %.3f s", i ? ";" : "", i, c, x);
        }
        std::printf("; epoch %.3f s\n", slowest);
      }
    }
    print_footer("partition: " + std::to_string(a->opt.k) + " parts -> " + a->output,
                 meta["seconds"]["total"].get<double>());
    return 0;
  };
}

}  // namespace halo::cli

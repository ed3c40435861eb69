// `halo generate -o DIR ...`: a synthetic learnable graph (see graph/generate.h).
#include <cstdio>
#include <limits>
#include <memory>

#include "commands.h"
#include "halo/graph/generate.h"
#include "halo/graph/types.h"

namespace halo::cli {

Action add_generate(CLI::App& app) {
  struct Args {
    std::string output;
    GenerateOptions opt;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("generate", "Generate a synthetic learnable graph (SBM)");
  cmd->add_option("-o,--output", a->output, "Directory to create")->required();
  // The ranges of generate.cc's check (which also bounds nodes x degree and classes <= nodes).
  constexpr std::int64_t kMaxEdges = std::int64_t(1) << 34, kMaxFeatures = 4096,
                         kMaxClasses = 16384;
  cmd->add_option("--nodes", a->opt.nodes, "Number of nodes")
      ->capture_default_str()
      ->check(int_range(2, kMaxNodes));
  auto* degree = cmd->add_option("--avg-degree", a->opt.avg_degree,
                                 "Average degree (undirected edges = nodes*D/2)")
                     ->capture_default_str()
                     ->check(real_range(0, 1e6, true));
  // Both would mean two edge counts; one of them would be silently ignored.
  cmd->add_option("--edges", a->opt.edges,
                  "Exact number of undirected edges (instead of --avg-degree)")
      ->excludes(degree)
      ->check(int_range(1, kMaxEdges));
  cmd->add_option("--features", a->opt.features, "Feature dimension")
      ->capture_default_str()
      ->check(int_range(0, kMaxFeatures));
  cmd->add_option("--classes", a->opt.classes, "Number of classes (blocks)")
      ->capture_default_str()
      ->check(int_range(1, kMaxClasses));
  cmd->add_option("--homophily", a->opt.homophily, "Share of edges inside a class")
      ->capture_default_str()
      ->check(real_range(0, 1));
  cmd->add_option("--noise", a->opt.noise, "Feature noise standard deviation")
      ->capture_default_str()
      ->check(real_range(0, 1e6));
  cmd->add_option("--locality", a->opt.locality,
                  "Share of edges drawn inside the source's neighbourhood (0 = off)")
      ->capture_default_str()
      ->check(real_range(0, 1));
  cmd->add_option("--community-size", a->opt.community_size,
                  "Nodes per community (communities cut each class; with --locality)")
      ->capture_default_str()
      ->check(int_range(1, kMaxNodes));
  cmd->add_option("--neighbourhood-classes", a->opt.neighbourhood_classes,
                  "Classes whose communities share a neighbourhood (with --locality)")
      ->capture_default_str()
      ->check(int_range(1, kMaxClasses));
  cmd->add_option("--seed", a->opt.seed, "Random seed")
      ->capture_default_str()
      ->check(uint_range(0, std::numeric_limits<std::uint64_t>::max()));
  cmd->add_option("--format", a->opt.format, "native|ogb (OGB raw layout, gzip CSV)")
      ->capture_default_str();
  cmd->add_flag("-f,--force", a->opt.overwrite, "Replace the output if it exists");
  return [a] {
    const GenerateReport r = generate(a->output, a->opt);
    char hoods[64] = "";
    if (r.neighbourhoods > 0)
      std::snprintf(hoods, sizeof hoods, ", %lld neighbourhoods", (long long)r.neighbourhoods);
    char what[512];
    std::snprintf(what, sizeof what, "generate: %lld nodes, %lld edges drawn%s (%s) -> %s",
                  (long long)r.nodes, (long long)r.edges, hoods, a->opt.format.c_str(),
                  a->output.c_str());
    print_footer(what, r.seconds);
    return 0;
  };
}

}  // namespace halo::cli

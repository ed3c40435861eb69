// `halo convert INPUT -o DATASET`: any supported format to a native dataset.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "halo/graph/formats.h"
#include "halo/graph/progress.h"

namespace halo::cli {

Action add_convert(CLI::App& app) {
  struct Args {
    std::string input, output, format = "auto", reorder = "none";
    ConvertOptions opt;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("convert", "Convert a graph or event file to a native dataset");
  cmd->add_option("input", a->input, "OGB dataset directory, METIS .graph, edge list or event file")
      ->required();
  cmd->add_option("-o,--output", a->output, "Dataset directory to create")->required();
  cmd->add_option("--format", a->format, "auto|ogb|metis|edgelist|konect|snap|jodie")
      ->capture_default_str();
  cmd->add_flag("--directed", a->opt.directed, "Keep edges as given instead of symmetrising");
  cmd->add_option("--reorder", a->reorder, "Node order: none|rcm (reverse Cuthill-McKee)")
      ->capture_default_str();
  cmd->add_flag("--one-based", a->opt.one_based, "Edge list ids start at 1");
  cmd->add_option("--num-nodes", a->opt.num_nodes, "Edge lists: node count (default: max id + 1)")
      ->check(int_range(1, kMaxNodes));
  cmd->add_flag("--allow-sparse-ids", a->opt.allow_sparse_ids,
                "Edge and event lists: size the graph by the largest id even when it is over 100x "
                "the ids used");
  cmd->add_option("--name", a->opt.name, "Dataset name (default: the input's name)");
  cmd->add_flag("-f,--force", a->opt.overwrite, "Replace the output if it exists");
  cmd->add_flag("--json", a->json, "Print the conversion report as JSON on stdout");
  return [a] {
    a->opt.format = parse_format(a->format);
    a->opt.reorder = parse_node_order(a->reorder);
    const ConvertReport r = convert(a->input, a->output, a->opt);
    const double mbps = r.seconds > 0 ? double(r.text_bytes) / r.seconds / 1e6 : 0;
    if (a->json) {
      const nlohmann::json j = {{"format", format_name(r.format)},
                                {"kind", r.kind},
                                {"nodes", r.nodes},
                                {"edges", r.edges},
                                {"events", r.events},
                                {"text_bytes", r.text_bytes},
                                {"seconds", r.seconds},
                                {"text_mb_per_s", mbps},
                                {"peak_rss_bytes", peak_rss_bytes()}};
      std::printf("%s\n", j.dump().c_str());
    }
    char what[512];
    if (r.kind == "temporal")
      std::snprintf(what, sizeof what, "convert: %lld events, %lld nodes (%s) -> %s",
                    (long long)r.events, (long long)r.nodes, format_name(r.format),
                    a->output.c_str());
    else
      std::snprintf(
          what, sizeof what, "convert: %lld nodes, %lld edges (%s) -> %s%s", (long long)r.nodes,
          (long long)r.edges, format_name(r.format), a->output.c_str(),
          r.text_bytes ? (", " + std::to_string(int(mbps)) + " MB/s of text").c_str() : "");
    print_footer(what, r.seconds);
    return 0;
  };
}

}  // namespace halo::cli

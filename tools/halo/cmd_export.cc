// `halo export DATASET -o FILE`: write a dataset's graph for other tools (METIS's gpmetis).
#include <memory>

#include "commands.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/formats.h"
#include "halo/graph/progress.h"

namespace halo::cli {

Action add_export(CLI::App& app) {
  struct Args {
    std::string dataset, output, format = "metis";
    bool weights = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("export", "Write a dataset's graph as a METIS file");
  cmd->add_option("dataset", a->dataset, "Native dataset directory")->required();
  cmd->add_option("-o,--output", a->output, "File to write")->required();
  cmd->add_option("--format", a->format, "metis")->capture_default_str();
  cmd->add_flag("--vertex-weights", a->weights, "Include the dataset's vertex weights");
  return [a] {
    Stopwatch clock;
    if (a->format != "metis") throw ParamError("--format: only metis is supported");
    require_dataset(a->dataset);
    resolve_file_output(a->output, {a->dataset});  // not a device, not the dataset (staging.h)
    const GraphDataset d = read_graph_dataset(a->dataset);
    if (d.directed)
      throw ParamError("METIS files hold undirected graphs; this dataset is directed");
    write_metis(a->output, d.graph.view(), a->weights ? d.node_weights.data() : nullptr,
                a->weights ? d.ncon : 0);
    print_footer("export: " + a->output, clock.seconds());
    return 0;
  };
}

}  // namespace halo::cli

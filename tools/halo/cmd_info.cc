// `halo info DATASET [--json]`: what a dataset holds.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "halo/graph/summary.h"

namespace halo::cli {

Action add_info(CLI::App& app) {
  struct Args {
    std::string path;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("info", "Summarise a native dataset (verifies its checksums)");
  cmd->add_option("dataset", a->path, "Dataset directory")->required();
  cmd->add_flag("--json", a->json, "Print JSON instead of text");
  return [a] {
    const nlohmann::json s = summarize_dataset(a->path);
    if (a->json)
      std::printf("%s\n", s.dump(2).c_str());
    else
      std::printf("%s", format_summary(s).c_str());
    return 0;
  };
}

}  // namespace halo::cli

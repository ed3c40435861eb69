// `halo info DATASET [--json]`: what a dataset holds.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "halo/graph/summary.h"
#include "halo/partition/parts.h"

namespace halo::cli {

Action add_info(CLI::App& app) {
  struct Args {
    std::string path;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("info", "Summarise a dataset or a partition (verifies checksums)");
  cmd->add_option("dataset", a->path, "Dataset directory")->required();
  cmd->add_flag("--json", a->json, "Print JSON instead of text");
  return [a] {
    if (is_parts_dir(a->path)) {
      nlohmann::json meta = read_parts_meta(a->path);
      read_owner(a->path);  // verifies the assignment's checksum
      meta.erase("arrays");
      if (a->json) {
        std::printf("%s\n", meta.dump(2).c_str());
      } else {
        std::printf("partition   %s: %d parts by %s of %s (%s)\n", a->path.c_str(), meta["k"].get<int>(),
                    meta["method"].get<std::string>().c_str(),
                    meta["dataset"]["name"].get<std::string>().c_str(),
                    meta.value("dataset_path", std::string()).c_str());
        std::printf("%s", format_quality(meta).c_str());
      }
      return 0;
    }
    const nlohmann::json s = summarize_dataset(a->path);
    if (a->json)
      std::printf("%s\n", s.dump(2).c_str());
    else
      std::printf("%s", format_summary(s).c_str());
    return 0;
  };
}

}  // namespace halo::cli

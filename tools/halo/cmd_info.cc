// `halo info DATASET|PARTS [--json]`: what a dataset or a partition holds, after verifying all
// of it (checksums, structure, and for a partition every part and its fingerprints).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "halo/graph/error.h"
#include "halo/graph/summary.h"
#include "halo/graph/text.h"
#include "halo/partition/parts.h"

namespace halo::cli {
namespace {
// JSON output is valid JSON whatever the path a user typed: a byte that is not UTF-8 (a file
// name in Latin-1) becomes U+FFFD instead of ending the command with "internal: type_error".
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
}  // namespace

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
      // Every part present, every checksum and fingerprint right, every part consistent with
      // owner.bin and its peers: what `mpirun halo train PARTS` will need, checked up front.
      verify_parts(a->path);
      nlohmann::json meta = read_parts_meta(a->path);
      meta.erase("arrays");
      if (a->json) {
        std::printf("%s\n", meta.dump(2, ' ', false, kReplace).c_str());
        return 0;
      }
      std::string report;
      try {  // the quality report's figures are not needed to train: checked only here
        report = format_quality(meta);
      } catch (const nlohmann::json::exception& e) {
        throw InputError(a->path + "/meta.json: malformed quality report: " + e.what());
      }
      // Strings from the files shown escaped (printable): no byte of them drives the terminal.
      std::printf("partition   %s: %d parts by %s of %s (%s)\n", printable(a->path).c_str(),
                  meta["k"].get<int>(), printable(meta.value("method", std::string())).c_str(),
                  printable(meta["dataset"].value("name", "")).c_str(),
                  printable(meta.value("dataset_path", std::string())).c_str());
      std::printf("%s", report.c_str());
      return 0;
    }
    const nlohmann::json s = summarize_dataset(a->path);
    if (a->json)
      std::printf("%s\n", s.dump(2, ' ', false, kReplace).c_str());
    else
      std::printf("%s", format_summary(s).c_str());
    return 0;
  };
}

}  // namespace halo::cli

// Subcommands of `halo`: each registers its flags on the app and returns the action to run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace halo::cli {

using Action = std::function<int()>;

Action add_convert(CLI::App& app);
Action add_info(CLI::App& app);
Action add_generate(CLI::App& app);
Action add_partition(CLI::App& app);
Action add_export(CLI::App& app);
Action add_train(CLI::App& app);
Action add_tgn(CLI::App& app);
Action add_reorder(CLI::App& app);

// The one-line footer long commands end with: "<what> in 1.23 s, peak memory 45.6 MiB".
void print_footer(const std::string& what, double seconds);

}  // namespace halo::cli

// Subcommands of `halo`: each registers its flags on the app and returns the action to run.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

namespace halo::cli {

using Action = std::function<int()>;

Action add_convert(CLI::App& app);
Action add_info(CLI::App& app);
Action add_generate(CLI::App& app);
Action add_partition(CLI::App& app);
Action add_export(CLI::App& app);
Action add_train(CLI::App& app);
Action add_predict(CLI::App& app);
Action add_tgn(CLI::App& app);
Action add_reorder(CLI::App& app);

// Builds the `halo` app, parses argv (argv[0]: the program's name) and runs the command in this
// process: its exit status (--help and --version print and give 0). Errors propagate as
// exceptions, command-line ones as ParamError carrying the one line `halo` prints.
int run_command(int argc, char** argv);

// The one-line footer long commands end with: "<what> in 1.23 s, peak memory 45.6 MiB", on
// std::clog (stderr) rather than stderr itself, so that a library caller can drop it with the
// report (python/src/module.cc) and keep the warnings.
void print_footer(const std::string& what, double seconds);

// Flag checks shared by every command (main.cc). A failed check is a CLI11 ValidationError
// "--flag: what was expected", which main turns into one line and exit 2.
// A real flag must be a finite number (inf, nan and overflow are refused).
CLI::Validator finite_number();
// An integer flag must be plain decimal (CLI11 alone reads "010" as 8); >= 0 when non_negative.
CLI::Validator decimal_integer(bool non_negative);
// Adds the two checks above to every FLOAT / INT / UINT option of app and its subcommands, and
// throws std::logic_error (exit 70: a bug) for one without a range below: every numeric flag has
// one, shown in --help.
void check_number_flags(CLI::App& app);
// A number flag must lie in its range: the bounds that keep sizes to what someone meant. Each is
// named "range" and described as "[lo, hi]" (shown in --help and in the error).
CLI::Validator int_range(std::int64_t lo, std::int64_t hi);
// As int_range for 64-bit unsigned flags (seeds): a value that does not fit 64 bits is refused,
// not clamped to 2^64 - 1 as CLI11 alone would.
CLI::Validator uint_range(std::uint64_t lo, std::uint64_t hi);
// A real flag in [lo, hi], or with an open end "(lo" / "hi)".
CLI::Validator real_range(double lo, double hi, bool lo_open = false, bool hi_open = false);
// Every --threads flag: [0, kMaxThreads] (memory_model.h), 0 = OpenMP's default.
CLI::Validator thread_count();
// A bound as the ranges print it (%g).
std::string format_number(double v);
// Throws ParamError unless path is a native dataset: a partition (halo partition's output)
// given where a dataset is expected gets a message saying so, not a parse failure deep inside.
void require_dataset(const std::string& path);

}  // namespace halo::cli

// The `halo` command line as a library: the app with every subcommand, parsed and run in the
// calling process (tools/halo/main.cc for the executable, python/ for `import halo`).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>

#include "commands.h"
#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/graph/text.h"
#include "halo/partition/parts.h"
#include "halo/runtime/memory/memory_model.h"

namespace halo::cli {

void print_footer(const std::string& what, double seconds) {
  std::fflush(stdout);  // keep the report above the footer when both go to one terminal
  char line[64];
  std::snprintf(line, sizeof line, " in %.2f s, peak memory ", seconds);
  std::clog << what << line << format_bytes(peak_rss_bytes()) << std::endl;
}

namespace {

// The command line as far as it was parsed ("halo tgn train"), to point at its --help.
std::string parsed_command(CLI::App& app) {
  std::string cmd = "halo";
  for (CLI::App* a = &app;;) {
    const auto subs = a->get_subcommands();
    if (subs.empty()) return cmd;
    a = subs.front();
    cmd += " " + a->get_name();
  }
}

Action add_version(CLI::App& app) {
  app.add_subcommand("version", "Print the version, build options and visible GPUs");
  return [] {
    const CudaDevices d = cuda_devices();
    std::printf("halo %s\n", HALO_VERSION);
    std::printf("cuda backend: %s\n", d.built ? "built" : "not built");
    if (d.count == 0) std::printf("gpus: none (%s)\n", d.reason.c_str());
    for (const auto& n : d.names) std::printf("gpu: %s\n", n.c_str());
    return 0;
  };
}
}  // namespace

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size())
          return "expected a number, found '" + printable(s, 40) + "'";
        if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) > 1))
          return "expected a finite number, found '" + printable(s, 40) + "'";
        return {};
      },
      "", "finite");
}

CLI::Validator decimal_integer(bool non_negative) {
  return CLI::Validator(
      [non_negative](std::string& s) -> std::string {
        std::size_t i = s.size() > 1 && (s[0] == '-' || s[0] == '+') ? 1 : 0;
        const bool digits =
            i < s.size() && s.find_first_not_of("0123456789", i) == std::string::npos;
        // CLI11 reads integers with base 0: "010" would be 8 and "0x10" 16, which nobody means.
        if (!digits || (s.size() - i > 1 && s[i] == '0'))
          return "expected a decimal integer, found '" + printable(s, 40) + "'";
        if (non_negative && s[0] == '-') return "must be >= 0, found " + printable(s, 40);
        return {};
      },
      "", "decimal");
}

CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        std::int64_t v = 0;
        const auto [ptr, ec] =
            std::from_chars(s.data() + (!s.empty() && s[0] == '+' ? 1 : 0), s.data() + s.size(), v);
        if (ec == std::errc() && ptr == s.data() + s.size() && v >= lo && v <= hi) return {};
        return "must be an integer in " + range + ", found '" + printable(s, 40) + "'";
      },
      range, "range");
}

CLI::Validator uint_range(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        // from_chars refuses what does not fit (CLI11's strtoull would clamp it to 2^64 - 1).
        std::uint64_t v = 0;
        const auto [ptr, ec] =
            std::from_chars(s.data() + (!s.empty() && s[0] == '+' ? 1 : 0), s.data() + s.size(), v);
        if (ec == std::errc() && ptr == s.data() + s.size() && v >= lo && v <= hi) return {};
        return "must be an integer in " + range + ", found '" + printable(s, 40) + "'";
      },
      range, "range");
}

CLI::Validator real_range(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string range = std::string(lo_open ? "(" : "[") + format_number(lo) + ", " +
                            format_number(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool parsed = !s.empty() && end == s.c_str() + s.size();
        if (parsed && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi)) return {};
        return "must be a number in " + range + ", found '" + printable(s, 40) + "'";
      },
      range, "range");
}

CLI::Validator thread_count() { return int_range(0, kMaxThreads); }

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void require_dataset(const std::string& path) {
  if (is_parts_dir(path))
    throw ParamError(path +
                     " is a partition (halo partition's output); this command reads a dataset "
                     "(halo convert's or halo generate's output)");
}

void check_number_flags(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    // The type before any validator's description ("INT:[1, 1024]").
    const std::string full = o->get_type_name(), type = full.substr(0, full.find(':'));
    if (type == "TEXT" && !o->get_lnames().empty()) {
      // `--log ''` would silently mean no log: an empty value is never what a flag wants.
      o->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return s.empty() ? "expected a value, found an empty string" : std::string();
          },
          "", "nonempty"));
      continue;
    }
    if (type != "FLOAT" && type != "INT" && type != "UINT") continue;
    // Every number has a documented range (shown in --help): without one a typo would be an
    // allocation, a run of years or a value a library rejects with its own words.
    try {
      o->get_validator("range");
    } catch (const CLI::OptionNotFound&) {
      throw std::logic_error("halo " + app.get_name() + " " + o->get_name() +
                             ": a numeric flag without a range");
    }
    if (type == "FLOAT")
      o->check(finite_number());
    else
      o->check(decimal_integer(type == "UINT"));
  }
  for (CLI::App* sc : app.get_subcommands({})) check_number_flags(*sc);
}

int run_command(int argc, char** argv) {
  CLI::App app{"halo: full-graph GNN training on partitioned graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", HALO_VERSION);
  std::map<CLI::App*, Action> actions;
  auto reg = [&](Action (*add)(CLI::App&)) {
    const auto before = app.get_subcommands({});
    Action a = add(app);  // copied to each subcommand it added (moving would empty it)
    for (CLI::App* sc : app.get_subcommands({}))
      if (std::find(before.begin(), before.end(), sc) == before.end()) actions[sc] = a;
  };
  reg(add_convert);
  reg(add_info);
  reg(add_generate);
  reg(add_partition);
  reg(add_export);
  reg(add_reorder);
  reg(add_train);
  reg(add_predict);
  reg(add_tgn);
  reg(add_version);
  check_number_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // CLI11 reports a mistyped command as "A subcommand is required": name the word instead.
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      std::string known;
      for (CLI::App* sc : app.get_subcommands({}))
        known += (known.empty() ? "" : ", ") + sc->get_name();
      throw ParamError("unknown command '" + std::string(argv[1]) + "' (expected " + known +
                       "; see halo --help)");
    }
    // One line and exit 2 like every bad parameter, not CLI11's codes (104-114) and hint.
    throw ParamError(std::string(e.what()) + " (see " + parsed_command(app) + " --help)");
  }
  // OpenMP reads OMP_NUM_THREADS for every command: a count it cannot start is one line here,
  // not libgomp's crash or raw lines at the first parallel loop.
  if (std::getenv("OMP_NUM_THREADS")) check_threads(0, "OMP_NUM_THREADS");
  for (CLI::App* sc : app.get_subcommands()) return actions.at(sc)();
  return 0;
}

}  // namespace halo::cli

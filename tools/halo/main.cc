// `halo`: the command-line front door. Parses arguments, dispatches to a subcommand, and turns
// every halo::Error into one line on stderr with a non-zero exit status.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <new>

#include "commands.h"
#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/runtime/comm.h"
#include "halo/runtime/supervisor.h"

namespace halo::cli {

void print_footer(const std::string& what, double seconds) {
  std::fflush(stdout);  // keep the report above the footer when both go to one terminal
  std::fprintf(stderr, "%s in %.2f s, peak memory %s\n", what.c_str(), seconds,
               format_bytes(peak_rss_bytes()).c_str());
}

namespace {
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

}  // namespace halo::cli

namespace {
// One line on stderr; in a multi-rank job it names the rank and ends every rank of the job.
int fail(int code, const std::string& what) {
  halo::Communicator& comm = halo::world();
  if (comm.size() > 1) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::fprintf(stderr, "error: rank %d of %d on %s: %s (aborting the job)\n", comm.rank(), comm.size(), host,
                 what.c_str());
    std::fflush(stderr);
    halo::abort_job(code);
  }
  std::fprintf(stderr, "error: %s\n", what.c_str());
  return code;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace halo::cli;
  // Under a launcher this process becomes the rank's supervisor and a forked worker goes on.
  if (const int code = halo::supervise_rank(); code >= 0) return code;
  halo::MpiSession mpi(&argc, &argv);  // only when started by mpirun / srun
  halo::join_supervisors(halo::world());
  CLI::App app{"halo: full-graph GNN training on partitioned graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", HALO_VERSION);
  std::map<CLI::App*, Action> actions;
  auto reg = [&](Action (*add)(CLI::App&)) {
    const auto before = app.get_subcommands({});
    Action a = add(app);
    for (CLI::App* sc : app.get_subcommands({}))
      if (std::find(before.begin(), before.end(), sc) == before.end()) actions[sc] = std::move(a);
  };
  reg(add_convert);
  reg(add_info);
  reg(add_generate);
  reg(add_partition);
  reg(add_export);
  reg(add_reorder);
  reg(add_train);
  reg(add_tgn);
  reg(add_version);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (CLI::App* sc : app.get_subcommands()) return actions.at(sc)();
    return 0;
  } catch (const halo::ParamError& e) {
    return fail(2, e.what());
  } catch (const halo::Error& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory");
  } catch (const std::exception& e) {
    return fail(70, std::string("internal: ") + e.what());
  }
}

// `halo`: the command-line front door. Runs the command (cli.cc) and turns every error into one
// line on stderr with the documented exit status: 1 bad input or system, 2 bad parameter (every
// command-line error, CLI11's own included), 70 internal.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string_view>
#include <thread>

#include "commands.h"
#include "halo/graph/error.h"
#include "halo/graph/text.h"
#include "halo/runtime/cluster/supervisor.h"
#include "halo/runtime/comm/comm.h"

namespace {
// One line on stderr; in a multi-rank job it names the rank and ends every rank of the job. An
// error that every rank meets (a bad flag, parts of another K, inputs that differ between
// nodes: each rank reaches the same verdict) is printed once, by the lowest rank; the others
// stay silent while it ends the job.
int fail(int code, const std::string& what) {
  halo::Communicator& comm = halo::world();
  if (comm.size() > 1) {
    // 1 s: ranks that meet the same error meet it within milliseconds of each other (they
    // leave the same collective, or parse the same flags); a rank failing alone waits that long.
    const int first = halo::first_failed_rank(1.0);
    if (first >= 0 && first != comm.rank()) {
      // The lowest failing rank prints and aborts the job, which ends this process; should
      // that not come, leave with the same status, still silent.
      std::this_thread::sleep_for(std::chrono::seconds(30));
      std::_Exit(code);
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::fprintf(stderr, "error: rank %d of %d on %s: %s (aborting the job)\n", comm.rank(),
                 comm.size(), host, halo::printable(what, 4096).c_str());
    std::fflush(stderr);
    halo::abort_job(code);
  }
  std::fprintf(stderr, "error: %s\n", halo::printable(what, 4096).c_str());
  return code;
}
}  // namespace

int main(int argc, char** argv) {
  // Under a launcher this process becomes the rank's supervisor and a forked worker goes on.
  if (const int code = halo::supervise_rank(); code >= 0) return code;
  // Only when started by mpirun / srun. `partition` runs PT-Scotch, whose threads call MPI
  // concurrently (Debian builds it with SCOTCH_PTHREAD_MPI).
  const bool partition = argc > 1 && std::string_view(argv[1]) == "partition";
  halo::MpiSession mpi(&argc, &argv, partition);
  halo::join_supervisors(halo::world());
  try {
    return halo::cli::run_command(argc, argv);
  } catch (const halo::ParamError& e) {
    return fail(2, e.what());
  } catch (const halo::Error& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory");
  } catch (const std::filesystem::filesystem_error& e) {
    // A path that cannot be looked at (a symlink loop, no permission) is the input's problem.
    const std::string p = e.path1().empty() ? std::string("filesystem") : e.path1().string();
    return fail(1, p + ": " + e.code().message());
  } catch (const std::exception& e) {
    return fail(70, std::string("internal: ") + e.what());
  }
}

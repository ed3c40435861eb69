// The MPI session: MPI's start-up under a deadline (InitWatchdog, MpiSession), its shutdown, and
// the job-wide calls made through world() when a rank fails (abort_job, first_failed_rank). The
// MPI communicator itself, and world() that picks it, are in comm.cc; what both use (the MPI
// lock, whether MPI is up, the failure communicator) is declared in mpi_internal.h.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "cluster/supervisor_loop.h"
#include "comm/mpi_internal.h"
#include "halo/graph/error.h"
#include "halo/runtime/comm/comm.h"

namespace halo {
using namespace mpi_internal;

namespace {
// Bounds MPI_Init_thread by HALO_COMM_TIMEOUT_S. Start-up is a collective of every rank (Open
// MPI's modex), so one rank that never gets there (stopped, or its node frozen) keeps every
// other rank inside MPI_Init_thread, which has no deadline of its own; and it runs before the
// supervisors know each other, so their heartbeat cannot notice either. The blocked thread
// cannot be interrupted, so the watchdog ends the process itself (_exit: the one place library
// code exits, as nothing else could return control); its supervisor sees an ordinary failed
// worker and the launcher ends the job.
class InitWatchdog {
 public:
  InitWatchdog(double limit_s, int rank, int size) {
    thread_ = std::thread([this, limit_s, rank, size] {
      std::unique_lock<std::mutex> lk(lock_);
      if (wake_.wait_for(lk, std::chrono::duration<double>(limit_s), [&] { return done_; })) return;
      std::fprintf(stderr,
                   "error: rank %d of %d on %s: MPI start-up (MPI_Init_thread) did not finish "
                   "within %g s: a rank "
                   "did not start, was stopped, or its node is unreachable (HALO_COMM_TIMEOUT_S "
                   "sets the limit)\n",
                   rank, size, host_name().c_str(), limit_s);
      std::fflush(stderr);
      _exit(1);
    });
  }
  ~InitWatchdog() {
    {
      std::lock_guard<std::mutex> lk(lock_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  InitWatchdog(const InitWatchdog&) = delete;
  InitWatchdog& operator=(const InitWatchdog&) = delete;

 private:
  std::mutex lock_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv, bool library_threads) {
  if (!launched_by_mpi()) return;
  int rank = -1, size = 0;
  rank_from_env(&rank, &size);
  // Test hook: this rank stops itself before start-up, as a rank frozen by SIGSTOP or a hung
  // node would (tests/runtime/train/bad_training_test.cc).
  if (const char* v = std::getenv("HALO_TEST_STOP_BEFORE_MPI_INIT");
      v && *v && std::atoi(v) == rank)
    raise(SIGSTOP);
  double limit = 600;
  try {
    limit = comm_timeout_seconds();
  } catch (const Error&) {  // a bad HALO_COMM_TIMEOUT_S is reported by the first wait, in one line
  }
  int provided = 0;
  int rc = MPI_SUCCESS;
  {
    InitWatchdog watchdog(limit, rank, size);
    rc = MPI_Init_thread(argc, argv, library_threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED,
                         &provided);
  }
  if (rc != MPI_SUCCESS) return;
  g_serialized = provided >= MPI_THREAD_SERIALIZED;
  // Errors come back as codes (turned into exceptions with the call's name), not a silent exit.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_mpi = true;
}

MpiSession::~MpiSession() {
  if (g_mpi) {
    stop_progress();
    MPI_Finalize();
  }
  g_mpi = false;
}
void abort_job(int code) { world().abort(code); }

int first_failed_rank(double grace_s) {
  Communicator& comm = world();
  if (comm.size() < 2) return comm.rank();
  if (g_fail_comm == MPI_COMM_NULL) return -1;
  // Static: a reduction that never completes (a rank did not fail) may still write them while
  // the job is being aborted.
  static int mine = 0, first = -1;
  static MPI_Request req = MPI_REQUEST_NULL;
  mine = comm.rank();
  if (locked([&] {
        return MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, g_fail_comm, &req);
      }) != MPI_SUCCESS)
    return -1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  for (;;) {
    int done = 0;
    if (locked([&] { return MPI_Test(&req, &done, MPI_STATUS_IGNORE); }) != MPI_SUCCESS) return -1;
    if (done) return first;
    if (std::chrono::steady_clock::now() > until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace halo

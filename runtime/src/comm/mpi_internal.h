// What the MPI communicator (comm.cc) and the MPI session (mpi_session.cc) share: whether MPI is
// up, the one lock every MPI call holds, and the failure communicator. Private to runtime/src.
#pragma once

#include <mpi.h>

#include <mutex>

namespace halo::mpi_internal {

extern bool g_mpi;             // MPI initialised by MpiSession
extern bool g_serialized;      // MPI gave MPI_THREAD_SERIALIZED: the progress thread may run
extern std::mutex g_mpi_lock;  // held by every MPI call once the progress thread may run
extern MPI_Comm g_fail_comm;   // first_failed_rank's own communicator (a dup of WORLD)

// Runs one MPI call under the lock.
template <class F>
int locked(F&& call) {
  std::lock_guard<std::mutex> lk(g_mpi_lock);
  return call();
}

// Stops the progress thread, if it runs (MpiSession's end, before MPI_Finalize; comm.cc).
void stop_progress();

}  // namespace halo::mpi_internal

// The rank supervisor's loop, shared by halo (in-process fallback) and the small
// halo-rank-supervisor program that halo's launched process becomes (see supervisor.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <string>

namespace halo {

// The signals a supervisor handles (forwarding them to its worker, or noting its end).
inline constexpr int kSupervisedSignals[] = {SIGCHLD, SIGTERM, SIGINT,  SIGHUP,
                                             SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};

struct SupervisorArgs {
  pid_t child = -1;   // the worker
  int ctl = -1;       // read end of the pipe the worker writes its join line to
  int listen = -1;    // rank 0: the listening socket; -1 elsewhere
  std::string token;  // rank 0: the job token peers must present
  double heartbeat_timeout_s = 30;
  int progress = -1;  // a shared page (memfd) the supervisor writes JobProgress into; -1: none
};

// The page a supervisor shares with its worker: when any rank of the job was last seen
// receiving (steady_clock nanoseconds; 0: not yet), as this rank's supervisor learns it from its
// own worker and from the heartbeats. Lets a wait tell a slow peer from a dead one.
struct JobProgress {
  std::atomic<std::int64_t> at_ns{0};
};

// In the worker: seconds since any rank of the job was last seen receiving bytes (as its
// supervisor knows it, ~1 s late); infinity when unknown (no supervisor).
double seconds_since_job_progress();

// This process's rank and job size as the launcher gives them (-1 / 0 when it does not).
void rank_from_env(int* rank, int* size);
// This machine's host name ("?" when it has none).
std::string host_name();

// Supervises `args.child` until it ends (see supervisor.h); returns the exit status for the
// process, or re-raises the worker's fatal signal. Expects kSupervisedSignals blocked on entry.
int run_supervisor(const SupervisorArgs& args);

}  // namespace halo

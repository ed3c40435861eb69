// The rank supervisor: under an MPI launcher every halo rank is two processes. The parent (the
// supervisor, the process the launcher started and watches) forks the worker, which runs the
// command, and stays small and idle so that it outlives whatever kills the worker. It turns the
// failures a launcher can only report as "signal 9" or "lost a daemon" into one line naming the
// rank and its host, and ends the job when a peer is lost even where MPI would wait:
//
// - the kernel's OOM killer ended the worker: "error: rank 2 of 4 on node2: out of memory ...";
// - the worker died of a signal: "error: rank 2 of 4 on node2: killed by signal 9 (Killed)";
// - a peer rank was lost: rank 0's supervisor keeps a TCP connection with every other rank's
//   (a star) and exchanges heartbeats once a second. A connection that closes without a goodbye
//   (the process or its node died) or stays silent for the heartbeat timeout (its node or link
//   is down) gives "error: rank 0 of 4 on node1: lost rank 2 and rank 3 on node2 (...)"; the
//   supervisor then ends its worker and exits non-zero, so the launcher ends the job. Every
//   other rank watches rank 0 the same way.
//
// A supervisor whose worker ended by itself (success, an error it reported, or a signal) says
// goodbye first, so its peers never report it as lost. HALO_SUPERVISE=0 turns all of this off.
#pragma once

namespace halo {

class Communicator;

// Called first thing in main(), before MPI starts. Under an MPI launcher (and unless
// HALO_SUPERVISE=0) forks: returns -1 in the worker, which goes on with the command; in the
// supervisor it returns only when the worker has ended, with the exit status main() must return
// (or it re-raises the worker's fatal signal). Elsewhere returns -1 without forking.
int supervise_rank();

// In the worker, once MPI is up, collectively on every rank: tells this rank's supervisor where
// rank 0's supervisor listens and this rank's host, so the supervisors can watch each other. A
// no-op in a single process or an unsupervised worker.
void join_supervisors(Communicator& comm);

// Seconds of heartbeat silence after which a peer counts as lost: HALO_HEARTBEAT_TIMEOUT_S, else
// the smaller of 30 and HALO_COMM_TIMEOUT_S.
double heartbeat_timeout_seconds();

}  // namespace halo

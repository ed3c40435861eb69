// halo-rank-supervisor: what a halo rank's launched process becomes after forking its worker
// (see halo/runtime/cluster/supervisor.h). Started only by halo itself:
//   halo-rank-supervisor WORKER_PID CTL_FD LISTEN_FD TOKEN HEARTBEAT_TIMEOUT_S PROGRESS_FD
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cluster/supervisor_loop.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "halo-rank-supervisor: started by halo only (see docs/DISTRIBUTED.md)\n");
    return 2;
  }
  halo::SupervisorArgs a;
  a.child = static_cast<pid_t>(std::atol(argv[1]));
  a.ctl = std::atoi(argv[2]);
  a.listen = std::atoi(argv[3]);
  a.token = std::string(argv[4]) == "-" ? "" : argv[4];
  a.heartbeat_timeout_s = std::atof(argv[5]);
  a.progress = std::atoi(argv[6]);
  if (a.child <= 0 || a.ctl < 0 || !(a.heartbeat_timeout_s > 0)) {
    std::fprintf(stderr, "halo-rank-supervisor: bad arguments\n");
    return 2;
  }
  return halo::run_supervisor(a);
}

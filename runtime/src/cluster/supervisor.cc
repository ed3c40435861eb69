// The rank supervisor (see supervisor.h): the fork before MPI, the exec of the small supervisor
// program, and the worker's side of joining the supervisors. The loop itself is in
// supervisor_loop.cc.
#include "halo/runtime/cluster/supervisor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "cluster/supervisor_loop.h"
#include "halo/runtime/comm/comm.h"

namespace halo {
namespace {

// A random token naming this job's supervisors.
std::string job_token() {
  unsigned long long x = 0;
  if (std::FILE* f = std::fopen("/dev/urandom", "rb")) {
    if (std::fread(&x, sizeof x, 1, f) != 1) x = 0;
    std::fclose(f);
  }
  x ^=
      static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      (static_cast<unsigned long long>(getpid()) << 32);
  char s[20];
  std::snprintf(s, sizeof s, "%016llx", x);
  return s;
}

// This machine's addresses, the ones other machines can reach first, loopback last.
std::string local_addresses() {
  std::vector<std::string> outer, loop;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
      char s[INET6_ADDRSTRLEN] = {};
      if (a->ifa_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, s, sizeof s);
      else
        continue;  // IPv4 is what MPI's TCP transports use by default too
      ((a->ifa_flags & IFF_LOOPBACK) ? loop : outer).push_back(s);
    }
    freeifaddrs(list);
  }
  std::string out;
  for (const auto* v : {&outer, &loop})
    for (const std::string& s : *v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "127.0.0.1" : out;
}

const JobProgress* g_progress = nullptr;  // the worker's view of its supervisor's page

}  // namespace

double seconds_since_job_progress() {
  if (!g_progress) return std::numeric_limits<double>::infinity();
  const std::int64_t at = g_progress->at_ns.load(std::memory_order_relaxed);
  if (at <= 0) return std::numeric_limits<double>::infinity();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  return double(now - at) * 1e-9;
}

double heartbeat_timeout_seconds() {
  if (const char* v = std::getenv("HALO_HEARTBEAT_TIMEOUT_S"); v && *v) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end != v && !*end && x > 0) return x;
  }
  double comm = 600;
  try {
    comm = comm_timeout_seconds();
  } catch (...) {
  }
  return std::min(30.0, comm);
}

int supervise_rank() {
  if (!launched_by_mpi()) return -1;
  if (const char* v = std::getenv("HALO_SUPERVISE"); v && std::string(v) == "0") return -1;
  int rank = -1, size = 0;
  rank_from_env(&rank, &size);
  if (rank < 0 || size == 1) return -1;

  // Rank 0 listens before the fork, so its port is known to the worker from the start.
  int listen_fd = -1;
  std::string token;
  if (rank == 0) {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (listen_fd < 0 || ::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd, 1024) != 0 ||
        getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (listen_fd >= 0) ::close(listen_fd);
      listen_fd = -1;
    } else {
      token = job_token();
      setenv("HALO_SUPERVISOR_PORT", std::to_string(ntohs(a.sin_port)).c_str(), 1);
      setenv("HALO_SUPERVISOR_TOKEN", token.c_str(), 1);
    }
  }
  int ctl[2];
  if (::pipe2(ctl, O_CLOEXEC) != 0) return -1;
  // The page the supervisor tells its worker about the job's progress through (JobProgress);
  // without it the waits keep their plain deadline.
  int progress_fd = ::memfd_create("halo-job-progress", 0);
  void* page = MAP_FAILED;
  if (progress_fd >= 0 && ::ftruncate(progress_fd, sizeof(JobProgress)) == 0)
    page = ::mmap(nullptr, sizeof(JobProgress), PROT_READ | PROT_WRITE, MAP_SHARED, progress_fd, 0);
  if (page == MAP_FAILED && progress_fd >= 0) {
    ::close(progress_fd);
    progress_fd = -1;
  }
  // Signals that arrive before the supervisor's handlers are in place must wait, not kill it.
  sigset_t held, old;
  sigemptyset(&held);
  for (int s : kSupervisedSignals) sigaddset(&held, s);
  sigprocmask(SIG_BLOCK, &held, &old);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return -1;
  }
  if (child == 0) {                    // the worker
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a supervisor killed from outside takes its worker along
    if (getppid() != parent) _exit(1);
    ::close(ctl[0]);
    if (listen_fd >= 0) ::close(listen_fd);
    if (progress_fd >= 0) {
      g_progress = static_cast<const JobProgress*>(page);  // stays mapped for the process
      ::close(progress_fd);
    }
    setenv("HALO_SUPERVISOR_FD", std::to_string(ctl[1]).c_str(), 1);
    // A peer's connection that vanishes must be an error MPI reports (EPIPE), not a silent
    // death of this rank by SIGPIPE that hides which rank failed first.
    std::signal(SIGPIPE, SIG_IGN);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return -1;
  }
  ::close(ctl[1]);
  if (page != MAP_FAILED) ::munmap(page, sizeof(JobProgress));  // the supervisor maps it anew
  SupervisorArgs args;
  args.progress = progress_fd;
  args.child = child;
  args.ctl = ctl[0];
  args.listen = listen_fd;
  args.token = token;
  args.heartbeat_timeout_s = heartbeat_timeout_seconds();
  // Become the small supervisor program (same pid, so the launcher still watches this process,
  // and the worker is still its child); if it cannot be found, supervise from this image.
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string prog(self, std::size_t(n));
    prog = prog.substr(0, prog.rfind('/') + 1) + "halo-rank-supervisor";
    for (int fd : {ctl[0], listen_fd})
      if (fd >= 0) fcntl(fd, F_SETFD, 0);  // kept across exec
    const std::string c = std::to_string(child), f = std::to_string(ctl[0]),
                      l = std::to_string(listen_fd), t = std::to_string(args.heartbeat_timeout_s),
                      g = std::to_string(progress_fd);
    const char* argv[] = {
        prog.c_str(), c.c_str(), f.c_str(), l.c_str(), token.empty() ? "-" : token.c_str(),
        t.c_str(),    g.c_str(), nullptr};
    ::execv(prog.c_str(), const_cast<char* const*>(argv));
  }
  return run_supervisor(args);
}

void join_supervisors(Communicator& comm) {
  const char* fdv = std::getenv("HALO_SUPERVISOR_FD");
  if (!fdv) return;
  const int fd = std::atoi(fdv);
  unsetenv("HALO_SUPERVISOR_FD");
  if (comm.size() < 2) {
    ::close(fd);
    return;
  }
  // Rank 0 tells every rank where its supervisor listens: "HOST PORT TOKEN ADDRS".
  char record[1024] = {};
  if (comm.rank() == 0) {
    const char* port = std::getenv("HALO_SUPERVISOR_PORT");
    const char* token = std::getenv("HALO_SUPERVISOR_TOKEN");
    std::snprintf(record, sizeof record, "%s %s %s %s", host_name().c_str(), port ? port : "0",
                  token ? token : "none", local_addresses().c_str());
  }
  comm.broadcast(record, sizeof record, 0);
  record[sizeof record - 1] = 0;
  const std::string line = "join " + std::to_string(comm.rank()) + " " +
                           std::to_string(comm.size()) + " " + host_name() + " " + record + "\n";
  [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
  ::close(fd);
}

}  // namespace halo

// What the rank supervisor reads from the kernel about its worker's end and its launcher: /proc
// and cgroup files (OOM kills, the memory limit, a process's start time), signal names, and the
// launcher watcher that ends an mpirun stuck on a frozen node. libc only, like the loop
// (supervisor_loop.cc) it serves; declared in the private supervisor_internal.h.
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "cluster/supervisor_internal.h"
#include "cluster/supervisor_loop.h"

namespace halo {
using namespace supervisor_internal;

namespace {

// The start time of process `pid` (field 22 of /proc/PID/stat; "" when it is gone): with the
// pid, names one process even if the pid is reused.
std::string start_time(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; ++i) {
  }
  return field;
}

}  // namespace

namespace supervisor_internal {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value after `key` in a "key value" listing (memory.events, memory.oom_control, vmstat).
long long keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  long long v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return -1;
}

MemoryCgroup memory_cgroup() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  MemoryCgroup v1, v2;
  while (std::getline(f, line)) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::istringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');)
      if (c == "memory") v1.dir = "/sys/fs/cgroup/memory" + path;
    if (controllers.empty() && std::ifstream("/sys/fs/cgroup" + path + "/memory.events")) {
      v2.dir = "/sys/fs/cgroup" + path;
      v2.v2 = true;
    }
  }
  return !v1.dir.empty() ? v1 : v2;
}

// OOM kills so far in this cgroup and on the whole machine (a kill raises one of them).
long long oom_kills(const MemoryCgroup& cg) {
  long long n = std::max(0LL, keyed_value(read_file("/proc/vmstat"), "oom_kill"));
  if (!cg.dir.empty())
    n += std::max(
        0LL, keyed_value(read_file(cg.dir + (cg.v2 ? "/memory.events" : "/memory.oom_control")),
                         "oom_kill"));
  return n;
}

// The memory limit that applies to this cgroup (the smallest on its path; 0: none).
long long memory_limit(const MemoryCgroup& cg) {
  if (cg.dir.empty()) return 0;
  if (!cg.v2) {
    const long long h =
        keyed_value(read_file(cg.dir + "/memory.stat"), "hierarchical_memory_limit");
    return h > 0 && h < (1LL << 60) ? h : 0;
  }
  long long best = 0;
  for (std::string d = cg.dir; d.size() > std::strlen("/sys/fs/cgroup");
       d = d.substr(0, d.rfind('/'))) {
    const std::string v = read_file(d + "/memory.max");
    if (!v.empty() && v.rfind("max", 0) != 0) {
      const long long x = std::atoll(v.c_str());
      if (x > 0 && (best == 0 || x < best)) best = x;
    }
  }
  return best;
}

std::string size_text(double bytes) {
  char s[32];
  if (bytes < double(1ULL << 30))
    std::snprintf(s, sizeof s, "%.0f MiB", bytes / double(1ULL << 20));
  else
    std::snprintf(s, sizeof s, "%.2f GiB", bytes / double(1ULL << 30));
  return s;
}

std::string signal_name(int sig) {
  const char* d = strsignal(sig);
  return "signal " + std::to_string(sig) + " (" + (d ? d : "?") + ")";
}

// When this supervisor's parent is Open MPI's mpirun (the rank runs on the launching machine)
// and the job is failing: a process of its own outlives the supervisor and, should mpirun still
// be there grace_s later, ends it (SIGKILL). mpirun ends a failed job only when every node's
// daemon confirms that its ranks ended, and a frozen node's daemon never does (its kernel still
// acknowledges every packet, so no TCP timeout fires either): without this the job would wait
// for the node to thaw. Other daemons then lose mpirun and end their ranks; the frozen node's
// do when it thaws. The job's error line has been printed by then.
void watch_launcher(double grace_s) {
  const pid_t launcher = getppid();
  std::string name = read_file("/proc/" + std::to_string(launcher) + "/comm");
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name != "mpirun" && name != "mpiexec" && name != "orterun" && name != "prterun") return;
  const std::string started = start_time(launcher);
  if (started.empty() || ::fork() != 0) return;  // the supervisor goes on (also if fork failed)
  // The watcher: in a session of its own (the launcher signals the rank's process group), with
  // no descriptor of the supervisor's (mpirun waits for the end of a rank's output pipes).
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
  for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  for (int sig : kSupervisedSignals) std::signal(sig, SIG_DFL);
  const double until = now_s() + grace_s;
  while (now_s() < until) {
    if (start_time(launcher) != started) _exit(0);
    usleep(100000);
  }
  if (start_time(launcher) == started) ::kill(launcher, SIGKILL);
  _exit(0);
}

}  // namespace supervisor_internal
}  // namespace halo

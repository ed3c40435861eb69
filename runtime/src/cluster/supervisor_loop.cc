// The rank supervisor's loop (see halo/runtime/cluster/supervisor.h for what it is for). It depends
// on nothing but libc, so that it can run as its own small program (halo-rank-supervisor): the
// process the launcher watches then holds ~1 MB instead of a copy of halo's image (the CUDA
// libraries alone map ~200 MB at start-up), and the OOM killer always picks the worker.
//
// Protocol between supervisors (text lines over TCP, rank 0 listening, every other rank
// connecting to it): "hello RANK HOST TOKEN", "hb [AGE]", "end", "bye". The token is rank 0's
// random job token, handed to the workers over MPI, so a stranger connecting to the port cannot
// pose as a rank. Heartbeats go both ways once a second; "bye" means "my end is known, do not
// report me". Single-threaded: one poll() loop over a self-pipe for signals, the pipe its worker
// writes the join line to, the listening socket and the peers. What the kernel says of the
// worker's end (OOM kills, the cgroup's limit) and the launcher watcher are in
// supervisor_system.cc.
#include "cluster/supervisor_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/supervisor_internal.h"

namespace halo {
using namespace supervisor_internal;  // the kernel's side, in supervisor_system.cc

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == ssize_t(s.size());
}

// Connects to addr:port within `seconds`; -1 on failure.
int connect_to(const std::string& addr, int port, double seconds) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, addr.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(std::uint16_t(port));
    len = sizeof *a4;
  } else if (inet_pton(AF_INET6, addr.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(std::uint16_t(port));
    len = sizeof *a6;
  } else {
    return -1;
  }
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t elen = sizeof err;
  if (::poll(&p, 1, int(seconds * 1000)) != 1 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Peer {
  int fd = -1;
  int rank = -1;  // -1 until its hello
  std::string host;
  double heard = 0;  // when it last spoke
  bool bye = false;
  std::string in;
};

class Supervisor {
 public:
  explicit Supervisor(const SupervisorArgs& a)
      : child_(a.child),
        ctl_(a.ctl),
        listen_(a.listen),
        token_(a.token),
        timeout_(a.heartbeat_timeout_s) {
    rank_from_env(&rank_, &size_);
    host_ = host_name();
    cgroup_ = memory_cgroup();
    ooms_before_ = oom_kills(cgroup_);
    if (a.progress >= 0) {
      void* page =
          ::mmap(nullptr, sizeof(JobProgress), PROT_READ | PROT_WRITE, MAP_SHARED, a.progress, 0);
      ::close(a.progress);
      if (page != MAP_FAILED) progress_ = static_cast<JobProgress*>(page);
    }
  }

  int run() {
    double last_beat = now_s();
    for (;;) {
      std::vector<pollfd> fds;
      fds.push_back({g_signal_pipe[0], POLLIN, 0});
      if (ctl_ >= 0) fds.push_back({ctl_, POLLIN, 0});
      if (listen_ >= 0) fds.push_back({listen_, POLLIN, 0});
      for (const Peer& p : peers_) fds.push_back({p.fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 250);
      if (fds[0].revents) {
        unsigned char sigs[64];
        const ssize_t n = ::read(g_signal_pipe[0], sigs, sizeof sigs);
        for (ssize_t i = 0; i < n; ++i) on_signal_received(sigs[i]);
      }
      if (ctl_ >= 0) read_join();
      if (listen_ >= 0) accept_peers();
      read_peers();
      if (told_to_end_ && !reported_ && !reaped_) {
        // A peer lost a rank and said so in its line: end quietly, so that the job prints one.
        reported_ = lost_ = true;
        say_bye();
        end_worker();
      }
      if (reaped_) return finish();
      const double t = now_s();
      note_worker_progress(t);
      if (t - last_beat >= 1.0) {
        // "hb AGE": the job was last seen receiving AGE seconds ago, as far as this rank knows
        // (rank 0 learns it from every rank and passes the newest on to every rank).
        char beat[64] = "hb\n";
        if (job_progress_ > 0) std::snprintf(beat, sizeof beat, "hb %.3f\n", t - job_progress_);
        for (Peer& p : peers_) send_all(p.fd, beat);
        last_beat = t;
      }
      check_lost();
    }
  }

 private:
  void on_signal_received(int sig) {
    if (sig == SIGCHLD) {
      reap();
      return;
    }
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT) {
      if (!terminating_) {
        // The launcher ends the job: goodbye first (it may follow with SIGKILL within
        // milliseconds), so no peer reports this rank as lost. When the launcher ends the job
        // because it lost a node, this supervisor's connections to that node's ranks closed at
        // the same moment: look once more, so that the line naming them is printed.
        say_bye();
        if (rank_ == 0 && !reported_) {
          const double until = now_s() + 0.3;
          while (now_s() < until && !reported_) {
            wait_peers(50);
            check_lost(/*end_worker=*/false);
          }
        }
        terminating_ = true;
      }
    }
    if (!reaped_) ::kill(child_, sig);
  }

  void reap() {
    int status = 0;
    rusage ru{};
    const pid_t p = ::wait4(child_, &status, WNOHANG, &ru);
    if (p != child_) return;
    reaped_ = true;
    status_ = status;
    peak_rss_ = double(ru.ru_maxrss) * 1024.0;
  }

  // Reads the worker's join line: "join RANK SIZE HOST RANK0HOST PORT TOKEN ADDR[,ADDR...]".
  void read_join() {
    char buf[2048];
    const ssize_t n = ::read(ctl_, buf, sizeof buf);
    if (n > 0) {
      ctl_in_.append(buf, std::size_t(n));
      return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    ::close(ctl_);  // the worker closed its end (after joining, or it ended)
    ctl_ = -1;
    std::istringstream in(ctl_in_);
    std::string word, rank0_host, addrs, token;
    int port = 0;
    if (!(in >> word >> rank_ >> size_ >> host_ >> rank0_host >> port >> token >> addrs) ||
        word != "join")
      return;
    if (rank_ == 0 || port <= 0) return;  // rank 0 listens; port 0: rank 0 is not supervised
    std::istringstream as(addrs);
    for (std::string a; std::getline(as, a, ',');) {
      const int fd = connect_to(a, port, 2.0);
      if (fd < 0) continue;
      Peer p;
      p.fd = fd;
      p.rank = 0;
      p.host = rank0_host;
      p.heard = now_s();
      peers_.push_back(p);
      send_all(fd, "hello " + std::to_string(rank_) + " " + host_ + " " + token + "\n");
      return;
    }
    std::fprintf(
        stderr,
        "warning: rank %d of %d on %s: cannot reach rank 0's supervisor at %s port %d: a lost node "
        "will be noticed only by the launcher and HALO_COMM_TIMEOUT_S\n",
        rank_, size_, host_.c_str(), addrs.c_str(), port);
  }

  void accept_peers() {
    for (;;) {
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Peer p;
      p.fd = fd;
      p.heard = now_s();
      peers_.push_back(p);
    }
  }

  void wait_peers(int ms) {
    std::vector<pollfd> fds;
    for (const Peer& p : peers_) fds.push_back({p.fd, POLLIN, 0});
    if (!fds.empty()) ::poll(fds.data(), fds.size(), ms);
    read_peers();
  }

  // Reads what peers said; a connection that ends is closed (and lost unless it said bye).
  void read_peers() {
    for (Peer& p : peers_) {
      if (p.fd < 0) continue;
      char buf[512];
      for (;;) {
        const ssize_t n = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          p.in.append(buf, std::size_t(n));
          p.heard = now_s();
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        ::close(p.fd);  // EOF or a reset
        p.fd = -2;
        break;
      }
      for (std::size_t nl; (nl = p.in.find('\n')) != std::string::npos;) {
        const std::string line = p.in.substr(0, nl);
        p.in.erase(0, nl + 1);
        std::istringstream in(line);
        std::string word;
        in >> word;
        if (word == "hb") {
          double age = 0;
          if (in >> age && age >= 0) note_job_progress(now_s() - age);
        } else if (word == "bye") {
          p.bye = true;
        } else if (word == "end" && p.rank >= 0) {
          told_to_end_ = true;
        } else if (word == "hello") {
          std::string token;
          in >> p.rank >> p.host >> token;
          if (token != token_ || token_.empty()) p.rank = -1, p.bye = true;  // not one of ours
        }
      }
    }
  }

  // Reports peers whose connection closed without a goodbye or that fell silent, once, grouped
  // by host; then (end_worker) ends the worker so that the launcher ends the job.
  void check_lost(bool end_worker = true) {
    if (reported_ || terminating_ || reaped_) return;
    const double t = now_s();
    std::map<std::string, std::vector<int>> closed, silent;  // by host, ranks in order
    bool timed_out = false;
    for (const Peer& p : peers_)
      timed_out |= p.rank >= 0 && !p.bye && p.fd >= 0 && t - p.heard > timeout_;
    // Peers beat once a second, so a node's ranks fall silent up to a second apart: once one
    // has timed out, every peer silent for more than half the timeout (2.5 s at least) went
    // with it.
    const double silent_for = timed_out ? std::max(2.5, timeout_ / 2) : timeout_;
    for (const Peer& p : peers_) {
      if (p.rank < 0 || p.bye) continue;
      if (p.fd == -2)
        closed[p.host].push_back(p.rank);
      else if (t - p.heard > silent_for)
        silent[p.host].push_back(p.rank);
    }
    if (closed.empty() && silent.empty()) return;
    for (auto* m : {&closed, &silent})
      for (auto& [host, ranks] : *m) std::sort(ranks.begin(), ranks.end());
    // A node that dies takes all its ranks at once: give the others' closes a moment to arrive.
    if (!closed.empty() && !grace_started_) {
      grace_started_ = true;
      const double until = t + 0.2;
      while (now_s() < until) wait_peers(50);
      return check_lost(end_worker);
    }
    reported_ = true;
    auto names = [](const std::vector<int>& ranks) {
      std::string s;
      for (std::size_t i = 0; i < ranks.size(); ++i)
        s += (i == 0                  ? ""
              : i + 1 == ranks.size() ? " and "
                                      : ", ") +
             ("rank " + std::to_string(ranks[i]));
      return s;
    };
    for (const auto& [host, ranks] : closed)
      std::fprintf(stderr,
                   "error: rank %d of %d on %s: lost %s on %s: %s without a goodbye (killed, or "
                   "the node went down); "
                   "ending the job\n",
                   rank_, size_, host_.c_str(), names(ranks).c_str(), host.c_str(),
                   ranks.size() == 1 ? "its connection closed" : "their connections closed");
    for (const auto& [host, ranks] : silent)
      std::fprintf(stderr,
                   "error: rank %d of %d on %s: lost %s on %s: no heartbeat for %.0f s (the node "
                   "or its link is "
                   "down; HALO_HEARTBEAT_TIMEOUT_S sets the limit); ending the job\n",
                   rank_, size_, host_.c_str(), names(ranks).c_str(), host.c_str(), timeout_);
    std::fflush(stderr);
    if (!end_worker) return;
    lost_ = true;
    // The other ranks end too, without a line of their own (their workers would otherwise each
    // report a timeout of their own for the same loss).
    for (Peer& p : peers_)
      if (p.fd >= 0) send_all(p.fd, "end\n");
    say_bye();
    this->end_worker();
  }

  // Whether the worker received bytes since the last look (its read() count in /proc/PID/io
  // grew by 4 KiB or more: MPI reads its TCP connections so; smaller steps are wake-ups): then
  // the job progresses.
  void note_worker_progress(double t) {
    if (!progress_ || t < next_io_read_) return;
    next_io_read_ = t + 0.25;
    const long long rchar =
        keyed_value(read_file("/proc/" + std::to_string(child_) + "/io"), "rchar:");
    if (rchar < 0) return;
    if (rchar_ >= 0 && rchar - rchar_ >= 4096) note_job_progress(t);
    rchar_ = rchar;
  }
  void note_job_progress(double at) {
    if (at <= job_progress_) return;
    job_progress_ = at;
    if (progress_) progress_->at_ns.store(std::int64_t(at * 1e9), std::memory_order_relaxed);
  }

  // SIGTERM to the worker, SIGKILL after 2 s; returns once it is reaped.
  void end_worker() {
    ::kill(child_, SIGTERM);
    const double until = now_s() + 2.0;
    while (!reaped_ && now_s() < until) {
      usleep(20000);
      reap();
    }
    if (!reaped_) {
      ::kill(child_, SIGKILL);
      while (!reaped_) {
        usleep(20000);
        reap();
      }
    }
  }

  void say_bye() {
    if (said_bye_) return;
    said_bye_ = true;
    for (Peer& p : peers_)
      if (p.fd >= 0) send_all(p.fd, "bye\n");
  }

  // The worker has ended: say so, explain a death the launcher could not, and end the same way.
  int finish() {
    if (lost_) {  // already reported: the job ends because a peer was lost
      watch_launcher(kLauncherGrace);
      return 1;
    }
    say_bye();
    // A failing job (an error, a signal, or the launcher ending the ranks) must end even when
    // some node is frozen and its launcher daemon never answers mpirun.
    if (!WIFEXITED(status_) || WEXITSTATUS(status_) != 0 || terminating_)
      watch_launcher(kLauncherGrace);
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    const int sig = WIFSIGNALED(status_) ? WTERMSIG(status_) : SIGKILL;
    if (!terminating_ && sig != SIGTERM && sig != SIGINT && sig != SIGHUP) {
      const char* who = "";
      std::string what;
      if (sig == SIGKILL && oom_kills(cgroup_) > ooms_before_) {
        const long long limit = memory_limit(cgroup_);
        what = "out of memory: the kernel's OOM killer ended it at " + size_text(peak_rss_) +
               " resident";
        what += limit > 0 ? " (the memory limit of its cgroup is " + size_text(double(limit)) + ")"
                          : " (the machine ran out of memory)";
      } else {
        what = "killed by " + signal_name(sig);
        who = sig == SIGKILL ? " from outside" : "";
      }
      std::fprintf(stderr, "error: rank %d of %d on %s: %s%s\n", rank_, size_, host_.c_str(),
                   what.c_str(), who);
      std::fflush(stderr);
    }
    // End as the worker did, so that the launcher reports what it would have reported.
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    std::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    return 128 + sig;
  }

  pid_t child_;
  int ctl_, listen_;
  std::string token_, ctl_in_;
  int rank_ = -1, size_ = 0;
  std::string host_;
  MemoryCgroup cgroup_;
  long long ooms_before_ = 0;
  double timeout_, peak_rss_ = 0;
  std::vector<Peer> peers_;
  bool reaped_ = false, terminating_ = false, reported_ = false, said_bye_ = false, lost_ = false;
  bool grace_started_ = false;
  bool told_to_end_ = false;         // a peer reported a lost rank and ends the job
  JobProgress* progress_ = nullptr;  // shared with the worker
  double job_progress_ = 0;          // when some rank of the job was last seen receiving
  double next_io_read_ = 0;
  long long rchar_ = -1;
  int status_ = 0;
};

}  // namespace

void rank_from_env(int* rank, int* size) {
  *rank = -1;
  *size = 0;
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* s = std::getenv(v)) {
      *rank = std::atoi(s);
      break;
    }
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* s = std::getenv(v)) {
      *size = std::atoi(s);
      break;
    }
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

int run_supervisor(const SupervisorArgs& args) {
  if (::pipe2(g_signal_pipe, O_NONBLOCK | O_CLOEXEC) != 0) return 70;
  set_nonblocking(args.ctl);
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : kSupervisedSignals) sigaction(s, &sa, nullptr);
  // The OOM killer should pick the worker, never its supervisor (refused without the privilege).
  if (std::FILE* f = std::fopen("/proc/self/oom_score_adj", "w")) {
    std::fputs("-1000", f);
    std::fclose(f);
  }
  sigset_t set;
  sigemptyset(&set);
  for (int s : kSupervisedSignals) sigaddset(&set, s);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);  // signals held since the fork arrive now
  on_signal(SIGCHLD);                       // the worker may have ended already
  Supervisor sup(args);
  return sup.run();
}

}  // namespace halo

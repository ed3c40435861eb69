// What the rank supervisor's loop (supervisor_loop.cc) takes from supervisor_system.cc: the
// clock, /proc and cgroup reads, and the launcher watcher. Private to runtime/src; libc only, as
// both files are also compiled into halo-rank-supervisor.
#pragma once

#include <string>

namespace halo::supervisor_internal {

// This process's memory cgroup: its directory ("" without one) and whether it is cgroup v2.
struct MemoryCgroup {
  std::string dir;
  bool v2 = false;
};

// Seconds a failing job's launcher gets to end by itself once this rank has ended (see
// watch_launcher); within it, mpirun ends a job whose nodes all answer (~1 s), or one whose
// link died (TCP keepalives, ~6 s with the settings of docs/DISTRIBUTED.md).
constexpr double kLauncherGrace = 10;

// Seconds on the steady clock.
double now_s();
// The whole of a (small, /proc or /sys) file; "" when it cannot be read.
std::string read_file(const std::string& path);
// The value after `key` in a "key value" listing; -1 when the key is missing.
long long keyed_value(const std::string& text, const std::string& key);
// This process's memory cgroup (v1's memory controller first, else v2's).
MemoryCgroup memory_cgroup();
// OOM kills so far in this cgroup and on the whole machine (a kill raises one of them).
long long oom_kills(const MemoryCgroup& cg);
// The memory limit that applies to this cgroup (the smallest on its path; 0: none).
long long memory_limit(const MemoryCgroup& cg);
// "812 MiB" or "3.25 GiB".
std::string size_text(double bytes);
// "signal 9 (Killed)".
std::string signal_name(int sig);
// Forks a watcher that ends an mpirun parent still there grace_s later (see the .cc).
void watch_launcher(double grace_s);

}  // namespace halo::supervisor_internal

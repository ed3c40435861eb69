// What this process can get (memory_model.h): the memory available to it (available_memory:
// the cgroup's limit, the address-space limit or the machine's memory) and whether it can start
// the threads it is asked for (check_threads), which the memory model's refusals and the
// --threads checks use.
#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>

#include "halo/graph/error.h"
#include "halo/runtime/memory/memory_model.h"

namespace halo {

namespace {
// The first integer in a file ("" or "max": -1).
long long first_number(const std::string& path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return -1;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  return end != v.c_str() ? x : -1;
}

// The file-backed pages (active and inactive) a cgroup's usage includes, from its memory.stat
// (v1 names them total_*: the hierarchy's); 0 when unreadable.
long long file_cache_bytes(const std::string& dir, bool v1) {
  std::ifstream f(dir + "/memory.stat");
  std::string key;
  long long value = 0, sum = 0;
  const std::string active = v1 ? "total_active_file" : "active_file",
                    inactive = v1 ? "total_inactive_file" : "inactive_file";
  while (f >> key >> value)
    if (key == active || key == inactive) sum += value;
  return sum;
}
}  // namespace

AvailableMemory available_memory() {
  AvailableMemory a;
  {
    std::ifstream f("/proc/meminfo");
    std::string key;
    long long kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit)
      if (key == "MemAvailable:") {
        a.bytes = std::int64_t(kib) * 1024;
        a.source = "MemAvailable";
        break;
      }
  }
  // The memory cgroup: "0::/path" (v2) or "N:memory:/path" (v1, possibly with other controllers).
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    const std::size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    std::string dir, limit_file, usage_file;
    bool v1 = false;
    if (controllers.empty()) {
      dir = "/sys/fs/cgroup" + path;
      limit_file = "memory.max";
      usage_file = "memory.current";
      v1 = false;
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      dir = "/sys/fs/cgroup/memory" + path;
      limit_file = "memory.limit_in_bytes";
      usage_file = "memory.usage_in_bytes";
      v1 = true;
    } else {
      continue;
    }
    // The tightest room left on the way up (a parent's limit binds its children too).
    for (std::string d = dir; d.size() >= std::string("/sys/fs/cgroup").size();
         d = d.substr(0, d.rfind('/'))) {
      const long long limit = first_number(d + "/" + limit_file),
                      used = first_number(d + "/" + usage_file);
      if (limit > 0 && limit < (1LL << 60) && used >= 0) {
        // Usage counts the page cache, which the kernel reclaims before it kills anything: after
        // reading a large file a cgroup looks full while it has room (as kubelet's working set,
        // the file pages are taken off).
        const std::int64_t room =
            std::max<std::int64_t>(0, limit - (used - file_cache_bytes(d, v1)));
        if (a.bytes == 0 || room < a.bytes) {
          a.bytes = room;
          a.source = "its memory cgroup's limit";
        }
      }
      if (d.rfind('/') == std::string::npos || d == "/sys/fs/cgroup") break;
    }
  }
  // The address-space limit (ulimit -v) counts every mapping, files and thread stacks included.
  if (rlimit rl{}; getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    std::ifstream st("/proc/self/status");
    std::string key;
    long long mapped_kib = -1;
    while (st >> key)
      if (key == "VmSize:" && st >> mapped_kib) break;
    if (mapped_kib >= 0) {
      const std::int64_t room =
          std::max<std::int64_t>(0, std::int64_t(rl.rlim_cur) - std::int64_t(mapped_kib) * 1024);
      if (a.bytes == 0 || room < a.bytes) {
        a.bytes = room;
        a.source = "its address-space limit (ulimit -v)";
      }
    }
  }
  return a;
}

namespace {
// The stack OpenMP gives its threads: OMP_STACKSIZE (or GOMP_STACKSIZE) as libgomp reads it (a
// size with an optional B, K, M or G suffix, K by default), else 0 (the pthread default).
std::size_t omp_stack_bytes() {
  const char* v = std::getenv("OMP_STACKSIZE");
  if (!v || !*v) v = std::getenv("GOMP_STACKSIZE");
  if (!v || !*v) return 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v) return 0;
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  const char unit = char(std::toupper(static_cast<unsigned char>(*end)));
  const int shift = unit == 'B' ? 0 : unit == 'M' ? 20 : unit == 'G' ? 30 : 10;
  return n > (~0ull >> shift) ? 0 : std::size_t(n << shift);
}

// Starts `count` threads that all live at once, with OpenMP's stack size, then ends and joins
// them: 0, or the error of the first start that failed and, in *started, how many ran.
int start_threads(int count, int* started) {
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  struct Shared {
    std::mutex* m;
    std::condition_variable* cv;
    bool* go;
  } shared{&m, &cv, &go};
  auto wait = [](void* p) -> void* {
    auto* s = static_cast<Shared*>(p);
    std::unique_lock<std::mutex> lock(*s->m);
    s->cv->wait(lock, [s] { return *s->go; });
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (const std::size_t stack = omp_stack_bytes(); stack > 0)
    pthread_attr_setstacksize(&attr, std::max(stack, std::size_t(PTHREAD_STACK_MIN)));
  std::vector<pthread_t> threads(std::size_t(std::max(count, 0)));
  int rc = 0;
  *started = 0;
  for (; *started < count; ++*started)
    if ((rc = pthread_create(&threads[std::size_t(*started)], &attr, +wait, &shared)) != 0) break;
  pthread_attr_destroy(&attr);
  {
    std::lock_guard<std::mutex> lock(m);
    go = true;
  }
  cv.notify_all();
  for (int i = 0; i < *started; ++i) pthread_join(threads[std::size_t(i)], nullptr);
  return rc;
}
}  // namespace

void check_threads(int threads, const std::string& flag) {
  const std::string range = "[0, " + std::to_string(kMaxThreads) + "] (0 = OpenMP's default)";
  if (threads < 0 || threads > kMaxThreads)
    throw ParamError(flag + " must be in " + range + ", found " + std::to_string(threads));
  std::string asked = flag + " " + std::to_string(threads);
  int count = threads;
  if (threads == 0) {
    count = omp_get_max_threads();
    const char* env = std::getenv("OMP_NUM_THREADS");
    asked = env ? "OMP_NUM_THREADS=" + std::string(env)
                : "OpenMP's default of " + std::to_string(count) + " threads";
    if (count > kMaxThreads)
      throw ParamError(asked + ": the thread count must be in [1, " + std::to_string(kMaxThreads) +
                       "]");
  }
  static std::atomic<int> verified{1};  // the main thread always exists
  if (count <= verified.load()) return;
  int started = 0;
  if (const int rc = start_threads(count - 1, &started); rc != 0)
    throw ParamError(asked + ": this process can start only " + std::to_string(started + 1) +
                     " threads now (" + std::strerror(rc) +
                     "; see ulimit -u and ulimit -v); ask for fewer");
  verified.store(count);
}

}  // namespace halo

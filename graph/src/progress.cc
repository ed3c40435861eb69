// Progress lines on a terminal and the peak-memory figure.
#include "halo/graph/progress.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace halo {

Progress::Progress(std::string label, std::uint64_t total)
    : label_(std::move(label)),
      total_(total),
      active_(!label_.empty() && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void Progress::update(std::uint64_t done) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double pct = total_ ? 100.0 * double(done) / double(total_) : 0.0;
  std::fprintf(stderr, "\r\033[K%s: %5.1f%%  %s / %s  %.0f MB/s", label_.c_str(), pct,
               format_bytes(done).c_str(), format_bytes(total_).c_str(),
               secs > 0 ? double(done) / secs / 1e6 : 0.0);
  std::fflush(stderr);
  drawn_ = true;
}

std::uint64_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return std::uint64_t(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace halo

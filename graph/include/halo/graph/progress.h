// Progress on stderr for long operations (only when stderr is a terminal, at most 5 updates
// a second) and the figures every long command ends with: wall time and peak memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace halo {

class Progress {
 public:
  // label empty = silent. total = the amount that update() counts towards (e.g. bytes).
  Progress(std::string label, std::uint64_t total);
  ~Progress();
  void update(std::uint64_t done);

 private:
  std::string label_;
  std::uint64_t total_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// Peak resident set size of this process so far, in bytes (getrusage).
std::uint64_t peak_rss_bytes();

// "1.23 GiB"-style text for a byte count.
std::string format_bytes(std::uint64_t bytes);

// Wall-clock stopwatch.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace halo

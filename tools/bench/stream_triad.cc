// STREAM-triad memory-bandwidth probe: a[i] = b[i] + s * c[i].
//
//   stream_triad [MIB_PER_ARRAY] [--float|--double]
//
// Three arrays of MIB_PER_ARRAY MiB each (default 512 MiB each, 1.5 GiB in all — far beyond
// 4x any last-level cache this runs on; a warning goes to stderr below 32 MiB per array),
// double by default. Pages are first touched by the same OpenMP static schedule that later
// runs the triad, so each thread's pages sit on its own NUMA node. The triad runs 10 times;
// the best (shortest) pass counts, as in STREAM. Threads: OMP_NUM_THREADS / OpenMP's default.
//
// Output, one JSON line on stdout:
//   {"triad_gb_per_s": X, "threads": T, "bytes_per_iter": B}
// B = 3 x array bytes (2 reads + 1 write), GB = 1e9 bytes. Following the STREAM convention,
// write-allocate traffic is NOT counted: on write-allocate caches the store to `a` also reads
// the line first, so the bus may move 4 x array bytes per pass while 3 x is reported (unless
// the compiler emits non-temporal stores).
//
// Build: g++ -O3 -march=native -fopenmp -std=c++20 tools/bench/stream_triad.cc -o stream_triad

#include <omp.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

namespace {

constexpr int kPasses = 10;

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

template <typename T>
std::unique_ptr<T[], AlignedFree> allocate(std::size_t n) {
  // 2 MiB alignment lets the kernel back the arrays with transparent huge pages.
  constexpr std::size_t kAlign = std::size_t{2} << 20;
  std::size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

template <typename T>
int run(std::size_t mib_per_array) {
  const std::size_t n = mib_per_array * (std::size_t{1} << 20) / sizeof(T);
  auto a = allocate<T>(n);
  auto b = allocate<T>(n);
  auto c = allocate<T>(n);
  T* __restrict pa = a.get();
  T* __restrict pb = b.get();
  T* __restrict pc = c.get();
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);

  // First touch with the same static schedule as the triad.
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    pa[i] = T(0);
    pb[i] = T(1);
    pc[i] = T(2);
  }

  const T scalar = T(3);
  double best = std::numeric_limits<double>::infinity();
  for (int pass = 0; pass < kPasses; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) pa[i] = pb[i] + scalar * pc[i];
    auto t1 = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t1 - t0).count();
    if (s < best) best = s;
  }

  // Check the result so the loop cannot be discarded: every a[i] must be 1 + 3 * 2 = 7.
  std::size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (std::ptrdiff_t i = 0; i < count; ++i) bad += pa[i] != T(7) ? 1u : 0u;
  if (bad != 0) {
    std::fprintf(stderr, "stream_triad: %zu wrong results\n", bad);
    return 1;
  }

  const std::size_t bytes_per_iter = 3 * n * sizeof(T);
  const double gb_per_s = static_cast<double>(bytes_per_iter) / best / 1e9;
  std::printf("{\"triad_gb_per_s\": %.3f, \"threads\": %d, \"bytes_per_iter\": %zu}\n", gb_per_s,
              omp_get_max_threads(), bytes_per_iter);
  return 0;
}

[[noreturn]] void usage(const char* prog) {
  std::fprintf(stderr, "usage: %s [MIB_PER_ARRAY (default 512)] [--float|--double]\n", prog);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 512;
  bool use_float = false;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--float") == 0) {
      use_float = true;
    } else if (std::strcmp(arg, "--double") == 0) {
      use_float = false;
    } else if (std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0) {
      usage(argv[0]);
    } else {
      char* end = nullptr;
      unsigned long long v = std::strtoull(arg, &end, 10);
      if (end == arg || *end != '\0' || v == 0 || v > (std::size_t{1} << 20)) usage(argv[0]);
      mib = static_cast<std::size_t>(v);
    }
  }
  if (mib < 32)
    std::fprintf(stderr, "stream_triad: warning: %zu MiB per array may fit in cache\n", mib);
  try {
    return use_float ? run<float>(mib) : run<double>(mib);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "stream_triad: cannot allocate 3 x %zu MiB\n", mib);
    return 1;
  }
}

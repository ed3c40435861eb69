// npz streaming benchmark: what reading an .npz archive (OGB's data.npz layout) costs. Streams
// every array of ARCHIVE once per repeat, raw (NpzReader::stream) and converted
// (stream_as<float> for float dtypes, stream_as<int64_t> otherwise), and prints one JSON line
// per mode with the median wall time and MB/s of payload. Peak memory: run under
// /usr/bin/time -v (the reader's memory is O(chunk); the page cache is not counted).
//   halo_bench_npz ARCHIVE [--repeats 3] [--chunk-mb 4] [--mode raw|convert|both]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "halo/graph/error.h"
#include "halo/graph/npz.h"

namespace {
// Median wall seconds of repeats runs of f; f returns the payload bytes it streamed.
double median_seconds(auto&& f, int repeats, std::uint64_t* bytes) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    *bytes = f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) try {
  using namespace halo;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: halo_bench_npz ARCHIVE [--repeats 3] [--chunk-mb 4] "
                 "[--mode raw|convert|both]\n");
    return 2;
  }
  const std::filesystem::path path = argv[1];
  int repeats = 3;
  std::size_t chunk = std::size_t{4} << 20;
  std::string mode = "both";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--chunk-mb") == 0)
      chunk = std::size_t(std::max(1, std::atoi(argv[i + 1]))) << 20;
    if (std::strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
  }
  const NpzReader r(path);
  auto raw = [&] {
    std::uint64_t total = 0, sum = 0;
    for (const std::string& key : r.keys())
      r.stream(
          key,
          [&](const std::byte* p, std::size_t n) {
            total += n;
            sum += std::to_integer<unsigned>(p[n - 1]);  // touch the data
          },
          chunk);
    if (sum == 1) std::fputc(' ', stderr);
    return total;
  };
  auto convert = [&] {
    std::uint64_t total = 0;
    for (const std::string& key : r.keys()) {
      const NpyArrayInfo info = r.info(key);
      if (info.descr.size() > 1 && info.descr[1] == 'f')
        stream_as<float>(
            r, key, [&](const float*, std::size_t n, std::uint64_t) { total += n * 4; }, chunk);
      else
        stream_as<std::int64_t>(
            r, key, [&](const std::int64_t*, std::size_t n, std::uint64_t) { total += n * 8; },
            chunk);
    }
    return total;
  };
  for (const char* m : {"raw", "convert"}) {
    if (mode != "both" && mode != m) continue;
    std::uint64_t bytes = 0;
    const double s = std::strcmp(m, "raw") == 0 ? median_seconds(raw, repeats, &bytes)
                                                : median_seconds(convert, repeats, &bytes);
    std::printf(
        "{\"bench\": \"npz\", \"archive\": \"%s\", \"mode\": \"%s\", \"repeats\": %d, "
        "\"chunk_mb\": %zu, \"bytes\": %llu, \"median_s\": %.3f, \"mb_per_s\": %.1f}\n",
        path.filename().c_str(), m, repeats, chunk >> 20, static_cast<unsigned long long>(bytes), s,
        s > 0 ? double(bytes) / s / 1e6 : 0.0);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}

// Validation benchmark: what opening a dataset (or a partition's parts) costs in structure checks
// next to the checksums every reader already computes. Times, best of N on a warm page cache:
// the map without checks, the CRC-32 of every array, and validate_graph_dataset / validate_part;
// one JSON line each, with validation as a share of the checksums.
//   halo_bench_validate DATASET|PARTS [--repeats 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/partition/parts.h"

namespace {
double seconds_of(auto&& f, int repeats) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) try {
  using namespace halo;
  if (argc < 2) {
    std::fprintf(stderr, "usage: halo_bench_validate DATASET|PARTS [--repeats 3]\n");
    return 2;
  }
  const std::filesystem::path path = argv[1];
  int repeats = 3;
  for (int i = 2; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
  const ReadOptions lazy{.verify_checksums = false};
  // Opening with checks = map + validation; with checksums too = map + CRC + validation. The
  // difference of the two is the CRC; validation alone is timed on the mapped arrays.
  auto report = [&](const std::string& what, double open_s, double crc_open_s, double validate_s) {
    std::printf(
        "{\"what\": \"%s\", \"open_unverified_s\": %.4f, \"open_verified_s\": %.4f, "
        "\"checksums_s\": %.4f, "
        "\"validate_s\": %.4f, \"validate_vs_checksums\": %.3f}\n",
        what.c_str(), open_s, crc_open_s, crc_open_s - open_s, validate_s,
        validate_s / std::max(1e-9, crc_open_s - open_s));
  };
  if (!is_parts_dir(path)) {
    const double open_s = seconds_of([&] { (void)read_graph_dataset(path, lazy); }, repeats);
    const double crc_s = seconds_of([&] { (void)read_graph_dataset(path); }, repeats);
    const GraphDataset d = read_graph_dataset(path, lazy);
    report(path.filename().string(), open_s, crc_s,
           seconds_of([&] { validate_graph_dataset(d, path); }, repeats));
    return 0;
  }
  const int k = read_parts_meta(path).at("k").get<int>();
  for (int r = 0; r < k; ++r) {
    const std::filesystem::path pd = path / ("part-" + std::to_string(r));
    const double open_s = seconds_of([&] { (void)read_part(path, r, lazy); }, repeats);
    const double crc_s = seconds_of([&] { (void)read_part(path, r); }, repeats);
    const Part p = read_part(path, r, lazy);
    report(pd.filename().string(), open_s, crc_s,
           seconds_of([&] { validate_part(p, pd); }, repeats));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}

// What the three dataset files (dataset.cc: reading, dataset_writer.cc: writing,
// dataset_checks.cc: structure checks) share. Private to graph/src.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

namespace halo::dataset_internal {

constexpr const char* kFormat = "halo-dataset";
constexpr int kVersion = 1;

// The first string or key under j (at `where`) that is not printable text, as {where, text};
// none when there is none (dataset.cc; "source" is not searched).
std::optional<std::pair<std::string, std::string>> find_unprintable(const nlohmann::json& j,
                                                                    const std::string& where);

// Smallest i in [0, n) with bad(i), or n when there is none. Parallel; the answer does not
// depend on the thread count, so a message names the same entry on every machine.
template <class Bad>
std::int64_t first_bad(std::int64_t n, Bad&& bad, std::int64_t chunk = 1 << 14) {
  std::int64_t first = n;
#pragma omp parallel for schedule(dynamic, chunk) reduction(min : first)
  for (std::int64_t i = 0; i < n; ++i)
    if (i < first && bad(i)) first = i;
  return std::min(first, n);
}

// "entry I", as a message names entry I of an array.
inline std::string entry(std::int64_t i) { return "entry " + std::to_string(i); }

}  // namespace halo::dataset_internal

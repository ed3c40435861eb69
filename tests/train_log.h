// Reading what `halo train --log` writes, for the tests that run halo as a command: the JSON
// records, the epoch records by epoch, and the relative difference the equivalence tests use.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace halo::test {

// Every record of a JSON-lines log, in order.
inline std::vector<nlohmann::json> read_log(const std::filesystem::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream f(p);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The "epoch" records by epoch number (a resumed run's later records replace earlier ones).
inline std::map<int, nlohmann::json> epochs(const std::vector<nlohmann::json>& log) {
  std::map<int, nlohmann::json> m;
  for (const auto& r : log)
    if (r["type"] == "epoch") m[r["epoch"].get<int>()] = r;
  return m;
}

// |a - b| relative to |a| (floored at 1e-12).
inline double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(a), 1e-12); }

}  // namespace halo::test

// Synthetic, learnable graphs at OGB sizes, for benchmarks and scale tests: a degree-skewed
// stochastic block model (one block per class), class-correlated Gaussian features and a random
// 50/25/25 split. Deterministic: the same options and seed give the same bytes, whatever the
// thread count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace halo {

struct GenerateOptions {
  std::int64_t nodes = 10000;
  double avg_degree = 10;   // undirected edges = nodes * avg_degree / 2 unless edges > 0
  std::int64_t edges = 0;   // exact number of undirected edges to draw
  std::int64_t features = 32;
  std::int64_t classes = 8;
  double homophily = 0.8;   // probability an edge stays inside its source's class
  double skew = 2.5;        // Pareto exponent of the degree propensities (smaller = more skewed)
  double noise = 2.0;       // feature noise std (class means are N(0,1) per dimension)
  std::uint64_t seed = 0;
  std::string format = "native";  // native | ogb
  bool overwrite = false;
};

struct GenerateReport {
  std::int64_t nodes = 0, edges = 0;  // edges drawn (undirected, before dedupe)
  double seconds = 0;
};

// Writes the graph at dir: a native dataset, or an OGB raw directory (raw/*.csv.gz and
// split/random/*.csv.gz) that `halo convert` reads. Atomic like every writer.
GenerateReport generate(const std::filesystem::path& dir, const GenerateOptions& options);

}  // namespace halo

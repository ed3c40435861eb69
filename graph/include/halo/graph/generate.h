// Synthetic, learnable graphs at OGB sizes, for benchmarks and scale tests: a degree-skewed
// stochastic block model (one block per class), class-correlated Gaussian features and a random
// 50/25/25 split; optionally with locality (communities inside the classes, grouped into
// neighbourhoods of a few classes; see generate.cc) so that a partitioner finds a small cut, as
// on real graphs. Deterministic: the same options and seed give the same bytes, whatever the
// thread count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace halo {

struct GenerateOptions {
  std::int64_t nodes = 10000;
  double avg_degree = 10;  // undirected edges = nodes * avg_degree / 2 unless edges > 0
  std::int64_t edges = 0;  // exact number of undirected edges to draw
  std::int64_t features = 32;
  std::int64_t classes = 8;
  double homophily = 0.8;  // probability an edge stays inside its source's class
  double skew = 2.5;       // Pareto exponent of the degree propensities (smaller = more skewed)
  double noise = 2.0;      // feature noise std (class means are N(0,1) per dimension)
  // Locality, off at 0 (the graph is then the plain SBM, bit for bit): probability an edge is
  // drawn inside its source's neighbourhood (same-class edges: inside its community). Each class
  // is cut into communities of about community_size nodes; a neighbourhood holds one community
  // of each of neighbourhood_classes classes. Homophily keeps its meaning whatever the locality.
  double locality = 0;
  std::int64_t community_size = 10000;
  std::int64_t neighbourhood_classes = 4;
  std::uint64_t seed = 0;
  // CSR entries placed per pass over the edge stream (4 bytes each): bounds memory whatever the
  // graph's size, at one more pass (a regeneration of the edges) per batch.
  std::int64_t batch_entries = std::int64_t(1) << 30;
  std::string format = "native";  // native | ogb
  bool overwrite = false;
};

struct GenerateReport {
  std::int64_t nodes = 0, edges = 0;  // edges drawn (undirected, before dedupe)
  std::int64_t neighbourhoods = 0;    // 0 without locality
  double seconds = 0;
};

// Where generate() puts a node: its class (the label), its community (inside the class:
// community / (communities per class) = class) and the neighbourhood holding that community.
struct GeneratedPlace {
  std::int32_t cls = 0;
  std::int64_t neighbourhood = 0;
  std::int64_t community = 0;
};

// Number of neighbourhoods generate() lays out for these options (0 when locality is off):
// Q * ceil(classes / M), Q = max(1, round(nodes / (classes * community_size))) communities per
// class, M = min(neighbourhood_classes, classes). Pure function of the options.
std::int64_t generated_neighbourhoods(const GenerateOptions& options);

// Where generate() puts node v in [0, nodes): a pure function of (options, v), so tests and tools
// can recompute the hidden structure without storing it (community and neighbourhood are 0 when
// locality is off). Throws ParamError for bad options or v out of range.
GeneratedPlace generated_place(const GenerateOptions& options, std::int64_t v);

// Writes the graph at dir: a native dataset, or an OGB raw directory (raw/*.csv.gz and
// split/random/*.csv.gz) that `halo convert` reads. Atomic like every writer.
GenerateReport generate(const std::filesystem::path& dir, const GenerateOptions& options);

}  // namespace halo

// Assigning every node to one of K parts: METIS (k-way or recursive bisection, multi-constraint
// balance, target part weights), Fennel (streaming, restreamed), and the random and contiguous
// baselines. Every method is deterministic for a given seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/graph/dataset.h"

namespace halo {

struct PartitionOptions {
  int k = 2;
  std::string method = "metis";      // metis | fennel | random | contiguous
  std::string objective = "cut";     // metis: cut | vol
  std::string balance = "nodes";     // comma list of: nodes, edges, train, weights
  std::string ptype = "auto";        // metis: auto (rb for K = 2, kway above) | kway | rb
  std::vector<double> part_weights;  // target share of each part (any scale); empty = equal
  int ufactor = -1;                  // allowed imbalance in 1/1000; -1 = METIS's default
  bool contiguous = false;           // metis: contiguous parts
  int passes = 4;                    // fennel: streaming passes (1 = plain Fennel)
  std::uint64_t seed = 0;
  std::string split;                 // split whose train nodes "train" refers to ("" = first)

  // Throws ParamError for any value out of range (K, names, weights) for a graph of n nodes.
  void check(std::int64_t n) const;
  // The target share of each part (part_weights normalised, or 1/K each).
  std::vector<double> targets() const;
  // The METIS partitioning scheme auto resolves to.
  std::string metis_ptype() const;
};

// The split options.split names (or the first), or nullptr when the dataset has none.
const Split* choose_split(const GraphDataset& d, const std::string& name);

// Part of every node, by options.method. Throws ParamError if a part ends up empty.
std::vector<PartId> partition_nodes(const GraphDataset& d, const PartitionOptions& options);

// The methods themselves (partition_nodes checks options and dispatches to these).
std::vector<PartId> partition_metis(const GraphDataset& d, const PartitionOptions& options);
std::vector<PartId> partition_fennel(const CsrView& g, const PartitionOptions& options);
std::vector<PartId> partition_random(std::int64_t n, const PartitionOptions& options);
std::vector<PartId> partition_contiguous(std::int64_t n, const PartitionOptions& options);

}  // namespace halo

// Assigning every node to one of K parts: METIS (k-way or recursive bisection, multi-constraint
// balance, target part weights), Fennel (streaming, restreamed), and the random and contiguous
// baselines. Every method is deterministic for a given seed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "halo/graph/dataset.h"

namespace halo {

// kAssignment: read from PartitionOptions::assignment_in (computed elsewhere); kKaminpar: the
// KaMinPar Python package, run as a child process; kLpMetis: METIS on an LP-clustered graph;
// kPtScotch: PT-Scotch over the ranks of an MPI job, each holding a slice of rows
// (partition_dataset_ptscotch in parts.h).
enum class PartitionMethod {
  kMetis,
  kFennel,
  kRandom,
  kContiguous,
  kAssignment,
  kKaminpar,
  kLpMetis,
  kPtScotch
};
// What METIS minimises: the edge cut or the communication volume.
enum class MetisObjective { kCut, kVol };
// METIS's scheme: auto (k-way, gpmetis's default), k-way, recursive bisection, or best (both,
// keeping the lower edge cut).
enum class MetisPtype { kAuto, kKway, kRb, kBest };

// Each parse takes the CLI spelling and throws ParamError naming the expected ones; each
// to_string gives the spelling back, as PARTS/meta.json and messages record it.
// metis | fennel | random | contiguous | kaminpar | lp-metis | ptscotch
PartitionMethod parse_partition_method(std::string_view s);
MetisObjective parse_metis_objective(std::string_view s);  // cut | vol
MetisPtype parse_metis_ptype(std::string_view s);          // auto | kway | rb | best
const char* to_string(PartitionMethod m);
const char* to_string(MetisObjective o);
const char* to_string(MetisPtype p);

// The ranges PartitionOptions::check holds (the command line shows them in --help).
constexpr int kMaxUfactor = 100000;  // --ufactor in [1, kMaxUfactor] (1/1000: up to 100x)
constexpr int kMaxPasses = 100;      // fennel --passes in [1, kMaxPasses]
// Each --part-weights value: the shares are relative, and METIS takes them as float32 shares
// whose sum it checks, so a 1e-300 beside a 1 underflows to a zero share it rejects.
constexpr double kMinPartWeight = 1e-6, kMaxPartWeight = 1e6;
// METIS (Debian's build) takes its seed as a 32-bit idx_t, and -1 means its own default seed.
constexpr std::uint64_t kMaxMetisSeed = 2147483647;

struct PartitionOptions {
  int k = 2;
  PartitionMethod method = PartitionMethod::kMetis;
  MetisObjective objective = MetisObjective::kCut;  // metis only
  std::string balance = "nodes";                    // comma list of: nodes, edges, train, weights
  MetisPtype ptype = MetisPtype::kAuto;             // metis only
  std::vector<double> part_weights;  // target share of each part (any scale); empty = equal
  // --part-weights auto=TABLE: the shares are searched for under the speed table's epoch model
  // (speed.h); part_weights must then be empty.
  std::filesystem::path speed_table;
  int ufactor = -1;         // allowed imbalance in 1/1000; -1 = METIS's default
  bool contiguous = false;  // metis: contiguous parts
  int passes = 4;           // fennel: streaming passes (1 = plain Fennel)
  // Unset: METIS's own default seed (as gpmetis without -seed, so that its assignment is
  // gpmetis's) for metis and lp-metis, 0 for the other methods. Deterministic either way.
  std::optional<std::uint64_t> seed;
  std::string split;                    // split whose train nodes "train" refers to ("" = first)
  std::filesystem::path assignment_in;  // kAssignment: gpmetis .part.K text or int32/int64 .npy

  // Throws ParamError for any value out of range (K, names, weights) for a graph of n nodes.
  void check(std::int64_t n) const;
  // The target share of each part (part_weights normalised, or 1/K each).
  std::vector<double> targets() const;
  // The METIS schemes to run (kway or rb, never auto or best), k-way first: best runs both.
  std::vector<MetisPtype> metis_ptypes() const;
};

// The split options.split names (or the first), or nullptr when the dataset has none.
const Split* choose_split(const GraphDataset& d, const std::string& name);

// Part of every node, by options.method. Throws ParamError if a part ends up empty. scheme, when
// given, receives the METIS scheme whose assignment this is (kway or rb; metis only).
std::vector<PartId> partition_nodes(const GraphDataset& d, const PartitionOptions& options,
                                    MetisPtype* scheme = nullptr);

// The methods themselves (partition_nodes checks options and dispatches to these).
// METIS: the lowest edge cut of options.metis_ptypes() (ties to the first), its scheme in *scheme.
std::vector<PartId> partition_metis(const GraphDataset& d, const PartitionOptions& options,
                                    MetisPtype* scheme = nullptr);
std::vector<PartId> partition_fennel(const CsrView& g, const PartitionOptions& options);
// LP clustering, METIS on the contracted graph, LP refinement (lp_metis.cc); undirected only.
std::vector<PartId> partition_lp_metis(const CsrView& g, const PartitionOptions& options);
std::vector<PartId> partition_random(std::int64_t n, const PartitionOptions& options);
// One part id per node from file (gpmetis .part.K text: one id per line; or a 1-D int32/int64
// .npy), each in [0, k), every part non-empty; anything else is an InputError naming the file
// and the line or element.
std::vector<PartId> read_assignment(const std::filesystem::path& file, std::int64_t n, int k);
// KaMinPar's default configuration with eps = ufactor / 1000 (0.03 by default), the seed, the
// OpenMP thread count and the part weights; ParamError when the interpreter or the package is
// missing (saying how to install it), SystemError when KaMinPar fails.
std::vector<PartId> partition_kaminpar(const GraphDataset& d, const PartitionOptions& options);
// True when halo was built with PT-Scotch (HALO_PTSCOTCH; --method ptscotch).
bool ptscotch_available();
// The most stored edges (CSR entries) this halo's PT-Scotch indexes: 2^31 - 1 for the int32
// build, 2^63 - 1 for the int64 one (0 without PT-Scotch). Larger graphs are refused before
// their arrays are mapped.
std::int64_t ptscotch_max_edges();
// The Python that runs KaMinPar: $HALO_PYTHON, else python3 from PATH.
std::string kaminpar_python();
std::vector<PartId> partition_contiguous(std::int64_t n, const PartitionOptions& options);

}  // namespace halo

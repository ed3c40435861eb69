// --method ptscotch: PT-Scotch's distributed k-way mapping over the ranks of an MPI job, for
// graphs no single process should hold. Rank r of P maps the dataset (address space only) and
// reads, validates and hands PT-Scotch only its slice of rows, a contiguous block with about m / P
// stored edges; PT-Scotch checks symmetry across the slices (dgraphCheck). The assignment is then
// allgathered (one int32 per node on every rank), the quality is summed from the slices, and rank
// r writes parts r, r + P, ... into one staging folder that rank 0 commits. The parts' rows are
// shuffled: in round j each rank sends the rows of its slice that part j * P + w owns (columns,
// weights, features, labels, splits, and the degrees of that part's halo) to rank w, which
// writes the part from them. No rank reads a row outside its slice, so every rank's reads and
// memory are its slice, one part and the node-sized owner and local-id arrays.
// The rounds' packing and all-to-alls are in ptscotch_rounds.cc (shared pieces in
// ptscotch_internal.h).
//
// Every step that can fail on some ranks only runs inside agreed(): no rank enters a collective
// that a failed rank will never reach, and a failure anywhere removes the staging folder first.
//
// PT-Scotch is Debian's int32 build by default (HALO_PTSCOTCH_INT=32): about half the memory of
// the int64 one, for graphs of fewer than 2^31 stored edges (checked first; a larger graph is
// told to use HALO_PTSCOTCH_INT=64). NodeId is int32 either way.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/partition/parts.h"

#ifdef HALO_HAVE_PTSCOTCH
#include <mpi.h>
#include <omp.h>

#include <cstdint>
// ptscotch.h needs <stdio.h>, <stdint.h> and <mpi.h> first.
#include <ptscotch.h>

#include "ptscotch_internal.h"
#endif

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

#ifndef HALO_HAVE_PTSCOTCH

bool ptscotch_available() { return false; }

std::int64_t ptscotch_max_edges() { return 0; }

json partition_dataset_ptscotch(const fs::path&, const fs::path&, const PartitionOptions&, bool,
                                const fs::path&) {
  throw ParamError(
      "--method ptscotch: this halo was built without PT-Scotch (install libptscotch-dev, e.g. "
      "tools/install-deps.sh, and run cmake again)");
}

#else

static_assert(sizeof(SCOTCH_Num) >= sizeof(NodeId), "SCOTCH_Num must hold a NodeId");

bool ptscotch_available() { return true; }

std::int64_t ptscotch_max_edges() { return std::int64_t(SCOTCH_NUMMAX); }

using namespace ptscotch_internal;  // shared with ptscotch_rounds.cc (ptscotch_internal.h)

namespace ptscotch_internal {

// halo's main sets MPI_ERRORS_RETURN: a failed call is a SystemError naming it.
void mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw SystemError(std::string(call) + " failed: " + std::string(text, std::size_t(len)));
}

// Runs step on every rank and agrees on the outcome. On a failure anywhere, every rank runs
// job.cleanup, then the lowest failing rank rethrows its error (one message for the job) and the
// others wait for the job to be ended (halo's main aborts it on that error), throwing after a
// minute if it is not.
void agreed(const Job& job, const std::function<void()>& step) {
  std::exception_ptr error;
  try {
    step();
  } catch (...) {
    error = std::current_exception();
  }
  int mine = error ? job.rank : INT_MAX, first = INT_MAX;
  HALO_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, job.comm));
  if (first == INT_MAX) return;
  if (job.cleanup) job.cleanup();
  HALO_MPI(MPI_Barrier(job.comm));  // the staging folder is gone before anyone aborts the job
  if (job.rank == first) std::rethrow_exception(error);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  throw SystemError("rank " + std::to_string(first) + " failed and the job was not ended");
}

}  // namespace ptscotch_internal

namespace {

// PT-Scotch prints its own diagnosis on stderr and returns non-zero.
void scotch_check(int rc, const char* call) {
  if (rc != 0) throw SystemError(std::string("PT-Scotch: ") + call + " failed");
}
#define HALO_SCOTCH(call) scotch_check((call), #call)

// halo's main starts MPI only under a launcher: a plain `halo partition --method ptscotch` is a
// job of one rank, started here (an MPI singleton) and finalised at exit.
void ensure_mpi() {
  int up = 0;
  MPI_Initialized(&up);
  if (up) return;
  int provided = 0;
  HALO_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  });
}

// Row bounds of every rank: rank r holds rows [bounds[r], bounds[r + 1]), whole rows with about
// m / P stored edges, found by binary search (O(P log n) offsets read). Made monotone, so a
// corrupt offsets file still gives disjoint slices, in one of which the check then fails.
std::vector<std::int64_t> slice_bounds(const CsrView& g, std::int64_t m, int ranks) {
  std::vector<std::int64_t> bounds(std::size_t(ranks) + 1, g.num_nodes);
  bounds[0] = 0;
  for (int r = 1; r < ranks; ++r) {
    const EdgeId target = m / ranks * r + m % ranks * r / ranks;
    const auto at = std::lower_bound(g.offsets, g.offsets + g.num_nodes + 1, target) - g.offsets;
    bounds[std::size_t(r)] = std::clamp<std::int64_t>(at, bounds[std::size_t(r) - 1], g.num_nodes);
  }
  return bounds;
}

std::string entry(std::int64_t i) { return "entry " + std::to_string(i); }

// What validate_graph_dataset checks, for rows [b, e): offsets non-decreasing within [0, m],
// columns in range, sorted, no self-loop; finite edge weights and features. first (rank 0) also
// checks the ends of the offsets and the node-sized arrays (labels, splits, input order).
// Symmetry is dgraphCheck's, across the slices.
void validate_slice(const GraphDataset& d, const fs::path& dir, std::int64_t b, std::int64_t e,
                    bool first) {
  const CsrView g = d.graph.view();
  const auto n = g.num_nodes, m = std::int64_t(d.graph.indices.size());
  const fs::path offsets = dir / "offsets.bin", indices = dir / "indices.bin";
  if (first && (g.offsets[0] != 0 || g.offsets[n] != m))
    throw_input(offsets, 0,
                "first and last offsets " + std::to_string(g.offsets[0]) + " and " +
                    std::to_string(g.offsets[n]) + ", expected 0 and the index count " +
                    std::to_string(m));
  for (std::int64_t u = b; u < e; ++u) {
    if (g.offsets[u + 1] < g.offsets[u] || g.offsets[u + 1] > m)
      throw_input(offsets, 0,
                  entry(u + 1) + ": offset " + std::to_string(g.offsets[u + 1]) +
                      ", expected one in [" + std::to_string(g.offsets[u]) + ", " +
                      std::to_string(m) + "]: offsets must not decrease");
    for (EdgeId i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
      const NodeId v = g.indices[i];
      const std::string where = entry(i) + " (row " + std::to_string(u) + "): ";
      if (v < 0 || v >= n)
        throw_input(
            indices, 0,
            where + "column " + std::to_string(v) + " out of range [0, " + std::to_string(n) + ")");
      if (v == u) throw_input(indices, 0, where + "self-loop (a row never stores itself)");
      if (i > g.offsets[u] && v <= g.indices[i - 1])
        throw_input(indices, 0,
                    where + "column " + std::to_string(v) + " not above the previous one (" +
                        std::to_string(g.indices[i - 1]) + "): rows must be sorted");
      if (g.values && !std::isfinite(g.values[i]))
        throw_input(dir / "edge_weights.bin", 0, entry(i) + ": not a finite number");
    }
  }
  const auto f = std::size_t(d.num_features);
  for (std::size_t i = std::size_t(b) * f; i < std::size_t(e) * f; ++i)
    if (!std::isfinite(d.features[i]))
      throw_input(dir / "features.bin", 0, entry(std::int64_t(i)) + ": not a finite number");
  d.features.release(std::size_t(b) * f, std::size_t(e) * f);  // not read again until writing
  if (!first) return;
  check_labels(dir / "labels.bin", d.labels, d.label_kind, d.label_cols, d.num_classes);
  check_splits(dir, d.splits, n);
  if (!d.original_ids.empty()) {
    std::vector<std::uint64_t> seen;  // n distinct ids in [0, n): a permutation
    check_ids(dir / "original_ids.bin", d.original_ids, n, &seen);
  }
}

// Threads per rank for PT-Scotch. Debian's build (SCOTCH_PTHREAD_MPI) lets them call MPI at
// once, which is safe only at MPI_THREAD_MULTIPLE: below it they raced inside Open MPI's
// progress engine (a rare SIGSEGV in a 2-rank test). One thread then; else OMP_NUM_THREADS's.
int scotch_threads() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_MULTIPLE ? std::max(1, omp_get_max_threads()) : 1;
}

// PT-Scotch handles, released in reverse order of creation.
struct Scotch {
  SCOTCH_Dgraph graph{}, bound{};
  SCOTCH_Strat strat{};
  SCOTCH_Arch arch{};
  SCOTCH_Context context{};
  bool graph_ok = false, bound_ok = false, strat_ok = false, arch_ok = false, context_ok = false;
  Scotch() = default;
  Scotch(const Scotch&) = delete;
  Scotch& operator=(const Scotch&) = delete;
  ~Scotch() {
    if (bound_ok) SCOTCH_dgraphExit(&bound);
    if (context_ok) SCOTCH_contextExit(&context);
    if (arch_ok) SCOTCH_archExit(&arch);
    if (strat_ok) SCOTCH_stratExit(&strat);
    if (graph_ok) SCOTCH_dgraphExit(&graph);
  }
};

// The architecture to map onto: K equal parts, or K parts weighted by options.part_weights
// (integer loads, the targets scaled to a million).
void build_arch(Scotch& s, const PartitionOptions& o) {
  HALO_SCOTCH(SCOTCH_archInit(&s.arch));
  s.arch_ok = true;
  if (o.part_weights.empty()) {
    HALO_SCOTCH(SCOTCH_archCmplt(&s.arch, o.k));
    return;
  }
  std::vector<SCOTCH_Num> loads;
  for (double t : o.targets())
    loads.push_back(std::max<SCOTCH_Num>(1, SCOTCH_Num(std::llround(t * 1e6))));
  HALO_SCOTCH(SCOTCH_archCmpltw(&s.arch, o.k, loads.data()));
}

// Rows [b, e) of the dataset as this rank's part of a distributed graph, mapped into K parts by
// a deterministic PT-Scotch (fixed seed, deterministic context). Collective; returns the part of
// each row.
std::vector<PartId> map_slice(const Job& job, const GraphDataset& d, std::int64_t b, std::int64_t e,
                              const PartitionOptions& o) {
  const std::int64_t rows = e - b;
  std::vector<SCOTCH_Num> vert(std::size_t(rows) + 1), edges, parts(std::size_t(rows) + 1);
  const CsrView g = d.graph.view();
  const EdgeId base = g.offsets[b];
  for (std::int64_t i = 0; i <= rows; ++i)
    vert[std::size_t(i)] = SCOTCH_Num(g.offsets[b + i] - base);
  edges.assign(g.indices + base, g.indices + g.offsets[e]);  // widened to SCOTCH_Num
  // PT-Scotch holds the copies: the mapped rows need not stay resident at its peak.
  d.graph.indices.release(std::size_t(base), std::size_t(g.offsets[e]));
  const auto arcs = SCOTCH_Num(edges.size());
  Scotch s;
  agreed(job, [&] {
    HALO_SCOTCH(SCOTCH_dgraphInit(&s.graph, job.comm));
    s.graph_ok = true;
  });
  agreed(job, [&] {
    HALO_SCOTCH(SCOTCH_dgraphBuild(&s.graph, 0, SCOTCH_Num(rows), SCOTCH_Num(rows), vert.data(),
                                   vert.data() + 1, nullptr, nullptr, arcs, arcs, edges.data(),
                                   nullptr, nullptr));
  });
  // Every arc with its reverse across the slices: what "directed": false promises.
  agreed(job, [&] {
    if (SCOTCH_dgraphCheck(&s.graph) != 0)
      throw InputError(
          "indices.bin: the graph is not symmetric or not consistent (PT-Scotch's "
          "dgraphCheck, message above); convert it again");
  });
  agreed(job, [&] {
    HALO_SCOTCH(SCOTCH_stratInit(&s.strat));
    s.strat_ok = true;
    const double imbalance = o.ufactor < 0 ? 0.03 : o.ufactor / 1000.0;  // METIS's default
    // QUALITY: measured the same cuts as the default strategy (SBMs), in the same time.
    HALO_SCOTCH(SCOTCH_stratDgraphMapBuild(&s.strat, SCOTCH_STRATQUALITY, SCOTCH_Num(job.size),
                                           SCOTCH_Num(o.k), imbalance));
    build_arch(s, o);
    HALO_SCOTCH(SCOTCH_contextInit(&s.context));
    s.context_ok = true;
    // Unbound (-1): ranks sharing a host would otherwise pin their threads to the same cores.
    std::vector<int> cores(std::size_t(scotch_threads()), -1);
    HALO_SCOTCH(SCOTCH_contextThreadSpawn(&s.context, int(cores.size()), cores.data()));
    HALO_SCOTCH(SCOTCH_contextOptionSetNum(&s.context, SCOTCH_OPTIONNUMDETERMINISTIC, 1));
    HALO_SCOTCH(SCOTCH_contextOptionSetNum(&s.context, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1));
    SCOTCH_contextRandomSeed(&s.context, SCOTCH_Num(o.seed.value_or(0) & 0x7fffffffffffffffull));
    HALO_SCOTCH(SCOTCH_dgraphInit(&s.bound, job.comm));
    s.bound_ok = true;
    HALO_SCOTCH(SCOTCH_contextBindDgraph(&s.context, &s.graph, &s.bound));
  });
  agreed(job, [&] { HALO_SCOTCH(SCOTCH_dgraphMap(&s.bound, &s.arch, &s.strat, parts.data())); });
  std::vector<PartId> out(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) out[std::size_t(i)] = PartId(parts[std::size_t(i)]);
  return out;
}

// Every rank's rows' parts, concatenated in row order, on every rank.
std::vector<PartId> gather_owner(const Job& job, const std::vector<PartId>& mine,
                                 const std::vector<std::int64_t>& bounds) {
  std::vector<int> counts(std::size_t(job.size)), displs(std::size_t(job.size));
  for (int r = 0; r < job.size; ++r) {
    displs[std::size_t(r)] = int(bounds[std::size_t(r)]);  // NodeId is int32: n fits an int
    counts[std::size_t(r)] = int(bounds[std::size_t(r) + 1] - bounds[std::size_t(r)]);
  }
  std::vector<PartId> owner(std::size_t(bounds.back()));
  static_assert(sizeof(PartId) == sizeof(int));
  HALO_MPI(MPI_Allgatherv(mine.data(), int(mine.size()), MPI_INT, owner.data(), counts.data(),
                          displs.data(), MPI_INT, job.comm));
  return owner;
}

// measure_partition's figures, each rank counting its rows and the counts summed. The graph is
// symmetric, so a row u of part p with neighbours in part q is one of q's halo rows (received
// from p, sent by p): row u alone says it, without the rows of q.
Quality measure_slices(const Job& job, const GraphDataset& d, const std::vector<PartId>& owner,
                       std::int64_t b, std::int64_t e, const PartitionOptions& o) {
  const CsrView g = d.graph.view();
  const auto k = std::size_t(o.k);
  // [crossing, volume, nodes[k], inner[k], local_edges[k], halo[k], recv[k][k]]
  std::vector<std::int64_t> c(2 + 4 * k + k * k, 0);
  std::int64_t *nodes = &c[2], *inner = nodes + k, *edges = inner + k, *halo = edges + k,
               *recv = halo + k;
  std::vector<std::int64_t> seen(k, -1);  // seen[q] = the last row with a neighbour in q
  for (std::int64_t u = b; u < e; ++u) {
    const auto p = std::size_t(owner[std::size_t(u)]);
    ++nodes[p];
    edges[p] += g.degree(NodeId(u));
    bool in = true;
    for (const NodeId* w = g.begin(NodeId(u)); w != g.end(NodeId(u)); ++w) {
      const auto q = std::size_t(owner[std::size_t(*w)]);
      if (q == p) continue;
      in = false;
      ++c[0];
      if (seen[q] == u) continue;
      seen[q] = u;
      ++c[1];
      ++halo[q];
      ++recv[q * k + p];
    }
    inner[p] += in;
  }
  HALO_MPI(MPI_Allreduce(MPI_IN_PLACE, c.data(), int(c.size()), MPI_INT64_T, MPI_SUM, job.comm));
  Quality q;
  q.k = o.k;
  q.edge_cut = c[0] / 2;
  q.comm_volume = c[1];
  q.parts.assign(k, PartStats{});
  for (std::size_t p = 0; p < k; ++p) {
    PartStats& s = q.parts[p];
    s.nodes = nodes[p];
    s.inner = inner[p];
    s.local_edges = edges[p];
    s.halo = halo[p];
    s.recv.assign(recv + p * k, recv + (p + 1) * k);
    s.send.resize(k);
    for (std::size_t r = 0; r < k; ++r) s.send[r] = recv[r * k + p];
  }
  finish_quality(q, owner, choose_split(d, o.split), o.targets());
  return q;
}

// Rank 0's string on every rank.
std::string broadcast(const Job& job, std::string s) {
  auto len = std::uint64_t(s.size());
  HALO_MPI(MPI_Bcast(&len, 1, MPI_UINT64_T, 0, job.comm));
  s.resize(std::size_t(len));
  HALO_MPI(MPI_Bcast(s.data(), int(len), MPI_CHAR, 0, job.comm));
  return s;
}

// Every part's fingerprint on rank 0, each written by the rank that wrote the part.
std::vector<std::string> gather_fingerprints(const Job& job, const std::vector<std::string>& fps) {
  constexpr std::size_t kWidth = 64;
  std::vector<unsigned char> table(fps.size() * kWidth, 0), all(table.size(), 0);
  for (std::size_t p = 0; p < fps.size(); ++p)
    std::copy_n(fps[p].begin(), std::min(fps[p].size(), kWidth - 1), table.begin() + p * kWidth);
  HALO_MPI(MPI_Reduce(table.data(), all.data(), int(all.size()), MPI_BYTE, MPI_BOR, 0, job.comm));
  std::vector<std::string> out;
  for (std::size_t p = 0; p < fps.size(); ++p)
    out.emplace_back(reinterpret_cast<const char*>(all.data() + p * kWidth));
  return out;
}

// The parts of an assignment, as partition_nodes refuses them: none may be empty.
void check_parts_nonempty(const std::vector<PartId>& owner, const PartitionOptions& o) {
  std::vector<std::int64_t> count(std::size_t(o.k), 0);
  for (PartId p : owner) ++count[std::size_t(p)];
  for (int p = 0; p < o.k; ++p)
    if (count[std::size_t(p)] == 0)
      throw ParamError("part " + std::to_string(p) + " is empty: ptscotch left it no nodes (K = " +
                       std::to_string(o.k) + " for " + std::to_string(owner.size()) +
                       " nodes); use a smaller -k or larger part weights");
}

// Peak RSS of every rank, on every rank.
std::vector<std::uint64_t> gather_peaks(const Job& job) {
  std::vector<std::uint64_t> peaks(std::size_t(job.size));
  const std::uint64_t mine = peak_rss_bytes();
  HALO_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, peaks.data(), 1, MPI_UINT64_T, job.comm));
  return peaks;
}

// Every rank maps the dataset, checks the options against it and validates its slice of rows;
// rank 0 first checks the outputs and the free space, as partition_dataset does before the
// (possibly long) partitioning. Returns every rank's row bounds.
std::vector<std::int64_t> open_dataset(const Job& job, GraphDataset& d, const fs::path& dataset,
                                       const fs::path& out, const PartitionOptions& o,
                                       bool overwrite, const fs::path& assignment_out) {
  std::vector<std::int64_t> bounds;
  agreed(job, [&] {
    if (job.rank == 0) {  // fail before the partitioning, as partition_dataset does
      resolve_dir_output(out, kPartsFormat, overwrite, {dataset});
      if (!assignment_out.empty()) resolve_file_output(assignment_out, {dataset, out});
    }
    // The stored edges as meta.json records them, checked before anything is mapped (mapping
    // checks that indices.bin holds as many).
    const auto stored = read_dataset_meta(dataset).at("edges").get<std::int64_t>();
    if (stored > ptscotch_max_edges())
      throw ParamError("--method ptscotch: " + std::to_string(stored) +
                       " stored edges, more than this halo's PT-Scotch indexes (" +
                       std::to_string(ptscotch_max_edges()) +
                       "); configure with -DHALO_PTSCOTCH_INT=64");
    d = map_graph_dataset(dataset, ReadOptions{.verify_checksums = false});
    if (d.directed)
      throw ParamError("--method ptscotch needs an undirected graph (convert without --directed)");
    o.check(d.num_nodes());
    if (job.rank == 0)
      check_free_space(out, parts_bytes(d, o.k), std::to_string(o.k) + " parts of this dataset");
    bounds = slice_bounds(d.graph.view(), std::int64_t(d.graph.indices.size()), job.size);
    validate_slice(d, dataset, bounds[std::size_t(job.rank)], bounds[std::size_t(job.rank) + 1],
                   job.rank == 0);
  });
  return bounds;
}

}  // namespace

json partition_dataset_ptscotch(const fs::path& dataset, const fs::path& out,
                                const PartitionOptions& o, bool overwrite,
                                const fs::path& assignment_out) {
  Stopwatch total;
  ensure_mpi();
  Job job;
  MPI_Comm_rank(job.comm, &job.rank);
  MPI_Comm_size(job.comm, &job.size);
  GraphDataset d;
  const std::vector<std::int64_t> bounds =
      open_dataset(job, d, dataset, out, o, overwrite, assignment_out);
  const std::int64_t b = bounds[std::size_t(job.rank)], e = bounds[std::size_t(job.rank) + 1];
  const double load_s = total.seconds();
  Stopwatch clock;
  const std::vector<PartId> owner = gather_owner(job, map_slice(job, d, b, e, o), bounds);
  agreed(job, [&] { check_parts_nonempty(owner, o); });
  const double partition_s = clock.seconds();
  const std::vector<std::uint64_t> partition_peaks = gather_peaks(job);  // before the writing
  const Quality q = measure_slices(job, d, owner, b, e, o);

  std::unique_ptr<StagingDir> stage;  // rank 0's; the other ranks write into it
  std::unique_ptr<ArrayDir> root;
  job.cleanup = [&] {
    root.reset();
    stage.reset();  // removes everything every rank wrote under it
  };
  std::string staging, partition_fp;
  agreed(job, [&] {
    if (job.rank != 0) return;
    stage =
        std::make_unique<StagingDir>(out, kPartsFormat, overwrite, std::vector<fs::path>{dataset});
    root = std::make_unique<ArrayDir>(stage->path());
    partition_fp = write_parts_owner(*root, d, owner);
    staging = stage->path().string();
    if (!assignment_out.empty()) write_assignment(assignment_out, owner);
  });
  staging = broadcast(job, staging);
  partition_fp = broadcast(job, partition_fp);
  std::vector<std::string> fps(std::size_t(o.k));
  std::vector<std::uint8_t> flags;
  std::vector<NodeId> local_of;
  agreed(job, [&] {
    flags = split_flags(d, b, e);
    local_of.assign(std::size_t(d.num_nodes()), -1);
  });
  for (int round = 0; round * job.size < o.k; ++round) {  // one part per rank per round
    const PartId p = PartId(round * job.size + job.rank);
    Outgoing packed;
    agreed(job, [&] { packed = pack_round(job, d, owner, flags, b, e, round, o.k); });
    const PartRows rows = exchange_round(job, std::move(packed));
    agreed(job, [&] {
      if (p >= o.k) return;
      const HaloPlan plan = build_halo_plan(halos_of_part(rows, owner, p, o.k), p, local_of);
      fps[std::size_t(p)] = write_part(staging, d, rows, plan, local_of, partition_fp);
    });
  }
  fps = gather_fingerprints(job, fps);
  const std::vector<std::uint64_t> peaks = gather_peaks(job);
  json meta;
  agreed(job, [&] {
    if (job.rank != 0) return;
    const json extra = {{"dataset_path", fs::absolute(dataset).string()},
                        {"dataset_fingerprint", d.fingerprint},
                        {"ranks", job.size},
                        {"threads_per_rank", scotch_threads()},
                        {"seconds", {{"load", load_s}, {"partition", partition_s}}},
                        {"peak_rss_bytes", *std::max_element(peaks.begin(), peaks.end())},
                        {"peak_rss_bytes_per_rank", peaks},
                        {"peak_rss_bytes_partitioning_per_rank", partition_peaks}};
    meta = write_parts_meta(*root, d, o, q, fps, extra);
    stage->commit();
  });
  if (job.rank != 0) return nullptr;
  meta["seconds"]["total"] = total.seconds();
  return meta;
}

#endif  // HALO_HAVE_PTSCOTCH

}  // namespace halo

// Native datasets, structure checks: every array a reader maps (or a writer is given) checked
// in parallel passes that name the first bad entry, the same one on every machine. Used by the
// readers and writers of datasets and of parts.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "dataset_internal.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"

namespace halo {
namespace fs = std::filesystem;
using namespace dataset_internal;

namespace {

std::string range(std::int64_t lo, std::int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

// The first entry (row, index) of a CSR for which bad(row, e) holds, rows searched in parallel;
// row == num_nodes when there is none.
template <class Bad>
std::pair<std::int64_t, EdgeId> first_bad_entry(const CsrView& g, Bad&& bad) {
  const std::int64_t u = first_bad(
      g.num_nodes,
      [&](std::int64_t r) {
        for (EdgeId e = g.offsets[r]; e < g.offsets[r + 1]; ++e)
          if (bad(r, e)) return true;
        return false;
      },
      1024);
  if (u == g.num_nodes) return {u, 0};
  EdgeId e = g.offsets[u];
  while (!bad(u, e)) ++e;
  return {u, e};
}

}  // namespace

void check_offsets(const fs::path& file, const Array<EdgeId>& offsets, std::int64_t count) {
  const auto n = std::int64_t(offsets.size());
  if (n == 0) throw_input(file, 0, "no offsets (expected at least one entry)");
  const EdgeId* o = offsets.data();
  if (o[0] != 0)
    throw_input(file, 0, entry(0) + ": first offset " + std::to_string(o[0]) + ", expected 0");
  const std::int64_t i = first_bad(n - 1, [&](std::int64_t j) { return o[j + 1] < o[j]; });
  if (i < n - 1)
    throw_input(file, 0,
                entry(i + 1) + ": offset " + std::to_string(o[i + 1]) +
                    " below the previous one (" + std::to_string(o[i]) +
                    "): offsets must not decrease");
  if (o[n - 1] != count)
    throw_input(file, 0,
                entry(n - 1) + ": last offset " + std::to_string(o[n - 1]) +
                    ", expected the index count " + std::to_string(count));
}

void check_csr_columns(const fs::path& file, const CsrView& g, std::int64_t cols) {
  // A row is bad when any of its entries is: out of range, not above its predecessor, or its
  // own row (a self-loop, which the GCN normalisation adds itself).
  auto bad_entry = [&](std::int64_t u, EdgeId e) {
    const NodeId v = g.indices[e];
    return v < 0 || v >= cols || v == u || (e > g.offsets[u] && v <= g.indices[e - 1]);
  };
  const auto [u, e] = first_bad_entry(g, bad_entry);
  if (u == g.num_nodes) return;
  const NodeId v = g.indices[e];
  const std::string where = entry(e) + " (row " + std::to_string(u) + "): ";
  if (v < 0 || v >= cols)
    throw_input(file, 0, where + "column " + std::to_string(v) + " out of range " + range(0, cols));
  if (v == u)
    throw_input(file, 0,
                where + "self-loop " + std::to_string(u) + " -> " + std::to_string(v) +
                    " (a row never stores itself)");
  throw_input(file, 0,
              where + "column " + std::to_string(v) + " not above the previous one (" +
                  std::to_string(g.indices[e - 1]) + "): rows must be sorted, without duplicates");
}

namespace {
// splitmix64's finaliser: a bijection of 64-bit words whose output bits each depend on every
// input bit.
std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Whether the multiset of entries (u, v, weight) equals that of (v, u, weight), as two sums of a
// keyed hash: one streaming pass over the arrays instead of a binary search per entry (10x
// faster on a 25M-entry graph). A random key per process makes a false "equal" a 2^-64 chance
// that no input can aim at.
bool entries_look_symmetric(const CsrView& g) {
  static const std::uint64_t key = [] {
    std::random_device rd;
    return (std::uint64_t(rd()) << 32) ^ rd();
  }();
  // An unweighted graph hashes the pair alone; a weighted one mixes the weight's bits in after.
  const bool weighted = g.values != nullptr;
  auto hash = [weighted](std::uint64_t a, std::uint64_t b, std::uint32_t w) {
    const std::uint64_t h = mix64(((a << 32) | b) ^ key);
    return weighted ? mix64(h ^ (std::uint64_t(w) * 0x9e3779b97f4a7c15ULL)) : h;
  };
  std::uint64_t forward = 0, backward = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : forward, backward)
  for (std::int64_t u = 0; u < g.num_nodes; ++u)
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
      const auto v = std::uint64_t(std::uint32_t(g.indices[e]));
      std::uint32_t w = 0;
      if (g.values) std::memcpy(&w, &g.values[e], sizeof w);
      forward += hash(std::uint64_t(u), v, w);
      backward += hash(v, std::uint64_t(u), w);
    }
  return forward == backward;
}
}  // namespace

void check_symmetric(const fs::path& file, const CsrView& g) {
  if (entries_look_symmetric(g)) return;
  // Not symmetric: find the first entry to name. The reverse of entry e = (u, v), or -1: rows
  // are sorted (checked before), so a binary search in row v.
  auto reverse = [&](std::int64_t u, EdgeId e) -> EdgeId {
    const NodeId v = g.indices[e];
    const NodeId* b = g.begin(v);
    const NodeId* end = g.end(v);
    const NodeId* it = std::lower_bound(b, end, NodeId(u));
    return it != end && *it == u ? g.offsets[v] + (it - b) : -1;
  };
  auto bad_entry = [&](std::int64_t u, EdgeId e) {
    const EdgeId r = reverse(u, e);
    return r < 0 || (g.values && !(g.values[r] == g.values[e]));
  };
  const auto [u, e] = first_bad_entry(g, bad_entry);
  if (u == g.num_nodes) return;
  const std::string edge = std::to_string(u) + " -> " + std::to_string(g.indices[e]);
  throw_input(file, 0,
              entry(e) + " (row " + std::to_string(u) + "): edge " + edge +
                  (reverse(u, e) < 0 ? " has no reverse" : " has a reverse of another weight") +
                  ", but meta.json says the graph is undirected");
}

void check_increasing(const fs::path& file, const NodeId* ids, std::int64_t begin, std::int64_t end,
                      const std::string& what) {
  if (end - begin < 2) return;
  const std::int64_t i = first_bad(
      end - begin - 1, [&](std::int64_t j) { return ids[begin + j + 1] <= ids[begin + j]; });
  if (i < end - begin - 1)
    throw_input(file, 0,
                entry(begin + i + 1) + ": id " + std::to_string(ids[begin + i + 1]) +
                    " not above the previous one (" + std::to_string(ids[begin + i]) +
                    "): " + what + " must be in increasing id order");
}

void check_ids(const fs::path& file, const Array<NodeId>& ids, std::int64_t bound,
               std::vector<std::uint64_t>* seen, const std::string& clash) {
  const auto n = std::int64_t(ids.size());
  const NodeId* x = ids.data();
  const std::int64_t i = first_bad(n, [&](std::int64_t j) { return x[j] < 0 || x[j] >= bound; });
  if (i < n)
    throw_input(file, 0,
                entry(i) + ": id " + std::to_string(x[i]) + " out of range " + range(0, bound));
  if (!seen) return;
  seen->resize(std::size_t((bound + 63) / 64), 0);
  // Fast path: mark in parallel; only when some id was marked already, find the first one
  // again serially on a copy, so the message is the same on every machine.
  const std::vector<std::uint64_t> before = *seen;
  std::int64_t clashes = 0;
#pragma omp parallel for schedule(static) reduction(+ : clashes)
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t bit = std::uint64_t(1) << (x[j] & 63);
    clashes +=
        (std::atomic_ref<std::uint64_t>((*seen)[std::size_t(x[j] >> 6)]).fetch_or(bit) & bit) != 0;
  }
  if (clashes == 0) return;
  std::vector<std::uint64_t> mark = before;
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t bit = std::uint64_t(1) << (x[j] & 63);
    std::uint64_t& w = mark[std::size_t(x[j] >> 6)];
    if (w & bit) {
      const bool earlier_here = (before[std::size_t(x[j] >> 6)] & bit) == 0;
      throw_input(
          file, 0,
          entry(j) + ": id " + std::to_string(x[j]) +
              (earlier_here || clash.empty() ? " repeated (ids must be distinct)"
                                             : " also in " + clash + " (expected disjoint sets)"));
    }
    w |= bit;
  }
}

void check_finite(const fs::path& file, const Array<float>& values) {
  const auto n = std::int64_t(values.size());
  const float* x = values.data();
  // A branch-free pass first (it vectorises: all exponent bits set is an infinity or a NaN);
  // the first bad entry is looked for only when there is one.
  // In blocks whose pages are dropped once checked: the check is often the only reader of
  // the features (`info`, `partition`), which would otherwise keep them all resident.
  std::uint32_t any_bad = 0;
  constexpr std::int64_t kBlock = std::int64_t(1) << 24;  // 64 MiB of floats
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = std::min(n, b + kBlock);
#pragma omp parallel for schedule(static) reduction(| : any_bad)
    for (std::int64_t j = b; j < e; ++j) {
      std::uint32_t bits;
      std::memcpy(&bits, x + j, sizeof bits);
      any_bad |= std::uint32_t((bits & 0x7f800000u) == 0x7f800000u);
    }
    values.release(std::size_t(b), std::size_t(e));
  }
  if (!any_bad) return;
  const std::int64_t i = first_bad(
      n, [&](std::int64_t j) { return !std::isfinite(x[j]); }, 1 << 16);
  if (i < n)
    throw_input(file, 0,
                entry(i) + ": value " + std::to_string(x[i]) + ", expected a finite number");
}

void check_labels(const fs::path& file, const Array<std::int32_t>& labels, LabelKind kind,
                  std::int64_t cols, std::int64_t classes) {
  if (kind == LabelKind::kNone || cols == 0) return;
  const std::int32_t* y = labels.data();
  const auto n = std::int64_t(labels.size());
  const bool multi = kind == LabelKind::kMultilabel;
  const std::int64_t hi = multi ? 2 : classes;  // multilabel: 0/1 per task, -1 = missing
  const std::int64_t i = first_bad(n, [&](std::int64_t j) { return y[j] < -1 || y[j] >= hi; });
  if (i < n)
    throw_input(file, 0,
                entry(i) + " (row " + std::to_string(i / cols) + "): label " +
                    std::to_string(y[i]) +
                    (multi ? ", expected 0, 1 or -1 (missing)"
                           : " out of range [-1, " + std::to_string(classes) + ") (" +
                                 std::to_string(classes) + " classes, -1 = missing)"));
}

void check_splits(const fs::path& dir, const std::vector<Split>& splits, std::int64_t n) {
  std::vector<std::uint64_t> seen;
  for (const Split& s : splits) {
    seen.assign(std::size_t((n + 63) / 64), 0);
    const std::string base = "split." + s.name + ".";
    check_ids(dir / (base + "train.bin"), s.train, n, &seen);
    check_ids(dir / (base + "valid.bin"), s.valid, n, &seen, "the train set");
    check_ids(dir / (base + "test.bin"), s.test, n, &seen, "the train or valid set");
  }
}

void validate_graph_dataset(const GraphDataset& d, const fs::path& dir) {
  const CsrView g = d.graph.view();
  const std::int64_t n = g.num_nodes;
  check_offsets(dir / "offsets.bin", d.graph.offsets, std::int64_t(d.graph.indices.size()));
  check_csr_columns(dir / "indices.bin", g, n);
  if (!d.graph.values.empty()) check_finite(dir / "edge_weights.bin", d.graph.values);
  if (!d.directed) check_symmetric(dir / "indices.bin", g);
  if (d.ncon > 0) {
    const std::int32_t* w = d.node_weights.data();
    const auto size = std::int64_t(d.node_weights.size());
    const std::int64_t i = first_bad(size, [&](std::int64_t j) { return w[j] < 0; });
    if (i < size)
      throw_input(
          dir / "node_weights.bin", 0,
          entry(i) + ": weight " + std::to_string(w[i]) + ", expected a non-negative integer");
  }
  check_finite(dir / "features.bin", d.features);
  check_labels(dir / "labels.bin", d.labels, d.label_kind, d.label_cols, d.num_classes);
  check_splits(dir, d.splits, n);
  if (!d.original_ids.empty()) {
    std::vector<std::uint64_t> seen;  // n distinct ids in [0, n): a permutation
    check_ids(dir / "original_ids.bin", d.original_ids, n, &seen);
  }
}

}  // namespace halo

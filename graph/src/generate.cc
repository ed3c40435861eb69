// Synthetic graphs: a degree-corrected stochastic block model with one block per class.
//   class(v)  uniform over C;  propensity theta_v ~ Pareto(skew), capped;
//   edge: u ~ theta over all nodes; with probability homophily v ~ theta within class(u),
//         else v ~ theta over all nodes (resampled while v == u);
//   x_v = mu_class(v) + noise * N(0, I), mu_c ~ N(0, I);  split 50/25/25 by a per-node hash.
// Locality (locality = P > 0) adds hidden structure inside and across the classes:
//   community(v): each class is cut into Q = nodes / (C * community_size) communities (per-node
//     hash), so communities nest in classes;
//   neighbourhood: for each slot q < Q, the classes are laid on a ring turned by a per-slot hash
//     and cut into runs of M = neighbourhood_classes; a neighbourhood holds the slot-q
//     communities of one run (M "related" classes; which classes are related changes with q);
//   each draw of v keeps the homophily coin and adds a locality coin:
//     same class,  local: v ~ theta within community(u);   else: within class(u)  (as before);
//     other class, local: v ~ theta within neighbourhood(u) less community(u); else: over all.
// So a share P + (1 - P) (homophily / Q + (1 - homophily) / R) of the draws stays in the
// source's neighbourhood (R = Q * ceil(C / M) of them), and the share in the source's class is
// homophily + (1 - homophily) (1 - P) / C, about homophily as before (and + (1 - homophily) / C
// without locality): the knob moves the partition, not the task. Why neighbourhoods that mix
// classes instead of communities alone: in real co-purchase and citation graphs cross-class edges
// are local too (a phone and its case; a paper and the next field it cites) while homophily is
// 0.65-0.8; if only same-class edges could be local, a small cut would force homophily to ~1.
// Why a few classes per neighbourhood instead of all: a neighbourhood must stay small against a
// part (a part cannot hold a fraction of one without cutting it), while a community must stay
// large against a hub's degree (theta is capped at 300x the smallest, so a products-sized hub has
// ~5,000 neighbours; in a smaller community its draws collapse into duplicates and the degree
// tail is lost). M classes per neighbourhood give both: neighbourhoods of M * community_size.
// Without locality no locality coin is drawn, so that graph is the plain SBM's, bit for bit.
// Every random draw is a pure function of (seed, stream, index), so chunks can be drawn in any
// order on any number of threads and the output is identical.
#include "halo/graph/generate.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/gzip_writer.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/graph/text.h"

namespace halo {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kEdgeChunk = 1 << 20;
constexpr std::int64_t kNodeChunk = 1 << 14;
// Bounds on sizes, far above any use and checked before anything is allocated: 2^34 edges is
// ten times ogbn-papers100M; feature rows are built kNodeChunk at a time (a 4096-wide chunk
// is 256 MiB of floats, 1 GiB of OGB text); one alias table is built per class.
constexpr std::int64_t kMaxGeneratedEdges = std::int64_t(1) << 34;
constexpr std::int64_t kMaxGeneratedFeatures = 4096;
constexpr std::int64_t kMaxGeneratedClasses = 16384;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A counter-based stream: draw k of stream (seed, id) is mix(key + k).
class Stream {
 public:
  Stream(std::uint64_t seed, std::uint64_t stream, std::uint64_t id)
      : key_(mix(mix(seed ^ (stream << 56)) ^ id)) {}
  std::uint64_t next() { return mix(key_ + ctr_++); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller; one value per call keeps the stream position simple
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t key_;
  std::uint64_t ctr_ = 0;
};

// Stream ids; new ones go at the end so that existing streams (and graphs) stay the same.
enum : std::uint64_t { kClass = 1, kTheta, kEdges, kFeatures, kMeans, kSplit, kCommunity, kTurn };

std::int32_t class_of(const GenerateOptions& o, std::int64_t v) {
  Stream c(o.seed, kClass, std::uint64_t(v));
  return std::int32_t(c.next() % std::uint64_t(o.classes));
}

// The hidden structure of locality: O(1) pure functions of (options, node id), so a node's
// place can be recomputed anywhere without tables.
struct Layout {
  std::int64_t slots = 0;    // Q: communities per class; 0 without locality
  std::int64_t runs = 0;     // neighbourhoods per slot: runs of M classes on the ring
  std::int64_t run_len = 0;  // M

  explicit Layout(const GenerateOptions& o) {
    if (!(o.locality > 0)) return;
    const double q = double(o.nodes) / (double(o.classes) * double(o.community_size));
    slots = std::max<std::int64_t>(1, std::llround(q));
    run_len = std::min(o.neighbourhood_classes, o.classes);
    runs = (o.classes + run_len - 1) / run_len;
  }
  std::int64_t communities(const GenerateOptions& o) const { return o.classes * slots; }
  std::int64_t neighbourhoods() const { return slots * runs; }
  std::int64_t slot_of(const GenerateOptions& o, std::int64_t v) const {
    Stream c(o.seed, kCommunity, std::uint64_t(v));
    return std::int64_t(c.next() % std::uint64_t(slots));
  }
  std::int64_t community(std::int64_t cls, std::int64_t slot) const { return cls * slots + slot; }
  std::int64_t neighbourhood(const GenerateOptions& o, std::int64_t cls, std::int64_t slot) const {
    Stream t(o.seed, kTurn, std::uint64_t(slot));  // where slot's ring of classes starts
    const std::int64_t turn = std::int64_t(t.next() % std::uint64_t(o.classes));
    return slot * runs + (cls + turn) % o.classes / run_len;
  }
};

// One slot of an alias table: it holds its probability and both nodes it can give, so that a
// draw reads one cache line (on a 111 M-node table every read misses, and the draws are most
// of generating a graph).
struct Slot {
  float prob;    // keep `self` with this probability, else give `other`
  NodeId self;   // the item of this slot
  NodeId other;  // the item of its alias
};

// The slots of many alias tables in one allocation, reserved up front (tables point into it)
// and asked to be backed by transparent huge pages: the draws read the tables at random, and
// with 4 KiB pages each read of a GiB-sized table also misses the TLB.
class SlotPool {
 public:
  explicit SlotPool(std::size_t capacity) {
    slots_.reserve(capacity);
    constexpr std::size_t kHuge = std::size_t(2) << 20;
    char* p = reinterpret_cast<char*>(slots_.data());
    const std::size_t bytes = capacity * sizeof(Slot);
    const std::size_t lead = (kHuge - reinterpret_cast<std::uintptr_t>(p) % kHuge) % kHuge;
    if (bytes > lead + kHuge)  // a hint only: whole huge pages inside the allocation
      ::madvise(p + lead, (bytes - lead) / kHuge * kHuge, MADV_HUGEPAGE);
  }
  Slot* take(std::size_t k) {
    if (slots_.size() + k > slots_.capacity()) throw std::logic_error("SlotPool: over capacity");
    slots_.resize(slots_.size() + k);  // within capacity: earlier tables never move
    return slots_.data() + (slots_.size() - k);
  }

 private:
  std::vector<Slot> slots_;
};

// Vose's alias table over items with the given weights, its slots in a pool: O(1) draws.
struct Alias {
  const Slot* slot = nullptr;
  std::size_t size = 0;

  Alias(SlotPool& pool, const std::vector<NodeId>& item, const std::vector<double>& weight) {
    const std::size_t k = item.size();
    std::vector<float> prob(k);
    std::vector<std::size_t> alias(k);
    double total = 0;
    for (NodeId v : item) total += weight[std::size_t(v)];
    std::vector<double> scaled(k);
    std::vector<std::size_t> small, large;
    for (std::size_t i = 0; i < k; ++i) {
      scaled[i] = weight[std::size_t(item[i])] * double(k) / total;
      (scaled[i] < 1 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      const std::size_t s = small.back(), l = large.back();
      small.pop_back();
      prob[s] = float(scaled[s]);
      alias[s] = l;
      scaled[l] -= 1 - scaled[s];
      if (scaled[l] < 1) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (std::size_t i : large) prob[i] = 1, alias[i] = i;
    for (std::size_t i : small) prob[i] = 1, alias[i] = i;
    Slot* out = pool.take(k);
    for (std::size_t i = 0; i < k; ++i) out[i] = {prob[i], item[i], item[alias[i]]};
    slot = out;
    size = k;
  }
  bool empty() const { return size == 0; }
  NodeId draw(Stream& r) const {
    const Slot& s = slot[std::size_t(r.next() % size)];
    return r.uniform() < s.prob ? s.self : s.other;
  }
};

std::int64_t drawn_edges(const GenerateOptions& o) {
  return o.edges > 0 ? o.edges : std::int64_t(std::llround(double(o.nodes) * o.avg_degree / 2));
}

// Bytes a native dataset of these options takes at most while it is written (the CSR counted
// before duplicates merge, and the spilled edges); the OGB text is of the same order.
std::uint64_t dataset_bytes(const GenerateOptions& o) {
  const auto n = std::uint64_t(o.nodes), m = std::uint64_t(drawn_edges(o));
  // The CSR, and the edges spilled while it is built (two ids an edge).
  const std::uint64_t csr = 4 * m * sizeof(NodeId) + (n + 1) * sizeof(EdgeId);
  return csr + n * std::uint64_t(o.features) * sizeof(float) + 2 * n * sizeof(std::int32_t) +
         (1 << 20);  // labels, splits, headers and meta
}

struct Model {
  GenerateOptions o;
  std::int64_t m = 0;
  std::vector<std::int32_t> cls;
  std::vector<double> theta;
  std::vector<float> means;  // classes x features
  Layout layout;
  // The tables: over all nodes, per class and (locality only) per community. An empty
  // community is never drawn from: a same-class draw uses the source's own, and `others`
  // leaves empty ones out. The pools are declared first: the tables point into them.
  SlotPool nodes_pool;   // all, by_class and by_community: about 3 slots a node
  SlotPool others_pool;  // others
  std::unique_ptr<Alias> all;
  std::vector<Alias> by_class;
  std::vector<Alias> by_community;  // its nodes, by theta
  std::vector<Alias> others;  // per community: the other ones of its neighbourhood, by their theta

  explicit Model(const GenerateOptions& opt)
      : o(opt),
        layout(opt),
        nodes_pool(std::size_t(opt.nodes) * (opt.locality > 0 ? 3 : 2) + std::size_t(opt.classes)),
        others_pool(others_slots(opt, layout)) {
    const std::int64_t n = o.nodes;
    m = drawn_edges(o);
    cls.resize(std::size_t(n));
    theta.resize(std::size_t(n));
#pragma omp parallel for schedule(static)
    for (std::int64_t v = 0; v < n; ++v) {
      Stream t(o.seed, kTheta, std::uint64_t(v));
      cls[std::size_t(v)] = class_of(o, v);
      // Pareto(skew) with x_min = 1, capped so one hub cannot take a large share of all edges.
      theta[std::size_t(v)] = std::min(std::pow(1.0 - t.uniform(), -1.0 / (o.skew - 1.0)), 300.0);
    }
    {
      std::vector<NodeId> every(static_cast<std::size_t>(n));
      for (std::int64_t v = 0; v < n; ++v) every[std::size_t(v)] = NodeId(v);
      all = std::make_unique<Alias>(nodes_pool, every, theta);
    }
    std::vector<std::vector<NodeId>> members(static_cast<std::size_t>(o.classes));
    for (std::int64_t v = 0; v < n; ++v)
      members[std::size_t(cls[std::size_t(v)])].push_back(NodeId(v));
    for (auto& mem : members) {
      if (mem.empty()) mem.push_back(0);  // a class nobody drew: fall back to node 0
      by_class.emplace_back(nodes_pool, mem, theta);
      std::vector<NodeId>().swap(mem);  // the table has its own copy
    }
    if (o.locality > 0) build_neighbourhoods();
    means.resize(std::size_t(o.classes * o.features));
    for (std::int64_t c = 0; c < o.classes; ++c) {
      Stream r(o.seed, kMeans, std::uint64_t(c));
      for (std::int64_t k = 0; k < o.features; ++k)
        means[std::size_t(c * o.features + k)] = float(r.normal());
    }
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Community of node v: recomputed from its hash rather than read from a table, since a read
  // of a node-sized table misses the cache on every draw.
  std::size_t community_of(NodeId v) const {
    return std::size_t(layout.community(class_of(o, v), layout.slot_of(o, v)));
  }
  std::int64_t hood_of(std::int64_t c) const {  // the neighbourhood of community c
    return layout.neighbourhood(o, c / layout.slots, c % layout.slots);
  }

  // Slots of all `others` tables: per community, the other communities of its neighbourhood
  // (an upper bound: empty communities are left out of the tables).
  static std::size_t others_slots(const GenerateOptions& o, const Layout& layout) {
    if (layout.slots == 0) return 0;
    std::vector<std::int64_t> size(std::size_t(layout.neighbourhoods()), 0);
    for (std::int64_t c = 0; c < layout.communities(o); ++c)
      ++size[std::size_t(layout.neighbourhood(o, c / layout.slots, c % layout.slots))];
    std::size_t total = 0;
    for (std::int64_t s : size) total += std::size_t(s * s);
    return total;
  }

  void build_neighbourhoods() {
    const std::int64_t n = o.nodes, nc = layout.communities(o);
    std::vector<std::vector<NodeId>> members(static_cast<std::size_t>(nc));
    std::vector<double> mass(static_cast<std::size_t>(nc));
    for (std::int64_t v = 0; v < n; ++v) {  // ascending ids: nothing depends on the threads
      const std::size_t c = community_of(NodeId(v));
      members[c].push_back(NodeId(v));
      mass[c] += theta[std::size_t(v)];
    }
    by_community.reserve(members.size());
    for (auto& mem : members) {
      by_community.emplace_back(nodes_pool, mem, theta);
      std::vector<NodeId>().swap(mem);
    }
    // A draw "in the neighbourhood, outside the source's community" picks one of the other
    // communities by its theta, then a node in it by theta: exactly theta over those nodes,
    // with small tables and no rejection.
    std::vector<std::vector<NodeId>> in_hood(std::size_t(layout.neighbourhoods()));
    for (std::int64_t c = 0; c < nc; ++c)
      if (mass[std::size_t(c)] > 0) in_hood[std::size_t(hood_of(c))].push_back(NodeId(c));
    others.reserve(std::size_t(nc));
    for (std::int64_t c = 0; c < nc; ++c) {
      std::vector<NodeId> rest;
      for (NodeId x : in_hood[std::size_t(hood_of(c))])
        if (x != c) rest.push_back(x);
      others.emplace_back(others_pool, rest, mass);
    }
  }

  // One draw of the partner of u. Without locality only the homophily coin is thrown, exactly
  // as before the knob existed, so those streams and graphs are unchanged.
  NodeId partner(NodeId u, Stream& r) const {
    const bool same = r.uniform() < o.homophily;
    if (!(o.locality > 0)) {
      const auto c = std::size_t(class_of(o, u));
      return same ? by_class[c].draw(r) : all->draw(r);
    }
    const bool local = r.uniform() < o.locality;
    const std::size_t cu = community_of(u);
    if (same)
      return local ? by_community[cu].draw(r) : by_class[cu / std::size_t(layout.slots)].draw(r);
    if (local && !others[cu].empty())  // else a neighbourhood of one community: go global
      return by_community[std::size_t(others[cu].draw(r))].draw(r);
    return all->draw(r);
  }

  // Edges [chunk * kEdgeChunk, ...) into src/dst (cleared first).
  void edges(std::int64_t chunk, std::vector<NodeId>& src, std::vector<NodeId>& dst) const {
    const std::int64_t b = chunk * kEdgeChunk, e = std::min(m, b + kEdgeChunk);
    src.clear();
    dst.clear();
    Stream r(o.seed, kEdges, std::uint64_t(chunk));
    for (std::int64_t i = b; i < e; ++i) {
      const NodeId u = all->draw(r);
      NodeId v = u;
      for (int tries = 0; v == u && tries < 64; ++tries) v = partner(u, r);
      if (v == u) v = NodeId((u + 1) % o.nodes);  // a class of one node: any other node
      src.push_back(u);
      dst.push_back(v);
    }
  }

  void features(std::int64_t v, float* out) const {
    Stream r(o.seed, kFeatures, std::uint64_t(v));
    const float* mu = means.data() + std::size_t(cls[std::size_t(v)]) * std::size_t(o.features);
    for (std::int64_t k = 0; k < o.features; ++k) out[k] = mu[k] + float(o.noise * r.normal());
  }

  int split_of(std::int64_t v) const {  // 0 train, 1 valid, 2 test
    Stream r(o.seed, kSplit, std::uint64_t(v));
    const double u = r.uniform();
    return u < 0.5 ? 0 : u < 0.75 ? 1 : 2;
  }
  std::int64_t edge_chunks() const { return (m + kEdgeChunk - 1) / kEdgeChunk; }
  std::int64_t node_chunks() const { return (o.nodes + kNodeChunk - 1) / kNodeChunk; }
};

// Every real option is finite (DESIGN.md, invariant 7): comparisons alone let inf through
// (inf > 0), and NaN fails every comparison, so each check is written to be false for NaN.
// Sizes are bounded before anything is allocated: a typo must be a one-line error, not an
// allocation of terabytes.
void check(const GenerateOptions& o) {
  if (o.nodes < 2 || o.nodes > kMaxNodes) throw ParamError("--nodes must be in [2, 2^31)");
  if (o.edges < 0 || o.edges > kMaxGeneratedEdges)
    throw ParamError("--edges must be in [1, " + std::to_string(kMaxGeneratedEdges) + "], got " +
                     std::to_string(o.edges));
  if (o.edges == 0 && !(std::isfinite(o.avg_degree) && o.avg_degree > 0))
    throw ParamError("--avg-degree must be a finite number > 0 (or give --edges)");
  if (o.edges == 0 && double(o.nodes) * o.avg_degree / 2 > double(kMaxGeneratedEdges))
    throw ParamError("--avg-degree " + std::to_string(o.avg_degree) + " draws more than " +
                     std::to_string(kMaxGeneratedEdges) + " edges for " + std::to_string(o.nodes) +
                     " nodes");
  if (o.features < 0 || o.features > kMaxGeneratedFeatures)
    throw ParamError("--features must be in [0, " + std::to_string(kMaxGeneratedFeatures) + "]");
  if (o.classes < 1 || o.classes > o.nodes || o.classes > kMaxGeneratedClasses)
    throw ParamError("--classes must be in [1, min(nodes, " + std::to_string(kMaxGeneratedClasses) +
                     ")]");
  if (!(o.homophily >= 0 && o.homophily <= 1)) throw ParamError("--homophily must be in [0, 1]");
  if (!(std::isfinite(o.skew) && o.skew > 1)) throw ParamError("skew must be a finite number > 1");
  if (!(std::isfinite(o.noise) && o.noise >= 0))
    throw ParamError("--noise must be a finite number >= 0");
  if (!(o.locality >= 0 && o.locality <= 1)) throw ParamError("--locality must be in [0, 1]");
  if (o.community_size < 1) throw ParamError("--community-size must be >= 1");
  if (o.neighbourhood_classes < 1) throw ParamError("--neighbourhood-classes must be >= 1");
  // Community ids are int32 per node; only absurd sizes come near the bound.
  if (o.locality > 0 && double(o.nodes) / double(o.community_size) + double(o.classes) >= 2e9)
    throw ParamError("--community-size too small for this many nodes");
  if (o.format != "native" && o.format != "ogb")
    throw ParamError("--format must be native or ogb, not '" + o.format + "'");
}

// The edge chunks are dealt to `groups` contiguous runs, each walked by one thread at a time,
// so that whatever a group counts or places needs no atomics: an atomic add per entry, on a
// cache line that misses, serialises the misses and made the placing pass 2.3x slower.
int edge_groups() { return std::clamp(omp_get_max_threads(), 1, 8); }

// The drawn edges, spilled once to a file (8 bytes an edge, at the edge's place in the stream,
// so chunks are written in any order): the placing passes read them back instead of drawing
// them again, since a draw costs about two cache misses on GiB-sized tables (16 minutes a pass
// at ogbn-papers100M size on 2 cores) and reading 8 bytes back costs little next to that.
class EdgeSpill {
 public:
  EdgeSpill(fs::path path, std::int64_t edges)
      : path_(std::move(path)),
        writer_(std::make_unique<ArrayFileWriter>(path_, DType::kInt32, std::uint64_t(edges), 2)) {}
  ~EdgeSpill() {
    writer_.reset();
    if (fd_ >= 0) ::close(fd_);
    std::error_code ec;
    fs::remove(path_, ec);
  }
  EdgeSpill(const EdgeSpill&) = delete;
  EdgeSpill& operator=(const EdgeSpill&) = delete;

  // Stores chunk c's edges (s[i], t[i]); safe to call from several threads for other chunks.
  void write(std::int64_t c, const std::vector<NodeId>& s, const std::vector<NodeId>& t,
             std::vector<NodeId>& scratch) const {
    scratch.resize(2 * s.size());
    for (std::size_t i = 0; i < s.size(); ++i) scratch[2 * i] = s[i], scratch[2 * i + 1] = t[i];
    writer_->write_rows(std::uint64_t(c * kEdgeChunk), scratch.data(), s.size());
  }
  // Ends the writing: read() may be called from then on.
  void seal() {
    writer_.reset();
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_system(path_, "cannot open");
  }
  // Reads chunk c's `count` edges back into s and t; safe from several threads.
  void read(std::int64_t c, std::int64_t count, std::vector<NodeId>& s, std::vector<NodeId>& t,
            std::vector<NodeId>& scratch) const {
    scratch.resize(std::size_t(2 * count));
    auto* p = reinterpret_cast<char*>(scratch.data());
    std::size_t left = scratch.size() * sizeof(NodeId);
    auto at = off_t(kArrayHeaderBytes + std::uint64_t(c * kEdgeChunk) * 2 * sizeof(NodeId));
    while (left > 0) {
      const ssize_t got = ::pread(fd_, p, left, at);
      if (got <= 0) throw_system(path_, got == 0 ? "unexpected end of file" : "read failed");
      p += got, at += got, left -= std::size_t(got);
    }
    s.resize(std::size_t(count));
    t.resize(std::size_t(count));
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = scratch[2 * i], t[i] = scratch[2 * i + 1];
  }

 private:
  fs::path path_;
  std::unique_ptr<ArrayFileWriter> writer_;
  int fd_ = -1;
};

// Calls place(group, u, v) for every edge of the stream, whose chunk c source(c, s, t, scratch)
// puts in s and t; calls for one group never overlap.
template <class Source, class Fn>
void for_each_edge(const Model& g, int groups, const std::string& label, Source&& source,
                   Fn&& place) {
  const std::int64_t chunks = g.edge_chunks();
  Progress progress(label, std::uint64_t(chunks));
  std::atomic<std::int64_t> done{0};
#pragma omp parallel
  {
    std::vector<NodeId> s, t, scratch;
#pragma omp for schedule(dynamic, 1)
    for (int k = 0; k < groups; ++k)
      for (std::int64_t c = chunks * k / groups; c < chunks * (k + 1) / groups; ++c) {
        source(c, s, t, scratch);
        for (std::size_t i = 0; i < s.size(); ++i) place(k, s[i], t[i]);
        const std::int64_t d = done.fetch_add(1, std::memory_order_relaxed) + 1;
        if (omp_get_thread_num() == 0) progress.update(std::uint64_t(d));
      }
  }
}

// Draws the edge stream once, spilling it, and returns the entries of each row (before
// duplicates merge) that each group draws: group k's count of row r is at [k * n + r]. Each
// drawn edge u-v is an entry of row u and one of row v (never u == v).
std::vector<std::int32_t> group_degrees(const Model& g, int groups, const EdgeSpill& spill) {
  const auto n = std::size_t(g.o.nodes);
  std::vector<std::int32_t> cnt(std::size_t(groups) * n, 0);
  auto draw = [&](std::int64_t c, std::vector<NodeId>& s, std::vector<NodeId>& t,
                  std::vector<NodeId>& scratch) {
    g.edges(c, s, t);
    spill.write(c, s, t, scratch);
  };
  for_each_edge(g, groups, "drawing edges", draw, [&](int k, NodeId u, NodeId v) {
    ++cnt[std::size_t(k) * n + std::size_t(u)];
    ++cnt[std::size_t(k) * n + std::size_t(v)];
  });
  return cnt;
}

// The symmetric CSR (rows sorted, duplicates merged), built without holding the edge list:
// one pass draws the edges, spills them and counts the degrees, then each pass over the
// spilled edges places the entries of the rows whose raw entries fit batch_entries (4 bytes
// each) and writes them out sorted and merged. Memory: 8 + 4 * groups bytes a node and one
// batch, whatever the edge count; disk: 8 bytes an edge while it runs.
// Returns the number of entries written (rows of "indices").
EdgeId write_csr(const Model& g, DatasetWriter& w) {
  const std::int64_t n = g.o.nodes;
  const int groups = edge_groups();
  EdgeSpill spill(w.staging_dir() / ".edges.spill", g.m);  // removed before the commit
  const std::vector<std::int32_t> cnt = group_degrees(g, groups, spill);
  spill.seal();
  std::vector<EdgeId> raw(std::size_t(n + 1), 0);  // offsets before duplicates merge
  for (std::int64_t r = 0; r < n; ++r) {
    EdgeId d = 0;
    for (int k = 0; k < groups; ++k) d += cnt[std::size_t(k * n + r)];
    raw[std::size_t(r + 1)] = raw[std::size_t(r)] + d;
  }
  auto indices = w.open("indices", DType::kInt32, std::uint64_t(raw.back()), 1);
  auto offsets = w.open("offsets", DType::kInt64, std::uint64_t(n + 1), 1);
  const EdgeId zero = 0;
  offsets->write_rows(0, &zero, 1);
  const auto budget = std::max<EdgeId>(1, g.o.batch_entries);
  const auto batches = std::max<EdgeId>(1, (raw.back() + budget - 1) / budget);
  std::vector<NodeId> buf;
  std::vector<EdgeId> cur;  // [k * rows + i]: group k's next slot in row a + i; then offsets
  EdgeId written = 0;
  for (std::int64_t a = 0, pass = 1; a < n; ++pass) {
    // The longest run of rows from a whose entries fit the budget, at least one row.
    const auto it = std::upper_bound(raw.begin() + a + 1, raw.end(), raw[std::size_t(a)] + budget);
    const std::int64_t b = std::max(a + 1, std::int64_t(it - raw.begin()) - 1), rows = b - a;
    const EdgeId base = raw[std::size_t(a)];
    buf.resize(std::size_t(raw[std::size_t(b)] - base));
    cur.resize(std::size_t(groups * rows));
    for (std::int64_t i = 0; i < rows; ++i) {  // group k writes after groups 0..k-1
      EdgeId at = raw[std::size_t(a + i)] - base;
      for (int k = 0; k < groups; ++k) {
        cur[std::size_t(k * rows + i)] = at;
        at += cnt[std::size_t(k * n + a + i)];
      }
    }
    auto put = [&](int k, NodeId row, NodeId col) {
      if (row >= a && row < b) buf[std::size_t(cur[std::size_t(k * rows + row - a)]++)] = col;
    };
    const std::string label = batches > 1 ? "placing edges (pass " + std::to_string(pass) +
                                                " of ~" + std::to_string(batches) + ")"
                                          : "placing edges";
    auto reread = [&](std::int64_t c, std::vector<NodeId>& s, std::vector<NodeId>& t,
                      std::vector<NodeId>& scratch) {
      spill.read(c, std::min(g.m, (c + 1) * kEdgeChunk) - c * kEdgeChunk, s, t, scratch);
    };
    for_each_edge(g, groups, label, reread,
                  [&](int k, NodeId u, NodeId v) { put(k, u, v), put(k, v, u); });
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t r = a; r < b; ++r) {  // sort and merge each row in place
      NodeId* first = buf.data() + (raw[std::size_t(r)] - base);
      NodeId* last = buf.data() + (raw[std::size_t(r) + 1] - base);
      std::sort(first, last);
      cur[std::size_t(r - a)] = std::unique(first, last) - first;  // merged degree
    }
    EdgeId end = 0;  // compact the merged rows to the front; a row never moves right
    for (std::int64_t r = a; r < b; ++r) {
      const EdgeId d = cur[std::size_t(r - a)];
      std::memmove(buf.data() + end, buf.data() + (raw[std::size_t(r)] - base),
                   std::size_t(d) * sizeof(NodeId));
      end += d;
      cur[std::size_t(r - a)] = written + end;  // offsets[r + 1]
    }
    indices->write_rows(std::uint64_t(written), buf.data(), std::uint64_t(end));
    offsets->write_rows(std::uint64_t(a + 1), cur.data(), std::uint64_t(rows));
    written += end;
    a = b;
  }
  indices->shrink_rows(std::uint64_t(written));
  w.record("indices", indices->finish());
  w.record("offsets", offsets->finish());
  return written;
}

void write_native(const Model& g, const fs::path& dir) {
  const auto& o = g.o;
  GraphDataset d;  // the metadata only: arrays are written as they are made
  d.name = printable(dir.filename().string(), 255);  // shown as is: text only
  DatasetWriter w(dir, o.overwrite);
  const EdgeId entries = write_csr(g, w);
  if (o.features > 0) {
    auto out =
        w.open("features", DType::kFloat32, std::uint64_t(o.nodes), std::uint64_t(o.features));
    std::vector<float> buf(static_cast<std::size_t>(kNodeChunk * o.features));
    for (std::int64_t c = 0; c < g.node_chunks(); ++c) {
      const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
#pragma omp parallel for schedule(static)
      for (std::int64_t v = b; v < e; ++v) g.features(v, buf.data() + (v - b) * o.features);
      out->write_rows(std::uint64_t(b), buf.data(), std::uint64_t(e - b));
    }
    w.record("features", out->finish());
    d.num_features = o.features;
  }
  d.label_cols = 1;
  d.label_kind = LabelKind::kMulticlass;
  d.num_classes = o.classes;
  w.put("labels", g.cls.data(), std::uint64_t(o.nodes));
  Split sp;
  sp.name = "random";
  std::vector<NodeId> parts[3];
  for (std::int64_t v = 0; v < o.nodes; ++v) parts[g.split_of(v)].push_back(NodeId(v));
  sp.train = Array<NodeId>(std::move(parts[0]));
  sp.valid = Array<NodeId>(std::move(parts[1]));
  sp.test = Array<NodeId>(std::move(parts[2]));
  w.put("split.random.train", sp.train);
  w.put("split.random.valid", sp.valid);
  w.put("split.random.test", sp.test);
  d.splits.push_back(std::move(sp));
  nlohmann::json meta = graph_meta(d);
  meta["nodes"] = o.nodes;  // d holds no graph
  meta["edges"] = entries;
  meta["source"] = {{"format", "generate"},
                    {"seed", o.seed},
                    {"edges_drawn", g.m},
                    {"homophily", o.homophily},
                    {"noise", o.noise}};
  if (o.locality > 0) {  // only with the knob: without it meta.json stays byte for byte the same
    meta["source"]["locality"] = o.locality;
    meta["source"]["community_size"] = o.community_size;
    meta["source"]["neighbourhood_classes"] = g.layout.run_len;
    meta["source"]["communities"] = g.layout.communities(o);
    meta["source"]["neighbourhoods"] = g.layout.neighbourhoods();
  }
  w.commit(std::move(meta));
}

char* put_int(char* p, std::int64_t v) { return std::to_chars(p, p + 24, v).ptr; }

// One gzip text file whose blocks are made by make_block(i, text) for i in [0, blocks).
template <class Fn>
void write_gz(const fs::path& path, std::int64_t blocks, Fn&& make_block, const char* label) {
  GzipWriter gz(path);
  Progress progress(label, std::uint64_t(blocks));
  const std::int64_t group = 8;  // blocks in flight: bounds memory at ~8 blocks of text
  for (std::int64_t g0 = 0; g0 < blocks; g0 += group) {
    const std::int64_t g1 = std::min(blocks, g0 + group);
    std::vector<std::string> text(static_cast<std::size_t>(g1 - g0));
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = g0; i < g1; ++i) make_block(i, text[std::size_t(i - g0)]);
    gz.write_blocks(text);
    progress.update(std::uint64_t(g1));
  }
  gz.close();
}

void write_ogb(const Model& g, const fs::path& dir) {
  const auto& o = g.o;
  StagingDir stage(dir, "ogb", o.overwrite);
  const fs::path raw = stage.path() / "raw";
  const fs::path split = stage.path() / "split" / "random";
  fs::create_directories(raw);
  fs::create_directories(split);
  auto one_number = [](std::int64_t v) {
    return [v](std::int64_t, std::string& s) { s = std::to_string(v) + "\n"; };
  };
  write_gz(raw / "num-node-list.csv.gz", 1, one_number(o.nodes), "");
  write_gz(raw / "num-edge-list.csv.gz", 1, one_number(g.m), "");
  write_gz(
      raw / "edge.csv.gz", g.edge_chunks(),
      [&](std::int64_t c, std::string& s) {
        std::vector<NodeId> src, dst;
        g.edges(c, src, dst);
        s.resize(src.size() * 24);
        char* p = s.data();
        for (std::size_t i = 0; i < src.size(); ++i) {
          p = put_int(p, src[i]);
          *p++ = ',';
          p = put_int(p, dst[i]);
          *p++ = '\n';
        }
        s.resize(std::size_t(p - s.data()));
      },
      "writing edges");
  if (o.features > 0)
    write_gz(
        raw / "node-feat.csv.gz", g.node_chunks(),
        [&](std::int64_t c, std::string& s) {
          const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
          std::vector<float> x(static_cast<std::size_t>(o.features));
          s.resize(std::size_t((e - b) * o.features * 16));
          char* p = s.data();
          for (std::int64_t v = b; v < e; ++v) {
            g.features(v, x.data());
            for (std::int64_t k = 0; k < o.features; ++k) {
              if (k) *p++ = ',';
              p = std::to_chars(p, p + 16, x[std::size_t(k)], std::chars_format::fixed, 5).ptr;
            }
            *p++ = '\n';
          }
          s.resize(std::size_t(p - s.data()));
        },
        "writing features");
  write_gz(
      raw / "node-label.csv.gz", g.node_chunks(),
      [&](std::int64_t c, std::string& s) {
        const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
        for (std::int64_t v = b; v < e; ++v) (s += std::to_string(g.cls[std::size_t(v)])) += '\n';
      },
      "");
  const char* names[3] = {"train", "valid", "test"};
  for (int part = 0; part < 3; ++part)
    write_gz(
        split / (std::string(names[part]) + ".csv.gz"), g.node_chunks(),
        [&](std::int64_t c, std::string& s) {
          const std::int64_t b = c * kNodeChunk, e = std::min(o.nodes, b + kNodeChunk);
          for (std::int64_t v = b; v < e; ++v)
            if (g.split_of(v) == part) (s += std::to_string(v)) += '\n';
        },
        "");
  stage.commit();
}

}  // namespace

std::int64_t generated_neighbourhoods(const GenerateOptions& options) {
  check(options);
  return Layout(options).neighbourhoods();
}

GeneratedPlace generated_place(const GenerateOptions& options, std::int64_t v) {
  check(options);
  if (v < 0 || v >= options.nodes) throw ParamError("node id out of range [0, nodes)");
  GeneratedPlace p;
  p.cls = class_of(options, v);
  const Layout layout(options);
  if (layout.slots > 0) {
    const std::int64_t slot = layout.slot_of(options, v);
    p.community = layout.community(p.cls, slot);
    p.neighbourhood = layout.neighbourhood(options, p.cls, slot);
  }
  return p;
}

GenerateReport generate(const fs::path& dir, const GenerateOptions& options) {
  Stopwatch clock;
  check(options);
  resolve_dir_output(dir, options.format == "ogb" ? "ogb" : "halo-dataset",
                     options.overwrite);  // before the work
  check_free_space(dir, dataset_bytes(options), "this graph");
  const Model g(options);
  if (options.format == "ogb")
    write_ogb(g, dir);
  else
    write_native(g, dir);
  return {options.nodes, g.m, g.layout.neighbourhoods(), clock.seconds()};
}

}  // namespace halo

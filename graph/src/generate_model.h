// The generator's model, held by Model (its alias tables) for generate.cc, which checks the options
// and writes the graph. Private to graph/src; an algorithm in a header beside its runner.
//
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
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "halo/graph/generate.h"
#include "halo/graph/types.h"

namespace halo::generate_model {

constexpr std::int64_t kEdgeChunk = 1 << 20;
constexpr std::int64_t kNodeChunk = 1 << 14;

inline std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
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

inline std::int32_t class_of(const GenerateOptions& o, std::int64_t v) {
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

inline std::int64_t drawn_edges(const GenerateOptions& o) {
  return o.edges > 0 ? o.edges : std::int64_t(std::llround(double(o.nodes) * o.avg_degree / 2));
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

}  // namespace halo::generate_model

// --method ptscotch, the rounds in which the parts' rows move to the ranks that write them (the
// method and its protocol are described in ptscotch.cc): in round j each rank packs the rows of
// its slice that part j * P + w owns for rank w, one all-to-all moves each field, and rank w
// builds its part's halo lists from the rows it received. Compiled only with PT-Scotch (MPI).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "halo/graph/error.h"
#include "halo/partition/parts.h"
#include "ptscotch_internal.h"

namespace halo {
using namespace ptscotch_internal;

namespace {

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  if constexpr (std::is_same_v<T, std::uint8_t>) return MPI_UINT8_T;
  if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  static_assert(std::is_same_v<T, std::int32_t> || std::is_same_v<T, float> ||
                std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int64_t>);
  return MPI_INT32_T;
}

// One all-to-all of a stream: out[w] goes to rank w; returns what every rank sent this one,
// concatenated in rank order. MPI counts are ints: more than 2^31 - 1 elements to or from one
// rank in one round is refused on every rank (more ranks make smaller rounds), as is a failed
// allocation, through agreed().
template <class T>
std::vector<T> exchange(const Job& job, const std::vector<std::vector<T> >& out, const char* what) {
  const auto ranks = std::size_t(job.size);
  std::vector<std::int64_t> sc64(ranks), rc64(ranks);
  for (std::size_t w = 0; w < ranks; ++w) sc64[w] = std::int64_t(out[w].size());
  HALO_MPI(MPI_Alltoall(sc64.data(), 1, MPI_INT64_T, rc64.data(), 1, MPI_INT64_T, job.comm));
  std::vector<int> sc(ranks), sd(ranks), rc(ranks), rd(ranks);
  std::vector<T> send, in;
  agreed(job, [&] {
    std::int64_t sent = 0, got = 0;
    for (std::size_t w = 0; w < ranks; ++w) {
      sd[w] = int(std::min<std::int64_t>(sent, INT_MAX));
      rd[w] = int(std::min<std::int64_t>(got, INT_MAX));
      sc[w] = int(std::min<std::int64_t>(sc64[w], INT_MAX));
      rc[w] = int(std::min<std::int64_t>(rc64[w], INT_MAX));
      sent += sc64[w];
      got += rc64[w];
    }
    if (std::max(sent, got) > INT_MAX)
      throw ParamError(std::string("--method ptscotch: one rank's ") + what + " in one round (" +
                       std::to_string(std::max(sent, got)) +
                       " entries) pass MPI's 2^31 - 1; run more ranks");
    send.reserve(std::size_t(sent));
    for (const auto& v : out) send.insert(send.end(), v.begin(), v.end());
    in.resize(std::size_t(got));
  });
  HALO_MPI(MPI_Alltoallv(send.data(), sc.data(), sd.data(), mpi_type<T>(), in.data(), rc.data(),
                         rd.data(), mpi_type<T>(), job.comm));
  return in;
}

}  // namespace

namespace ptscotch_internal {

// Each row's split membership (1 train, 2 valid, 4 test, one byte per split) for rows [b, e):
// every rank reads the split lists (node ids) and keeps the entries of its rows.
std::vector<std::uint8_t> split_flags(const GraphDataset& d, std::int64_t b, std::int64_t e) {
  const std::size_t ns = d.splits.size();
  std::vector<std::uint8_t> flags(std::size_t(e - b) * ns, 0);
  for (std::size_t s = 0; s < ns; ++s)
    for (const auto& [ids, bit] : {std::pair<const Array<NodeId>*, int>{&d.splits[s].train, 1},
                                   {&d.splits[s].valid, 2},
                                   {&d.splits[s].test, 4}})
      for (NodeId v : *ids)
        if (v >= b && v < e) flags[std::size_t(v - b) * ns + s] |= std::uint8_t(bit);
  return flags;
}

// What this rank sends in round `round` (Outgoing, ptscotch_internal.h, says what and why).
Outgoing pack_round(const Job& job, const GraphDataset& d, const std::vector<PartId>& owner,
                    const std::vector<std::uint8_t>& flags, std::int64_t b, std::int64_t e,
                    int round, int k) {
  const auto ranks = std::size_t(job.size);
  const PartId first = PartId(round * job.size);
  auto dest = [&](PartId p) { return p >= first && p - first < job.size && p < k; };
  const CsrView g = d.graph.view();
  const auto f = std::size_t(d.num_features), c = std::size_t(d.label_cols);
  const std::size_t ns = d.splits.size();
  Outgoing o;
  for (auto* v : {&o.ids, &o.lens, &o.cols, &o.halo, &o.hdeg}) v->resize(ranks);
  o.vals.resize(ranks);
  o.feats.resize(ranks);
  o.labs.resize(ranks);
  o.spl.resize(ranks);
  auto &ids = o.ids, &lens = o.lens, &cols = o.cols, &halo = o.halo, &hdeg = o.hdeg;
  auto &vals = o.vals, &feats = o.feats;
  auto& labs = o.labs;
  auto& spl = o.spl;
  std::vector<std::int64_t> seen(std::size_t(k), -1);  // seen[q]: the last row sent to q's halo
  for (std::int64_t u = b; u < e; ++u) {
    const PartId p = owner[std::size_t(u)];
    const auto deg = NodeId(g.degree(NodeId(u)));
    for (const NodeId* w = g.begin(NodeId(u)); w != g.end(NodeId(u)); ++w) {
      const PartId q = owner[std::size_t(*w)];
      if (q == p || !dest(q) || seen[std::size_t(q)] == u) continue;
      seen[std::size_t(q)] = u;
      halo[std::size_t(q - first)].push_back(NodeId(u));
      hdeg[std::size_t(q - first)].push_back(deg);
    }
    if (!dest(p)) continue;
    const auto to = std::size_t(p - first);
    ids[to].push_back(NodeId(u));
    lens[to].push_back(deg);
    cols[to].insert(cols[to].end(), g.begin(NodeId(u)), g.end(NodeId(u)));
    if (g.values)
      vals[to].insert(vals[to].end(), g.values + g.offsets[u], g.values + g.offsets[u + 1]);
    const std::size_t i = std::size_t(u);
    feats[to].insert(feats[to].end(), d.features.data() + i * f, d.features.data() + (i + 1) * f);
    labs[to].insert(labs[to].end(), d.labels.data() + i * c, d.labels.data() + (i + 1) * c);
    const std::size_t at = std::size_t(u - b) * ns;
    spl[to].insert(spl[to].end(), flags.begin() + std::ptrdiff_t(at),
                   flags.begin() + std::ptrdiff_t(at + ns));
  }
  // The slice is read again next round from the page cache: drop it from this process.
  d.features.release(std::size_t(b) * f, std::size_t(e) * f);
  d.graph.indices.release(std::size_t(g.offsets[b]), std::size_t(g.offsets[e]));
  return o;
}

// The rows every rank packed for this one (pack_round), in slice order, so in increasing id.
// Collective. Each stream is freed once sent.
PartRows exchange_round(const Job& job, Outgoing o) {
  auto sent = [&](auto& v, const char* what) {
    auto in = exchange(job, v, what);
    std::remove_reference_t<decltype(v)>().swap(v);
    return in;
  };
  PartRows r;
  r.ids = sent(o.ids, "rows");
  const std::vector<NodeId> len = sent(o.lens, "rows");
  r.offsets.assign(len.size() + 1, 0);
  for (std::size_t i = 0; i < len.size(); ++i) r.offsets[i + 1] = r.offsets[i] + len[i];
  r.indices = sent(o.cols, "edges");
  r.values = sent(o.vals, "edge weights");
  r.features = sent(o.feats, "features");
  r.labels = sent(o.labs, "labels");
  r.splits = sent(o.spl, "split flags");
  r.halo_ids = sent(o.halo, "halo rows");
  r.halo_degree = sent(o.hdeg, "halo rows");
  return r;
}

// Part p's halo lists from its gathered rows: the graph is symmetric, so the nodes of p that a
// part q needs are p's nodes with a neighbour in q. Fills owned[p], num_inner[p], needs[p][*]
// and needs[*][p] as find_partition_halos does; build_halo_plan for p reads nothing else.
PartitionHalos halos_of_part(const PartRows& r, const std::vector<PartId>& owner, PartId p, int k) {
  PartitionHalos h;
  h.k = k;
  h.num_nodes = std::int64_t(owner.size());
  h.owned.assign(std::size_t(k), {});
  h.num_inner.assign(std::size_t(k), 0);
  h.needs.assign(std::size_t(k), std::vector<std::vector<NodeId> >(std::size_t(k)));
  const CsrView g = r.view();
  std::vector<std::uint8_t> boundary(r.ids.size(), 0);
  std::vector<std::int64_t> seen_at(std::size_t(k), -1);  // the last row with a neighbour in q
  auto& mine = h.needs[std::size_t(p)];
  for (std::size_t i = 0; i < r.ids.size(); ++i)
    for (const NodeId* w = g.begin(NodeId(i)); w != g.end(NodeId(i)); ++w) {
      const PartId q = owner[std::size_t(*w)];
      if (q == p) continue;
      boundary[i] = 1;
      mine[std::size_t(q)].push_back(*w);  // sorted and deduplicated below
      if (seen_at[std::size_t(q)] != std::int64_t(i)) {
        seen_at[std::size_t(q)] = std::int64_t(i);
        h.needs[std::size_t(q)][std::size_t(p)].push_back(r.ids[i]);  // in id order already
      }
    }
  for (std::uint8_t pass = 0; pass < 2; ++pass)  // inner nodes first, then boundary, by id
    for (std::size_t i = 0; i < r.ids.size(); ++i)
      if (boundary[i] == pass) h.owned[std::size_t(p)].push_back(r.ids[i]);
  h.num_inner[std::size_t(p)] =
      std::int64_t(std::count(boundary.begin(), boundary.end(), std::uint8_t(0)));
  for (auto& list : mine) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return h;
}

}  // namespace ptscotch_internal
}  // namespace halo

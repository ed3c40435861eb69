// METIS through its C API, options mapped one to one. The CSR goes in without a copy of the
// index array (halo's int32 ids are METIS's idx_t in Debian's 32-bit build); only the int64
// offsets are narrowed.
#include <metis.h>

#include <cmath>
#include <limits>

#include "halo/graph/algorithms.h"
#include "halo/graph/error.h"
#include "halo/partition/partition.h"

namespace halo {

static_assert(sizeof(idx_t) == sizeof(NodeId), "METIS must be built with 32-bit idx_t");

namespace {

// Refuses what METIS cannot take, each with the flag or conversion that fixes it.
void check_metis_input(const GraphDataset& d, const CsrView& g, const PartitionOptions& o) {
  if (g.num_edges() > std::numeric_limits<idx_t>::max())
    throw ParamError(
        "graph has " + std::to_string(g.num_edges()) +
        " stored edges, more than METIS's 32-bit idx_t can index; use --method fennel");
  if (d.directed) throw ParamError("METIS needs an undirected graph (convert without --directed)");
  if (o.contiguous) {  // METIS would print its own message and fail with METIS_ERROR
    std::int64_t components = 0;
    connected_components(g, false, &components);
    if (components > 1)
      throw ParamError("--contiguous needs a connected graph; this one has " +
                       std::to_string(components) + " connected components");
  }
}

// Vertex weights, one constraint per --balance key (empty: METIS's unit weights); sets *ncon.
std::vector<idx_t> vertex_weights(const GraphDataset& d, const CsrView& g,
                                  const PartitionOptions& o, int* ncon_out) {
  const std::int64_t n = g.num_nodes;
  std::vector<std::string> keys;
  for (std::size_t s = 0; s <= o.balance.size();) {
    const std::size_t e = std::min(o.balance.find(',', s), o.balance.size());
    keys.push_back(o.balance.substr(s, e - s));
    s = e + 1;
  }
  const Split* split = choose_split(d, o.split);
  int ncon = 0;
  for (const auto& key : keys) ncon += key == "weights" ? std::max(d.ncon, 0) : 1;
  std::vector<idx_t> vwgt;
  const bool only_nodes = keys.size() == 1 && keys[0] == "nodes";
  if (!only_nodes) {
    vwgt.assign(std::size_t(n) * std::size_t(ncon), 0);
    int c = 0;
    for (const auto& key : keys) {
      if (key == "nodes") {
        for (std::int64_t v = 0; v < n; ++v) vwgt[std::size_t(v * ncon + c)] = 1;
        ++c;
      } else if (key == "edges") {
        for (std::int64_t v = 0; v < n; ++v)
          vwgt[std::size_t(v * ncon + c)] = idx_t(g.degree(NodeId(v)));
        ++c;
      } else if (key == "train") {
        if (!split || split->train.empty())
          throw ParamError("--balance train needs a split with training nodes");
        for (NodeId v : split->train) vwgt[std::size_t(v) * std::size_t(ncon) + std::size_t(c)] = 1;
        ++c;
      } else {  // weights: the dataset's own vertex weights (METIS input files)
        if (d.ncon == 0) throw ParamError("--balance weights: the dataset has no vertex weights");
        for (std::int64_t v = 0; v < n; ++v)
          for (int j = 0; j < d.ncon; ++j)
            vwgt[std::size_t(v * ncon + c + j)] = d.node_weights[std::size_t(v * d.ncon + j)];
        c += d.ncon;
      }
    }
  } else {
    ncon = 1;
  }
  *ncon_out = ncon;
  return vwgt;
}

// Edge weights rounded to METIS's integers, at least 1 (empty for an unweighted graph).
std::vector<idx_t> edge_weights(const CsrView& g) {
  std::vector<idx_t> adjwgt;
  if (g.values) {
    adjwgt.resize(std::size_t(g.num_edges()));
    for (EdgeId e = 0; e < g.num_edges(); ++e)
      adjwgt[std::size_t(e)] = idx_t(std::max(1.0, std::round(double(g.values[e]))));
  }
  return adjwgt;
}

// --part-weights as METIS's target fractions, the same for every constraint (empty: equal parts).
std::vector<real_t> target_weights(const PartitionOptions& o, int ncon) {
  std::vector<real_t> tpwgts;
  if (!o.part_weights.empty()) {
    const std::vector<double> t = o.targets();
    tpwgts.resize(std::size_t(o.k) * std::size_t(ncon));
    for (int p = 0; p < o.k; ++p)
      for (int c = 0; c < ncon; ++c)
        tpwgts[std::size_t(p) * std::size_t(ncon) + std::size_t(c)] = real_t(t[std::size_t(p)]);
  }
  return tpwgts;
}

}  // namespace

std::vector<PartId> partition_metis(const GraphDataset& d, const PartitionOptions& o,
                                    MetisPtype* scheme) {
  const CsrView g = d.graph.view();
  const std::int64_t n = g.num_nodes;
  check_metis_input(d, g, o);
  int ncon = 0;
  std::vector<idx_t> vwgt = vertex_weights(d, g, o, &ncon);
  std::vector<idx_t> xadj(std::size_t(n) + 1);
  for (std::int64_t v = 0; v <= n; ++v) xadj[std::size_t(v)] = idx_t(g.offsets[v]);
  std::vector<idx_t> adjwgt = edge_weights(g);
  std::vector<real_t> tpwgts = target_weights(o, ncon);

  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_OBJTYPE] =
      o.objective == MetisObjective::kVol ? METIS_OBJTYPE_VOL : METIS_OBJTYPE_CUT;
  // Left at -1 without --seed: METIS then uses its own fixed seed, as gpmetis does.
  if (o.seed) options[METIS_OPTION_SEED] = idx_t(*o.seed);
  options[METIS_OPTION_NUMBERING] = 0;
  if (o.ufactor >= 0) options[METIS_OPTION_UFACTOR] = o.ufactor;
  if (o.contiguous) options[METIS_OPTION_CONTIG] = 1;

  const std::vector<MetisPtype> schemes = o.metis_ptypes();
  if (scheme) *scheme = schemes.front();
  if (o.k == 1) return std::vector<PartId>(std::size_t(n), 0);  // METIS rejects nparts = 1
  // METIS reads but never writes adjncy; the mapped dataset is read-only, so a write would fault.
  idx_t* adjncy = const_cast<idx_t*>(g.indices);
  std::vector<idx_t> part(std::size_t(n), 0), best;
  idx_t best_cut = 0;
  for (const MetisPtype ptype : schemes) {
    idx_t nvtxs = idx_t(n), nc = idx_t(ncon), nparts = idx_t(o.k), objval = 0;
    auto* const call = ptype == MetisPtype::kRb ? METIS_PartGraphRecursive : METIS_PartGraphKway;
    const int rc =
        call(&nvtxs, &nc, xadj.data(), adjncy, vwgt.empty() ? nullptr : vwgt.data(), nullptr,
             adjwgt.empty() ? nullptr : adjwgt.data(), &nparts,
             tpwgts.empty() ? nullptr : tpwgts.data(), nullptr, options, &objval, part.data());
    if (rc == METIS_ERROR_INPUT) throw ParamError("METIS rejected the input (METIS_ERROR_INPUT)");
    if (rc == METIS_ERROR_MEMORY) throw SystemError("METIS ran out of memory (METIS_ERROR_MEMORY)");
    if (rc != METIS_OK) throw SystemError("METIS failed (" + std::to_string(rc) + ")");
    if (best.empty() || objval < best_cut) {  // strictly lower: the first scheme wins ties
      best.swap(part);
      part.resize(std::size_t(n));
      best_cut = objval;
      if (scheme) *scheme = ptype;
    }
  }
  return std::vector<PartId>(best.begin(), best.end());
}

}  // namespace halo

// Partition quality from scratch: one pass over the stored edges.
#include "halo/partition/quality.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace halo {
using json = nlohmann::json;

Quality measure_partition(const CsrView& g, bool directed, const std::vector<PartId>& owner, int k,
                          const Split* split, const std::vector<double>& targets) {
  const std::int64_t n = g.num_nodes;
  Quality q;
  q.k = k;
  q.parts.assign(std::size_t(k), PartStats{});
  for (auto& p : q.parts) {
    p.recv.assign(std::size_t(k), 0);
    p.send.assign(std::size_t(k), 0);
  }
  std::int64_t crossing = 0;
  // halo_seen[w] = last part that counted w as a halo row; peer_seen[p] = last node that
  // counted part p among its neighbours' parts.
  std::vector<PartId> halo_seen(std::size_t(n), -1);
  std::vector<std::int64_t> peer_seen(std::size_t(k), -1);
  // Nodes of part p in id order let each part mark its halo rows in one sweep.
  std::vector<std::vector<NodeId>> members(static_cast<std::size_t>(k));
  for (std::int64_t v = 0; v < n; ++v)
    members[std::size_t(owner[std::size_t(v)])].push_back(NodeId(v));
  for (int p = 0; p < k; ++p) {
    PartStats& s = q.parts[std::size_t(p)];
    for (NodeId u : members[std::size_t(p)]) {
      ++s.nodes;
      s.local_edges += g.degree(u);
      bool inner = true;
      for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
        const NodeId w = g.indices[e];
        const PartId pw = owner[std::size_t(w)];
        if (pw == p) continue;
        inner = false;
        ++crossing;
        if (halo_seen[std::size_t(w)] != p) {  // first time part p needs w
          halo_seen[std::size_t(w)] = PartId(p);
          ++s.halo;
          ++s.recv[std::size_t(pw)];
          ++q.parts[std::size_t(pw)].send[std::size_t(p)];
        }
        if (peer_seen[std::size_t(pw)] != u) {  // first neighbour of u in part pw
          peer_seen[std::size_t(pw)] = u;
          ++q.comm_volume;
        }
      }
      s.inner += inner;
    }
  }
  q.edge_cut = directed ? crossing : crossing / 2;
  finish_quality(q, owner, split, targets);
  return q;
}

void finish_quality(Quality& q, const std::vector<PartId>& owner, const Split* split,
                    const std::vector<double>& targets) {
  const int k = q.k;
  const auto n = std::int64_t(owner.size());
  if (split) {
    for (NodeId v : split->train) ++q.parts[std::size_t(owner[std::size_t(v)])].train;
    for (NodeId v : split->valid) ++q.parts[std::size_t(owner[std::size_t(v)])].valid;
    for (NodeId v : split->test) ++q.parts[std::size_t(owner[std::size_t(v)])].test;
  }
  auto balance = [&](auto field) {
    double mx = 0, sum = 0;
    for (const auto& p : q.parts) {
      mx = std::max(mx, double(field(p)));
      sum += double(field(p));
    }
    return sum > 0 ? mx / (sum / k) : 0.0;
  };
  q.node_balance = balance([](const PartStats& p) { return p.nodes; });
  q.edge_balance = balance([](const PartStats& p) { return p.local_edges; });
  q.train_balance = balance([](const PartStats& p) { return p.train; });
  for (int p = 0; p < k; ++p) {
    q.parts[std::size_t(p)].share = n ? double(q.parts[std::size_t(p)].nodes) / double(n) : 0;
    q.parts[std::size_t(p)].target = targets.empty() ? 1.0 / k : targets[std::size_t(p)];
  }
}

json quality_json(const Quality& q) {
  json parts = json::array();
  for (std::size_t r = 0; r < q.parts.size(); ++r) {
    const PartStats& p = q.parts[r];
    parts.push_back({{"rank", r},
                     {"nodes", p.nodes},
                     {"inner", p.inner},
                     {"boundary", p.nodes - p.inner},
                     {"local_edges", p.local_edges},
                     {"halo", p.halo},
                     {"train", p.train},
                     {"valid", p.valid},
                     {"test", p.test},
                     {"send", p.send},
                     {"recv", p.recv},
                     {"share", p.share},
                     {"target", p.target}});
  }
  return {{"k", q.k},
          {"edge_cut", q.edge_cut},
          {"comm_volume", q.comm_volume},
          {"balance",
           {{"nodes", q.node_balance}, {"edges", q.edge_balance}, {"train", q.train_balance}}},
          {"parts", parts}};
}

std::string format_quality(const json& q) {
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line, "%4s %10s %10s %12s %10s %10s %8s %8s\n", "part", "nodes",
                "boundary", "local edges", "halo", "train", "share", "target");
  o << line;
  for (const auto& p : q["parts"]) {
    std::snprintf(line, sizeof line, "%4d %10lld %10lld %12lld %10lld %10lld %7.2f%% %7.2f%%\n",
                  p["rank"].get<int>(), p["nodes"].get<long long>(), p["boundary"].get<long long>(),
                  p["local_edges"].get<long long>(), p["halo"].get<long long>(),
                  p["train"].get<long long>(), 100 * p["share"].get<double>(),
                  100 * p["target"].get<double>());
    o << line;
  }
  std::snprintf(line, sizeof line,
                "edge cut %lld, communication volume %lld, balance (max/mean) nodes %.3f, edges "
                "%.3f, train %.3f\n",
                q["edge_cut"].get<long long>(), q["comm_volume"].get<long long>(),
                q["balance"]["nodes"].get<double>(), q["balance"]["edges"].get<double>(),
                q["balance"]["train"].get<double>());
  o << line;
  return o.str();
}

}  // namespace halo

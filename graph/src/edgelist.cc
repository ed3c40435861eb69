// Plain edge lists: "u v" or "u v w" per line, blanks or commas between fields.
#include <algorithm>

#include "halo/graph/formats.h"
#include "halo/graph/text.h"

namespace halo {

std::int64_t count_distinct_ids(const std::vector<NodeId>& a, const std::vector<NodeId>& b,
                                std::int64_t n) {
  std::vector<bool> seen(std::size_t(std::max<std::int64_t>(n, 0)));  // n / 8 bytes
  std::int64_t used = 0;
  for (const auto* ids : {&a, &b})
    for (const NodeId v : *ids)
      if (v >= 0 && v < n && !seen[std::size_t(v)]) {
        seen[std::size_t(v)] = true;
        ++used;
      }
  return used;
}

void check_id_density(const std::filesystem::path& path, std::int64_t line, std::int64_t shown_id,
                      std::int64_t nodes, std::int64_t used, const char* allow) {
  if (nodes <= kSparseIdsFloor || nodes <= kSparseIdsRatio * used) return;
  throw_input(path, line,
              "node id " + std::to_string(shown_id) + " makes " + std::to_string(nodes) +
                  " nodes, but only " + std::to_string(used) + " distinct ids appear (more than " +
                  std::to_string(kSparseIdsRatio) + "x: a stray id?); " + allow);
}

GraphDataset read_edge_list(const std::filesystem::path& path, const EdgeListOptions& opt) {
  if (opt.num_nodes < 0 || opt.num_nodes > kMaxNodes)
    throw ParamError("--num-nodes must be in [1, " + std::to_string(kMaxNodes) + "], got " +
                     std::to_string(opt.num_nodes));
  EdgeList edges;
  const std::int64_t base = opt.one_based ? 1 : 0;
  const std::int64_t limit = opt.num_nodes > 0 ? opt.num_nodes : kMaxNodes;
  int columns = 0;  // fixed by the first edge line: 2 (unweighted) or 3 (weighted)
  std::int64_t max_id = -1, max_line = 0;
  for_each_line(
      path,
      [&](LineCursor& c) {
        if (c.blank() || c.starts_with_any("#%")) return;
        if (columns == 0) {
          columns = c.count_fields();
          if (columns != 2 && columns != 3)
            c.fail("expected 2 columns (src dst) or 3 (src dst weight), found " +
                   std::to_string(columns));
        }
        std::int64_t ids[2];
        for (int k = 0; k < 2; ++k) {
          const std::int64_t v = c.next_int(k == 0 ? "source id" : "destination id") - base;
          if (v < 0 || v >= limit)
            c.fail("node id " + std::to_string(v + base) + " out of range [" +
                   std::to_string(base) + ", " + std::to_string(limit - 1 + base) + "]" +
                   (opt.num_nodes > 0 ? " given by --num-nodes" : ""));
          ids[k] = v;
        }
        if (columns == 3) edges.weight.push_back(c.next_float("edge weight"));
        c.expect_end(columns);
        edges.src.push_back(NodeId(ids[0]));
        edges.dst.push_back(NodeId(ids[1]));
        if (std::max(ids[0], ids[1]) > max_id) {
          max_id = std::max(ids[0], ids[1]);
          max_line = c.line();
        }
      },
      "reading edge list", InputKind::kStream);  // named on the command line
  // Without --num-nodes the largest id sizes the graph: check that the ids were meant as a
  // dense range before the CSR allocates 8 bytes per node.
  if (opt.num_nodes == 0 && !opt.allow_sparse_ids)
    check_id_density(path, max_line, max_id + base, max_id + 1,
                     count_distinct_ids(edges.src, edges.dst, max_id + 1),
                     "pass --num-nodes N to size the graph, or --allow-sparse-ids to keep the ids");
  edges.num_nodes = opt.num_nodes > 0 ? opt.num_nodes : max_id + 1;
  GraphDataset d;
  d.name = printable(path.stem().string(), 255);  // shown as is: text only
  d.directed = opt.directed;
  d.graph = build_csr(std::move(edges), {.symmetrize = !opt.directed});
  return d;
}

}  // namespace halo

// Plain edge lists: "u v" or "u v w" per line, blanks or commas between fields.
#include <algorithm>

#include "halo/graph/formats.h"
#include "halo/graph/text.h"

namespace halo {

GraphDataset read_edge_list(const std::filesystem::path& path, const EdgeListOptions& opt) {
  EdgeList edges;
  const std::int64_t base = opt.one_based ? 1 : 0;
  const std::int64_t limit = opt.num_nodes > 0 ? opt.num_nodes : kMaxNodes;
  int columns = 0;  // fixed by the first edge line: 2 (unweighted) or 3 (weighted)
  std::int64_t max_id = -1;
  for_each_line(path, [&](LineCursor& c) {
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
        c.fail("node id " + std::to_string(v + base) + " out of range [" + std::to_string(base) +
               ", " + std::to_string(limit - 1 + base) + "]");
      ids[k] = v;
    }
    if (columns == 3) edges.weight.push_back(c.next_float("edge weight"));
    c.expect_end(columns);
    edges.src.push_back(NodeId(ids[0]));
    edges.dst.push_back(NodeId(ids[1]));
    max_id = std::max({max_id, ids[0], ids[1]});
  }, "reading edge list");
  edges.num_nodes = opt.num_nodes > 0 ? opt.num_nodes : max_id + 1;
  GraphDataset d;
  d.name = path.stem().string();
  d.directed = opt.directed;
  d.graph = build_csr(std::move(edges), {.symmetrize = !opt.directed});
  return d;
}

}  // namespace halo

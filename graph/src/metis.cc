// METIS graph reader (format of the METIS 5 manual, section 4.1.1). Strict: the header must
// match the body, the adjacency must be symmetric with equal weights both ways, and no vertex
// may list itself or a neighbour twice, because METIS itself rejects such files.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "halo/graph/formats.h"
#include "halo/graph/staging.h"
#include "halo/graph/text.h"

namespace halo {

namespace {

// Everything read_metis accumulates line by line; one struct so the header and vertex-line
// parsers below can be separate functions.
struct MetisState {
  std::int64_t n = -1, m = 0, ncon = 0;
  bool has_vsize = false, has_vwgt = false, has_ewgt = false;
  std::int64_t header_line = 0;
  std::int64_t vertex = 0;  // vertex lines seen
  std::vector<std::int64_t> line_of;
  EdgeList edges;
  std::vector<std::int32_t> vwgt;
  std::vector<NodeId> row;
  std::int64_t entries = 0;
};

// Parses the header line "n m [fmt [ncon]]" into s; separate because it runs once and sets the
// layout every vertex line is read with.
void parse_metis_header(LineCursor& c, MetisState& s) {
  s.header_line = c.line();
  s.n = c.next_int("the number of vertices");
  s.m = c.next_int("the number of edges");
  const std::int64_t n = s.n, m = s.m;
  if (n < 0 || n > kMaxNodes) c.fail("vertex count " + std::to_string(n) + " out of range");
  if (m < 0) c.fail("negative edge count " + std::to_string(m));
  if (!c.at_end()) {
    const std::string fmt(c.next_field("fmt"));
    if (fmt.size() > 3 || fmt.find_first_not_of("01") != std::string::npos)
      c.fail("expected fmt of up to three 0/1 digits, found '" + printable(fmt, 40) + "'");
    const std::string f3 = std::string(3 - fmt.size(), '0') + fmt;
    s.has_vsize = f3[0] == '1';
    s.has_vwgt = f3[1] == '1';
    s.has_ewgt = f3[2] == '1';
  }
  s.ncon = s.has_vwgt ? 1 : 0;
  if (!c.at_end()) {
    s.ncon = c.next_int("ncon");
    if (s.ncon < 1 || !s.has_vwgt) c.fail("ncon must be >= 1 and needs fmt with vertex weights");
    // Multi-constraint partitioning balances a handful of weights; a huge ncon is a typo
    // that would make every vertex line ncon numbers long.
    if (s.ncon > 1024) c.fail("ncon " + std::to_string(s.ncon) + " out of range [1, 1024]");
  }
  c.expect_end(4);
  s.edges.num_nodes = n;
  // The header's counts are claims until the body is read: reserving them outright would
  // let one wrong digit allocate gigabytes, so vectors start at most 16M and grow.
  const auto capped = [](std::int64_t want) {
    return std::size_t(std::clamp<std::int64_t>(want, 0, std::int64_t(1) << 24));
  };
  s.edges.src.reserve(capped(2 * m));
  s.edges.dst.reserve(capped(2 * m));
  if (s.has_ewgt) s.edges.weight.reserve(capped(2 * m));
  s.vwgt.reserve(capped(n * s.ncon));
  s.line_of.reserve(capped(n));
}

// Parses one vertex line (size, weights, neighbours) into s; separate from the header because
// it runs once per vertex with its own per-line checks.
void parse_metis_vertex(LineCursor& c, MetisState& s) {
  const std::int64_t n = s.n;
  const NodeId u = NodeId(s.vertex++);
  s.line_of.push_back(c.line());
  if (s.has_vsize) c.next_int("vertex size");
  for (std::int64_t k = 0; k < s.ncon; ++k) {
    const std::int64_t w = c.next_int("vertex weight");
    if (w < 0 || w > INT32_MAX) c.fail("vertex weight " + std::to_string(w) + " out of range");
    s.vwgt.push_back(std::int32_t(w));
  }
  s.row.clear();
  while (!c.at_end()) {
    const std::int64_t v = c.next_int("neighbour id");
    if (v < 1 || v > n)
      c.fail("neighbour id " + std::to_string(v) + " out of range [1, " + std::to_string(n) + "]");
    if (v - 1 == u)
      c.fail("vertex " + std::to_string(v) + " lists itself (METIS allows no self-loops)");
    float w = 1;
    if (s.has_ewgt) {
      const std::int64_t ew = c.next_int("edge weight");
      if (ew <= 0) c.fail("edge weight must be positive, found " + std::to_string(ew));
      w = float(ew);
      s.edges.weight.push_back(w);
    }
    s.edges.src.push_back(u);
    s.edges.dst.push_back(NodeId(v - 1));
    s.row.push_back(NodeId(v - 1));
    ++s.entries;
  }
  std::sort(s.row.begin(), s.row.end());
  const auto dup = std::adjacent_find(s.row.begin(), s.row.end());
  if (dup != s.row.end()) c.fail("vertex lists neighbour " + std::to_string(*dup + 1) + " twice");
}

// Checks the body against the header's counts and builds the dataset; separate because these
// checks need the whole file read.
GraphDataset finish_metis(const std::filesystem::path& path, MetisState& s) {
  const std::int64_t n = s.n, m = s.m;
  if (n < 0) throw_input(path, 0, "empty file: expected a header line \"n m [fmt [ncon]]\"");
  if (s.vertex != n)
    throw_input(path, s.header_line,
                "header declares " + std::to_string(n) + " vertices, the body has " +
                    std::to_string(s.vertex) + " vertex lines");
  if (s.entries != 2 * m)
    throw_input(path, s.header_line,
                "header declares " + std::to_string(m) + " edges (" + std::to_string(2 * m) +
                    " adjacency entries), the body has " + std::to_string(s.entries) + " entries");

  GraphDataset d;
  d.name = printable(path.stem().string(), 255);  // shown as is: text only
  d.graph = build_csr(std::move(s.edges), {.symmetrize = false});
  NodeId bu = 0, bv = 0;
  if (!is_symmetric(d.graph.view(), &bu, &bv))
    throw_input(path, s.line_of[std::size_t(bu)],
                "asymmetric adjacency: vertex " + std::to_string(bu + 1) + " lists " +
                    std::to_string(bv + 1) + ", but vertex " + std::to_string(bv + 1) +
                    " does not list " + std::to_string(bu + 1) +
                    (s.has_ewgt ? " with the same weight" : ""));
  d.ncon = int(s.ncon);
  if (s.ncon > 0) d.node_weights = Array<std::int32_t>(std::move(s.vwgt));
  return d;
}

}  // namespace

GraphDataset read_metis(const std::filesystem::path& path) {
  MetisState s;
  for_each_line(
      path,
      [&](LineCursor& c) {
        if (c.starts_with_any("%")) return;
        if (s.n < 0) {  // header
          if (c.blank()) return;
          parse_metis_header(c, s);
          return;
        }
        if (s.vertex == s.n) {
          if (!c.blank())
            c.fail("header (line " + std::to_string(s.header_line) + ") declares " +
                   std::to_string(s.n) + " vertices, but the body has more vertex lines");
          return;
        }
        parse_metis_vertex(c, s);
      },
      "reading METIS graph", InputKind::kStream);  // named on the command line
  return finish_metis(path, s);
}

void write_metis(const std::filesystem::path& path, const CsrView& g, const std::int32_t* vwgt,
                 int ncon) {
  StagedFile f(path);  // checked writes, renamed over path when complete (staging.h)
  const bool ew = g.values != nullptr;
  std::string fmt = ncon > 0 ? (ew ? " 011" : " 010") : (ew ? " 001" : "");
  if (ncon > 1) {
    fmt += ' ';
    fmt += std::to_string(ncon);
  }
  f.write(std::to_string(g.num_nodes) + " " + std::to_string(g.num_edges() / 2) + fmt + "\n");
  std::vector<char> buf(1 << 20);
  std::size_t used = 0;
  auto flush = [&] {
    f.write(buf.data(), used);
    used = 0;
  };
  auto put = [&](std::int64_t v, char sep) {
    if (used + 24 > buf.size()) flush();
    used =
        std::size_t(std::to_chars(buf.data() + used, buf.data() + buf.size(), v).ptr - buf.data());
    buf[used++] = sep;
  };
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    for (int c = 0; c < ncon; ++c) put(vwgt[u * ncon + c], ' ');
    for (EdgeId e = g.offsets[u]; e < g.offsets[u + 1]; ++e) {
      put(g.indices[e] + 1, ' ');
      if (ew) put(std::max<std::int64_t>(1, std::llround(g.values[e])), ' ');
    }
    if (used + 1 > buf.size()) flush();
    if (used > 0 && buf[used - 1] == ' ') --used;
    buf[used++] = '\n';
  }
  flush();
  f.commit();
}

}  // namespace halo

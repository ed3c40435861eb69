// Boost.Graph concepts (VertexListGraph, IncidenceGraph) for halo::CsrView, so Boost's
// algorithms run on halo's CSR in place — including memory-mapped datasets — with no copy.
// A CsrView is declared undirected: halo stores undirected graphs with both directions, which
// is exactly what Boost's undirected algorithms traverse.
#pragma once

#include <boost/graph/graph_traits.hpp>
#include <boost/iterator/counting_iterator.hpp>
#include <boost/iterator/iterator_facade.hpp>
#include <utility>

#include "halo/graph/csr.h"

namespace halo::bgl {

// An edge is its position in the index array plus its source row.
struct Edge {
  NodeId src = 0;
  EdgeId pos = 0;
  bool operator==(const Edge& o) const { return pos == o.pos && src == o.src; }
  bool operator!=(const Edge& o) const { return !(*this == o); }
};

class OutEdgeIterator
    : public boost::iterator_facade<OutEdgeIterator, Edge, std::random_access_iterator_tag, Edge,
                                    std::ptrdiff_t> {
 public:
  OutEdgeIterator() = default;
  OutEdgeIterator(NodeId src, EdgeId pos) : e_{src, pos} {}

 private:
  friend class boost::iterator_core_access;
  Edge dereference() const { return e_; }
  bool equal(const OutEdgeIterator& o) const { return e_.pos == o.e_.pos; }
  void increment() { ++e_.pos; }
  void decrement() { --e_.pos; }
  void advance(std::ptrdiff_t n) { e_.pos += n; }
  std::ptrdiff_t distance_to(const OutEdgeIterator& o) const { return o.e_.pos - e_.pos; }
  Edge e_;
};

struct Traversal : boost::vertex_list_graph_tag, boost::incidence_graph_tag {};

}  // namespace halo::bgl

namespace boost {

template <>
struct graph_traits<halo::CsrView> {
  using vertex_descriptor = halo::NodeId;
  using edge_descriptor = halo::bgl::Edge;
  using directed_category = undirected_tag;
  using edge_parallel_category = disallow_parallel_edge_tag;
  using traversal_category = halo::bgl::Traversal;
  using vertex_iterator = boost::counting_iterator<halo::NodeId>;
  using out_edge_iterator = halo::bgl::OutEdgeIterator;
  using degree_size_type = halo::EdgeId;
  using vertices_size_type = halo::NodeId;
  using edges_size_type = halo::EdgeId;
  static vertex_descriptor null_vertex() { return -1; }
};

}  // namespace boost

namespace halo {

// Free functions found by argument-dependent lookup on CsrView (namespace halo).
inline std::pair<boost::counting_iterator<NodeId>, boost::counting_iterator<NodeId>> vertices(
    const CsrView& g) {
  return {boost::counting_iterator<NodeId>(0),
          boost::counting_iterator<NodeId>(NodeId(g.num_nodes))};
}
inline NodeId num_vertices(const CsrView& g) { return NodeId(g.num_nodes); }
inline std::pair<bgl::OutEdgeIterator, bgl::OutEdgeIterator> out_edges(NodeId u, const CsrView& g) {
  return {bgl::OutEdgeIterator(u, g.offsets[u]), bgl::OutEdgeIterator(u, g.offsets[u + 1])};
}
inline EdgeId out_degree(NodeId u, const CsrView& g) { return g.degree(u); }
inline EdgeId degree(NodeId u, const CsrView& g) { return g.degree(u); }
inline NodeId source(const bgl::Edge& e, const CsrView&) { return e.src; }
inline NodeId target(const bgl::Edge& e, const CsrView& g) { return g.indices[e.pos]; }

}  // namespace halo

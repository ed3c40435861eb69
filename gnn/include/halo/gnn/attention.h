// Graph attention (GAT, Velickovic et al. 2018) kernels on the host, the pieces a GAT layer is
// built from. A layer with H heads of width F projects its input to z = X W ([cols x H*F]: owned
// rows, then halo rows filled by the exchange), computes per-node attention terms
// el = <z, a_src> ([cols x H]) and er = <z, a_dst> ([rows x H], owned rows only), then for every
// edge u <- v of the graph with self-loops (row u = a destination, an owned node; column v = a
// source, owned or halo)
//   score[e, h] = LeakyReLU(el[v, h] + er[u, h]),  alpha[e, h] = softmax over row u of score,
//   out[u, h, :] = sum_e alpha[e, h] z[v, h, :].
// Memory plan: forward keeps alpha ([nnz x H], the one per-edge array a layer holds for
// backward); the scores are not kept (backward recomputes LeakyReLU's slope from el + er), and
// backward's per-edge gradient reuses one [nnz x H] buffer for d(alpha) and then d(score).
// Every kernel is a gather (rows in forward, the transpose's rows for the columns' gradients):
// no atomics, deterministic for any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/gnn/attention_view.h"
#include "halo/gnn/rng.h"
#include "halo/graph/csr.h"
#include "halo/graph/types.h"

namespace halo {

// The structure attention runs over: rows x cols with a self-loop on every row (column u of row
// u: rows are the first columns), columns sorted in each row; and its transpose, whose entries
// name the edge (position in indices) they mirror, so column gradients gather per-edge values.
struct AttentionGraph {
  std::int64_t rows = 0, cols = 0;
  std::vector<EdgeId> offsets;    // [rows + 1]
  std::vector<NodeId> indices;    // [nnz]: source columns
  std::vector<EdgeId> t_offsets;  // [cols + 1]
  std::vector<NodeId> t_rows;     // [nnz]: destination rows of column c's edges, ascending
  std::vector<EdgeId> t_edge;     // [nnz]: the edge each transposed entry mirrors

  EdgeId nnz() const { return offsets.empty() ? 0 : offsets.back(); }
  // Views of the arrays (host memory), valid while this lives unchanged.
  AttentionView view() const {
    return {rows,          cols,         nnz(), offsets.data(), indices.data(), t_offsets.data(),
            t_rows.data(), t_edge.data()};
  }
};

// g's rows (owned nodes, columns over [0, cols) with the owned rows first) plus a self-loop on
// every row that lacks one, and the transpose. Throws ParamError when cols < g.num_nodes.
AttentionGraph attention_graph(const CsrView& g, std::int64_t cols);

// Per-head dot products t[r, h] = <z[r, h, :], a[h, :]> for rows [0, n): z is [n x H*F], a is
// [H x F], t is [n x H].
void head_dots(std::int64_t n, int heads, int width, const float* z, const float* a, float* t);
// d(z) += d(t) a and d(a) += sum_r d(t)[r, h] z[r, h, :] for the head_dots above (d(a) summed in
// double per head, then added).
void head_dots_backward(std::int64_t n, int heads, int width, const float* z, const float* a,
                        const float* dt, float* dz, float* da);

// alpha [nnz x H]: the edge softmax of LeakyReLU(el[v] + er[u]) (negative slope `slope`) over
// each row, the row's maximum subtracted first so no exponent overflows.
void gat_edge_softmax(const AttentionView& g, int heads, const float* el, const float* er,
                      float slope, float* alpha);
// out [rows x H*F] = per head, the alpha-weighted sum of the rows of z [cols x H*F] each row's
// edges name.
void gat_aggregate(const AttentionView& g, int heads, int width, const float* alpha, const float* z,
                   float* out);
// Backward of gat_aggregate: dz[v, h, :] += sum over v's edges of alpha[e, h] dout[u, h, :]
// (accumulated) and dalpha[e, h] = <dout[u, h, :], z[v, h, :]> (written; dalpha may be alpha,
// so a dropped-out alpha's buffer takes its own gradient).
void gat_aggregate_backward(const AttentionView& g, int heads, int width, const float* alpha,
                            const float* z, const float* dout, float* dalpha, float* dz);
// Backward of gat_edge_softmax, from d(alpha) (overwritten with d(score)): del [cols x H] and
// der [rows x H] receive the gradients of el and er (accumulated).
void gat_edge_softmax_backward(const AttentionView& g, int heads, const float* el, const float* er,
                               float slope, const float* alpha, float* dalpha, float* del,
                               float* der);

// Attention dropout in place on x [nnz x H]: x[e, h] *= keep / (1 - p), keep iff
// dropout_u16(key, id(u) << 32 | id(v), h) >= dropout_threshold(p) for edge e = u <- v, id = ids
// (global node ids, so every rank count draws the same mask) or the identity when ids is null.
// Applying it to d(x) is its backward.
void gat_edge_dropout(const AttentionView& g, int heads, float p, PhiloxKey key, const NodeId* ids,
                      float* x);

}  // namespace halo

// DistTGL's static node memory (Zhou et al., SC'23, "DistTGL: Distributed Memory-Based Temporal
// Graph Neural Network Training", section 3.1): a learnable embedding per node, S (nodes x D),
// that holds what about a node does not change with time, next to TGN's dynamic memory, which
// the GRU rewrites batch by batch. The dynamic memory favours small batches (a batch's events
// cannot update the memory its own predictions read); S is an ordinary parameter, learned by
// gradient whatever the batch size, which is why DistTGL adds it to keep large-batch accuracy.
//
// How it is combined: concatenated, [memory ‖ S], wherever the attention reads a node's state
// (the query's own row, its merger input, and each distinct neighbour's key/value row). The
// paper describes the two memories as separate inputs that the embedding module combines; a
// concatenation lets the attention's projections learn the mix (a sum would force S into the
// memory's coordinates, which the GRU owns), and leaves the GRU, the messages and the memory
// itself untouched. The identity and time (JODIE) embeddings have no layer that could learn
// the mix, so the options refuse them with S (tgn_options.cc).
//
// S starts at zero: a node never seen in training (the inductive test nodes) keeps S = 0,
// "nothing known", rather than random features; the attention weights make its gradient nonzero
// from the first batch. DistTGL pre-trains S on the same task; here it is trained jointly.
//
// Cost: S is a halo::Param (value, gradient, Adam's two moments): 4 x nodes x D floats, and the
// trainer's dense Adam step, the gradient zeroing and the ranks' all-reduce sweep all of it
// every batch. Measured (2-core VM, 1 thread, D = 100): on UCI (1,899 nodes) the sweep is
// nothing, but the wider attention inputs (dq, dk 200 -> 300) cut training from ~5,800 to
// ~3,500 events/s at batch 200; on a generated stream of 1 M nodes the sweep adds 0.33 s per
// batch (3,925 -> 525 events/s at batch 200, 3,557 -> 2,230 at batch 2,000) and 1.5 GiB. A
// lazy (sparse-row) Adam would remove the sweep but is not the same optimiser: Adam moves a
// row whose gradient is zero while its moments are not, so it is not done here.
//
// This is its own component so that the model (tgn.cc) only calls fill() after it gathers the
// memory rows of a batch and add_gradient() after the attention's backward; both are Backend
// row ops, so S lives wherever the model does (Tgn::to_device moves it).
#pragma once

#include <cstdint>

#include "halo/gnn/backend.h"
#include "halo/gnn/model.h"
#include "halo/graph/types.h"

namespace halo {

class StaticMemory {
 public:
  // nodes x dim, zero; dim 0 is "off" (nothing allocated).
  StaticMemory(std::int64_t nodes, std::int64_t dim);

  std::int64_t dim() const { return dim_; }
  // The table as a trained parameter, named "static_memory".
  Param& param() { return s_; }

  // Row i of out, columns [col, col + dim): S's row of node[i], for i < n (be's gather_rows_into;
  // node, out and S in be's memory).
  void fill(Backend& be, const NodeId* node, std::int64_t n, const MatrixView& out,
            std::int64_t col) const;
  // The same on the host (S there).
  void fill(const NodeId* node, std::int64_t n, Matrix& out, std::int64_t col) const;

  // S's gradient row of node[i] += row i of grad, columns [col, col + dim), for i < n in order
  // (be's scatter_add_rows_from: a fixed summation order, the same bits at any thread count).
  void add_gradient(Backend& be, const NodeId* node, std::int64_t n, const MatrixView& grad,
                    std::int64_t col);
  // The same on the host.
  void add_gradient(const NodeId* node, std::int64_t n, const Matrix& grad, std::int64_t col);

 private:
  std::int64_t dim_;
  Param s_;
};

}  // namespace halo

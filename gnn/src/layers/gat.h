// Private to gnn/src: the GAT layer's state (gat.cc) and the helpers model.cc shares with it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "halo/gnn/model.h"

namespace halo {
namespace model_util {

// Glorot-uniform [in x out] weights from Philox keyed by (seed, stream), drawn on the host (the
// same numbers for every device) and placed on `device`.
Matrix glorot(std::int64_t in, std::int64_t out, std::uint64_t seed, std::uint64_t stream,
              Device device);
// A parameter with zeroed gradient and Adam moments beside `value`, in its memory.
Param make_param(std::string name, Matrix value);
// The dropout key of a (seed, epoch, slot): slot 0 is the input, l + 1 layer l's output.
PhiloxKey dropout_key(std::uint64_t seed, std::int64_t epoch, int slot);
// A rows x cols view of m's storage; throws std::logic_error when it does not fit (a memory-plan
// bug, never papered over by reallocating live rows).
MatrixView shape(Matrix& m, std::int64_t rows, std::int64_t cols);
// Grows m to at least n floats (contents lost).
void reserve(Matrix& m, std::int64_t n);

}  // namespace model_util

// One GAT layer: H heads of width F over an input of width `in`.
//   forward:  Z = [X W | halo rows]  (exchange)       kept: z [all x H*F]
//             el = <Z, a_src>, er = <Z_owned, a_dst>    kept: el [all x H], er [owned x H]
//             alpha = edge softmax of LeakyReLU(el[v] + er[u])   kept: alpha [nnz x H]
//             O = sum alpha' Z per head (alpha' = attention dropout of alpha, transient)
//             (+ X W_res or X) + b, then hidden: ELU, dropout -> `out` (kept: the next input)
//                                         last: the mean over heads (a GEMM by `head_mean`) + b
// Memory plan: per layer z, el, er, alpha and (hidden) the output; one transient [nnz x H] slab
// shared by every layer holds alpha' in forward and the edge gradient in backward (which
// rebuilds alpha' there from alpha and the keyed mask, so nothing else per edge is kept).
// Backward adds one [owned x widest input] gradient slab (d(out) of a hidden layer becomes its
// d(input) in place) and the last layer's d(Z); a hidden layer's d(Z) reuses its output's slab.
struct Model::GatLayer {
  int index = 0;
  bool last = false;
  std::int64_t in = 0, heads = 1, width = 0;  // H*F = heads * width
  std::int64_t out = 0;                       // H*F (hidden) or F (last: heads averaged)
  bool res_proj = false;                      // residual through W_res (widths differ)
  bool residual = false;
  Param w, a_src, a_dst, b, w_res;
  Matrix head_mean;  // last layer with H > 1: [H*F x F], 1/H where the column is the feature
  // out_kept: a hidden layer's output (after ELU and dropout), [owned x H*F] cut from a slab of
  // [all x H*F]: backward writes the layer's d(Z) there once the ELU is undone.
  Matrix z, el, er, alpha, out_kept;
};

// Slabs the GAT layers share, sized by gat_forward and reused every epoch.
struct Model::GatWork {
  Matrix edge;    // [nnz x H]: alpha' in forward, d(alpha) then d(score) in backward
  Matrix concat;  // the last layer's heads before their mean, then their gradient
  Matrix dz;      // the last layer's d(Z) [all x H*F] (a hidden layer's goes in its out_kept)
  Matrix del, der;
  Matrix grad;  // the gradient between layers: d(input), which is the layer below's d(out)
  Matrix logits;
};

// Model::infer's memory: slabs of [all x widest layer] floats that a layer's input, its staging
// rows and its output rotate through (a slab is reused as soon as the view it held is dead), and
// GAT's attention terms of one layer at a time.
struct Model::InferWork {
  Matrix slab[3];
  std::int64_t floats = 0;  // each slab's size
  Matrix el, er, alpha;
  // A rows x cols view of the lowest slab that none of `busy` names (-1 names none), allocated on
  // first use; its index goes to `at`.
  MatrixView take(std::int64_t rows, std::int64_t cols, int& at, std::initializer_list<int> busy);
};

}  // namespace halo

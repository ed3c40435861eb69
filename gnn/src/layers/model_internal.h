// Private to gnn/src: the GCN/SAGE layer's state, which the Model's set-up (model.cc) and the
// layers' forward and backward (gcn_sage.cc) share.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "halo/gnn/model.h"

namespace halo {
namespace model_util {

// Transform first when the layer does not widen: the SpMM and the exchange are no wider, and
// nothing but the input needs keeping for backward (aggregate-first keeps A X as well).
inline bool transforms_first(std::int64_t in, std::int64_t out) { return out <= in; }

}  // namespace model_util

// Slabs shared by the layers, sized by Model::forward before any layer runs and reused every
// epoch; views of any shape that fits are cut from them.
struct Model::Work {
  // Gradients between layers (SAGE ping-pongs). In forward grad[0] also holds hidden layers' T
  // = h W or [input | halo] rows, and the output of a batch-norm layer that feeds the last layer.
  Matrix grad[2];
  Matrix act;     // SAGE only: batch-norm outputs (its root term reads the input into the output)
  Matrix tail;    // the last layer's T or [input | halo] rows, then its d(T) or d(Z)
  Matrix logits;  // the last layer's output
  // A batch-norm layer whose training output is still materialised, and where (-1: none).
  int y_layer = -1;
  MatrixView y;
};

struct Model::Layer {
  int index = 0;
  bool last = false;
  bool sage = false;
  bool transform_first = false;
  std::int64_t in = 0, out = 0;
  // b: layers followed by batch norm have none — BN's beta is the bias, and a bias before BN
  // has an exactly-zero gradient whose rounding noise Adam would blow up into real steps (that
  // drift leaks into the running mean and makes evaluation depend on summation order).
  Param w, b, w_root;  // w_root: SAGE only
  bool bn = false;
  Param gamma, beta;
  std::vector<float> run_mean, run_var, mean, inv_std;
  std::vector<float> zeros, ones;  // the mean and inv_std that make batch_norm_apply x-hat -> Y
  Matrix saved;  // hidden layers: x-hat (batch norm) or the output; all x hidden floats
  // The last training forward's dropout mask (batch-norm layers): rebuilding the output and
  // backward replay it instead of running Philox twice more (1/32 of an activation matrix).
  std::vector<std::uint64_t> keep_words;
  KeepBits keep;
  Matrix z;  // aggregate first: A X (owned x in)
  // The A X the last forward multiplied by (z, or the caller's GraphContext::input_aggregate),
  // which backward multiplies by too.
  MatrixView z_used;
  // What z was aggregated from when it may be reused (GraphContext::static_input): the input's
  // storage and shape and the operator; null when z is not reusable.
  struct Source {
    const float* x = nullptr;
    std::int64_t rows = 0, cols = 0, all = 0;
    const void* op = nullptr;
    bool operator==(const Source&) const = default;
  } z_from;

  // Returns the output (owned x out): the logits, the saved slab, or `y_slab` (batch norm).
  // static_x: x is the unchanging input (see GraphContext::static_input), so z may be reused.
  MatrixView forward(Backend& be, const GraphContext& g, const MatrixView& x, bool static_x,
                     bool training, float p, std::uint64_t seed, std::int64_t epoch, float momentum,
                     float eps, Matrix& y_slab, Work& ws);
  // 1 / sqrt(running variance + eps): evaluation's inverse deviations.
  std::vector<float> running_rstd(float eps) const {
    std::vector<float> r(run_var.size());
    for (std::size_t j = 0; j < r.size(); ++j)
      r[j] = float(1.0 / std::sqrt(double(run_var[j]) + eps));
    return r;
  }
  // A batch-norm layer's output in its last training forward, rebuilt from x-hat into `into`.
  MatrixView rebuild_output(Backend& be, const GraphContext& g, float p, std::uint64_t seed,
                            std::int64_t epoch, Matrix& into);
  // Undoes dropout, ReLU and batch norm on dy (owned x out) in place; the saved slab is dead
  // afterwards. Nothing for the last layer.
  void activation_backward(Backend& be, const GraphContext& g, const MatrixView& dy, float p,
                           std::uint64_t seed, std::int64_t epoch);
  // Parameter gradients from dy; returns d(input) (owned x in) in ws.grad[cur] (SAGE flips cur)
  // when want_dx, else an empty view. input(free) yields the layer's input, rebuilding it into
  // the free slab it is handed when it is no longer materialised.
  template <class Input>
  MatrixView linear_backward(Backend& be, const GraphContext& g, const MatrixView& dy, bool want_dx,
                             Work& ws, int& cur, Input&& input);
};

}  // namespace halo

// GNN models written once against the Backend: a stack of GCN or GraphSAGE-mean layers with
// optional batch norm, ReLU and dropout between them, or of GAT layers (multi-head attention, ELU
// and dropout between them); explicit backward, and parameters that an optimiser steps. A layer
// sees its input rows as [owned | halo]: the Exchanger (nothing in a single process, MPI or NCCL in
// the runtime) fills the halo rows before aggregation and sends their gradients back to their
// owners after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halo/gnn/attention.h"
#include "halo/gnn/backend.h"
#include "halo/gnn/graph_op.h"

namespace halo {

// The layer type: GCN (symmetric normalisation), GraphSAGE-mean or GAT (graph attention).
enum class ModelKind { kGcn, kSage, kGat };
// "gcn" | "sage" | "gat" (the --model spellings); throws ParamError naming the expected ones.
ModelKind parse_model_kind(std::string_view s);
// The --model spelling of k, as logs and checkpoint keys record it.
const char* to_string(ModelKind k);

struct ModelConfig {
  ModelKind kind = ModelKind::kGcn;
  int layers = 2;
  std::int64_t in = 0, hidden = 16, out = 0;
  float dropout = 0.5f;
  bool input_dropout = false;  // dropout on the input features too (Kipf & Welling)
  bool batch_norm = false;     // between layers
  float bn_momentum = 0.1f, bn_eps = 1e-5f;
  // GAT: hidden layers have `heads` heads of width `hidden` (concatenated: heads * hidden wide),
  // the output layer `out_heads` heads of width `out` (averaged); dropout on the attention
  // coefficients; a residual term (x W_res, or x when the widths match) added before the bias.
  int heads = 1, out_heads = 1;
  float attn_dropout = 0.f;
  bool residual = false;
  float negative_slope = 0.2f;  // LeakyReLU's on the attention logits
  // Throws ParamError for impossible values.
  void check() const;
};

struct Param {
  std::string name;
  Matrix value, grad;
  Matrix m, v;             // Adam moments
  float weight_decay = 0;  // per parameter (Planetoid's GCN decays only the first layer)
};

// Moves rows between ranks, in two halves so a layer can compute while rows are in flight.
// Collective: every rank calls the same sequence with the same widths.
class Exchanger {
 public:
  virtual ~Exchanger() = default;
  // Starts filling rows [owned, all) of `all` with their owners' values. Until forward_end the
  // owned rows must not change and the halo rows must not be read. `layer` names the call site:
  // an implementation may pipeline a training exchange across epochs (stale halo rows).
  virtual void forward_begin(const MatrixView& all, int layer, bool training) = 0;
  virtual void forward_end() = 0;
  // Starts sending rows [owned, all) of `all` (gradients of the halo copies) to their owners;
  // they must not change until backward_end, which adds what the other ranks sent into the
  // owned rows of `all` (finished by the caller in between).
  virtual void backward_begin(const MatrixView& all, int layer) = 0;
  virtual void backward_end(const MatrixView& all) = 0;
  // Sums partial double sums across ranks (batch-norm statistics), in place.
  virtual void allreduce(double* data, std::int64_t n) = 0;
};

// The graph as a layer sees it.
struct GraphContext {
  std::int64_t owned = 0, all = 0;     // rows of a layer's output, and of its input with halo
  std::int64_t inner = 0;              // rows [0, inner) aggregate owned rows only (no halo)
  OperatorView gcn, mean;              // in the memory of the backend the model runs with
  AttentionView attention;             // GAT: owned rows over [owned | halo] columns, self-loops
  const NodeId* global_ids = nullptr;  // per local row, keys the dropout masks
  std::int64_t global_nodes = 0;       // batch-norm statistics are over all nodes
  Exchanger* exchange = nullptr;       // null when all == owned
  // The input features never change between calls that pass the same x (a trainer's dataset):
  // the first layer's A X, exchange included, is then computed once and reused while neither x
  // nor the operator changes and no input dropout applies.
  bool static_input = false;
  // Layer 0's A X (owned x in), computed once by the caller with aggregate_input for a model
  // that reads_input_only_aggregated: forward and backward then use it and never read x, so the
  // caller may free its features (about a gigabyte on the GPU at ogbn-products' size).
  MatrixView input_aggregate;
};

// Whether layer 0 of a model so configured reads its input only through A X (GCN aggregating
// first, no input dropout): then GraphContext::input_aggregate may stand for the input.
bool reads_input_only_aggregated(const ModelConfig& c);
// A X over the owned rows (owned x x.cols, in x's memory), the halo rows of x exchanged exactly
// first (collective, as a layer's exchange): what layer 0 of such a model computes from x.
Matrix aggregate_input(Backend& be, const GraphContext& g, const MatrixView& x);

// What a pass hands its caller layer by layer: layer l's output (owned x width: a hidden layer's
// after its activation and dropout, the last layer's logits), valid only during the call.
using LayerSink = std::function<void(int layer, const MatrixView& out)>;

class Model {
 public:
  // Weights drawn with Glorot-uniform from Philox keyed by (seed, layer): the same weights on
  // any backend and rank count. Parameters and activations live on `device`, which must be the
  // device of the Backend the model runs with.
  Model(const ModelConfig& config, std::uint64_t seed, Device device = Device::kCpu);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  // Logits for the owned rows from the owned rows of X (owned x in). training: dropout keyed by
  // (seed, epoch, layer) and batch statistics; otherwise running statistics and no dropout.
  // sink, when set, sees every layer's output.
  MatrixView forward(Backend& be, const GraphContext& g, const MatrixView& x, bool training,
                     std::uint64_t seed, std::int64_t epoch, const LayerSink& sink = {});
  // Inference: forward(training = false)'s outputs, bit for bit, with nothing kept for backward.
  // Layer by layer through rotating slabs of [all x widest layer] floats, allocated on first use:
  // two for GCN, three when a layer's input is read beside its aggregate (SAGE's root term,
  // GAT's residual and attention). Returns the logits, valid until the next call. input_read, when
  // set, is called as soon as layer 0 has read x for the last time, so the caller can free x
  // before the layer's output is formed.
  MatrixView infer(Backend& be, const GraphContext& g, const MatrixView& x,
                   const LayerSink& sink = {}, const std::function<void()>& input_read = {});
  // Bytes inference's slabs hold now (its whole memory but one layer's [nnz x heads] attention).
  std::int64_t inference_bytes() const;
  // Gradients of every parameter from d(loss)/d(logits) (owned x out). Call after a training
  // forward. Overwrites the grads.
  void backward(Backend& be, const GraphContext& g, const MatrixView& dlogits);
  std::vector<Param*> params();
  // Non-trained state a checkpoint must keep (batch-norm running statistics), by name.
  std::vector<std::pair<std::string, std::vector<float>*>> buffers();
  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }

  // Bytes of activation memory the model holds now (what forward keeps for backward, dropout
  // masks as bits included, plus the shared transient slabs): the figure the memory plan is
  // tested on.
  std::int64_t activation_bytes() const;

 private:
  struct Layer;
  struct Work;
  struct GatLayer;  // gat.h
  struct GatWork;
  struct InferWork;
  ModelConfig config_;
  Device device_ = Device::kCpu;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<Work> work_;
  std::vector<std::unique_ptr<GatLayer>> gat_;  // --model gat: these instead of layers_
  std::unique_ptr<GatWork> gat_work_;
  std::unique_ptr<InferWork> infer_;  // infer's slabs, made by its first call
  Matrix x_drop_;                     // the input features after input dropout
  MatrixView input_;                  // layer 0's input in the last training forward
  std::uint64_t last_seed_ = 0;       // of the last training forward: backward replays its masks
  std::int64_t last_epoch_ = 0;

  // GAT's construction, passes and memory (gat.cc), called by the public functions above;
  // gat_forward's x is layer 0's input, input dropout already applied.
  void gat_init(std::uint64_t seed);
  MatrixView gat_forward(Backend& be, const GraphContext& g, const MatrixView& x, bool training,
                         std::uint64_t seed, std::int64_t epoch, const LayerSink& sink);
  MatrixView gat_infer(Backend& be, const GraphContext& g, const MatrixView& x,
                       const LayerSink& sink, const std::function<void()>& input_read);
  void gat_backward(Backend& be, const GraphContext& g, const MatrixView& dlogits);
  std::int64_t gat_activation_bytes() const;
};

}  // namespace halo

// The Model: its configuration (the model kind's spellings, ModelConfig::check), its set-up (the
// layers' parameters and slabs), and what it owns (activation and inference bytes, parameters,
// batch-norm buffers). GCN and SAGE's forward, inference and backward are in gcn_sage.cc, their
// math and memory plan with them; GAT's are in gat.cc.

#include "halo/gnn/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"
#include "layers/gat.h"
#include "layers/model_internal.h"

namespace halo {
namespace model_util {

Matrix glorot(std::int64_t in, std::int64_t out, std::uint64_t seed, std::uint64_t stream,
              Device device) {
  std::vector<float> w(std::size_t(in * out));
  const PhiloxKey key = philox_key(seed, kStreamInit + stream);
  const float a = float(std::sqrt(6.0 / double(in + out)));
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t j = 0; j < out; ++j)
      w[std::size_t(i * out + j)] =
          (2.f * philox_uniform(key, std::uint64_t(i), std::uint32_t(j)) - 1.f) * a;
  Matrix m(in, out, 0.f, device);
  m.assign(w);
  return m;
}

Param make_param(std::string name, Matrix value) {
  Param p;
  p.name = std::move(name);
  const Device d = value.device();
  p.grad = Matrix(value.rows(), value.cols(), 0.f, d);
  p.m = Matrix(value.rows(), value.cols(), 0.f, d);
  p.v = Matrix(value.rows(), value.cols(), 0.f, d);
  p.value = std::move(value);
  return p;
}

PhiloxKey dropout_key(std::uint64_t seed, std::int64_t epoch, int slot) {
  return philox_key(seed, kStreamDropout + std::uint64_t(epoch) * 64 + std::uint64_t(slot));
}

MatrixView shape(Matrix& m, std::int64_t rows, std::int64_t cols) {
  if (m.size() < rows * cols) throw std::logic_error("model memory plan: a slab is too small");
  return {m.data(), rows, cols, m.device()};
}

void reserve(Matrix& m, std::int64_t n) {
  if (m.size() < n) m.resize(1, n);
}

}  // namespace model_util

using model_util::glorot;
using model_util::make_param;
using model_util::transforms_first;

namespace {
constexpr EnumName<ModelKind> kModelKinds[] = {
    {ModelKind::kGcn, "gcn"}, {ModelKind::kSage, "sage"}, {ModelKind::kGat, "gat"}};
}  // namespace

ModelKind parse_model_kind(std::string_view s) { return parse_enum(kModelKinds, "--model", s); }

const char* to_string(ModelKind k) { return enum_name(kModelKinds, k); }

void ModelConfig::check() const {
  if (layers < 1) throw ParamError("--layers must be at least 1");
  if (hidden < 1) throw ParamError("--hidden must be at least 1");
  if (in < 1) throw ParamError("the dataset has no node features to train on");
  if (out < 1) throw ParamError("the dataset has no labels to train on");
  if (!(dropout >= 0 && dropout < 1)) throw ParamError("--dropout must be in [0, 1)");
  if (kind != ModelKind::kGat) return;
  if (heads < 1 || out_heads < 1) throw ParamError("--heads and --out-heads must be at least 1");
  if (!(attn_dropout >= 0 && attn_dropout < 1))
    throw ParamError("--attn-dropout must be in [0, 1)");
  if (batch_norm) throw ParamError("--batch-norm is not available with --model gat");
  if (layers > 31) throw ParamError("--model gat has at most 31 layers");
}

Model::Model(const ModelConfig& config, std::uint64_t seed, Device device)
    : config_(config), device_(device) {
  config_.check();
  if (config_.kind == ModelKind::kGat) {
    gat_init(seed);
    return;
  }
  work_ = std::make_unique<Work>();
  for (Matrix* m :
       {&x_drop_, &work_->act, &work_->grad[0], &work_->grad[1], &work_->tail, &work_->logits})
    m->set_device(device);
  for (int l = 0; l < config_.layers; ++l) {
    auto L = std::make_unique<Layer>();
    L->index = l;
    L->last = l + 1 == config_.layers;
    L->sage = config_.kind == ModelKind::kSage;
    L->in = l == 0 ? config_.in : config_.hidden;
    L->out = L->last ? config_.out : config_.hidden;
    L->transform_first = transforms_first(L->in, L->out);
    const std::string pre = "layer" + std::to_string(l) + ".";
    L->w = make_param(pre + "weight", glorot(L->in, L->out, seed, std::uint64_t(l) * 4, device));
    L->b = make_param(pre + "bias", Matrix(1, L->out, 0.f, device));
    if (L->sage)
      L->w_root = make_param(pre + "root_weight",
                             glorot(L->in, L->out, seed, std::uint64_t(l) * 4 + 1, device));
    L->bn = config_.batch_norm && !L->last;
    if (L->bn) {
      L->gamma = make_param(pre + "bn.weight", Matrix(1, L->out, 1.f, device));
      L->beta = make_param(pre + "bn.bias", Matrix(1, L->out, 0.f, device));
      L->run_mean.assign(std::size_t(L->out), 0.f);
      L->run_var.assign(std::size_t(L->out), 1.f);
      L->mean.assign(std::size_t(L->out), 0.f);
      L->inv_std.assign(std::size_t(L->out), 1.f);
      L->zeros.assign(std::size_t(L->out), 0.f);
      L->ones.assign(std::size_t(L->out), 1.f);
    }
    for (Matrix* m : {&L->z, &L->saved}) m->set_device(device);
    layers_.push_back(std::move(L));
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

std::int64_t Model::inference_bytes() const {
  if (!infer_) return 0;
  std::int64_t floats = 0;
  for (const Matrix* m : {&infer_->slab[0], &infer_->slab[1], &infer_->slab[2], &infer_->el,
                          &infer_->er, &infer_->alpha})
    floats += m->size();
  return floats * std::int64_t(sizeof(float));
}

std::int64_t Model::activation_bytes() const {
  if (!gat_.empty()) return gat_activation_bytes();
  std::int64_t floats = x_drop_.size();
  for (const Matrix* m :
       {&work_->grad[0], &work_->grad[1], &work_->act, &work_->tail, &work_->logits})
    floats += m->size();
  std::int64_t bytes = 0;
  for (const auto& L : layers_) {
    floats += L->saved.size() + L->z.size();
    bytes += std::int64_t(L->keep_words.size() * sizeof(std::uint64_t));
  }
  return floats * std::int64_t(sizeof(float)) + bytes;
}

std::vector<std::pair<std::string, std::vector<float>*>> Model::buffers() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  for (auto& L : layers_)
    if (L->bn) {
      out.emplace_back(L->gamma.name.substr(0, L->gamma.name.size() - 6) + "running_mean",
                       &L->run_mean);
      out.emplace_back(L->gamma.name.substr(0, L->gamma.name.size() - 6) + "running_var",
                       &L->run_var);
    }
  return out;
}

std::vector<Param*> Model::params() {
  std::vector<Param*> out;
  for (auto& L : layers_) {
    out.push_back(&L->w);
    if (L->sage) out.push_back(&L->w_root);
    if (!L->bn) out.push_back(&L->b);
    if (L->bn) {
      out.push_back(&L->gamma);
      out.push_back(&L->beta);
    }
  }
  for (auto& L : gat_) {
    out.push_back(&L->w);
    out.push_back(&L->a_src);
    out.push_back(&L->a_dst);
    if (L->res_proj) out.push_back(&L->w_res);
    out.push_back(&L->b);
  }
  return out;
}

}  // namespace halo

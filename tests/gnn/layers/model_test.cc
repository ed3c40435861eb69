// Models: golden values from an independent NumPy implementation, finite-difference gradient
// checks (GCN, SAGE and GAT, with and without batch norm and dropout), determinism.
#include "halo/gnn/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "../../test_util.h"
#include "halo/gnn/op_profile.h"

namespace halo {
namespace {

struct Tiny {
  Csr graph;
  GraphOperator gcn, mean;
  AttentionGraph attention;
  GraphContext ctx;
  std::vector<std::int32_t> degree;
  void build(std::int64_t n, const std::vector<std::pair<int, int>>& edges) {
    EdgeList el;
    el.num_nodes = n;
    for (auto [u, v] : edges) {
      el.src.push_back(u);
      el.dst.push_back(v);
    }
    graph = build_csr(std::move(el));
    degree.resize(std::size_t(n));
    for (std::int64_t v = 0; v < n; ++v)
      degree[std::size_t(v)] = std::int32_t(graph.view().degree(NodeId(v)));
    gcn = gcn_operator(graph.view(), n, degree.data());
    mean = mean_operator(graph.view(), n);
    ctx.owned = ctx.all = ctx.global_nodes = n;
    ctx.gcn = gcn.view();
    ctx.mean = mean.view();
    attention = attention_graph(graph.view(), n);
    ctx.attention = attention.view();
  }
};

Matrix from_json(const nlohmann::json& j) {
  if (j[0].is_array()) {
    Matrix m(std::int64_t(j.size()), std::int64_t(j[0].size()));
    for (std::size_t r = 0; r < j.size(); ++r)
      for (std::size_t c = 0; c < j[r].size(); ++c)
        m.at(std::int64_t(r), std::int64_t(c)) = j[r][c].get<float>();
    return m;
  }
  Matrix m(1, std::int64_t(j.size()));
  for (std::size_t c = 0; c < j.size(); ++c) m.at(0, std::int64_t(c)) = j[c].get<float>();
  return m;
}

void expect_matrix_near(const Matrix& got, const Matrix& want, double tol,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::int64_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got.data()[i], want.data()[i], tol) << what << " [" << i << "]";
}

TEST(Model, GoldenTwoLayerGcnMatchesNumPy) {
  std::ifstream f(test::test_data("golden/gcn_golden.json"));
  ASSERT_TRUE(f) << "missing fixture";
  const auto cases = nlohmann::json::parse(f);
  for (const auto& c : cases) {
    Tiny t;
    std::vector<std::pair<int, int>> edges;
    for (const auto& e : c["edges"]) edges.emplace_back(e[0].get<int>(), e[1].get<int>());
    t.build(c["n"].get<std::int64_t>(), edges);
    ModelConfig cfg;
    cfg.layers = 2;
    cfg.in = c["fin"];
    cfg.hidden = c["hidden"];
    cfg.out = c["fout"];
    cfg.dropout = 0;
    Model model(cfg, 0);
    auto params = model.params();  // layer0.weight, layer0.bias, layer1.weight, layer1.bias
    ASSERT_EQ(params.size(), 4u);
    params[0]->value = from_json(c["W1"]);
    params[1]->value = from_json(c["b1"]);
    params[2]->value = from_json(c["W2"]);
    params[3]->value = from_json(c["b2"]);
    Matrix x = from_json(c["X"]);
    const std::vector<std::int32_t> labels = c["labels"].get<std::vector<std::int32_t>>();
    const std::vector<NodeId> train = c["train"].get<std::vector<NodeId>>();
    Backend& be = cpu_backend();
    const MatrixView z = model.forward(be, t.ctx, x.view(), true, 0, 1);
    Matrix logits(z.rows, z.cols);
    be.copy(z, logits.view());
    expect_matrix_near(logits, from_json(c["logits"]), 1e-5,
                       c["name"].get<std::string>() + " logits");
    Matrix d(z.rows, z.cols);
    std::int64_t counted = 0;
    const double sum = be.softmax_xent(z, labels.data(), train.data(), std::int64_t(train.size()),
                                       4.0, d.view(), &counted);
    EXPECT_EQ(counted, 4);
    EXPECT_NEAR(sum / 4.0, c["loss"].get<double>(), 1e-5);
    model.backward(be, t.ctx, d.view());
    expect_matrix_near(params[0]->grad, from_json(c["dW1"]), 1e-5, "dW1");
    expect_matrix_near(params[1]->grad, from_json(c["db1"]), 1e-5, "db1");
    expect_matrix_near(params[2]->grad, from_json(c["dW2"]), 1e-5, "dW2");
    expect_matrix_near(params[3]->grad, from_json(c["db2"]), 1e-5, "db2");
  }
}

// GAT (concatenated and averaged heads, projected and identity residuals, one output head)
// against NumPy: logits, loss and every parameter's gradient (tests/data/golden/
// make_gat_golden.py, float64, its gradients central differences of its own forward).
TEST(Model, GoldenTwoLayerGatMatchesNumPy) {
  std::ifstream f(test::test_data("golden/gat_golden.json"));
  ASSERT_TRUE(f) << "missing fixture";
  const auto cases = nlohmann::json::parse(f);
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    Tiny t;
    std::vector<std::pair<int, int>> edges;
    for (const auto& e : c["edges"]) edges.emplace_back(e[0].get<int>(), e[1].get<int>());
    t.build(c["n"].get<std::int64_t>(), edges);
    ModelConfig cfg;
    cfg.kind = ModelKind::kGat;
    cfg.layers = 2;
    cfg.in = c["fin"];
    cfg.heads = c["heads"];
    cfg.hidden = c["hidden"];
    cfg.out_heads = c["out_heads"];
    cfg.out = c["classes"];
    cfg.residual = c["residual"];
    cfg.dropout = 0;
    cfg.attn_dropout = 0;
    Model model(cfg, 0);
    auto params = model.params();
    ASSERT_EQ(params.size(), c["params"].size()) << name;
    for (Param* p : params) {
      ASSERT_TRUE(c["params"].contains(p->name)) << name << ": " << p->name;
      Matrix v = from_json(c["params"][p->name]);
      ASSERT_EQ(v.rows(), p->value.rows()) << name << ": " << p->name;
      ASSERT_EQ(v.cols(), p->value.cols()) << name << ": " << p->name;
      p->value = std::move(v);
    }
    const Matrix x = from_json(c["X"]);
    const std::vector<std::int32_t> labels = c["labels"].get<std::vector<std::int32_t>>();
    const std::vector<NodeId> train = c["train"].get<std::vector<NodeId>>();
    Backend& be = cpu_backend();
    const MatrixView z = model.forward(be, t.ctx, x.view(), true, 0, 1);
    Matrix logits(z.rows, z.cols);
    be.copy(z, logits.view());
    expect_matrix_near(logits, from_json(c["logits"]), 1e-5, name + " logits");
    const auto labelled = std::count_if(train.begin(), train.end(),
                                        [&](NodeId v) { return labels[std::size_t(v)] >= 0; });
    Matrix d(z.rows, z.cols);
    std::int64_t counted = 0;
    const double sum = be.softmax_xent(z, labels.data(), train.data(), std::int64_t(train.size()),
                                       double(labelled), d.view(), &counted);
    EXPECT_EQ(counted, labelled) << name;
    EXPECT_NEAR(sum / double(counted), c["loss"].get<double>(), 1e-5) << name;
    model.backward(be, t.ctx, d.view());
    for (Param* p : params)
      expect_matrix_near(p->grad, from_json(c["grads"][p->name]), 2e-5, name + " d" + p->name);
  }
}

// Central differences of the mean cross-entropy against the analytic gradients, entry by entry.
void check_gradients(const std::string& kind, bool batch_norm, float dropout, std::int64_t in,
                     std::int64_t hidden, const std::function<void(ModelConfig&)>& tweak = {}) {
  Tiny t;
  t.build(12, {{0, 1},
               {1, 2},
               {2, 3},
               {3, 4},
               {4, 5},
               {5, 0},
               {6, 7},
               {7, 8},
               {8, 6},
               {2, 9},
               {9, 10},
               {1, 10}});
  ModelConfig cfg;
  cfg.kind = parse_model_kind(kind);
  cfg.layers = 3;
  cfg.in = in;
  cfg.hidden = hidden;
  cfg.out = 3;
  cfg.dropout = dropout;
  cfg.input_dropout = dropout > 0;
  cfg.batch_norm = batch_norm;
  if (tweak) tweak(cfg);
  Model model(cfg, 5);
  std::mt19937 g{17};
  std::normal_distribution<float> nd;
  // Biases start at zero, so a dead unit sits exactly on ReLU's kink (pre-activation 0 + 0) where
  // the one-sided finite difference and the subgradient 0 disagree: move every parameter off it.
  for (Param* p : model.params())
    if (p->name.find("bias") != std::string::npos)
      for (auto& v : p->value.storage()) v = 0.1f * nd(g);
  Matrix x(12, in);
  for (auto& v : x.storage()) v = nd(g);
  std::vector<std::int32_t> labels(12);
  for (int i = 0; i < 12; ++i) labels[std::size_t(i)] = i % 3;
  const std::vector<NodeId> rows = {0, 2, 3, 5, 7, 8, 10, 11};
  Backend& be = cpu_backend();
  Matrix d(12, 3);
  auto loss = [&]() {
    const MatrixView z = model.forward(be, t.ctx, x.view(), true, 99, 4);
    return be.softmax_xent(z, labels.data(), rows.data(), 8, 8.0, d.view(), nullptr) / 8.0;
  };
  loss();
  model.backward(be, t.ctx, d.view());
  for (Param* p : model.params()) {
    const Matrix analytic = p->grad;
    for (std::int64_t i = 0; i < p->value.size();
         i += std::max<std::int64_t>(1, p->value.size() / 17)) {
      // A step small enough that ReLU kinks are rarely crossed. GAT's LeakyReLU sits on every
      // edge's score, and with dropout some score lies within 1e-3 of its kink: a smaller step.
      const float step = kind == "gat" ? 1e-4f : 1e-3f;
      const double numeric = test::central_difference(p->value.data()[i], step, loss);
      EXPECT_NEAR(analytic.data()[i], numeric, 2e-3 + 3e-2 * std::abs(numeric))
          << kind << (batch_norm ? "+bn" : "") << " dropout " << dropout << " " << p->name << "["
          << i << "]";
    }
  }
}

TEST(Model, GradientsMatchFiniteDifferences) {
  check_gradients("gcn", false, 0.f, 5, 8);  // widening then narrowing layers
  check_gradients("gcn", false, 0.f, 9, 4);  // narrowing first layer (transform first)
  check_gradients("gcn", true, 0.f, 5, 8);
  check_gradients("gcn", false, 0.3f, 6, 8);  // fixed masks: (seed, epoch) are the same each call
  check_gradients("sage", false, 0.f, 5, 8);
  check_gradients("sage", true, 0.2f, 9, 4);
}

TEST(Model, GatGradientsMatchFiniteDifferences) {
  check_gradients("gat", false, 0.f, 5, 4);  // one head: nothing concatenated or averaged
  check_gradients("gat", false, 0.f, 5, 3, [](ModelConfig& c) {
    c.heads = 2;
    c.out_heads = 3;  // averaged output heads
  });
  check_gradients("gat", false, 0.3f, 6, 3, [](ModelConfig& c) {
    c.heads = 2;
    c.out_heads = 3;
    c.attn_dropout = 0.4f;  // fixed masks, as for feature dropout
    c.residual = true;      // 6 -> 2 x 3: the identity; then projected
  });
  check_gradients("gat", false, 0.f, 4, 3, [](ModelConfig& c) {
    c.heads = 3;
    c.residual = true;  // 4 -> 9: projected; 9 -> 9: identity; 9 -> 3 x 1: projected
  });
}

TEST(Model, SameSeedSameWeightsAndLosses) {
  Tiny t;
  t.build(30, {{0, 1}, {1, 2}, {2, 3}, {5, 9}, {9, 20}, {20, 29}, {3, 29}});
  ModelConfig cfg;
  cfg.in = 7;
  cfg.hidden = 5;
  cfg.out = 2;
  cfg.batch_norm = true;
  Matrix x(30, 7, 0.5f);
  for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = float(i % 13) * 0.1f;
  auto run = [&](std::uint64_t seed) {
    Model m(cfg, seed);
    std::vector<float> out;
    for (int epoch = 1; epoch <= 3; ++epoch) {
      const MatrixView z = m.forward(cpu_backend(), t.ctx, x.view(), true, seed, epoch);
      out.insert(out.end(), z.data, z.data + z.size());
    }
    return out;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

// A random graph of n nodes and m edges with Gaussian features and every node labelled (i %
// classes), all drawn from one seeded generator: what the tests below train on.
struct RandomTask {
  std::mt19937 g;
  std::int64_t n, in, classes;
  Tiny t;
  Matrix x;
  std::vector<std::int32_t> labels;
  std::vector<NodeId> rows;
  RandomTask(std::int64_t n_, int m, std::int64_t in_, int classes_, std::uint32_t seed)
      : g{seed}, n(n_), in(in_), classes(classes_) {
    std::vector<std::pair<int, int>> edges;
    edges.reserve(std::size_t(m));
    std::uniform_int_distribution<int> node(0, int(n) - 1);
    for (int e = 0; e < m; ++e) edges.emplace_back(node(g), node(g));
    t.build(n, edges);
    x = features();
    for (std::int64_t i = 0; i < n; ++i) {
      labels.push_back(std::int32_t(i % classes));
      rows.push_back(NodeId(i));
    }
  }
  // A 3-layer model with batch norm for this task's widths.
  ModelConfig config(std::int64_t hidden) const {
    ModelConfig cfg;
    cfg.layers = 3;
    cfg.in = in;
    cfg.hidden = hidden;
    cfg.out = classes;
    cfg.batch_norm = true;
    return cfg;
  }
  // Another n x in Gaussian feature matrix from the same generator.
  Matrix features() {
    Matrix f(n, in);
    std::normal_distribution<float> nd;
    for (auto& v : f.storage()) v = nd(g);
    return f;
  }
  // Every logit and parameter gradient of `epochs` training steps (Adam between them) on input,
  // each step followed, when `evaluate`, by an evaluation forward's logits.
  std::vector<float> train(Model& model, const GraphContext& ctx, const MatrixView& input,
                           int epochs, std::uint64_t seed, bool evaluate) {
    Backend& be = cpu_backend();
    std::vector<float> seen;
    Matrix d(n, model.config().out);
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const MatrixView z = model.forward(be, ctx, input, true, seed, epoch);
      seen.insert(seen.end(), z.data, z.data + z.size());
      be.softmax_xent(z, labels.data(), rows.data(), n, double(n), d.view(), nullptr);
      model.backward(be, ctx, d.view());
      for (Param* p : model.params()) {
        seen.insert(seen.end(), p->grad.data(), p->grad.data() + p->grad.size());
        be.adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size(),
                AdamStep{});
      }
      if (evaluate) {
        const MatrixView e = model.forward(be, ctx, input, false, seed, epoch);
        seen.insert(seen.end(), e.data, e.data + e.size());
      }
    }
    return seen;
  }
};

// The memory plan: a GCN keeps one N x hidden slab per hidden layer plus one shared gradient
// slab, whatever the layer order, batch norm or dropout (keeping every intermediate took seven
// for three layers with batch norm); the narrow first-layer aggregate and the logits come on top.
TEST(Model, GcnActivationMemoryIsOneSlabPerHiddenLayerPlusOne) {
  const std::int64_t n = 200, in = 8, hidden = 32, out = 4;
  RandomTask task(n, 800, in, out, 3);
  const Tiny& t = task.t;
  const Matrix& x = task.x;
  const auto& labels = task.labels;
  const auto& rows = task.rows;
  for (int layers : {2, 3, 4})
    for (bool bn : {false, true}) {
      ModelConfig cfg;
      cfg.layers = layers;
      cfg.in = in;
      cfg.hidden = hidden;
      cfg.out = out;
      cfg.batch_norm = bn;
      Model model(cfg, 1);
      Backend& be = cpu_backend();
      Matrix d(n, out);
      for (int epoch = 1; epoch <= 2; ++epoch) {
        const MatrixView z = model.forward(be, t.ctx, x.view(), true, 7, epoch);
        be.softmax_xent(z, labels.data(), rows.data(), n, double(n), d.view(), nullptr);
        model.backward(be, t.ctx, d.view());
        model.forward(be, t.ctx, x.view(), false, 7, epoch);
      }
      const std::int64_t floats = (layers - 1) * n * hidden  // saved slabs
                                  + n * hidden               // the gradient slab
                                  + n * in                   // A X of the widening first layer
                                  + 2 * n * out;             // the last layer's staging and logits
      const std::int64_t mask_bits =
          bn ? (layers - 1) * n * 64 : 0;  // batch-norm layers' dropout masks
      EXPECT_EQ(model.activation_bytes(), floats * 4 + mask_bits / 8)
          << layers << " layers" << (bn ? " + bn" : "");
    }
}

// Model::infer: every layer's output equals the evaluation forward's, bit for bit, for every layer
// order and kind (GCN aggregate-first and transform-first, batch norm, SAGE's root term, GAT's
// heads, averaged output heads and residuals), x is not read after input_read, and a GCN's
// inference holds two slabs only.
TEST(Model, InferEqualsTheEvaluationForwardLayerByLayer) {
  const std::int64_t n = 150, in = 6;
  RandomTask task(n, 600, in, 3, 11);
  const Tiny& t = task.t;
  struct Case {
    std::string kind;
    int layers;
    std::int64_t hidden;
    bool bn;
    std::function<void(ModelConfig&)> tweak;
  };
  const std::vector<Case> cases = {
      {"gcn", 3, 16, false, {}},  // widening first layer (aggregate first), then transform first
      {"gcn", 2, 4, false, {}},   // narrowing first layer
      {"gcn", 1, 8, false, {}},
      {"gcn", 3, 16, true, {}},
      {"sage", 3, 8, false, {}},
      {"sage", 3, 4, true, {}},
      {"gat", 2, 4, false, [](ModelConfig& c) { c.heads = 2; }},
      {"gat", 3, 3, false,
       [](ModelConfig& c) {
         c.heads = 2;  // 6 -> 2 x 3: the identity residual, then projected
         c.out_heads = 3;
         c.residual = true;
         c.attn_dropout = 0.3f;
       }},
  };
  Backend& be = cpu_backend();
  for (const Case& k : cases) {
    ModelConfig cfg;
    cfg.kind = parse_model_kind(k.kind);
    cfg.layers = k.layers;
    cfg.in = in;
    cfg.hidden = k.hidden;
    cfg.out = 3;
    cfg.dropout = 0.2f;
    cfg.batch_norm = k.bn;
    if (k.tweak) k.tweak(cfg);
    const std::string what = k.kind + " " + std::to_string(k.layers) + " layers" +
                             (k.bn ? " + bn" : "") + " hidden " + std::to_string(k.hidden);
    Model model(cfg, 3);
    Matrix d(n, 3);
    for (int epoch = 1; epoch <= 3; ++epoch) {  // moved weights and running statistics
      const MatrixView z = model.forward(be, t.ctx, task.x.view(), true, 7, epoch);
      be.softmax_xent(z, task.labels.data(), task.rows.data(), n, double(n), d.view(), nullptr);
      model.backward(be, t.ctx, d.view());
      for (Param* p : model.params())
        for (std::int64_t i = 0; i < p->value.size(); ++i)
          p->value.data()[i] -= 0.05f * p->grad.data()[i];
    }
    std::vector<std::vector<float>> want, got;
    auto keep = [](std::vector<std::vector<float>>& into) {
      return [&into](int layer, const MatrixView& out) {
        EXPECT_EQ(std::size_t(layer), into.size());
        into.emplace_back(out.data, out.data + out.size());
      };
    };
    const MatrixView fwd = model.forward(be, t.ctx, task.x.view(), false, 7, 3, keep(want));
    const std::vector<float> logits(fwd.data, fwd.data + fwd.size());
    const MatrixView inf = model.infer(be, t.ctx, task.x.view(), keep(got));
    ASSERT_EQ(got.size(), std::size_t(k.layers)) << what;
    ASSERT_EQ(want.size(), got.size()) << what;
    for (std::size_t l = 0; l < got.size(); ++l) {
      ASSERT_EQ(want[l].size(), got[l].size()) << what << " layer " << l;
      EXPECT_EQ(0, std::memcmp(want[l].data(), got[l].data(), got[l].size() * 4))
          << what << " layer " << l;
    }
    ASSERT_EQ(inf.size(), std::int64_t(logits.size())) << what;
    EXPECT_EQ(0, std::memcmp(inf.data, logits.data(), logits.size() * 4)) << what;
    EXPECT_FALSE(std::all_of(logits.begin(), logits.end(), [](float v) { return v == 0; }));
    // A second call reuses the slabs and gives the same bits, and x is never read once
    // input_read has been called (once): the caller may free it there.
    const std::int64_t bytes = model.inference_bytes();
    Matrix x = task.x;
    int reads = 0;
    const MatrixView again = model.infer(be, t.ctx, x.view(), {}, [&] {
      ++reads;
      x.fill(std::nanf(""));
    });
    EXPECT_EQ(reads, 1) << what;
    EXPECT_EQ(0, std::memcmp(again.data, logits.data(), logits.size() * 4)) << what;
    EXPECT_EQ(model.inference_bytes(), bytes) << what;
    const std::int64_t widest = std::max(
        {in, k.hidden * (k.kind == "gat" ? cfg.heads : 1), std::int64_t(3) * cfg.out_heads});
    const std::int64_t slabs = k.kind == "gcn" ? 2 : 3;
    if (k.kind == "gat")
      EXPECT_LE(model.inference_bytes(),
                (slabs * n * widest + 2 * n * cfg.heads * 2 +
                 t.attention.indices.size() * std::max(cfg.heads, cfg.out_heads)) *
                    4)
          << what;
    else
      EXPECT_LE(model.inference_bytes(), slabs * n * widest * 4) << what;
  }
}

// GraphContext::static_input: the widening first layer aggregates the unchanging features once
// per model, with outputs and gradients identical to aggregating every call; input dropout, or
// other features, make it aggregate again.
TEST(Model, StaticInputAggregatesTheFeaturesOnce) {
  const std::int64_t n = 120, in = 6, hidden = 16, out = 3;
  RandomTask task(n, 500, in, out, 5);
  const Tiny& t = task.t;
  const Matrix& x = task.x;
  const Matrix x2 = task.features();
  const auto& labels = task.labels;
  const auto& rows = task.rows;
  const ModelConfig cfg = task.config(hidden);
  // Logits and first-layer weight gradients of four training steps (the third on x2), and the
  // number of SpMM calls each took.
  auto run = [&](bool static_input, bool input_dropout, std::vector<std::int64_t>* spmm_calls) {
    GraphContext ctx = t.ctx;
    ctx.static_input = static_input;
    ModelConfig c = cfg;
    c.input_dropout = input_dropout;
    Model model(c, 2);
    Backend& be = cpu_backend();
    OpProfile profile;
    const ProfileScope profiling(profile);
    std::vector<float> seen;
    Matrix d(n, out);
    for (int epoch = 1; epoch <= 4; ++epoch) {
      const std::int64_t before =
          profile.totals().count("spmm") ? profile.totals().at("spmm").calls : 0;
      const Matrix& in_x = epoch == 3 ? x2 : x;
      const MatrixView z = model.forward(be, ctx, in_x.view(), true, 9, epoch);
      seen.insert(seen.end(), z.data, z.data + z.size());
      be.softmax_xent(z, labels.data(), rows.data(), n, double(n), d.view(), nullptr);
      model.backward(be, ctx, d.view());
      const Matrix& gw = model.params()[0]->grad;
      seen.insert(seen.end(), gw.data(), gw.data() + gw.size());
      for (Param* p : model.params())
        cpu_backend().adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(),
                           p->value.size(), AdamStep{});
      spmm_calls->push_back(profile.totals().at("spmm").calls - before);
    }
    return seen;
  };
  std::vector<std::int64_t> every, once, dropped, dropped_static;
  const auto a = run(false, false, &every), b = run(true, false, &once);
  EXPECT_EQ(a, b);
  // Forward: one SpMM per layer; backward: the two upper layers'. Reused: epoch 2 and 4 skip
  // the first layer's (epoch 3 has new features, epoch 4 returns to the first ones).
  EXPECT_EQ(every, (std::vector<std::int64_t>{5, 5, 5, 5}));
  EXPECT_EQ(once, (std::vector<std::int64_t>{5, 4, 5, 5}));
  EXPECT_EQ(run(false, true, &dropped), run(true, true, &dropped_static));
  EXPECT_EQ(dropped_static, every) << "input dropout changes the features every epoch";
}

// Backward multiplies by the operator itself when it is symmetric: the same bits as with an
// explicit transpose, for every logit and gradient over several steps.
TEST(Model, ASymmetricOperatorStandsForItsTransposeBitForBit) {
  const std::int64_t n = 90, in = 5, hidden = 12, out = 3;
  RandomTask task(n, 0, in, out, 8);
  std::vector<std::pair<int, int>> edges;
  for (int u = 0; u < n; ++u)  // no self-loops: the operator then adds exactly one per row
    for (int k : {1, 7, 20}) edges.emplace_back(u, int((u + k) % n));
  task.t.build(n, edges);
  ASSERT_TRUE(task.t.gcn.symmetric);
  GraphOperator explicit_op;
  explicit_op.fwd = task.t.gcn.fwd;
  explicit_op.bwd = transpose(task.t.gcn.fwd);
  ModelConfig cfg;
  cfg.layers = 3;
  cfg.in = in;
  cfg.hidden = hidden;
  cfg.out = out;
  cfg.dropout = 0.3f;
  auto run = [&](const GraphOperator& op) {
    GraphContext ctx = task.t.ctx;
    ctx.gcn = op.view();
    Model model(cfg, 4);
    return task.train(model, ctx, task.x.view(), 3, 6, /*evaluate=*/false);
  };
  EXPECT_EQ(run(task.t.gcn), run(explicit_op));
}

// A caller that hands in layer 0's A X (aggregate_input) gets the same bits as the model's own
// cached aggregate, and the model never reads x: it may be a shape without data.
TEST(Model, AnInputAggregateStandsForTheFeaturesBitForBit) {
  const std::int64_t n = 100, in = 6, hidden = 16, out = 3;
  RandomTask task(n, 400, in, out, 11);
  const ModelConfig cfg = task.config(hidden);
  ASSERT_TRUE(reads_input_only_aggregated(cfg));
  auto run = [&](bool handed_in) {
    GraphContext ctx = task.t.ctx;
    ctx.static_input = true;
    Matrix ax;
    MatrixView x = task.x.view();
    if (handed_in) {
      ax = aggregate_input(cpu_backend(), ctx, x);
      ctx.input_aggregate = ax.view();
      x.data = nullptr;
    }
    Model model(cfg, 3);
    return task.train(model, ctx, x, 3, 5, /*evaluate=*/true);
  };
  EXPECT_EQ(run(true), run(false));
  // Where x is read beside A X, or changes, or the layer transforms first, nothing stands for it.
  ModelConfig c = cfg;
  c.kind = ModelKind::kSage;
  EXPECT_FALSE(reads_input_only_aggregated(c));
  c = cfg;
  c.input_dropout = true;
  EXPECT_FALSE(reads_input_only_aggregated(c));
  c.dropout = 0;
  EXPECT_TRUE(reads_input_only_aggregated(c));
  c = cfg;
  c.hidden = in;
  EXPECT_FALSE(reads_input_only_aggregated(c));
  c = cfg;
  c.layers = 1;
  EXPECT_FALSE(reads_input_only_aggregated(c));  // 6 -> 3 classes: transform first
}

TEST(Model, RejectsImpossibleConfigurations) {
  ModelConfig cfg;
  cfg.in = 3;
  cfg.out = 2;
  EXPECT_THROW(parse_model_kind("gin"), ParamError);
  EXPECT_EQ(parse_model_kind(to_string(ModelKind::kGat)), ModelKind::kGat);
  cfg.kind = ModelKind::kGcn;
  cfg.dropout = 1.f;
  EXPECT_THROW(Model(cfg, 0), ParamError);
  cfg.dropout = 0.5f;
  cfg.kind = ModelKind::kGat;
  for (const auto& bad : std::initializer_list<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.heads = 0; }, [](ModelConfig& c) { c.out_heads = 0; },
           [](ModelConfig& c) { c.attn_dropout = 1.f; },
           [](ModelConfig& c) { c.batch_norm = true; }, [](ModelConfig& c) { c.layers = 32; }}) {
    ModelConfig c = cfg;
    bad(c);
    EXPECT_THROW(Model(c, 0), ParamError);
  }
  EXPECT_NO_THROW(Model(cfg, 0));
}

// The spellings --model and --matmul-precision accept (and checkpoints record), and the exact line
// for one they do not.
TEST(OptionSpellings, ModelAndMatmulPrecision) {
  test::expect_spellings<ModelKind>(
      {{ModelKind::kGcn, "gcn"}, {ModelKind::kSage, "sage"}, {ModelKind::kGat, "gat"}},
      parse_model_kind, [](ModelKind k) { return to_string(k); });
  EXPECT_EQ(test::param_error([] { parse_model_kind("gin"); }),
            "unknown --model 'gin' (expected gcn, sage or gat)");
  test::expect_spellings<MatmulPrecision>({{MatmulPrecision::kFp32, "fp32"},
                                           {MatmulPrecision::kTf32, "tf32"},
                                           {MatmulPrecision::kBf16, "bf16"}},
                                          parse_matmul_precision,
                                          [](MatmulPrecision p) { return to_string(p); });
  EXPECT_EQ(test::param_error([] { parse_matmul_precision("fp16"); }),
            "--matmul-precision must be fp32, tf32 or bf16 (got 'fp16')");
}

}  // namespace
}  // namespace halo

// Single-process full-batch training (the distributed trainer reuses the model and protocol).
#include "halo/runtime/trainer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <ostream>

#include "halo/gnn/metrics.h"
#include "halo/gnn/timed_backend.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/npz.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

void TrainOptions::check() const {
  model.check();
  if (!(lr > 0)) throw ParamError("--lr must be positive");
  if (weight_decay < 0) throw ParamError("--weight-decay must be >= 0");
  if (epochs < 1) throw ParamError("--epochs must be at least 1");
  if (runs < 1) throw ParamError("--runs must be at least 1");
  if (eval_every < 1) throw ParamError("--eval-every must be at least 1");
  if (threads < 0) throw ParamError("--threads must be >= 0");
  if (checkpoint_every < 1) throw ParamError("--checkpoint-every must be at least 1");
  if (resume && checkpoint.empty()) throw ParamError("--resume needs --checkpoint DIR");
}

namespace {
// A published configuration; every field is set on apply, so presets never leak into each other.
struct Preset {
  const char* name;
  int layers;
  std::int64_t hidden;
  float dropout;
  bool input_dropout, batch_norm;
  float weight_decay;
  bool decay_first_layer_only, norm_features;
  int epochs;
  const char* split;  // "" = the dataset's default
};
constexpr Preset kPresets[] = {
    // Kipf & Welling, ICLR 2017: 2 x 16, dropout also on the input, L2 on the first layer only.
    {"planetoid-gcn", 2, 16, 0.5f, true, false, 5e-4f, true, true, 200, "public"},
    // OGB's reference GCNs.
    {"ogbn-arxiv-gcn", 3, 256, 0.5f, false, true, 0.f, false, false, 500, ""},
    {"ogbn-products-gcn", 3, 256, 0.5f, false, false, 0.f, false, false, 300, ""},
    {"ogbn-proteins-gcn", 3, 256, 0.f, false, false, 0.f, false, false, 1000, ""},
};
}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.push_back(p.name);
  return out;
}

void apply_preset(const std::string& name, TrainOptions& o) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    o.model.kind = "gcn";
    o.model.layers = p.layers;
    o.model.hidden = p.hidden;
    o.model.dropout = p.dropout;
    o.model.input_dropout = p.input_dropout;
    o.model.batch_norm = p.batch_norm;
    o.lr = 0.01f;
    o.weight_decay = p.weight_decay;
    o.decay_first_layer_only = p.decay_first_layer_only;
    o.norm_features = p.norm_features;
    o.epochs = p.epochs;
    o.split = p.split;
    return;
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw ParamError("unknown --preset '" + name + "' (known: " + known + ")");
}

json TrainSummary::to_json() const {
  return {{"type", "summary"},         {"metric", metric},
          {"valid_mean", valid_mean},  {"valid_std", valid_std},
          {"test_mean", test_mean},    {"test_std", test_std},
          {"runs", runs.size()},       {"epoch_time_median_s", epoch_time_median_s},
          {"peak_rss_mb", peak_rss_mb}};
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

void mean_std(const std::vector<double>& v, double* mean, double* sd) {
  *mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double s = 0;
  for (double x : v) s += (x - *mean) * (x - *mean);
  *sd = v.size() > 1 ? std::sqrt(s / double(v.size() - 1)) : 0.0;  // sample std, as numpy's ddof=1
}

// What checkpoints must match to be resumed: every option that changes the trajectory. The
// epoch count is not one of them: resuming a finished run with more epochs trains it further.
json trajectory_key(const TrainOptions& o, const fs::path& dataset_meta_fp) {
  const ModelConfig& m = o.model;
  return {{"model", m.kind},        {"layers", m.layers},        {"hidden", m.hidden},
          {"dropout", m.dropout},   {"input_dropout", m.input_dropout}, {"batch_norm", m.batch_norm},
          {"lr", o.lr},             {"weight_decay", o.weight_decay},
          {"decay_first_layer_only", o.decay_first_layer_only}, {"norm_features", o.norm_features},
          {"split", o.split},       {"dataset", dataset_meta_fp.string()}};
}

struct RunState {
  int epoch = 0;  // last completed epoch
  std::int64_t adam_step = 0;
  RunResult result;
  std::vector<std::int32_t> best_classes;  // multiclass predictions at the best epoch
  std::vector<float> best_scores;          // multilabel scores at the best epoch
};

fs::path run_dir(const fs::path& ckpt, int run) { return ckpt / ("run-" + std::to_string(run)); }

void save_checkpoint(const fs::path& dir, Model& model, const RunState& st, const json& key) {
  StagingDir stage(dir, /*overwrite=*/true);
  ArrayDir a(stage.path());
  for (Param* p : model.params()) {
    a.put(p->name + ".value", p->value.storage());
    a.put(p->name + ".m", p->m.storage());
    a.put(p->name + ".v", p->v.storage());
  }
  for (auto& [name, buf] : model.buffers()) a.put(name, *buf);
  if (!st.best_classes.empty()) a.put("best_classes", st.best_classes);
  if (!st.best_scores.empty()) a.put("best_scores", st.best_scores);
  json meta = {{"key", key},
               {"epoch", st.epoch},
               {"adam_step", st.adam_step},
               {"seed", st.result.seed},
               {"best_epoch", st.result.best_epoch},
               {"best_valid", st.result.best_valid},
               {"test_at_best", st.result.test_at_best},
               {"train_at_best", st.result.train_at_best},
               {"final_loss", st.result.final_loss},
               {"epoch_seconds", st.result.epoch_seconds}};
  a.write_meta(std::move(meta), "halo-checkpoint", 1);
  stage.commit();
}

// Restores model and state from dir; false when there is no checkpoint there.
bool load_checkpoint(const fs::path& dir, Model& model, RunState& st, const json& key) {
  if (!fs::exists(dir / "meta.json")) return false;
  const json meta = read_meta(dir, "halo-checkpoint", 1);
  if (meta.at("key") != key)
    throw ParamError(dir.string() + ": checkpoint was made with other options (" + meta.at("key").dump() +
                     "); resume with the same options or start a new checkpoint directory");
  ReadOptions ro;
  auto restore = [&](const std::string& name, std::vector<float>& dst) {
    const Array<float> a = map_listed<float>(dir, meta, name, ro, dst.size(), 1);
    std::copy(a.begin(), a.end(), dst.begin());
  };
  for (Param* p : model.params()) {
    restore(p->name + ".value", p->value.storage());
    restore(p->name + ".m", p->m.storage());
    restore(p->name + ".v", p->v.storage());
  }
  for (auto& [name, buf] : model.buffers()) restore(name, *buf);
  st.epoch = meta.at("epoch").get<int>();
  st.adam_step = meta.at("adam_step").get<std::int64_t>();
  st.result.seed = meta.at("seed").get<std::uint64_t>();
  st.result.best_epoch = meta.at("best_epoch").get<int>();
  st.result.best_valid = meta.at("best_valid").get<double>();
  st.result.test_at_best = meta.at("test_at_best").get<double>();
  st.result.train_at_best = meta.at("train_at_best").get<double>();
  st.result.final_loss = meta.at("final_loss").get<double>();
  st.result.epoch_seconds = meta.at("epoch_seconds").get<std::vector<double>>();
  const Array<std::int32_t> bc = map_listed<std::int32_t>(dir, meta, "best_classes", ro, kAnyShape, 1, false);
  st.best_classes.assign(bc.begin(), bc.end());
  const Array<float> bs = map_listed<float>(dir, meta, "best_scores", ro, kAnyShape, 1, false);
  st.best_scores.assign(bs.begin(), bs.end());
  return true;
}

}  // namespace

TrainSummary train_dataset(const fs::path& dataset, const TrainOptions& opt_in, std::ostream& out) {
  TrainOptions opt = opt_in;
  const GraphDataset d = read_graph_dataset(dataset);
  const std::int64_t n = d.num_nodes();
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  if (d.label_kind == LabelKind::kNone) throw ParamError(dataset.string() + ": the dataset has no labels");
  if (d.num_features == 0) throw ParamError(dataset.string() + ": the dataset has no node features");
  if (opt.split.empty()) opt.split = d.split("public") ? "public" : (d.splits.empty() ? "" : d.splits[0].name);
  const Split* split = d.split(opt.split);
  if (!split) throw ParamError(dataset.string() + ": no split named '" + opt.split + "'");
  const bool multilabel = d.label_kind == LabelKind::kMultilabel;
  opt.model.in = d.num_features;
  opt.model.out = multilabel ? d.label_cols : d.num_classes;
  opt.check();

  // Inputs: features as mapped, or a row-normalised copy.
  Matrix xnorm;
  MatrixView x{const_cast<float*>(d.features.data()), n, d.num_features, Device::kCpu};
  if (opt.norm_features) {
    xnorm.resize(n, d.num_features);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n; ++r) {
      const float* s = x.row(r);
      double sum = 0;
      for (std::int64_t c = 0; c < x.cols; ++c) sum += s[c];
      const float inv = sum != 0 ? float(1.0 / sum) : 0.f;
      for (std::int64_t c = 0; c < x.cols; ++c) xnorm.at(r, c) = s[c] * inv;
    }
    x = xnorm.view();
  }
  std::vector<std::int32_t> degree(static_cast<std::size_t>(n));
  const CsrView g = d.graph.view();
  for (std::int64_t v = 0; v < n; ++v) degree[std::size_t(v)] = std::int32_t(g.degree(NodeId(v)));
  GraphOperator gcn, mean;
  if (opt.model.kind == "gcn") gcn = gcn_operator(g, n, degree.data());
  else mean = mean_operator(g, n);
  GraphContext ctx;
  ctx.owned = ctx.all = n;
  ctx.gcn = &gcn;
  ctx.mean = &mean;
  ctx.global_nodes = n;

  TimedBackend timed(cpu_backend());
  Backend& be = opt.profile ? static_cast<Backend&>(timed) : cpu_backend();
  const std::int32_t* labels = d.labels.data();
  const std::int64_t ntrain = std::int64_t(split->train.size());
  std::int64_t labelled = 0;  // the loss is a mean over labelled training rows (entries, multi-label)
  for (NodeId v : split->train)
    for (std::int64_t c = 0; c < d.label_cols; ++c) labelled += labels[std::int64_t(v) * d.label_cols + c] >= 0;
  if (labelled == 0) throw ParamError("split '" + opt.split + "' has no labelled training nodes");

  std::ofstream log;
  if (!opt.log.empty()) {
    log.open(opt.log, opt.resume ? std::ios::app : std::ios::trunc);
    if (!log) throw_system(opt.log, "cannot open log");
  }
  const json dmeta = read_dataset_meta(dataset);
  const json key = trajectory_key(opt, dmeta.value("fingerprint", ""));

  TrainSummary summary;
  summary.metric = multilabel ? "rocauc" : "acc";
  Matrix dlogits(n, opt.model.out);
  // Metric on a split's rows of the current outputs.
  std::vector<float> scores_buf;
  std::vector<std::int32_t> label_buf;
  auto metric = [&](const MatrixView& logits, const Array<NodeId>& rows) -> double {
    if (!multilabel) return accuracy_counts(logits, labels, rows.data(), std::int64_t(rows.size())).value();
    const std::int64_t t = d.label_cols;
    scores_buf.resize(rows.size() * std::size_t(t));
    label_buf.resize(rows.size() * std::size_t(t));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(logits.row(rows[i]), t, scores_buf.data() + i * std::size_t(t));
      std::copy_n(labels + std::int64_t(rows[i]) * t, t, label_buf.data() + i * std::size_t(t));
    }
    return rocauc(scores_buf.data(), label_buf.data(), std::int64_t(rows.size()), t);
  };

  std::vector<RunState> states;
  for (int run = 0; run < opt.runs; ++run) {
    RunState st;
    st.result.seed = opt.seed + std::uint64_t(run);
    Model model(opt.model, st.result.seed);
    for (Param* p : model.params())
      p->weight_decay = !opt.decay_first_layer_only || p->name.rfind("layer0.", 0) == 0 ? opt.weight_decay : 0.f;
    if (opt.resume && load_checkpoint(run_dir(opt.checkpoint, run), model, st, key) && !opt.quiet)
      out << "run " << run << ": resumed after epoch " << st.epoch << "\n";
    for (int epoch = st.epoch + 1; epoch <= opt.epochs; ++epoch) {
      Stopwatch clock;
      const MatrixView logits = model.forward(be, ctx, x, true, st.result.seed, epoch);
      double loss = multilabel
                        ? be.bce_logits(logits, labels, split->train.data(), ntrain, double(labelled), dlogits.view(), nullptr)
                        : be.softmax_xent(logits, labels, split->train.data(), ntrain, double(labelled), dlogits.view(), nullptr);
      loss /= double(labelled);
      model.backward(be, ctx, dlogits.view());
      ++st.adam_step;
      for (Param* p : model.params()) {
        AdamStep s;
        s.lr = opt.lr;
        s.weight_decay = p->weight_decay;
        s.step = st.adam_step;
        be.adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size(), s);
      }
      const double secs = clock.seconds();
      st.result.epoch_seconds.push_back(secs);
      st.result.final_loss = loss;
      st.epoch = epoch;
      json rec = {{"type", "epoch"}, {"run", run}, {"epoch", epoch}, {"loss", loss}, {"epoch_time_s", secs}};
      if (epoch % opt.eval_every == 0 || epoch == opt.epochs) {
        const MatrixView eval = model.forward(be, ctx, x, false, st.result.seed, epoch);
        const double tr = metric(eval, split->train), va = metric(eval, split->valid), te = metric(eval, split->test);
        rec["train"] = tr;
        rec["valid"] = va;
        rec["test"] = te;
        if (st.result.best_epoch == 0 || va > st.result.best_valid) {
          st.result.best_valid = va;
          st.result.test_at_best = te;
          st.result.train_at_best = tr;
          st.result.best_epoch = epoch;
          if (!opt.predictions_out.empty()) {
            if (multilabel) {
              st.best_scores.assign(eval.data, eval.data + eval.size());
            } else {
              const auto am = argmax_rows(eval);
              st.best_classes.assign(am.begin(), am.end());
            }
          }
        }
        if (!opt.quiet) {
          char line[200];
          std::snprintf(line, sizeof line,
                        "run %d epoch %4d  loss %.4f  train %.4f  valid %.4f  test %.4f  %.3f s\n", run,
                        epoch, loss, tr, va, te, secs);
          out << line << std::flush;
        }
      }
      if (log) log << rec.dump() << "\n";
      if (!opt.checkpoint.empty() && (epoch % opt.checkpoint_every == 0 || epoch == opt.epochs))
        save_checkpoint(run_dir(opt.checkpoint, run), model, st, key);
    }
    if (!opt.quiet) {
      char line[200];
      std::snprintf(line, sizeof line, "run %d: best valid %.4f at epoch %d, test %.4f\n", run,
                    st.result.best_valid, st.result.best_epoch, st.result.test_at_best);
      out << line;
    }
    states.push_back(std::move(st));
  }

  std::vector<double> valid, test, times;
  for (const auto& st : states) {
    summary.runs.push_back(st.result);
    valid.push_back(st.result.best_valid);
    test.push_back(st.result.test_at_best);
    times.insert(times.end(), st.result.epoch_seconds.begin(), st.result.epoch_seconds.end());
  }
  mean_std(valid, &summary.valid_mean, &summary.valid_std);
  mean_std(test, &summary.test_mean, &summary.test_std);
  summary.epoch_time_median_s = median(times);
  summary.peak_rss_mb = double(peak_rss_bytes()) / (1 << 20);
  if (log) log << summary.to_json().dump() << "\n";
  if (opt.profile) out << "time per kernel (training and evaluation):\n" << timed.report();

  if (!opt.predictions_out.empty()) {  // the run with the best validation score, in input order
    const auto best = std::max_element(states.begin(), states.end(), [](const RunState& a, const RunState& b) {
      return a.result.best_valid < b.result.best_valid;
    });
    const bool remap = !d.original_ids.empty();
    if (multilabel) {
      const std::size_t t = std::size_t(d.label_cols);
      std::vector<float> outv(best->best_scores.size());
      for (std::int64_t v = 0; v < n; ++v) {
        const std::size_t dst = std::size_t(remap ? d.original_ids[std::size_t(v)] : v);
        for (std::size_t c = 0; c < t; ++c)
          outv[dst * t + c] = 1.f / (1.f + std::exp(-best->best_scores[std::size_t(v) * t + c]));
      }
      write_npy(opt.predictions_out, outv.data(), std::uint64_t(n), t);
    } else {
      std::vector<std::int64_t> outv(std::size_t(n), 0);
      for (std::int64_t v = 0; v < n; ++v)
        outv[std::size_t(remap ? d.original_ids[std::size_t(v)] : v)] = best->best_classes[std::size_t(v)];
      write_npy(opt.predictions_out, outv.data(), std::uint64_t(n), 0);
    }
  }
  return summary;
}

}  // namespace halo

// `halo predict` (predict.h): a checkpoint's model over the whole graph, layer by layer.
//
// Memory: what training keeps for backward (a slab per hidden layer, the gradient slabs, the
// operators' transposes, Adam's moments in use) is never made. Model::infer rotates two (SAGE,
// GAT: three) [rows x widest layer] slabs; the operator is built without its transpose; the mapped
// graph's pages are dropped once the operator holds it, and the features' once layer 0 has read
// them. Embeddings leave in bounded chunks, written at their rows' places in the output file.
#include "halo/runtime/train/predict.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <ostream>

#include "comm/placement.h"
#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/npz.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/comm/halo_exchange.h"
#include "halo/runtime/memory/memory_model.h"
#include "train/rank_data.h"
#include "train/train_checkpoint.h"
#include "train/train_report.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

void PredictOptions::check() const {
  if (checkpoint.empty()) throw ParamError("--checkpoint is required");
  if (out.empty()) throw ParamError("-o (the predictions' .npy) is required");
  if (epoch != "best" && epoch != "last" &&
      (epoch.empty() || epoch.size() > 9 ||
       epoch.find_first_not_of("0123456789") != std::string::npos || std::stol(epoch) < 1))
    throw ParamError("--epoch must be best, last or an epoch number (got '" + epoch + "')");
  if (layer < -1) throw ParamError("--layer must be 0 or more");
  check_threads(threads, "--threads");
  if (layer >= 0 && embeddings_out.empty())
    throw ParamError("--layer chooses the layer --embeddings-out writes: give --embeddings-out");
  if (!embeddings_out.empty() && embeddings_out == out)
    throw ParamError("--embeddings-out and -o name the same file");
}

namespace {

// The run folders of a checkpoint that any rank sees: 1 + the largest R of CKPT/run-R.
int count_runs(Communicator& comm, const fs::path& ckpt) {
  std::int64_t runs = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("run-", 0) != 0 || name.size() < 5 || name.size() > 10 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos)
      continue;
    runs = std::max<std::int64_t>(runs, std::stol(name.substr(4)) + 1);
  }
  comm.allreduce(&runs, 1, ReduceOp::kMax);
  return int(runs);
}

// The run to take and its newest checkpoint's meta: opt.run, or the run whose best validation
// score is the highest (the first of equals, as train --predictions-out chooses).
std::pair<int, json> choose_run(Communicator& comm, const PredictOptions& opt) {
  const fs::path& ckpt = opt.checkpoint;
  const int runs = count_runs(comm, ckpt);
  const std::string none = ckpt.string() +
                           ": no checkpoint (expected run-R/rank-r/epoch-E folders that halo train "
                           "--checkpoint writes)";
  if (runs == 0) throw ParamError(none);
  if (opt.run >= runs)
    throw ParamError(ckpt.string() + ": no run " + std::to_string(opt.run) +
                     " (it holds run-0 .. run-" + std::to_string(runs - 1) + ")");
  int chosen = -1;
  json meta;
  for (int r = opt.run >= 0 ? opt.run : 0; r < (opt.run >= 0 ? opt.run + 1 : runs); ++r) {
    json m = newest_checkpoint_meta(comm, run_dir(ckpt, r));
    if (m.is_null()) continue;
    const bool better =
        chosen < 0 || (m.at("has_best").get<bool>() &&
                       (!meta.at("has_best").get<bool>() ||
                        m.at("best_valid").get<double>() > meta.at("best_valid").get<double>()));
    if (better) {
      chosen = r;
      meta = std::move(m);
    }
  }
  if (chosen < 0)
    throw ParamError(opt.run >= 0 ? run_dir(ckpt, opt.run).string() + ": no committed epoch"
                                  : none);
  return {chosen, std::move(meta)};
}

// The model a checkpoint's trajectory key describes, over data's widths.
ModelConfig model_from_key(const json& key, const RankData& d) {
  ModelConfig m;
  m.kind = parse_model_kind(key.at("model").get<std::string>());
  m.layers = key.at("layers").get<int>();
  m.hidden = key.at("hidden").get<std::int64_t>();
  m.dropout = key.at("dropout").get<float>();
  m.input_dropout = key.at("input_dropout").get<bool>();
  m.batch_norm = key.at("batch_norm").get<bool>();
  if (m.kind == ModelKind::kGat) {
    m.heads = key.at("heads").get<int>();
    m.out_heads = key.at("out_heads").get<int>();
    m.attn_dropout = key.at("attn_dropout").get<float>();
    m.residual = key.at("residual").get<bool>();
  }
  m.in = d.features.cols;
  m.out = d.label_kind == LabelKind::kMultilabel ? d.label_cols : d.num_classes;
  return m;
}

// Writes rows of y (owned x w, host or device memory) at their places in input order in f, a .npy
// file whose data starts at `base` (rank 0 holds f; the others send). Every rank sends its rows in
// chunks of ~32 MiB under their global ids, so no rank ever holds the whole matrix. Collective.
void write_rows_in_input_order(Communicator& comm, StagedFile* f, std::uint64_t base,
                               const MatrixView& y, const RankData& d) {
  const std::int64_t w = y.cols;
  const std::int64_t chunk =
      std::max<std::int64_t>(1, (std::int64_t(32) << 20) / (4 * std::max<std::int64_t>(w, 1)));
  std::int64_t rounds = (y.rows + chunk - 1) / chunk;
  comm.allreduce(&rounds, 1, ReduceOp::kMax);
  std::vector<float> rows;
  std::vector<NodeId> ids;
  for (std::int64_t round = 0; round < rounds; ++round) {
    const std::int64_t begin = std::min(y.rows, round * chunk);
    const std::int64_t n = std::min(y.rows, begin + chunk) - begin;
    rows.resize(std::size_t(n * w));
    ids.resize(std::size_t(n));
    if (n > 0) copy_floats(Device::kCpu, rows.data(), y.device, y.row(begin), n * w);
    for (std::int64_t i = 0; i < n; ++i)
      ids[std::size_t(i)] = d.global_ids ? d.global_ids[begin + i] : NodeId(begin + i);
    const std::vector<char> gid = comm.gather(ids.data(), ids.size() * sizeof(NodeId), 0, nullptr);
    const std::vector<char> val = comm.gather(rows.data(), rows.size() * sizeof(float), 0, nullptr);
    if (!f) continue;
    const auto* g = reinterpret_cast<const NodeId*>(gid.data());
    const auto* v = reinterpret_cast<const float*>(val.data());
    const std::size_t total = gid.size() / sizeof(NodeId);
    const auto place = [&](std::size_t i) {
      const auto u = std::uint64_t(g[i]);
      return d.original_ids ? std::uint64_t(d.original_ids[u]) : u;
    };
    const auto row_bytes = std::uint64_t(w) * sizeof(float);
    for (std::size_t i = 0; i < total;) {  // runs of consecutive places go in one write
      std::size_t j = i + 1;
      while (j < total && place(j) == place(i) + (j - i)) ++j;
      f->write_at(v + i * std::size_t(w), (j - i) * row_bytes, base + place(i) * row_bytes);
      i = j;
    }
  }
}

// The checkpointed model at the epoch opt.epoch chooses, on dev; fills s's run, seed, model and
// epoch, and key with the run's trajectory key. Refuses a checkpoint of another dataset.
Model restore_model(Communicator& comm, const PredictOptions& opt, const RankData& d, Device dev,
                    PredictSummary& s, json& key) {
  auto [run, meta] = choose_run(comm, opt);
  key = meta.at("key");
  const std::string copy = meta.at("path").get<std::string>();
  if (key.at("dataset") != d.dataset_fingerprint)
    throw ParamError(copy + ": checkpoint of another dataset (fingerprint " +
                     json_shown(key.at("dataset")) + ", " + d.source + " has \"" +
                     d.dataset_fingerprint +
                     "\"); predict with the dataset (or its parts) it was trained on");
  const ModelConfig cfg = model_from_key(key, d);
  s.run = run;
  s.seed = meta.at("seed").get<std::uint64_t>();
  s.model = to_string(cfg.kind);
  s.bf16_kernel = meta.at("exchange").value("bf16_kernel", "");
  Model model(cfg, s.seed, dev);
  RunState st;
  resume_run(comm, run_dir(opt.checkpoint, run), model, st, key);
  const std::string where = run_dir(opt.checkpoint, run).string();
  const std::string kept = "epoch " + std::to_string(st.epoch) + " (the newest)" +
                           (st.best.empty() ? std::string()
                                            : " and epoch " + std::to_string(st.result.best_epoch) +
                                                  " (the best validation)");
  const bool numbered = opt.epoch != "best" && opt.epoch != "last";
  const bool want_best =
      opt.epoch == "best" || (numbered && std::stoi(opt.epoch) != st.epoch && !st.best.empty() &&
                              std::stoi(opt.epoch) == st.result.best_epoch);
  if (numbered && !want_best && std::stoi(opt.epoch) != st.epoch)
    throw ParamError("--epoch " + opt.epoch + ": " + where + " keeps " + kept + " only");
  if (want_best && st.best.empty())
    throw ParamError("--epoch best: " + where + " was saved at epoch " + std::to_string(st.epoch) +
                     ", before any evaluation; use --epoch last");
  if (want_best) set_model_values(model, st.best);
  s.best = want_best;
  s.epoch = want_best ? st.result.best_epoch : st.epoch;
  return model;
}

// The layer --embeddings-out writes (-1: none): --layer, or the last hidden layer.
int embeddings_layer(const PredictOptions& opt, int layers) {
  const int l = opt.embeddings_out.empty() ? -1
                : opt.layer >= 0           ? opt.layer
                                           : std::max(0, layers - 2);
  if (l >= layers)
    throw ParamError("--layer " + std::to_string(l) + ": the model has layers 0 .. " +
                     std::to_string(layers - 1));
  return l;
}

// Writes layer `layer`'s output as the pass forms it into a staged float32 .npy (rank 0),
// committed only once the predictions are written.
class EmbeddingWriter {
 public:
  EmbeddingWriter(Communicator& comm, const PredictOptions& opt, const RankData& d, int layer)
      : comm_(comm), opt_(opt), d_(d), layer_(layer) {}
  // Takes layer l's output y (collective when l is the layer written).
  void take(int l, const MatrixView& y, PredictSummary& s) {
    if (l != layer_) return;
    Stopwatch clock;
    s.embeddings_layer = l;
    s.embeddings_width = y.cols;
    std::uint64_t base = 0;
    if (comm_.rank() == 0) {
      file_.emplace(opt_.embeddings_out, std::vector<fs::path>{fs::path(d_.source)});
      const std::string prefix =
          npy_prefix("<f4", std::uint64_t(d_.global_nodes), std::uint64_t(y.cols));
      file_->write(prefix);
      base = prefix.size();
    }
    write_rows_in_input_order(comm_, file_ ? &*file_ : nullptr, base, y, d_);
    seconds_ += clock.seconds();
  }
  // Publishes the file (rank 0).
  void commit() {
    if (file_) file_->commit();
  }
  double seconds() const { return seconds_; }

 private:
  Communicator& comm_;
  const PredictOptions& opt_;
  const RankData& d_;
  const int layer_;
  std::optional<StagedFile> file_;
  double seconds_ = 0;
};

PredictSummary predict_rank(const RankInput& in, Communicator& comm, const PredictOptions& opt,
                            std::ostream& out) {
  const RankData& d = in.data;
  set_rank_threads(opt.threads, comm.size());
  if (d.label_kind == LabelKind::kNone) throw ParamError(d.source + ": the dataset has no labels");
  if (d.features.cols == 0) throw ParamError(d.source + ": the dataset has no node features");
  const bool multilabel = d.label_kind == LabelKind::kMultilabel;
  const bool cuda = opt.device == DeviceChoice::kCuda ||
                    (opt.device == DeviceChoice::kAuto && cuda_devices().count > 0);
  const Device dev = cuda ? Device::kCuda : Device::kCpu;
  PredictSummary s;
  s.ranks = comm.size();
  json key;
  Model model = restore_model(comm, opt, d, dev, s, key);
  const ModelKind kind = model.config().kind;
  EmbeddingWriter emb(comm, opt, d, embeddings_layer(opt, model.config().layers));

  // The inputs as training saw them, without the transposes only backward multiplies by; the
  // mapped graph's pages go once the operator holds its own copy.
  ModelInputs inputs;
  inputs.load(d, kind, key.at("norm_features").get<bool>(), /*transpose=*/false);
  in.release_graph();
  ExchangeComms comms = place_rank(comm, cuda, false, out);
  Backend& be = cuda ? cuda_backend() : cpu_backend();
  be.set_matmul_precision(parse_matmul_precision(key.at("matmul_precision").get<std::string>()));
  if (!cuda && be.matmul_precision() == MatmulPrecision::kBf16 && !s.bf16_kernel.empty())
    set_cpu_bf16_kernel(parse_bf16_kernel(s.bf16_kernel));  // the training run's sums
  GraphContext ctx;
  inputs.place(d, kind, dev, ctx);
  std::unique_ptr<HaloExchanger> exch;
  if (comm.size() > 1) {
    exch = std::make_unique<HaloExchanger>(comms.exchange(comm), be, d.plan, HaloDtype::kF32, 0);
    ctx.exchange = exch.get();
  }

  Stopwatch clock;
  MatrixView logits = model.infer(
      be, ctx, inputs.x, [&](int layer, const MatrixView& y) { emb.take(layer, y, s); },
      [&] {  // the features are read: their pages and copies go before layer 0's output forms
        in.release_features();
        inputs.drop_features();
      });
  if (cuda) device_synchronize();
  double infer_s = clock.seconds() - emb.seconds();
  comm.allreduce(&infer_s, 1, ReduceOp::kMax);
  s.inference_s = infer_s;
  Matrix host;
  if (cuda) {
    host.resize(logits.rows, logits.cols);
    copy_floats(Device::kCpu, host.data(), dev, logits.data, logits.size());
    logits = host.view();
  }
  for (const Split& sp : *d.splits)
    if (sp.name == key.at("split").get<std::string>()) {
      MetricBuffers bufs;
      const auto [tr, va, te] =
          split_metrics(comm, logits, d.labels, d.label_cols, multilabel, sp, bufs);
      s.train = tr;
      s.valid = va;
      s.test = te;
    }
  s.metric = multilabel ? "rocauc" : "acc";
  write_predictions(comm, opt.out, logits, multilabel, d.label_cols, d.global_ids, d.original_ids);
  emb.commit();
  double rss = double(peak_rss_bytes()) / (1 << 20);
  comm.allreduce(&rss, 1, ReduceOp::kMax);
  s.peak_rss_mb = rss;
  return s;
}

// Refuses, before any work, outputs that cannot be written or would overwrite the input.
void check_outputs(const PredictOptions& opt, const fs::path& input, bool lead) {
  opt.check();
  if (!lead) return;
  resolve_file_output(opt.out, {input});
  if (!opt.embeddings_out.empty()) resolve_file_output(opt.embeddings_out, {input});
}

}  // namespace

PredictSummary predict_dataset(const fs::path& dataset, const PredictOptions& opt,
                               std::ostream& out) {
  check_outputs(opt, dataset, true);
  const std::unique_ptr<RankInput> in = open_dataset_rank(dataset);
  LocalCommunicator local;
  return predict_rank(*in, local, opt, out);
}

PredictSummary predict_parts(const fs::path& parts, Communicator& comm, const PredictOptions& opt,
                             std::ostream& out) {
  opt.check();
  const std::unique_ptr<RankInput> in = open_parts_rank(parts, comm);
  return predict_rank(*in, comm, opt, out);
}

}  // namespace halo

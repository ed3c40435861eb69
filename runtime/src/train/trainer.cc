// Full-batch training of one rank: a single process is the one-rank case of the distributed
// trainer (no halo rows, the local communicator), so both share every line of the protocol.
//
// What makes K ranks train the model one process would:
// - every rank holds the same replicated parameters: initial weights from the keyed RNG, one
//   fused all-reduce of the gradients per step, then the same Adam step everywhere;
// - losses, metrics and batch-norm statistics are sums over ranks divided by global counts;
// - dropout masks are keyed by global node id, so a row is dropped the same wherever it lives;
// - the GCN normalisation uses global degrees (carried by the parts).
#include "halo/runtime/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <new>
#include <optional>
#include <ostream>
#include <thread>

#include "comm/placement.h"
#include "halo/gnn/device.h"
#include "halo/gnn/op_profile.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/partition/parts.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/comm/halo_exchange.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/train/checkpoint.h"
#include "halo/runtime/train/presets.h"
#include "train/rank_data.h"
#include "train/train_checkpoint.h"
#include "train/train_report.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void inject_fault(const TrainOptions::Fault& f) {
  if (f.mode == FaultMode::kKill) std::raise(SIGKILL);
  if (f.mode == FaultMode::kHang)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (f.mode == FaultMode::kAlloc) throw std::bad_alloc();  // as an allocation in the epoch would
  throw SystemError("injected fault at epoch " + std::to_string(f.epoch) + " (HALO_INJECT_FAULT)");
}

// What train_rank is allocating, for the message of a std::bad_alloc that the memory check
// before training did not foresee (thread_local: train_rank runs on the calling thread only).
thread_local const char* t_allocating = "the run's buffers";

// The memory model's view of this rank's part and chosen split.
RankShape rank_shape(const RankData& d, const Split& split, int ranks, int rank) {
  RankShape r;
  r.owned = d.owned;
  r.halo = d.all - d.owned;
  r.nnz = d.graph.num_edges();
  r.send_rows = ranks > 1 && d.plan.send_offsets ? d.plan.send_offsets[ranks] : 0;
  r.features = d.features.cols;
  r.label_cols = d.label_cols;
  r.train_rows = std::int64_t(split.train.size());
  r.split_rows = std::int64_t(split.train.size() + split.valid.size() + split.test.size());
  r.ranks = ranks;
  r.rank = rank;
  r.part = d.global_ids != nullptr;
  r.global_nodes = d.global_nodes;
  r.directed = d.directed;
  // Only rank 0's multi-label metric buffers read it; the local sets times the ranks bound it.
  r.global_split_rows =
      std::int64_t(std::max({split.train.size(), split.valid.size(), split.test.size()})) * ranks;
  return r;
}

// The error that ends a run whose loss or outputs stopped being numbers. Every rank sees the same
// all-reduced loss (and the same all-reduced verdict on the outputs), so every rank throws it
// at the same epoch: none is left waiting in a collective for the others.
Error diverged(int run, int epoch, const std::string& what, float lr) {
  char line[320];
  std::snprintf(line, sizeof line,
                "run %d epoch %d: %s: the model diverged; lower --lr (now %g) or check the "
                "features for extreme "
                "values",
                run, epoch, what.c_str(), double(lr));
  return Error(line);
}

// Everything one rank holds for the whole job: the options as completed, the inputs on the
// compute device, the operators, the communicators and the halo exchange. Members are declared
// in the order train_rank makes them, so they go in reverse (the exchange before the
// communicators and the backend it uses).
struct RankRun {
  RankRun(const RankData& data, Communicator& c, const TrainOptions& o, std::ostream& os)
      : d(data), comm(c), opt(o), out(os), rank(c.rank()), ranks(c.size()), lead(rank == 0) {}
  const RankData& d;
  Communicator& comm;
  TrainOptions opt;  // with the split and the model's widths filled in
  std::ostream& out;
  const int rank, ranks;
  const bool lead;
  const Split* split = nullptr;
  bool multilabel = false;
  ModelInputs inputs;  // the features and the operator, on the host and the device
  Device dev = Device::kCpu;
  bool gpu = false;
  ExchangeComms comms;
  OpProfile profile;                      // --profile: time per op on this rank
  std::optional<ProfileScope> profiling;  // times this thread's ops into profile under --profile
  Backend* be = nullptr;
  DeviceArray<NodeId> train_dev;  // device copies (CUDA)
  DeviceArray<std::int32_t> labels_dev;
  std::unique_ptr<HaloExchanger> exch;  // K > 1
  GraphContext ctx;
  std::int64_t labelled = 0;  // the loss's denominator: labelled training rows of the whole graph
  LogFile log;                // every record written whole and checked (staging.h)
  json key, exchange;         // the checkpoints' trajectory key and exchange record
  Matrix dlogits;
  Matrix eval_host;  // evaluation outputs copied to the host (GPU runs)
  Matrix grads;      // all gradients in one buffer: one all-reduce per step
  MetricBuffers metric_bufs;
  FigureHistory history;
  double setup_bytes = 0;  // all ranks: halo bytes sent once before epoch 1 (layer 0's A X)
};

// Completes the options from the data (split, model widths), checks them, and refuses a run the
// memory cannot hold.
void prepare(RankRun& k) {
  const RankData& d = k.d;
  TrainOptions& opt = k.opt;
  set_rank_threads(opt.threads, k.ranks);
  if (d.label_kind == LabelKind::kNone) throw ParamError(d.source + ": the dataset has no labels");
  if (d.features.cols == 0) throw ParamError(d.source + ": the dataset has no node features");
  if (opt.split.empty()) opt.split = d.default_split;
  for (const Split& s : *d.splits)
    if (s.name == opt.split) k.split = &s;
  if (!k.split) throw missing_split(d.source, opt.split, *d.splits);
  k.multilabel = d.label_kind == LabelKind::kMultilabel;
  opt.model.in = d.features.cols;
  opt.model.out = k.multilabel ? d.label_cols : d.num_classes;
  opt.check();
  if (opt.device != DeviceChoice::kCuda)  // the model is of host memory
    refuse_impossible_memory(rank_shape(d, *k.split, k.ranks, k.rank),
                             model_shape(opt, k.multilabel, opt.model.out), d.source);
}

// The inputs on the host: the features as mapped, or a row-normalised copy, and the operator.
void load_inputs(RankRun& k) {
  t_allocating = "the row-normalised features and the graph operator";
  k.inputs.load(k.d, k.opt.model.kind, k.opt.norm_features);
}

// The CPU's bf16 kernel (cpu_bf16.h): as --bf16-kernel set it, or the faster by the probe. The
// ranks sum their probe times, so all of them run the same kernel (the same arithmetic as one
// process would on the slowest machine mix), and rank 0 logs the choice.
void choose_bf16_kernel(RankRun& k) {
  const bool probe = k.opt.bf16_kernel == Bf16Kernel::kAuto;
  if (probe) {
    const Bf16Probe mine = probe_bf16_kernels();
    double t[2] = {mine.dot_s, mine.fma_s};
    k.comm.allreduce(t, 2);
    set_cpu_bf16_kernel(pick_bf16_kernel({t[0], t[1]}));
  } else {
    set_cpu_bf16_kernel(k.opt.bf16_kernel);
  }
  if (k.lead && !k.opt.quiet) k.out << describe_cpu_bf16(probe) << "\n";
}

// The device and the communicators (placement.h), the backend, a copy on the device of every
// array kernels read (CUDA; the rest stays mapped), the halo exchange and the graph context.
void place(RankRun& k) {
  const RankData& d = k.d;
  const TrainOptions& opt = k.opt;
  const bool cuda = opt.device == DeviceChoice::kCuda ||
                    (opt.device == DeviceChoice::kAuto && cuda_devices().count > 0);
  k.dev = cuda ? Device::kCuda : Device::kCpu;
  k.gpu = k.dev == Device::kCuda;
  k.comms = place_rank(k.comm, k.gpu, !opt.quiet, k.out);
  Backend& base = k.gpu ? cuda_backend() : cpu_backend();
  base.set_matmul_precision(opt.matmul_precision);  // every run sets it: the backend is shared
  if (!k.gpu && opt.matmul_precision == MatmulPrecision::kBf16) choose_bf16_kernel(k);
  k.be = &base;
  if (opt.profile) k.profiling.emplace(k.profile);
  k.inputs.place(d, opt.model.kind, k.dev, k.ctx);
  if (k.gpu) {
    k.labels_dev = DeviceArray<std::int32_t>(d.labels, std::size_t(d.owned * d.label_cols));
    k.train_dev = DeviceArray<NodeId>(k.split->train.data(), k.split->train.size());
  }
  if (k.ranks > 1)
    k.exch =
        std::make_unique<HaloExchanger>(k.comms.exchange(k.comm), *k.be, d.plan, opt.halo_dtype,
                                        opt.halo_staleness, opt.halo_smoothing);
  k.ctx.exchange = k.exch.get();
  k.ctx.static_input = true;  // x is the dataset's features for the whole run
  // Layer 0's A X once, exchange included: no epoch repeats it (its bytes are the summary's
  // setup_halo_bytes, not epoch 1's).
  k.inputs.aggregate_input_once(*k.be, k.opt.model, k.ctx);
  if (k.exch) {
    k.setup_bytes = double(k.exch->stats().bytes_sent);
    k.comm.allreduce(&k.setup_bytes, 1);
  }
}

// The loss is a mean over the labelled training rows (entries, multi-label) of the whole graph.
void count_labelled(RankRun& k) {
  const std::int32_t* labels = k.d.labels;
  std::int64_t labelled = 0;
  for (NodeId v : k.split->train)
    for (std::int64_t c = 0; c < k.d.label_cols; ++c)
      labelled += labels[std::int64_t(v) * k.d.label_cols + c] >= 0;
  k.comm.allreduce(&labelled, 1);
  if (labelled == 0) throw ParamError("split '" + k.opt.split + "' has no labelled training nodes");
  k.labelled = labelled;
}

// The outputs of an evaluation pass (no dropout, running statistics), on the host.
MatrixView evaluate(RankRun& k, Model& model, std::uint64_t seed, int epoch) {
  MatrixView eval = model.forward(*k.be, k.ctx, k.inputs.x, false, seed, epoch);
  if (k.gpu) {
    k.eval_host.resize(eval.rows, eval.cols);
    copy_floats(Device::kCpu, k.eval_host.data(), k.dev, eval.data, eval.size());
    eval = k.eval_host.view();
  }
  return eval;
}

// Sums every parameter's gradient over the ranks in one buffer, one all-reduce; over NCCL it
// stays in device memory.
void reduce_gradients(RankRun& k, Model& model) {
  Matrix& grads = k.grads;
  std::int64_t at = 0;
  for (Param* p : model.params()) {
    copy_floats(grads.device(), grads.data() + at, k.dev, p->grad.data(), p->grad.size());
    at += p->grad.size();
  }
  if (k.comms.nccl)
    k.comms.nccl->allreduce_device(grads.data(), grads.size());
  else
    k.comm.allreduce(grads.data(), grads.size());
  at = 0;
  for (Param* p : model.params()) {
    copy_floats(k.dev, p->grad.data(), grads.device(), grads.data() + at, p->grad.size());
    at += p->grad.size();
  }
}

// One training step: forward with dropout, the loss, backward, the gradients (and the loss)
// summed over ranks, Adam. Returns the mean loss over the graph's labelled rows; fig gets the
// step's time and its exchange and all-reduce shares.
double train_step(RankRun& k, int run, int epoch, Model& model, RunState& st, RankFigures& fig) {
  Backend& be = *k.be;
  const std::int32_t* loss_labels = k.gpu ? k.labels_dev.data() : k.d.labels;
  const NodeId* loss_rows = k.gpu ? k.train_dev.data() : k.split->train.data();
  const std::int64_t ntrain = std::int64_t(k.split->train.size());
  const double labelled = double(k.labelled);
  Stopwatch clock;
  const MatrixView logits = model.forward(be, k.ctx, k.inputs.x, true, st.result.seed, epoch);
  double loss = k.multilabel ? be.bce_logits(logits, loss_labels, loss_rows, ntrain, labelled,
                                             k.dlogits.view(), nullptr)
                             : be.softmax_xent(logits, loss_labels, loss_rows, ntrain, labelled,
                                               k.dlogits.view(), nullptr);
  model.backward(be, k.ctx, k.dlogits.view());
  Stopwatch reduce_clock;
  if (k.ranks > 1) {
    reduce_gradients(k, model);
    k.comm.allreduce(&loss, 1);
  }
  const double reduce_s = reduce_clock.seconds();
  loss /= double(k.labelled);
  if (!std::isfinite(loss))
    throw diverged(run, epoch, "the training loss is " + std::to_string(loss), k.opt.lr);
  ++st.adam_step;
  for (Param* p : model.params()) {
    AdamStep s;
    s.lr = k.opt.lr;
    s.weight_decay = p->weight_decay;
    s.step = st.adam_step;
    be.adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size(), s);
  }
  if (k.gpu) device_synchronize();  // the epoch ends when the GPU is done
  fig.epoch_s = clock.seconds();
  if (k.exch) {
    fig.bytes = double(k.exch->stats().bytes_sent);
    fig.wait_s = k.exch->stats().wait_s;
    fig.allreduce_s = k.exch->stats().allreduce_s + reduce_s;
  }
  fig.compute_s = fig.epoch_s - fig.wait_s - fig.allreduce_s;
  return loss;
}

// Evaluates the stepped model: refuses outputs that are not numbers, adds the metrics to rec,
// keeps the model when its validation score is the best so far, and prints the epoch's line.
void evaluate_epoch(RankRun& k, int run, int epoch, Model& model, RunState& st, RankFigures& fig,
                    double loss, json& rec) {
  const double before = k.exch ? double(k.exch->stats().bytes_sent) : 0;
  const MatrixView eval = evaluate(k, model, st.result.seed, epoch);
  if (k.exch) fig.eval_bytes = double(k.exch->stats().bytes_sent) - before;
  // A finite loss before the step does not make the stepped model finite: metrics of NaN
  // outputs would be silent garbage. Decided over all ranks, so all stop together.
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < eval.rows * eval.cols && !bad; ++i)
    bad = !std::isfinite(eval.data[i]);
  k.comm.allreduce(&bad, 1, ReduceOp::kMax);
  if (bad) throw diverged(run, epoch, "the evaluation outputs are not finite", k.opt.lr);
  const auto [tr, va, te] = split_metrics(k.comm, eval, k.d.labels, k.d.label_cols, k.multilabel,
                                          *k.split, k.metric_bufs);
  rec["train"] = tr;
  rec["valid"] = va;
  rec["test"] = te;
  if (st.result.best_epoch == 0 || va > st.result.best_valid) {
    st.result.best_valid = va;
    st.result.test_at_best = te;
    st.result.train_at_best = tr;
    st.result.best_epoch = epoch;
    st.best = model_values(model);
  }
  if (k.lead && !k.opt.quiet) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "run %d epoch %4d  loss %.4f  train %.4f  valid %.4f  test %.4f  %.3f s\n", run,
                  epoch, loss, tr, va, te, fig.epoch_s);
    k.out << line << std::flush;
  }
}

// One epoch of a run: the step, an evaluation when due, the log record, a checkpoint when due.
// first: the run's first epoch in this process (1, or the one after a resumed checkpoint), the
// one that allocates the layers' buffers.
void train_epoch(RankRun& k, int run, int epoch, int first, Model& model, RunState& st,
                 const fs::path& ckdir) {
  const TrainOptions& opt = k.opt;
  t_allocating =
      epoch == first ? "the layers' activations and gradients (first epoch)" : "a training epoch";
  if (k.rank == opt.fault.rank && epoch == opt.fault.epoch) inject_fault(opt.fault);
  if (k.exch) k.exch->stats().clear();
  RankFigures fig;
  const double loss = train_step(k, run, epoch, model, st, fig);
  const double secs = fig.epoch_s;
  st.result.epoch_seconds.push_back(secs);
  st.result.final_loss = loss;
  st.epoch = epoch;
  json rec = {
      {"type", "epoch"}, {"run", run}, {"epoch", epoch}, {"loss", loss}, {"epoch_time_s", secs}};
  if (epoch % opt.eval_every == 0 || epoch == opt.epochs)
    evaluate_epoch(k, run, epoch, model, st, fig, loss, rec);
  if (k.ranks > 1)
    gather_figures(k.comm, fig, k.history, rec);  // the per-rank breakdown, on rank 0
  k.log.write_line(rec.dump());
  if (!ckdir.empty() && (epoch % opt.checkpoint_every == 0 || epoch == opt.epochs))
    commit_checkpoint(k.comm, ckdir, model, st, k.key, k.exchange);
}

// A resumed trajectory continues on the bf16 kernel it ran (its record, the same on every rank):
// --bf16-kernel auto takes it over this machine's probe, so the run goes on bit for bit; a pinned
// kernel that differs is kept, with a note that the run continues near the uninterrupted one.
void continue_bf16_kernel(RankRun& k, const json& saved) {
  const std::string ran = saved.value("bf16_kernel", "");
  const std::string now = k.exchange.value("bf16_kernel", "");
  if (ran.empty() || now.empty() || ran == now) return;
  if (k.opt.bf16_kernel == Bf16Kernel::kAuto) {
    set_cpu_bf16_kernel(parse_bf16_kernel(ran));
    k.exchange["bf16_kernel"] = ran;
    if (k.lead && !k.opt.quiet) k.out << "bf16 products: " << ran << ", as the checkpoint's run\n";
  } else if (k.lead) {
    k.out << "note: the checkpoint's bf16 products ran the " << ran << " kernel and this run "
          << now << " (--bf16-kernel): the run continues near the uninterrupted one, not on it\n";
  }
}

// --resume: the run's newest checkpoint into model and st, or a refusal (the same on every rank).
void resume(RankRun& k, int run, const fs::path& ckdir, Model& model, RunState& st) {
  const TrainOptions& opt = k.opt;
  const json saved = resume_run(k.comm, ckdir, model, st, k.key);
  // Every rank took the same decision (resume_run agrees on the newest epoch collectively).
  // Run 0 without a checkpoint means none was ever written: a typo'd or wiped directory, and
  // starting over silently would overwrite the log. Later runs without one start fresh: the
  // job stopped before reaching them.
  if (saved.is_null() && run == 0)
    throw ParamError("--resume: no checkpoint in " + opt.checkpoint.string() +
                     "; drop --resume to start a new run");
  if (st.epoch > opt.epochs)
    throw ParamError("--resume: the checkpoint in " + ckdir.string() + " is of epoch " +
                     std::to_string(st.epoch) + ", after --epochs " + std::to_string(opt.epochs) +
                     "; resume with --epochs " + std::to_string(st.epoch) +
                     " or more, or start a new checkpoint directory");
  if (!saved.is_null()) continue_bf16_kernel(k, saved);
  if (!saved.is_null() && k.lead) {
    if (!opt.quiet) k.out << "run " << run << ": resumed after epoch " << st.epoch << "\n";
    if (const std::string note = exchange_note(saved, k.exchange); !note.empty())
      k.out << note << "\n";
  }
}

// One run (seed opt.seed + run) in `last` (the previous run's model goes first): a fresh model
// or, under --resume, its checkpoint's, then its epochs.
RunState train_run(RankRun& k, int run, std::optional<Model>& last) {
  const TrainOptions& opt = k.opt;
  RunState st;
  st.result.seed = opt.seed + std::uint64_t(run);
  t_allocating = "the model's weights, gradients and Adam moments";
  Model& model = last.emplace(opt.model, st.result.seed, k.dev);
  for (Param* p : model.params())
    p->weight_decay =
        !opt.decay_first_layer_only || p->name.rfind("layer0.", 0) == 0 ? opt.weight_decay : 0.f;
  std::int64_t grad_size = 0;
  for (Param* p : model.params()) grad_size += p->grad.size();
  k.grads.resize(1, grad_size);
  const fs::path ckdir = opt.checkpoint.empty() ? fs::path() : run_dir(opt.checkpoint, run);
  if (opt.resume) resume(k, run, ckdir, model, st);
  if (k.exch) k.exch->drain();
  const int first = st.epoch + 1;
  for (int epoch = first; epoch <= opt.epochs; ++epoch)
    train_epoch(k, run, epoch, first, model, st, ckdir);
  if (k.exch) k.exch->drain();
  if (k.lead && !opt.quiet) {
    char line[200];
    std::snprintf(line, sizeof line, "run %d: best valid %.4f at epoch %d, test %.4f\n", run,
                  st.result.best_valid, st.result.best_epoch, st.result.test_at_best);
    k.out << line;
  }
  return st;
}

// --predictions-out: the outputs of the run with the best validation score, at its best epoch.
void predict(RankRun& k, const std::vector<RunState>& states, Model& last) {
  const auto best =
      std::max_element(states.begin(), states.end(), [](const RunState& a, const RunState& b) {
        return a.result.best_valid < b.result.best_valid;
      });
  if (best->best.empty())  // the same on every rank: the state is replicated
    throw ParamError(
        "--predictions-out: run " + std::to_string(best - states.begin()) +
        " was never evaluated (resumed at or after --epochs from a checkpoint written before its "
        "first evaluation)");
  // The best epoch's model into the last run's (same shapes; the seed only drew the initial
  // weights), then one evaluation pass: the outputs that epoch's evaluation saw.
  set_model_values(last, best->best);
  const MatrixView eval = evaluate(k, last, best->result.seed, best->result.best_epoch);
  write_predictions(k.comm, k.opt.predictions_out, eval, k.multilabel, k.d.label_cols,
                    k.d.global_ids, k.d.original_ids);
}

// What a std::bad_alloc in train_rank says: what was being allocated, and what the memory model
// predicted against what there was.
SystemError out_of_memory(const RankData& d, Communicator& comm, const TrainOptions& opt_in) {
  const AvailableMemory avail = available_memory();
  std::string predicted;
  try {
    for (const Split& s : *d.splits) {
      TrainOptions o = opt_in;
      o.model.in = d.features.cols;
      o.model.out = d.label_kind == LabelKind::kMultilabel ? d.label_cols : d.num_classes;
      if (s.name != (o.split.empty() ? d.default_split : o.split)) continue;
      std::string largest;
      const RankShape r = rank_shape(d, s, comm.size(), comm.rank());
      const ModelShape m = model_shape(o, d.label_kind == LabelKind::kMultilabel, o.model.out);
      predicted = "; the memory model predicts " +
                  format_bytes(std::uint64_t(predicted_rank_bytes(r, m, &largest))) +
                  " on this rank, mostly " + largest;
    }
  } catch (const std::exception&) {  // no prediction: the message goes without it
  }
  return SystemError(std::string("out of memory allocating ") + t_allocating + predicted +
                     (avail.bytes > 0 ? ", with " + format_bytes(std::uint64_t(avail.bytes)) +
                                            " available (" + avail.source + ")"
                                      : std::string()));
}

TrainSummary train_rank(const RankData& d, Communicator& comm, const TrainOptions& opt_in,
                        std::ostream& out) try {
  RankRun k(d, comm, opt_in, out);
  // The folder is this run's before anything is written (the log included): a refusal leaves
  // every output as it was.
  std::optional<CheckpointClaim> claim;
  if (!opt_in.checkpoint.empty())
    claim.emplace(comm, opt_in.checkpoint, opt_in.resume, opt_in.force, /*every_rank=*/true);
  prepare(k);
  load_inputs(k);
  place(k);
  count_labelled(k);
  const TrainOptions& opt = k.opt;
  if (k.lead && !opt.log.empty()) k.log.open(opt.log, opt.resume);
  k.key = trajectory_key(opt, d.dataset_fingerprint);
  k.exchange = exchange_record(opt, d.partition, k.ranks);
  // The CPU's bf16 kernel is part of how the trajectory was computed (its sums' order), not of
  // its key: recorded only when it ran, so earlier records stay what they were.
  if (!k.gpu && opt.matmul_precision == MatmulPrecision::kBf16)
    k.exchange["bf16_kernel"] = to_string(cpu_bf16_kernel());
  k.dlogits = Matrix(d.owned, opt.model.out, 0.f, k.dev);
  if (k.comms.nccl) k.grads.set_device(k.dev);  // NCCL reduces the gradients in device memory

  std::vector<RunState> states;
  states.reserve(std::size_t(opt.runs));
  std::optional<Model> last;  // the last run's model, for the predictions at the end
  for (int run = 0; run < opt.runs; ++run) states.push_back(train_run(k, run, last));

  TrainSummary summary = summarize_runs(comm, states, k.history, d.owned, d.all - d.owned, k.gpu);
  summary.setup_halo_bytes = k.setup_bytes;
  summary.metric = k.multilabel ? "rocauc" : "acc";
  summary.ranks = k.ranks;
  summary.matmul_precision = to_string(opt.matmul_precision);
  summary.bf16_kernel = k.exchange.value("bf16_kernel", "");  // the kernel the run ended on
  k.log.write_line(summary.to_json().dump());
  k.log.close();
  if (opt.profile && k.lead)
    out << "time per kernel (training and evaluation, rank 0):\n" << k.profile.report();
  t_allocating = "the predictions";
  if (!opt.predictions_out.empty()) predict(k, states, *last);  // in input order
  return summary;
} catch (const std::bad_alloc&) {
  throw out_of_memory(d, comm, opt_in);
}

}  // namespace

TrainSummary train_dataset(const fs::path& dataset, const TrainOptions& opt, std::ostream& out) {
  check_train_outputs(opt, dataset, /*lead=*/true);
  const std::unique_ptr<RankInput> in = open_dataset_rank(dataset);
  LocalCommunicator local;
  return train_rank(in->data, local, opt, out);
}

TrainSummary train_parts(const fs::path& parts, Communicator& comm, const TrainOptions& opt,
                         std::ostream& out) {
  check_train_outputs(opt, parts, comm.rank() == 0);
  const std::unique_ptr<RankInput> in = open_parts_rank(parts, comm);
  return train_rank(in->data, comm, opt, out);
}

}  // namespace halo

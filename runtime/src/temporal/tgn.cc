// TGN training and evaluation (see tgn.h): the epoch loop, evaluation, the EdgeBank floor and
// checkpoints. The model itself is gnn's Tgn (gnn/temporal/tgn.h), replicated across ranks by
// TgnReplicas (tgn_replicas.h); the scores and their metrics are in tgn_scores.h.
#include "halo/runtime/temporal/tgn.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <unordered_set>

#include "comm/placement.h"
#include "halo/gnn/backend.h"
#include "halo/gnn/device.h"
#include "halo/gnn/metrics.h"
#include "halo/gnn/op_profile.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/gnn/temporal/tgn.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/npz.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/train/checkpoint.h"
#include "temporal/tgn_checkpoint.h"
#include "temporal/tgn_replicas.h"
#include "temporal/tgn_scores.h"
#include "train/rank_data.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Stream = EventStream;  // the name the checkpoint key knows it by

// The error that ends a training whose loss stopped being a number. The loss a batch returns is
// all-reduced, so every rank sees the same value and throws at the same batch: none is left
// waiting in the next batch's all-reduce for the others.
// batch 0: found in the evaluation after the epoch's training.
Error diverged(int epoch, std::int64_t batch, std::int64_t batches, const std::string& what,
               float lr) {
  char where[80];
  if (batch > 0)
    std::snprintf(where, sizeof where, "epoch %d, batch %lld of %lld", epoch, (long long)batch,
                  (long long)batches);
  else
    std::snprintf(where, sizeof where, "epoch %d", epoch);
  char line[400];
  std::snprintf(line, sizeof line,
                "%s: %s: the model diverged; lower --lr (now %g) or check the events' times and "
                "features for extreme "
                "values",
                where, what.c_str(), double(lr));
  return Error(line);
}

// Refuses a chronological split that leaves nothing to learn from or nothing to evaluate: a
// model trained on 0 events scores chance (AP 0.5), which reads as a result, not as an error.
void check_split(const fs::path& dataset, const Stream& s, const TemporalSplit& split,
                 std::int64_t train_events, bool evaluates) {
  const std::int64_t train = split.train_end, valid = split.valid_end - split.train_end,
                     test = s.events - split.valid_end;
  std::string missing;
  if (train_events == 0)
    missing = "training";
  else if (evaluates && valid == 0)
    missing = "validation";
  else if (evaluates && test == 0)
    missing = "test";
  if (missing.empty()) return;
  std::string sizes = "train " + std::to_string(train);
  if (train_events != train)
    sizes += " (" + std::to_string(train_events) + " without held-out nodes)";
  sizes += ", validation " + std::to_string(valid) + ", test " + std::to_string(test) + " of " +
           std::to_string(s.events) + " events";
  char why[200];
  if (s.events > 0 && s.time[0] == s.time[s.events - 1])
    std::snprintf(why, sizeof why, "every event has the timestamp %g", s.time[0]);
  else
    std::snprintf(why, sizeof why,
                  "the split is at the 70%% and 85%% time quantiles, %g and %g, and events at one "
                  "time stay together",
                  split.valid_time, split.test_time);
  throw InputError(dataset.string() + ": the chronological split leaves no " + missing +
                   " events (" + sizes + "; " + why +
                   "); a temporal dataset needs events spread over time");
}

// Where --device puts TGN and JODIE: the GPU for cuda (refused when none is visible, before
// any work) and for auto when one is visible; the host otherwise, and always for EdgeBank.
Device tgn_device(const TgnOptions& opt) {
  if (opt.model == TgnModel::kEdgebank || opt.device == DeviceChoice::kCpu) return Device::kCpu;
  const CudaDevices devs = cuda_devices();
  if (devs.count > 0) return Device::kCuda;
  if (opt.device == DeviceChoice::kCuda)
    throw ParamError("--device cuda: " + devs.reason + "; use --device cpu or auto");
  return Device::kCpu;
}

// Where a rank computes, where its node state lives and how its gradients travel.
struct TgnPlacement {
  TgnMemoryOn memory = TgnMemoryOn::kDevice;
  // NCCL when every rank has its own GPU (the gradients are summed in device memory), or the
  // test hook's direct path on CPU ranks; neither: staged through the host over the job's comm.
  ExchangeComms comms;
  Communicator* in_place() const { return comms.nccl ? comms.nccl.get() : comms.direct.get(); }
};

// Decided before the model allocates anything. The node state (--memory-on): on the host for
// --device cpu (host runs the staging path there); on a GPU, the memory model's choice against
// the GPU's free memory, every rank deciding from the smallest free memory and the most ranks
// sharing a GPU, so all take the same placement or refuse alike. Ranks take their machine's GPUs
// in turn (place_rank; several may share one, and then the gradients go through the host).
// Collective.
TgnPlacement place_tgn(Device device, const TgnOptions& opt, const TgnStreamShape& shape,
                       Communicator& comm, const std::string& dataset, std::ostream& out) {
  TgnPlacement p;
  const bool gpu = device == Device::kCuda;
  if (comm.size() > 1) p.comms = place_rank(comm, gpu, false, out);
  if (gpu && comm.size() > 1 && !opt.quiet && comm.rank() == 0)
    out << "tgn gradients: "
        << (p.comms.nccl ? "NCCL all-reduce in GPU memory"
                         : "MPI all-reduce staged through the host (ranks share a GPU, or a rank "
                           "has no NCCL)")
        << "\n";
  if (!gpu) {
    p.memory = opt.memory_on == TgnMemoryChoice::kHost ? TgnMemoryOn::kHost : TgnMemoryOn::kDevice;
    return p;
  }
  std::int64_t sharing = p.comms.gpu_sharing;
  std::int64_t free = std::int64_t(device_memory_info().free);
  comm.allreduce(&sharing, 1, ReduceOp::kMax);
  comm.allreduce(&free, 1, ReduceOp::kMin);
  p.memory = choose_tgn_memory(shape, opt, comm.size(), std::size_t(free), int(sharing), dataset);
  return p;
}

// The test figures of a summary from the test scores.
void set_test(TgnSummary& sum, const Scores& test) {
  sum.test_ap = test.ap();
  sum.test_auc = test.auc();
  sum.test_inductive_ap = test.ap_ind();
  sum.test_inductive_auc = test.auc_ind();
  sum.test_ap_pooled = test.ap_pooled();
  sum.test_inductive_ap_pooled = test.ap_ind_pooled();
}

}  // namespace

namespace {

// EdgeBank learns nothing: it scores the three ranges once.
TgnSummary run_edgebank(const Stream& s, const TemporalSplit& split, const TgnOptions& opt,
                        LogFile& log) {
  TgnSummary sum;
  std::unordered_set<std::uint64_t> seen;
  Scores train_s, val, test;
  for (Scores* sc : {&train_s, &val, &test}) sc->batch = opt.batch_size;
  edgebank(s, 0, split.train_end, opt.batch_size, kEvalNegatives, split.inductive, seen, train_s);
  edgebank(s, split.train_end, split.valid_end, opt.batch_size, kEvalNegatives, split.inductive,
           seen, val);
  edgebank(s, split.valid_end, s.events, opt.batch_size, kEvalNegatives, split.inductive, seen,
           test);
  sum.valid_ap = val.ap();
  set_test(sum, test);
  log.write_line(sum.to_json().dump());
  log.close();
  return sum;
}

// The largest peak resident memory over the ranks, and with a GPU (every rank on one, or none:
// tgn_device) the largest peak GPU memory halo held.
void add_peak_memory(TgnSummary& sum, Communicator& comm, bool gpu) {
  std::int64_t rss = std::int64_t(peak_rss_bytes());
  comm.allreduce(&rss, 1, ReduceOp::kMax);
  sum.peak_rss_mb = double(rss) / double(1 << 20);
  if (!gpu) return;
  double g = double(device_peak_bytes()) / double(1 << 20);
  comm.allreduce(&g, 1, ReduceOp::kMax);
  sum.peak_gpu_mb = g;
}

// The sizes the memory model needs: the stream's, and the training events its split keeps.
TgnStreamShape stream_shape(const TemporalDataset& d, const TemporalSplit& split) {
  TgnStreamShape sh;
  sh.nodes = d.num_nodes;
  sh.events = d.num_events();
  sh.edge_dim = d.edge_feature_dim;
  sh.train_events = std::count(split.train_keep.begin(), split.train_keep.end(), std::uint8_t(1));
  sh.valid_events = split.valid_end - split.train_end;
  sh.test_events = sh.events - split.valid_end;
  sh.other_event_bytes = (d.weight.empty() ? 0 : 4) + (d.labels.empty() ? 0 : 4);
  return sh;
}

// Training events: the chronological training range without events of held-out nodes, at most
// --max-train-events of them.
std::vector<std::int64_t> training_events(const TemporalSplit& split, const TgnOptions& opt) {
  std::vector<std::int64_t> train_ids;
  for (std::int64_t e = 0; e < split.train_end; ++e)
    if (split.train_keep[std::size_t(e)]) train_ids.push_back(e);
  if (opt.max_train_events > 0 && std::int64_t(train_ids.size()) > opt.max_train_events)
    train_ids.resize(std::size_t(opt.max_train_events));
  return train_ids;
}

// The model, or a SystemError that names its largest allocation (the memory model's) when the
// memory check let it through and it failed anyway.
std::unique_ptr<TgnReplicas> build_model(const Stream& s, const TgnOptions& opt, Communicator& comm,
                                         const std::string& dataset) {
  try {
    return std::make_unique<TgnReplicas>(s, opt, &comm);
  } catch (const std::bad_alloc&) {  // weights, or the node state: memory, two message tables
    const TgnMemoryEstimate e =
        estimate_tgn_memory(tgn_stream_shape(s.nodes, s.events, s.de), opt, comm.size());
    throw SystemError("out of memory allocating the model: " +
                      tgn_memory_message(e, opt, s.nodes, dataset));
  }
}

// --resume: the parameters and the run's counters from the newest checkpoint.
void resume_run(Communicator& comm, const TgnOptions& opt, TgnReplicas& model, TgnRunState& st,
                const json& key, std::ostream& out) {
  if (opt.checkpoint.empty()) throw ParamError("--resume needs --checkpoint DIR");
  // Every rank learns the outcome from rank 0's broadcast, so all refuse alike. No checkpoint
  // is a typo'd or wiped directory: starting over silently would overwrite the log.
  if (!load_tgn_checkpoint(comm, opt.checkpoint, model.params(), st, key))
    throw ParamError("--resume: no checkpoint in " + opt.checkpoint.string() +
                     "; drop --resume to start a new run");
  if (st.epoch > opt.epochs)
    throw ParamError("--resume: the checkpoint in " + opt.checkpoint.string() + " is of epoch " +
                     std::to_string(st.epoch) + ", after --epochs " + std::to_string(opt.epochs) +
                     "; resume with --epochs " + std::to_string(st.epoch) +
                     " or more, or start a new checkpoint directory");
  if (comm.rank() == 0 && !opt.quiet) out << "resumed after epoch " << st.epoch << "\n";
}

// What every epoch of a run uses.
struct TgnRun {
  const TgnOptions& opt;
  const Stream& s;
  const TemporalSplit& split;
  const std::vector<std::int64_t>& train_ids;
  Communicator& comm;
  Backend& be;
  TgnReplicas& model;
  RecentSampler& train_sampler;  // training events only
  RecentSampler& full_sampler;   // every event, for evaluation
  bool segments;                 // independent memories, one time segment per rank
  LogFile& log;
  std::ostream& out;
  bool lead() const { return comm.rank() == 0; }
};

// One epoch's training on the memory as it is (reset by the caller): the mean loss of this
// rank's batches. The training events this rank walks through: all of them (exact: every rank
// takes a slice of every batch) or its own time segment (independent memories).
double train_epoch(TgnRun& run, int epoch, std::int64_t& step) {
  const TgnOptions& opt = run.opt;
  Communicator& comm = run.comm;
  double loss = 0;
  std::int64_t batches = 0;
  std::vector<float> ps, ns;
  std::size_t first = 0, last = run.train_ids.size();
  if (run.segments) {
    first = run.train_ids.size() * std::size_t(comm.rank()) / std::size_t(comm.size());
    last = run.train_ids.size() * std::size_t(comm.rank() + 1) / std::size_t(comm.size());
  }
  const std::size_t per = std::size_t(opt.batch_size);
  std::int64_t steps = std::int64_t((last - first + per - 1) / per);
  if (run.segments) comm.allreduce(&steps, 1, ReduceOp::kMax);  // every rank joins every all-reduce
  run.model.set_independent(run.segments);
  for (std::int64_t b = 0; b < steps; ++b) {
    const std::size_t b0 = first + std::size_t(b) * per;
    double batch_loss = 0;  // all-reduced: the same on every rank
    if (b0 >= last) {       // this rank's segment is done; the others' is not
      batch_loss = run.model.empty_step(run.be, ++step);
    } else {
      const std::vector<std::int64_t> ids(
          run.train_ids.begin() + std::ptrdiff_t(b0),
          run.train_ids.begin() + std::ptrdiff_t(std::min(last, b0 + per)));
      batch_loss = run.model.batch(run.be, run.train_sampler, ids,
                                   negatives(ids, opt.seed, std::uint64_t(epoch), run.s.nodes),
                                   ++step, &ps, &ns);
      loss += batch_loss;
      ++batches;
    }
    if (!std::isfinite(batch_loss))
      throw diverged(epoch, b + 1, steps, "the training loss is " + std::to_string(batch_loss),
                     opt.lr);
  }
  if (run.segments) {  // evaluation continues from the memory at the end of training: the last
                       // segment's
    run.model.sync_state(comm.size() - 1);
    run.model.set_independent(false);
  }
  return loss / double(std::max<std::int64_t>(1, batches));
}

// Scores events [begin, end) in batches, the memory carried on, on every rank alike. One
// negative per event for AP and AUC; with --eval-negatives N, N of them (the first is the same)
// for the positive's reciprocal rank.
Scores evaluate(TgnRun& run, int epoch, std::int64_t begin, std::int64_t end, const char* name) {
  const TgnOptions& opt = run.opt;
  const std::int64_t nneg = std::max<std::int64_t>(1, opt.eval_negatives);
  std::vector<Scored> mine;
  std::int64_t nonfinite = 0;  // this rank's NaN or infinite scores
  for (std::int64_t b0 = begin; b0 < end; b0 += opt.batch_size) {
    const auto ids = event_range(b0, std::min(end, b0 + opt.batch_size));
    std::vector<float> p, n;
    run.model.batch(run.be, run.full_sampler, ids,
                    negatives(ids, kEvalNegatives, 0, run.s.nodes, nneg), 0, &p, &n);
    for (const std::vector<float>* v : {&p, &n})
      for (float x : *v) nonfinite += !std::isfinite(x);
    const std::int64_t lo = run.model.slice_begin(std::int64_t(ids.size())),
                       bs = std::int64_t(p.size());
    for (std::int64_t i = 0; i < bs; ++i) {
      // rank = 1 + #(higher) + #(tied) / 2, as TGB does (negative j of event i at j * bs + i)
      const float rr = opt.eval_negatives > 0
                           ? float(reciprocal_rank(p[std::size_t(i)], n.data() + i, nneg, bs))
                           : 0.f;
      mine.push_back({ids[std::size_t(lo + i)], p[std::size_t(i)], n[std::size_t(i)], rr});
    }
  }
  // The metrics are defined on NaN (they rank it lowest), but a figure of a model whose scores
  // are not numbers is no result: every rank learns the count and stops alike.
  run.comm.allreduce(&nonfinite, 1);
  if (nonfinite > 0)
    throw diverged(epoch, 0, 0,
                   std::to_string(nonfinite) + " of the " + name + " scores are not finite",
                   opt.lr);
  Scores sc;
  sc.batch = opt.batch_size;
  for (const Scored& e : all_scored(run.comm, std::move(mine), end - begin)) {
    sc.add(e.pos, e.neg, run.split.inductive[std::size_t(e.event)] != 0);
    sc.rr_sum += e.rr;
    ++sc.rr_count;
  }
  return sc;
}

// The log record and the line on out of an epoch without evaluation.
void report_unevaluated_epoch(TgnRun& run, int epoch, double loss, double secs, double speed) {
  json rec = {{"type", "epoch"},
              {"epoch", epoch},
              {"loss", loss},
              {"epoch_time_s", secs},
              {"events_per_s", speed}};
  run.log.write_line(rec.dump());
  if (run.lead() && !run.opt.quiet) {
    char line[160];
    std::snprintf(line, sizeof line, "epoch %3d  loss %.4f  %.0f events/s (no evaluation)\n", epoch,
                  rec["loss"].get<double>(), speed);
    run.out << line << std::flush;
  }
}

// The log record and the line on out of an evaluated epoch.
void report_epoch(TgnRun& run, int epoch, double loss, double secs, double speed, const Scores& val,
                  const Scores& test) {
  const TgnOptions& opt = run.opt;
  const double vap = val.ap();
  json rec = {{"type", "epoch"},
              {"epoch", epoch},
              {"loss", loss},
              {"valid_ap", vap},
              {"valid_auc", val.auc()},
              {"valid_inductive_ap", val.ap_ind()},
              {"test_ap", test.ap()},
              {"test_auc", test.auc()},
              {"test_inductive_ap", test.ap_ind()},
              {"test_ap_pooled", test.ap_pooled()},
              {"epoch_time_s", secs},
              {"events_per_s", speed}};
  if (opt.eval_negatives > 0) {
    rec["valid_mrr"] = val.mrr();
    rec["test_mrr"] = test.mrr();
  }
  run.log.write_line(rec.dump());
  if (!run.lead() || opt.quiet) return;
  char line[256];
  std::snprintf(line, sizeof line,
                "epoch %3d  loss %.4f  valid AP %.4f AUC %.4f (new nodes AP %.4f)", epoch,
                rec["loss"].get<double>(), vap, val.auc(), val.ap_ind());
  run.out << line;
  if (opt.eval_negatives > 0) {
    std::snprintf(line, sizeof line, " MRR %.4f (%lld negatives)", val.mrr(),
                  (long long)opt.eval_negatives);
    run.out << line;
  }
  std::snprintf(line, sizeof line, "  %.0f events/s\n", speed);
  run.out << line << std::flush;
}

// A validation AP better than every earlier epoch's makes this epoch the summary's.
void keep_if_best(TgnRunState& st, int epoch, const Scores& val, const Scores& test) {
  const double vap = val.ap();
  if (vap > st.best_val) {
    st.best_val = vap;
    st.since_best = 0;
    st.sum.best_epoch = epoch;
    st.sum.valid_ap = vap;
    set_test(st.sum, test);
    st.sum.test_mrr = test.mrr();
  } else {
    ++st.since_best;
  }
}

// Saved after every epoch (and before an early stop, so a resumed run stops too).
void checkpoint_epoch(TgnRun& run, TgnRunState& st, int epoch, const json& key) {
  if (run.opt.checkpoint.empty()) return;
  st.epoch = epoch;
  save_tgn_checkpoint(run.comm, run.opt.checkpoint, run.model.params(), st, key);
}

// Epochs after st.epoch until --epochs or --patience: train, evaluate, report, checkpoint.
void run_epochs(TgnRun& run, TgnRunState& st, const json& key) {
  const TgnOptions& opt = run.opt;
  OpProfile profile;  // --profile: the training batches' ops on this rank
  double trained = 0;
  for (int epoch = st.epoch + 1; epoch <= opt.epochs && st.since_best < opt.patience; ++epoch) {
    run.model.reset();
    run.train_sampler.reset();
    Stopwatch clock;
    std::optional<ProfileScope> profiling;
    if (opt.profile) profiling.emplace(profile);
    const double loss = train_epoch(run, epoch, st.step);
    profiling.reset();
    const double secs = clock.seconds();
    trained += secs;
    st.speeds.push_back(double(run.train_ids.size()) / secs);
    if (opt.skip_eval) {
      report_unevaluated_epoch(run, epoch, loss, secs, st.speeds.back());
      checkpoint_epoch(run, st, epoch, key);
      continue;
    }
    // Validation then test, the memory carried on from training.
    run.full_sampler.reset();
    const Scores val = evaluate(run, epoch, run.split.train_end, run.split.valid_end, "validation");
    const Scores test = evaluate(run, epoch, run.split.valid_end, run.s.events, "test");
    report_epoch(run, epoch, loss, secs, st.speeds.back(), val, test);
    keep_if_best(st, epoch, val, test);
    checkpoint_epoch(run, st, epoch, key);
  }
  if (opt.profile && run.lead())  // the rest of the training time is the host's bookkeeping
    run.out << "time per kernel (training batches, rank 0): " << profile.seconds() << " s of "
            << trained << " s training\n"
            << profile.report() << std::flush;
}

}  // namespace

TgnSummary train_tgn(const fs::path& dataset, Communicator& comm, const TgnOptions& options,
                     std::ostream& out) {
  const TgnOptions opt = resolved(options);
  opt.check();
  Device device = tgn_device(opt);
  if (opt.device == DeviceChoice::kAuto && comm.size() > 1) {  // all ranks on GPUs, or none:
    std::int64_t gpu = device == Device::kCuda;  // choosing a rank's GPU is collective
    comm.allreduce(&gpu, 1, ReduceOp::kMin);
    device = gpu ? Device::kCuda : Device::kCpu;
  }
  if (dataset_kind(dataset) != "temporal")
    throw ParamError(
        dataset.string() +
        " is not a temporal dataset (convert an event file with --format konect|snap|jodie)");
  const bool lead = comm.rank() == 0;
  // Outputs refused before any work when they would replace something they must not or touch
  // the dataset (staging.h).
  if (lead && !opt.log.empty()) resolve_stream_output(opt.log, {dataset});
  if (!opt.checkpoint.empty()) check_output_folder(opt.checkpoint, {dataset});
  check_outside_checkpoint(opt.log, "--log", opt.checkpoint);
  if (opt.threads > 0)
    omp_set_num_threads(opt.threads);
  else if (comm.size() > 1 && !std::getenv("OMP_NUM_THREADS"))
    omp_set_num_threads(default_threads_per_rank());
  const TemporalDataset d = read_temporal_dataset(dataset);
  // Every rank reads its own node's copy of the stream: all must be the same dataset.
  check_inputs_agree(dataset.string(),
                     {{"dataset fingerprint", read_dataset_meta(dataset).value("fingerprint", "")}},
                     "every node must hold a copy of the same dataset", comm);
  const Stream s = stream_of(d);
  const TemporalSplit split =
      chronological_split(s.nodes, s.src, s.dst, s.time, s.events, opt.seed);
  // Before the indexes, the model and the node state are allocated: a run that cannot fit is one
  // line naming the allocation and the flags that size it.
  const TgnStreamShape shape = stream_shape(d, split);
  if (opt.model != TgnModel::kEdgebank)  // EdgeBank has no model, memory or batch buffers
    refuse_impossible_tgn_memory(shape, opt, comm.size(), dataset.string());
  // EdgeBank learns nothing, but it evaluates; the others need events to learn from.
  check_split(dataset, s, split, split.train_end,
              opt.model == TgnModel::kEdgebank || !opt.skip_eval);
  // Rank 0 alone writes the checkpoint; the folder is this run's before the log is opened.
  std::optional<CheckpointClaim> claim;
  if (!opt.checkpoint.empty())
    claim.emplace(comm, opt.checkpoint, opt.resume, opt.force, /*every_rank=*/false);
  LogFile log;  // every record written whole and checked (staging.h)
  if (lead && !opt.log.empty()) log.open(opt.log, opt.resume);
  if (opt.model == TgnModel::kEdgebank) return run_edgebank(s, split, opt, log);

  const std::vector<std::int64_t> train_ids = training_events(split, opt);
  check_split(dataset, s, split, std::int64_t(train_ids.size()),
              !opt.skip_eval);  // held-out nodes may take them all
  const TemporalCsr train_graph =
      build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events, split.train_keep.data());
  const TemporalCsr full_graph = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events);
  RecentSampler train_sampler(train_graph, opt.neighbors), full_sampler(full_graph, opt.neighbors);
  // Ranks take their machine's GPUs in turn (several may share one: the gradients' all-reduce
  // is staged through the host either way), chosen before any device allocation.
  const TgnPlacement place = place_tgn(device, opt, shape, comm, dataset.string(), out);
  const std::unique_ptr<TgnReplicas> model = build_model(s, opt, comm, dataset.string());
  model->to_device(device, place.memory);
  model->reduce_in_place_with(place.in_place());
  Backend& be = device == Device::kCuda ? cuda_backend() : cpu_backend();
  TgnRunState st;
  const json key = tgn_checkpoint_key(opt, s);
  if (opt.resume) resume_run(comm, opt, *model, st, key, out);
  TgnRun run{opt,          s,
             split,        train_ids,
             comm,         be,
             *model,       train_sampler,
             full_sampler, opt.parallel == TgnParallel::kSegments && comm.size() > 1,
             log,          out};
  run_epochs(run, st, key);
  TgnSummary sum = st.sum;
  std::sort(st.speeds.begin(), st.speeds.end());
  sum.events_per_s = st.speeds.empty() ? 0.0 : st.speeds[st.speeds.size() / 2];
  add_peak_memory(sum, comm, device == Device::kCuda);
  sum.ranks = comm.size();
  sum.memory_on = to_string(place.memory);
  log.write_line(sum.to_json().dump());
  log.close();
  return sum;
}

TgnMemoryPrediction predict_tgn_memory(const fs::path& dataset, const TgnOptions& options,
                                       int ranks) {
  const TgnOptions opt = resolved(options);
  opt.check();
  if (dataset_kind(dataset) != "temporal")
    throw ParamError(
        dataset.string() +
        " is not a temporal dataset (convert an event file with --format konect|snap|jodie)");
  const TemporalDataset d = read_temporal_dataset(dataset);
  const Stream s = stream_of(d);
  const TemporalSplit split =
      chronological_split(s.nodes, s.src, s.dst, s.time, s.events, opt.seed);
  const TgnStreamShape shape = stream_shape(d, split);
  return {estimate_tgn_memory(shape, opt, ranks),
          estimate_tgn_gpu_memory(shape, opt, ranks, TgnMemoryOn::kDevice),
          estimate_tgn_gpu_memory(shape, opt, ranks, TgnMemoryOn::kHost)};
}

void write_tgn_split(const fs::path& dataset, const fs::path& out, std::uint64_t seed) {
  if (dataset_kind(dataset) != "temporal")
    throw ParamError(dataset.string() +
                     " is not a temporal dataset (convert an event file with "
                     "--format konect|snap|jodie)");
  resolve_file_output(out, {dataset});
  const TemporalDataset d = read_temporal_dataset(dataset);
  const EventStream s = stream_of(d);
  const TemporalSplit split = chronological_split(s.nodes, s.src, s.dst, s.time, s.events, seed);
  const std::size_t n = std::size_t(s.events);
  std::vector<std::int64_t> src(n), dst(n), ids(n);
  for (std::size_t e = 0; e < n; ++e) {
    src[e] = s.src[e];
    dst[e] = s.dst[e];
    ids[e] = std::int64_t(e);
  }
  const std::vector<NodeId> neg = negatives(ids, kEvalNegatives, 0, s.nodes);
  const std::vector<std::int64_t> eval_neg(neg.begin(), neg.end());
  const std::int64_t nodes = s.nodes, train_end = split.train_end, valid_end = split.valid_end;
  const std::uint64_t events = std::uint64_t(n), de = std::uint64_t(s.de);
  write_npz(out, {{"src", "<i8", {events}, src.data(), n * 8},
                  {"dst", "<i8", {events}, dst.data(), n * 8},
                  {"t", "<f8", {events}, s.time, n * 8},
                  {"msg", "<f4", {events, de}, s.efeat, std::size_t(events * de) * 4},
                  {"nodes", "<i8", {1}, &nodes, 8},
                  {"train_end", "<i8", {1}, &train_end, 8},
                  {"valid_end", "<i8", {1}, &valid_end, 8},
                  {"train_keep", "|u1", {events}, split.train_keep.data(), n},
                  {"inductive", "|u1", {events}, split.inductive.data(), n},
                  {"eval_neg", "<i8", {events}, eval_neg.data(), n * 8}});
}

}  // namespace halo

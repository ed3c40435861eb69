// Full-batch training of one rank: a single process is the one-rank case of the distributed
// trainer (no halo rows, the local communicator), so both share every line of the protocol.
//
// What makes K ranks train the model one process would:
// - every rank holds the same replicated parameters: initial weights from the keyed RNG, one
//   fused all-reduce of the gradients per step, then the same Adam step everywhere;
// - losses, metrics and batch-norm statistics are sums over ranks divided by global counts;
// - dropout masks are keyed by global node id, so a row is dropped the same wherever it lives;
// - the GCN normalisation uses global degrees (carried by the parts).
#include "halo/runtime/trainer.h"

#include <omp.h>

#include <unistd.h>

#include <array>
#include <csignal>
#include <cstring>
#include <set>
#include <thread>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <new>
#include <numeric>
#include <optional>
#include <ostream>

#include "halo/gnn/device.h"
#include "halo/gnn/metrics.h"
#include "halo/gnn/timed_backend.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/npz.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/partition/parts.h"
#include "halo/runtime/comm.h"
#include "halo/runtime/halo_exchange.h"
#include "halo/runtime/memory_model.h"

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
  if (device != "cpu" && device != "cuda" && device != "auto") throw ParamError("--device must be cpu, cuda or auto");
  if (halo_dtype != "f32" && halo_dtype != "bf16") throw ParamError("--halo-dtype must be f32 or bf16");
  parse_matmul_precision(matmul_precision);
  if (halo_staleness != 0 && halo_staleness != 1) throw ParamError("--halo-staleness must be 0 or 1");
}

TrainOptions::Fault parse_fault(const std::string& spec) {
  TrainOptions::Fault f;
  const auto bad = [&] {
    return ParamError("HALO_INJECT_FAULT='" + spec + "': expected RANK:EPOCH[:throw|kill|hang]");
  };
  const std::size_t a = spec.find(':');
  if (a == std::string::npos) throw bad();
  const std::size_t b = spec.find(':', a + 1);
  try {
    std::size_t used = 0;
    f.rank = std::stoi(spec.substr(0, a), &used);
    if (used != a) throw bad();
    const std::string e = spec.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    f.epoch = std::stoi(e, &used);
    if (used != e.size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (b != std::string::npos) f.mode = spec.substr(b + 1);
  if (f.rank < 0 || f.epoch < 1 || (f.mode != "throw" && f.mode != "kill" && f.mode != "hang")) throw bad();
  return f;
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
  json j = {{"type", "summary"},         {"metric", metric},
            {"valid_mean", valid_mean},  {"valid_std", valid_std},
            {"test_mean", test_mean},    {"test_std", test_std},
            {"runs", runs.size()},       {"epoch_time_median_s", epoch_time_median_s},
            {"peak_rss_mb", peak_rss_mb}, {"ranks", ranks},
            {"matmul_precision", matmul_precision}};
  if (peak_gpu_mb > 0) j["peak_gpu_mb"] = peak_gpu_mb;
  if (ranks > 1) {
    if (!rank_peak_rss_mb.empty()) {
      j["rank_owned_rows"] = rank_owned_rows;
      j["rank_halo_rows"] = rank_halo_rows;
      j["rank_peak_rss_mb"] = rank_peak_rss_mb;
    }
    j["halo_bytes_per_epoch"] = halo_bytes_per_epoch;
    j["halo_wait_s"] = halo_wait_s;
    j["allreduce_s"] = allreduce_s;
    j["compute_s"] = compute_s;
  }
  return j;
}

namespace {

// The physical machine this process runs on: its kernel's boot id (shared by the containers and
// network namespaces of one host, whatever their host names), else the host name. GPUs belong
// to machines, so GPU placement counts ranks per machine; what users and launchers call a node
// is its host name, which names ranks in every message (comm.cc, the supervisor).
std::string machine_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot && std::getline(boot, id) && !id.empty()) return id;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Another communicator that claims to move the compute backend's memory as it is: on CPU ranks
// over MPI (host memory) it sends the halo exchange through its direct path, the one NCCL
// takes on GPUs, so that path's buffer handling meets real peers without GPUs
// (HALO_TEST_DIRECT_EXCHANGE=1; a test hook, not a mode).
class DirectOver final : public Communicator {
 public:
  explicit DirectOver(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* name() const override { return inner_.name(); }
  bool device_buffers() const override { return true; }
  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends, std::span<const PeerBlock> recvs,
                                    int tag) override {
    return inner_.exchange(sends, recvs, tag);
  }
  void allreduce(float* data, std::int64_t n, ReduceOp op) override { inner_.allreduce(data, n, op); }
  void allreduce(double* data, std::int64_t n, ReduceOp op) override { inner_.allreduce(data, n, op); }
  void allreduce(std::int64_t* data, std::int64_t n, ReduceOp op) override { inner_.allreduce(data, n, op); }
  std::vector<char> gather(const void* data, std::size_t bytes, int root, std::vector<std::size_t>* counts) override {
    return inner_.gather(data, bytes, root, counts);
  }
  void broadcast(void* data, std::size_t bytes, int root) override { inner_.broadcast(data, bytes, root); }
  void barrier() override { inner_.barrier(); }
  void abort(int code) override { inner_.abort(code); }

 private:
  Communicator& inner_;
};

// Every rank's string (up to 127 bytes), in rank order, on every rank.
std::vector<std::string> every_rank(Communicator& comm, const std::string& mine) {
  constexpr std::size_t kRecord = 128;
  char record[kRecord] = {};
  std::strncpy(record, mine.c_str(), kRecord - 1);
  std::vector<char> all = comm.gather(record, kRecord, 0, nullptr);
  all.resize(kRecord * std::size_t(comm.size()));
  comm.broadcast(all.data(), all.size(), 0);
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) out.emplace_back(all.data() + kRecord * std::size_t(r));
  return out;
}

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

// What one rank trains on: its owned rows (inner rows first) and the halo rows after them.
struct RankData {
  std::string source;                    // the dataset or PARTS directory, for messages
  std::string dataset_fingerprint;       // of the dataset (a checkpoint's key)
  std::string partition;                 // fingerprint of PARTS; empty for one process
  std::int64_t owned = 0, all = 0, inner = 0, global_nodes = 0;
  CsrView graph;                         // owned rows, columns over [owned | halo]
  const std::int32_t* degree = nullptr;  // [all] global degrees
  const NodeId* global_ids = nullptr;    // [all]; null = identity (one process)
  MatrixView features;                   // owned x num_features
  const std::int32_t* labels = nullptr;  // owned x label_cols
  std::int64_t label_cols = 0, num_classes = 0;
  LabelKind label_kind = LabelKind::kNone;
  const std::vector<Split>* splits = nullptr;  // local ids
  std::string default_split;
  HaloPlanView plan;
  const NodeId* original_ids = nullptr;  // [global_nodes] input order (rank 0), or null
};

// Labels and splits from a dataset or a part (the same fields on both).
template <class Source>
void take_labels(RankData& r, const Source& d) {
  r.labels = d.labels.data();
  r.label_cols = d.label_cols;
  r.num_classes = d.num_classes;
  r.label_kind = d.label_kind;
  r.splits = &d.splits;
}

// What a checkpoint must match to be resumed: every option that changes the trajectory, and the
// dataset. Not the partition nor the rank count: weights and Adam state are replicated on every
// rank and dropout masks are keyed by global node id, so K ranks train one process's model up
// to float summation order and a checkpoint continues on any number of ranks. Not the device
// (CPU and CUDA differ by rounding only), nor the epoch count (resuming a finished run with more
// epochs trains it further). The communication savers are recorded apart: see exchange_note.
json trajectory_key(const TrainOptions& o, const std::string& dataset_fingerprint) {
  const ModelConfig& m = o.model;
  return {{"model", m.kind},        {"layers", m.layers},        {"hidden", m.hidden},
          {"dropout", m.dropout},   {"input_dropout", m.input_dropout}, {"batch_norm", m.batch_norm},
          {"lr", o.lr},             {"weight_decay", o.weight_decay},
          {"decay_first_layer_only", o.decay_first_layer_only}, {"norm_features", o.norm_features},
          {"split", o.split},       {"seed", o.seed},            {"matmul_precision", o.matmul_precision},
          {"dataset", dataset_fingerprint}};
}

// How a trajectory's halo rows travelled: the partition (empty for one process) and the savers
// in effect (one process exchanges nothing, so it has none).
json exchange_record(const TrainOptions& o, const std::string& partition, int ranks) {
  const bool exchanges = ranks > 1;
  return {{"ranks", ranks},
          {"partition", partition},
          {"halo_dtype", exchanges ? o.halo_dtype : std::string("f32")},
          {"halo_staleness", exchanges ? o.halo_staleness : 0}};
}

// What to tell the user when a checkpoint resumes with another exchange than it was written
// with; empty when nothing changes. Exact rows before and after: nothing to say, any partition
// computes one process's trajectory. With bf16 or stale rows the trajectory depends on which
// rows are halo rows, i.e. on the partition. We allow that with a note rather than refuse: the
// state is the same kind of object whatever the exchange (replicated weights and Adam moments,
// which the savers only perturb), and the case this is for, a lost machine and a resume on fewer
// ranks, would otherwise lose the whole training.
std::string exchange_note(const json& saved, const json& now) {
  const auto exact = [](const json& x) { return x.at("halo_dtype") == "f32" && x.at("halo_staleness") == 0; };
  if (saved == now || (exact(saved) && exact(now))) return "";
  const auto describe = [&](const json& x) {
    const int k = x.at("ranks").get<int>();
    std::string s = k == 1 ? "1 process" : std::to_string(k) + " ranks";
    if (const std::string p = x.at("partition"); !p.empty()) s += " (partition " + p + ")";
    if (!exact(x))
      s += " with --halo-dtype " + x.at("halo_dtype").get<std::string>() + " --halo-staleness " +
           std::to_string(x.at("halo_staleness").get<int>());
    return s;
  };
  return "note: the checkpoint was written by " + describe(saved) + " and resumes on " + describe(now) +
         ": with bf16 or stale halo rows the trajectory depends on the partition, so this run continues near "
         "the uninterrupted one, not on it";
}

struct RunState {
  int epoch = 0;  // last completed epoch
  std::int64_t adam_step = 0;
  RunResult result;
  // The model at the best validation epoch (model_values); empty before the first evaluation.
  // The predictions come from it at the end, so no state names one partition's rows.
  std::vector<float> best;
};

// The counters and results of a run, as checkpoints and the resume broadcast carry them.
json run_scalars(const RunState& st) {
  return {{"epoch", st.epoch},
          {"adam_step", st.adam_step},
          {"seed", st.result.seed},
          {"best_epoch", st.result.best_epoch},
          {"best_valid", st.result.best_valid},
          {"test_at_best", st.result.test_at_best},
          {"train_at_best", st.result.train_at_best},
          {"final_loss", st.result.final_loss},
          {"epoch_seconds", st.result.epoch_seconds},
          {"has_best", !st.best.empty()}};
}

// The inverse of run_scalars (has_best aside: the best model travels as floats).
void take_run_scalars(const json& j, RunState& st) {
  st.epoch = j.at("epoch").get<int>();
  st.adam_step = j.at("adam_step").get<std::int64_t>();
  st.result.seed = j.at("seed").get<std::uint64_t>();
  st.result.best_epoch = j.at("best_epoch").get<int>();
  st.result.best_valid = j.at("best_valid").get<double>();
  st.result.test_at_best = j.at("test_at_best").get<double>();
  st.result.train_at_best = j.at("train_at_best").get<double>();
  st.result.final_loss = j.at("final_loss").get<double>();
  st.result.epoch_seconds = j.at("epoch_seconds").get<std::vector<double>>();
}

// What evaluation reads of a model: every parameter's value, then every buffer (batch-norm
// running statistics), on the host, in params() and buffers() order.
std::vector<float> model_values(Model& model) {
  std::vector<float> out;
  for (Param* p : model.params()) {
    const std::vector<float> h = p->value.to_host();
    out.insert(out.end(), h.begin(), h.end());
  }
  for (auto& [name, buf] : model.buffers()) out.insert(out.end(), buf->begin(), buf->end());
  return out;
}

// The number of floats model_values returns.
std::size_t model_values_size(Model& model) {
  std::size_t n = 0;
  for (Param* p : model.params()) n += std::size_t(p->value.size());
  for (auto& [name, buf] : model.buffers()) n += buf->size();
  return n;
}

// The inverse of model_values; v.size() == model_values_size(model).
void set_model_values(Model& model, const std::vector<float>& v) {
  auto at = v.begin();
  for (Param* p : model.params()) {
    p->value.assign(std::vector<float>(at, at + p->value.size()));
    at += p->value.size();
  }
  for (auto& [name, buf] : model.buffers()) {
    std::copy_n(at, buf->size(), buf->begin());
    at += std::ptrdiff_t(buf->size());
  }
}

// Checkpoints: CKPT/run-R/rank-r/epoch-E, written atomically by rank r. Every copy holds the
// whole replicated state of the run (nothing of rank r's rows), so one copy of an epoch resumes
// it on any number of ranks. A rank removes its older epochs only after a barrier proves every
// rank has committed E, so whatever instant a job dies at, every rank folder left holds a
// complete epoch, and a resume takes the newest epoch any rank folder holds.
constexpr const char* kCheckpointFormat = "halo-checkpoint";
constexpr int kCheckpointVersion = 2;  // version 1 kept the best epoch's predictions of rank r's rows

// CKPT/run-R, and its rank folders run/rank-r.
fs::path run_dir(const fs::path& ckpt, int run) { return ckpt / ("run-" + std::to_string(run)); }
fs::path rank_dir(const fs::path& run, int rank) { return run / ("rank-" + std::to_string(rank)); }

// The rank of a "rank-r" folder name, or -1.
int rank_of_folder(const std::string& name) {
  if (name.rfind("rank-", 0) != 0 || name.size() == 5 || name.size() > 14) return -1;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
  return int(std::stol(name.substr(5)));
}

// Writes the run's state (live model, Adam moments, best model, counters) to dir, atomically.
void save_checkpoint(const fs::path& dir, Model& model, const RunState& st, const json& key, const json& exchange) {
  StagingDir stage(dir, kCheckpointFormat, /*overwrite=*/true);
  ArrayDir a(stage.path());
  for (Param* p : model.params()) {
    a.put(p->name + ".value", p->value.to_host());
    a.put(p->name + ".m", p->m.to_host());
    a.put(p->name + ".v", p->v.to_host());
  }
  for (auto& [name, buf] : model.buffers()) a.put(name, *buf);
  if (!st.best.empty()) {  // the best epoch's model, under the live model's names prefixed "best."
    const float* at = st.best.data();
    for (Param* p : model.params()) {
      a.put("best." + p->name + ".value", at, std::uint64_t(p->value.size()));
      at += p->value.size();
    }
    for (auto& [name, buf] : model.buffers()) {
      a.put("best." + name, at, buf->size());
      at += buf->size();
    }
  }
  json meta = run_scalars(st);
  meta["key"] = key;
  meta["exchange"] = exchange;
  a.write_meta(std::move(meta), kCheckpointFormat, kCheckpointVersion);
  stage.commit();
}

// A checkpoint's meta.json, refusing another format version or another trajectory in one line
// that says what differs.
json checkpoint_meta(const fs::path& dir, const json& key) {
  {  // read_meta's version message would not say what to do
    std::ifstream f(dir / "meta.json");
    const json raw = json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (raw.is_object() && raw.value("format", "") == kCheckpointFormat &&
        raw.value("version", 0) != kCheckpointVersion)
      throw InputError(dir.string() + ": checkpoint format version " + raw.value("version", json(0)).dump() +
                       ", this halo resumes version " + std::to_string(kCheckpointVersion) +
                       " only (version 1 kept per-partition predictions): finish that run with the halo that "
                       "wrote it, or start a new checkpoint directory");
  }
  json meta = read_meta(dir, kCheckpointFormat, kCheckpointVersion);
  const json& saved = meta.at("key");
  if (saved == key) return meta;
  // Floats as a user types them (--lr 0.05, not 0.05000000074505806) unless that hides the difference.
  const auto text = [](const json& v, const json& other) {
    if (!v.is_number_float() || !other.is_number_float()) return v.dump();
    char a[32], b[32];
    std::snprintf(a, sizeof a, "%g", v.get<double>());
    std::snprintf(b, sizeof b, "%g", other.get<double>());
    return std::strcmp(a, b) != 0 ? std::string(a) : v.dump();
  };
  std::string diff;
  for (const auto& [name, now] : key.items()) {
    const json was = saved.contains(name) ? saved.at(name) : json("none");
    if (was != now)
      diff += (diff.empty() ? "" : ", ") + name + " " + text(now, was) + " here, " + text(was, now) + " there";
  }
  if (diff.empty()) diff = saved.dump();
  const bool other_data = !saved.contains("dataset") || saved.at("dataset") != key.at("dataset");
  throw ParamError(dir.string() + ": checkpoint of " + (other_data ? "another dataset" : "other options") + " (" +
                   diff + "); resume with the same dataset and options, or start a new checkpoint directory");
}

// Loads the checkpoint in dir into model and st; returns how its trajectory's halo rows travelled.
json load_checkpoint(const fs::path& dir, Model& model, RunState& st, const json& key) {
  const json meta = checkpoint_meta(dir, key);
  ReadOptions ro;
  auto restore = [&](const std::string& name, float* dst, std::size_t n) {
    const Array<float> a = map_listed<float>(dir, meta, name, ro, n, 1);
    std::copy(a.begin(), a.end(), dst);
  };
  auto restore_matrix = [&](const std::string& name, Matrix& m) {
    std::vector<float> v(std::size_t(m.size()));
    restore(name, v.data(), v.size());
    m.assign(v);
  };
  for (Param* p : model.params()) {
    restore_matrix(p->name + ".value", p->value);
    restore_matrix(p->name + ".m", p->m);
    restore_matrix(p->name + ".v", p->v);
  }
  for (auto& [name, buf] : model.buffers()) restore(name, buf->data(), buf->size());
  take_run_scalars(meta, st);
  st.best.clear();
  if (meta.at("has_best").get<bool>()) {
    st.best.resize(model_values_size(model));
    float* at = st.best.data();
    for (Param* p : model.params()) {
      restore("best." + p->name + ".value", at, std::size_t(p->value.size()));
      at += p->value.size();
    }
    for (auto& [name, buf] : model.buffers()) {
      restore("best." + name, at, buf->size());
      at += buf->size();
    }
  }
  return meta.at("exchange");
}

// Rank root's run state (parameters, Adam moments, buffers, the best epoch's model, counters,
// results and `exchange`) to every rank, bit for bit. Collective.
void broadcast_state(Communicator& comm, int root, Model& model, RunState& st, json& exchange) {
  if (comm.size() == 1) return;
  const bool me = comm.rank() == root;
  std::string text;  // the scalars as JSON: its length travels first
  if (me) {
    json s = run_scalars(st);
    s["exchange"] = exchange;
    text = s.dump();
  }
  std::int64_t len = std::int64_t(text.size());
  comm.broadcast(&len, sizeof len, root);
  text.resize(std::size_t(len));
  comm.broadcast(text.data(), text.size(), root);
  const json s = json::parse(text);
  if (!me) {
    take_run_scalars(s, st);
    exchange = s.at("exchange");
  }
  // The floats: every rank knows their count from its model (the same configuration everywhere).
  std::vector<float> buf;
  for (Param* p : model.params())
    for (Matrix* m : {&p->value, &p->m, &p->v}) {
      if (me) {
        const std::vector<float> h = m->to_host();
        buf.insert(buf.end(), h.begin(), h.end());
      } else {
        buf.resize(buf.size() + std::size_t(m->size()));
      }
    }
  for (auto& [name, b] : model.buffers()) {
    if (me) buf.insert(buf.end(), b->begin(), b->end());
    else buf.resize(buf.size() + b->size());
  }
  const std::size_t live = buf.size();
  if (me) buf.insert(buf.end(), st.best.begin(), st.best.end());
  else if (s.at("has_best").get<bool>()) buf.resize(live + model_values_size(model));
  comm.broadcast(buf.data(), buf.size() * sizeof(float), root);
  if (me) return;
  auto at = buf.begin();
  for (Param* p : model.params())
    for (Matrix* m : {&p->value, &p->m, &p->v}) {
      m->assign(std::vector<float>(at, at + m->size()));
      at += m->size();
    }
  for (auto& [name, b] : model.buffers()) {
    std::copy_n(at, b->size(), b->begin());
    at += std::ptrdiff_t(b->size());
  }
  st.best.assign(at, buf.end());
}

// Resumes a run from the newest epoch that some rank sees a committed copy of in any rank
// folder of `run` (on a cluster each machine sees its own ranks' folders; a lost machine's are
// gone): the lowest such rank loads it and broadcasts it. Returns how the checkpoint's halo rows
// travelled, or null when no rank sees a checkpoint (the run starts fresh). Collective.
json resume_run(Communicator& comm, const fs::path& run, Model& model, RunState& st, const json& key) {
  const int rank = comm.rank();
  int newest = 0;
  fs::path copy;
  int copy_rank = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run, ec)) {
    const int r = rank_of_folder(e.path().filename().string());
    if (r < 0) continue;
    const std::vector<int> epochs = committed_epochs(e.path());
    if (epochs.empty() || epochs.back() < newest) continue;
    // Copies of one epoch hold the same state; prefer this rank's own, then the lowest rank's.
    if (epochs.back() == newest && (copy_rank == rank || (r != rank && r > copy_rank))) continue;
    newest = epochs.back();
    copy = epoch_dir(e.path(), newest);
    copy_rank = r;
  }
  std::int64_t e = newest;
  comm.allreduce(&e, 1, ReduceOp::kMax);
  if (e == 0) return json();
  std::int64_t holder = newest == e ? rank : comm.size();
  comm.allreduce(&holder, 1, ReduceOp::kMin);
  json exchange;
  if (rank == holder) exchange = load_checkpoint(copy, model, st, key);
  broadcast_state(comm, int(holder), model, st, exchange);
  return exchange;
}

// Writes this rank's copy of epoch st.epoch, then, once every rank has, removes older epochs.
// Collective.
void commit_checkpoint(Communicator& comm, const fs::path& run, Model& model, const RunState& st, const json& key,
                       const json& exchange) {
  const fs::path mine = rank_dir(run, comm.rank());
  save_checkpoint(epoch_dir(mine, st.epoch), model, st, key, exchange);
  comm.barrier();  // every rank has epoch st.epoch now: older ones may go
  remove_epochs_before(mine, st.epoch);
  // Folders of ranks this job does not have (a larger job's, before a resume on fewer ranks)
  // hold superseded epochs now. Ranks that share a file system race to remove them: errors are
  // someone else's success.
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& f : fs::directory_iterator(run, ec))
    if (rank_of_folder(f.path().filename().string()) >= comm.size()) stale.push_back(f.path());
  for (const fs::path& f : stale) {
    try {
      for (int old : committed_epochs(f))
        if (old < st.epoch) fs::remove_all(epoch_dir(f, old), ec);
      fs::remove(f, ec);  // only if empty
    } catch (const fs::filesystem_error&) {
    }
  }
}

[[noreturn]] void inject_fault(const TrainOptions::Fault& f) {
  if (f.mode == "kill") std::raise(SIGKILL);
  if (f.mode == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  throw SystemError("injected fault at epoch " + std::to_string(f.epoch) + " (HALO_INJECT_FAULT)");
}

// What train_rank is allocating, for the message of a std::bad_alloc that the memory check
// before training did not foresee (thread_local: train_rank runs on the calling thread only).
thread_local const char* t_allocating = "the run's buffers";

// The memory model's view of this rank (RankShape, ModelShape) from what train_rank holds.
MemoryEstimate rank_estimate(const RankData& d, const Split& split, const TrainOptions& opt, int ranks, int rank) {
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
  // Only rank 0's multi-label metric buffers read it; the local sets times the ranks bound it.
  r.global_split_rows = std::int64_t(std::max({split.train.size(), split.valid.size(), split.test.size()})) * ranks;
  ModelShape m;
  m.sage = opt.model.kind == "sage";
  m.layers = opt.model.layers;
  m.hidden = opt.model.hidden;
  m.out = opt.model.out;
  m.multilabel = d.label_kind == LabelKind::kMultilabel;
  m.dropout = opt.model.dropout;
  m.input_dropout = opt.model.input_dropout;
  m.batch_norm = opt.model.batch_norm;
  m.norm_features = opt.norm_features;
  m.halo_bf16 = opt.halo_dtype == "bf16";
  m.halo_staleness = opt.halo_staleness;
  m.predictions = !opt.predictions_out.empty();
  return estimate_rank_memory(r, m);
}

// The memory model's bytes for this rank, or, when the sizes are so large that its int64
// arithmetic could overflow, a float lower bound of the weights and slabs alone (already far
// beyond any machine).
double rank_bytes(const RankData& d, const Split& split, const TrainOptions& opt, int ranks, int rank,
                  std::string* largest) {
  const double w = double(opt.model.hidden), f = double(d.features.cols), c = double(opt.model.out),
               a = double(d.all), layers = double(opt.model.layers);
  const double params = f * w + (layers - 2 > 0 ? layers - 2 : 0) * w * w + w * c;
  const double rough = 4.0 * (6 * params + 3 * a * w * layers);  // weights, Adam, best; slabs
  if (rough > 1e17) {
    *largest = "weights and activations";
    return rough;
  }
  const MemoryEstimate est = rank_estimate(d, split, opt, ranks, rank);
  std::int64_t top = -1;
  for (const auto& [name, bytes] : est.terms())
    if (bytes > top) {
      top = bytes;
      *largest = name;
    }
  return double(est.total());
}

// Refuses, before anything large is allocated, a run whose predicted peak (the memory model's,
// CPU backend) exceeds twice what this process can get: clearly impossible, not a close call
// (the model is exact to a few percent, and the kernel may still reclaim caches). A close call
// trains and, if it fails, fails with the message of train_rank's bad_alloc handler.
// HALO_MEMORY_CHECK=0 skips the check (to let the kernel decide, as the OOM tests do).
void refuse_impossible_memory(const RankData& d, const Split& split, const TrainOptions& opt, int ranks, int rank) {
  if (const char* v = std::getenv("HALO_MEMORY_CHECK"); v && std::string(v) == "0") return;
  std::string largest;
  const double need = rank_bytes(d, split, opt, ranks, rank, &largest);
  const AvailableMemory avail = available_memory();
  if (avail.bytes <= 0 || need <= 2.0 * double(avail.bytes)) return;
  const bool model_part = largest == "weights" || largest == "activations" || largest == "gradients" ||
                          largest == "exchange" || largest == "weights and activations" || largest == "transient";
  char head[160];
  if (model_part)
    std::snprintf(head, sizeof head, "--hidden %lld --layers %d", (long long)opt.model.hidden, opt.model.layers);
  else
    std::snprintf(head, sizeof head, "%s", d.source.c_str());
  throw ParamError(std::string(head) + ": training needs about " + format_bytes(std::uint64_t(need)) +
                   " on this rank (memory model; mostly " + largest + "), but only " +
                   format_bytes(std::uint64_t(avail.bytes)) + " is available (" + avail.source + "); " +
                   (model_part  ? "lower --hidden or --layers"
                    : ranks > 1 ? "partition the dataset into more parts"
                                : "partition the dataset (halo partition) and train across ranks"));
}

// The error that ends a run whose loss or outputs stopped being numbers. Every rank sees the same
// all-reduced loss (and the same all-reduced verdict on the outputs), so every rank throws it
// at the same epoch: none is left waiting in a collective for the others.
Error diverged(int run, int epoch, const std::string& what, float lr) {
  char line[320];
  std::snprintf(line, sizeof line,
                "run %d epoch %d: %s: the model diverged; lower --lr (now %g) or check the features for extreme "
                "values",
                run, epoch, what.c_str(), double(lr));
  return Error(line);
}

// Per-rank figures of one epoch, gathered on rank 0 for the log.
struct RankFigures {
  double bytes = 0, eval_bytes = 0, wait_s = 0, allreduce_s = 0, compute_s = 0, epoch_s = 0;
};

TrainSummary train_rank(const RankData& d, Communicator& comm, const TrainOptions& opt_in, std::ostream& out) try {
  TrainOptions opt = opt_in;
  const int rank = comm.rank(), ranks = comm.size();
  const bool lead = rank == 0;
  const std::int64_t n = d.owned;
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  else if (ranks > 1 && !std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(default_threads_per_rank());
  if (d.label_kind == LabelKind::kNone) throw ParamError(d.source + ": the dataset has no labels");
  if (d.features.cols == 0) throw ParamError(d.source + ": the dataset has no node features");
  if (opt.split.empty()) opt.split = d.default_split;
  const Split* split = nullptr;
  for (const Split& s : *d.splits)
    if (s.name == opt.split) split = &s;
  if (!split) throw ParamError(d.source + ": no split named '" + opt.split + "'");
  const bool multilabel = d.label_kind == LabelKind::kMultilabel;
  opt.model.in = d.features.cols;
  opt.model.out = multilabel ? d.label_cols : d.num_classes;
  opt.check();
  if (opt.device != "cuda") refuse_impossible_memory(d, *split, opt, ranks, rank);  // the model is of host memory
  t_allocating = "the row-normalised features and the graph operator";

  // Inputs: features as mapped, or a row-normalised copy.
  Matrix xnorm;
  MatrixView x = d.features;
  if (opt.norm_features) {
    xnorm.resize(n, x.cols);
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
  GraphOperator gcn, mean;
  if (opt.model.kind == "gcn") gcn = gcn_operator(d.graph, d.all, d.degree);
  else mean = mean_operator(d.graph, d.all);

  // The device: every array kernels read is copied there once (CUDA), the rest stays mapped.
  const Device dev = opt.device == "cuda" || (opt.device == "auto" && cuda_devices().count > 0) ? Device::kCuda
                                                                                              : Device::kCpu;
  const bool gpu = dev == Device::kCuda;
  // Ranks on GPUs: one GPU per rank on a node when there are enough, and then NCCL moves the
  // halo rows and gradients (f32 or bf16, exact or stale) between device buffers; otherwise
  // (ranks sharing a GPU, no NCCL) MPI with host staging of the packed payload.
  std::unique_ptr<Communicator> nccl;
  if (gpu && ranks > 1) {
    const CudaDevices devs = cuda_devices();
    if (devs.count == 0) throw SystemError("--device cuda: " + devs.reason);
    // This rank's place among the ranks on its machine (from machine ids, whatever the launcher
    // or the host names), then whether two ranks drive one physical GPU (NCCL does not support
    // it: it may hang), from PCI bus ids rather than counts, so per-rank CUDA_VISIBLE_DEVICES is
    // read right.
    const std::vector<std::string> hosts = every_rank(comm, machine_id());
    int local = 0;
    for (int r = 0; r < rank; ++r) local += hosts[std::size_t(r)] == hosts[std::size_t(rank)];
    use_device(local % devs.count);
    const std::vector<std::string> gpus =
        every_rank(comm, hosts[std::size_t(rank)] + "/" + device_pci_bus_id(local % devs.count));
    std::string why = nccl_unavailable_reason();
    if (why.empty() && std::set<std::string>(gpus.begin(), gpus.end()).size() < gpus.size())
      why = "ranks share a GPU";
    std::int64_t ok = why.empty();
    comm.allreduce(&ok, 1, ReduceOp::kMin);  // every rank takes the same path
    if (ok) nccl = make_nccl_communicator(comm, local % devs.count);
    if (lead && !opt.quiet)
      out << "halo exchange: " << (ok ? "NCCL, device to device" : "MPI with host staging (" + (why.empty() ? std::string("another rank cannot use NCCL") : why) + ")")
          << "\n";
  }
  std::unique_ptr<Communicator> direct;
  if (const char* v = std::getenv("HALO_TEST_DIRECT_EXCHANGE"); v && std::string(v) == "1" && !gpu && ranks > 1)
    direct = std::make_unique<DirectOver>(comm);
  Communicator& xcomm = nccl ? *nccl : direct ? *direct : comm;
  Backend& base = gpu ? cuda_backend() : cpu_backend();
  base.set_matmul_precision(parse_matmul_precision(opt.matmul_precision));  // every run sets it: the backend is shared
  TimedBackend timed(base);
  Backend& be = opt.profile ? static_cast<Backend&>(timed) : base;
  Matrix x_dev;
  DeviceOperator gcn_dev, mean_dev;
  DeviceArray<NodeId> gids_dev, train_dev;
  DeviceArray<std::int32_t> labels_dev;
  if (gpu) {
    x_dev = Matrix(n, x.cols, 0.f, dev);
    copy_floats(dev, x_dev.data(), Device::kCpu, x.data, x.size());
    x = x_dev.view();
    if (opt.model.kind == "gcn") gcn_dev = DeviceOperator(gcn);
    else mean_dev = DeviceOperator(mean);
    if (d.global_ids) gids_dev = DeviceArray<NodeId>(d.global_ids, std::size_t(d.all));
    labels_dev = DeviceArray<std::int32_t>(d.labels, std::size_t(n * d.label_cols));
    train_dev = DeviceArray<NodeId>(split->train.data(), split->train.size());
  }
  std::unique_ptr<HaloExchanger> exch;
  if (ranks > 1)
    exch = std::make_unique<HaloExchanger>(xcomm, be, d.plan, opt.halo_dtype == "bf16" ? HaloDtype::kBf16 : HaloDtype::kF32,
                                           opt.halo_staleness);
  GraphContext ctx;
  ctx.owned = n;
  ctx.all = d.all;
  ctx.inner = d.inner;
  ctx.gcn = gpu ? gcn_dev.view() : gcn.view();
  ctx.mean = gpu ? mean_dev.view() : mean.view();
  ctx.global_ids = gpu ? gids_dev.data() : d.global_ids;
  ctx.global_nodes = d.global_nodes;
  ctx.exchange = exch.get();
  ctx.static_input = true;  // x is the dataset's features for the whole run

  const std::int32_t* labels = d.labels;
  const std::int64_t ntrain = std::int64_t(split->train.size());
  // The loss is a mean over the labelled training rows (entries, multi-label) of the whole graph.
  std::int64_t labelled = 0;
  for (NodeId v : split->train)
    for (std::int64_t c = 0; c < d.label_cols; ++c) labelled += labels[std::int64_t(v) * d.label_cols + c] >= 0;
  comm.allreduce(&labelled, 1);
  if (labelled == 0) throw ParamError("split '" + opt.split + "' has no labelled training nodes");

  LogFile log;  // every record written whole and checked (staging.h)
  if (lead && !opt.log.empty()) log.open(opt.log, opt.resume);
  const json key = trajectory_key(opt, d.dataset_fingerprint);
  const json exchange = exchange_record(opt, d.partition, ranks);

  TrainSummary summary;
  summary.metric = multilabel ? "rocauc" : "acc";
  summary.ranks = ranks;
  Matrix dlogits(n, opt.model.out, 0.f, dev);
  Matrix eval_host;  // evaluation outputs copied to the host (GPU runs)
  // The outputs of an evaluation pass (no dropout, running statistics), on the host.
  auto evaluate = [&](Model& model, std::uint64_t seed, int epoch) -> MatrixView {
    MatrixView eval = model.forward(be, ctx, x, false, seed, epoch);
    if (gpu) {
      eval_host.resize(eval.rows, eval.cols);
      copy_floats(Device::kCpu, eval_host.data(), dev, eval.data, eval.size());
      eval = eval_host.view();
    }
    return eval;
  };
  const std::int32_t* loss_labels = gpu ? labels_dev.data() : labels;
  const NodeId* loss_rows = gpu ? train_dev.data() : split->train.data();
  // Metrics of the current outputs on the three split row sets, over all ranks.
  std::vector<float> scores_buf;
  std::vector<std::int32_t> label_buf;
  auto metrics = [&](const MatrixView& logits) -> std::array<double, 3> {
    const std::array<const Array<NodeId>*, 3> sets = {&split->train, &split->valid, &split->test};
    std::array<double, 3> res{};
    if (!multilabel) {
      std::int64_t c[6];
      for (int i = 0; i < 3; ++i) {
        const Counts k = accuracy_counts(logits, labels, sets[std::size_t(i)]->data(), std::int64_t(sets[std::size_t(i)]->size()));
        c[2 * i] = k.correct;
        c[2 * i + 1] = k.total;
      }
      comm.allreduce(c, 6);
      for (int i = 0; i < 3; ++i) res[std::size_t(i)] = c[2 * i + 1] ? double(c[2 * i]) / double(c[2 * i + 1]) : 0.0;
      return res;
    }
    // ROC-AUC ranks all rows together: gather the rows' scores and labels on rank 0.
    const std::int64_t t = d.label_cols;
    for (int i = 0; i < 3; ++i) {
      const Array<NodeId>& rows = *sets[std::size_t(i)];
      scores_buf.resize(rows.size() * std::size_t(t));
      label_buf.resize(rows.size() * std::size_t(t));
      for (std::size_t r = 0; r < rows.size(); ++r) {
        std::copy_n(logits.row(rows[r]), t, scores_buf.data() + r * std::size_t(t));
        std::copy_n(labels + std::int64_t(rows[r]) * t, t, label_buf.data() + r * std::size_t(t));
      }
      const std::vector<char> s = comm.gather(scores_buf.data(), scores_buf.size() * 4, 0, nullptr);
      const std::vector<char> l = comm.gather(label_buf.data(), label_buf.size() * 4, 0, nullptr);
      double v = 0;
      if (lead)
        v = rocauc(reinterpret_cast<const float*>(s.data()), reinterpret_cast<const std::int32_t*>(l.data()),
                   std::int64_t(s.size() / 4) / t, t);
      comm.allreduce(&v, 1);  // rank 0's value to every rank (the others add 0)
      res[std::size_t(i)] = v;
    }
    return res;
  };

  // All gradients travel in one buffer: one all-reduce per step.
  std::int64_t grad_size = 0;
  Matrix grads;  // host memory, or device memory when NCCL reduces it
  if (nccl) grads.set_device(dev);

  std::vector<RunState> states;
  std::vector<double> bytes_hist, wait_hist, allreduce_hist, compute_hist;
  std::optional<Model> last;  // the last run's model, for the predictions at the end
  for (int run = 0; run < opt.runs; ++run) {
    RunState st;
    st.result.seed = opt.seed + std::uint64_t(run);
    t_allocating = "the model's weights, gradients and Adam moments";
    Model& model = last.emplace(opt.model, st.result.seed, dev);  // the previous run's goes first
    for (Param* p : model.params())
      p->weight_decay = !opt.decay_first_layer_only || p->name.rfind("layer0.", 0) == 0 ? opt.weight_decay : 0.f;
    grad_size = 0;
    for (Param* p : model.params()) grad_size += p->grad.size();
    grads.resize(1, grad_size);
    const fs::path ckdir = opt.checkpoint.empty() ? fs::path() : run_dir(opt.checkpoint, run);
    if (opt.resume) {
      const json saved = resume_run(comm, ckdir, model, st, key);
      // Every rank took the same decision (resume_run agrees on the newest epoch collectively).
      // Run 0 without a checkpoint means none was ever written: a typo'd or wiped directory, and
      // starting over silently would overwrite the log. Later runs without one start fresh: the
      // job stopped before reaching them.
      if (saved.is_null() && run == 0)
        throw ParamError("--resume: no checkpoint in " + opt.checkpoint.string() +
                         "; drop --resume to start a new run");
      if (st.epoch > opt.epochs)
        throw ParamError("--resume: the checkpoint in " + ckdir.string() + " is of epoch " + std::to_string(st.epoch) +
                         ", after --epochs " + std::to_string(opt.epochs) + "; resume with --epochs " +
                         std::to_string(st.epoch) + " or more, or start a new checkpoint directory");
      if (!saved.is_null() && lead) {
        if (!opt.quiet) out << "run " << run << ": resumed after epoch " << st.epoch << "\n";
        if (const std::string note = exchange_note(saved, exchange); !note.empty()) out << note << "\n";
      }
    }
    if (exch) exch->drain();
    for (int epoch = st.epoch + 1; epoch <= opt.epochs; ++epoch) {
      if (rank == opt.fault.rank && epoch == opt.fault.epoch) inject_fault(opt.fault);
      if (exch) exch->stats().clear();
      t_allocating = epoch == st.epoch + 1 ? "the layers' activations and gradients (first epoch)" : "a training epoch";
      Stopwatch clock;
      const MatrixView logits = model.forward(be, ctx, x, true, st.result.seed, epoch);
      double loss = multilabel
                        ? be.bce_logits(logits, loss_labels, loss_rows, ntrain, double(labelled), dlogits.view(), nullptr)
                        : be.softmax_xent(logits, loss_labels, loss_rows, ntrain, double(labelled), dlogits.view(), nullptr);
      model.backward(be, ctx, dlogits.view());
      Stopwatch reduce_clock;
      if (ranks > 1) {  // one buffer, one all-reduce; over NCCL it stays in device memory
        std::int64_t at = 0;
        for (Param* p : model.params()) {
          copy_floats(grads.device(), grads.data() + at, dev, p->grad.data(), p->grad.size());
          at += p->grad.size();
        }
        if (nccl) nccl->allreduce_device(grads.data(), grad_size);
        else comm.allreduce(grads.data(), grad_size);
        at = 0;
        for (Param* p : model.params()) {
          copy_floats(dev, p->grad.data(), grads.device(), grads.data() + at, p->grad.size());
          at += p->grad.size();
        }
        comm.allreduce(&loss, 1);
      }
      const double reduce_s = reduce_clock.seconds();
      loss /= double(labelled);
      if (!std::isfinite(loss)) throw diverged(run, epoch, "the training loss is " + std::to_string(loss), opt.lr);
      ++st.adam_step;
      for (Param* p : model.params()) {
        AdamStep s;
        s.lr = opt.lr;
        s.weight_decay = p->weight_decay;
        s.step = st.adam_step;
        be.adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size(), s);
      }
      if (gpu) device_synchronize();  // the epoch ends when the GPU is done
      const double secs = clock.seconds();
      RankFigures fig;
      fig.epoch_s = secs;
      if (exch) {
        fig.bytes = double(exch->stats().bytes_sent);
        fig.wait_s = exch->stats().wait_s;
        fig.allreduce_s = exch->stats().allreduce_s + reduce_s;
      }
      fig.compute_s = secs - fig.wait_s - fig.allreduce_s;
      st.result.epoch_seconds.push_back(secs);
      st.result.final_loss = loss;
      st.epoch = epoch;
      json rec = {{"type", "epoch"}, {"run", run}, {"epoch", epoch}, {"loss", loss}, {"epoch_time_s", secs}};
      if (epoch % opt.eval_every == 0 || epoch == opt.epochs) {
        const double before = exch ? double(exch->stats().bytes_sent) : 0;
        const MatrixView eval = evaluate(model, st.result.seed, epoch);
        if (exch) fig.eval_bytes = double(exch->stats().bytes_sent) - before;
        // A finite loss before the step does not make the stepped model finite: metrics of NaN
        // outputs would be silent garbage. Decided over all ranks, so all stop together.
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < eval.rows * eval.cols && !bad; ++i) bad = !std::isfinite(eval.data[i]);
        comm.allreduce(&bad, 1, ReduceOp::kMax);
        if (bad) throw diverged(run, epoch, "the evaluation outputs are not finite", opt.lr);
        const auto [tr, va, te] = metrics(eval);
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
        if (lead && !opt.quiet) {
          char line[200];
          std::snprintf(line, sizeof line,
                        "run %d epoch %4d  loss %.4f  train %.4f  valid %.4f  test %.4f  %.3f s\n", run,
                        epoch, loss, tr, va, te, secs);
          out << line << std::flush;
        }
      }
      if (ranks > 1) {  // the per-rank breakdown, on rank 0
        const std::vector<char> all = comm.gather(&fig, sizeof fig, 0, nullptr);
        if (lead) {
          const auto* f = reinterpret_cast<const RankFigures*>(all.data());
          json per = json::array();
          double total = 0, wait = 0, ar = 0, comp = 0;
          for (int r = 0; r < ranks; ++r) {
            per.push_back({{"rank", r}, {"halo_bytes", f[r].bytes}, {"eval_halo_bytes", f[r].eval_bytes},
                           {"compute_s", f[r].compute_s}, {"halo_wait_s", f[r].wait_s},
                           {"allreduce_s", f[r].allreduce_s}, {"epoch_time_s", f[r].epoch_s}});
            total += f[r].bytes;
            wait = std::max(wait, f[r].wait_s);
            ar = std::max(ar, f[r].allreduce_s);
            comp = std::max(comp, f[r].compute_s);
          }
          rec["halo_bytes"] = total;
          rec["ranks"] = per;
          bytes_hist.push_back(total);
          wait_hist.push_back(wait);
          allreduce_hist.push_back(ar);
          compute_hist.push_back(comp);
        }
      }
      log.write_line(rec.dump());
      if (!ckdir.empty() && (epoch % opt.checkpoint_every == 0 || epoch == opt.epochs))
        commit_checkpoint(comm, ckdir, model, st, key, exchange);
    }
    if (exch) exch->drain();
    if (lead && !opt.quiet) {
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
  summary.matmul_precision = opt.matmul_precision;
  double rss = double(peak_rss_bytes()) / (1 << 20);
  if (ranks > 1) {  // every rank's part and peak, on rank 0
    const double mine[3] = {double(n), double(d.all - n), rss};
    const std::vector<char> all = comm.gather(mine, sizeof mine, 0, nullptr);
    const auto* f = reinterpret_cast<const double*>(all.data());
    for (std::size_t r = 0; lead && r < std::size_t(ranks); ++r) {
      summary.rank_owned_rows.push_back(std::int64_t(f[3 * r]));
      summary.rank_halo_rows.push_back(std::int64_t(f[3 * r + 1]));
      summary.rank_peak_rss_mb.push_back(f[3 * r + 2]);
    }
  }
  comm.allreduce(&rss, 1, ReduceOp::kMax);
  summary.peak_rss_mb = rss;
  if (gpu) {
    double g = double(device_peak_bytes()) / (1 << 20);
    comm.allreduce(&g, 1, ReduceOp::kMax);
    summary.peak_gpu_mb = g;
  }
  summary.halo_bytes_per_epoch = median(bytes_hist);
  summary.halo_wait_s = median(wait_hist);
  summary.allreduce_s = median(allreduce_hist);
  summary.compute_s = median(compute_hist);
  log.write_line(summary.to_json().dump());
  log.close();
  if (opt.profile && lead) out << "time per kernel (training and evaluation, rank 0):\n" << timed.report();

  t_allocating = "the predictions";
  if (!opt.predictions_out.empty()) {  // the run with the best validation score, in input order
    const auto best = std::max_element(states.begin(), states.end(), [](const RunState& a, const RunState& b) {
      return a.result.best_valid < b.result.best_valid;
    });
    if (best->best.empty())  // the same on every rank: the state is replicated
      throw ParamError("--predictions-out: run " + std::to_string(best - states.begin()) +
                       " was never evaluated (resumed at or after --epochs from a checkpoint written before its "
                       "first evaluation)");
    // The best epoch's model into the last run's (same shapes; the seed only drew the initial
    // weights), then one evaluation pass: the outputs that epoch's evaluation saw.
    set_model_values(*last, best->best);
    const MatrixView eval = evaluate(*last, best->result.seed, best->result.best_epoch);
    std::vector<std::int32_t> classes;
    if (!multilabel) {
      const auto am = argmax_rows(eval);
      classes.assign(am.begin(), am.end());
    }
    // Every rank sends (global id, row) for its owned rows; rank 0 places them.
    const std::size_t t = multilabel ? std::size_t(d.label_cols) : 1;
    std::vector<NodeId> ids(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v) ids[std::size_t(v)] = d.global_ids ? d.global_ids[v] : NodeId(v);
    const std::vector<char> gid = comm.gather(ids.data(), ids.size() * sizeof(NodeId), 0, nullptr);
    const std::vector<char> val = multilabel ? comm.gather(eval.data, std::size_t(eval.size()) * 4, 0, nullptr)
                                             : comm.gather(classes.data(), classes.size() * 4, 0, nullptr);
    if (lead) {
      const auto* g = reinterpret_cast<const NodeId*>(gid.data());
      const std::size_t total = gid.size() / sizeof(NodeId);
      auto place = [&](std::size_t i) {
        const std::size_t v = std::size_t(g[i]);
        return d.original_ids ? std::size_t(d.original_ids[v]) : v;
      };
      if (multilabel) {
        const auto* sc = reinterpret_cast<const float*>(val.data());
        std::vector<float> outv(total * t);
        for (std::size_t i = 0; i < total; ++i)
          for (std::size_t c = 0; c < t; ++c) outv[place(i) * t + c] = 1.f / (1.f + std::exp(-sc[i * t + c]));
        write_npy(opt.predictions_out, outv.data(), std::uint64_t(total), t);
      } else {
        const auto* cl = reinterpret_cast<const std::int32_t*>(val.data());
        std::vector<std::int64_t> outv(total, 0);
        for (std::size_t i = 0; i < total; ++i) outv[place(i)] = cl[i];
        write_npy(opt.predictions_out, outv.data(), std::uint64_t(total), 0);
      }
    }
  }
  return summary;
} catch (const std::bad_alloc&) {
  // Names what was being allocated, and what the memory model predicted against what there was.
  const AvailableMemory avail = available_memory();
  std::string predicted;
  try {
    for (const Split& s : *d.splits) {
      TrainOptions o = opt_in;
      o.model.in = d.features.cols;
      o.model.out = d.label_kind == LabelKind::kMultilabel ? d.label_cols : d.num_classes;
      if (s.name != (o.split.empty() ? d.default_split : o.split)) continue;
      std::string largest;
      predicted = "; the memory model predicts " +
                  format_bytes(std::uint64_t(rank_bytes(d, s, o, comm.size(), comm.rank(), &largest))) +
                  " on this rank, mostly " + largest;
    }
  } catch (const std::exception&) {  // no prediction: the message goes without it
  }
  throw SystemError(std::string("out of memory allocating ") + t_allocating + predicted +
                    (avail.bytes > 0 ? ", with " + format_bytes(std::uint64_t(avail.bytes)) + " available (" +
                                           avail.source + ")"
                                     : std::string()));
}

// Refuses, before any work, an output that would replace something it must not or touch the input
// (staging.h): a run must not end hours later on a --predictions-out it cannot write. Rank 0
// writes the log and predictions; every rank writes its checkpoint folder.
void check_outputs(const TrainOptions& opt, const fs::path& input, bool lead) {
  if (lead && !opt.log.empty()) resolve_stream_output(opt.log, {input});
  if (lead && !opt.predictions_out.empty()) resolve_file_output(opt.predictions_out, {input});
  if (!opt.checkpoint.empty()) check_output_folder(opt.checkpoint, {input});
}

}  // namespace

TrainSummary train_dataset(const fs::path& dataset, const TrainOptions& opt, std::ostream& out) {
  check_outputs(opt, dataset, /*lead=*/true);
  const GraphDataset d = read_graph_dataset(dataset);
  RankData r;
  r.source = dataset.string();
  r.dataset_fingerprint = read_dataset_meta(dataset).value("fingerprint", "");
  r.owned = r.all = r.inner = r.global_nodes = d.num_nodes();
  r.graph = d.graph.view();
  std::vector<std::int32_t> degree(static_cast<std::size_t>(r.owned));
  for (std::int64_t v = 0; v < r.owned; ++v) degree[std::size_t(v)] = std::int32_t(r.graph.degree(NodeId(v)));
  r.degree = degree.data();
  r.features = {const_cast<float*>(d.features.data()), r.owned, d.num_features, Device::kCpu};
  take_labels(r, d);
  r.default_split = d.split("public") ? "public" : (d.splits.empty() ? "" : d.splits[0].name);
  r.original_ids = d.original_ids.empty() ? nullptr : d.original_ids.data();
  LocalCommunicator local;
  return train_rank(r, local, opt, out);
}

TrainSummary train_parts(const fs::path& parts, Communicator& comm, const TrainOptions& opt, std::ostream& out) {
  check_outputs(opt, parts, comm.rank() == 0);
  const json meta = read_parts_meta(parts);
  const int k = meta.at("k").get<int>();
  if (k != comm.size())
    throw ParamError(parts.string() + " has " + std::to_string(k) + " parts but the job has " +
                     std::to_string(comm.size()) + " rank" + (comm.size() == 1 ? "" : "s") +
                     ": run it with mpirun -np " + std::to_string(k));
  const Part p = read_part(parts, comm.rank());  // validated; refuses a part of another partition
  {
    // What no rank can check alone: that its peers agree, i.e. q's send count to r is r's
    // receive count from q (else the exchange mismatches message sizes). One all-reduce of the
    // K x K counts, keyed (sender, receiver); every rank reaches the same verdict.
    std::vector<std::int64_t> counts(2 * std::size_t(k) * std::size_t(k), 0);
    const auto kk = std::size_t(k), r = std::size_t(p.rank);
    for (std::size_t q = 0; q < kk; ++q) {
      counts[r * kk + q] = p.send_offsets[q + 1] - p.send_offsets[q];
      counts[kk * kk + q * kk + r] = p.recv_offsets[q + 1] - p.recv_offsets[q];
    }
    comm.allreduce(counts.data(), std::int64_t(counts.size()), ReduceOp::kSum);
    for (std::size_t i = 0; i < kk * kk; ++i)
      if (counts[i] != counts[kk * kk + i])
        throw InputError((parts / ("part-" + std::to_string(i / kk)) / "send_offsets.bin").string() + ": part " +
                         std::to_string(i / kk) + " sends " + std::to_string(counts[i]) + " rows to part " +
                         std::to_string(i % kk) + ", which expects " + std::to_string(counts[kk * kk + i]) +
                         " (parts from different partitions?)");
  }
  const Array<NodeId> original = comm.rank() == 0 ? read_original_ids(parts) : Array<NodeId>();
  RankData r;
  r.source = (parts / ("part-" + std::to_string(p.rank))).string();
  // A parts folder written without its dataset's fingerprint resumes checkpoints of itself only.
  r.dataset_fingerprint = meta.value("dataset_fingerprint", "");
  if (r.dataset_fingerprint.empty()) r.dataset_fingerprint = "parts " + meta.value("fingerprint", "");
  r.partition = meta.value("fingerprint", "");
  r.owned = p.num_owned;
  r.all = p.num_owned + p.num_halo;
  r.inner = p.num_inner;
  r.global_nodes = p.global_nodes;
  r.graph = p.graph.view();
  r.degree = p.degree.data();
  r.global_ids = p.global_ids.data();
  r.features = {const_cast<float*>(p.features.data()), p.num_owned, p.num_features, Device::kCpu};
  take_labels(r, p);
  const std::string main_split = meta.at("options").value("split", "");
  r.default_split = p.split("public") ? "public" : !main_split.empty() ? main_split
                                                 : (p.splits.empty() ? "" : p.splits[0].name);
  r.plan = p.halo_plan();
  r.original_ids = original.empty() ? nullptr : original.data();
  return train_rank(r, comm, opt, out);
}

}  // namespace halo

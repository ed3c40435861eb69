// The full-graph trainer's checkpoints (train_checkpoint.h): format halo-checkpoint v2,
// CKPT/run-R/rank-r/epoch-E on every rank, each copy the whole replicated state of the run.
#include "train/train_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/staging.h"
#include "halo/runtime/train/checkpoint.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

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

// The number of floats model_values returns.
std::size_t model_values_size(Model& model) {
  std::size_t n = 0;
  for (Param* p : model.params()) n += std::size_t(p->value.size());
  for (auto& [name, buf] : model.buffers()) n += buf->size();
  return n;
}

// Checkpoints: CKPT/run-R/rank-r/epoch-E, written atomically by rank r. Every copy holds the
// whole replicated state of the run (nothing of rank r's rows), so one copy of an epoch resumes
// it on any number of ranks. A rank removes its older epochs only after a barrier proves every
// rank has committed E, so whatever instant a job dies at, every rank folder left holds a
// complete epoch, and a resume takes the newest epoch any rank folder holds.
constexpr const char* kCheckpointFormat = "halo-checkpoint";
constexpr int kCheckpointVersion =
    2;  // version 1 kept the best epoch's predictions of rank r's rows

// The rank folders of CKPT/run-R: run/rank-r.
fs::path rank_dir(const fs::path& run, int rank) { return run / ("rank-" + std::to_string(rank)); }

// The rank of a "rank-r" folder name, or -1.
int rank_of_folder(const std::string& name) {
  if (name.rfind("rank-", 0) != 0 || name.size() == 5 || name.size() > 14) return -1;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
  return int(std::stol(name.substr(5)));
}

// Writes the run's state (live model, Adam moments, best model, counters) to dir, atomically.
void save_checkpoint(const fs::path& dir, Model& model, const RunState& st, const json& key,
                     const json& exchange) {
  StagingDir stage(dir, kCheckpointFormat, /*overwrite=*/true);
  ArrayDir a(stage.path());
  put_adam_state(a, model.params());
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
    json raw;
    try {
      raw = read_json_file(dir / "meta.json");
    } catch (const Error&) {  // read_meta below says what is wrong with it
    }
    if (raw.is_object() && raw.value("format", "") == kCheckpointFormat &&
        raw.contains("version") && raw.at("version") != json(kCheckpointVersion))
      throw InputError(
          dir.string() + ": checkpoint format version " + json_shown(raw.at("version")) +
          ", this halo resumes version " + std::to_string(kCheckpointVersion) +
          " only (version 1 kept per-partition predictions): finish that run with the halo that "
          "wrote it, or start a new checkpoint directory");
  }
  json meta = read_meta(dir, kCheckpointFormat, kCheckpointVersion);
  const json& saved = meta.at("key");
  if (saved == key) return meta;
  // Floats as a user types them (--lr 0.05, not 0.05000000074505806) unless that hides the
  // difference.
  const auto text = [](const json& v, const json& other) {
    if (!v.is_number_float() || !other.is_number_float()) return json_shown(v);
    char a[32], b[32];
    std::snprintf(a, sizeof a, "%g", v.get<double>());
    std::snprintf(b, sizeof b, "%g", other.get<double>());
    return std::strcmp(a, b) != 0 ? std::string(a) : json_shown(v);
  };
  std::string diff;
  for (const auto& [name, now] : key.items()) {
    const json was = saved.contains(name) ? saved.at(name) : json("none");
    if (was != now)
      diff += (diff.empty() ? "" : ", ") + name + " " + text(now, was) + " here, " +
              text(was, now) + " there";
  }
  if (diff.empty()) diff = json_shown(saved, 400);
  const bool other_data = !saved.contains("dataset") || saved.at("dataset") != key.at("dataset");
  throw ParamError(
      dir.string() + ": checkpoint of " + (other_data ? "another dataset" : "other options") +
      " (" + diff +
      "); resume with the same dataset and options, or start a new checkpoint directory");
}

// Loads the checkpoint in dir into model and st; returns how its trajectory's halo rows travelled.
json load_checkpoint(const fs::path& dir, Model& model, RunState& st, const json& key) {
  const json meta = checkpoint_meta(dir, key);
  ReadOptions ro;
  auto restore = [&](const std::string& name, float* dst, std::size_t n) {
    const Array<float> a = map_listed<float>(dir, meta, name, ro, n, 1);
    std::copy(a.begin(), a.end(), dst);
  };
  set_adam_state(model.params(), read_adam_state(dir, meta, model.params()).data());
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
  if (me) {
    buf = adam_state_values(model.params());
    for (auto& [name, b] : model.buffers()) buf.insert(buf.end(), b->begin(), b->end());
    buf.insert(buf.end(), st.best.begin(), st.best.end());
  } else {
    std::size_t live = adam_state_size(model.params());
    for (auto& [name, b] : model.buffers()) live += b->size();
    buf.resize(live + (s.at("has_best").get<bool>() ? model_values_size(model) : 0));
  }
  comm.broadcast(buf.data(), buf.size() * sizeof(float), root);
  if (me) return;
  const float* at = set_adam_state(model.params(), buf.data());
  for (auto& [name, b] : model.buffers()) {
    std::copy_n(at, b->size(), b->begin());
    at += b->size();
  }
  st.best.assign(at, static_cast<const float*>(buf.data() + buf.size()));
}

}  // namespace

// What a checkpoint must match to be resumed: every option that changes the trajectory, and the
// dataset. Not the partition nor the rank count: weights and Adam state are replicated on every
// rank and dropout masks are keyed by global node id, so K ranks train one process's model up
// to float summation order and a checkpoint continues on any number of ranks. Not the device
// (CPU and CUDA differ by rounding only), nor the epoch count (resuming a finished run with more
// epochs trains it further). The communication savers are recorded apart: see exchange_note.
json trajectory_key(const TrainOptions& o, const std::string& dataset_fingerprint) {
  const ModelConfig& m = o.model;
  json key = {{"model", to_string(m.kind)},
              {"layers", m.layers},
              {"hidden", m.hidden},
              {"dropout", m.dropout},
              {"input_dropout", m.input_dropout},
              {"batch_norm", m.batch_norm},
              {"lr", o.lr},
              {"weight_decay", o.weight_decay},
              {"decay_first_layer_only", o.decay_first_layer_only},
              {"norm_features", o.norm_features},
              {"split", o.split},
              {"seed", o.seed},
              {"matmul_precision", to_string(o.matmul_precision)},
              {"dataset", dataset_fingerprint}};
  if (m.kind == ModelKind::kGat) {  // only GAT's keys: earlier checkpoints keep theirs
    key["heads"] = m.heads;
    key["out_heads"] = m.out_heads;
    key["attn_dropout"] = m.attn_dropout;
    key["residual"] = m.residual;
  }
  return key;
}

// How a trajectory's halo rows travelled: the partition (empty for one process) and the savers
// in effect (one process exchanges nothing, so it has none).
json exchange_record(const TrainOptions& o, const std::string& partition, int ranks) {
  const bool exchanges = ranks > 1;
  json r = {{"ranks", ranks},
            {"partition", partition},
            {"halo_dtype", exchanges ? to_string(o.halo_dtype) : "f32"},
            {"halo_staleness", exchanges ? o.halo_staleness : 0}};
  // Only when used, so the records of every earlier run stay what they were.
  if (exchanges && o.halo_smoothing > 0.f) r["halo_smoothing"] = o.halo_smoothing;
  return r;
}

// What to tell the user when a checkpoint resumes with another exchange than it was written
// with; empty when nothing changes. Exact rows before and after: nothing to say, any partition
// computes one process's trajectory. With bf16 or stale rows the trajectory depends on which
// rows are halo rows, i.e. on the partition. We allow that with a note rather than refuse: the
// state is the same kind of object whatever the exchange (replicated weights and Adam moments,
// which the savers only perturb), and the case this is for, a lost machine and a resume on fewer
// ranks, would otherwise lose the whole training.
std::string exchange_note(const json& saved_record, const json& now_record) {
  const auto exact = [](const json& x) {
    return x.at("halo_dtype") == "f32" && x.at("halo_staleness") == 0;
  };
  json saved = saved_record, now = now_record;  // the bf16 kernel has its own note (trainer.cc)
  saved.erase("bf16_kernel");
  now.erase("bf16_kernel");
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
  return "note: the checkpoint was written by " + describe(saved) + " and resumes on " +
         describe(now) +
         ": with bf16 or stale halo rows the trajectory depends on the partition, so this run "
         "continues near "
         "the uninterrupted one, not on it";
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

// CKPT/run-R.
fs::path run_dir(const fs::path& ckpt, int run) { return ckpt / ("run-" + std::to_string(run)); }

namespace {
// The newest epoch (of trajectory *key, when given) any rank sees and its lowest holder.
NewestCheckpoint newest_of(Communicator& comm, const fs::path& run, const json* key) {
  const int rank = comm.rank();
  int newest = 0;
  fs::path copy;
  int copy_rank = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run, ec)) {
    const int r = rank_of_folder(e.path().filename().string());
    if (r < 0) continue;
    std::vector<int> epochs = committed_epochs(e.path());
    // A rank folder may also hold a newer epoch of another run (a node that kept an older
    // job's folder): the newest of this trajectory is the one to continue.
    while (key && !epochs.empty() && !epoch_may_be_of(epoch_dir(e.path(), epochs.back()), *key))
      epochs.pop_back();
    if (epochs.empty() || epochs.back() < newest) continue;
    // Copies of one epoch hold the same state; prefer this rank's own, then the lowest rank's.
    if (epochs.back() == newest && (copy_rank == rank || (r != rank && r > copy_rank))) continue;
    newest = epochs.back();
    copy = epoch_dir(e.path(), newest);
    copy_rank = r;
  }
  std::int64_t e = newest;
  comm.allreduce(&e, 1, ReduceOp::kMax);
  NewestCheckpoint found;
  if (e == 0) return found;
  std::int64_t holder = newest == e ? rank : comm.size();
  comm.allreduce(&holder, 1, ReduceOp::kMin);
  found.epoch = int(e);
  found.holder = int(holder);
  if (rank == holder) found.copy = copy;
  return found;
}
}  // namespace

// The newest epoch of `key` any rank sees, or when there is none of these options the newest of
// any (whose load then says what differs). Every rank takes the same decision.
NewestCheckpoint locate_newest(Communicator& comm, const fs::path& run, const json* key) {
  NewestCheckpoint found = newest_of(comm, run, key);
  if (found.epoch == 0 && key) found = newest_of(comm, run, nullptr);
  return found;
}

json newest_checkpoint_meta(Communicator& comm, const fs::path& run) {
  const NewestCheckpoint found = locate_newest(comm, run);
  if (found.epoch == 0) return json();
  std::string text;
  if (comm.rank() == found.holder) {
    try {  // a refusal travels too: the other ranks wait in the broadcast
      json meta = read_meta(found.copy, kCheckpointFormat, kCheckpointVersion);
      meta["path"] = found.copy.string();
      text = meta.dump();
    } catch (const std::exception& e) {
      text = json{{"error", e.what()}}.dump();
    }
  }
  std::int64_t len = std::int64_t(text.size());
  comm.broadcast(&len, sizeof len, found.holder);
  text.resize(std::size_t(len));
  comm.broadcast(text.data(), text.size(), found.holder);
  json meta = json::parse(text);
  if (meta.contains("error")) throw InputError(meta.at("error").get<std::string>());
  return meta;
}

// Resumes a run from the newest epoch that some rank sees: the lowest such rank loads it and
// broadcasts it. Returns how the checkpoint's halo rows travelled, or null when no rank sees a
// checkpoint (the run starts fresh). Collective.
json resume_run(Communicator& comm, const fs::path& run, Model& model, RunState& st,
                const json& key) {
  const NewestCheckpoint found = locate_newest(comm, run, &key);
  if (found.epoch == 0) return json();
  json exchange;
  if (comm.rank() == found.holder) exchange = load_checkpoint(found.copy, model, st, key);
  broadcast_state(comm, found.holder, model, st, exchange);
  return exchange;
}

// Writes this rank's copy of epoch st.epoch, then, once every rank has, removes older epochs.
// Collective.
void commit_checkpoint(Communicator& comm, const fs::path& run, Model& model, const RunState& st,
                       const json& key, const json& exchange) {
  const fs::path mine = rank_dir(run, comm.rank());
  save_checkpoint(epoch_dir(mine, st.epoch), model, st, key, exchange);
  comm.barrier();  // every rank has epoch st.epoch now: older ones may go
  remove_epochs_but(mine, st.epoch);
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
        if (old != st.epoch) fs::remove_all(epoch_dir(f, old), ec);
      fs::remove(f, ec);  // only if empty
    } catch (const fs::filesystem_error&) {
    }
  }
}

}  // namespace halo

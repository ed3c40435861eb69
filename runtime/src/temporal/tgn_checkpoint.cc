// The TGN trainer's checkpoints (tgn_checkpoint.h).
#include "temporal/tgn_checkpoint.h"

#include <string>
#include <utility>

#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/input.h"
#include "halo/graph/staging.h"
#include "halo/runtime/train/checkpoint.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

// The options a checkpoint must have been made with to be resumed.
json tgn_checkpoint_key(const TgnOptions& o, const EventStream& s) {
  json key = {{"model", to_string(o.model)},
              {"memory_dim", o.memory_dim},
              {"embed_dim", o.embed_dim},
              {"time_dim", o.time_dim},
              {"neighbors", o.neighbors},
              {"neighbors_before", to_string(o.neighbors_before)},
              {"batch_size", o.batch_size},
              {"lr", o.lr},
              {"seed", o.seed},
              {"learn_time_frequencies", o.learn_time_frequencies},
              {"max_train_events", o.max_train_events},
              {"events", s.events},
              {"nodes", s.nodes},
              {"embedding", to_string(o.embedding)},
              {"parallel", to_string(o.parallel)},
              {"aggregator", to_string(o.aggregator)}};
  // Only when on: checkpoints made before the option existed keep their key (and resume).
  if (o.static_memory > 0) key["static_memory"] = o.static_memory;
  return key;
}

// Rank 0 writes DIR/epoch-E (staged and renamed: a crash leaves the previous epoch intact), then
// removes older epochs. The replicas are identical, so one copy serves every rank.
void save_tgn_checkpoint(Communicator& comm, const fs::path& dir, const std::vector<Param*>& params,
                         const TgnRunState& st, const json& key) {
  if (comm.rank() == 0) {
    // StagingDir creates dir, and removes it again when this first epoch fails.
    StagingDir stage(epoch_dir(dir, st.epoch), "halo-tgn-checkpoint", /*overwrite=*/true);
    ArrayDir a(stage.path());
    put_adam_state(a, params);
    a.put("speeds", st.speeds);
    json meta = {{"key", key},
                 {"epoch", st.epoch},
                 {"step", st.step},
                 {"best_val", st.best_val},
                 {"since_best", st.since_best},
                 {"summary", st.sum.to_json()}};
    a.write_meta(std::move(meta), "halo-tgn-checkpoint", 1);
    stage.commit();
    remove_epochs_but(dir, st.epoch);
  }
  comm.barrier();
}

// Rank 0 reads the newest epoch in dir and every rank receives it. False when there is none.
bool load_tgn_checkpoint(Communicator& comm, const fs::path& dir, const std::vector<Param*>& params,
                         TgnRunState& st, const json& key) {
  std::vector<float> flat;
  std::string meta_text;
  if (comm.rank() == 0) {
    std::vector<int> epochs = committed_epochs(dir);
    // The newest epoch of these options: a newer one of another run, left where this one was
    // resumed, is passed over; with none of these options the newest says what differs.
    for (std::size_t i = epochs.size(); i-- > 0;)
      if (epoch_may_be_of(epoch_dir(dir, epochs[i]), key)) {
        epochs.resize(i + 1);
        break;
      }
    if (!epochs.empty()) {
      const fs::path e = epoch_dir(dir, epochs.back());
      json meta = read_meta(e, "halo-tgn-checkpoint", 1);
      if (meta.at("key") != key)
        throw ParamError(e.string() + ": checkpoint was made with other options (" +
                         json_shown(meta.at("key"), 400) +
                         "); resume with the same options or use a new checkpoint directory");
      flat = read_adam_state(e, meta, params);
      const Array<double> sp = map_listed<double>(e, meta, "speeds", {}, kAnyShape, 1);
      meta["speeds"] = std::vector<double>(sp.begin(), sp.end());
      meta_text = meta.dump();
    }
  }
  std::int64_t sizes[2] = {std::int64_t(flat.size()), std::int64_t(meta_text.size())};
  comm.broadcast(sizes, sizeof sizes, 0);
  if (sizes[1] == 0) return false;
  flat.resize(std::size_t(sizes[0]));
  meta_text.resize(std::size_t(sizes[1]));
  comm.broadcast(flat.data(), flat.size() * sizeof(float), 0);
  comm.broadcast(meta_text.data(), meta_text.size(), 0);
  set_adam_state(params, flat.data());
  const json meta = json::parse(meta_text);
  st.epoch = meta.at("epoch");
  st.step = meta.at("step");
  st.best_val = meta.at("best_val");
  st.since_best = meta.at("since_best");
  st.speeds = meta.at("speeds").get<std::vector<double>>();
  const json& j = meta.at("summary");
  st.sum.valid_ap = j.at("valid_ap");
  st.sum.test_ap = j.at("test_ap");
  st.sum.test_auc = j.at("test_auc");
  st.sum.test_inductive_ap = j.at("test_inductive_ap");
  st.sum.test_inductive_auc = j.at("test_inductive_auc");
  st.sum.test_ap_pooled = j.at("test_ap_pooled");
  st.sum.test_inductive_ap_pooled = j.at("test_inductive_ap_pooled");
  st.sum.test_mrr = j.at("test_mrr");
  st.sum.best_epoch = j.at("best_epoch");
  return true;
}

}  // namespace halo

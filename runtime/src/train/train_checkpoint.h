// The full-graph trainer's run state and its checkpoints: CKPT/run-R/rank-r/epoch-E, written
// atomically by rank r (format halo-checkpoint v2). Every copy holds the whole replicated state
// of the run (nothing of rank r's rows), so one copy of an epoch resumes it on any number of
// ranks. A rank removes its older epochs only after a barrier proves every rank has committed E,
// so whatever instant a job dies at, every rank folder left holds a complete epoch, and a resume
// takes the newest epoch any rank folder holds. Private to runtime/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "halo/gnn/model.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/train/trainer.h"

namespace halo {

// Where one run (one seed) stands after an epoch: what a checkpoint holds besides the model.
struct RunState {
  int epoch = 0;  // last completed epoch
  std::int64_t adam_step = 0;
  RunResult result;
  // The model at the best validation epoch (model_values); empty before the first evaluation.
  // The predictions come from it at the end, so no state names one partition's rows.
  std::vector<float> best;
};

// The options and dataset a checkpoint must match to be resumed (see train_checkpoint.cc).
nlohmann::json trajectory_key(const TrainOptions& o, const std::string& dataset_fingerprint);
// How a trajectory's halo rows travel: ranks, partition, halo dtype and staleness.
nlohmann::json exchange_record(const TrainOptions& o, const std::string& partition, int ranks);
// The note for a resume whose exchange differs from the checkpoint's; empty when none is due.
std::string exchange_note(const nlohmann::json& saved, const nlohmann::json& now);

// Every parameter's value, then every buffer, on the host, in params() and buffers() order.
std::vector<float> model_values(Model& model);
// The inverse of model_values.
void set_model_values(Model& model, const std::vector<float>& v);

// CKPT/run-R: the checkpoint folder of run R (seed + R).
std::filesystem::path run_dir(const std::filesystem::path& ckpt, int run);
// The newest epoch some rank sees a committed copy of in any rank folder of a run (on a cluster
// each machine sees its own ranks' folders; a lost machine's are gone), and the lowest rank that
// holds it: epoch 0 when no rank sees one.
struct NewestCheckpoint {
  int epoch = 0, holder = -1;
  std::filesystem::path copy;  // on the holder only
};
// With key, the newest epoch of that trajectory (a rank folder may keep a newer epoch of another
// run), or, when no rank sees one, the newest of any. Collective.
NewestCheckpoint locate_newest(Communicator& comm, const std::filesystem::path& run,
                               const nlohmann::json* key = nullptr);
// The newest epoch's meta.json ("path" added: the copy read), the same on every rank; null when
// no rank sees one. Collective.
nlohmann::json newest_checkpoint_meta(Communicator& comm, const std::filesystem::path& run);
// Loads the newest epoch of `key` any rank sees under run into model and st on every rank; returns
// how its halo rows travelled, or null when there is none. Collective.
nlohmann::json resume_run(Communicator& comm, const std::filesystem::path& run, Model& model,
                          RunState& st, const nlohmann::json& key);
// Writes this rank's copy of epoch st.epoch, then, once every rank has, removes older epochs.
// Collective.
void commit_checkpoint(Communicator& comm, const std::filesystem::path& run, Model& model,
                       const RunState& st, const nlohmann::json& key,
                       const nlohmann::json& exchange);

}  // namespace halo

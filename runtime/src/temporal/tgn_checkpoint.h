// The TGN trainer's checkpoints (format halo-tgn-checkpoint v1): rank 0 writes DIR/epoch-E with
// the parameters, Adam's moments and where the run stands; every rank resumes from it. Private
// to runtime/src/temporal.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "halo/gnn/model.h"
#include "halo/gnn/temporal/memory.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo {

// Where a run stands at an epoch boundary: all a checkpoint needs, because the memory, the
// messages and the samplers restart with every epoch.
struct TgnRunState {
  int epoch = 0;
  std::int64_t step = 0;
  double best_val = -1;
  int since_best = 0;
  std::vector<double> speeds;
  TgnSummary sum;
};

// The options a checkpoint must have been made with to be resumed (its key).
nlohmann::json tgn_checkpoint_key(const TgnOptions& o, const EventStream& s);

// Rank 0 writes DIR/epoch-E (staged and renamed: a crash leaves the previous epoch intact), then
// removes older epochs; every rank waits for it. The replicas are identical: one copy serves all.
void save_tgn_checkpoint(Communicator& comm, const std::filesystem::path& dir,
                         const std::vector<Param*>& params, const TgnRunState& st,
                         const nlohmann::json& key);

// Rank 0 reads the newest epoch of this key in dir and every rank receives it: the parameters and
// Adam's state, and st. False when there is none; ParamError when the newest is of other options.
bool load_tgn_checkpoint(Communicator& comm, const std::filesystem::path& dir,
                         const std::vector<Param*>& params, TgnRunState& st,
                         const nlohmann::json& key);

}  // namespace halo

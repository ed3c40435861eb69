// What both trainers' checkpoints share: a checkpoint directory holds one staged folder per
// epoch (DIR/epoch-E, committed once its meta.json exists), and every parameter is stored as
// three float arrays NAME.value, NAME.m and NAME.v (the value and its Adam moments). The
// full-graph trainer (halo-checkpoint v2, runtime/src/train/train_checkpoint.cc) and the TGN
// trainer (halo-tgn-checkpoint v1, runtime/src/temporal/tgn.cc) add their own counters and arrays
// around these.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "halo/gnn/model.h"
#include "halo/runtime/comm/comm.h"

namespace halo {

class ArrayDir;

// A training's hold on its checkpoint folder, from before its first epoch to its end, so that a
// folder holds one run: a fresh run never mixes its epochs into an earlier run's (which halo
// predict or a resume would then read as one), and two trainings cannot write one folder at once.
// Each rank that writes there holds DIR/.halo-lock-rank-R (an flock, which the kernel drops when
// the process dies; the file is removed at the end).
class CheckpointClaim {
 public:
  // Collective. Creates dir if absent and takes the lock of every rank that writes there (all
  // ranks when every_rank, rank 0 alone otherwise), then agrees across ranks on what the folder
  // holds. ParamError, the same on every rank, when another training holds it; when it holds
  // something that is not a halo checkpoint; or, for a fresh run (!resume), when it holds an
  // earlier run's checkpoint, unless force, which removes that checkpoint first; and, resuming or
  // not, when it holds the other trainer's checkpoint (every_rank: the full-graph trainer's
  // layout, DIR/run-R/rank-r/; else TGN's, DIR/epoch-E/), which only force replaces.
  CheckpointClaim(Communicator& comm, const std::filesystem::path& dir, bool resume, bool force,
                  bool every_rank);
  // Drops the lock and removes its file, and the folder if this claim created it and nothing was
  // written into it.
  ~CheckpointClaim();
  CheckpointClaim(const CheckpointClaim&) = delete;
  CheckpointClaim& operator=(const CheckpointClaim&) = delete;

 private:
  void claim(Communicator& comm, bool resume, bool force, bool every_rank);
  // Creates the folder if absent and takes this rank's lock in it; false when another process
  // holds it.
  bool lock(int rank);
  // --force: every writing rank removes the earlier run's checkpoint it sees. Collective.
  void clear(Communicator& comm, bool mine);
  void release();

  std::filesystem::path dir_, lock_;
  int fd_ = -1;
  bool created_ = false;
};

// Throws ParamError when output `out` (given by `flag`) would lie inside checkpoint folder
// `checkpoint`, which holds checkpoints only (a file there would make the folder a foreign one).
void check_outside_checkpoint(const std::filesystem::path& out, const std::string& flag,
                              const std::filesystem::path& checkpoint);

// dir/epoch-E: the folder of one epoch's checkpoint.
std::filesystem::path epoch_dir(const std::filesystem::path& dir, int epoch);
// The epochs committed in dir (their meta.json exists), ascending; none if dir does not exist.
std::vector<int> committed_epochs(const std::filesystem::path& dir);
// Whether the epoch folder `dir` may hold a checkpoint of trajectory `key`: its meta.json's key
// equals it, or the meta cannot be read (loading it then says why, rather than an older epoch
// being taken silently). Read through the input rules: a FIFO never blocks.
bool epoch_may_be_of(const std::filesystem::path& dir, const nlohmann::json& key);
// Removes every epoch directory older than `epoch`; SystemError naming one that cannot be.
void remove_epochs_before(const std::filesystem::path& dir, int epoch);
// Removes every epoch directory but `epoch`'s: the older ones this run superseded and any newer
// one a run of other options left (a resume takes the newest epoch of its own options, so no
// newer epoch of this run exists). SystemError naming one that cannot be removed.
void remove_epochs_but(const std::filesystem::path& dir, int epoch);

// Adds NAME.value, NAME.m and NAME.v of every parameter to a, in params order (host copies of
// device matrices).
void put_adam_state(ArrayDir& a, const std::vector<Param*>& params);
// The arrays put_adam_state wrote into the checkpoint folder dir (meta: its meta.json), checked
// against their checksums and the parameters' sizes, as one host vector: value, m, v of each
// parameter in params order. Throws InputError naming a missing or damaged array.
std::vector<float> read_adam_state(const std::filesystem::path& dir, const nlohmann::json& meta,
                                   const std::vector<Param*>& params);
// The same floats as read_adam_state, taken from the live parameters.
std::vector<float> adam_state_values(const std::vector<Param*>& params);
// The number of floats adam_state_values returns.
std::size_t adam_state_size(const std::vector<Param*>& params);
// The inverse of adam_state_values: assigns value, m and v of every parameter from `at` on
// (adam_state_size(params) floats); returns the first float past them.
const float* set_adam_state(const std::vector<Param*>& params, const float* at);

}  // namespace halo

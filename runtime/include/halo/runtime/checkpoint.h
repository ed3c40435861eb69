// What both trainers' checkpoints share: a checkpoint directory holds one staged folder per
// epoch (DIR/epoch-E, committed once its meta.json exists), and every parameter is stored as
// three float arrays NAME.value, NAME.m and NAME.v (the value and its Adam moments). The
// full-graph trainer (halo-checkpoint v2, runtime/src/train_checkpoint.cc) and the TGN trainer
// (halo-tgn-checkpoint v1, runtime/src/tgn.cc) add their own counters and arrays around these.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "halo/gnn/model.h"

namespace halo {

class ArrayDir;

// dir/epoch-E: the folder of one epoch's checkpoint.
std::filesystem::path epoch_dir(const std::filesystem::path& dir, int epoch);
// The epochs committed in dir (their meta.json exists), ascending; none if dir does not exist.
std::vector<int> committed_epochs(const std::filesystem::path& dir);
// Removes every epoch directory older than `epoch`; SystemError naming one that cannot be.
void remove_epochs_before(const std::filesystem::path& dir, int epoch);

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

// Named training configurations that reproduce published results, the check of a run's outputs,
// and the fault-injection spec tests use to prove a failing rank ends the whole job.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "halo/runtime/train/trainer.h"

namespace halo {

// The named configurations (planetoid-gcn, ogbn-arxiv-gcn, ogbn-products-gcn,
// ogbn-proteins-gcn) applied onto opt; throws ParamError naming the known ones.
void apply_preset(const std::string& name, TrainOptions& opt);
// The names apply_preset knows, in table order.
std::vector<std::string> preset_names();

// Refuses (ParamError/IoError from staging.h), before any work, an output of opt that would
// replace something it must not or touch input; lead: this rank writes the log and predictions.
void check_train_outputs(const TrainOptions& opt, const std::filesystem::path& input, bool lead);

// Parses a HALO_INJECT_FAULT value; throws ParamError on a malformed one.
TrainOptions::Fault parse_fault(const std::string& spec);

}  // namespace halo

// The TGN options: the enums' spellings (parsed once at the CLI), the options' checks and the
// summary's JSON record (see tgn.h).
#include <string>
#include <string_view>

#include "halo/graph/error.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo {
using json = nlohmann::json;

TgnModel parse_tgn_model(std::string_view s) {
  if (s == "tgn") return TgnModel::kTgn;
  if (s == "jodie") return TgnModel::kJodie;
  if (s == "edgebank") return TgnModel::kEdgebank;
  throw ParamError("unknown --model '" + std::string(s) + "' (expected tgn, jodie or edgebank)");
}

TgnEmbedding parse_tgn_embedding(std::string_view s) {
  if (s == "attn") return TgnEmbedding::kAttention;
  if (s == "identity") return TgnEmbedding::kIdentity;
  if (s == "time") return TgnEmbedding::kTime;
  throw ParamError("unknown --embedding '" + std::string(s) +
                   "' (expected attn, identity or time)");
}

TgnAggregator parse_tgn_aggregator(std::string_view s) {
  if (s == "last") return TgnAggregator::kLast;
  if (s == "mean") return TgnAggregator::kMean;
  throw ParamError("unknown --aggregator '" + std::string(s) + "' (expected last or mean)");
}

TgnParallel parse_tgn_parallel(std::string_view s) {
  if (s == "exact") return TgnParallel::kExact;
  if (s == "segments") return TgnParallel::kSegments;
  throw ParamError("unknown --parallel '" + std::string(s) + "' (expected exact or segments)");
}

TgnNeighborsBefore parse_tgn_neighbors_before(std::string_view s) {
  if (s == "event") return TgnNeighborsBefore::kEvent;
  if (s == "batch") return TgnNeighborsBefore::kBatch;
  throw ParamError("unknown --neighbors-before '" + std::string(s) + "' (expected event or batch)");
}

TgnMemoryChoice parse_tgn_memory_choice(std::string_view s) {
  if (s == "auto") return TgnMemoryChoice::kAuto;
  if (s == "device") return TgnMemoryChoice::kDevice;
  if (s == "host") return TgnMemoryChoice::kHost;
  throw ParamError("unknown --memory-on '" + std::string(s) + "' (expected auto, device or host)");
}

const char* to_string(TgnModel m) {
  switch (m) {
    case TgnModel::kJodie:
      return "jodie";
    case TgnModel::kEdgebank:
      return "edgebank";
    default:
      return "tgn";
  }
}

const char* to_string(TgnEmbedding e) {
  switch (e) {
    case TgnEmbedding::kIdentity:
      return "identity";
    case TgnEmbedding::kTime:
      return "time";
    default:
      return "attn";
  }
}

const char* to_string(TgnAggregator a) { return a == TgnAggregator::kMean ? "mean" : "last"; }
const char* to_string(TgnParallel p) { return p == TgnParallel::kSegments ? "segments" : "exact"; }
const char* to_string(TgnNeighborsBefore n) {
  return n == TgnNeighborsBefore::kBatch ? "batch" : "event";
}

const char* to_string(TgnMemoryChoice m) {
  return m == TgnMemoryChoice::kDevice ? "device" : m == TgnMemoryChoice::kHost ? "host" : "auto";
}
const char* to_string(TgnMemoryOn m) { return m == TgnMemoryOn::kHost ? "host" : "device"; }

void TgnOptions::check() const {
  const auto in = [](std::int64_t v, std::int64_t lo, std::int64_t hi, const char* flag) {
    if (v < lo || v > hi)
      throw ParamError(std::string(flag) + " must be in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], found " + std::to_string(v));
  };
  in(memory_dim, 1, kMaxTgnWidth, "--memory-dim");
  in(embed_dim, 1, kMaxTgnWidth, "--embed-dim");
  in(time_dim, 1, kMaxTgnWidth, "--time-dim");
  in(static_memory, 0, kMaxTgnWidth, "--static-memory");
  if (static_memory > 0 && model == TgnModel::kEdgebank)
    throw ParamError("--static-memory needs a learned model: --model edgebank has no memory");
  if (static_memory > 0 && embedding != TgnEmbedding::kAttention)
    throw ParamError(
        std::string("--static-memory joins the memory in the attention's inputs, and ") +
        (model == TgnModel::kJodie ? "--model jodie (the time embedding)"
                                   : std::string("--embedding ") + to_string(embedding)) +
        " has no attention to combine them; use --model tgn --embedding attn");
  if (memory_on != TgnMemoryChoice::kAuto && model == TgnModel::kEdgebank)
    throw ParamError(std::string("--memory-on ") + to_string(memory_on) +
                     " places the node memory: --model edgebank has none");
  in(neighbors, 1, kMaxTgnNeighbors, "--neighbors");
  in(batch_size, 1, kMaxBatchSize, "--batch-size");
  in(epochs, 1, kMaxEpochs, "--epochs");
  static_assert(kMaxLearningRate == 1e30 && kMaxWeightDecay == 1000, "the messages name them");
  // lr is a float, and float(1e30) is slightly above 1e30: compare in float.
  if (!(lr > 0 && lr <= float(kMaxLearningRate))) throw ParamError("--lr must be in (0, 1e+30]");
  in(patience, 1, kMaxEpochs, "--patience");
  if (max_train_events < 0) throw ParamError("--max-train-events must be >= 0");
  in(eval_negatives, 0, kMaxEvalNegatives, "--eval-negatives");
  check_threads(threads, "--threads");
  if ((memory_dim + static_memory + time_dim) % heads != 0)
    throw ParamError(static_memory > 0
                         ? "--memory-dim + --static-memory + --time-dim must be a multiple of "
                           "the 2 heads"
                         : "memory-dim + time-dim must be a multiple of the 2 heads");
  if (force && checkpoint.empty()) throw ParamError("--force needs --checkpoint DIR");
  if (force && resume)
    throw ParamError(
        "--force starts a new run over an earlier one, --resume continues it: not both");
}

json TgnSummary::to_json() const {
  json j = {{"type", "summary"},
            {"valid_ap", valid_ap},
            {"test_ap", test_ap},
            {"test_auc", test_auc},
            {"test_inductive_ap", test_inductive_ap},
            {"test_inductive_auc", test_inductive_auc},
            {"test_ap_pooled", test_ap_pooled},
            {"test_inductive_ap_pooled", test_inductive_ap_pooled},
            {"best_epoch", best_epoch},
            {"events_per_s", events_per_s},
            {"peak_rss_mb", peak_rss_mb},
            {"ranks", ranks},
            {"test_mrr", test_mrr}};
  if (peak_gpu_mb > 0) j["peak_gpu_mb"] = peak_gpu_mb;  // runs on a GPU only
  if (!memory_on.empty()) j["memory_on"] = memory_on;
  return j;
}

}  // namespace halo

// The TGN options: the enums' spellings (parsed once at the CLI), the options' checks and the
// summary's JSON record (see tgn.h).
#include <string>
#include <string_view>

#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"
#include "halo/runtime/memory/memory_model.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo {
using json = nlohmann::json;

namespace {
constexpr EnumName<TgnModel> kTgnModels[] = {
    {TgnModel::kTgn, "tgn"}, {TgnModel::kJodie, "jodie"}, {TgnModel::kEdgebank, "edgebank"}};
constexpr EnumName<TgnEmbedding> kTgnEmbeddings[] = {{TgnEmbedding::kAttention, "attn"},
                                                     {TgnEmbedding::kIdentity, "identity"},
                                                     {TgnEmbedding::kTime, "time"}};
constexpr EnumName<TgnAggregator> kTgnAggregators[] = {{TgnAggregator::kLast, "last"},
                                                       {TgnAggregator::kMean, "mean"}};
constexpr EnumName<TgnParallel> kTgnParallels[] = {{TgnParallel::kExact, "exact"},
                                                   {TgnParallel::kSegments, "segments"}};
constexpr EnumName<TgnNeighborsBefore> kTgnNeighborsBefore[] = {
    {TgnNeighborsBefore::kEvent, "event"}, {TgnNeighborsBefore::kBatch, "batch"}};
constexpr EnumName<TgnMemoryChoice> kTgnMemoryChoices[] = {{TgnMemoryChoice::kAuto, "auto"},
                                                           {TgnMemoryChoice::kDevice, "device"},
                                                           {TgnMemoryChoice::kHost, "host"}};
}  // namespace

TgnModel parse_tgn_model(std::string_view s) { return parse_enum(kTgnModels, "--model", s); }

TgnEmbedding parse_tgn_embedding(std::string_view s) {
  return parse_enum(kTgnEmbeddings, "--embedding", s);
}

TgnAggregator parse_tgn_aggregator(std::string_view s) {
  return parse_enum(kTgnAggregators, "--aggregator", s);
}

TgnParallel parse_tgn_parallel(std::string_view s) {
  return parse_enum(kTgnParallels, "--parallel", s);
}

TgnNeighborsBefore parse_tgn_neighbors_before(std::string_view s) {
  return parse_enum(kTgnNeighborsBefore, "--neighbors-before", s);
}

TgnMemoryChoice parse_tgn_memory_choice(std::string_view s) {
  return parse_enum(kTgnMemoryChoices, "--memory-on", s);
}

const char* to_string(TgnModel m) { return enum_name(kTgnModels, m); }
const char* to_string(TgnEmbedding e) { return enum_name(kTgnEmbeddings, e); }
const char* to_string(TgnAggregator a) { return enum_name(kTgnAggregators, a); }
const char* to_string(TgnParallel p) { return enum_name(kTgnParallels, p); }
const char* to_string(TgnNeighborsBefore n) { return enum_name(kTgnNeighborsBefore, n); }
const char* to_string(TgnMemoryChoice m) { return enum_name(kTgnMemoryChoices, m); }
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

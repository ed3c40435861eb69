// The TGN options: the enums' spellings (parsed once at the CLI), the options' checks and the
// summary's JSON record (see tgn.h).
#include <string>
#include <string_view>

#include "halo/graph/error.h"
#include "halo/runtime/tgn.h"

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

void TgnOptions::check() const {
  if (memory_dim < 1 || embed_dim < 1 || time_dim < 1)
    throw ParamError("--memory-dim, --embed-dim, --time-dim must be >= 1");
  if (neighbors < 1) throw ParamError("--neighbors must be at least 1");
  if (batch_size < 1) throw ParamError("--batch-size must be at least 1");
  if (epochs < 1) throw ParamError("--epochs must be at least 1");
  if (!(lr > 0)) throw ParamError("--lr must be positive");
  if (patience < 1) throw ParamError("--patience must be at least 1");
  if (max_train_events < 0) throw ParamError("--max-train-events must be >= 0");
  if (eval_negatives < 0) throw ParamError("--eval-negatives must be >= 0");
  if ((memory_dim + time_dim) % heads != 0)
    throw ParamError("memory-dim + time-dim must be a multiple of the 2 heads");
  if (force && checkpoint.empty()) throw ParamError("--force needs --checkpoint DIR");
  if (force && resume)
    throw ParamError(
        "--force starts a new run over an earlier one, --resume continues it: not both");
}

json TgnSummary::to_json() const {
  return {{"type", "summary"},
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
}

}  // namespace halo

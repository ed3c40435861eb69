// Link-prediction evaluation for the TGN trainer: uniform negatives, the scores and their metrics
// (TGN's per-batch AP and AUC, pooled AP, MRR), the EdgeBank floor, and gathering every rank's
// scores.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "halo/gnn/temporal/memory.h"
#include "halo/runtime/comm/comm.h"

namespace halo {

// The evaluation negatives' seed: the same negatives for every model.
constexpr std::uint64_t kEvalNegatives = 0x5eed0e7a1ull;

// One uniform negative destination per event: fixed for evaluation (every model and epoch sees
// the same), drawn afresh each training epoch.
NodeId negative(std::uint64_t seed, std::uint64_t stream, std::int64_t event, std::int64_t nodes);

// per_event negatives for each event (event-major), negative j from stream first + j.
std::vector<NodeId> negatives(const std::vector<std::int64_t>& ids, std::uint64_t seed,
                              std::uint64_t first, std::int64_t nodes, std::int64_t per_event = 1);

// Events [first, min(last, events)) as one batch.
std::vector<std::int64_t> event_range(std::int64_t first, std::int64_t last);

// Scores of positives and negatives, and of the inductive subset, for AP and ROC-AUC. Two
// protocols: TGN's (the reference figures), which averages AP and AUC over evaluation batches of
// `batch` events (the inductive subset in consecutive groups of `batch` of its events, as TGN
// evaluates new nodes in their own batches), and the pooled one over all events at once, which
// also charges the model for scores drifting across time.
struct Scores {
  std::int64_t batch = 200;
  std::vector<float> s, si;
  std::vector<std::int32_t> y, yi;
  double rr_sum = 0;  // reciprocal ranks (MRR against N negatives), over all events
  std::int64_t rr_count = 0;
  double mrr() const { return rr_count ? rr_sum / double(rr_count) : 0.0; }
  void add(float pos, float neg, bool inductive);
  double ap() const;
  double auc() const;
  double ap_ind() const;
  double auc_ind() const;
  double ap_pooled() const;
  double ap_ind_pooled() const;
};

// EdgeBank∞ over events [begin, end) in batches: an event scores 1 when its (src, dst) pair
// occurred in any earlier batch; seen carries the pairs from one range to the next.
void edgebank(const EventStream& s, std::int64_t begin, std::int64_t end, std::int64_t batch,
              std::uint64_t neg_seed, const std::vector<std::uint8_t>& inductive,
              std::unordered_set<std::uint64_t>& seen, Scores& out);

// One evaluated event: its score and its negative's.
struct Scored {
  std::int64_t event;
  float pos, neg;
  float rr;  // reciprocal rank of the positive among the MRR negatives (0 when none)
};

// Every rank's scored events, in event order, on every rank (total: how many there are).
std::vector<Scored> all_scored(Communicator& comm, std::vector<Scored> mine, std::int64_t total);

}  // namespace halo

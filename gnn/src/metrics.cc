// Metrics (OGB Evaluator semantics, see metrics.h).
//
// NaN scores are ordered, never compared raw: `<` on NaN is not a strict weak order (std::sort
// may then read out of bounds), and `s == s` is false for a NaN, which once made the tie loop of
// average_precision spin forever. Every metric here ranks NaN below every number, -inf included,
// and treats all NaNs as one tie group, so a model gone non-finite gets a defined, low figure.
#include "halo/gnn/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace halo {

bool score_less(float a, float b) {
  if (std::isnan(b)) return false;  // nothing ranks below NaN
  if (std::isnan(a)) return true;
  return a < b;
}

bool score_tied(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

namespace {
// The index of the largest logit of a row by score_less (the first on ties); -1 when every logit
// is NaN, which predicts nothing.
std::int64_t best_of(const float* z, std::int64_t cols) {
  std::int64_t best = -1;
  for (std::int64_t c = 0; c < cols; ++c)
    if (!std::isnan(z[c]) && (best < 0 || z[c] > z[best])) best = c;
  return best;
}
}  // namespace

Counts accuracy_counts(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                       std::int64_t nrows) {
  Counts c;
  for (std::int64_t i = 0; i < nrows; ++i) {
    const NodeId r = rows[i];
    if (labels[r] < 0) continue;
    const std::int64_t best = best_of(logits.row(r), logits.cols);
    c.correct += best >= 0 && best == labels[r];
    ++c.total;
  }
  return c;
}

double rocauc(const float* scores, const std::int32_t* labels, std::int64_t n, std::int64_t tasks) {
  double sum = 0;
  int used = 0;
  std::vector<std::int64_t> idx;
  for (std::int64_t t = 0; t < tasks; ++t) {
    idx.clear();
    std::int64_t pos = 0, neg = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t y = labels[i * tasks + t];
      if (y < 0) continue;
      idx.push_back(i);
      (y > 0 ? pos : neg) += 1;
    }
    if (pos == 0 || neg == 0) continue;
    auto score = [&](std::int64_t i) { return scores[i * tasks + t]; };
    std::sort(idx.begin(), idx.end(),
              [&](std::int64_t a, std::int64_t b) { return score_less(score(a), score(b)); });
    // Mann-Whitney U with average ranks over ties.
    double rank_sum = 0;
    for (std::size_t i = 0; i < idx.size();) {
      std::size_t j = i;
      while (j + 1 < idx.size() && score_tied(score(idx[j + 1]), score(idx[i]))) ++j;
      const double avg = (double(i) + double(j)) / 2 + 1;
      for (std::size_t k = i; k <= j; ++k)
        if (labels[idx[k] * tasks + t] > 0) rank_sum += avg;
      i = j + 1;
    }
    sum += (rank_sum - double(pos) * double(pos + 1) / 2) / (double(pos) * double(neg));
    ++used;
  }
  return used ? sum / used : 0.0;
}

std::vector<std::int64_t> argmax_rows(const MatrixView& logits) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(logits.rows));
  for (std::int64_t r = 0; r < logits.rows; ++r)
    out[std::size_t(r)] = std::max<std::int64_t>(0, best_of(logits.row(r), logits.cols));
  return out;
}

double average_precision(const float* scores, const std::int32_t* labels, std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[std::size_t(i)] = i;
  std::sort(order.begin(), order.end(),
            [&](std::int64_t a, std::int64_t b) { return score_less(scores[b], scores[a]); });
  std::int64_t positives = 0;
  for (std::int64_t i = 0; i < n; ++i) positives += labels[i] == 1;
  if (positives == 0) return 0.0;
  double ap = 0, tp = 0, fp = 0, last_recall = 0;
  for (std::int64_t i = 0; i < n;) {
    const float s = scores[order[std::size_t(i)]];
    // The first element always joins its own group (i advances even when s is NaN).
    do {
      (labels[order[std::size_t(i)]] == 1 ? tp : fp) += 1;
      ++i;
    } while (i < n && score_tied(scores[order[std::size_t(i)]], s));
    const double recall = tp / double(positives);
    ap += (recall - last_recall) * (tp / (tp + fp));
    last_recall = recall;
  }
  return ap;
}

double reciprocal_rank(float pos, const float* neg, std::int64_t n, std::int64_t stride) {
  double above = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const float v = neg[j * stride];
    above += score_less(pos, v) ? 1.0 : score_tied(v, pos) ? 0.5 : 0.0;
  }
  return 1.0 / (1.0 + above);
}

}  // namespace halo

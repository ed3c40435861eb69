// Metrics (OGB Evaluator semantics, see metrics.h).
#include "halo/gnn/metrics.h"

#include <algorithm>
#include <numeric>

namespace halo {

Counts accuracy_counts(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                       std::int64_t nrows) {
  Counts c;
  for (std::int64_t i = 0; i < nrows; ++i) {
    const NodeId r = rows[i];
    if (labels[r] < 0) continue;
    const float* z = logits.row(r);
    const std::int64_t best = std::max_element(z, z + logits.cols) - z;
    c.correct += best == labels[r];
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
    std::sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
      return scores[a * tasks + t] < scores[b * tasks + t];
    });
    // Mann-Whitney U with average ranks over ties.
    double rank_sum = 0;
    for (std::size_t i = 0; i < idx.size();) {
      std::size_t j = i;
      while (j + 1 < idx.size() && scores[idx[j + 1] * tasks + t] == scores[idx[i] * tasks + t]) ++j;
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
  for (std::int64_t r = 0; r < logits.rows; ++r) {
    const float* z = logits.row(r);
    out[std::size_t(r)] = std::max_element(z, z + logits.cols) - z;
  }
  return out;
}

double average_precision(const float* scores, const std::int32_t* labels, std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[std::size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return scores[a] > scores[b]; });
  std::int64_t positives = 0;
  for (std::int64_t i = 0; i < n; ++i) positives += labels[i] == 1;
  if (positives == 0) return 0.0;
  double ap = 0, tp = 0, fp = 0, last_recall = 0;
  for (std::int64_t i = 0; i < n;) {
    const float s = scores[order[std::size_t(i)]];
    for (; i < n && scores[order[std::size_t(i)]] == s; ++i) (labels[order[std::size_t(i)]] == 1 ? tp : fp) += 1;
    const double recall = tp / double(positives);
    ap += (recall - last_recall) * (tp / (tp + fp));
    last_recall = recall;
  }
  return ap;
}

}  // namespace halo

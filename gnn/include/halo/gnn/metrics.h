// Evaluation with OGB's Evaluator semantics: accuracy over labelled rows only (-1 = missing is
// masked out); ROC-AUC computed per task over the rows labelled for it and averaged over the
// tasks that have both classes present (ogbn-proteins).
//
// Non-finite scores have a defined place: NaN ranks below every number (-inf included) and all
// NaNs tie, so every metric here terminates and returns a figure in its usual range on any input.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/gnn/matrix.h"
#include "halo/graph/types.h"

namespace halo {

struct Counts {
  std::int64_t correct = 0, total = 0;
  double value() const { return total ? double(correct) / double(total) : 0.0; }
};

// The order every metric ranks scores by: a strict weak order on all floats, NaN lowest.
bool score_less(float a, float b);

// Whether two scores form one tie group under score_less (equal, or both NaN).
bool score_tied(float a, float b);

// Argmax of each listed row against its label; rows labelled -1 are not counted. NaN logits
// never win; a row of NaNs only counts as wrong.
Counts accuracy_counts(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                       std::int64_t nrows);

// Mean ROC-AUC over tasks with both classes among the labelled rows; scores and labels are
// n x tasks, labels 0/1 or -1 (missing). Ties get the average rank. 0 when no task qualifies.
double rocauc(const float* scores, const std::int32_t* labels, std::int64_t n, std::int64_t tasks);

// Average precision of binary scores (labels 0/1), as sklearn's average_precision_score: the
// precision at each distinct threshold weighted by the recall it adds (ties form one threshold).
double average_precision(const float* scores, const std::int32_t* labels, std::int64_t n);

// Index of the largest value in each row (the first on ties; NaN lowest, 0 for a row of NaNs).
std::vector<std::int64_t> argmax_rows(const MatrixView& logits);

// 1 / rank of the positive's score among n negatives neg[0], neg[stride], ... (rank = 1 +
// #higher + #tied / 2, as TGB counts), under score_less: a NaN positive ranks below them all.
double reciprocal_rank(float pos, const float* neg, std::int64_t n, std::int64_t stride = 1);

}  // namespace halo

// TimedBackend: forwards every op to the wrapped backend and accumulates its wall time.
#include "halo/gnn/timed_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace halo {

template <class Fn>
auto TimedBackend::timed(const char* op, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Add {
    Entry& e;
    std::chrono::steady_clock::time_point t0;
    ~Add() {
      e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++e.calls;
    }
  } add{totals_[op], t0};
  return fn();
}

std::string TimedBackend::report() const {
  std::vector<std::pair<std::string, Entry>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::string out = "op                      seconds   share   calls\n";
  char line[128];
  for (const auto& [name, e] : rows) {
    std::snprintf(line, sizeof line, "%-22s %8.3f  %5.1f%%  %6lld\n", name.c_str(), e.seconds,
                  total > 0 ? 100 * e.seconds / total : 0.0, (long long)e.calls);
    out += line;
  }
  return out;
}

void TimedBackend::spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  timed("spmm", [&] { inner_.spmm(A, X, Y); });
}
void TimedBackend::spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  timed("spmm", [&] { inner_.spmm_consume(A, X, Y); });
}
void TimedBackend::gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B,
                        float beta, const MatrixView& C) {
  timed("gemm", [&] { inner_.gemm(ta, tb, alpha, A, B, beta, C); });
}
void TimedBackend::add_bias(const MatrixView& Y, const float* b) {
  timed("add_bias", [&] { inner_.add_bias(Y, b); });
}
void TimedBackend::column_sums(const MatrixView& X, float* out) {
  timed("column_sums", [&] { inner_.column_sums(X, out); });
}
void TimedBackend::relu(const MatrixView& Y) {
  timed("relu", [&] { inner_.relu(Y); });
}
void TimedBackend::relu_backward(const MatrixView& Y, const MatrixView& dY) {
  timed("relu_backward", [&] { inner_.relu_backward(Y, dY); });
}

void TimedBackend::bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                                    const MatrixView& dY) {
  timed("bn_relu_backward", [&] { inner_.bn_relu_backward(xhat, gamma, beta, dY); });
}
void TimedBackend::dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) {
  timed("dropout", [&] { inner_.dropout(Y, p, key, row_ids); });
}
void TimedBackend::column_moments(const MatrixView& X, double* sum, double* sumsq) {
  timed("batch_norm", [&] { inner_.column_moments(X, sum, sumsq); });
}
void TimedBackend::batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                                    const float* gamma, const float* beta, const MatrixView* xhat,
                                    const MatrixView& Y) {
  timed("batch_norm", [&] { inner_.batch_norm_apply(X, mean, inv_std, gamma, beta, xhat, Y); });
}
// The fused activation ops are timed as one op each (inner_'s, fused or composed).
void TimedBackend::batch_norm_relu_dropout(const MatrixView& X, const float* mean,
                                           const float* inv_std, const float* gamma,
                                           const float* beta, const MatrixView* xhat,
                                           const MatrixView& Y, float p, PhiloxKey key,
                                           const NodeId* row_ids, KeepBits* bits) {
  timed("bn_relu_dropout", [&] {
    inner_.batch_norm_relu_dropout(X, mean, inv_std, gamma, beta, xhat, Y, p, key, row_ids, bits);
  });
}
void TimedBackend::batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                                    const float* beta, float p, PhiloxKey key,
                                                    const NodeId* row_ids, const MatrixView& dY,
                                                    double* s, double* sx, KeepBits* bits) {
  timed("bn_relu_dropout_backward", [&] {
    inner_.batch_norm_relu_dropout_backward(xhat, gamma, beta, p, key, row_ids, dY, s, sx, bits);
  });
}
void TimedBackend::batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat, double* s,
                                        double* sx) {
  timed("batch_norm_backward", [&] { inner_.batch_norm_grad_sums(dY, xhat, s, sx); });
}
void TimedBackend::batch_norm_backward(const MatrixView& dY, const MatrixView& xhat,
                                       const float* gamma, const float* inv_std,
                                       const float* mean_dy, const float* mean_dy_xhat,
                                       const MatrixView& dX) {
  timed("batch_norm_backward",
        [&] { inner_.batch_norm_backward(dY, xhat, gamma, inv_std, mean_dy, mean_dy_xhat, dX); });
}
double TimedBackend::softmax_xent(const MatrixView& logits, const std::int32_t* labels,
                                  const NodeId* rows, std::int64_t nrows, double denom,
                                  const MatrixView& dlogits, std::int64_t* counted) {
  return timed("loss", [&] {
    return inner_.softmax_xent(logits, labels, rows, nrows, denom, dlogits, counted);
  });
}
double TimedBackend::bce_logits(const MatrixView& logits, const std::int32_t* labels,
                                const NodeId* rows, std::int64_t nrows, double denom,
                                const MatrixView& dlogits, std::int64_t* counted) {
  return timed("loss", [&] {
    return inner_.bce_logits(logits, labels, rows, nrows, denom, dlogits, counted);
  });
}
void TimedBackend::adam(float* p, const float* g, float* m, float* v, std::int64_t n,
                        const AdamStep& s) {
  timed("adam", [&] { inner_.adam(p, g, m, v, n, s); });
}
void TimedBackend::gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                               const MatrixView& dst) {
  timed("gather_rows", [&] { inner_.gather_rows(src, idx, n, dst); });
}
void TimedBackend::scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                    const MatrixView& dst) {
  timed("scatter_add_rows", [&] { inner_.scatter_add_rows(src, idx, n, dst); });
}
void TimedBackend::add(const MatrixView& src, const MatrixView& dst) {
  timed("add", [&] { inner_.add(src, dst); });
}
void TimedBackend::copy(const MatrixView& src, const MatrixView& dst) {
  timed("copy", [&] { inner_.copy(src, dst); });
}
void TimedBackend::fill(const MatrixView& X, float v) {
  timed("fill", [&] { inner_.fill(X, v); });
}
void TimedBackend::pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) {
  timed("pack_bf16", [&] { inner_.pack_bf16(src, n, dst); });
}
void TimedBackend::unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) {
  timed("unpack_bf16", [&] { inner_.unpack_bf16(src, n, dst); });
}

}  // namespace halo

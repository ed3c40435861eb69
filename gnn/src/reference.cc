// Reference kernels (see reference.h): clarity over speed.
#include "halo/gnn/reference.h"

#include <cmath>

namespace halo::ref {

Matrix spmm(const SparseView& A, const Matrix& X) {
  Matrix Y(A.rows, X.cols());
  for (std::int64_t r = 0; r < A.rows; ++r)
    for (std::int64_t c = 0; c < X.cols(); ++c) {
      double s = 0;
      for (EdgeId e = A.offsets[r]; e < A.offsets[r + 1]; ++e)
        s += double(A.values[e]) * X.at(A.indices[e], c);
      Y.at(r, c) = float(s);
    }
  return Y;
}

Matrix gemm(bool ta, bool tb, const Matrix& A, const Matrix& B) {
  const std::int64_t m = ta ? A.cols() : A.rows(), k = ta ? A.rows() : A.cols();
  const std::int64_t n = tb ? B.rows() : B.cols();
  Matrix C(m, n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < k; ++l)
        s += double(ta ? A.at(l, i) : A.at(i, l)) * (tb ? B.at(j, l) : B.at(l, j));
      C.at(i, j) = float(s);
    }
  return C;
}

Matrix dropout_mask(std::int64_t rows, std::int64_t cols, float p, PhiloxKey key,
                    const NodeId* row_ids) {
  Matrix M(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      M.at(r, c) = dropout_u16(key, std::uint64_t(row_ids ? row_ids[r] : r), std::uint32_t(c)) >=
                           dropout_threshold(p)
                       ? 1.f
                       : 0.f;
  return M;
}

double softmax_xent(const Matrix& z, const std::vector<std::int32_t>& labels,
                    const std::vector<NodeId>& rows, double denom, Matrix* d) {
  *d = Matrix(z.rows(), z.cols());
  double total = 0;
  for (NodeId r : rows) {
    const std::int32_t y = labels[std::size_t(r)];
    if (y < 0) continue;
    double mx = z.at(r, 0), se = 0;
    for (std::int64_t c = 1; c < z.cols(); ++c) mx = std::max(mx, double(z.at(r, c)));
    for (std::int64_t c = 0; c < z.cols(); ++c) se += std::exp(z.at(r, c) - mx);
    total += mx + std::log(se) - z.at(r, y);
    for (std::int64_t c = 0; c < z.cols(); ++c)
      d->at(r, c) = float((std::exp(z.at(r, c) - mx) / se - (c == y)) / denom);
  }
  return total;
}

double bce_logits(const Matrix& z, const std::vector<std::int32_t>& labels,
                  const std::vector<NodeId>& rows, double denom, Matrix* d) {
  *d = Matrix(z.rows(), z.cols());
  double total = 0;
  for (NodeId r : rows)
    for (std::int64_t c = 0; c < z.cols(); ++c) {
      const std::int32_t y = labels[std::size_t(r * z.cols() + c)];
      if (y < 0) continue;
      const double s = 1 / (1 + std::exp(-double(z.at(r, c))));
      total += -(y ? std::log(s) : std::log(1 - s));
      d->at(r, c) = float((s - y) / denom);
    }
  return total;
}

Matrix batch_norm(const Matrix& X, const std::vector<float>& gamma, const std::vector<float>& beta,
                  float eps, Matrix* xhat) {
  Matrix Y(X.rows(), X.cols());
  *xhat = Matrix(X.rows(), X.cols());
  for (std::int64_t c = 0; c < X.cols(); ++c) {
    double mu = 0, var = 0;
    for (std::int64_t r = 0; r < X.rows(); ++r) mu += X.at(r, c);
    mu /= double(X.rows());
    for (std::int64_t r = 0; r < X.rows(); ++r) var += (X.at(r, c) - mu) * (X.at(r, c) - mu);
    var /= double(X.rows());
    for (std::int64_t r = 0; r < X.rows(); ++r) {
      xhat->at(r, c) = float((X.at(r, c) - mu) / std::sqrt(var + eps));
      Y.at(r, c) = xhat->at(r, c) * gamma[std::size_t(c)] + beta[std::size_t(c)];
    }
  }
  return Y;
}

}  // namespace halo::ref

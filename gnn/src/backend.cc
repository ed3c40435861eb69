// Backend's public ops: each checks what its comment in backend.h promises about shapes, aliasing
// and memory space, times itself when the thread has an OpProfile, and calls its do_ virtual.
// Checks are O(1) and build their message only when they fail.
#include "halo/gnn/backend.h"

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "halo/gnn/attention.h"
#include "halo/gnn/op_profile.h"
#include "halo/gnn/tgat_view.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

// An operand as an error message shows it: "X 5x6".
struct Operand {
  const char* name;
  std::int64_t rows, cols;
};

Operand operand(const char* name, const MatrixView& m) { return {name, m.rows, m.cols}; }
Operand operand(const char* name, const SparseView& m) { return {name, m.rows, m.cols}; }

// A broken contract is the caller's bug, not the user's: std::logic_error, which main() reports
// as an internal error (exit 70), naming the op, the rule and every operand's shape.
[[noreturn]] void shape_error(const char* op, const char* rule,
                              std::initializer_list<Operand> operands) {
  std::string msg = std::string("Backend::") + op + ": needs " + rule + "; got";
  const char* sep = " ";
  for (const Operand& o : operands) {
    msg += sep + std::string(o.name) + " " + std::to_string(o.rows) + "x" + std::to_string(o.cols);
    sep = ", ";
  }
  throw std::logic_error(msg);
}

// Non-empty views must be in the backend's memory; an empty one touches none, so its tag (a
// default-constructed view says host) does not matter.
void check_device(const Backend& be, const char* op, const char* name, const MatrixView& m) {
  if (m.size() == 0 || m.device == be.device()) return;
  throw std::logic_error(std::string("Backend::") + op + ": " + name + " is in " +
                         (m.device == Device::kCpu ? "host" : "device") + " memory but the " +
                         be.name() + " backend computes in " +
                         (be.device() == Device::kCpu ? "host" : "device") + " memory");
}

// Whether two views share any element (empty views share none).
bool overlap(const MatrixView& a, const MatrixView& b) {
  if (a.size() == 0 || b.size() == 0) return false;
  const std::less<const float*> less;
  return less(a.data, b.data + b.size()) && less(b.data, a.data + a.size());
}

bool same_shape(const MatrixView& a, const MatrixView& b) {
  return a.rows == b.rows && a.cols == b.cols;
}

// Two views of one shape, both in the backend's memory.
void check_same(const Backend& be, const char* op, const char* na, const MatrixView& a,
                const char* nb, const MatrixView& b) {
  if (!same_shape(a, b)) shape_error(op, "equal shapes", {operand(na, a), operand(nb, b)});
  check_device(be, op, na, a);
  check_device(be, op, nb, b);
}

void check_count(const char* op, const char* name, std::int64_t n) {
  if (n < 0)
    throw std::logic_error(std::string("Backend::") + op + ": " + name + " = " + std::to_string(n) +
                           " is negative");
}

void check_spmm(const Backend& be, const char* op, const SparseView& A, const MatrixView& X,
                const MatrixView& Y) {
  if (A.cols != X.rows || A.rows != Y.rows || X.cols != Y.cols)
    shape_error(op, "A.cols == X.rows, A.rows == Y.rows, X.cols == Y.cols",
                {operand("A", A), operand("X", X), operand("Y", Y)});
  if (overlap(X, Y)) shape_error(op, "Y not to alias X", {operand("X", X), operand("Y", Y)});
  check_device(be, op, "X", X);
  check_device(be, op, "Y", Y);
}

// The loss ops: logits and dlogits of one shape, a row count >= 0.
void check_loss(const Backend& be, const char* op, const MatrixView& logits, std::int64_t nrows,
                const MatrixView& dlogits) {
  check_same(be, op, "logits", logits, "dlogits", dlogits);
  check_count(op, "nrows", nrows);
}

// Runs fn, timing it into the thread's profile when there is one. The profile is lifted while fn
// runs, so the ops fn runs itself (a composed default, gemm filling C) are part of this op's
// one wall-clock interval, not counted again. A backend that queues work (CUDA) is waited for
// before and after, so the interval is the op's work, not its launch (profiling only).
class OpTimer {
 public:
  OpTimer(Backend& be, OpProfile& profile, const char* op)
      : be_(be), profile_(profile), entry_(profile.entry(op)) {
    be_.wait_for_queued_work();
    t0_ = std::chrono::steady_clock::now();
    detail::t_profile = nullptr;
  }
  ~OpTimer() {
    if (std::uncaught_exceptions() == 0) {
      try {
        be_.wait_for_queued_work();
      } catch (...) {  // a GPU fault: the next op reports it (CUDA errors are sticky)
      }
    }
    entry_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ++entry_.calls;
    detail::t_profile = &profile_;
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  Backend& be_;
  OpProfile& profile_;
  OpProfile::Entry& entry_;
  std::chrono::steady_clock::time_point t0_;
};

template <class Fn>
decltype(auto) timed(Backend& be, const char* op, Fn&& fn) {
  OpProfile* profile = detail::t_profile;
  if (profile == nullptr) return fn();
  const OpTimer timer(be, *profile, op);
  return fn();
}

}  // namespace

void Backend::spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  check_spmm(*this, "spmm", A, X, Y);
  timed(*this, "spmm", [&] { do_spmm(A, X, Y); });
}

void Backend::spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
  check_spmm(*this, "spmm_consume", A, X, Y);
  timed(*this, "spmm", [&] { do_spmm_consume(A, X, Y); });
}

void Backend::gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B,
                   float beta, const MatrixView& C) {
  const std::int64_t m = ta ? A.cols : A.rows, k = ta ? A.rows : A.cols;
  const std::int64_t kb = tb ? B.cols : B.rows, n = tb ? B.rows : B.cols;
  if (k != kb || C.rows != m || C.cols != n)
    shape_error(ta ? (tb ? "gemm(A^T, B^T)" : "gemm(A^T, B)") : (tb ? "gemm(A, B^T)" : "gemm"),
                "op(A) m x k, op(B) k x n, C m x n",
                {operand("A", A), operand("B", B), operand("C", C)});
  if (overlap(C, A) || overlap(C, B))
    shape_error("gemm", "C not to alias A or B",
                {operand("A", A), operand("B", B), operand("C", C)});
  check_device(*this, "gemm", "A", A);
  check_device(*this, "gemm", "B", B);
  check_device(*this, "gemm", "C", C);
  timed(*this, "gemm", [&] { do_gemm(ta, tb, alpha, A, B, beta, C); });
}

void Backend::add_bias(const MatrixView& Y, const float* b) {
  check_device(*this, "add_bias", "Y", Y);
  timed(*this, "add_bias", [&] { do_add_bias(Y, b); });
}

void Backend::column_sums(const MatrixView& X, float* out) {
  check_device(*this, "column_sums", "X", X);
  timed(*this, "column_sums", [&] { do_column_sums(X, out); });
}

void Backend::relu(const MatrixView& Y) {
  check_device(*this, "relu", "Y", Y);
  timed(*this, "relu", [&] { do_relu(Y); });
}

void Backend::relu_backward(const MatrixView& Y, const MatrixView& dY) {
  check_same(*this, "relu_backward", "Y", Y, "dY", dY);
  timed(*this, "relu_backward", [&] { do_relu_backward(Y, dY); });
}

void Backend::bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                               const MatrixView& dY) {
  check_same(*this, "bn_relu_backward", "xhat", xhat, "dY", dY);
  timed(*this, "bn_relu_backward", [&] { do_bn_relu_backward(xhat, gamma, beta, dY); });
}

void Backend::dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) {
  check_device(*this, "dropout", "Y", Y);
  timed(*this, "dropout", [&] { do_dropout(Y, p, key, row_ids); });
}

void Backend::column_moments(const MatrixView& X, double* sum, double* sumsq) {
  check_device(*this, "column_moments", "X", X);
  timed(*this, "batch_norm", [&] { do_column_moments(X, sum, sumsq); });
}

void Backend::batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                               const float* gamma, const float* beta, const MatrixView* xhat,
                               const MatrixView& Y) {
  check_same(*this, "batch_norm_apply", "X", X, "Y", Y);
  if (xhat) check_same(*this, "batch_norm_apply", "X", X, "xhat", *xhat);
  timed(*this, "batch_norm", [&] { do_batch_norm_apply(X, mean, inv_std, gamma, beta, xhat, Y); });
}

void Backend::batch_norm_relu_dropout(const MatrixView& X, const float* mean, const float* inv_std,
                                      const float* gamma, const float* beta, const MatrixView* xhat,
                                      const MatrixView& Y, float p, PhiloxKey key,
                                      const NodeId* row_ids, KeepBits* bits) {
  check_same(*this, "batch_norm_relu_dropout", "X", X, "Y", Y);
  if (xhat) check_same(*this, "batch_norm_relu_dropout", "X", X, "xhat", *xhat);
  timed(*this, "bn_relu_dropout", [&] {
    do_batch_norm_relu_dropout(X, mean, inv_std, gamma, beta, xhat, Y, p, key, row_ids, bits);
  });
}

void Backend::batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                               const float* beta, float p, PhiloxKey key,
                                               const NodeId* row_ids, const MatrixView& dY,
                                               double* sum_dy, double* sum_dy_xhat,
                                               KeepBits* bits) {
  check_same(*this, "batch_norm_relu_dropout_backward", "xhat", xhat, "dY", dY);
  timed(*this, "bn_relu_dropout_backward", [&] {
    do_batch_norm_relu_dropout_backward(xhat, gamma, beta, p, key, row_ids, dY, sum_dy, sum_dy_xhat,
                                        bits);
  });
}

void Backend::batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat, double* sum_dy,
                                   double* sum_dy_xhat) {
  check_same(*this, "batch_norm_grad_sums", "dY", dY, "xhat", xhat);
  timed(*this, "batch_norm_backward",
        [&] { do_batch_norm_grad_sums(dY, xhat, sum_dy, sum_dy_xhat); });
}

void Backend::batch_norm_backward(const MatrixView& dY, const MatrixView& xhat, const float* gamma,
                                  const float* inv_std, const float* mean_dy,
                                  const float* mean_dy_xhat, const MatrixView& dX) {
  check_same(*this, "batch_norm_backward", "dY", dY, "xhat", xhat);
  check_same(*this, "batch_norm_backward", "dY", dY, "dX", dX);
  timed(*this, "batch_norm_backward",
        [&] { do_batch_norm_backward(dY, xhat, gamma, inv_std, mean_dy, mean_dy_xhat, dX); });
}

double Backend::softmax_xent(const MatrixView& logits, const std::int32_t* labels,
                             const NodeId* rows, std::int64_t nrows, double denom,
                             const MatrixView& dlogits, std::int64_t* counted) {
  check_loss(*this, "softmax_xent", logits, nrows, dlogits);
  return timed(*this, "loss", [&] {
    return do_softmax_xent(logits, labels, rows, nrows, denom, dlogits, counted);
  });
}

double Backend::bce_logits(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                           std::int64_t nrows, double denom, const MatrixView& dlogits,
                           std::int64_t* counted) {
  check_loss(*this, "bce_logits", logits, nrows, dlogits);
  return timed(*this, "loss",
               [&] { return do_bce_logits(logits, labels, rows, nrows, denom, dlogits, counted); });
}

void Backend::adam(float* p, const float* g, float* m, float* v, std::int64_t n,
                   const AdamStep& s) {
  check_count("adam", "n", n);
  timed(*this, "adam", [&] { do_adam(p, g, m, v, n, s); });
}

void Backend::adam_all(const AdamTensor* t, std::size_t count, const AdamStep& s) {
  for (std::size_t i = 0; i < count; ++i) check_count("adam_all", "n", t[i].n);
  timed(*this, "adam", [&] { do_adam_all(t, count, s); });
}

void Backend::gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                          const MatrixView& dst) {
  check_count("gather_rows", "n", n);
  if (src.cols != dst.cols || n > dst.rows)
    shape_error("gather_rows", "n <= dst.rows, src.cols == dst.cols",
                {operand("src", src), {"n", n, 1}, operand("dst", dst)});
  check_device(*this, "gather_rows", "src", src);
  check_device(*this, "gather_rows", "dst", dst);
  timed(*this, "gather_rows", [&] { do_gather_rows(src, idx, n, dst); });
}

void Backend::scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                               const MatrixView& dst) {
  check_count("scatter_add_rows", "n", n);
  if (src.cols != dst.cols || n > src.rows)
    shape_error("scatter_add_rows", "n <= src.rows, src.cols == dst.cols",
                {operand("src", src), {"n", n, 1}, operand("dst", dst)});
  check_device(*this, "scatter_add_rows", "src", src);
  check_device(*this, "scatter_add_rows", "dst", dst);
  timed(*this, "scatter_add_rows", [&] { do_scatter_add_rows(src, idx, n, dst); });
}

void Backend::add(const MatrixView& src, const MatrixView& dst) {
  check_same(*this, "add", "src", src, "dst", dst);
  timed(*this, "add", [&] { do_add(src, dst); });
}

void Backend::copy(const MatrixView& src, const MatrixView& dst) {
  check_same(*this, "copy", "src", src, "dst", dst);
  timed(*this, "copy", [&] { do_copy(src, dst); });
}

void Backend::smooth(const MatrixView& x, float gamma, const MatrixView& avg) {
  check_same(*this, "smooth", "x", x, "avg", avg);
  if (x.data == avg.data && x.size() > 0)
    throw std::logic_error("Backend::smooth: x and avg alias");
  timed(*this, "smooth", [&] { do_smooth(x, gamma, avg); });
}

void Backend::fill(const MatrixView& X, float v) {
  check_device(*this, "fill", "X", X);
  timed(*this, "fill", [&] { do_fill(X, v); });
}

void Backend::scale(const MatrixView& X, float alpha) {
  check_device(*this, "scale", "X", X);
  timed(*this, "scale", [&] { do_scale(X, alpha); });
}

void Backend::pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) {
  check_count("pack_bf16", "n", n);
  timed(*this, "pack_bf16", [&] { do_pack_bf16(src, n, dst); });
}

void Backend::unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) {
  check_count("unpack_bf16", "n", n);
  timed(*this, "unpack_bf16", [&] { do_unpack_bf16(src, n, dst); });
}

// ---- temporal GNNs ----------------------------------------------------------------------------

namespace {

// Views that must share no element: pairwise distinct (empty views share none).
void check_distinct(const char* op,
                    std::initializer_list<std::pair<const char*, const MatrixView*>> views) {
  for (auto a = views.begin(); a != views.end(); ++a)
    for (auto b = a + 1; b != views.end(); ++b)
      if (overlap(*a->second, *b->second))
        shape_error(op, "distinct outputs and inputs",
                    {operand(a->first, *a->second), operand(b->first, *b->second)});
}

// Either the same view (in place) or no shared element.
void check_in_place_or_distinct(const char* op, const char* na, const MatrixView& a, const char* nb,
                                const MatrixView& b) {
  if (a.data == b.data && same_shape(a, b)) return;
  if (overlap(a, b)) shape_error(op, "in place or distinct", {operand(na, a), operand(nb, b)});
}

}  // namespace

void Backend::time_encode(const double* dt, std::int64_t n, const float* w, const float* b,
                          const MatrixView& out, const MatrixView& sin) {
  check_count("time_encode", "n", n);
  if (out.rows != n)
    shape_error("time_encode", "out.rows == n", {{"n", n, 1}, operand("out", out)});
  check_same(*this, "time_encode", "out", out, "sin", sin);
  check_distinct("time_encode", {{"out", &out}, {"sin", &sin}});
  timed(*this, "time_encode", [&] { do_time_encode(dt, n, w, b, out, sin); });
}

void Backend::time_encode_backward(const double* dt, const MatrixView& sin, const MatrixView& dout,
                                   float* dw, float* db) {
  check_same(*this, "time_encode_backward", "sin", sin, "dout", dout);
  timed(*this, "time_encode_backward", [&] { do_time_encode_backward(dt, sin, dout, dw, db); });
}

void Backend::gru_gates(const MatrixView& a, const MatrixView& c, const MatrixView& h,
                        const MatrixView& rzn, const MatrixView& h_out) {
  const char* op = "gru_gates";
  check_same(*this, op, "a", a, "c", c);
  check_same(*this, op, "a", a, "rzn", rzn);
  check_same(*this, op, "h", h, "h_out", h_out);
  if (a.rows != h.rows || a.cols != 3 * h.cols)
    shape_error(op, "a B x 3H and h B x H", {operand("a", a), operand("h", h)});
  check_distinct(op, {{"a", &a}, {"c", &c}, {"h", &h}, {"rzn", &rzn}, {"h_out", &h_out}});
  timed(*this, op, [&] { do_gru_gates(a, c, h, rzn, h_out); });
}

void Backend::gru_gates_backward(const MatrixView& dh_out, const MatrixView& h, const MatrixView& c,
                                 const MatrixView& rzn, const MatrixView& da, const MatrixView& dc,
                                 const MatrixView& dh) {
  const char* op = "gru_gates_backward";
  check_same(*this, op, "dh_out", dh_out, "h", h);
  check_same(*this, op, "dh_out", dh_out, "dh", dh);
  check_same(*this, op, "c", c, "rzn", rzn);
  check_same(*this, op, "c", c, "da", da);
  check_same(*this, op, "c", c, "dc", dc);
  if (c.rows != h.rows || c.cols != 3 * h.cols)
    shape_error(op, "c B x 3H and h B x H", {operand("c", c), operand("h", h)});
  check_distinct(op, {{"dh_out", &dh_out},
                      {"h", &h},
                      {"c", &c},
                      {"rzn", &rzn},
                      {"da", &da},
                      {"dc", &dc},
                      {"dh", &dh}});
  timed(*this, op, [&] { do_gru_gates_backward(dh_out, h, c, rzn, da, dc, dh); });
}

void Backend::time_projection(const MatrixView& m, const float* delta, const float* w,
                              const float* b, const MatrixView& z) {
  check_same(*this, "time_projection", "m", m, "z", z);
  check_in_place_or_distinct("time_projection", "m", m, "z", z);
  timed(*this, "time_projection", [&] { do_time_projection(m, delta, w, b, z); });
}

void Backend::time_projection_backward(const MatrixView& m, const float* delta, const float* w,
                                       const float* b, const MatrixView& dz, const MatrixView& dm,
                                       float* dw, float* db) {
  const char* op = "time_projection_backward";
  check_same(*this, op, "m", m, "dz", dz);
  check_same(*this, op, "dz", dz, "dm", dm);
  check_in_place_or_distinct(op, "dz", dz, "dm", dm);
  check_distinct(op, {{"m", &m}, {"dm", &dm}});
  timed(*this, op, [&] { do_time_projection_backward(m, delta, w, b, dz, dm, dw, db); });
}

namespace {

// What gather_rows_into and sum_rows_into both require: n rows of src's width fit into dst at
// column dst_col, both in be's memory and apart.
void check_rows_into(const Backend& be, const char* op, const MatrixView& src, std::int64_t n,
                     const MatrixView& dst, std::int64_t dst_col) {
  check_count(op, "n", n);
  check_count(op, "dst_col", dst_col);
  if (n > dst.rows || dst_col + src.cols > dst.cols)
    shape_error(op, "n <= dst.rows, dst_col + src.cols <= dst.cols",
                {operand("src", src), {"n", n, 1}, {"dst_col", dst_col, 1}, operand("dst", dst)});
  check_device(be, op, "src", src);
  check_device(be, op, "dst", dst);
  check_distinct(op, {{"src", &src}, {"dst", &dst}});
}

}  // namespace

void Backend::gather_rows_into(const MatrixView& src, const NodeId* idx, std::int64_t n,
                               const MatrixView& dst, std::int64_t dst_col) {
  const char* op = "gather_rows_into";
  check_rows_into(*this, op, src, n, dst, dst_col);
  timed(*this, op, [&] { do_gather_rows_into(src, idx, n, dst, dst_col); });
}

void Backend::scatter_add_rows_from(const MatrixView& src, std::int64_t src_col, std::int64_t width,
                                    const NodeId* idx, std::int64_t n, const MatrixView& dst) {
  const char* op = "scatter_add_rows_from";
  check_count(op, "n", n);
  check_count(op, "src_col", src_col);
  check_count(op, "width", width);
  if (n > src.rows || src_col + width > src.cols || dst.cols != width)
    shape_error(op, "n <= src.rows, src_col + width <= src.cols, dst.cols == width",
                {operand("src", src),
                 {"src_col", src_col, 1},
                 {"width", width, 1},
                 {"n", n, 1},
                 operand("dst", dst)});
  check_device(*this, op, "src", src);
  check_device(*this, op, "dst", dst);
  check_distinct(op, {{"src", &src}, {"dst", &dst}});
  timed(*this, op, [&] { do_scatter_add_rows_from(src, src_col, width, idx, n, dst); });
}

void Backend::scatter_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                           const MatrixView& dst) {
  const char* op = "scatter_rows";
  check_count(op, "n", n);
  if (src.cols != dst.cols || n > src.rows)
    shape_error(op, "n <= src.rows, src.cols == dst.cols",
                {operand("src", src), {"n", n, 1}, operand("dst", dst)});
  check_device(*this, op, "src", src);
  check_device(*this, op, "dst", dst);
  check_distinct(op, {{"src", &src}, {"dst", &dst}});
  timed(*this, op, [&] { do_scatter_rows(src, idx, n, dst); });
}

void Backend::sum_rows_into(const MatrixView& src, const std::int32_t* first,
                            const std::int32_t* rows, const std::int32_t* divisor, std::int64_t n,
                            const MatrixView& dst, std::int64_t dst_col) {
  const char* op = "sum_rows_into";
  check_rows_into(*this, op, src, n, dst, dst_col);
  timed(*this, op, [&] { do_sum_rows_into(src, first, rows, divisor, n, dst, dst_col); });
}

void Backend::spread_rows(const MatrixView& src, std::int64_t src_col, const std::int32_t* first,
                          const std::int32_t* count, std::int64_t n, const MatrixView& dst) {
  const char* op = "spread_rows";
  check_count(op, "n", n);
  check_count(op, "src_col", src_col);
  if (n > src.rows || src_col + dst.cols > src.cols)
    shape_error(op, "n <= src.rows, src_col + dst.cols <= src.cols",
                {operand("src", src), {"src_col", src_col, 1}, {"n", n, 1}, operand("dst", dst)});
  check_device(*this, op, "src", src);
  check_device(*this, op, "dst", dst);
  check_distinct(op, {{"src", &src}, {"dst", &dst}});
  timed(*this, op, [&] { do_spread_rows(src, src_col, first, count, n, dst); });
}

namespace {

// A graph-attention op's shape rule (ok) as shape_error reports it when it fails.
void check_gat(const char* op, std::initializer_list<Operand> operands, bool ok, const char* rule) {
  if (!ok) shape_error(op, rule, operands);
}

// Every view in the backend's memory.
void check_devices(const Backend& be, const char* op,
                   std::initializer_list<std::pair<const char*, const MatrixView*>> views) {
  for (const auto& [name, m] : views) check_device(be, op, name, *m);
}

Operand edges(const AttentionView& A) { return {"A", A.rows, A.cols}; }

}  // namespace

void Backend::gat_head_dots(const MatrixView& z, const MatrixView& a, const MatrixView& t) {
  const char* op = "gat_head_dots";
  check_devices(*this, op, {{"z", &z}, {"a", &a}, {"t", &t}});
  check_gat(op, {operand("z", z), operand("a", a), operand("t", t)},
            a.rows > 0 && a.cols > 0 && z.cols == a.rows * a.cols && t.rows == z.rows &&
                t.cols == a.rows && !overlap(t, z),
            "z n x H*F, a H x F, t n x H (t apart from z)");
  timed(*this, "gat_head_dots", [&] { do_gat_head_dots(z, a, t); });
}

void Backend::gat_head_dots_backward(const MatrixView& z, const MatrixView& a, const MatrixView& dt,
                                     const MatrixView& dz, const MatrixView& da) {
  const char* op = "gat_head_dots_backward";
  check_devices(*this, op, {{"z", &z}, {"a", &a}, {"dt", &dt}, {"dz", &dz}, {"da", &da}});
  check_gat(
      op,
      {operand("z", z), operand("a", a), operand("dt", dt), operand("dz", dz), operand("da", da)},
      a.rows > 0 && a.cols > 0 && z.cols == a.rows * a.cols && dt.rows == z.rows &&
          dt.cols == a.rows && dz.rows >= z.rows && dz.cols == z.cols && same_shape(da, a),
      "z n x H*F, a and da H x F, dt n x H, dz at least z's rows");
  timed(*this, "gat_head_dots_backward", [&] { do_gat_head_dots_backward(z, a, dt, dz, da); });
}

void Backend::gat_edge_softmax(const AttentionView& A, const MatrixView& el, const MatrixView& er,
                               float slope, const MatrixView& alpha) {
  const char* op = "gat_edge_softmax";
  check_devices(*this, op, {{"el", &el}, {"er", &er}, {"alpha", &alpha}});
  check_gat(op, {edges(A), operand("el", el), operand("er", er), operand("alpha", alpha)},
            el.rows == A.cols && er.rows == A.rows && alpha.rows == A.nnz && el.cols > 0 &&
                er.cols == el.cols && alpha.cols == el.cols,
            "el A.cols x H, er A.rows x H, alpha nnz x H");
  timed(*this, "gat_softmax", [&] { do_gat_edge_softmax(A, el, er, slope, alpha); });
}

void Backend::gat_edge_softmax_backward(const AttentionView& A, const MatrixView& el,
                                        const MatrixView& er, float slope, const MatrixView& alpha,
                                        const MatrixView& dalpha, const MatrixView& del,
                                        const MatrixView& der) {
  const char* op = "gat_edge_softmax_backward";
  check_devices(*this, op,
                {{"el", &el},
                 {"er", &er},
                 {"alpha", &alpha},
                 {"dalpha", &dalpha},
                 {"del", &del},
                 {"der", &der}});
  check_gat(op,
            {edges(A), operand("el", el), operand("er", er), operand("alpha", alpha),
             operand("dalpha", dalpha), operand("del", del), operand("der", der)},
            el.rows == A.cols && er.rows == A.rows && alpha.rows == A.nnz && el.cols > 0 &&
                er.cols == el.cols && alpha.cols == el.cols && same_shape(dalpha, alpha) &&
                same_shape(del, el) && same_shape(der, er) && !overlap(dalpha, alpha),
            "el and del A.cols x H, er and der A.rows x H, alpha and dalpha nnz x H, apart");
  timed(*this, "gat_softmax_backward",
        [&] { do_gat_edge_softmax_backward(A, el, er, slope, alpha, dalpha, del, der); });
}

void Backend::gat_aggregate(const AttentionView& A, const MatrixView& alpha, const MatrixView& z,
                            const MatrixView& out) {
  const char* op = "gat_aggregate";
  check_devices(*this, op, {{"alpha", &alpha}, {"z", &z}, {"out", &out}});
  check_gat(op, {edges(A), operand("alpha", alpha), operand("z", z), operand("out", out)},
            alpha.rows == A.nnz && alpha.cols > 0 && z.rows == A.cols && z.cols > 0 &&
                z.cols % alpha.cols == 0 && out.rows == A.rows && out.cols == z.cols &&
                !overlap(out, z),
            "alpha nnz x H, z A.cols x H*F, out A.rows x H*F apart from z");
  timed(*this, "gat_aggregate", [&] { do_gat_aggregate(A, alpha, z, out); });
}

void Backend::gat_aggregate_backward(const AttentionView& A, const MatrixView& alpha,
                                     const MatrixView& z, const MatrixView& dout,
                                     const MatrixView& dalpha, const MatrixView& dz) {
  const char* op = "gat_aggregate_backward";
  check_devices(*this, op,
                {{"alpha", &alpha}, {"z", &z}, {"dout", &dout}, {"dalpha", &dalpha}, {"dz", &dz}});
  check_gat(op,
            {edges(A), operand("alpha", alpha), operand("z", z), operand("dout", dout),
             operand("dalpha", dalpha), operand("dz", dz)},
            alpha.rows == A.nnz && alpha.cols > 0 && z.rows == A.cols && z.cols > 0 &&
                z.cols % alpha.cols == 0 && dout.rows == A.rows && dout.cols == z.cols &&
                same_shape(dalpha, alpha) && same_shape(dz, z) && !overlap(dz, z) &&
                !overlap(dz, dout) && (dalpha.data == alpha.data || !overlap(dalpha, alpha)),
            "alpha and dalpha nnz x H (equal or apart), z and dz A.cols x H*F apart, dout "
            "A.rows x H*F");
  timed(*this, "gat_aggregate_backward",
        [&] { do_gat_aggregate_backward(A, alpha, z, dout, dalpha, dz); });
}

void Backend::gat_edge_dropout(const AttentionView& A, const MatrixView& x, float p, PhiloxKey key,
                               const NodeId* ids) {
  const char* op = "gat_edge_dropout";
  check_device(*this, op, "x", x);
  check_gat(op, {edges(A), operand("x", x)}, x.rows == A.nnz && x.cols > 0, "x nnz x H");
  timed(*this, "dropout", [&] { do_gat_edge_dropout(A, x, p, key, ids); });
}

void Backend::elu(const MatrixView& Y) {
  check_device(*this, "elu", "Y", Y);
  timed(*this, "elu", [&] { do_elu(Y); });
}

void Backend::elu_backward(const MatrixView& Y, const MatrixView& dY, float y_scale) {
  check_same(*this, "elu_backward", "Y", Y, "dY", dY);
  timed(*this, "elu_backward", [&] { do_elu_backward(Y, dY, y_scale); });
}

namespace {

// A temporal-attention op's shape rule (ok), reported with its operands when it fails.
void check_tgat(const char* op, std::initializer_list<Operand> operands, bool ok,
                const char* rule) {
  if (!ok) shape_error(op, rule, operands);
}

// Every output apart from every other view listed (inputs and the other outputs).
void check_apart(const char* op,
                 std::initializer_list<std::pair<const char*, const MatrixView*>> outs,
                 std::initializer_list<std::pair<const char*, const MatrixView*>> all) {
  for (const auto& [no, o] : outs)
    for (const auto& [na, a] : all)
      if (o != a && overlap(*o, *a))
        shape_error(op, "outputs apart from every other operand",
                    {operand(no, *o), operand(na, *a)});
}

// The TgatView's own shapes: B x dq queries in heads, U x dq node parts, S x ds slots, P
// (heads * B) x ds; all in the backend's memory.
void check_tgat_view(const Backend& be, const char* op, const TgatView& v) {
  check_devices(be, op,
                {{"Q", &v.Q}, {"P", &v.P}, {"Kn", &v.Kn}, {"Vn", &v.Vn}, {"slots", &v.slots}});
  check_tgat(op,
             {operand("Q", v.Q),
              operand("P", v.P),
              operand("Kn", v.Kn),
              operand("Vn", v.Vn),
              operand("slots", v.slots),
              {"heads", v.heads, v.k}},
             v.heads >= 1 && v.k >= 0 && v.Q.cols % v.heads == 0 &&
                 v.P.rows == v.heads * v.Q.rows && v.P.cols == v.slots.cols &&
                 same_shape(v.Kn, v.Vn) && v.Kn.cols == v.Q.cols,
             "Q B x dq with heads | dq, P heads*B x ds, Kn and Vn U x dq, slots S x ds, k >= 0");
}

}  // namespace

void Backend::split_heads(const MatrixView& x, int heads, const MatrixView& out) {
  const char* op = "split_heads";
  check_devices(*this, op, {{"x", &x}, {"out", &out}});
  check_tgat(op, {operand("x", x), {"heads", heads, 1}, operand("out", out)},
             heads >= 1 && x.cols % heads == 0 && out.rows == heads * x.rows &&
                 out.cols == x.cols / heads && !overlap(x, out),
             "x n x heads*w, out heads*n x w, apart");
  timed(*this, op, [&] { do_split_heads(x, heads, out); });
}

void Backend::merge_heads(const MatrixView& x, int heads, const MatrixView& out, bool accumulate) {
  const char* op = "merge_heads";
  check_devices(*this, op, {{"x", &x}, {"out", &out}});
  check_tgat(op, {operand("x", x), {"heads", heads, 1}, operand("out", out)},
             heads >= 1 && out.cols % heads == 0 && x.rows == heads * out.rows &&
                 x.cols == out.cols / heads && !overlap(x, out),
             "x heads*n x w, out n x heads*w, apart");
  timed(*this, op, [&] { do_merge_heads(x, heads, out, accumulate); });
}

void Backend::copy_columns(const MatrixView& src, std::int64_t src_col, const MatrixView& dst,
                           std::int64_t dst_col, std::int64_t width, bool accumulate) {
  const char* op = "copy_columns";
  check_devices(*this, op, {{"src", &src}, {"dst", &dst}});
  check_tgat(op,
             {operand("src", src),
              operand("dst", dst),
              {"src_col, dst_col", src_col, dst_col},
              {"width", width, 1}},
             src.rows == dst.rows && width >= 0 && src_col >= 0 && dst_col >= 0 &&
                 src_col + width <= src.cols && dst_col + width <= dst.cols && !overlap(src, dst),
             "equal rows, both column ranges inside their views, src and dst apart");
  timed(*this, op, [&] { do_copy_columns(src, src_col, dst, dst_col, width, accumulate); });
}

void Backend::mask_rows(const MatrixView& X, const std::int32_t* keep) {
  check_device(*this, "mask_rows", "X", X);
  timed(*this, "mask_rows", [&] { do_mask_rows(X, keep); });
}

void Backend::tgat_attend(const TgatView& v, const float* bv, const MatrixView& alpha,
                          const MatrixView& ctx, const MatrixView& sbar) {
  const char* op = "tgat_attend";
  check_tgat_view(*this, op, v);
  check_devices(*this, op, {{"alpha", &alpha}, {"ctx", &ctx}, {"sbar", &sbar}});
  check_tgat(
      op, {operand("Q", v.Q), operand("alpha", alpha), operand("ctx", ctx), operand("sbar", sbar)},
      alpha.rows == v.Q.rows * v.heads && alpha.cols == v.k && same_shape(ctx, v.Q) &&
          same_shape(sbar, v.P),
      "alpha B*heads x k, ctx like Q, sbar like P");
  check_apart(op, {{"alpha", &alpha}, {"ctx", &ctx}, {"sbar", &sbar}},
              {{"Q", &v.Q},
               {"P", &v.P},
               {"Kn", &v.Kn},
               {"Vn", &v.Vn},
               {"slots", &v.slots},
               {"alpha", &alpha},
               {"ctx", &ctx},
               {"sbar", &sbar}});
  timed(*this, op, [&] { do_tgat_attend(v, bv, alpha, ctx, sbar); });
}

void Backend::tgat_attend_backward(const TgatView& v, const MatrixView& alpha,
                                   const MatrixView& dctx, const MatrixView& dsbar,
                                   const MatrixView& dQ, const MatrixView& dK, const MatrixView& dV,
                                   const MatrixView& dP, const MatrixView& dslots, float* dbk) {
  const char* op = "tgat_attend_backward";
  check_tgat_view(*this, op, v);
  check_devices(*this, op,
                {{"alpha", &alpha},
                 {"dctx", &dctx},
                 {"dsbar", &dsbar},
                 {"dQ", &dQ},
                 {"dK", &dK},
                 {"dV", &dV},
                 {"dP", &dP},
                 {"dslots", &dslots}});
  check_tgat(op,
             {operand("Q", v.Q), operand("slots", v.slots), operand("alpha", alpha),
              operand("dctx", dctx), operand("dsbar", dsbar), operand("dQ", dQ), operand("dK", dK),
              operand("dV", dV), operand("dP", dP), operand("dslots", dslots)},
             alpha.rows == v.Q.rows * v.heads && alpha.cols == v.k && same_shape(dctx, v.Q) &&
                 same_shape(dsbar, v.P) && same_shape(dQ, v.Q) && dK.rows == v.slots.rows &&
                 dK.cols == v.Q.cols && same_shape(dV, dK) && same_shape(dP, v.P) &&
                 dslots.rows == v.Q.rows * v.k && dslots.cols == v.slots.cols,
             "alpha B*heads x k, dctx and dQ like Q, dsbar and dP like P, dK and dV S x dq, "
             "dslots B*k x ds");
  check_apart(op, {{"dQ", &dQ}, {"dK", &dK}, {"dV", &dV}, {"dP", &dP}, {"dslots", &dslots}},
              {{"Q", &v.Q},
               {"P", &v.P},
               {"Kn", &v.Kn},
               {"Vn", &v.Vn},
               {"slots", &v.slots},
               {"alpha", &alpha},
               {"dctx", &dctx},
               {"dsbar", &dsbar},
               {"dQ", &dQ},
               {"dK", &dK},
               {"dV", &dV},
               {"dP", &dP},
               {"dslots", &dslots}});
  timed(*this, op,
        [&] { do_tgat_attend_backward(v, alpha, dctx, dsbar, dQ, dK, dV, dP, dslots, dbk); });
}

// A backend without attention kernels says so, as a user-facing error.
namespace {
[[noreturn]] void no_gat(const Backend& be) {
  throw SystemError(std::string("the ") + be.name() + " backend has no graph-attention kernels");
}
}  // namespace

void Backend::do_gat_head_dots(const MatrixView&, const MatrixView&, const MatrixView&) {
  no_gat(*this);
}
void Backend::do_gat_head_dots_backward(const MatrixView&, const MatrixView&, const MatrixView&,
                                        const MatrixView&, const MatrixView&) {
  no_gat(*this);
}
void Backend::do_gat_edge_softmax(const AttentionView&, const MatrixView&, const MatrixView&, float,
                                  const MatrixView&) {
  no_gat(*this);
}
void Backend::do_gat_edge_softmax_backward(const AttentionView&, const MatrixView&,
                                           const MatrixView&, float, const MatrixView&,
                                           const MatrixView&, const MatrixView&,
                                           const MatrixView&) {
  no_gat(*this);
}
void Backend::do_gat_aggregate(const AttentionView&, const MatrixView&, const MatrixView&,
                               const MatrixView&) {
  no_gat(*this);
}
void Backend::do_gat_aggregate_backward(const AttentionView&, const MatrixView&, const MatrixView&,
                                        const MatrixView&, const MatrixView&, const MatrixView&) {
  no_gat(*this);
}
void Backend::do_gat_edge_dropout(const AttentionView&, const MatrixView&, float, PhiloxKey,
                                  const NodeId*) {
  no_gat(*this);
}
void Backend::do_elu(const MatrixView&) { no_gat(*this); }
void Backend::do_elu_backward(const MatrixView&, const MatrixView&, float) { no_gat(*this); }

// A backend without temporal-attention kernels says so, as a user-facing error.
namespace {
[[noreturn]] void no_tgat(const Backend& be) {
  throw SystemError(std::string("the ") + be.name() + " backend has no temporal-attention kernels");
}
}  // namespace

void Backend::do_split_heads(const MatrixView&, int, const MatrixView&) { no_tgat(*this); }
void Backend::do_merge_heads(const MatrixView&, int, const MatrixView&, bool) { no_tgat(*this); }
void Backend::do_copy_columns(const MatrixView&, std::int64_t, const MatrixView&, std::int64_t,
                              std::int64_t, bool) {
  no_tgat(*this);
}
void Backend::do_mask_rows(const MatrixView&, const std::int32_t*) { no_tgat(*this); }
void Backend::do_tgat_attend(const TgatView&, const float*, const MatrixView&, const MatrixView&,
                             const MatrixView&) {
  no_tgat(*this);
}
void Backend::do_tgat_attend_backward(const TgatView&, const MatrixView&, const MatrixView&,
                                      const MatrixView&, const MatrixView&, const MatrixView&,
                                      const MatrixView&, const MatrixView&, const MatrixView&,
                                      float*) {
  no_tgat(*this);
}

}  // namespace halo

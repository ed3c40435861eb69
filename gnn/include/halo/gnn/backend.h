// The Backend: every kernel a layer needs, behind one interface with a CPU (OpenMP + OpenBLAS)
// implementation and a CUDA one (cuSPARSE, cuBLAS, own kernels) in sibling files. Layers are
// written once against it. Every op states shapes, aliasing and determinism in its comment; CPU
// ops are deterministic for a fixed thread count (no atomics, fixed reduction orders).
//
// Memory spaces. Matrices, and every pointer that belongs to a parameter or the graph (bias,
// gamma/beta, column_sums' out, Adam's arrays, labels, row and index lists, dropout row ids,
// sparse operators) live in the backend's memory (device memory for CUDA). Per-column statistics
// the caller computes with (mean, inv_std, mean_dy, mean_dy_xhat) and every double sum or
// returned scalar are host memory: they are a few hundred numbers, reduced across ranks on the
// host.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "halo/gnn/matrix.h"
#include "halo/gnn/rng.h"
#include "halo/gnn/sparse.h"
#include "halo/graph/types.h"

namespace halo {

struct AttentionView;  // attention.h (not included: CUDA sources compile this header)
struct TgatView;       // tgat_view.h

struct AdamStep {
  float lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.f;  // L2 added to the gradient, as torch.optim.Adam does
  std::int64_t step = 1;     // 1-based, for bias correction
};

// One parameter tensor of Backend::adam_all: n floats of value p, gradient g, moments m and v.
struct AdamTensor {
  float* p = nullptr;
  const float* g = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  std::int64_t n = 0;
};

// Arithmetic of the matrix products, the one place a backend may trade precision for speed, and
// only when asked: fp32 everywhere by default. tf32 (CUDA tensor cores: 10-bit mantissa inputs)
// and bf16 (8-bit mantissa inputs) round the inputs of a product and sum in float32, as torch's
// set_float32_matmul_precision("high" / "medium") allows: GEMM inputs (AVX-512 BF16 on the CPU,
// tensor cores on CUDA) and, on the CPU in bf16, the dense input of spmm_consume. A backend may
// compute more precisely than asked, never less. Everything else stays float32.
enum class MatmulPrecision { kFp32, kTf32, kBf16 };
// "fp32" | "tf32" | "bf16"; throws ParamError naming the flag otherwise.
MatmulPrecision parse_matmul_precision(std::string_view s);
// The --matmul-precision spelling of p, as logs and checkpoint keys record it.
const char* to_string(MatmulPrecision p);

// A dropout's keep mask as bits, so that backward replays its forward's mask instead of running
// the RNG again: element (r, c) is kept iff bit c % 64 of words[r * ceil(cols / 64) + c / 64] is
// set. Purely a cache of what (p, key, row_ids) give: the first op handed it with filled == false
// records the mask and sets filled, later ones read it, and a backend may ignore it altogether
// (host memory; the CUDA backend recomputes). The owner clears filled when the key changes.
struct KeepBits {
  std::uint64_t* words = nullptr;
  bool filled = false;
};

// Each op is a non-virtual public function that checks what its comment states about shapes,
// aliasing and memory space (O(1); a violation is a bug in the caller and throws
// std::logic_error naming the op and the shapes), times itself when the calling thread has an
// OpProfile (op_profile.h, for --profile), and calls the private virtual do_<op> a backend
// implements. So a backend's do_ functions may take the checked shapes for granted, and adding
// an op means one public function here and in backend.cc, plus its do_ in each backend. An op
// that runs another op (a default composing others, gemm filling C) is timed once, as itself.
class Backend {
 public:
  virtual ~Backend() = default;
  // Where this backend's matrices live; every non-empty view an op takes must be there.
  virtual Device device() const = 0;
  // "cpu" | "cuda", as logs and messages name it.
  virtual const char* name() const = 0;

  // Y = A X. A: r x k, X: k x f, Y: r x f (overwritten). Y must not alias X.
  void spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y);
  // spmm when X is dead afterwards: a backend may overwrite X. With bf16 precision the CPU rounds
  // X to bfloat16 in place and gathers half the bytes (sums stay float32); the default is spmm.
  void spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y);
  // Sets the arithmetic of the products from now on (process-wide for the shared backends);
  // throws SystemError naming the reason when this backend or machine cannot compute in it.
  virtual void set_matmul_precision(MatmulPrecision p) = 0;
  // The arithmetic of the products, as last set (fp32 until then).
  virtual MatmulPrecision matmul_precision() const = 0;
  // Waits for the ops queued so far, for timing them (--profile): a GPU backend queues work on
  // a stream and returns; the CPU's ops are done when they return (nothing to wait for).
  virtual void wait_for_queued_work() {}
  // The SpMM calls made since the last take, counted by the kernel that ran and why ("alg3",
  // "own (width 1)", ...; spmm_policy.h), then cleared. Empty for a backend with one kernel.
  virtual std::map<std::string, std::int64_t> take_spmm_kernel_counts() { return {}; }
  // C = alpha op(A) op(B) + beta C, op = transpose when ta / tb, in matmul_precision(). C must
  // not alias A or B.
  void gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
            const MatrixView& C);
  // Y[r, :] += b for every row.
  void add_bias(const MatrixView& Y, const float* b);
  // out[c] = sum over rows of X[r, c] (overwrites out; fixed summation order).
  void column_sums(const MatrixView& X, float* out);
  // Y = max(Y, 0) in place.
  void relu(const MatrixView& Y);
  // dY[r, c] = 0 where Y[r, c] <= 0 (Y is relu's output; same shape).
  void relu_backward(const MatrixView& Y, const MatrixView& dY);
  // dY[r, c] = 0 where xhat[r, c] * gamma[c] + beta[c] <= 0: ReLU's backward behind batch norm
  // from x-hat alone, so the layer's output need not be kept. The same float expression as
  // batch_norm_apply's Y, so the mask is exactly relu_backward's on that Y. Same shapes.
  void bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                        const MatrixView& dY);
  // Y[r, c] *= keep / (1 - p), keep = philox_uniform(key, id(r), c) >= p, id(r) = row_ids[r]
  // (global node id) or r when row_ids is null. Applying it to dY is its backward.
  void dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids);
  // Partial column sums of X and X^2 in double (reduced across ranks for batch norm).
  void column_moments(const MatrixView& X, double* sum, double* sumsq);
  // xhat = (X - mean) * inv_std; Y = xhat * gamma + beta (X, xhat, Y of one shape). xhat may be
  // null (inference).
  void batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                        const float* gamma, const float* beta, const MatrixView* xhat,
                        const MatrixView& Y);
  // Fused forward of a batch-norm layer's activation: batch_norm_apply, then relu(Y), then
  // dropout(Y, p, key, row_ids) (none when p = 0), bit for bit the three ops in that order. The
  // default composes them; a backend overrides it to make one pass over the rows.
  void batch_norm_relu_dropout(const MatrixView& X, const float* mean, const float* inv_std,
                               const float* gamma, const float* beta, const MatrixView* xhat,
                               const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids,
                               KeepBits* bits = nullptr);
  // Its backward up to batch norm's sums: dropout(dY, p, key, row_ids), bn_relu_backward, then
  // batch_norm_grad_sums, bit for bit those ops in that order; overridable as one pass.
  void batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                        const float* beta, float p, PhiloxKey key,
                                        const NodeId* row_ids, const MatrixView& dY, double* sum_dy,
                                        double* sum_dy_xhat, KeepBits* bits = nullptr);
  // Partial sums over rows of dY and dY * xhat (same shape), in double.
  void batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat, double* sum_dy,
                            double* sum_dy_xhat);
  // dX = gamma * inv_std * (dY - mean_dy - xhat * mean_dy_xhat) (one shape); dX may alias dY.
  void batch_norm_backward(const MatrixView& dY, const MatrixView& xhat, const float* gamma,
                           const float* inv_std, const float* mean_dy, const float* mean_dy_xhat,
                           const MatrixView& dX);
  // Softmax cross-entropy over the listed rows with int labels (rows labelled -1 skipped):
  // returns the summed loss; dlogits (all rows, logits' shape) = (softmax - onehot) / denom on
  // listed rows, 0 elsewhere. Also returns through *counted the number of rows that had a label.
  double softmax_xent(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                      std::int64_t nrows, double denom, const MatrixView& dlogits,
                      std::int64_t* counted);
  // Binary cross-entropy with logits over listed rows, labels rows x tasks (0/1, -1 missing):
  // returns the summed loss over labelled entries; dlogits (logits' shape) = (sigmoid - y) /
  // denom there.
  double bce_logits(const MatrixView& logits, const std::int32_t* labels, const NodeId* rows,
                    std::int64_t nrows, double denom, const MatrixView& dlogits,
                    std::int64_t* counted);
  // One Adam step on n parameters (p, m, v updated in place).
  void adam(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamStep& s);
  // adam on each of count tensors with the same step, the same bits as adam on each in turn: a
  // model's whole update as one op (the CPU runs it in one parallel region, not one per tensor).
  // Tensors must not overlap.
  void adam_all(const AdamTensor* t, std::size_t count, const AdamStep& s);
  // dst[i, :] = src[idx[i], :] for i < n (n <= dst.rows, equal widths).
  void gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n, const MatrixView& dst);
  // dst[idx[i], :] += src[i, :] for i < n, in order (idx may repeat; n <= src.rows, equal
  // widths).
  void scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                        const MatrixView& dst);
  // dst += src (same shape).
  void add(const MatrixView& src, const MatrixView& dst);
  // dst = src (same shape).
  void copy(const MatrixView& src, const MatrixView& dst);
  // avg = gamma * avg + (1 - gamma) * x, elementwise (same shape): one step of an exponential
  // moving average (smoothed stale halo rows and gradients), in float; deterministic (the GPU
  // may differ from the CPU by a rounding: it may fuse a product into the sum).
  void smooth(const MatrixView& x, float gamma, const MatrixView& avg);
  // Every element of X = v.
  void fill(const MatrixView& X, float v);
  // X *= alpha, element by element (the float product, the same bits on every backend).
  void scale(const MatrixView& X, float alpha);
  // dst[i] = to_bf16(src[i]) for i < n (bf16.h: nearest even, NaN kept), both in this backend's
  // memory: halo rows are narrowed where they live, so a GPU stages half the bytes.
  void pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst);
  // dst[i] = from_bf16(src[i]) for i < n (exact), both in this backend's memory.
  void unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst);

  // Temporal GNNs (TGN, JODIE; temporal/layers.h states the maths): the element-wise parts of
  // the time encoder, the GRU memory updater and JODIE's projection, and row moves between a
  // batch and the node memory. Every pointer is in this backend's memory (dt, delta, w, b, the
  // gradients, the index lists). Deterministic: no atomics; sums in a fixed order.
  // out (n x d) = cos(w[k] dt[i] + b[k]) by cos_sin (temporal/cos_sin.h, the argument in
  // double), sin (n x d) = the sines, kept for backward. w, b: d floats; out and sin distinct.
  void time_encode(const double* dt, std::int64_t n, const float* w, const float* b,
                   const MatrixView& out, const MatrixView& sin);
  // dw[k] += sum_i -sin[i, k] dout[i, k] dt[i], db[k] += sum_i -sin[i, k] dout[i, k] (sin and
  // dout n x d), in double over a fixed partition of the rows: the CPU's threads (each partial
  // added to the float gradient in thread order), or the GPU's row blocks (combined, added once).
  void time_encode_backward(const double* dt, const MatrixView& sin, const MatrixView& dout,
                            float* dw, float* db);
  // GRU gates from a = x W + b_x and c = h U + b_h (B x 3H, gate blocks r | z | n) and h (B x H):
  // rzn (B x 3H) = [r | z | n], r = σ(a_r + c_r), z = σ(a_z + c_z), n = tanh(a_n + r c_n),
  // h_out (B x H) = (1 - z) n + z h. Outputs distinct from the inputs and from each other.
  void gru_gates(const MatrixView& a, const MatrixView& c, const MatrixView& h,
                 const MatrixView& rzn, const MatrixView& h_out);
  // Its backward from dh_out (B x H): da, dc (B x 3H) = d(loss)/d(a), d(loss)/d(c) and dh
  // (B x H) = dh_out z, the direct path only (the caller adds dc U^T). Outputs distinct.
  void gru_gates_backward(const MatrixView& dh_out, const MatrixView& h, const MatrixView& c,
                          const MatrixView& rzn, const MatrixView& da, const MatrixView& dc,
                          const MatrixView& dh);
  // JODIE's time projection: z[i, c] = m[i, c] (1 + w[c] delta[i] + b[c]) (m, z: n x d; delta:
  // n floats; w, b: d floats). z may be m itself (in place), else distinct.
  void time_projection(const MatrixView& m, const float* delta, const float* w, const float* b,
                       const MatrixView& z);
  // Its backward: dm = dz (1 + w delta + b) (dm may be dz itself); dw[c] += dz m delta and
  // db[c] += dz m, added to the float gradients one row at a time in row order (TGN's loop).
  void time_projection_backward(const MatrixView& m, const float* delta, const float* w,
                                const float* b, const MatrixView& dz, const MatrixView& dm,
                                float* dw, float* db);
  // dst[i, dst_col + c] = src[idx[i], c] for i < n, c < src.cols (n <= dst.rows, dst_col +
  // src.cols <= dst.cols); a row with idx[i] < 0 is left as it was, so two calls can fill one
  // batch from two sources. dst distinct from src.
  void gather_rows_into(const MatrixView& src, const NodeId* idx, std::int64_t n,
                        const MatrixView& dst, std::int64_t dst_col);
  // dst[idx[i], :] += src[i, src_col .. src_col + width) for i < n in index order (idx may
  // repeat; idx[i] < 0 skipped; n <= src.rows, dst.cols == width): bitwise scatter_add_rows's
  // additions on every backend. dst distinct from src.
  void scatter_add_rows_from(const MatrixView& src, std::int64_t src_col, std::int64_t width,
                             const NodeId* idx, std::int64_t n, const MatrixView& dst);
  // dst[idx[i], :] = src[i, :] for i < n (equal widths, n <= src.rows; idx[i] < 0 skipped). The
  // idx[i] >= 0 must be distinct: which of two rows sent to one destination lands is unstated.
  void scatter_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                    const MatrixView& dst);
  // TGN's message aggregation: dst[i, dst_col + c] = (src[first[i], c] + src[first[i] + 1, c]
  // + ... over rows[i] rows, summed left to right in float from the first row) * (1 / divisor[i])
  // for i < n, c < src.cols. rows null: one row each; divisor null: no scaling; rows[i] >= 1,
  // divisor[i] >= 1. dst distinct from src.
  void sum_rows_into(const MatrixView& src, const std::int32_t* first, const std::int32_t* rows,
                     const std::int32_t* divisor, std::int64_t n, const MatrixView& dst,
                     std::int64_t dst_col);
  // Its backward for a mean: dst[first[i] + m, c] = src[i, src_col + c] / count[i] for i < n,
  // m < count[i], c < dst.cols (the ranges first[i] .. first[i] + count[i] inside dst and apart;
  // count[i] >= 1). dst distinct from src.
  void spread_rows(const MatrixView& src, std::int64_t src_col, const std::int32_t* first,
                   const std::int32_t* count, std::int64_t n, const MatrixView& dst);

  // Graph attention (attention.h states the maths and the memory plan). H heads of width F: z is
  // [n x H*F], a per-head vector set [H x F], per-node terms [n x H], per-edge arrays [nnz x H];
  // A (an AttentionView) in this backend's memory. Deterministic: gathers only.
  // t = the per-head dots of z's rows with a.
  void gat_head_dots(const MatrixView& z, const MatrixView& a, const MatrixView& t);
  // dz += dt a per head; da += the sum over rows of dt z (double per head). dz like z, da like a.
  void gat_head_dots_backward(const MatrixView& z, const MatrixView& a, const MatrixView& dt,
                              const MatrixView& dz, const MatrixView& da);
  // alpha = the edge softmax over each row of LeakyReLU(el[v] + er[u]) (negative slope `slope`);
  // el [A.cols x H], er [A.rows x H], alpha [A.nnz x H].
  void gat_edge_softmax(const AttentionView& A, const MatrixView& el, const MatrixView& er,
                        float slope, const MatrixView& alpha);
  // Its backward: dalpha (in: d(alpha); out: d(score)); del and der accumulate (el's and er's
  // shapes).
  void gat_edge_softmax_backward(const AttentionView& A, const MatrixView& el, const MatrixView& er,
                                 float slope, const MatrixView& alpha, const MatrixView& dalpha,
                                 const MatrixView& del, const MatrixView& der);
  // out [A.rows x H*F] = per head, the alpha-weighted sum of the rows of z [A.cols x H*F].
  void gat_aggregate(const AttentionView& A, const MatrixView& alpha, const MatrixView& z,
                     const MatrixView& out);
  // Its backward: dz += (accumulated), then dalpha = (written; dalpha may be alpha itself).
  void gat_aggregate_backward(const AttentionView& A, const MatrixView& alpha, const MatrixView& z,
                              const MatrixView& dout, const MatrixView& dalpha,
                              const MatrixView& dz);
  // Attention dropout on x [A.nnz x H] in place, keyed by the edge's (global) node ids: ids[local]
  // for both ends, or the identity when ids is null. Applying it to d(x) is its backward.
  void gat_edge_dropout(const AttentionView& A, const MatrixView& x, float p, PhiloxKey key,
                        const NodeId* ids);
  // Y = ELU(Y) = Y > 0 ? Y : exp(Y) - 1, in place.
  void elu(const MatrixView& Y);
  // dY *= ELU's slope from its output: 1 where Y > 0, else Y * y_scale + 1. y_scale undoes a
  // dropout applied after the ELU (1 - p; 1 without dropout), whose zeros dY already has.
  void elu_backward(const MatrixView& Y, const MatrixView& dY, float y_scale);

  // TGN's temporal graph attention (temporal/layers.h states the maths; TgatView the operands).
  // CPU implementations in tgat_ops_cpu.cc, CUDA twins in tgat_ops_cuda.cu. Deterministic:
  // every output element is written by one thread in a fixed order (no atomics); the CPU's
  // are the arithmetic TemporalAttention had before these ops, bit for bit.
  // out row h * n + i = x row i's head-h columns: x n x (heads * w), out (heads * n) x w
  // (overwritten; apart from x). Also W's rows, head by head, for the per-slot folds.
  void split_heads(const MatrixView& x, int heads, const MatrixView& out);
  // Its inverse: out row i's head-h columns = (or += when accumulate) x row h * n + i; x
  // (heads * n) x w, out n x (heads * w), apart.
  void merge_heads(const MatrixView& x, int heads, const MatrixView& out, bool accumulate);
  // dst[:, dst_col + c] = (or += when accumulate) src[:, src_col + c] for c < width: equal row
  // counts, both column ranges inside their views, src and dst apart.
  void copy_columns(const MatrixView& src, std::int64_t src_col, const MatrixView& dst,
                    std::int64_t dst_col, std::int64_t width, bool accumulate);
  // Row r of X = 0 where keep[r] == 0 (keep: X.rows int32 flags, backend memory).
  void mask_rows(const MatrixView& X, const std::int32_t* keep);
  // The attention core, forward. Per query i and head h: scores s_j = (Q_h·(Kn_h[node] + bk_h)
  // + P_h·slots) / sqrt(dhd) over i's slots holding a neighbour, alpha = their softmax (float
  // exponentials, double sum), ctx_h = Σ alpha_j Vn_h[node] + bv_h, sbar_h = Σ alpha_j slots.
  // alpha (B * heads) x k (row i * heads + h, 0 on padded slots), ctx B x dq, sbar like v.P:
  // all overwritten, 0 for a query without neighbours; apart from every input. bv: dq floats.
  void tgat_attend(const TgatView& v, const float* bv, const MatrixView& alpha,
                   const MatrixView& ctx, const MatrixView& sbar);
  // Its backward from dctx (B x dq) and dsbar (like v.P): overwrites dQ (like v.Q), dK and dV
  // (S x dq, per compact row: the key's and value's node-part gradients, before summing per
  // node), dP (like v.P) and dslots ((B * k) x ds, 0 on padded slots), and adds b_k's gradient
  // to dbk (dq floats): Σ_i (Σ_j g_ij) Q_i with g the score gradients, summed in double over
  // the queries in order. Outputs apart from each other and from every input.
  void tgat_attend_backward(const TgatView& v, const MatrixView& alpha, const MatrixView& dctx,
                            const MatrixView& dsbar, const MatrixView& dQ, const MatrixView& dK,
                            const MatrixView& dV, const MatrixView& dP, const MatrixView& dslots,
                            float* dbk);

 private:
  // The ops' implementations, called once the public op's checks have passed (same arguments).
  // The defaults compose other (public) ops.
  virtual void do_spmm(const SparseView& A, const MatrixView& X, const MatrixView& Y) = 0;
  virtual void do_spmm_consume(const SparseView& A, const MatrixView& X, const MatrixView& Y) {
    spmm(A, X, Y);
  }
  virtual void do_gemm(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B,
                       float beta, const MatrixView& C) = 0;
  virtual void do_add_bias(const MatrixView& Y, const float* b) = 0;
  virtual void do_column_sums(const MatrixView& X, float* out) = 0;
  virtual void do_relu(const MatrixView& Y) = 0;
  virtual void do_relu_backward(const MatrixView& Y, const MatrixView& dY) = 0;
  virtual void do_bn_relu_backward(const MatrixView& xhat, const float* gamma, const float* beta,
                                   const MatrixView& dY) = 0;
  virtual void do_dropout(const MatrixView& Y, float p, PhiloxKey key, const NodeId* row_ids) = 0;
  virtual void do_column_moments(const MatrixView& X, double* sum, double* sumsq) = 0;
  virtual void do_batch_norm_apply(const MatrixView& X, const float* mean, const float* inv_std,
                                   const float* gamma, const float* beta, const MatrixView* xhat,
                                   const MatrixView& Y) = 0;
  virtual void do_batch_norm_relu_dropout(const MatrixView& X, const float* mean,
                                          const float* inv_std, const float* gamma,
                                          const float* beta, const MatrixView* xhat,
                                          const MatrixView& Y, float p, PhiloxKey key,
                                          const NodeId* row_ids, KeepBits* /*bits*/) {
    batch_norm_apply(X, mean, inv_std, gamma, beta, xhat, Y);
    relu(Y);
    if (p > 0.f) dropout(Y, p, key, row_ids);
  }
  virtual void do_batch_norm_relu_dropout_backward(const MatrixView& xhat, const float* gamma,
                                                   const float* beta, float p, PhiloxKey key,
                                                   const NodeId* row_ids, const MatrixView& dY,
                                                   double* sum_dy, double* sum_dy_xhat,
                                                   KeepBits* /*bits*/) {
    if (p > 0.f) dropout(dY, p, key, row_ids);
    bn_relu_backward(xhat, gamma, beta, dY);
    batch_norm_grad_sums(dY, xhat, sum_dy, sum_dy_xhat);
  }
  virtual void do_batch_norm_grad_sums(const MatrixView& dY, const MatrixView& xhat, double* sum_dy,
                                       double* sum_dy_xhat) = 0;
  virtual void do_batch_norm_backward(const MatrixView& dY, const MatrixView& xhat,
                                      const float* gamma, const float* inv_std,
                                      const float* mean_dy, const float* mean_dy_xhat,
                                      const MatrixView& dX) = 0;
  virtual double do_softmax_xent(const MatrixView& logits, const std::int32_t* labels,
                                 const NodeId* rows, std::int64_t nrows, double denom,
                                 const MatrixView& dlogits, std::int64_t* counted) = 0;
  virtual double do_bce_logits(const MatrixView& logits, const std::int32_t* labels,
                               const NodeId* rows, std::int64_t nrows, double denom,
                               const MatrixView& dlogits, std::int64_t* counted) = 0;
  virtual void do_adam(float* p, const float* g, float* m, float* v, std::int64_t n,
                       const AdamStep& s) = 0;
  virtual void do_adam_all(const AdamTensor* t, std::size_t count, const AdamStep& s) {
    for (std::size_t i = 0; i < count; ++i) adam(t[i].p, t[i].g, t[i].m, t[i].v, t[i].n, s);
  }
  virtual void do_gather_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                              const MatrixView& dst) = 0;
  virtual void do_scatter_add_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                   const MatrixView& dst) = 0;
  virtual void do_add(const MatrixView& src, const MatrixView& dst) = 0;
  virtual void do_copy(const MatrixView& src, const MatrixView& dst) = 0;
  virtual void do_smooth(const MatrixView& x, float gamma, const MatrixView& avg) = 0;
  virtual void do_fill(const MatrixView& X, float v) = 0;
  virtual void do_scale(const MatrixView& X, float alpha) = 0;
  virtual void do_pack_bf16(const float* src, std::int64_t n, std::uint16_t* dst) = 0;
  virtual void do_unpack_bf16(const std::uint16_t* src, std::int64_t n, float* dst) = 0;
  // Temporal GNNs.
  virtual void do_time_encode(const double* dt, std::int64_t n, const float* w, const float* b,
                              const MatrixView& out, const MatrixView& sin) = 0;
  virtual void do_time_encode_backward(const double* dt, const MatrixView& sin,
                                       const MatrixView& dout, float* dw, float* db) = 0;
  virtual void do_gru_gates(const MatrixView& a, const MatrixView& c, const MatrixView& h,
                            const MatrixView& rzn, const MatrixView& h_out) = 0;
  virtual void do_gru_gates_backward(const MatrixView& dh_out, const MatrixView& h,
                                     const MatrixView& c, const MatrixView& rzn,
                                     const MatrixView& da, const MatrixView& dc,
                                     const MatrixView& dh) = 0;
  virtual void do_time_projection(const MatrixView& m, const float* delta, const float* w,
                                  const float* b, const MatrixView& z) = 0;
  virtual void do_time_projection_backward(const MatrixView& m, const float* delta, const float* w,
                                           const float* b, const MatrixView& dz,
                                           const MatrixView& dm, float* dw, float* db) = 0;
  virtual void do_gather_rows_into(const MatrixView& src, const NodeId* idx, std::int64_t n,
                                   const MatrixView& dst, std::int64_t dst_col) = 0;
  virtual void do_scatter_add_rows_from(const MatrixView& src, std::int64_t src_col,
                                        std::int64_t width, const NodeId* idx, std::int64_t n,
                                        const MatrixView& dst) = 0;
  virtual void do_scatter_rows(const MatrixView& src, const NodeId* idx, std::int64_t n,
                               const MatrixView& dst) = 0;
  virtual void do_sum_rows_into(const MatrixView& src, const std::int32_t* first,
                                const std::int32_t* rows, const std::int32_t* divisor,
                                std::int64_t n, const MatrixView& dst, std::int64_t dst_col) = 0;
  virtual void do_spread_rows(const MatrixView& src, std::int64_t src_col,
                              const std::int32_t* first, const std::int32_t* count, std::int64_t n,
                              const MatrixView& dst) = 0;
  // Graph attention: a backend without these kernels throws SystemError naming itself.
  virtual void do_gat_head_dots(const MatrixView& z, const MatrixView& a, const MatrixView& t);
  virtual void do_gat_head_dots_backward(const MatrixView& z, const MatrixView& a,
                                         const MatrixView& dt, const MatrixView& dz,
                                         const MatrixView& da);
  virtual void do_gat_edge_softmax(const AttentionView& A, const MatrixView& el,
                                   const MatrixView& er, float slope, const MatrixView& alpha);
  virtual void do_gat_edge_softmax_backward(const AttentionView& A, const MatrixView& el,
                                            const MatrixView& er, float slope,
                                            const MatrixView& alpha, const MatrixView& dalpha,
                                            const MatrixView& del, const MatrixView& der);
  virtual void do_gat_aggregate(const AttentionView& A, const MatrixView& alpha,
                                const MatrixView& z, const MatrixView& out);
  virtual void do_gat_aggregate_backward(const AttentionView& A, const MatrixView& alpha,
                                         const MatrixView& z, const MatrixView& dout,
                                         const MatrixView& dalpha, const MatrixView& dz);
  virtual void do_gat_edge_dropout(const AttentionView& A, const MatrixView& x, float p,
                                   PhiloxKey key, const NodeId* ids);
  virtual void do_elu(const MatrixView& Y);
  virtual void do_elu_backward(const MatrixView& Y, const MatrixView& dY, float y_scale);
  // TGN's temporal attention: a backend without these kernels throws SystemError naming itself.
  virtual void do_split_heads(const MatrixView& x, int heads, const MatrixView& out);
  virtual void do_merge_heads(const MatrixView& x, int heads, const MatrixView& out,
                              bool accumulate);
  virtual void do_copy_columns(const MatrixView& src, std::int64_t src_col, const MatrixView& dst,
                               std::int64_t dst_col, std::int64_t width, bool accumulate);
  virtual void do_mask_rows(const MatrixView& X, const std::int32_t* keep);
  virtual void do_tgat_attend(const TgatView& v, const float* bv, const MatrixView& alpha,
                              const MatrixView& ctx, const MatrixView& sbar);
  virtual void do_tgat_attend_backward(const TgatView& v, const MatrixView& alpha,
                                       const MatrixView& dctx, const MatrixView& dsbar,
                                       const MatrixView& dQ, const MatrixView& dK,
                                       const MatrixView& dV, const MatrixView& dP,
                                       const MatrixView& dslots, float* dbk);
};

// The CPU backend (process-wide; thread count from OpenMP).
Backend& cpu_backend();
// The CUDA backend on the current device (process-wide, one stream); throws SystemError naming
// the reason when halo was built without CUDA or no GPU is visible.
Backend& cuda_backend();

}  // namespace halo

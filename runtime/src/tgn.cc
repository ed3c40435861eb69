// TGN training and evaluation (see tgn.h). One batch, as the paper and its code do it:
//   1. the nodes that received messages in earlier batches update their memory with the GRU
//      (differentiable in this batch; detached afterwards);
//   2. sources, destinations and negatives are embedded by temporal attention over their k most
//      recent neighbours among events strictly before the event's own time (TGN's protocol; an
//      event never sees itself or anything later), or with --neighbors-before batch among
//      events before the batch (a batch never sees its own events);
//   3. the MLP scores (src, dst) and (src, negative); BCE; backward; Adam;
//   4. the updated memory is kept, and this batch's events become the stored messages ("last"
//      aggregator: a node's latest event wins), to be used by the next batch.
#include "halo/runtime/tgn.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <numeric>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <unordered_set>

#include "halo/gnn/backend.h"
#include "halo/gnn/metrics.h"
#include "halo/gnn/rng.h"
#include "halo/gnn/temporal/layers.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/graph/staging.h"
#include "halo/runtime/checkpoint.h"
#include "halo/runtime/comm.h"

namespace halo {
namespace fs = std::filesystem;
using json = nlohmann::json;

void TgnOptions::check() const {
  if (model != "tgn" && model != "jodie" && model != "edgebank")
    throw ParamError("unknown --model '" + model + "' (expected tgn, jodie or edgebank)");
  if (embedding != "attn" && embedding != "identity" && embedding != "time")
    throw ParamError("unknown --embedding '" + embedding + "' (expected attn, identity or time)");
  if (memory_dim < 1 || embed_dim < 1 || time_dim < 1) throw ParamError("--memory-dim, --embed-dim, --time-dim must be >= 1");
  if (neighbors < 1) throw ParamError("--neighbors must be at least 1");
  if (neighbors_before != "event" && neighbors_before != "batch")
    throw ParamError("unknown --neighbors-before '" + neighbors_before + "' (expected event or batch)");
  if (batch_size < 1) throw ParamError("--batch-size must be at least 1");
  if (epochs < 1) throw ParamError("--epochs must be at least 1");
  if (!(lr > 0)) throw ParamError("--lr must be positive");
  if (patience < 1) throw ParamError("--patience must be at least 1");
  if (max_train_events < 0) throw ParamError("--max-train-events must be >= 0");
  if (eval_negatives < 0) throw ParamError("--eval-negatives must be >= 0");
  if (aggregator != "last" && aggregator != "mean")
    throw ParamError("unknown --aggregator '" + aggregator + "' (expected last or mean)");
  if (parallel != "exact" && parallel != "segments")
    throw ParamError("unknown --parallel '" + parallel + "' (expected exact or segments)");
  if ((memory_dim + time_dim) % heads != 0) throw ParamError("memory-dim + time-dim must be a multiple of the 2 heads");
}

json TgnSummary::to_json() const {
  return {{"type", "summary"},          {"valid_ap", valid_ap},
          {"test_ap", test_ap},         {"test_auc", test_auc},
          {"test_inductive_ap", test_inductive_ap}, {"test_inductive_auc", test_inductive_auc},
          {"test_ap_pooled", test_ap_pooled}, {"test_inductive_ap_pooled", test_inductive_ap_pooled},
          {"best_epoch", best_epoch},   {"events_per_s", events_per_s},
          {"peak_rss_mb", peak_rss_mb}, {"ranks", ranks}, {"test_mrr", test_mrr}};
}

namespace {

struct Stream {
  std::int64_t nodes = 0, events = 0, de = 0;
  const NodeId *src = nullptr, *dst = nullptr;
  const double* time = nullptr;
  const float* efeat = nullptr;  // events x de, or null
};

// The options with --model jodie spelled out (TGN with the time-projection embedding).
TgnOptions resolved(const TgnOptions& o) {
  TgnOptions r = o;
  if (r.model == "jodie") r.embedding = "time";
  return r;
}

// One uniform negative destination per event: fixed for evaluation (every model and epoch sees
// the same), drawn afresh each training epoch.
NodeId negative(std::uint64_t seed, std::uint64_t stream, std::int64_t event, std::int64_t nodes) {
  std::uint32_t c[4] = {std::uint32_t(event), std::uint32_t(std::uint64_t(event) >> 32), 0x6e65u, 0};
  philox4x32(philox_key(seed, kStreamDropout + (1ull << 39) + stream), c);
  return NodeId(((std::uint64_t(c[0]) << 32) | c[1]) % std::uint64_t(nodes));
}

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
  void add(float pos, float neg, bool inductive) {
    s.insert(s.end(), {pos, neg});
    y.insert(y.end(), {1, 0});
    if (inductive) {
      si.insert(si.end(), {pos, neg});
      yi.insert(yi.end(), {1, 0});
    }
  }
  template <class Metric>
  double batch_mean(const std::vector<float>& sc, const std::vector<std::int32_t>& lab, Metric metric) const {
    const std::int64_t n = std::int64_t(sc.size()), step = 2 * batch;
    double sum = 0;
    std::int64_t count = 0;
    for (std::int64_t b = 0; b < n; b += step, ++count)
      sum += metric(sc.data() + b, lab.data() + b, std::min(step, n - b));
    return count ? sum / double(count) : 0.0;
  }
  static double ap_of(const float* sc, const std::int32_t* lab, std::int64_t n) { return average_precision(sc, lab, n); }
  static double auc_of(const float* sc, const std::int32_t* lab, std::int64_t n) { return rocauc(sc, lab, n, 1); }
  double ap() const { return batch_mean(s, y, ap_of); }
  double auc() const { return batch_mean(s, y, auc_of); }
  double ap_ind() const { return batch_mean(si, yi, ap_of); }
  double auc_ind() const { return batch_mean(si, yi, auc_of); }
  double ap_pooled() const { return ap_of(s.data(), y.data(), std::int64_t(s.size())); }
  double ap_ind_pooled() const { return ap_of(si.data(), yi.data(), std::int64_t(si.size())); }
};

Param make(std::int64_t r, std::int64_t c, const char* name) {
  Param p;
  p.name = name;
  p.value = Matrix(r, c);
  p.grad = Matrix(r, c);
  p.m = Matrix(r, c);
  p.v = Matrix(r, c);
  return p;
}

class Tgn {
 public:
  // comm: the ranks that share every batch (null: this process alone).
  Tgn(const Stream& s, const TgnOptions& o, Communicator* comm = nullptr)
      : s_(s), o_(o), comm_(comm), dm_(o.memory_dim), dt_(o.time_dim), de_(s.de),
        dz_(o.embedding == "attn" ? o.embed_dim : o.memory_dim),
        time_(o.time_dim), gru_(2 * dm_ + de_ + dt_, dm_, o.seed, 1),
        attn_(dm_, dm_ + dt_, dm_ + de_ + dt_, dz_, o.heads, o.seed, 2),
        w1_(make(2 * dz_, dz_, "pred.w1")), b1_(make(1, dz_, "pred.b1")), w2_(make(dz_, 1, "pred.w2")),
        b2_(make(1, 1, "pred.b2")), tw_(make(1, dm_, "time_proj.w")), tb_(make(1, dm_, "time_proj.b")) {
    mean_ = o.aggregator == "mean";
    // The time projection's gaps are standardised by the stream's own statistics of the time
    // between a source's consecutive events (as TGN's JODIE embedding does).
    std::vector<double> seen(static_cast<std::size_t>(s.nodes), -1.0);
    double sum = 0, sq = 0;
    std::int64_t n = 0;
    for (std::int64_t e = 0; e < s.events; ++e) {
      const double prev = seen[std::size_t(s.src[e])];
      if (prev >= 0) {
        const double d = s.time[e] - prev;
        sum += d;
        sq += d * d;
        ++n;
      }
      seen[std::size_t(s.src[e])] = s.time[e];
    }
    shift_mean_ = n ? sum / double(n) : 0.0;
    shift_std_ = n ? std::sqrt(std::max(0.0, sq / double(n) - shift_mean_ * shift_mean_)) : 1.0;
    if (!(shift_std_ > 0)) shift_std_ = 1.0;
    const PhiloxKey key = philox_key(o.seed, kStreamInit + 3);
    auto init = [&](Param& p, std::uint64_t off) {
      const float bound = float(1.0 / std::sqrt(double(p.value.rows())));
      for (std::int64_t i = 0; i < p.value.rows(); ++i)
        for (std::int64_t j = 0; j < p.value.cols(); ++j)
          p.value.at(i, j) = (2.f * philox_uniform(key, std::uint64_t(i) + off, std::uint32_t(j)) - 1.f) * bound;
    };
    init(w1_, 0);
    init(w2_, 1u << 20);
    reset();
  }

  // The trained parameters. The time encoding's frequencies stay at TGN's initial geometric
  // ladder unless asked: their gradients scale with raw time gaps (seconds, up to 1e6+), so Adam's
  // fixed-size steps turn slow frequencies into fast ones within an epoch and the encoding into
  // noise (measured on UCI: validation AP swings between 0.48 and 0.74 over 8 epochs with them
  // learned, 0.84 steady with them fixed; GraphMixer, Cong et al. 2023, fixes them too).
  std::vector<Param*> params() {
    std::vector<Param*> out = time_.params();
    if (!o_.learn_time_frequencies) out.erase(out.begin());  // time.w
    for (Param* p : gru_.params()) out.push_back(p);
    if (o_.embedding == "attn")
      for (Param* p : attn_.params()) out.push_back(p);
    if (o_.embedding == "time")
      for (Param* p : {&tw_, &tb_}) out.push_back(p);
    for (Param* p : {&w1_, &b1_, &w2_, &b2_}) out.push_back(p);
    return out;
  }

  // This rank's share of a batch of n events: [slice_begin(n), slice_begin(n) + slice_size(n)).
  // With independent memories (segments) every rank takes its whole batch.
  std::int64_t slice_begin(std::int64_t n) const {
    return comm_ && !independent_ ? n * comm_->rank() / comm_->size() : 0;
  }
  std::int64_t slice_size(std::int64_t n) const {
    return comm_ && !independent_ ? n * (comm_->rank() + 1) / comm_->size() - slice_begin(n) : n;
  }
  // Independent memories: each rank trains on its own batches with its own memory (the
  // gradients are still averaged, so the parameters stay identical), and sync_state() makes
  // every replica rank root's before the exact, sliced evaluation.
  void set_independent(bool on) { independent_ = on; }

  // Sums (exact mode) or averages (independent memories) every gradient and the loss across
  // ranks in one all-reduce; nothing on one rank.
  void reduce(double* loss) {
    if (!comm_ || comm_->size() == 1) return;
    std::int64_t n = 0;
    for (Param* p : params()) n += p->grad.size();
    grads_.resize(std::size_t(n + 1));
    n = 0;
    for (Param* p : params()) {
      std::copy_n(p->grad.data(), p->grad.size(), grads_.data() + n);
      n += p->grad.size();
    }
    grads_[std::size_t(n)] = float(*loss);
    comm_->allreduce(grads_.data(), n + 1);
    const float scale = independent_ ? 1.f / float(comm_->size()) : 1.f;
    n = 0;
    for (Param* p : params()) {
      for (std::int64_t i = 0; i < p->grad.size(); ++i) p->grad.data()[i] = grads_[std::size_t(n + i)] * scale;
      n += p->grad.size();
    }
    *loss = double(grads_[std::size_t(n)]) * double(scale);
  }

  // The all-reduce and the Adam step every rank takes together.
  void reduce_and_step(Backend& be, std::int64_t step, double* loss) {
    reduce(loss);
    for (Param* p : params()) {
      AdamStep a;
      a.lr = o_.lr;
      a.step = step;
      be.adam(p->value.data(), p->grad.data(), p->m.data(), p->v.data(), p->value.size(), a);
    }
  }

  // A step for a rank with no batch left in its segment: zero gradients into the same
  // all-reduce, so every rank takes the same Adam step. Returns the step's all-reduced loss
  // (the other ranks' mean), which every rank checks alike.
  double empty_step(Backend& be, std::int64_t step) {
    for (Param* p : params()) p->grad.fill(0.f);
    double loss = 0;
    reduce_and_step(be, step, &loss);
    return loss;
  }

  // Every rank's memory, messages and pending list become rank root's.
  void sync_state(int root) {
    if (!comm_ || comm_->size() == 1) return;
    comm_->broadcast(mem_.data(), sizeof(float) * std::size_t(mem_.size()), root);
    comm_->broadcast(msg_self_.data(), sizeof(float) * std::size_t(msg_self_.size()), root);
    comm_->broadcast(msg_other_.data(), sizeof(float) * std::size_t(msg_other_.size()), root);
    comm_->broadcast(msg_e_.data(), sizeof(float) * std::size_t(msg_e_.size()), root);
    comm_->broadcast(last_.data(), sizeof(double) * last_.size(), root);
    comm_->broadcast(msg_time_.data(), sizeof(double) * msg_time_.size(), root);
    comm_->broadcast(has_msg_.data(), has_msg_.size(), root);
    std::int64_t np = std::int64_t(pending_.size());
    comm_->broadcast(&np, sizeof np, root);
    pending_.resize(std::size_t(np));
    comm_->broadcast(pending_.data(), sizeof(NodeId) * pending_.size(), root);
    comm_->broadcast(msg_count_.data(), sizeof(std::int32_t) * msg_count_.size(), root);
    if (mean_) {  // the pending nodes' message times, flattened in pending order
      std::vector<double> flat;
      if (comm_->rank() == root)
        for (NodeId v : pending_)
          flat.insert(flat.end(), msg_times_[std::size_t(v)].begin(), msg_times_[std::size_t(v)].end());
      std::int64_t n = std::int64_t(flat.size());
      comm_->broadcast(&n, sizeof n, root);
      flat.resize(std::size_t(n));
      comm_->broadcast(flat.data(), sizeof(double) * flat.size(), root);
      for (auto& t : msg_times_) t.clear();
      std::size_t at = 0;
      for (NodeId v : pending_) {
        const std::size_t c = std::size_t(msg_count_[std::size_t(v)]);
        msg_times_[std::size_t(v)].assign(flat.begin() + std::ptrdiff_t(at), flat.begin() + std::ptrdiff_t(at + c));
        at += c;
      }
    }
  }

  // Memory, last updates and stored messages back to the start of the stream.
  void reset() {
    mem_ = Matrix(s_.nodes, dm_);
    last_.assign(std::size_t(s_.nodes), s_.events ? s_.time[0] : 0.0);
    has_msg_.assign(std::size_t(s_.nodes), 0);
    msg_count_.assign(std::size_t(s_.nodes), 0);
    msg_times_.assign(mean_ ? std::size_t(s_.nodes) : 0, {});
    pending_.clear();
    pos_.assign(std::size_t(s_.nodes), -1);
    urow_.assign(std::size_t(s_.nodes), -1);
    msg_self_ = Matrix(s_.nodes, dm_);
    msg_other_ = Matrix(s_.nodes, dm_);
    msg_e_ = Matrix(s_.nodes, std::max<std::int64_t>(de_, 1));
    msg_time_.assign(std::size_t(s_.nodes), 0.0);
  }

  // Processes events ids[0..B) (in time order; ids[0] starts the batch) against negatives neg;
  // writes sigmoid scores; trains when step > 0 (the Adam step number); step < 0 computes the
  // gradients only and leaves the state as it was (the gradient check). Returns the loss.
  // Across K ranks (exact mini-batch parallelism) every rank keeps the whole memory and runs
  // the memory update of the batch's pending nodes itself (identical inputs, identical rows);
  // each embeds and scores its slice [slice_begin(B), +slice_size(B)) of the events, the
  // gradients are summed across ranks before one identical Adam step, and every rank stores all
  // of the batch's messages, so the replicas never diverge and no memory rows need to travel.
  // Scores are written for the slice only; the returned loss is the whole batch's.
  // neg holds N negatives per event (event-major: neg[e * N + j]); negative scores come out
  // negative-major (score of negative j of slice event i at j * B + i). Training takes N = 1.
  double batch(Backend& be, RecentSampler& sampler, const std::vector<std::int64_t>& ids, const std::vector<NodeId>& neg,
               std::int64_t step, std::vector<float>* pos_scores, std::vector<float>* neg_scores) {
    const std::int64_t all = std::int64_t(ids.size()), lo = slice_begin(all), B = slice_size(all);
    const std::int64_t N = all ? std::int64_t(neg.size()) / all : 1, Q = (2 + N) * B;
    const bool attn = o_.embedding == "attn";
    const int k = attn ? sampler.k() : 0;  // identity and time embeddings read no neighbours
    const bool train = step != 0;
    if (std::int64_t(neg.size()) != N * all || (train && N != 1))
      throw std::logic_error("tgn: negatives must be N per event, and 1 when training");
    // 1. Memory of the nodes with stored messages, through the GRU. Only the batch's nodes are
    // touched (the pending list, not a scan of every node's flag), so a batch costs the same on
    // a million-node stream as on a small one; ascending ids keep the rows in a fixed order.
    std::vector<NodeId>& P = pending_;
    std::sort(P.begin(), P.end());
    const std::int64_t np = std::int64_t(P.size());
    for (std::int64_t i = 0; i < np; ++i) pos_[std::size_t(P[std::size_t(i)])] = std::int32_t(i);
    // Queries and their neighbours (before the batch).
    qn_.resize(std::size_t(Q));
    for (std::int64_t i = 0; i < B; ++i) {
      qn_[std::size_t(i)] = s_.src[ids[std::size_t(lo + i)]];
      qn_[std::size_t(B + i)] = s_.dst[ids[std::size_t(lo + i)]];
      for (std::int64_t j = 0; j < N; ++j) qn_[std::size_t(2 * B + j * B + i)] = neg[std::size_t((lo + i) * N + j)];
    }
    if (!attn) {
      nb_.count.assign(std::size_t(Q), 0);
    } else if (o_.neighbors_before == "event") {  // strictly before each event's own time
      qtime_.resize(std::size_t(Q));
      for (std::int64_t i = 0; i < Q; ++i) qtime_[std::size_t(i)] = s_.time[ids[std::size_t(lo + i % B)]];
      sampler.sample(qn_.data(), qtime_.data(), Q, nb_);
    } else {  // before the batch
      std::vector<EdgeId> limits(std::size_t(Q), ids[0]);
      sampler.sample_before(qn_.data(), limits.data(), Q, nb_);
    }
    // All time encodings in one pass: [0 for queries | Δt of neighbours | Δt of messages].
    // A pending node's messages: one ("last") or every message since its memory last changed
    // ("mean"), rows msg_off_[p] .. msg_off_[p + 1] of the message block.
    msg_off_.assign(std::size_t(np + 1), 0);
    for (std::int64_t p = 0; p < np; ++p)
      msg_off_[std::size_t(p + 1)] = msg_off_[std::size_t(p)] + msg_count_[std::size_t(P[std::size_t(p)])];
    const std::int64_t nm = msg_off_[std::size_t(np)], mb = Q + Q * k;  // messages, where their rows start
    std::vector<double> dts(std::size_t(mb + nm), 0.0);
    for (std::int64_t i = 0; i < Q; ++i)
      for (int j = 0; j < k; ++j)
        if (j < nb_.count[std::size_t(i)])
          dts[std::size_t(Q + i * k + j)] = s_.time[ids[std::size_t(lo + i % B)]] - nb_.time[std::size_t(i * k + j)];
    for (std::int64_t p = 0; p < np; ++p) {
      const NodeId v = P[std::size_t(p)];
      for (std::int64_t m = msg_off_[std::size_t(p)]; m < msg_off_[std::size_t(p + 1)]; ++m)
        dts[std::size_t(mb + m)] = (mean_ ? msg_times_[std::size_t(v)][std::size_t(m - msg_off_[std::size_t(p)])]
                                          : msg_time_[std::size_t(v)]) - last_[std::size_t(v)];
    }
    time_.forward(dts.data(), std::int64_t(dts.size()), phi_);
    Matrix& xmsg = xmsg_;
    Matrix& mprev = mprev_;
    xmsg.resize(np, 2 * dm_ + de_ + dt_);
    mprev.resize(np, dm_);
#pragma omp parallel for schedule(static) if (np > 64)
    for (std::int64_t p = 0; p < np; ++p) {
      const NodeId v = P[std::size_t(p)];
      float* r = xmsg.data() + p * xmsg.cols();
      // Stored sums over the node's messages, divided by their count (1 for "last").
      const std::int64_t m0 = msg_off_[std::size_t(p)], cnt = msg_off_[std::size_t(p + 1)] - m0;
      const float inv = 1.f / float(cnt);
      std::copy_n(msg_self_.data() + v * dm_, dm_, r);
      for (std::int64_t c = 0; c < dm_; ++c) r[dm_ + c] = msg_other_.data()[v * dm_ + c] * inv;
      for (std::int64_t c = 0; c < de_; ++c) r[2 * dm_ + c] = msg_e_.data()[v * de_ + c] * inv;
      float* rt = r + 2 * dm_ + de_;
      std::copy_n(phi_.data() + (mb + m0) * dt_, dt_, rt);
      for (std::int64_t m = 1; m < cnt; ++m)
        for (std::int64_t c = 0; c < dt_; ++c) rt[c] += phi_.data()[(mb + m0 + m) * dt_ + c];
      if (cnt > 1)
        for (std::int64_t c = 0; c < dt_; ++c) rt[c] *= inv;
      std::copy_n(mem_.data() + v * dm_, dm_, mprev.data() + p * dm_);
    }
    if (np > 0) gru_.forward(be, xmsg.view(), mprev.view(), mnew_);
    else mnew_.resize(0, dm_);
    auto mem_of = [&](NodeId v) -> const float* {
      const std::int32_t p = pos_[std::size_t(v)];
      return p >= 0 ? mnew_.data() + std::int64_t(p) * dm_ : mem_.data() + std::int64_t(v) * dm_;
    };
    // 2. Embeddings.
    Matrix& z = z_;
    if (attn) {
      // 2. Embeddings. Keys and values are [memory of the neighbour ‖ edge features ‖ φ(Δt)]; the
      // memory part goes to the attention once per distinct neighbour of the batch.
      Matrix &q = q_, &h = h_, &nbm = nbm_, &slots = kvs_;
      q.resize(Q, dm_ + dt_);
      h.resize(Q, dm_);
      slot_node_.assign(static_cast<std::size_t>(Q * k), -1);
      uniq_.clear();
      for (std::int64_t i = 0; i < Q; ++i)
        for (int j = 0; j < nb_.count[std::size_t(i)]; ++j) {
          const std::size_t r = std::size_t(i * k + j);
          const NodeId v = nb_.node[r];
          if (urow_[std::size_t(v)] < 0) {
            urow_[std::size_t(v)] = std::int32_t(uniq_.size());
            uniq_.push_back(v);
          }
          slot_node_[r] = urow_[std::size_t(v)];
        }
      const std::int64_t nu = std::int64_t(uniq_.size());
      nbm.resize(nu, dm_);
      for (std::int64_t u = 0; u < nu; ++u) {
        std::copy_n(mem_of(uniq_[std::size_t(u)]), dm_, nbm.data() + u * dm_);
        urow_[std::size_t(uniq_[std::size_t(u)])] = -1;
      }
      slots.resize(Q * k, de_ + dt_);
  #pragma omp parallel for schedule(static) if (Q > 64)
      for (std::int64_t i = 0; i < Q; ++i) {
        const float* m = mem_of(qn_[std::size_t(i)]);
        std::copy_n(m, dm_, q.data() + i * q.cols());
        std::copy_n(phi_.data() + i * dt_, dt_, q.data() + i * q.cols() + dm_);
        std::copy_n(m, dm_, h.data() + i * dm_);
        for (int j = 0; j < nb_.count[std::size_t(i)]; ++j) {  // padded slots are never read
          const std::size_t r = std::size_t(i * k + j);
          float* row = slots.data() + std::int64_t(r) * slots.cols();
          if (de_) std::copy_n(s_.efeat + nb_.event[r] * de_, de_, row);
          std::copy_n(phi_.data() + (Q + std::int64_t(r)) * dt_, dt_, row + de_);
        }
      }
      KeyValueInput kvin;
      kvin.nodes = nbm.view();
      kvin.node = slot_node_.data();
      kvin.slots = slots.view();
      attn_.forward(be, q.view(), kvin, k, h.view(), z);
    } else {
      // identity: z = memory; time (JODIE): z = memory ⊙ (1 + w δ + b), δ the standardised time
      // since the node's memory last changed.
      z.resize(Q, dz_);
      proj_.resize(std::size_t(Q));
      for (std::int64_t i = 0; i < Q; ++i) {
        const NodeId v = qn_[std::size_t(i)];
        const float* m = mem_of(v);
        float* zi = z.data() + i * dz_;
        if (o_.embedding == "identity") {
          std::copy_n(m, dm_, zi);
          continue;
        }
        const double since = pos_[std::size_t(v)] >= 0 ? msg_time_[std::size_t(v)] : last_[std::size_t(v)];
        const float delta = float((s_.time[ids[std::size_t(lo + i % B)]] - since - shift_mean_) / shift_std_);
        proj_[std::size_t(i)] = delta;
        for (std::int64_t c = 0; c < dm_; ++c) zi[c] = m[c] * (1.f + tw_.value.data()[c] * delta + tb_.value.data()[c]);
      }
    }
    // 3. Link scores.
    Matrix &pair = pair_, &hid = hid_, &logit = logit_;
    const std::int64_t pairs = (1 + N) * B;  // (src, dst) then (src, negative j) for each j
    pair.resize(pairs, 2 * dz_);
    logit.resize(pairs, 1);
#pragma omp parallel for schedule(static) if (B > 64)
    for (std::int64_t i = 0; i < B; ++i) {
      std::copy_n(z.data() + i * dz_, dz_, pair.data() + i * 2 * dz_);
      std::copy_n(z.data() + (B + i) * dz_, dz_, pair.data() + i * 2 * dz_ + dz_);
      for (std::int64_t j = 0; j < N; ++j) {
        const std::int64_t row = (1 + j) * B + i;
        std::copy_n(z.data() + i * dz_, dz_, pair.data() + row * 2 * dz_);
        std::copy_n(z.data() + (2 * B + j * B + i) * dz_, dz_, pair.data() + row * 2 * dz_ + dz_);
      }
    }
    hid.resize(pairs, dz_);
    be.gemm(false, false, 1.f, pair.view(), w1_.value.view(), 0.f, hid.view());
    be.add_bias(hid.view(), b1_.value.data());
    be.relu(hid.view());
    be.gemm(false, false, 1.f, hid.view(), w2_.value.view(), 0.f, logit.view());
    be.add_bias(logit.view(), b2_.value.data());
    double loss = 0;
    Matrix& dlogit = dlogit_;
    dlogit.resize(pairs, 1);
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double x = logit.data()[i], y = i < B ? 1.0 : 0.0;
      loss += (std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0) - x * y) / double(all);
      const double sg = 1.0 / (1.0 + std::exp(-x));
      dlogit.data()[i] = float((sg - y) / double(all));
      (i < B ? pos_scores : neg_scores)->push_back(float(sg));
    }
    if (train) {
      for (Param* p : params()) p->grad.fill(0.f);
      be.gemm(true, false, 1.f, hid.view(), dlogit.view(), 1.f, w2_.grad.view());
      b2_.grad.data()[0] += std::accumulate(dlogit.data(), dlogit.data() + 2 * B, 0.f);
      Matrix &dhid = dhid_, &dpair = dpair_, &dz = dzq_;
      dhid.resize(2 * B, dz_);
      dpair.resize(2 * B, 2 * dz_);
      dz.resize(Q, dz_);
      be.gemm(false, true, 1.f, dlogit.view(), w2_.value.view(), 0.f, dhid.view());
      be.relu_backward(hid.view(), dhid.view());
      be.gemm(true, false, 1.f, pair.view(), dhid.view(), 1.f, w1_.grad.view());
      std::vector<float> cs(static_cast<std::size_t>(dz_));
      be.column_sums(dhid.view(), cs.data());
      for (std::int64_t j = 0; j < dz_; ++j) b1_.grad.data()[j] += cs[std::size_t(j)];
      be.gemm(false, true, 1.f, dhid.view(), w1_.value.view(), 0.f, dpair.view());
      for (std::int64_t i = 0; i < B; ++i)
        for (std::int64_t c = 0; c < dz_; ++c) {
          dz.at(i, c) = dpair.at(i, c) + dpair.at(B + i, c);
          dz.at(B + i, c) = dpair.at(i, dz_ + c);
          dz.at(2 * B + i, c) = dpair.at(B + i, dz_ + c);
        }
      Matrix &dq = dq_, &dnodes = dnodes_, &dslots = dslots_, &dh = dh_;
      if (attn) attn_.backward(be, dz.view(), dq, dnodes, dslots, dh);
      Matrix &dphi = dphi_, &dmnew = dmnew_;
      dphi.resize(std::int64_t(dts.size()), dt_);
      dmnew.resize(np, dm_);
      dphi.fill(0.f);
      dmnew.fill(0.f);
      auto add_mem = [&](NodeId v, const float* g) {
        const std::int32_t p = pos_[std::size_t(v)];
        if (p < 0) return;  // memory from earlier batches is detached
        float* d = dmnew.data() + std::int64_t(p) * dm_;
        for (std::int64_t c = 0; c < dm_; ++c) d[c] += g[c];
      };
      if (attn) {
        for (std::int64_t i = 0; i < Q; ++i) {
          add_mem(qn_[std::size_t(i)], dq.data() + i * dq.cols());
          add_mem(qn_[std::size_t(i)], dh.data() + i * dm_);
          std::copy_n(dq.data() + i * dq.cols() + dm_, dt_, dphi.data() + i * dt_);
          for (int j = 0; j < nb_.count[std::size_t(i)]; ++j) {
            const std::int64_t r = i * k + j;
            std::copy_n(dslots.data() + r * dslots.cols() + de_, dt_, dphi.data() + (Q + r) * dt_);
          }
        }
        for (std::int64_t u = 0; u < std::int64_t(uniq_.size()); ++u)
          add_mem(uniq_[std::size_t(u)], dnodes.data() + u * dm_);
      } else {
        std::vector<float> g(static_cast<std::size_t>(dm_));
        for (std::int64_t i = 0; i < Q; ++i) {
          const NodeId v = qn_[std::size_t(i)];
          const float* gz = dz.data() + i * dz_;
          if (o_.embedding == "identity") {
            add_mem(v, gz);
            continue;
          }
          const float* m = mem_of(v);
          const float delta = proj_[std::size_t(i)];
          for (std::int64_t c = 0; c < dm_; ++c) {
            g[std::size_t(c)] = gz[c] * (1.f + tw_.value.data()[c] * delta + tb_.value.data()[c]);
            tw_.grad.data()[c] += gz[c] * m[c] * delta;
            tb_.grad.data()[c] += gz[c] * m[c];
          }
          add_mem(v, g.data());
        }
      }
      if (np > 0) {
        Matrix &dx = dx_, &dprev = dprev_;
        gru_.backward(be, dmnew.view(), dx, dprev);
        for (std::int64_t p = 0; p < np; ++p) {
          const std::int64_t m0 = msg_off_[std::size_t(p)], cnt = msg_off_[std::size_t(p + 1)] - m0;
          const float* g = dx.data() + p * dx.cols() + 2 * dm_ + de_;
          for (std::int64_t m = 0; m < cnt; ++m)
            for (std::int64_t c = 0; c < dt_; ++c) dphi.data()[(mb + m0 + m) * dt_ + c] = g[c] / float(cnt);
        }
      }
      time_.backward(dphi);
      if (step < 0) {
        reduce(&loss);
        return loss;
      }
      reduce_and_step(be, step, &loss);
    }
    // 4. Keep the updated memory; this batch's events become the stored messages.
    for (std::int64_t p = 0; p < np; ++p) {
      const NodeId v = P[std::size_t(p)];
      std::copy_n(mnew_.data() + p * dm_, dm_, mem_.data() + v * dm_);
      last_[std::size_t(v)] = msg_time_[std::size_t(v)];
      has_msg_[std::size_t(v)] = 0;
      msg_count_[std::size_t(v)] = 0;
      if (mean_) msg_times_[std::size_t(v)].clear();
      pos_[std::size_t(v)] = -1;
    }
    P.clear();
    for (std::int64_t e : ids)
      for (int side = 0; side < 2; ++side) {
        const NodeId a = side ? s_.dst[e] : s_.src[e], b = side ? s_.src[e] : s_.dst[e];
        // "last" keeps the latest message; "mean" sums every message until the node updates.
        const bool fresh = !mean_ || !has_msg_[std::size_t(a)];
        std::copy_n(mem_.data() + a * dm_, dm_, msg_self_.data() + a * dm_);
        float* other = msg_other_.data() + a * dm_;
        const float* mb_row = mem_.data() + b * dm_;
        for (std::int64_t c = 0; c < dm_; ++c) other[c] = fresh ? mb_row[c] : other[c] + mb_row[c];
        if (de_) {
          float* ea = msg_e_.data() + a * de_;
          const float* ef = s_.efeat + e * de_;
          for (std::int64_t c = 0; c < de_; ++c) ea[c] = fresh ? ef[c] : ea[c] + ef[c];
        }
        msg_count_[std::size_t(a)] = fresh ? 1 : msg_count_[std::size_t(a)] + 1;
        if (mean_) msg_times_[std::size_t(a)].push_back(s_.time[e]);
        msg_time_[std::size_t(a)] = s_.time[e];
        if (!has_msg_[std::size_t(a)]) pending_.push_back(a);
        has_msg_[std::size_t(a)] = 1;
      }
    return loss;
  }

 private:
  const Stream& s_;
  const TgnOptions& o_;
  Communicator* comm_ = nullptr;
  bool independent_ = false;
  std::int64_t dm_, dt_, de_, dz_;
  TimeEncoder time_;
  GruCell gru_;
  TemporalAttention attn_;
  Param w1_, b1_, w2_, b2_;
  Param tw_, tb_;                       // time projection (embedding "time")
  double shift_mean_ = 0, shift_std_ = 1;  // of the gaps between a source's events
  std::vector<float> proj_;             // each query's standardised gap, for backward
  Matrix mem_, msg_self_, msg_other_, msg_e_, mnew_, phi_;
  std::vector<double> last_, msg_time_;
  std::vector<std::uint8_t> has_msg_;
  bool mean_ = false;                            // the "mean" message aggregator
  std::vector<std::int32_t> msg_count_;          // messages stored per node since its last update
  std::vector<std::vector<double>> msg_times_;   // "mean": each stored message's time
  std::vector<std::int64_t> msg_off_;            // per pending node: its first message row
  std::vector<std::int32_t> pos_;  // row of a pending node in this batch's GRU, -1 otherwise
  std::vector<NodeId> pending_;    // nodes with a stored message
  // Per-batch buffers, kept so that their memory is reused rather than allocated and faulted in
  // every batch (a 6,000 x 201 neighbour matrix per batch at the defaults).
  Matrix xmsg_, mprev_, q_, nbm_, kvs_, h_, z_, pair_, hid_, logit_, dlogit_, dhid_, dpair_, dzq_, dq_, dnodes_,
      dslots_, dh_, dphi_, dmnew_, dx_, dprev_;
  std::vector<std::int32_t> slot_node_, urow_;  // slot -> distinct-neighbour row; node -> that row (-1)
  std::vector<NodeId> uniq_;                     // the batch's distinct neighbours
  std::vector<double> qtime_;                    // each query's event time
  std::vector<float> grads_;  // all gradients in one buffer for the all-reduce
  std::vector<NodeId> qn_;
  NeighborBatch nb_;
};

// EdgeBank∞: an event scores 1 when its (src, dst) pair occurred in any earlier batch.
void edgebank(const Stream& s, std::int64_t begin, std::int64_t end, std::int64_t batch, std::uint64_t neg_seed,
              const std::vector<std::uint8_t>& inductive, std::unordered_set<std::uint64_t>& seen, Scores& out) {
  auto key = [](NodeId a, NodeId b) { return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b); };
  for (std::int64_t b0 = begin; b0 < end; b0 += batch) {
    const std::int64_t b1 = std::min(end, b0 + batch);
    for (std::int64_t e = b0; e < b1; ++e) {
      const NodeId n = negative(neg_seed, 0, e, s.nodes);
      out.add(seen.count(key(s.src[e], s.dst[e])) ? 1.f : 0.f, seen.count(key(s.src[e], n)) ? 1.f : 0.f,
              inductive[std::size_t(e)] != 0);
    }
    for (std::int64_t e = b0; e < b1; ++e) seen.insert(key(s.src[e], s.dst[e]));
  }
}

constexpr std::uint64_t kEvalNegatives = 0x5eed0e7a1ull;  // the same negatives for every model

Stream stream_of(const TemporalDataset& d) {
  Stream s;
  s.nodes = d.num_nodes;
  s.events = d.num_events();
  s.src = d.src.data();
  s.dst = d.dst.data();
  s.time = d.time.data();
  s.de = d.edge_feature_dim;
  s.efeat = d.edge_features.empty() ? nullptr : d.edge_features.data();
  return s;
}

// Events [first, min(last, events)) as one batch.
std::vector<std::int64_t> event_range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(std::max<std::int64_t>(0, last - first)));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// per_event negatives for each event (event-major), negative j from stream first + j.
std::vector<NodeId> negatives(const std::vector<std::int64_t>& ids, std::uint64_t seed, std::uint64_t first,
                              std::int64_t nodes, std::int64_t per_event = 1) {
  std::vector<NodeId> out;
  out.reserve(ids.size() * std::size_t(per_event));
  for (std::int64_t e : ids)
    for (std::int64_t j = 0; j < per_event; ++j) out.push_back(negative(seed, first + std::uint64_t(j), e, nodes));
  return out;
}

// One evaluated event: its score and its negative's.
struct Scored {
  std::int64_t event;
  float pos, neg;
  float rr;  // reciprocal rank of the positive among the MRR negatives (0 when none)
};

// Every rank's scored events, in event order, on every rank (total: how many there are).
std::vector<Scored> all_scored(Communicator& comm, std::vector<Scored> mine, std::int64_t total) {
  if (comm.size() == 1) return mine;
  const std::vector<char> bytes = comm.gather(mine.data(), mine.size() * sizeof(Scored), 0, nullptr);
  std::vector<Scored> all(static_cast<std::size_t>(total));
  if (comm.rank() == 0) {
    if (bytes.size() != all.size() * sizeof(Scored)) throw std::logic_error("tgn: ranks scored different events");
    std::memcpy(all.data(), bytes.data(), bytes.size());
    std::sort(all.begin(), all.end(), [](const Scored& a, const Scored& b) { return a.event < b.event; });
  }
  comm.broadcast(all.data(), all.size() * sizeof(Scored), 0);
  return all;
}

// The error that ends a training whose loss stopped being a number. The loss a batch returns is
// all-reduced, so every rank sees the same value and throws at the same batch: none is left
// waiting in the next batch's all-reduce for the others.
// batch 0: found in the evaluation after the epoch's training.
Error diverged(int epoch, std::int64_t batch, std::int64_t batches, const std::string& what, float lr) {
  char where[80];
  if (batch > 0) std::snprintf(where, sizeof where, "epoch %d, batch %lld of %lld", epoch, (long long)batch, (long long)batches);
  else std::snprintf(where, sizeof where, "epoch %d", epoch);
  char line[400];
  std::snprintf(line, sizeof line,
                "%s: %s: the model diverged; lower --lr (now %g) or check the events' times and features for extreme "
                "values",
                where, what.c_str(), double(lr));
  return Error(line);
}

// Refuses a chronological split that leaves nothing to learn from or nothing to evaluate: a
// model trained on 0 events scores chance (AP 0.5), which reads as a result, not as an error.
void check_split(const fs::path& dataset, const Stream& s, const TemporalSplit& split, std::int64_t train_events,
                 bool evaluates) {
  const std::int64_t train = split.train_end, valid = split.valid_end - split.train_end,
                     test = s.events - split.valid_end;
  std::string missing;
  if (train_events == 0) missing = "training";
  else if (evaluates && valid == 0) missing = "validation";
  else if (evaluates && test == 0) missing = "test";
  if (missing.empty()) return;
  std::string sizes = "train " + std::to_string(train);
  if (train_events != train) sizes += " (" + std::to_string(train_events) + " without held-out nodes)";
  sizes += ", validation " + std::to_string(valid) + ", test " + std::to_string(test) + " of " +
           std::to_string(s.events) + " events";
  char why[200];
  if (s.events > 0 && s.time[0] == s.time[s.events - 1])
    std::snprintf(why, sizeof why, "every event has the timestamp %g", s.time[0]);
  else
    std::snprintf(why, sizeof why, "the split is at the 70%% and 85%% time quantiles, %g and %g, and events at one "
                  "time stay together", split.valid_time, split.test_time);
  throw InputError(dataset.string() + ": the chronological split leaves no " + missing + " events (" + sizes + "; " +
                   why + "); a temporal dataset needs events spread over time");
}

// The test figures of a summary from the test scores.
void set_test(TgnSummary& sum, const Scores& test) {
  sum.test_ap = test.ap();
  sum.test_auc = test.auc();
  sum.test_inductive_ap = test.ap_ind();
  sum.test_inductive_auc = test.auc_ind();
  sum.test_ap_pooled = test.ap_pooled();
  sum.test_inductive_ap_pooled = test.ap_ind_pooled();
}

// Where a run stands at an epoch boundary: all a checkpoint needs, because the memory, the
// messages and the samplers restart with every epoch.
struct TgnRunState {
  int epoch = 0;
  std::int64_t step = 0;
  double best_val = -1;
  int since_best = 0;
  std::vector<double> speeds;
  TgnSummary sum;
};

// The options a checkpoint must have been made with to be resumed.
json tgn_checkpoint_key(const TgnOptions& o, const Stream& s) {
  return {{"model", o.model},           {"memory_dim", o.memory_dim}, {"embed_dim", o.embed_dim},
          {"time_dim", o.time_dim},     {"neighbors", o.neighbors},   {"neighbors_before", o.neighbors_before},
          {"batch_size", o.batch_size}, {"lr", o.lr},                 {"seed", o.seed},
          {"learn_time_frequencies", o.learn_time_frequencies},       {"max_train_events", o.max_train_events},
          {"events", s.events},         {"nodes", s.nodes},         {"embedding", o.embedding},
          {"parallel", o.parallel},     {"aggregator", o.aggregator}};
}

// Rank 0 writes DIR/epoch-E (staged and renamed: a crash leaves the previous epoch intact), then
// removes older epochs. The replicas are identical, so one copy serves every rank.
void save_tgn_checkpoint(Communicator& comm, const fs::path& dir, const std::vector<Param*>& params,
                         const TgnRunState& st, const json& key) {
  if (comm.rank() == 0) {
    // StagingDir creates dir, and removes it again when this first epoch fails.
    StagingDir stage(epoch_dir(dir, st.epoch), "halo-tgn-checkpoint", /*overwrite=*/true);
    ArrayDir a(stage.path());
    put_adam_state(a, params);
    a.put("speeds", st.speeds);
    json meta = {{"key", key},
                 {"epoch", st.epoch},
                 {"step", st.step},
                 {"best_val", st.best_val},
                 {"since_best", st.since_best},
                 {"summary", st.sum.to_json()}};
    a.write_meta(std::move(meta), "halo-tgn-checkpoint", 1);
    stage.commit();
    remove_epochs_before(dir, st.epoch);
  }
  comm.barrier();
}

// Rank 0 reads the newest epoch in dir and every rank receives it. False when there is none.
bool load_tgn_checkpoint(Communicator& comm, const fs::path& dir, const std::vector<Param*>& params,
                         TgnRunState& st, const json& key) {
  std::vector<float> flat;
  std::string meta_text;
  if (comm.rank() == 0) {
    const std::vector<int> epochs = committed_epochs(dir);
    if (!epochs.empty()) {
      const fs::path e = epoch_dir(dir, epochs.back());
      json meta = read_meta(e, "halo-tgn-checkpoint", 1);
      if (meta.at("key") != key)
        throw ParamError(e.string() + ": checkpoint was made with other options (" + meta.at("key").dump() +
                         "); resume with the same options or use a new checkpoint directory");
      flat = read_adam_state(e, meta, params);
      const Array<double> sp = map_listed<double>(e, meta, "speeds", {}, kAnyShape, 1);
      meta["speeds"] = std::vector<double>(sp.begin(), sp.end());
      meta_text = meta.dump();
    }
  }
  std::int64_t sizes[2] = {std::int64_t(flat.size()), std::int64_t(meta_text.size())};
  comm.broadcast(sizes, sizeof sizes, 0);
  if (sizes[1] == 0) return false;
  flat.resize(std::size_t(sizes[0]));
  meta_text.resize(std::size_t(sizes[1]));
  comm.broadcast(flat.data(), flat.size() * sizeof(float), 0);
  comm.broadcast(meta_text.data(), meta_text.size(), 0);
  set_adam_state(params, flat.data());
  const json meta = json::parse(meta_text);
  st.epoch = meta.at("epoch");
  st.step = meta.at("step");
  st.best_val = meta.at("best_val");
  st.since_best = meta.at("since_best");
  st.speeds = meta.at("speeds").get<std::vector<double>>();
  const json& j = meta.at("summary");
  st.sum.valid_ap = j.at("valid_ap");
  st.sum.test_ap = j.at("test_ap");
  st.sum.test_auc = j.at("test_auc");
  st.sum.test_inductive_ap = j.at("test_inductive_ap");
  st.sum.test_inductive_auc = j.at("test_inductive_auc");
  st.sum.test_ap_pooled = j.at("test_ap_pooled");
  st.sum.test_inductive_ap_pooled = j.at("test_inductive_ap_pooled");
  st.sum.test_mrr = j.at("test_mrr");
  st.sum.best_epoch = j.at("best_epoch");
  return true;
}

}  // namespace

std::vector<float> tgn_batch_scores(std::int64_t nodes, const std::vector<NodeId>& src, const std::vector<NodeId>& dst,
                                    const std::vector<double>& time, const TgnOptions& opt, std::int64_t batch) {
  Stream s;
  s.nodes = nodes;
  s.events = std::int64_t(src.size());
  s.src = src.data();
  s.dst = dst.data();
  s.time = time.data();
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events);
  RecentSampler sampler(g, opt.neighbors);
  const TgnOptions o = resolved(opt);
  Tgn model(s, o);
  Backend& be = cpu_backend();
  std::vector<float> ps, ns;
  for (std::int64_t b = 0; b <= batch; ++b) {
    const auto ids = event_range(b * opt.batch_size, std::min(s.events, (b + 1) * opt.batch_size));
    ps.clear();
    model.batch(be, sampler, ids, negatives(ids, opt.seed, 1, s.nodes), b < batch ? b + 1 : 0, &ps, &ns);
  }
  return ps;
}

double tgn_gradient_check(const fs::path& dataset, const TgnOptions& opt, std::int64_t batches) {
  const TemporalDataset d = read_temporal_dataset(dataset);
  const Stream s = stream_of(d);
  const TemporalCsr g = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events);
  RecentSampler sampler(g, opt.neighbors);
  const TgnOptions o = resolved(opt);
  Tgn model(s, o);
  // Biases start at 0, so a node without memory or neighbours (all-zero input) sits exactly on
  // a ReLU kink, where a central difference and the subgradient disagree: move them off it.
  const PhiloxKey key = philox_key(opt.seed, kStreamInit + 99);
  for (Param* p : model.params())
    if (p->name.find(".b") != std::string::npos)
      for (std::int64_t i = 0; i < p->value.size(); ++i)
        p->value.data()[i] += 0.1f * (philox_uniform(key, std::uint64_t(i), std::uint32_t(p->name.size())) - 0.5f);
  Backend& be = cpu_backend();
  auto ids_of = [&](std::int64_t b) {
    return event_range(b * opt.batch_size, std::min(s.events, (b + 1) * opt.batch_size));
  };
  std::vector<float> ps, ns;
  for (std::int64_t b = 0; b < batches; ++b)  // build memory, messages and history
    model.batch(be, sampler, ids_of(b), negatives(ids_of(b), opt.seed, 1, s.nodes), b + 1, &ps, &ns);
  const std::vector<std::int64_t> ids = ids_of(batches);
  const std::vector<NodeId> neg = negatives(ids, opt.seed, 1, s.nodes);
  model.batch(be, sampler, ids, neg, -1, &ps, &ns);
  double worst = 0;
  for (Param* p : model.params()) {
    // time.w multiplies raw time gaps (seconds, up to 1e6 here): no finite step is small enough
    // for a central difference; its gradient is checked on small gaps in the layer tests.
    if (p->name == "time.w") continue;
    const Matrix grad = p->grad;
    for (std::int64_t i = 0; i < p->value.size(); i += std::max<std::int64_t>(1, p->value.size() / 7)) {
      float& w = p->value.data()[i];
      // h = 1e-3 keeps the float forward's rounding (~1e-7 of the loss) well under the
      // difference; smaller steps drowned gradients of 1e-4 in noise.
      const float saved = w;
      auto central = [&](float h) {
        w = saved + h;
        const double up = model.batch(be, sampler, ids, neg, -1, &ps, &ns);
        w = saved - h;
        const double down = model.batch(be, sampler, ids, neg, -1, &ps, &ns);
        w = saved;
        return (up - down) / (2.0 * double(h));
      };
      const double numeric = central(1e-3f);
      // A step that crosses a ReLU kink in the merger or predictor measures the kink, not the
      // gradient; halving the step then changes the difference, and the entry is skipped.
      if (std::abs(central(5e-4f) - numeric) > 0.1 * (1e-4 + std::abs(numeric))) continue;
      // Relative, with a floor of 1e-4: the memory path's gradients (GRU weights) are ~1e-3 on a
      // batch of 8; a floor of 5e-3 once let every one of them pass unchecked.
      const double err = std::abs(double(grad.data()[i]) - numeric) / (1e-4 + std::abs(numeric));
      if (std::getenv("HALO_DEBUG_GRADCHECK") && err > 1e-2)
        std::fprintf(stderr, "%s[%lld]: analytic %g numeric %g\n", p->name.c_str(), (long long)i,
                     double(grad.data()[i]), numeric);
      worst = std::max(worst, err);
    }
  }
  return worst;
}

TgnSummary train_tgn(const fs::path& dataset, const TgnOptions& options, std::ostream& out) {
  const TgnOptions opt = resolved(options);
  opt.check();
  if (dataset_kind(dataset) != "temporal")
    throw ParamError(dataset.string() + " is not a temporal dataset (convert an event file with --format konect|snap|jodie)");
  Communicator& comm = world();
  const bool lead = comm.rank() == 0;
  // Outputs refused before any work when they would replace something they must not or touch
  // the dataset (staging.h).
  if (lead && !opt.log.empty()) resolve_stream_output(opt.log, {dataset});
  if (!opt.checkpoint.empty()) check_output_folder(opt.checkpoint, {dataset});
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  else if (comm.size() > 1 && !std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(default_threads_per_rank());
  const TemporalDataset d = read_temporal_dataset(dataset);
  const Stream s = stream_of(d);
  const TemporalSplit split = chronological_split(s.nodes, s.src, s.dst, s.time, s.events, opt.seed);
  // EdgeBank learns nothing, but it evaluates; the others need events to learn from.
  check_split(dataset, s, split, split.train_end, opt.model == "edgebank" || !opt.skip_eval);
  LogFile log;  // every record written whole and checked (staging.h)
  if (lead && !opt.log.empty()) log.open(opt.log, opt.resume);
  TgnSummary sum;
  if (opt.model == "edgebank") {
    std::unordered_set<std::uint64_t> seen;
    Scores train_s, val, test;
    for (Scores* sc : {&train_s, &val, &test}) sc->batch = opt.batch_size;
    edgebank(s, 0, split.train_end, opt.batch_size, kEvalNegatives, split.inductive, seen, train_s);
    edgebank(s, split.train_end, split.valid_end, opt.batch_size, kEvalNegatives, split.inductive, seen, val);
    edgebank(s, split.valid_end, s.events, opt.batch_size, kEvalNegatives, split.inductive, seen, test);
    sum.valid_ap = val.ap();
    set_test(sum, test);
    log.write_line(sum.to_json().dump());
    log.close();
    return sum;
  }

  // Training events: the chronological training range without events of held-out nodes.
  std::vector<std::int64_t> train_ids;
  for (std::int64_t e = 0; e < split.train_end; ++e)
    if (split.train_keep[std::size_t(e)]) train_ids.push_back(e);
  if (opt.max_train_events > 0 && std::int64_t(train_ids.size()) > opt.max_train_events)
    train_ids.resize(std::size_t(opt.max_train_events));
  check_split(dataset, s, split, std::int64_t(train_ids.size()), !opt.skip_eval);  // held-out nodes may take them all
  const TemporalCsr train_graph = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events, split.train_keep.data());
  const TemporalCsr full_graph = build_temporal_csr(s.nodes, s.src, s.dst, s.time, s.events);
  RecentSampler train_sampler(train_graph, opt.neighbors), full_sampler(full_graph, opt.neighbors);
  Backend& be = cpu_backend();
  std::optional<Tgn> built;
  try {
    built.emplace(s, opt, &comm);
  } catch (const std::bad_alloc&) {  // the node state: memory, two message tables, edge features
    const double bytes = 4.0 * double(s.nodes) * double(3 * opt.memory_dim + std::max<std::int64_t>(1, s.de));
    throw SystemError("out of memory allocating the node state of " + std::to_string(s.nodes) + " nodes x --memory-dim " +
                      std::to_string(opt.memory_dim) + " (about " + format_bytes(std::uint64_t(bytes)) + ")");
  }
  Tgn& model = *built;
  const bool segments = opt.parallel == "segments" && comm.size() > 1;
  TgnRunState st;
  const json key = tgn_checkpoint_key(opt, s);
  if (opt.resume) {
    if (opt.checkpoint.empty()) throw ParamError("--resume needs --checkpoint DIR");
    // Every rank learns the outcome from rank 0's broadcast, so all refuse alike. No checkpoint
    // is a typo'd or wiped directory: starting over silently would overwrite the log.
    if (!load_tgn_checkpoint(comm, opt.checkpoint, model.params(), st, key))
      throw ParamError("--resume: no checkpoint in " + opt.checkpoint.string() + "; drop --resume to start a new run");
    if (st.epoch > opt.epochs)
      throw ParamError("--resume: the checkpoint in " + opt.checkpoint.string() + " is of epoch " +
                       std::to_string(st.epoch) + ", after --epochs " + std::to_string(opt.epochs) +
                       "; resume with --epochs " + std::to_string(st.epoch) +
                       " or more, or start a new checkpoint directory");
    if (lead && !opt.quiet) out << "resumed after epoch " << st.epoch << "\n";
  }
  std::int64_t& step = st.step;
  double& best_val = st.best_val;
  int& since_best = st.since_best;
  std::vector<double>& speeds = st.speeds;
  sum = st.sum;
  // Saved after every epoch (and before an early stop, so a resumed run stops too).
  auto checkpoint = [&](int epoch) {
    if (opt.checkpoint.empty()) return;
    st.epoch = epoch;
    st.sum = sum;
    save_tgn_checkpoint(comm, opt.checkpoint, model.params(), st, key);
  };
  for (int epoch = st.epoch + 1; epoch <= opt.epochs && since_best < opt.patience; ++epoch) {
    model.reset();
    train_sampler.reset();
    Stopwatch clock;
    double loss = 0;
    std::int64_t batches = 0;
    std::vector<float> ps, ns;
    // The training events this rank walks through: all of them (exact: every rank takes a slice
    // of every batch) or its own time segment (independent memories).
    std::size_t first = 0, last = train_ids.size();
    if (segments) {
      first = train_ids.size() * std::size_t(comm.rank()) / std::size_t(comm.size());
      last = train_ids.size() * std::size_t(comm.rank() + 1) / std::size_t(comm.size());
    }
    const std::size_t per = std::size_t(opt.batch_size);
    std::int64_t steps = std::int64_t((last - first + per - 1) / per);
    if (segments) comm.allreduce(&steps, 1, ReduceOp::kMax);  // every rank joins every all-reduce
    model.set_independent(segments);
    for (std::int64_t b = 0; b < steps; ++b) {
      const std::size_t b0 = first + std::size_t(b) * per;
      double batch_loss = 0;  // all-reduced: the same on every rank
      if (b0 >= last) {  // this rank's segment is done; the others' is not
        batch_loss = model.empty_step(be, ++step);
      } else {
        const std::vector<std::int64_t> ids(train_ids.begin() + std::ptrdiff_t(b0),
                                            train_ids.begin() + std::ptrdiff_t(std::min(last, b0 + per)));
        batch_loss = model.batch(be, train_sampler, ids, negatives(ids, opt.seed, std::uint64_t(epoch), s.nodes), ++step,
                                 &ps, &ns);
        loss += batch_loss;
        ++batches;
      }
      if (!std::isfinite(batch_loss))
        throw diverged(epoch, b + 1, steps, "the training loss is " + std::to_string(batch_loss), opt.lr);
    }
    if (segments) {  // evaluation continues from the memory at the end of training: the last segment's
      model.sync_state(comm.size() - 1);
      model.set_independent(false);
    }
    const double secs = clock.seconds();
    speeds.push_back(double(train_ids.size()) / secs);
    if (opt.skip_eval) {
      json rec = {{"type", "epoch"}, {"epoch", epoch}, {"loss", loss / double(std::max<std::int64_t>(1, batches))},
                  {"epoch_time_s", secs}, {"events_per_s", speeds.back()}};
      log.write_line(rec.dump());
      checkpoint(epoch);
      if (lead && !opt.quiet) {
        char line[160];
        std::snprintf(line, sizeof line, "epoch %3d  loss %.4f  %.0f events/s (no evaluation)\n", epoch,
                      rec["loss"].get<double>(), speeds.back());
        out << line << std::flush;
      }
      continue;
    }
    // Validation then test, the memory carried on from training.
    full_sampler.reset();
    auto evaluate = [&](std::int64_t begin, std::int64_t end, const char* name) {
      // One negative per event for AP and AUC; with --eval-negatives N, N of them (the first is
      // the same) for the positive's reciprocal rank.
      const std::int64_t nneg = std::max<std::int64_t>(1, opt.eval_negatives);
      std::vector<Scored> mine;
      std::int64_t nonfinite = 0;  // this rank's NaN or infinite scores
      for (std::int64_t b0 = begin; b0 < end; b0 += opt.batch_size) {
        const auto ids = event_range(b0, std::min(end, b0 + opt.batch_size));
        std::vector<float> p, n;
        model.batch(be, full_sampler, ids, negatives(ids, kEvalNegatives, 0, s.nodes, nneg), 0, &p, &n);
        for (const std::vector<float>* v : {&p, &n})
          for (float x : *v) nonfinite += !std::isfinite(x);
        const std::int64_t lo = model.slice_begin(std::int64_t(ids.size())), bs = std::int64_t(p.size());
        for (std::int64_t i = 0; i < bs; ++i) {
          // rank = 1 + #(higher) + #(tied) / 2, as TGB does (negative j of event i at j * bs + i)
          const float rr = opt.eval_negatives > 0 ? float(reciprocal_rank(p[std::size_t(i)], n.data() + i, nneg, bs)) : 0.f;
          mine.push_back({ids[std::size_t(lo + i)], p[std::size_t(i)], n[std::size_t(i)], rr});
        }
      }
      // The metrics are defined on NaN (they rank it lowest), but a figure of a model whose scores
      // are not numbers is no result: every rank learns the count and stops alike.
      comm.allreduce(&nonfinite, 1);
      if (nonfinite > 0)
        throw diverged(epoch, 0, 0, std::to_string(nonfinite) + " of the " + name + " scores are not finite", opt.lr);
      Scores sc;
      sc.batch = opt.batch_size;
      for (const Scored& e : all_scored(comm, std::move(mine), end - begin)) {
        sc.add(e.pos, e.neg, split.inductive[std::size_t(e.event)] != 0);
        sc.rr_sum += e.rr;
        ++sc.rr_count;
      }
      return sc;
    };
    const Scores val = evaluate(split.train_end, split.valid_end, "validation");
    const Scores test = evaluate(split.valid_end, s.events, "test");
    const double vap = val.ap();
    json rec = {{"type", "epoch"},          {"epoch", epoch},
                {"loss", loss / double(std::max<std::int64_t>(1, batches))},
                {"valid_ap", vap},          {"valid_auc", val.auc()},
                {"valid_inductive_ap", val.ap_ind()},
                {"test_ap", test.ap()},     {"test_auc", test.auc()},
                {"test_inductive_ap", test.ap_ind()},
                {"test_ap_pooled", test.ap_pooled()},
                {"epoch_time_s", secs},     {"events_per_s", speeds.back()}};
    if (opt.eval_negatives > 0) {
      rec["valid_mrr"] = val.mrr();
      rec["test_mrr"] = test.mrr();
    }
    log.write_line(rec.dump());
    if (lead && !opt.quiet) {
      char line[256];
      std::snprintf(line, sizeof line, "epoch %3d  loss %.4f  valid AP %.4f AUC %.4f (new nodes AP %.4f)", epoch,
                    rec["loss"].get<double>(), vap, val.auc(), val.ap_ind());
      out << line;
      if (opt.eval_negatives > 0) {
        std::snprintf(line, sizeof line, " MRR %.4f (%lld negatives)", val.mrr(), (long long)opt.eval_negatives);
        out << line;
      }
      std::snprintf(line, sizeof line, "  %.0f events/s\n", speeds.back());
      out << line << std::flush;
    }
    if (vap > best_val) {
      best_val = vap;
      since_best = 0;
      sum.best_epoch = epoch;
      sum.valid_ap = vap;
      set_test(sum, test);
      sum.test_mrr = test.mrr();
    } else {
      ++since_best;
    }
    checkpoint(epoch);
  }
  std::sort(speeds.begin(), speeds.end());
  sum.events_per_s = speeds.empty() ? 0.0 : speeds[speeds.size() / 2];
  std::int64_t rss = std::int64_t(peak_rss_bytes());
  comm.allreduce(&rss, 1, ReduceOp::kMax);
  sum.peak_rss_mb = double(rss) / double(1 << 20);
  sum.ranks = comm.size();
  log.write_line(sum.to_json().dump());
  log.close();
  return sum;
}

}  // namespace halo

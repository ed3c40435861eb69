// The TGN model on one replica (see tgn.h).
#include "halo/gnn/temporal/tgn.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "halo/gnn/rng.h"

namespace halo {
namespace {

Param make_param(std::int64_t rows, std::int64_t cols, const char* name) {
  Param p;
  p.name = name;
  p.value = Matrix(rows, cols);
  p.grad = Matrix(rows, cols);
  p.m = Matrix(rows, cols);
  p.v = Matrix(rows, cols);
  return p;
}

// The mean and standard deviation of the time between a source's consecutive events: the time
// projection's gaps are standardised by them (as TGN's JODIE embedding does).
void source_gap_statistics(const EventStream& s, double& mean, double& std_dev) {
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
  mean = n ? sum / double(n) : 0.0;
  std_dev = n ? std::sqrt(std::max(0.0, sq / double(n) - mean * mean)) : 1.0;
  if (!(std_dev > 0)) std_dev = 1.0;
}

}  // namespace

Tgn::Tgn(const EventStream& events, const TgnConfig& config)
    : events_(events),
      config_(config),
      memory_dim_(config.memory_dim),
      time_dim_(config.time_dim),
      edge_dim_(events.de),
      embed_dim_(config.embedding == TgnEmbedding::kAttention ? config.embed_dim
                                                              : config.memory_dim),
      node_dim_(memory_dim_ + config.static_dim),  // static memory: [memory ‖ S]
      time_encoder_(config.time_dim),
      memory_updater_(2 * memory_dim_ + edge_dim_ + time_dim_, memory_dim_, config.seed, 1),
      attention_(node_dim_, node_dim_ + time_dim_, node_dim_ + edge_dim_ + time_dim_, embed_dim_,
                 config.heads, config.seed, 2),
      pred_w1_(make_param(2 * embed_dim_, embed_dim_, "pred.w1")),
      pred_b1_(make_param(1, embed_dim_, "pred.b1")),
      pred_w2_(make_param(embed_dim_, 1, "pred.w2")),
      pred_b2_(make_param(1, 1, "pred.b2")),
      time_proj_w_(make_param(1, memory_dim_, "time_proj.w")),
      time_proj_b_(make_param(1, memory_dim_, "time_proj.b")),
      static_memory_(events.nodes, config.static_dim) {
  if (config.static_dim > 0 && config.embedding != TgnEmbedding::kAttention)
    throw std::logic_error("tgn: the static memory joins the memory in the attention only");
  source_gap_statistics(events, gap_mean_, gap_std_);
  const PhiloxKey key = philox_key(config.seed, kStreamInit + 3);
  auto init = [&](Param& p, std::uint64_t off) {
    const float bound = float(1.0 / std::sqrt(double(p.value.rows())));
    for (std::int64_t i = 0; i < p.value.rows(); ++i)
      for (std::int64_t j = 0; j < p.value.cols(); ++j)
        p.value.at(i, j) =
            (2.f * philox_uniform(key, std::uint64_t(i) + off, std::uint32_t(j)) - 1.f) * bound;
  };
  init(pred_w1_, 0);
  init(pred_w2_, 1u << 20);
  reset();
}

// The time encoding's frequencies stay at TGN's initial geometric ladder unless asked: their
// gradients scale with raw time gaps (seconds, up to 1e6+), so Adam's fixed-size steps turn slow
// frequencies into fast ones within an epoch and the encoding into noise (measured on UCI:
// validation AP swings between 0.48 and 0.74 over 8 epochs with them learned, 0.84 steady with
// them fixed; GraphMixer, Cong et al. 2023, fixes them too).
std::vector<Param*> Tgn::params() {
  std::vector<Param*> out = time_encoder_.params();
  if (!config_.learn_time_frequencies) out.erase(out.begin());  // time.w
  for (Param* p : memory_updater_.params()) out.push_back(p);
  if (config_.embedding == TgnEmbedding::kAttention)
    for (Param* p : attention_.params()) out.push_back(p);
  if (config_.embedding == TgnEmbedding::kTime)
    for (Param* p : {&time_proj_w_, &time_proj_b_}) out.push_back(p);
  for (Param* p : {&pred_w1_, &pred_b1_, &pred_w2_, &pred_b2_}) out.push_back(p);
  if (static_memory_.dim() > 0) out.push_back(&static_memory_.param());  // static memory: last
  return out;
}

void Tgn::reset() {
  memory_.reset(events_, memory_dim_);
  messages_.reset(events_, memory_dim_, config_.mean_messages);
  pending_row_.assign(std::size_t(events_.nodes), -1);
  neighbor_row_.assign(std::size_t(events_.nodes), -1);
}

double Tgn::score(Backend& be, RecentSampler& sampler, const std::vector<std::int64_t>& ids,
                  BatchSlice slice, const std::vector<NodeId>& neg, bool train,
                  std::vector<float>* pos_scores, std::vector<float>* neg_scores) {
  const bool attention = config_.embedding == TgnEmbedding::kAttention;
  BatchShape& b = shape_;
  b.events = std::int64_t(ids.size());
  b.first = slice.begin;
  b.size = slice.size;
  b.negatives = b.events ? std::int64_t(neg.size()) / b.events : 1;
  b.queries = (2 + b.negatives) * b.size;
  b.neighbors = attention ? sampler.k() : 0;  // identity and time embeddings read no neighbours
  if (std::int64_t(neg.size()) != b.negatives * b.events || (train && b.negatives != 1))
    throw std::logic_error("tgn: negatives must be N per event, and 1 when training");
  index_pending();
  collect_queries(ids, neg);
  sample_neighbors(sampler, ids);
  encode_time_gaps(ids);
  update_memory(be);
  if (attention)
    embed_by_attention(be);
  else
    embed_by_projection(ids);
  const double loss = score_links(be, pos_scores, neg_scores);
  if (train) {
    backward_predictor(be);
    if (attention)
      backward_attention(be);
    else
      backward_projection();
    backward_memory_update(be);
  }
  return loss;
}

// Step 1's bookkeeping: only the batch's nodes are touched (the pending list, not a scan of every
// node's flag), so a batch costs the same on a million-node stream as on a small one; ascending
// ids keep the rows in a fixed order.
void Tgn::index_pending() {
  std::vector<NodeId>& pending = messages_.pending;
  std::sort(pending.begin(), pending.end());
  shape_.pending = std::int64_t(pending.size());
  for (std::int64_t i = 0; i < shape_.pending; ++i)
    pending_row_[std::size_t(pending[std::size_t(i)])] = std::int32_t(i);
}

// The slice's queries: sources, then destinations, then negative j of every event for each j.
void Tgn::collect_queries(const std::vector<std::int64_t>& ids, const std::vector<NodeId>& neg) {
  const std::int64_t lo = shape_.first, B = shape_.size, N = shape_.negatives;
  query_nodes_.resize(std::size_t(shape_.queries));
  for (std::int64_t i = 0; i < B; ++i) {
    query_nodes_[std::size_t(i)] = events_.src[ids[std::size_t(lo + i)]];
    query_nodes_[std::size_t(B + i)] = events_.dst[ids[std::size_t(lo + i)]];
    for (std::int64_t j = 0; j < N; ++j)
      query_nodes_[std::size_t(2 * B + j * B + i)] = neg[std::size_t((lo + i) * N + j)];
  }
}

// The time of the event that query i belongs to.
double Tgn::event_time(const std::vector<std::int64_t>& ids, std::int64_t query) const {
  return events_.time[ids[std::size_t(shape_.first + query % shape_.size)]];
}

void Tgn::sample_neighbors(RecentSampler& sampler, const std::vector<std::int64_t>& ids) {
  const std::int64_t Q = shape_.queries;
  if (config_.embedding != TgnEmbedding::kAttention) {
    neighbors_.count.assign(std::size_t(Q), 0);
  } else if (!config_.neighbors_before_batch) {  // strictly before each event's own time
    query_times_.resize(std::size_t(Q));
    for (std::int64_t i = 0; i < Q; ++i) query_times_[std::size_t(i)] = event_time(ids, i);
    sampler.sample(query_nodes_.data(), query_times_.data(), Q, neighbors_);
  } else {  // before the batch
    std::vector<EdgeId> limits(std::size_t(Q), ids[0]);
    sampler.sample_before(query_nodes_.data(), limits.data(), Q, neighbors_);
  }
}

// All time encodings in one pass: [0 for queries | Δt of neighbours | Δt of messages]. A pending
// node's messages: one ("last") or every message since its memory last changed ("mean"), rows
// message_begin_[p] .. message_begin_[p + 1] of the message block.
void Tgn::encode_time_gaps(const std::vector<std::int64_t>& ids) {
  const std::vector<NodeId>& pending = messages_.pending;
  const std::int64_t np = shape_.pending, Q = shape_.queries;
  const int k = shape_.neighbors;
  message_begin_.assign(std::size_t(np + 1), 0);
  for (std::int64_t p = 0; p < np; ++p)
    message_begin_[std::size_t(p + 1)] =
        message_begin_[std::size_t(p)] + messages_.count[std::size_t(pending[std::size_t(p)])];
  const std::int64_t nm = message_begin_[std::size_t(np)],
                     mb = Q + Q * k;  // messages, where their rows start
  shape_.message_codes = mb;
  gaps_.assign(std::size_t(mb + nm), 0.0);
  for (std::int64_t i = 0; i < Q; ++i)
    for (int j = 0; j < k; ++j)
      if (j < neighbors_.count[std::size_t(i)])
        gaps_[std::size_t(Q + i * k + j)] =
            event_time(ids, i) - neighbors_.time[std::size_t(i * k + j)];
  for (std::int64_t p = 0; p < np; ++p) {
    const NodeId v = pending[std::size_t(p)];
    for (std::int64_t m = message_begin_[std::size_t(p)]; m < message_begin_[std::size_t(p + 1)];
         ++m)
      gaps_[std::size_t(mb + m)] =
          (messages_.mean
               ? messages_.times[std::size_t(v)][std::size_t(m - message_begin_[std::size_t(p)])]
               : messages_.time[std::size_t(v)]) -
          memory_.last_update[std::size_t(v)];
  }
  time_encoder_.forward(gaps_.data(), std::int64_t(gaps_.size()), time_codes_);
}

// Step 1: the pending nodes' memory through the GRU, from their aggregated messages.
void Tgn::update_memory(Backend& be) {
  const std::vector<NodeId>& pending = messages_.pending;
  const std::int64_t np = shape_.pending, mb = shape_.message_codes;
  const std::int64_t dm = memory_dim_, de = edge_dim_, dt = time_dim_;
  gru_input_.resize(np, 2 * dm + de + dt);
  gru_prev_.resize(np, dm);
#pragma omp parallel for schedule(static) if (np > 64)
  for (std::int64_t p = 0; p < np; ++p) {
    const NodeId v = pending[std::size_t(p)];
    float* r = gru_input_.data() + p * gru_input_.cols();
    // Stored sums over the node's messages, divided by their count (1 for "last").
    const std::int64_t m0 = message_begin_[std::size_t(p)],
                       cnt = message_begin_[std::size_t(p + 1)] - m0;
    const float inv = 1.f / float(cnt);
    std::copy_n(messages_.self.data() + v * dm, dm, r);
    for (std::int64_t c = 0; c < dm; ++c) r[dm + c] = messages_.other.data()[v * dm + c] * inv;
    for (std::int64_t c = 0; c < de; ++c) r[2 * dm + c] = messages_.edge.data()[v * de + c] * inv;
    float* rt = r + 2 * dm + de;
    std::copy_n(time_codes_.data() + (mb + m0) * dt, dt, rt);
    for (std::int64_t m = 1; m < cnt; ++m)
      for (std::int64_t c = 0; c < dt; ++c) rt[c] += time_codes_.data()[(mb + m0 + m) * dt + c];
    if (cnt > 1)
      for (std::int64_t c = 0; c < dt; ++c) rt[c] *= inv;
    std::copy_n(memory_.rows.data() + v * dm, dm, gru_prev_.data() + p * dm);
  }
  if (np > 0)
    memory_updater_.forward(be, gru_input_.view(), gru_prev_.view(), updated_memory_);
  else
    updated_memory_.resize(0, dm);
}

// A node's memory as this batch sees it: updated when it was pending, stored otherwise.
const float* Tgn::memory_of(NodeId v) const {
  const std::int32_t p = pending_row_[std::size_t(v)];
  return p >= 0 ? updated_memory_.data() + std::int64_t(p) * memory_dim_
                : memory_.rows.data() + std::int64_t(v) * memory_dim_;
}

// Step 2 with attention. Keys and values are [memory of the neighbour ‖ edge features ‖ φ(Δt)];
// the memory part goes to the attention once per distinct neighbour of the batch. With the
// static memory a node's part is [memory ‖ S] (dn = dm + D wide) in the queries, the merger's
// input and the neighbours' rows.
void Tgn::embed_by_attention(Backend& be) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_, dt = time_dim_, de = edge_dim_,
                     dn = node_dim_;
  const int k = shape_.neighbors;
  queries_.resize(Q, dn + dt);
  query_memory_.resize(Q, dn);
  slot_neighbor_.assign(static_cast<std::size_t>(Q * k), -1);
  distinct_neighbors_.clear();
  for (std::int64_t i = 0; i < Q; ++i)
    for (int j = 0; j < neighbors_.count[std::size_t(i)]; ++j) {
      const std::size_t r = std::size_t(i * k + j);
      const NodeId v = neighbors_.node[r];
      if (neighbor_row_[std::size_t(v)] < 0) {
        neighbor_row_[std::size_t(v)] = std::int32_t(distinct_neighbors_.size());
        distinct_neighbors_.push_back(v);
      }
      slot_neighbor_[r] = neighbor_row_[std::size_t(v)];
    }
  const std::int64_t nu = std::int64_t(distinct_neighbors_.size());
  neighbor_memory_.resize(nu, dn);
  for (std::int64_t u = 0; u < nu; ++u) {
    std::copy_n(memory_of(distinct_neighbors_[std::size_t(u)]), dm,
                neighbor_memory_.data() + u * dn);
    neighbor_row_[std::size_t(distinct_neighbors_[std::size_t(u)])] = -1;
  }
  slot_features_.resize(Q * k, de + dt);
#pragma omp parallel for schedule(static) if (Q > 64)
  for (std::int64_t i = 0; i < Q; ++i) {
    const float* m = memory_of(query_nodes_[std::size_t(i)]);
    std::copy_n(m, dm, queries_.data() + i * queries_.cols());
    std::copy_n(time_codes_.data() + i * dt, dt, queries_.data() + i * queries_.cols() + dn);
    std::copy_n(m, dm, query_memory_.data() + i * dn);
    for (int j = 0; j < neighbors_.count[std::size_t(i)]; ++j) {  // padded slots are never read
      const std::size_t r = std::size_t(i * k + j);
      float* row = slot_features_.data() + std::int64_t(r) * slot_features_.cols();
      if (de) std::copy_n(events_.efeat + neighbors_.event[r] * de, de, row);
      std::copy_n(time_codes_.data() + (Q + std::int64_t(r)) * dt, dt, row + de);
    }
  }
  // Static memory call site (static_memory.h): S's rows after the memory's columns.
  static_memory_.fill(query_nodes_.data(), Q, queries_, dm);
  static_memory_.fill(query_nodes_.data(), Q, query_memory_, dm);
  static_memory_.fill(distinct_neighbors_.data(), nu, neighbor_memory_, dm);
  KeyValueInput kv;
  kv.nodes = neighbor_memory_.view();
  kv.node = slot_neighbor_.data();
  kv.slots = slot_features_.view();
  attention_.forward(be, queries_.view(), kv, k, query_memory_.view(), embeddings_);
}

// Step 2 without attention. identity: z = memory; time (JODIE): z = memory ⊙ (1 + w δ + b), δ
// the standardised time since the node's memory last changed.
void Tgn::embed_by_projection(const std::vector<std::int64_t>& ids) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_, dz = embed_dim_;
  embeddings_.resize(Q, dz);
  query_gaps_.resize(std::size_t(Q));
  for (std::int64_t i = 0; i < Q; ++i) {
    const NodeId v = query_nodes_[std::size_t(i)];
    const float* m = memory_of(v);
    float* zi = embeddings_.data() + i * dz;
    if (config_.embedding == TgnEmbedding::kIdentity) {
      std::copy_n(m, dm, zi);
      continue;
    }
    const double since = pending_row_[std::size_t(v)] >= 0 ? messages_.time[std::size_t(v)]
                                                           : memory_.last_update[std::size_t(v)];
    const float delta = float((event_time(ids, i) - since - gap_mean_) / gap_std_);
    query_gaps_[std::size_t(i)] = delta;
    for (std::int64_t c = 0; c < dm; ++c)
      zi[c] = m[c] * (1.f + time_proj_w_.value.data()[c] * delta + time_proj_b_.value.data()[c]);
  }
}

// Step 3: the MLP's logits for (src, dst) then (src, negative j) for each j, their sigmoid
// scores, the loss and d(loss)/d(logit).
double Tgn::score_links(Backend& be, std::vector<float>* pos_scores,
                        std::vector<float>* neg_scores) {
  const std::int64_t B = shape_.size, N = shape_.negatives, dz = embed_dim_;
  const std::int64_t pairs = (1 + N) * B;
  pairs_.resize(pairs, 2 * dz);
  logits_.resize(pairs, 1);
#pragma omp parallel for schedule(static) if (B > 64)
  for (std::int64_t i = 0; i < B; ++i) {
    std::copy_n(embeddings_.data() + i * dz, dz, pairs_.data() + i * 2 * dz);
    std::copy_n(embeddings_.data() + (B + i) * dz, dz, pairs_.data() + i * 2 * dz + dz);
    for (std::int64_t j = 0; j < N; ++j) {
      const std::int64_t row = (1 + j) * B + i;
      std::copy_n(embeddings_.data() + i * dz, dz, pairs_.data() + row * 2 * dz);
      std::copy_n(embeddings_.data() + (2 * B + j * B + i) * dz, dz,
                  pairs_.data() + row * 2 * dz + dz);
    }
  }
  hidden_.resize(pairs, dz);
  be.gemm(false, false, 1.f, pairs_.view(), pred_w1_.value.view(), 0.f, hidden_.view());
  be.add_bias(hidden_.view(), pred_b1_.value.data());
  be.relu(hidden_.view());
  be.gemm(false, false, 1.f, hidden_.view(), pred_w2_.value.view(), 0.f, logits_.view());
  be.add_bias(logits_.view(), pred_b2_.value.data());
  double loss = 0;
  const double all = double(shape_.events);
  d_logits_.resize(pairs, 1);
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double x = logits_.data()[i], y = i < B ? 1.0 : 0.0;
    loss += (std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0) - x * y) / all;
    const double sg = 1.0 / (1.0 + std::exp(-x));
    d_logits_.data()[i] = float((sg - y) / all);
    (i < B ? pos_scores : neg_scores)->push_back(float(sg));
  }
  return loss;
}

// Zeroes every gradient, then backward through the MLP into d_embeddings_ (one negative).
void Tgn::backward_predictor(Backend& be) {
  const std::int64_t B = shape_.size, dz = embed_dim_;
  for (Param* p : params()) p->grad.fill(0.f);
  be.gemm(true, false, 1.f, hidden_.view(), d_logits_.view(), 1.f, pred_w2_.grad.view());
  pred_b2_.grad.data()[0] += std::accumulate(d_logits_.data(), d_logits_.data() + 2 * B, 0.f);
  d_hidden_.resize(2 * B, dz);
  d_pairs_.resize(2 * B, 2 * dz);
  d_embeddings_.resize(shape_.queries, dz);
  be.gemm(false, true, 1.f, d_logits_.view(), pred_w2_.value.view(), 0.f, d_hidden_.view());
  be.relu_backward(hidden_.view(), d_hidden_.view());
  be.gemm(true, false, 1.f, pairs_.view(), d_hidden_.view(), 1.f, pred_w1_.grad.view());
  std::vector<float> column_sums(static_cast<std::size_t>(dz));
  be.column_sums(d_hidden_.view(), column_sums.data());
  for (std::int64_t j = 0; j < dz; ++j) pred_b1_.grad.data()[j] += column_sums[std::size_t(j)];
  be.gemm(false, true, 1.f, d_hidden_.view(), pred_w1_.value.view(), 0.f, d_pairs_.view());
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t c = 0; c < dz; ++c) {
      d_embeddings_.at(i, c) = d_pairs_.at(i, c) + d_pairs_.at(B + i, c);
      d_embeddings_.at(B + i, c) = d_pairs_.at(i, dz + c);
      d_embeddings_.at(2 * B + i, c) = d_pairs_.at(B + i, dz + c);
    }
  d_time_codes_.resize(std::int64_t(gaps_.size()), time_dim_);
  d_updated_memory_.resize(shape_.pending, memory_dim_);
  d_time_codes_.fill(0.f);
  d_updated_memory_.fill(0.f);
}

// Adds g to the gradient of v's updated memory; memory from earlier batches is detached.
void Tgn::add_memory_gradient(NodeId v, const float* g) {
  const std::int32_t p = pending_row_[std::size_t(v)];
  if (p < 0) return;
  float* d = d_updated_memory_.data() + std::int64_t(p) * memory_dim_;
  for (std::int64_t c = 0; c < memory_dim_; ++c) d[c] += g[c];
}

// Backward through the attention into the memories and the queries' and neighbours' time codes.
void Tgn::backward_attention(Backend& be) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_, dt = time_dim_, de = edge_dim_,
                     dn = node_dim_;
  const int k = shape_.neighbors;
  attention_.backward(be, d_embeddings_.view(), d_queries_, d_neighbor_memory_, d_slots_,
                      d_query_memory_);
  for (std::int64_t i = 0; i < Q; ++i) {
    add_memory_gradient(query_nodes_[std::size_t(i)], d_queries_.data() + i * d_queries_.cols());
    add_memory_gradient(query_nodes_[std::size_t(i)], d_query_memory_.data() + i * dn);
    std::copy_n(d_queries_.data() + i * d_queries_.cols() + dn, dt, d_time_codes_.data() + i * dt);
    for (int j = 0; j < neighbors_.count[std::size_t(i)]; ++j) {
      const std::int64_t r = i * k + j;
      std::copy_n(d_slots_.data() + r * d_slots_.cols() + de, dt,
                  d_time_codes_.data() + (Q + r) * dt);
    }
  }
  const std::int64_t nu = std::int64_t(distinct_neighbors_.size());
  for (std::int64_t u = 0; u < nu; ++u)
    add_memory_gradient(distinct_neighbors_[std::size_t(u)], d_neighbor_memory_.data() + u * dn);
  // Static memory call site (static_memory.h): S's columns of the same three gradients.
  static_memory_.add_gradient(query_nodes_.data(), Q, d_queries_, dm);
  static_memory_.add_gradient(query_nodes_.data(), Q, d_query_memory_, dm);
  static_memory_.add_gradient(distinct_neighbors_.data(), nu, d_neighbor_memory_, dm);
}

// Backward through the identity or time projection into the memories (and w, b of the latter).
void Tgn::backward_projection() {
  const std::int64_t dm = memory_dim_, dz = embed_dim_;
  std::vector<float> g(static_cast<std::size_t>(dm));
  for (std::int64_t i = 0; i < shape_.queries; ++i) {
    const NodeId v = query_nodes_[std::size_t(i)];
    const float* gz = d_embeddings_.data() + i * dz;
    if (config_.embedding == TgnEmbedding::kIdentity) {
      add_memory_gradient(v, gz);
      continue;
    }
    const float* m = memory_of(v);
    const float delta = query_gaps_[std::size_t(i)];
    for (std::int64_t c = 0; c < dm; ++c) {
      g[std::size_t(c)] =
          gz[c] * (1.f + time_proj_w_.value.data()[c] * delta + time_proj_b_.value.data()[c]);
      time_proj_w_.grad.data()[c] += gz[c] * m[c] * delta;
      time_proj_b_.grad.data()[c] += gz[c] * m[c];
    }
    add_memory_gradient(v, g.data());
  }
}

// Backward through the GRU into the messages' time codes, then through the time encoding.
void Tgn::backward_memory_update(Backend& be) {
  const std::int64_t np = shape_.pending, mb = shape_.message_codes, dt = time_dim_;
  if (np > 0) {
    memory_updater_.backward(be, d_updated_memory_.view(), d_gru_input_, d_gru_prev_);
    for (std::int64_t p = 0; p < np; ++p) {
      const std::int64_t m0 = message_begin_[std::size_t(p)],
                         cnt = message_begin_[std::size_t(p + 1)] - m0;
      const float* g = d_gru_input_.data() + p * d_gru_input_.cols() + 2 * memory_dim_ + edge_dim_;
      for (std::int64_t m = 0; m < cnt; ++m)
        for (std::int64_t c = 0; c < dt; ++c)
          d_time_codes_.data()[(mb + m0 + m) * dt + c] = g[c] / float(cnt);
    }
  }
  time_encoder_.backward(d_time_codes_);
}

void Tgn::commit(const std::vector<std::int64_t>& ids) {
  std::vector<NodeId>& pending = messages_.pending;
  for (std::int64_t p = 0; p < shape_.pending; ++p) {
    const NodeId v = pending[std::size_t(p)];
    std::copy_n(updated_memory_.data() + p * memory_dim_, memory_dim_, memory_.row(v));
    memory_.last_update[std::size_t(v)] = messages_.time[std::size_t(v)];
    messages_.clear(v);
    pending_row_[std::size_t(v)] = -1;
  }
  pending.clear();
  messages_.store(events_, ids, memory_);
}

}  // namespace halo

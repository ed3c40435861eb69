// The TGN model on one replica (see tgn.h).
#include "halo/gnn/temporal/tgn.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

// Appends n slots (-1) to an index pack; returns where they start.
std::int64_t take_slots(std::vector<std::int32_t>& h, std::int64_t n) {
  const std::int64_t at = std::int64_t(h.size());
  h.resize(std::size_t(at + n), -1);
  return at;
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
  // Event ids index the edge features' rows as int32 (the row ops' index type).
  if (events.events > std::numeric_limits<std::int32_t>::max())
    throw std::logic_error("tgn: more than 2^31 - 1 events");
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

double Tgn::score(Backend& be, RecentSampler& sampler, const std::vector<std::int64_t>& ids,
                  BatchSlice slice, const std::vector<NodeId>& neg, bool train,
                  std::vector<float>* pos_scores, std::vector<float>* neg_scores) {
  const bool attention = config_.embedding == TgnEmbedding::kAttention;
  if (be.device() != device_)
    throw std::logic_error("tgn: the backend computes elsewhere than the model's memory");
  backend_ = &be;
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
  encode_time_gaps(be, ids);
  index_batch(be, train);
  update_memory(be);
  if (attention)
    embed_by_attention(be);
  else
    embed_by_projection(be, ids);
  const double loss = score_links(be, train, pos_scores, neg_scores);
  if (train) {
    backward_predictor(be);
    if (attention)
      backward_attention(be);
    else
      backward_projection(be);
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
void Tgn::encode_time_gaps(Backend& be, const std::vector<std::int64_t>& ids) {
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
  time_encoder_.forward(be, gaps_.data(), std::int64_t(gaps_.size()), time_codes_);
}

// Every int32 index array of the batch, built on the host and uploaded in one copy: the pending
// nodes and their messages' rows, the queries' rows in the stored or the updated memory, the
// neighbours' (distinct ones once), the predictor's pairs and, when training, the routing of the
// memory gradients.
void Tgn::index_batch(Backend& be, bool train) {
  const std::vector<NodeId>& pending = messages_.pending;
  const std::int64_t np = shape_.pending, Q = shape_.queries, B = shape_.size,
                     pairs = (1 + shape_.negatives) * B;
  std::vector<std::int32_t>& h = index_.host();
  h.clear();
  ix_.pending = take_slots(h, np);
  ix_.msg_first = take_slots(h, np);
  ix_.msg_count = take_slots(h, np);
  for (std::int64_t p = 0; p < np; ++p) {
    h[std::size_t(ix_.pending + p)] = pending[std::size_t(p)];
    h[std::size_t(ix_.msg_first + p)] = std::int32_t(message_begin_[std::size_t(p)]);
    h[std::size_t(ix_.msg_count + p)] =
        std::int32_t(message_begin_[std::size_t(p + 1)] - message_begin_[std::size_t(p)]);
  }
  ix_.query_nodes = take_slots(h, Q);
  std::copy_n(query_nodes_.data(), Q, h.data() + ix_.query_nodes);
  ix_.q_stored = take_slots(h, Q);
  ix_.q_updated = take_slots(h, Q);
  route_memory_rows(h, query_nodes_.data(), Q, ix_.q_stored, ix_.q_updated);
  if (config_.embedding == TgnEmbedding::kAttention) index_neighbors(h, train);
  // Pair row (1 + j) B + i reads the source i on its left; its right is embedding row B + row.
  ix_.pair_left = take_slots(h, pairs);
  for (std::int64_t r = 0; r < pairs; ++r) h[std::size_t(ix_.pair_left + r)] = std::int32_t(r % B);
  if (host_tables_) {
    stage_rows(h);
  } else {
    memory_rows_ = memory_.rows.view();
    message_self_ = messages_.self.view();
    message_other_ = messages_.other.view();
    message_edge_ = messages_.edge.view();
  }
  index_at_ = index_.place(be.device());
}

// A node's memory as this batch sees it: updated when it was pending, stored otherwise; so each
// row list is two, one per source, -1 where the other source holds the row.
void Tgn::route_memory_rows(std::vector<std::int32_t>& h, const NodeId* nodes, std::int64_t n,
                            std::int64_t stored, std::int64_t updated) const {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t p = pending_row_[std::size_t(nodes[i])];
    h[std::size_t((p >= 0 ? updated : stored) + i)] = p >= 0 ? p : nodes[i];
  }
}

// The attention's part of the index pack: each slot's event and distinct-neighbour row (the
// distinct neighbours in order of first appearance), their memory rows and, when training, the
// routing of the memory gradients.
void Tgn::index_neighbors(std::vector<std::int32_t>& h, bool train) {
  const std::int64_t Q = shape_.queries;
  const int k = shape_.neighbors;
  slot_neighbor_.assign(static_cast<std::size_t>(Q * k), -1);
  distinct_neighbors_.clear();
  ix_.slot_event = take_slots(h, Q * k);
  for (std::int64_t i = 0; i < Q; ++i)
    for (int j = 0; j < neighbors_.count[std::size_t(i)]; ++j) {
      const std::size_t r = std::size_t(i * k + j);
      const NodeId v = neighbors_.node[r];
      if (neighbor_row_[std::size_t(v)] < 0) {
        neighbor_row_[std::size_t(v)] = std::int32_t(distinct_neighbors_.size());
        distinct_neighbors_.push_back(v);
      }
      slot_neighbor_[r] = neighbor_row_[std::size_t(v)];
      h[std::size_t(ix_.slot_event) + r] = std::int32_t(neighbors_.event[r]);
    }
  const std::int64_t nu = std::int64_t(distinct_neighbors_.size());
  for (NodeId v : distinct_neighbors_) neighbor_row_[std::size_t(v)] = -1;
  ix_.nb_nodes = take_slots(h, nu);
  std::copy_n(distinct_neighbors_.data(), nu, h.data() + ix_.nb_nodes);
  ix_.nb_stored = take_slots(h, nu);
  ix_.nb_updated = take_slots(h, nu);
  route_memory_rows(h, distinct_neighbors_.data(), nu, ix_.nb_stored, ix_.nb_updated);
  if (!train) return;
  // The memory gradients in the order the host loop added them: each query's two (through its
  // query row, then its merger input), query by query, then each distinct neighbour's. One
  // scatter of rows gathered in that order adds them in that order: the same float sums.
  const std::int64_t ng = 2 * Q + nu;
  ix_.g_q = take_slots(h, ng);
  ix_.g_m = take_slots(h, ng);
  ix_.g_n = take_slots(h, ng);
  ix_.g_dst = take_slots(h, ng);
  for (std::int64_t i = 0; i < Q; ++i) {
    h[std::size_t(ix_.g_q + 2 * i)] = std::int32_t(i);
    h[std::size_t(ix_.g_m + 2 * i + 1)] = std::int32_t(i);
    const std::int32_t p = h[std::size_t(ix_.q_updated + i)];
    h[std::size_t(ix_.g_dst + 2 * i)] = p;
    h[std::size_t(ix_.g_dst + 2 * i + 1)] = p;
  }
  for (std::int64_t u = 0; u < nu; ++u) {
    h[std::size_t(ix_.g_n + 2 * Q + u)] = std::int32_t(u);
    h[std::size_t(ix_.g_dst + 2 * Q + u)] = h[std::size_t(ix_.nb_updated + u)];
  }
}

// Step 1: the pending nodes' memory through the GRU, from their aggregated messages: [self ‖
// other / count ‖ edge / count ‖ mean of the messages' time codes], the sums stored per node.
void Tgn::update_memory(Backend& be) {
  const std::int64_t np = shape_.pending, mb = shape_.message_codes;
  const std::int64_t dm = memory_dim_, de = edge_dim_, dt = time_dim_;
  updated_memory_.resize(0, dm);
  if (np == 0) return;
  const std::int64_t nm = message_begin_[std::size_t(np)];
  gru_input_.resize(np, 2 * dm + de + dt);
  gru_prev_.resize(np, dm);
  const std::int32_t *pending = at(ix_.pending), *count = at(ix_.msg_count);
  be.gather_rows_into(message_self_, pending, np, gru_input_.view(), 0);
  be.sum_rows_into(message_other_, pending, nullptr, count, np, gru_input_.view(), dm);
  if (de) be.sum_rows_into(message_edge_, pending, nullptr, count, np, gru_input_.view(), 2 * dm);
  be.sum_rows_into(time_codes_.view().rows_range(mb, mb + nm), at(ix_.msg_first), count, count, np,
                   gru_input_.view(), 2 * dm + de);
  be.gather_rows_into(memory_rows_, pending, np, gru_prev_.view(), 0);
  memory_updater_.forward(be, gru_input_.view(), gru_prev_.view(), updated_memory_);
}

// Step 2 with attention. Keys and values are [memory of the neighbour ‖ edge features ‖ φ(Δt)];
// the memory part goes to the attention once per distinct neighbour of the batch. With the
// static memory a node's part is [memory ‖ S] (dn = dm + D wide) in the queries, the merger's
// input and the neighbours' rows.
void Tgn::embed_by_attention(Backend& be) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_, dt = time_dim_, de = edge_dim_,
                     dn = node_dim_, np = shape_.pending;
  const int k = shape_.neighbors;
  const std::int64_t nu = std::int64_t(distinct_neighbors_.size());
  queries_.resize(Q, dn + dt);
  query_memory_.resize(Q, dn);
  neighbor_memory_.resize(nu, dn);
  be.gather_rows_into(memory_rows_, at(ix_.q_stored), Q, queries_.view(), 0);
  be.gather_rows_into(memory_rows_, at(ix_.nb_stored), nu, neighbor_memory_.view(), 0);
  if (np > 0) {
    be.gather_rows_into(updated_memory_.view(), at(ix_.q_updated), Q, queries_.view(), 0);
    be.gather_rows_into(updated_memory_.view(), at(ix_.nb_updated), nu, neighbor_memory_.view(), 0);
  }
  // Static memory (static_memory.h): S's rows after the memory's columns.
  static_memory_.fill(be, at(ix_.query_nodes), Q, queries_.view(), dm);
  static_memory_.fill(be, at(ix_.nb_nodes), nu, neighbor_memory_.view(), dm);
  // The merger's input is the query's node part: the same floats, copied.
  be.copy_columns(queries_.view(), 0, query_memory_.view(), 0, dn, false);
  be.copy_columns(time_codes_.view().rows_range(0, Q), 0, queries_.view(), dn, dt, false);
  // A slot's columns: [edge features ‖ φ(Δt)], or without edge features its time code alone,
  // which the attention reads from the codes' rows in place. Padded slots get φ(0) and keep stale
  // edge columns: the attention never reads them.
  const MatrixView slot_codes = time_codes_.view().rows_range(Q, Q + Q * k);
  KeyValueInput kv;
  kv.nodes = neighbor_memory_.view();
  kv.node = slot_neighbor_.data();
  kv.slots = slot_codes;
  if (de > 0) {
    slot_features_.resize(Q * k, de + dt);
    if (host_tables_)
      be.copy_columns(slot_efeat_, 0, slot_features_.view(), 0, de, false);
    else
      be.gather_rows_into(efeat(), at(ix_.slot_event), Q * k, slot_features_.view(), 0);
    be.copy_columns(slot_codes, 0, slot_features_.view(), de, dt, false);
    kv.slots = slot_features_.view();
  }
  attention_.forward(be, queries_.view(), kv, k, query_memory_.view(), embeddings_);
}

// Step 2 without attention. identity: z = memory; time (JODIE): z = memory ⊙ (1 + w δ + b), δ
// the standardised time since the node's memory last changed.
void Tgn::embed_by_projection(Backend& be, const std::vector<std::int64_t>& ids) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_;
  Matrix& m = config_.embedding == TgnEmbedding::kIdentity ? embeddings_ : query_rows_;
  m.resize(Q, dm);
  be.gather_rows_into(memory_rows_, at(ix_.q_stored), Q, m.view(), 0);
  if (shape_.pending > 0)
    be.gather_rows_into(updated_memory_.view(), at(ix_.q_updated), Q, m.view(), 0);
  if (config_.embedding == TgnEmbedding::kIdentity) return;
  query_gaps_.resize(std::size_t(Q));
  for (std::int64_t i = 0; i < Q; ++i) {
    const NodeId v = query_nodes_[std::size_t(i)];
    const double since = pending_row_[std::size_t(v)] >= 0 ? messages_.time[std::size_t(v)]
                                                           : memory_.last_update[std::size_t(v)];
    query_gaps_[std::size_t(i)] = float((event_time(ids, i) - since - gap_mean_) / gap_std_);
  }
  query_gaps_dev_.resize(Q, 1);
  copy_floats(device_, query_gaps_dev_.data(), Device::kCpu, query_gaps_.data(), Q);
  embeddings_.resize(Q, dm);
  be.time_projection(query_rows_.view(), query_gaps_dev_.data(), time_proj_w_.value.data(),
                     time_proj_b_.value.data(), embeddings_.view());
}

// Step 3: the MLP's logits for (src, dst) then (src, negative j) for each j, their sigmoid
// scores, the loss and d(loss)/d(logit). The loss is the host's loop over the logits brought
// back (a few hundred numbers): the same bits on every backend.
double Tgn::score_links(Backend& be, bool train, std::vector<float>* pos_scores,
                        std::vector<float>* neg_scores) {
  const std::int64_t B = shape_.size, dz = embed_dim_;
  const std::int64_t pairs = (1 + shape_.negatives) * B;
  pairs_.resize(pairs, 2 * dz);
  logits_.resize(pairs, 1);
  be.gather_rows_into(embeddings_.view(), at(ix_.pair_left), pairs, pairs_.view(), 0);
  be.copy_columns(embeddings_.view().rows_range(B, B + pairs), 0, pairs_.view(), dz, dz, false);
  hidden_.resize(pairs, dz);
  be.gemm(false, false, 1.f, pairs_.view(), pred_w1_.value.view(), 0.f, hidden_.view());
  be.add_bias(hidden_.view(), pred_b1_.value.data());
  be.relu(hidden_.view());
  be.gemm(false, false, 1.f, hidden_.view(), pred_w2_.value.view(), 0.f, logits_.view());
  be.add_bias(logits_.view(), pred_b2_.value.data());
  logits_host_.resize(std::size_t(pairs));
  copy_floats(Device::kCpu, logits_host_.data(), device_, logits_.data(), pairs);
  double loss = 0;
  const double all = double(shape_.events);
  d_logits_host_.resize(std::size_t(pairs + 1));
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double x = logits_host_[std::size_t(i)], y = i < B ? 1.0 : 0.0;
    loss += (std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0) - x * y) / all;
    const double sg = 1.0 / (1.0 + std::exp(-x));
    d_logits_host_[std::size_t(i)] = float((sg - y) / all);
    (i < B ? pos_scores : neg_scores)->push_back(float(sg));
  }
  if (train) {
    // pred.b2's gradient rides along: 0 + the float sum of d(logits) (training has 2B pairs).
    d_logits_host_[std::size_t(pairs)] =
        0.f + std::accumulate(d_logits_host_.data(), d_logits_host_.data() + 2 * B, 0.f);
    d_logits_.resize(pairs + 1, 1);
    copy_floats(device_, d_logits_.data(), Device::kCpu, d_logits_host_.data(), pairs + 1);
  }
  return loss;
}

// Zeroes every gradient, then backward through the MLP into d_embeddings_ (one negative).
void Tgn::backward_predictor(Backend& be) {
  const std::int64_t B = shape_.size, dz = embed_dim_;
  for (Param* p : params()) p->grad.fill(0.f);
  const MatrixView d_logits = d_logits_.view().rows_range(0, 2 * B);
  be.gemm(true, false, 1.f, hidden_.view(), d_logits, 1.f, pred_w2_.grad.view());
  be.copy(d_logits_.view().rows_range(2 * B, 2 * B + 1), pred_b2_.grad.view());
  d_hidden_.resize(2 * B, dz);
  d_pairs_.resize(2 * B, 2 * dz);
  d_embeddings_.resize(shape_.queries, dz);
  be.gemm(false, true, 1.f, d_logits, pred_w2_.value.view(), 0.f, d_hidden_.view());
  be.relu_backward(hidden_.view(), d_hidden_.view());
  be.gemm(true, false, 1.f, pairs_.view(), d_hidden_.view(), 1.f, pred_w1_.grad.view());
  column_sums_.resize(1, dz);
  be.column_sums(d_hidden_.view(), column_sums_.data());
  be.add(column_sums_.view(), pred_b1_.grad.view());  // 0 + the sums, as the host's +=
  be.gemm(false, true, 1.f, d_hidden_.view(), pred_w1_.value.view(), 0.f, d_pairs_.view());
  // Source i: its positive pair's left + its negative pair's left; destination and negative i:
  // their pairs' right halves (rows i and B + i of d_pairs_, in that order).
  const MatrixView dp = d_pairs_.view(), demb = d_embeddings_.view();
  be.copy_columns(dp.rows_range(0, B), 0, demb.rows_range(0, B), 0, dz, false);
  be.copy_columns(dp.rows_range(B, 2 * B), 0, demb.rows_range(0, B), 0, dz, true);
  be.copy_columns(dp, dz, demb.rows_range(B, 3 * B), 0, dz, false);
  d_time_codes_.resize(std::int64_t(gaps_.size()), time_dim_);
  d_updated_memory_.resize(shape_.pending, memory_dim_);
  // With attention every row of the codes' gradient is written before it is read (the queries'
  // and the slots' by backward_attention, padded slots as zeros; the messages' by spread_rows):
  // zeroing them first would be a pass over the whole block for nothing.
  if (config_.embedding != TgnEmbedding::kAttention) d_time_codes_.fill(0.f);
  d_updated_memory_.fill(0.f);
}

// Backward through the attention into the memories and the queries' and neighbours' time codes.
// Memory from earlier batches is detached: only pending nodes' rows take gradients.
void Tgn::backward_attention(Backend& be) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_, dt = time_dim_, de = edge_dim_,
                     dn = node_dim_;
  const int k = shape_.neighbors;
  const std::int64_t nu = std::int64_t(distinct_neighbors_.size());
  // Without edge features the slots' gradients are their time codes' rows: written in place.
  const MatrixView d_slot_codes = d_time_codes_.view().rows_range(Q, Q + Q * k);
  if (de > 0)
    attention_.backward(be, d_embeddings_.view(), d_queries_, d_neighbor_memory_, d_slots_,
                        d_query_memory_);
  else
    attention_.backward(be, d_embeddings_.view(), d_queries_, d_neighbor_memory_, d_slot_codes,
                        d_query_memory_);
  if (shape_.pending > 0) {  // index_batch states the order
    const std::int64_t ng = 2 * Q + nu;
    memory_grads_.resize(ng, dn + dt);
    be.gather_rows_into(d_queries_.view(), at(ix_.g_q), ng, memory_grads_.view(), 0);
    be.gather_rows_into(d_query_memory_.view(), at(ix_.g_m), ng, memory_grads_.view(), 0);
    if (nu > 0)
      be.gather_rows_into(d_neighbor_memory_.view(), at(ix_.g_n), ng, memory_grads_.view(), 0);
    be.scatter_add_rows_from(memory_grads_.view(), 0, dm, at(ix_.g_dst), ng,
                             d_updated_memory_.view());
  }
  // The time codes' gradients; padded slots' rows of d_slots_ are zero, as the codes' were.
  be.copy_columns(d_queries_.view(), dn, d_time_codes_.view().rows_range(0, Q), 0, dt, false);
  if (de > 0) be.copy_columns(d_slots_.view(), de, d_slot_codes, 0, dt, false);
  // Static memory (static_memory.h): S's columns of the same three gradients.
  static_memory_.add_gradient(be, at(ix_.query_nodes), Q, d_queries_.view(), dm);
  static_memory_.add_gradient(be, at(ix_.query_nodes), Q, d_query_memory_.view(), dm);
  static_memory_.add_gradient(be, at(ix_.nb_nodes), nu, d_neighbor_memory_.view(), dm);
}

// Backward through the identity or time projection into the memories (and w, b of the latter),
// query by query in order.
void Tgn::backward_projection(Backend& be) {
  const std::int64_t Q = shape_.queries, dm = memory_dim_;
  if (config_.embedding == TgnEmbedding::kTime)
    be.time_projection_backward(query_rows_.view(), query_gaps_dev_.data(),
                                time_proj_w_.value.data(), time_proj_b_.value.data(),
                                d_embeddings_.view(), d_embeddings_.view(),
                                time_proj_w_.grad.data(), time_proj_b_.grad.data());
  if (shape_.pending > 0)
    be.scatter_add_rows_from(d_embeddings_.view(), 0, dm, at(ix_.q_updated), Q,
                             d_updated_memory_.view());
}

// Backward through the GRU into the messages' time codes, then through the time encoding.
void Tgn::backward_memory_update(Backend& be) {
  const std::int64_t np = shape_.pending, mb = shape_.message_codes;
  if (np > 0) {
    memory_updater_.backward(be, d_updated_memory_.view(), d_gru_input_, d_gru_prev_);
    be.spread_rows(d_gru_input_.view(), 2 * memory_dim_ + edge_dim_, at(ix_.msg_first),
                   at(ix_.msg_count), np,
                   d_time_codes_.view().rows_range(mb, mb + message_begin_[std::size_t(np)]));
  }
  time_encoder_.backward(be, d_time_codes_.view());
}

}  // namespace halo

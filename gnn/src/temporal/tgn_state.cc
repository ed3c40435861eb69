// The TGN model's node state (see tgn.h): where it lives (to_device, --memory-on), each batch's
// staged rows when it stays in host memory, and commit(), which keeps the updated memory and
// stores the batch's messages.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "halo/gnn/param_device.h"
#include "halo/gnn/temporal/tgn.h"

namespace halo {
namespace {

// m reallocated (empty) in memory d when it is elsewhere: for buffers whose contents each batch
// overwrites.
void place(Matrix& m, Device d) {
  if (m.device() == d) return;
  m = Matrix();
  m.set_device(d);
}

// m's contents copied to memory d (the old storage freed): for the node state.
void move_matrix(Matrix& m, Device d) {
  if (m.device() == d) return;
  Matrix moved;
  moved.set_device(d);
  moved.resize(m.rows(), m.cols());
  copy_floats(d, moved.data(), m.device(), m.data(), m.size());
  m = std::move(moved);
}

}  // namespace

void Tgn::to_device(Device d, TgnMemoryOn memory) {
  device_ = d;
  host_tables_ = memory == TgnMemoryOn::kHost;
  const Device tables = host_tables_ ? Device::kCpu : d;
  time_encoder_.to_device(d);
  memory_updater_.to_device(d);
  attention_.to_device(d);
  move_params({&pred_w1_, &pred_b1_, &pred_w2_, &pred_b2_, &time_proj_w_, &time_proj_b_}, d);
  move_param(static_memory_.param(), d);  // a parameter: where the optimiser steps it
  for (Matrix* m : {&memory_.rows, &messages_.self, &messages_.other, &messages_.edge})
    move_matrix(*m, tables);
  if (tables == Device::kCpu) efeat_dev_ = Matrix();
  if (tables != Device::kCpu && edge_dim_ > 0 && efeat_dev_.device() != d) {
    efeat_dev_ = Matrix();
    efeat_dev_.set_device(d);
    efeat_dev_.resize(events_.events, edge_dim_);
    copy_floats(d, efeat_dev_.data(), Device::kCpu, events_.efeat, efeat_dev_.size());
  }
  for (Matrix* m : {&time_codes_,     &gru_input_,      &gru_prev_,        &updated_memory_,
                    &queries_,        &query_memory_,   &neighbor_memory_, &slot_features_,
                    &query_gaps_dev_, &query_rows_,     &embeddings_,      &pairs_,
                    &hidden_,         &logits_,         &d_logits_,        &d_hidden_,
                    &d_pairs_,        &d_embeddings_,   &d_queries_,       &d_neighbor_memory_,
                    &d_slots_,        &d_query_memory_, &d_time_codes_,    &d_updated_memory_,
                    &d_gru_input_,    &d_gru_prev_,     &column_sums_,     &memory_grads_,
                    &staged_})
    place(*m, d);
  // commit() writes the tables where they are: its buffers live with them.
  for (Matrix* m : {&store_rows_, &store_sum_}) place(*m, tables);
  staged_row_.assign(host_tables_ ? std::size_t(events_.nodes) : 0, -1);
}

// The stream's edge features (events x de) in the model's memory: a view of the caller's host
// array when the tables are the host's (no copy), the device copy otherwise.
MatrixView Tgn::efeat() {
  if (device_ != Device::kCpu && !host_tables_) return efeat_dev_.view();
  return {const_cast<float*>(events_.efeat), events_.events, edge_dim_, Device::kCpu};
}

void Tgn::reset() {
  memory_.reset(events_, memory_dim_);
  messages_.reset(events_, memory_dim_, config_.mean_messages);
  pending_row_.assign(std::size_t(events_.nodes), -1);
  neighbor_row_.assign(std::size_t(events_.nodes), -1);
}

// --memory-on host: the rows of the node state this batch reads, gathered on the host and
// uploaded in one copy. Pending nodes take the first staged rows (their memory and message rows
// alike), then every other node whose stored memory a query or a neighbour reads, in order of
// first use; the index arrays are rewritten to name staged rows. The slots' edge features follow
// (zero for padded slots, which the attention never reads).
void Tgn::stage_rows(std::vector<std::int32_t>& h) {
  const std::vector<NodeId>& pending = messages_.pending;
  const std::int64_t np = shape_.pending, dm = memory_dim_, dw = messages_.edge.cols();
  staged_nodes_.assign(pending.begin(), pending.end());
  for (std::int64_t p = 0; p < np; ++p) {
    staged_row_[std::size_t(pending[std::size_t(p)])] = std::int32_t(p);
    h[std::size_t(ix_.pending + p)] = std::int32_t(p);
  }
  auto rename = [&](std::int64_t list, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::int32_t& v = h[std::size_t(list + i)];
      if (v < 0) continue;  // the updated memory holds this one
      std::int32_t& row = staged_row_[std::size_t(v)];
      if (row < 0) {
        row = std::int32_t(staged_nodes_.size());
        staged_nodes_.push_back(v);
      }
      v = row;
    }
  };
  rename(ix_.q_stored, shape_.queries);
  const std::int64_t nu = std::int64_t(distinct_neighbors_.size());
  if (config_.embedding == TgnEmbedding::kAttention) rename(ix_.nb_stored, nu);
  for (NodeId v : staged_nodes_) staged_row_[std::size_t(v)] = -1;
  const std::int64_t w = std::int64_t(staged_nodes_.size());
  const std::int64_t slots = config_.embedding == TgnEmbedding::kAttention && edge_dim_ > 0
                                 ? shape_.queries * shape_.neighbors
                                 : 0;
  const std::int64_t total = w * dm + np * (2 * dm + dw) + slots * edge_dim_;
  staged_.resize(1, std::max<std::int64_t>(total, 1));
  float* const s = device_ == Device::kCpu
                       ? staged_.data()
                       : staging_.reserve(std::size_t(std::max<std::int64_t>(total, 1)), true);
  float* at_ = s;
  auto take = [&](const Matrix& table, const NodeId* nodes, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i, at_ += table.cols())
      std::copy_n(table.row(nodes[i]), table.cols(), at_);
  };
  take(memory_.rows, staged_nodes_.data(), w);
  take(messages_.self, pending.data(), np);
  take(messages_.other, pending.data(), np);
  take(messages_.edge, pending.data(), np);
  for (std::int64_t r = 0; r < slots; ++r, at_ += edge_dim_) {
    const std::int32_t e = h[std::size_t(ix_.slot_event + r)];
    if (e >= 0)
      std::copy_n(events_.efeat + std::int64_t(e) * edge_dim_, edge_dim_, at_);
    else
      std::fill_n(at_, edge_dim_, 0.f);
  }
  if (device_ != Device::kCpu) copy_floats(device_, staged_.data(), Device::kCpu, s, total);
  float* d = staged_.data();
  auto view = [&](std::int64_t rows, std::int64_t cols) {
    const MatrixView v{d, rows, cols, device_};
    d += rows * cols;
    return v;
  };
  memory_rows_ = view(w, dm);
  message_self_ = view(np, dm);
  message_other_ = view(np, dm);
  message_edge_ = view(np, dw);
  slot_efeat_ = view(slots, edge_dim_);
}

void Tgn::commit(const std::vector<std::int64_t>& ids) {
  if (!backend_) backend_ = &cpu_backend();  // nothing scored yet: a host model's store
  if (backend_->device() != device_)
    throw std::logic_error("tgn: commit() before score() on the model's backend");
  // The tables are written where they live: on the host (kHost) from the updated memory
  // brought back, by the CPU's row ops (the CUDA twins' bits).
  Backend& be = host_tables_ ? cpu_backend() : *backend_;
  MatrixView updated = updated_memory_.view();
  if (host_tables_ && device_ != Device::kCpu) {
    updated_host_.resize(updated.rows, updated.cols);
    copy_floats(Device::kCpu, updated_host_.data(), device_, updated.data, updated.size());
    updated = updated_host_.view();
  }
  std::vector<NodeId>& pending = messages_.pending;
  std::vector<std::int32_t>& h = commit_index_.host();
  h.assign(pending.begin(), pending.end());
  for (std::int64_t p = 0; p < shape_.pending; ++p) {
    const NodeId v = pending[std::size_t(p)];
    memory_.last_update[std::size_t(v)] = messages_.time[std::size_t(v)];
    messages_.clear(v);
    pending_row_[std::size_t(v)] = -1;
  }
  pending.clear();
  store_messages(be, ids, updated);
}

// store_messages' bookkeeping: each endpoint of each event in ids (in order) receives the
// event's message (count, time, flag), new receivers join the pending list in arrival order
// (pending_row_ their place in it) and, for "last", each receiver's latest sender and event.
void Tgn::record_receivers(const std::vector<std::int64_t>& ids, std::vector<std::int32_t>& senders,
                           std::vector<std::int32_t>& events_of) {
  MessageStore& ms = messages_;
  std::vector<NodeId>& pending = ms.pending;
  for (std::int64_t e : ids)
    for (int side = 0; side < 2; ++side) {
      const NodeId a = side ? events_.dst[e] : events_.src[e],
                   b = side ? events_.src[e] : events_.dst[e];
      const bool fresh = !ms.mean || !ms.has_message[std::size_t(a)];
      ms.count[std::size_t(a)] = fresh ? 1 : ms.count[std::size_t(a)] + 1;
      if (ms.mean) ms.times[std::size_t(a)].push_back(events_.time[e]);
      ms.time[std::size_t(a)] = events_.time[e];
      if (!ms.has_message[std::size_t(a)]) {
        pending_row_[std::size_t(a)] = std::int32_t(pending.size());
        pending.push_back(a);
        if (!ms.mean) senders.push_back(0), events_of.push_back(0);
      }
      ms.has_message[std::size_t(a)] = 1;
      if (!ms.mean) {
        senders[std::size_t(pending_row_[std::size_t(a)])] = b;
        events_of[std::size_t(pending_row_[std::size_t(a)])] = std::int32_t(e);
      }
    }
}

// Both endpoints of each event in ids (in order) receive its message, built from the memory as
// commit() left it. Every stored message was spent by commit, so a node's first message of the
// batch starts its sums. The host keeps the bookkeeping; the tables are written by row ops from
// the receivers' rows, grouped by receiver (arrival order), their messages in event order:
// "mean" sums the senders' memory and the features left to right as the host loop did, "last"
// keeps the latest one.
void Tgn::store_messages(Backend& be, const std::vector<std::int64_t>& ids,
                         const MatrixView& updated) {
  MessageStore& ms = messages_;
  const std::int64_t dm = memory_dim_, de = edge_dim_, np = shape_.pending;
  std::vector<NodeId>& pending = ms.pending;     // pending_row_ is all -1 here: scratch for groups
  std::vector<std::int32_t> senders, events_of;  // "last": per receiver; "mean": per message
  record_receivers(ids, senders, events_of);
  const std::int64_t na = std::int64_t(pending.size());
  std::vector<std::int32_t>& h = commit_index_.host();  // [old pending | receivers | ...]
  const std::int64_t nodes_at = std::int64_t(h.size());
  h.insert(h.end(), pending.begin(), pending.end());
  std::int64_t first_at = 0, rows_at = 0, senders_at = 0, events_at = 0, nmsg = na;
  if (ms.mean) {  // counting sort of the messages by receiver, stable in event order
    first_at = std::int64_t(h.size());
    h.resize(h.size() + std::size_t(2 * na));
    std::int32_t total = 0;
    for (std::int64_t g = 0; g < na; ++g) {
      const std::int32_t c = ms.count[std::size_t(pending[std::size_t(g)])];
      h[std::size_t(first_at + g)] = total;
      h[std::size_t(first_at + na + g)] = c;
      total += c;
    }
    rows_at = first_at + na;
    nmsg = total;
    senders.assign(std::size_t(nmsg), 0);
    events_of.assign(std::size_t(nmsg), 0);
    std::vector<std::int32_t> cursor(h.begin() + first_at, h.begin() + first_at + na);
    for (std::int64_t e : ids)
      for (int side = 0; side < 2; ++side) {
        const NodeId a = side ? events_.dst[e] : events_.src[e],
                     b = side ? events_.src[e] : events_.dst[e];
        const std::int32_t at_ = cursor[std::size_t(pending_row_[std::size_t(a)])]++;
        senders[std::size_t(at_)] = b;
        events_of[std::size_t(at_)] = std::int32_t(e);
      }
  }
  for (NodeId v : pending) pending_row_[std::size_t(v)] = -1;
  senders_at = std::int64_t(h.size());
  h.insert(h.end(), senders.begin(), senders.end());
  events_at = std::int64_t(h.size());
  h.insert(h.end(), events_of.begin(), events_of.end());
  const std::int32_t* ix = commit_index_.place(be.device());
  // The updated memory is kept (the spent nodes' rows).
  if (np > 0) be.scatter_rows(updated, ix, np, memory_.rows.view());
  if (na == 0) return;
  const std::int32_t* receivers = ix + nodes_at;
  // self = the receiver's memory; other = its senders' (summed for "mean"); edge likewise.
  store_sum_.resize(na, dm);
  be.gather_rows_into(memory_.rows.view(), receivers, na, store_sum_.view(), 0);
  be.scatter_rows(store_sum_.view(), receivers, na, ms.self.view());
  auto aggregate = [&](const MatrixView& src, const std::int32_t* rows_of_src,
                       const Matrix& table) {
    const std::int64_t w = src.cols;
    store_sum_.resize(na, w);
    if (nmsg == na) {  // one message each
      be.gather_rows_into(src, rows_of_src, na, store_sum_.view(), 0);
    } else {
      store_rows_.resize(nmsg, w);
      be.gather_rows_into(src, rows_of_src, nmsg, store_rows_.view(), 0);
      be.sum_rows_into(store_rows_.view(), ix + first_at, ix + rows_at, nullptr, na,
                       store_sum_.view(), 0);
    }
    be.scatter_rows(store_sum_.view(), receivers, na, table.view());
  };
  aggregate(memory_.rows.view(), ix + senders_at, ms.other);
  if (de) aggregate(efeat(), ix + events_at, ms.edge);
}

}  // namespace halo

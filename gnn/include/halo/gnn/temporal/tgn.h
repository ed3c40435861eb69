// The TGN model (Rossi et al. 2020) on one replica: node memory updated by a GRU from stored
// messages, embeddings (temporal attention over recent neighbours, the memory itself, or JODIE's
// time projection) and an MLP link predictor, with explicit backward. One batch:
//   1. the nodes that received messages in earlier batches update their memory with the GRU
//      (differentiable in this batch; detached afterwards);
//   2. sources, destinations and negatives are embedded by temporal attention over their k most
//      recent neighbours among events strictly before the event's own time (TGN's protocol; an
//      event never sees itself or anything later), or, with neighbors_before_batch, among
//      events before the batch (a batch never sees its own events);
//   3. the MLP scores (src, dst) and (src, negative); BCE; backward into the parameters' grad;
//   4. commit(): the updated memory is kept, and the batch's events become the stored messages.
// The model knows nothing of other ranks: the caller picks the slice of a batch it embeds, sums
// gradients across ranks and takes the optimiser step between score() and commit().
//
// Where it runs: every matrix (parameters, node memory, message tables, the stream's edge
// features, the static memory and each batch's buffers) lives in one memory, the host's unless
// to_device() moves it, and is computed on only by Backend ops, so the same code runs on
// cpu_backend() or cuda_backend(). The index bookkeeping (pending list, queries, sampled and
// distinct neighbours, gaps, last updates, message times and counts) stays on the host; each
// batch uploads its int32 indices in one copy (score) and one more (commit), its time gaps and
// the attention's slot rows in one each, and d(loss)/d(logits) in one; the logits come back for
// the host's loss loop (the CPU's bits, whichever backend).
#pragma once

#include <cstdint>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/model.h"
#include "halo/gnn/temporal/layers.h"
#include "halo/gnn/temporal/memory.h"
#include "halo/gnn/temporal/sampler.h"
#include "halo/gnn/temporal/static_memory.h"

namespace halo {

// How memories become embeddings.
enum class TgnEmbedding {
  kAttention,  // TGN's temporal graph attention over neighbours
  kIdentity,   // the memory itself
  kTime,  // JODIE: memory ⊙ (1 + w δ + b), δ the standardised time since the memory changed
};

struct TgnConfig {
  std::int64_t memory_dim = 100, embed_dim = 100, time_dim = 100;  // embed_dim: attention only
  int heads = 2;
  TgnEmbedding embedding = TgnEmbedding::kAttention;
  bool mean_messages = false;           // the "mean" aggregator ("last" otherwise)
  bool neighbors_before_batch = false;  // attention sees events before the batch, not the event
  bool learn_time_frequencies = false;
  // DistTGL's static node memory width D (0 = off): [memory ‖ S] is the attention's node input
  // (static_memory.h). Attention only.
  std::int64_t static_dim = 0;
  std::uint64_t seed = 0;
};

// Where the node state lives when the model computes on a GPU. kDevice: the node memory, the
// message tables and the stream's edge features in GPU memory. kHost: they stay in host memory;
// each batch stages the rows it reads (its pending nodes' memory and messages, the stored memory
// of its queries and neighbours, its slots' edge features) into pinned memory, uploads them in one
// copy and names rows of the staged tables in its indices; commit() brings the updated memory
// back and writes the messages on the host. The same floats either way: only the rows' places
// differ. On the host (Device::kCpu) kHost runs the same staging, for tests.
enum class TgnMemoryOn { kDevice, kHost };

// The events of a batch this replica embeds and scores: [begin, begin + size).
struct BatchSlice {
  std::int64_t begin = 0, size = 0;
};

class Tgn {
 public:
  // events must outlive the model; allocates the node state (may throw std::bad_alloc).
  Tgn(const EventStream& events, const TgnConfig& config);

  // Moves the parameters, the batch buffers and (memory kDevice) the node state and the stream's
  // edge features to d's memory; the backend score() is then given must compute there. The
  // node state stays in (or returns to) host memory with kHost. Calling it again is free.
  void to_device(Device d, TgnMemoryOn memory = TgnMemoryOn::kDevice);

  // The trained parameters, in a fixed order (checkpoints and the all-reduce rely on it).
  std::vector<Param*> params();

  // Memory, last updates and stored messages back to the start of the stream.
  void reset();

  // Steps 1-3 for events ids (time order; ids[0] starts the batch) against neg, N negatives per
  // event (event-major: neg[e * N + j]). Embeds and scores the slice only; appends its sigmoid
  // scores, negatives negative-major (negative j of slice event i at j * size + i). Returns the
  // slice's share of the batch's mean BCE. With train (N must be 1), zeroes every gradient and
  // writes the slice's gradients; the state is untouched until commit().
  double score(Backend& be, RecentSampler& sampler, const std::vector<std::int64_t>& ids,
               BatchSlice slice, const std::vector<NodeId>& neg, bool train,
               std::vector<float>* pos_scores, std::vector<float>* neg_scores);

  // Step 4 after score() of the same ids: the updated memory is kept, and every event of ids
  // (not only the slice) becomes a stored message.
  void commit(const std::vector<std::int64_t>& ids);

  // The node state, for replicas that must agree (broadcast by the caller; host memory unless
  // to_device moved the matrices with TgnMemoryOn::kDevice).
  NodeMemory& memory() { return memory_; }
  MessageStore& messages() { return messages_; }

 private:
  // The shape of the batch in flight.
  struct BatchShape {
    std::int64_t events = 0;           // the whole batch (the loss is a mean over it)
    std::int64_t first = 0, size = 0;  // the slice
    std::int64_t negatives = 1;        // per event
    std::int64_t queries = 0;          // (2 + negatives) * size: sources, destinations, negatives
    int neighbors = 0;                 // sampled per query; 0 without attention
    std::int64_t pending = 0;          // nodes whose memory this batch updates
    std::int64_t message_codes = 0;    // the first row of the messages' time codes
  };

  // A batch's int32 index arrays, as offsets into index_ (one upload per batch).
  struct BatchIndex {
    std::int64_t pending = 0, msg_first = 0, msg_count = 0;     // np each
    std::int64_t query_nodes = 0, q_stored = 0, q_updated = 0;  // Q each
    std::int64_t slot_event = 0;                                // Q * k
    std::int64_t nb_nodes = 0, nb_stored = 0, nb_updated = 0;   // nu each
    std::int64_t pair_left = 0;                                 // (1 + N) * B
    std::int64_t g_q = 0, g_m = 0, g_n = 0, g_dst = 0;          // 2Q + nu each (training)
  };

  void index_pending();
  void collect_queries(const std::vector<std::int64_t>& ids, const std::vector<NodeId>& neg);
  void sample_neighbors(RecentSampler& sampler, const std::vector<std::int64_t>& ids);
  void encode_time_gaps(Backend& be, const std::vector<std::int64_t>& ids);
  void index_batch(Backend& be, bool train);
  void route_memory_rows(std::vector<std::int32_t>& h, const NodeId* nodes, std::int64_t n,
                         std::int64_t stored, std::int64_t updated) const;
  void index_neighbors(std::vector<std::int32_t>& h, bool train);
  void stage_rows(std::vector<std::int32_t>& h);
  void update_memory(Backend& be);
  void embed_by_attention(Backend& be);
  void embed_by_projection(Backend& be, const std::vector<std::int64_t>& ids);
  double score_links(Backend& be, bool train, std::vector<float>* pos_scores,
                     std::vector<float>* neg_scores);
  void backward_predictor(Backend& be);
  void backward_attention(Backend& be);
  void backward_projection(Backend& be);
  void backward_memory_update(Backend& be);
  void store_messages(Backend& be, const std::vector<std::int64_t>& ids, const MatrixView& updated);
  void record_receivers(const std::vector<std::int64_t>& ids, std::vector<std::int32_t>& senders,
                        std::vector<std::int32_t>& events_of);
  double event_time(const std::vector<std::int64_t>& ids, std::int64_t query) const;
  const std::int32_t* at(std::int64_t offset) const { return index_at_ + offset; }
  MatrixView efeat();

  const EventStream& events_;
  const TgnConfig config_;
  std::int64_t memory_dim_, time_dim_, edge_dim_, embed_dim_;
  std::int64_t node_dim_;  // a node's row in the attention: memory, then static memory
  TimeEncoder time_encoder_;
  GruCell memory_updater_;
  TemporalAttention attention_;
  Param pred_w1_, pred_b1_, pred_w2_, pred_b2_;  // the link predictor's MLP
  Param time_proj_w_, time_proj_b_;              // the time projection (embedding kTime)
  double gap_mean_ = 0, gap_std_ = 1;            // of the gaps between a source's events
  NodeMemory memory_;
  MessageStore messages_;
  StaticMemory static_memory_;

  Device device_ = Device::kCpu;
  Backend* backend_ = nullptr;  // the last score()'s: commit() writes the state with it
  Matrix efeat_dev_;  // the stream's edge features in device memory (on the host: events_.efeat)
  bool host_tables_ = false;  // TgnMemoryOn::kHost
  // The tables this batch's gathers read: the node state itself, or its staged rows (kHost).
  MatrixView memory_rows_, message_self_, message_other_, message_edge_;
  MatrixView slot_efeat_;                 // kHost: the slots' edge features, staged (Q * k x de)
  HostStaging staging_;                   // kHost: the rows gathered on the host ...
  Matrix staged_;                         // ... and in the backend's memory (one flat buffer)
  std::vector<NodeId> staged_nodes_;      // kHost: the nodes whose memory rows are staged
  std::vector<std::int32_t> staged_row_;  // per node: its staged row, -1 otherwise (kept -1)
  Matrix updated_host_;                   // kHost on a GPU: commit's copy of the updated memory

  BatchShape shape_;
  BatchIndex ix_;
  IndexUpload index_;                       // this batch's index arrays (BatchIndex's offsets)
  const std::int32_t* index_at_ = nullptr;  // index_ in the backend's memory
  IndexUpload commit_index_;                // commit's: pending, then the stored messages' rows
  // Per-batch buffers, kept so that their memory is reused rather than allocated and faulted in
  // every batch (a 6,000 x 201 neighbour matrix per batch at the defaults).
  std::vector<std::int32_t> pending_row_;    // per node: its row in this batch's GRU, -1 otherwise
  std::vector<std::int64_t> message_begin_;  // per pending node: its first message row
  std::vector<NodeId> query_nodes_;          // sources, destinations, negatives of the slice
  std::vector<double> query_times_;          // each query's event time
  NeighborBatch neighbors_;
  std::vector<double> gaps_;  // [0 for queries | Δt of neighbours | Δt of messages]
  Matrix time_codes_;         // φ of gaps_
  Matrix gru_input_, gru_prev_, updated_memory_;
  Matrix queries_, query_memory_, neighbor_memory_, slot_features_;  // the attention's inputs
  std::vector<std::int32_t> slot_neighbor_,
      neighbor_row_;  // slot -> distinct-neighbour row; node -> that row (-1)
  std::vector<NodeId> distinct_neighbors_;
  std::vector<float> query_gaps_;  // kTime: each query's standardised gap, for backward
  Matrix query_gaps_dev_;          // ... in the backend's memory (Q x 1)
  Matrix query_rows_;              // identity / time: the queries' memory rows
  Matrix embeddings_, pairs_, hidden_, logits_;
  std::vector<float> logits_host_, d_logits_host_;  // the loss loop's (host) side
  Matrix d_logits_;  // (pairs + 1) x 1: d(loss)/d(logits), then pred.b2's gradient
  Matrix d_hidden_, d_pairs_, d_embeddings_, d_queries_, d_neighbor_memory_, d_slots_,
      d_query_memory_, d_time_codes_, d_updated_memory_, d_gru_input_, d_gru_prev_, column_sums_,
      memory_grads_;
  Matrix store_rows_, store_sum_;  // commit: the stored messages' gathered and summed rows
};

}  // namespace halo

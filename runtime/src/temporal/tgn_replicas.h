// TGN across the ranks of a job: every rank holds a replica of the model (temporal/tgn.h) and of
// the whole node memory. Exact mini-batch parallelism: each rank embeds and scores its slice of
// every batch, the gradients are summed across ranks before one identical Adam step, and every
// rank runs the pending nodes' memory update itself (identical inputs, identical rows) and stores
// all of the batch's messages, so the replicas never diverge and no memory rows travel.
// Independent memories (--parallel segments): each rank trains on its own batches, gradients are
// averaged, and sync_state() makes the replicas agree again before the exact evaluation.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/gnn/temporal/tgn.h"
#include "halo/runtime/comm/comm.h"
#include "halo/runtime/temporal/tgn.h"

namespace halo {

struct TemporalDataset;

// The options with --model jodie spelled out (TGN with the time-projection embedding).
TgnOptions resolved(const TgnOptions& o);

// The events of a mapped dataset as the model reads them (a view: d must outlive it).
EventStream stream_of(const TemporalDataset& d);

// The model's settings from the command line's (jodie already resolved to embedding "time").
TgnConfig tgn_config(const TgnOptions& o);

class TgnReplicas {
 public:
  // comm: the ranks that share every batch (null: this process alone). May throw
  // std::bad_alloc while allocating the node state.
  TgnReplicas(const EventStream& events, const TgnOptions& o, Communicator* comm = nullptr);

  std::vector<Param*> params() { return model_.params(); }
  // Moves the model to d's memory and its node state to `memory` (the backend batch() is given
  // must be d's; see Tgn::to_device).
  void to_device(Device d, TgnMemoryOn memory = TgnMemoryOn::kDevice) {
    model_.to_device(d, memory);
  }
  void reset() { model_.reset(); }

  // This rank's share of a batch of n events: [slice_begin(n), slice_begin(n) + slice_size(n)).
  // With independent memories every rank takes its whole batch.
  std::int64_t slice_begin(std::int64_t n) const;
  std::int64_t slice_size(std::int64_t n) const;
  void set_independent(bool on) { independent_ = on; }

  // Processes events ids (time order; ids[0] starts the batch) against neg (N per event); writes
  // the slice's sigmoid scores (see Tgn::score). step > 0 trains (the Adam step number); step 0
  // only scores; step < 0 computes the all-reduced gradients and leaves the state as it was (the
  // gradient check). Returns the whole batch's loss, all-reduced when training.
  double batch(Backend& be, RecentSampler& sampler, const std::vector<std::int64_t>& ids,
               const std::vector<NodeId>& neg, std::int64_t step, std::vector<float>* pos_scores,
               std::vector<float>* neg_scores);

  // A step for a rank with no batch left in its segment: zero gradients into the same
  // all-reduce, so every rank takes the same Adam step. Returns the step's all-reduced loss
  // (the other ranks' mean), which every rank checks alike.
  double empty_step(Backend& be, std::int64_t step);

  // Every rank's memory, messages and pending list become rank root's.
  void sync_state(int root);

  // The gradients' all-reduce in the backend's memory through c (NCCL, every rank on its own
  // GPU; allreduce_device), instead of staged through the host over comm; null: staged.
  void reduce_in_place_with(Communicator* c) { device_comm_ = c; }

 private:
  void reduce(Backend& be, double* loss);
  void reduce_and_step(Backend& be, std::int64_t step, double* loss);

  Tgn model_;
  Communicator* comm_ = nullptr;
  float lr_;
  bool independent_ = false;
  Communicator* device_comm_ = nullptr;  // reduce_in_place_with's
  // Every gradient and the loss in one buffer for the all-reduce: host memory, or the backend's
  // with device_comm_.
  Matrix packed_;
};

}  // namespace halo

// The halo exchange, written once against the Communicator: it implements the model's Exchanger
// for one part's halo plan (a HaloPlanView, partition/halo_plan.h; Part::halo_plan gives one).
//
//   forward:  pack the owned rows each peer needs (its send list) and post every receive straight
//             into the halo rows (rows from one peer are contiguous); the layer aggregates its
//             inner rows meanwhile; forward_end waits.
//   backward: the halo rows' gradients go home (again contiguous per peer) while the layer
//             computes its owned rows; backward_end adds what arrived into the owned rows, in a
//             fixed order (deterministic).
//
// Two opt-in savers trade exactness for speed: a bfloat16 payload (half the bytes) and
// staleness 1 (PipeGCN: a training exchange of epoch t delivers its rows at epoch t + 1, so the
// whole exchange overlaps an epoch of compute; epoch 1 is exact). Evaluation is always exact.
// Stale rows may be smoothed (PipeGCN-F/G, --halo-smoothing GAMMA): per layer, the halo rows a
// layer uses are the moving average of the stale rows delivered so far,
//   avg_1 = d_1,  avg_t = GAMMA * avg_{t-1} + (1 - GAMMA) * d_t,
// and likewise the gradients added into the owned rows are the moving average of the stale
// gradients delivered; GAMMA = 0 is plain staleness (no smoothing runs at all).
//
// With the CUDA backend the rows are packed, narrowed to bf16 and widened again on the GPU. Over
// NCCL they travel from device memory to device memory (exact or stale: each stale layer keeps
// its payloads in device buffers of its own); over MPI (ranks sharing a GPU, NCCL missing) the
// packed payload is staged through host buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/bf16.h"
#include "halo/gnn/device.h"
#include "halo/gnn/model.h"
#include "halo/partition/halo_plan.h"
#include "halo/runtime/comm/comm.h"

namespace halo {

enum class HaloDtype { kF32, kBf16 };
// "f32" | "bf16" (the --halo-dtype spellings); throws ParamError naming the expected ones.
HaloDtype parse_halo_dtype(std::string_view s);
// The --halo-dtype spelling of d, as logs and checkpoints record it.
const char* to_string(HaloDtype d);
// Bytes of one value on the wire: 4 (f32) or 2 (bf16).
std::size_t value_bytes(HaloDtype dtype);

struct ExchangeStats {
  std::int64_t bytes_sent = 0;  // halo payload posted by this rank
  double wait_s = 0;            // blocked waiting for halo rows
  double allreduce_s = 0;       // blocked in batch-norm all-reduces
  void clear() { *this = {}; }
};

class HaloExchanger final : public Exchanger {
 public:
  // staleness: 0 (exact) or 1; smoothing: GAMMA in [0, 1), above 0 only with staleness 1. The
  // plan's arrays must outlive the exchanger.
  HaloExchanger(Communicator& comm, Backend& be, const HaloPlanView& plan, HaloDtype dtype,
                int staleness, float smoothing = 0.f);
  ~HaloExchanger() override;

  void forward_begin(const MatrixView& all, int layer, bool training) override;
  void forward_end() override;
  void backward_begin(const MatrixView& all, int layer) override;
  void backward_end(const MatrixView& all) override;
  void allreduce(double* data, std::int64_t n) override;

  // Completes every pipelined exchange and forgets stale rows (between runs, before exit).
  void drain();
  ExchangeStats& stats() { return stats_; }

  // Bytes one rank sends in one training step (forward + backward) of a model whose layers
  // exchange rows of the given widths; backward[l] says whether layer l sends gradients back.
  static std::int64_t predicted_bytes(const HaloPlanView& plan,
                                      const std::vector<std::int64_t>& widths,
                                      const std::vector<bool>& backward, HaloDtype dtype);

 private:
  struct Slot;
  Slot& slot(std::vector<std::unique_ptr<Slot>>& slots, int layer);
  // Post an exchange; it lands in pending_next_ for the caller to keep or finish.
  void start_forward(const MatrixView& all, std::vector<char>& send, void* recv, bool recv_in_place,
                     int tag);
  void start_backward(const MatrixView& all, std::vector<char>& send, std::vector<char>& recv,
                      bool copy_send, int tag);
  void post_direct_forward(const MatrixView& all, Matrix& send, void* recv, int tag);
  void post_direct_backward(const MatrixView& all, Matrix& send, void* recv, bool copy_send,
                            int tag);
  void* direct_payload(Matrix& m, std::int64_t rows, std::int64_t w);
  // The send list in the backend's memory.
  const NodeId* send_index() const { return send_dev_ ? send_dev_->data() : plan_.send; }
  void unpack_direct_halo(const void* payload, const MatrixView& all);
  void add_direct_received(const void* payload, const MatrixView& all, Slot* smooth);
  void finish_pending(std::unique_ptr<Pending>& p);
  void unpack_halo(const std::vector<char>& recv, const MatrixView& all);
  void add_received(const std::vector<char>& recv, const MatrixView& all, Slot* smooth);
  // With smoothing: folds rows into the slot's moving average and returns it (the first rows of a
  // run start it and are returned as they are); without, rows themselves.
  MatrixView smoothed(Slot* s, const MatrixView& rows);

  Communicator& comm_;
  Backend& be_;
  HaloPlanView plan_;
  HaloDtype dtype_;
  int staleness_;
  float smoothing_;
  ExchangeStats stats_;
  std::unique_ptr<Pending> pending_,
      pending_next_;  // the exact exchange in flight; the one just posted
  std::vector<char> send_buf_, recv_buf_;
  std::vector<float> widened_;  // bf16 gradients widened before they are added
  // CUDA backend: MPI moves host memory, so rows are packed on the device and staged.
  bool gpu_ = false;
  std::unique_ptr<DeviceArray<NodeId>> send_dev_;
  Matrix stage_;
  Matrix wire_send_, wire_recv_;  // bf16 payloads in device memory (raw storage)
  // NCCL (device-memory communicator): no staging; exact f32 gradients for owned rows land in
  // grad_stage_, bf16 payloads in wire_recv_; stale exchanges use their slot's device buffers.
  bool direct_ = false;
  Matrix grad_stage_;
  MatrixView fwd_all_;
  bool fwd_stale_ = false;
  // Pipelined (stale) exchanges: one slot per layer and direction.
  std::vector<std::unique_ptr<Slot>> fwd_slots_, bwd_slots_;
  Slot* bwd_active_ = nullptr;  // the stale slot whose gradients backward_end adds
};

}  // namespace halo

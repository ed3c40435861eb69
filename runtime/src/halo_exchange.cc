// The halo exchange (see halo_exchange.h for the protocol).
#include "halo/runtime/halo_exchange.h"

#include <cstring>
#include <utility>

#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"

namespace halo {

std::uint16_t to_bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return std::uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace {
// Tags: one per layer and kind of exchange, so an evaluation's exact exchange never matches a
// pipelined training exchange still in flight.
enum Kind { kForward = 1, kBackward = 2, kStaleForward = 3, kStaleBackward = 4 };
int tag_of(int layer, Kind kind) { return layer * 8 + kind; }

// One block per peer that has rows: peer q's rows are [offsets[q], offsets[q+1]) of a row array
// starting at base, row_bytes each (send lists, receive lists and the halo rows all lie so).
std::vector<PeerBlock> peer_blocks(int k, const EdgeId* offsets, void* base, std::size_t row_bytes) {
  std::vector<PeerBlock> out;
  for (int q = 0; q < k; ++q)
    if (offsets[q + 1] > offsets[q])
      out.push_back({q, static_cast<char*>(base) + std::size_t(offsets[q]) * row_bytes,
                     std::size_t(offsets[q + 1] - offsets[q]) * row_bytes});
  return out;
}
}  // namespace

struct HaloExchanger::Slot {
  std::unique_ptr<Pending> pending;
  std::vector<char> send, recv, prev;
  bool primed = false;  // has delivered once this run
};

HaloExchanger::HaloExchanger(Communicator& comm, Backend& be, const HaloPlan& plan, HaloDtype dtype, int staleness)
    : comm_(comm), be_(be), plan_(plan), dtype_(dtype), staleness_(staleness), gpu_(be.device() == Device::kCuda) {
  if (gpu_) {  // rows are packed on the device, then staged through the host for MPI
    send_dev_ = std::make_unique<DeviceArray<NodeId>>(plan.send, std::size_t(plan.send_rows()));
    stage_.set_device(Device::kCuda);
  }
  direct_ = gpu_ && comm.device_buffers();
  if (comm.device_buffers() && !gpu_) throw ParamError("a device-memory communicator needs the CUDA backend");
  if (direct_ && (dtype != HaloDtype::kF32 || staleness != 0))
    throw ParamError("the NCCL path exchanges exact f32 rows; bf16 and staleness go through MPI");
  if (staleness < 0 || staleness > 1) throw ParamError("--halo-staleness must be 0 or 1");
  if (plan.k != comm.size())
    throw ParamError("the halo plan is for " + std::to_string(plan.k) + " ranks but the job has " +
                     std::to_string(comm.size()));
}

HaloExchanger::~HaloExchanger() = default;

std::int64_t HaloExchanger::predicted_bytes(const HaloPlan& plan, const std::vector<std::int64_t>& widths,
                                            const std::vector<bool>& backward, HaloDtype dtype) {
  const std::int64_t es = dtype == HaloDtype::kF32 ? 4 : 2;
  std::int64_t total = 0;
  for (std::size_t l = 0; l < widths.size(); ++l) {
    total += plan.send_rows() * widths[l] * es;
    if (backward[l]) total += plan.halo * widths[l] * es;
  }
  return total;
}

void HaloExchanger::finish_pending(std::unique_ptr<Pending>& p) {
  if (!p) return;
  Stopwatch clock;
  p->wait();
  p.reset();
  stats_.wait_s += clock.seconds();
}

// Packs the rows each peer needs and posts the exchange; the halo rows arrive in `recv` (packed,
// in the payload dtype) or, when recv_in_place, directly in rows [owned, all) of `all`.
void HaloExchanger::start_forward(const MatrixView& all, std::vector<char>& send, void* recv, bool recv_in_place,
                                  int tag) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  const std::size_t es = dtype_ == HaloDtype::kF32 ? 4 : 2;
  send.resize(std::size_t(n * w) * es);
  if (gpu_) {
    stage_.resize(n, w);
    be_.gather_rows(all, send_dev_->data(), n, stage_.view());
    if (dtype_ == HaloDtype::kF32) {
      copy_floats(Device::kCpu, reinterpret_cast<float*>(send.data()), Device::kCuda, stage_.data(), n * w);
    } else {
      host_rows_.resize(std::size_t(n * w));
      copy_floats(Device::kCpu, host_rows_.data(), Device::kCuda, stage_.data(), n * w);
      auto* out = reinterpret_cast<std::uint16_t*>(send.data());
      for (std::int64_t i = 0; i < n * w; ++i) out[i] = to_bf16(host_rows_[std::size_t(i)]);
    }
  } else if (dtype_ == HaloDtype::kF32) {
    be_.gather_rows(all, plan_.send, n, {reinterpret_cast<float*>(send.data()), n, w, all.device});
  } else {
    auto* out = reinterpret_cast<std::uint16_t*>(send.data());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const float* src = all.row(plan_.send[i]);
      for (std::int64_t c = 0; c < w; ++c) out[i * w + c] = to_bf16(src[c]);
    }
  }
  const std::size_t row = std::size_t(w) * es;
  const auto sends = peer_blocks(plan_.k, plan_.send_offsets, send.data(), row);
  const auto recvs = peer_blocks(plan_.k, plan_.recv_offsets, recv_in_place ? all.row(plan_.owned) : recv, row);
  stats_.bytes_sent += std::int64_t(send.size());
  pending_next_ = comm_.exchange(sends, recvs, tag);
}

// Posts the halo rows' gradients to their owners (from a packed copy in `send` when copy_send or
// bf16; straight from `all` otherwise) and the receives of this rank's own rows' gradients.
void HaloExchanger::start_backward(const MatrixView& all, std::vector<char>& send, std::vector<char>& recv,
                                   bool copy_send, int tag) {
  const std::int64_t w = all.cols, h = plan_.halo;
  const std::size_t es = dtype_ == HaloDtype::kF32 ? 4 : 2;
  const float* halo_rows = all.row(plan_.owned);
  if (gpu_) {  // stage the halo rows' gradients on the host
    host_rows_.resize(std::size_t(h * w));
    copy_floats(Device::kCpu, host_rows_.data(), Device::kCuda, halo_rows, h * w);
    halo_rows = host_rows_.data();
    copy_send = true;  // host_rows_ is reused before the exchange completes
  }
  const char* src = reinterpret_cast<const char*>(halo_rows);
  if (dtype_ == HaloDtype::kBf16) {
    send.resize(std::size_t(h * w) * es);
    auto* out = reinterpret_cast<std::uint16_t*>(send.data());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < h * w; ++i) out[i] = to_bf16(halo_rows[i]);
    src = send.data();
  } else if (copy_send) {
    send.assign(src, src + std::size_t(h * w) * es);
    src = send.data();
  }
  recv.resize(std::size_t(plan_.send_rows() * w) * es);
  const std::size_t row = std::size_t(w) * es;
  const auto sends = peer_blocks(plan_.k, plan_.recv_offsets, const_cast<char*>(src), row);
  const auto recvs = peer_blocks(plan_.k, plan_.send_offsets, recv.data(), row);
  stats_.bytes_sent += std::int64_t(std::size_t(h * w) * es);
  pending_next_ = comm_.exchange(sends, recvs, tag);
}

void HaloExchanger::unpack_halo(const std::vector<char>& recv, const MatrixView& all) {
  const std::int64_t n = plan_.halo * all.cols;
  if (dtype_ == HaloDtype::kF32) {
    copy_floats(all.device, all.row(plan_.owned), Device::kCpu, reinterpret_cast<const float*>(recv.data()), n);
    return;
  }
  float* dst = all.row(plan_.owned);
  if (gpu_) {
    host_rows_.resize(std::size_t(n));
    dst = host_rows_.data();
  }
  const auto* in = reinterpret_cast<const std::uint16_t*>(recv.data());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dst[i] = from_bf16(in[i]);
  if (gpu_) copy_floats(Device::kCuda, all.row(plan_.owned), Device::kCpu, host_rows_.data(), n);
}

void HaloExchanger::add_received(const std::vector<char>& recv, const MatrixView& all) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  if (n == 0) return;
  const float* rows = reinterpret_cast<const float*>(recv.data());
  if (dtype_ == HaloDtype::kBf16) {
    widened_.resize(std::size_t(n * w));
    const auto* in = reinterpret_cast<const std::uint16_t*>(recv.data());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n * w; ++i) widened_[std::size_t(i)] = from_bf16(in[i]);
    rows = widened_.data();
  }
  if (gpu_) {
    stage_.resize(n, w);
    copy_floats(Device::kCuda, stage_.data(), Device::kCpu, rows, n * w);
    be_.scatter_add_rows(stage_.view(), send_dev_->data(), n, all.rows_range(0, plan_.owned));
    return;
  }
  be_.scatter_add_rows({const_cast<float*>(rows), n, w, all.device}, plan_.send, n, all.rows_range(0, plan_.owned));
}

HaloExchanger::Slot& HaloExchanger::slot(std::vector<std::unique_ptr<Slot>>& slots, int layer) {
  if (std::size_t(layer) >= slots.size()) slots.resize(std::size_t(layer) + 1);
  auto& s = slots[std::size_t(layer)];
  if (!s) s = std::make_unique<Slot>();
  return *s;
}

// NCCL: rows packed on the GPU go straight from device memory into the peers' halo rows.
void HaloExchanger::start_direct_forward(const MatrixView& all, int tag) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  stage_.resize(n, w);
  if (n > 0) be_.gather_rows(all, send_dev_->data(), n, stage_.view());
  const auto sends = peer_blocks(plan_.k, plan_.send_offsets, stage_.data(), std::size_t(w) * 4);
  const auto recvs = peer_blocks(plan_.k, plan_.recv_offsets, all.row(plan_.owned), std::size_t(w) * 4);
  stats_.bytes_sent += n * w * 4;
  pending_ = comm_.exchange(sends, recvs, tag);
}

void HaloExchanger::start_direct_backward(const MatrixView& all, int tag) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  grad_stage_.set_device(Device::kCuda);
  grad_stage_.resize(n, w);
  const auto sends = peer_blocks(plan_.k, plan_.recv_offsets, all.row(plan_.owned), std::size_t(w) * 4);
  const auto recvs = peer_blocks(plan_.k, plan_.send_offsets, grad_stage_.data(), std::size_t(w) * 4);
  stats_.bytes_sent += plan_.halo * w * 4;
  pending_ = comm_.exchange(sends, recvs, tag);
}

void HaloExchanger::forward_begin(const MatrixView& all, int layer, bool training) {
  if (direct_) {
    fwd_stale_ = false;
    start_direct_forward(all, tag_of(layer, kForward));
    return;
  }
  fwd_stale_ = training && staleness_ > 0;
  if (!fwd_stale_) {
    const bool in_place = dtype_ == HaloDtype::kF32 && !gpu_;
    recv_buf_.resize(in_place ? 0 : std::size_t(plan_.halo * all.cols) * (dtype_ == HaloDtype::kF32 ? 4 : 2));
    start_forward(all, send_buf_, recv_buf_.data(), in_place, tag_of(layer, kForward));
    pending_ = std::move(pending_next_);
    fwd_all_ = all;
    return;
  }
  // Stale: the halo rows are last epoch's (epoch 1 of a run waits for its own, exactly); this
  // epoch's rows travel while the layer — and the rest of the epoch — computes.
  Slot& s = slot(fwd_slots_, layer);
  finish_pending(s.pending);
  const std::size_t es = dtype_ == HaloDtype::kF32 ? 4 : 2;
  s.recv.resize(std::size_t(plan_.halo * all.cols) * es);
  if (!s.primed) {
    start_forward(all, s.send, s.recv.data(), false, tag_of(layer, kStaleForward));
    finish_pending(pending_next_);
    s.primed = true;
    unpack_halo(s.recv, all);
    return;
  }
  unpack_halo(s.recv, all);
  start_forward(all, s.send, s.recv.data(), false, tag_of(layer, kStaleForward));
  s.pending = std::move(pending_next_);
}

void HaloExchanger::forward_end() {
  if (direct_) {
    finish_pending(pending_);
    return;
  }
  if (fwd_stale_) return;
  finish_pending(pending_);
  if (dtype_ == HaloDtype::kBf16 || gpu_) unpack_halo(recv_buf_, fwd_all_);
}

void HaloExchanger::backward_begin(const MatrixView& all, int layer) {
  if (direct_) {
    start_direct_backward(all, tag_of(layer, kBackward));
    bwd_active_ = nullptr;
    return;
  }
  if (staleness_ == 0) {
    start_backward(all, send_buf_, recv_buf_, /*copy_send=*/false, tag_of(layer, kBackward));
    pending_ = std::move(pending_next_);
    bwd_active_ = nullptr;
    return;
  }
  // Stale: backward_end adds the gradients the owners' peers sent last epoch (epoch 1 of a run:
  // this epoch's, waited for); this epoch's travel meanwhile.
  Slot& s = slot(bwd_slots_, layer);
  bwd_active_ = &s;
  if (s.pending) {
    finish_pending(s.pending);
    std::swap(s.recv, s.prev);
  } else if (!s.primed) {
    start_backward(all, s.send, s.recv, /*copy_send=*/true, tag_of(layer, kStaleBackward));
    finish_pending(pending_next_);
    std::swap(s.recv, s.prev);
    s.primed = true;
    return;
  }
  start_backward(all, s.send, s.recv, /*copy_send=*/true, tag_of(layer, kStaleBackward));
  s.pending = std::move(pending_next_);
}

void HaloExchanger::backward_end(const MatrixView& all) {
  if (direct_) {
    finish_pending(pending_);
    if (plan_.send_rows() > 0)
      be_.scatter_add_rows(grad_stage_.view(), send_dev_->data(), plan_.send_rows(), all.rows_range(0, plan_.owned));
    return;
  }
  if (bwd_active_) {
    add_received(bwd_active_->prev, all);
    bwd_active_ = nullptr;
    return;
  }
  finish_pending(pending_);
  add_received(recv_buf_, all);
}

void HaloExchanger::allreduce(double* data, std::int64_t n) {
  Stopwatch clock;
  comm_.allreduce(data, n);
  stats_.allreduce_s += clock.seconds();
}

void HaloExchanger::drain() {
  finish_pending(pending_);
  for (auto* slots : {&fwd_slots_, &bwd_slots_})
    for (auto& s : *slots)
      if (s) {
        finish_pending(s->pending);
        s->primed = false;
      }
  bwd_active_ = nullptr;
}

}  // namespace halo

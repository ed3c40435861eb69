// The halo exchange (see halo_exchange.h for the protocol).
#include "halo/runtime/comm/halo_exchange.h"

#include <cstring>
#include <utility>

#include "halo/gnn/device.h"
#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"

namespace halo {

namespace {
constexpr EnumName<HaloDtype> kHaloDtypes[] = {{HaloDtype::kF32, "f32"},
                                               {HaloDtype::kBf16, "bf16"}};
}  // namespace

// Worded as --device's is (no value echoed), kept as users have seen it.
HaloDtype parse_halo_dtype(std::string_view s) {
  if (const auto* e = find_enum(kHaloDtypes, s)) return e->value;
  throw ParamError("--halo-dtype must be " + enum_choices(kHaloDtypes));
}

const char* to_string(HaloDtype d) { return enum_name(kHaloDtypes, d); }

std::size_t value_bytes(HaloDtype dtype) { return dtype == HaloDtype::kF32 ? 4 : 2; }

namespace {
// Tags: one per layer and kind of exchange, so an evaluation's exact exchange never matches a
// pipelined training exchange still in flight.
enum Kind { kForward = 1, kBackward = 2, kStaleForward = 3, kStaleBackward = 4 };
int tag_of(int layer, Kind kind) { return layer * 8 + kind; }

// `count` bfloat16 values of memory on `where` held by m (a float matrix used as raw storage).
std::uint16_t* device_halves(Matrix& m, std::int64_t count, Device where = Device::kCuda) {
  m.set_device(where);
  m.resize((count + 1) / 2, 1);
  return reinterpret_cast<std::uint16_t*>(m.data());
}

// One block per peer that has rows: peer q's rows are [offsets[q], offsets[q+1]) of a row array
// starting at base, row_bytes each (send lists, receive lists and the halo rows all lie so).
std::vector<PeerBlock> peer_blocks(int k, const EdgeId* offsets, void* base,
                                   std::size_t row_bytes) {
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
  std::vector<char> send, recv, prev;  // MPI: host payloads
  Matrix dsend, drecv, dprev;          // NCCL: device payloads (raw storage)
  bool primed = false;                 // has delivered once this run
  Matrix avg;                          // --halo-smoothing: the moving average (backend memory)
  bool averaging = false;              // avg holds rows of this run
};

HaloExchanger::HaloExchanger(Communicator& comm, Backend& be, const HaloPlanView& plan,
                             HaloDtype dtype, int staleness, float smoothing)
    : comm_(comm),
      be_(be),
      plan_(plan),
      dtype_(dtype),
      staleness_(staleness),
      smoothing_(smoothing),
      gpu_(be.device() == Device::kCuda) {
  if (gpu_) {  // rows are packed on the device, then staged through the host for MPI
    send_dev_ = std::make_unique<DeviceArray<NodeId>>(plan.send, std::size_t(plan.send_rows()));
    stage_.set_device(Device::kCuda);
  }
  // A communicator that moves the backend's memory (NCCL; on the CPU backend, the tests' host
  // loopback that runs this path without a GPU) takes the direct path: no staging.
  direct_ = comm.device_buffers();
  if (comm.needs_gpu_memory() && !gpu_)
    throw ParamError(std::string("the ") + comm.name() +
                     " communicator moves GPU memory: it needs the CUDA backend");
  if (staleness < 0 || staleness > 1) throw ParamError("--halo-staleness must be 0 or 1");
  if (!(smoothing >= 0.f && smoothing < 1.f))
    throw ParamError("--halo-smoothing must be in [0, 1)");
  if (smoothing > 0.f && staleness == 0)
    throw ParamError("--halo-smoothing smooths stale halo rows: it needs --halo-staleness 1");
  if (plan.k != comm.size())
    throw ParamError("the halo plan is for " + std::to_string(plan.k) + " ranks but the job has " +
                     std::to_string(comm.size()));
}

HaloExchanger::~HaloExchanger() = default;

std::int64_t HaloExchanger::predicted_bytes(const HaloPlanView& plan,
                                            const std::vector<std::int64_t>& widths,
                                            const std::vector<bool>& backward, HaloDtype dtype) {
  const auto es = std::int64_t(value_bytes(dtype));
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
void HaloExchanger::start_forward(const MatrixView& all, std::vector<char>& send, void* recv,
                                  bool recv_in_place, int tag) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  const std::size_t es = value_bytes(dtype_);
  send.resize(std::size_t(n * w) * es);
  if (gpu_) {  // gather (and narrow) on the device, then stage the payload's bytes only
    stage_.resize(n, w);
    be_.gather_rows(all, send_index(), n, stage_.view());
    const void* payload = stage_.data();
    if (dtype_ == HaloDtype::kBf16) {
      std::uint16_t* half = device_halves(wire_send_, n * w);
      be_.pack_bf16(stage_.data(), n * w, half);
      payload = half;
    }
    if (!send.empty()) device_copy(send.data(), payload, send.size(), CopyKind::kDeviceToHost);
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
  const auto recvs =
      peer_blocks(plan_.k, plan_.recv_offsets, recv_in_place ? all.row(plan_.owned) : recv, row);
  stats_.bytes_sent += std::int64_t(send.size());
  pending_next_ = comm_.exchange(sends, recvs, tag);
}

// Posts the halo rows' gradients to their owners (from a packed copy in `send` when copy_send or
// bf16; straight from `all` otherwise) and the receives of this rank's own rows' gradients.
void HaloExchanger::start_backward(const MatrixView& all, std::vector<char>& send,
                                   std::vector<char>& recv, bool copy_send, int tag) {
  const std::int64_t w = all.cols, h = plan_.halo;
  const std::size_t es = value_bytes(dtype_);
  const float* halo_rows = all.row(plan_.owned);
  const char* src = reinterpret_cast<const char*>(halo_rows);
  if (gpu_) {  // narrow on the device, then stage the halo rows' gradients on the host
    send.resize(std::size_t(h * w) * es);
    const void* payload = halo_rows;
    if (dtype_ == HaloDtype::kBf16) {
      std::uint16_t* half = device_halves(wire_send_, h * w);
      be_.pack_bf16(halo_rows, h * w, half);
      payload = half;
    }
    if (!send.empty()) device_copy(send.data(), payload, send.size(), CopyKind::kDeviceToHost);
    src = send.data();
  } else if (dtype_ == HaloDtype::kBf16) {
    send.resize(std::size_t(h * w) * es);
    be_.pack_bf16(halo_rows, h * w, reinterpret_cast<std::uint16_t*>(send.data()));
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
    copy_floats(all.device, all.row(plan_.owned), Device::kCpu,
                reinterpret_cast<const float*>(recv.data()), n);
    return;
  }
  const auto* in = reinterpret_cast<const std::uint16_t*>(recv.data());
  if (gpu_) {  // the narrow payload goes to the device and is widened there
    std::uint16_t* half = device_halves(wire_recv_, n);
    if (n > 0) device_copy(half, in, std::size_t(n) * 2, CopyKind::kHostToDevice);
    in = half;
  }
  be_.unpack_bf16(in, n, all.row(plan_.owned));
}

void HaloExchanger::add_received(const std::vector<char>& recv, const MatrixView& all,
                                 Slot* smooth) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  if (n == 0) return;
  if (gpu_) {  // the payload goes to the device (widened there), then is added into owned rows
    stage_.resize(n, w);
    if (dtype_ == HaloDtype::kBf16) {
      std::uint16_t* half = device_halves(wire_recv_, n * w);
      device_copy(half, recv.data(), std::size_t(n * w) * 2, CopyKind::kHostToDevice);
      be_.unpack_bf16(half, n * w, stage_.data());
    } else {
      copy_floats(Device::kCuda, stage_.data(), Device::kCpu,
                  reinterpret_cast<const float*>(recv.data()), n * w);
    }
    be_.scatter_add_rows(smoothed(smooth, stage_.view()), send_index(), n,
                         all.rows_range(0, plan_.owned));
    return;
  }
  const float* rows = reinterpret_cast<const float*>(recv.data());
  if (dtype_ == HaloDtype::kBf16) {
    widened_.resize(std::size_t(n * w));
    be_.unpack_bf16(reinterpret_cast<const std::uint16_t*>(recv.data()), n * w, widened_.data());
    rows = widened_.data();
  }
  be_.scatter_add_rows(smoothed(smooth, {const_cast<float*>(rows), n, w, all.device}), plan_.send,
                       n, all.rows_range(0, plan_.owned));
}

MatrixView HaloExchanger::smoothed(Slot* s, const MatrixView& rows) {
  if (s == nullptr || smoothing_ == 0.f || rows.size() == 0) return rows;
  if (!s->averaging) {  // the first delivery of the run starts the average: it is rows itself
    s->avg.set_device(be_.device());
    s->avg.resize(rows.rows, rows.cols);
    be_.copy(rows, s->avg.view());
    s->averaging = true;
    return rows;
  }
  be_.smooth(rows, smoothing_, s->avg.view());
  return s->avg.view();
}

HaloExchanger::Slot& HaloExchanger::slot(std::vector<std::unique_ptr<Slot>>& slots, int layer) {
  if (std::size_t(layer) >= slots.size()) slots.resize(std::size_t(layer) + 1);
  auto& s = slots[std::size_t(layer)];
  if (!s) s = std::make_unique<Slot>();
  return *s;
}

// NCCL: rows gathered (and narrowed) on the GPU go from a device send buffer straight into
// device memory on the peers: into their halo rows (exact f32) or a payload buffer that is
// widened or copied into them. Posts through pending_next_.
void HaloExchanger::post_direct_forward(const MatrixView& all, Matrix& send, void* recv, int tag) {
  const std::int64_t w = all.cols, n = plan_.send_rows();
  const std::size_t row = std::size_t(w) * value_bytes(dtype_);
  void* out = nullptr;
  if (dtype_ == HaloDtype::kF32) {
    send.set_device(be_.device());
    send.resize(n, w);
    if (n > 0) be_.gather_rows(all, send_index(), n, send.view());
    out = send.data();
  } else {
    stage_.resize(n, w);
    if (n > 0) be_.gather_rows(all, send_index(), n, stage_.view());
    std::uint16_t* half = device_halves(send, n * w, be_.device());
    be_.pack_bf16(stage_.data(), n * w, half);
    out = half;
  }
  const auto sends = peer_blocks(plan_.k, plan_.send_offsets, out, row);
  const auto recvs = peer_blocks(plan_.k, plan_.recv_offsets, recv, row);
  stats_.bytes_sent += std::int64_t(std::size_t(n) * row);
  pending_next_ = comm_.exchange(sends, recvs, tag);
}

// The halo rows' gradients go home from the halo rows themselves (exact f32), or from a copy in
// `send` (narrowed to bf16, or kept because the halo rows change while they travel).
void HaloExchanger::post_direct_backward(const MatrixView& all, Matrix& send, void* recv,
                                         bool copy_send, int tag) {
  const std::int64_t w = all.cols, h = plan_.halo;
  const std::size_t row = std::size_t(w) * value_bytes(dtype_);
  void* out = all.row(plan_.owned);
  if (dtype_ == HaloDtype::kBf16) {
    std::uint16_t* half = device_halves(send, h * w, be_.device());
    be_.pack_bf16(all.row(plan_.owned), h * w, half);
    out = half;
  } else if (copy_send) {
    send.set_device(be_.device());
    send.resize(h, w);
    be_.copy(all.rows_range(plan_.owned, plan_.owned + h), send.view());
    out = send.data();
  }
  const auto sends = peer_blocks(plan_.k, plan_.recv_offsets, out, row);
  const auto recvs = peer_blocks(plan_.k, plan_.send_offsets, recv, row);
  stats_.bytes_sent += std::int64_t(std::size_t(h) * row);
  pending_next_ = comm_.exchange(sends, recvs, tag);
}

// Device payload storage for `rows` rows of width w in the exchange's dtype.
void* HaloExchanger::direct_payload(Matrix& m, std::int64_t rows, std::int64_t w) {
  if (dtype_ == HaloDtype::kBf16) return device_halves(m, rows * w, be_.device());
  m.set_device(be_.device());
  m.resize(rows, w);
  return m.data();
}

// A received halo payload (device memory) into the halo rows of `all`.
void HaloExchanger::unpack_direct_halo(const void* payload, const MatrixView& all) {
  const std::int64_t h = plan_.halo, w = all.cols;
  if (dtype_ == HaloDtype::kBf16) {
    be_.unpack_bf16(static_cast<const std::uint16_t*>(payload), h * w, all.row(plan_.owned));
  } else if (payload != all.row(plan_.owned)) {
    be_.copy({static_cast<float*>(const_cast<void*>(payload)), h, w, be_.device()},
             all.rows_range(plan_.owned, plan_.owned + h));
  }
}

// Received gradients (device payload, one row per send-list entry) added into the owned rows.
void HaloExchanger::add_direct_received(const void* payload, const MatrixView& all, Slot* smooth) {
  const std::int64_t n = plan_.send_rows(), w = all.cols;
  if (n == 0) return;
  float* rows = static_cast<float*>(const_cast<void*>(payload));
  if (dtype_ == HaloDtype::kBf16) {
    grad_stage_.set_device(be_.device());
    grad_stage_.resize(n, w);
    be_.unpack_bf16(static_cast<const std::uint16_t*>(payload), n * w, grad_stage_.data());
    rows = grad_stage_.data();
  }
  be_.scatter_add_rows(smoothed(smooth, {rows, n, w, be_.device()}), send_index(), n,
                       all.rows_range(0, plan_.owned));
}

void HaloExchanger::forward_begin(const MatrixView& all, int layer, bool training) {
  fwd_stale_ = training && staleness_ > 0;
  if (!fwd_stale_) {
    if (direct_) {  // f32 lands in the halo rows themselves
      void* recv = dtype_ == HaloDtype::kF32 ? all.row(plan_.owned)
                                             : direct_payload(wire_recv_, plan_.halo, all.cols);
      post_direct_forward(all, dtype_ == HaloDtype::kF32 ? stage_ : wire_send_, recv,
                          tag_of(layer, kForward));
    } else {
      const bool in_place = dtype_ == HaloDtype::kF32 && !gpu_;
      recv_buf_.resize(in_place ? 0 : std::size_t(plan_.halo * all.cols) * value_bytes(dtype_));
      start_forward(all, send_buf_, recv_buf_.data(), in_place, tag_of(layer, kForward));
    }
    pending_ = std::move(pending_next_);
    fwd_all_ = all;
    return;
  }
  // Stale: the halo rows are last epoch's (epoch 1 of a run waits for its own, exactly); this
  // epoch's rows travel while the layer — and the rest of the epoch — computes.
  Slot& s = slot(fwd_slots_, layer);
  finish_pending(s.pending);
  const std::size_t es = value_bytes(dtype_);
  void* drecv = direct_ ? direct_payload(s.drecv, plan_.halo, all.cols) : nullptr;
  if (!direct_) s.recv.resize(std::size_t(plan_.halo * all.cols) * es);
  auto post = [&] {
    if (direct_)
      post_direct_forward(all, s.dsend, drecv, tag_of(layer, kStaleForward));
    else
      start_forward(all, s.send, s.recv.data(), false, tag_of(layer, kStaleForward));
  };
  auto unpack = [&] {
    if (direct_)
      unpack_direct_halo(drecv, all);
    else
      unpack_halo(s.recv, all);
    if (smoothing_ > 0.f && plan_.halo > 0) {  // the layer reads the average
      const MatrixView halo_rows = all.rows_range(plan_.owned, plan_.owned + plan_.halo);
      const MatrixView avg = smoothed(&s, halo_rows);
      if (avg.data != halo_rows.data) be_.copy(avg, halo_rows);
    }
  };
  if (!s.primed) {
    post();
    finish_pending(pending_next_);
    s.primed = true;
    unpack();
    return;
  }
  unpack();  // before the post, which orders NCCL after the backend work queued so far
  post();
  s.pending = std::move(pending_next_);
}

void HaloExchanger::forward_end() {
  if (fwd_stale_) return;
  finish_pending(pending_);
  if (direct_) {
    if (dtype_ == HaloDtype::kBf16) unpack_direct_halo(wire_recv_.data(), fwd_all_);
    return;
  }
  if (dtype_ == HaloDtype::kBf16 || gpu_) unpack_halo(recv_buf_, fwd_all_);
}

void HaloExchanger::backward_begin(const MatrixView& all, int layer) {
  if (staleness_ == 0) {
    if (direct_) {
      void* recv = direct_payload(dtype_ == HaloDtype::kF32 ? grad_stage_ : wire_recv_,
                                  plan_.send_rows(), all.cols);
      post_direct_backward(all, wire_send_, recv, /*copy_send=*/false, tag_of(layer, kBackward));
    } else {
      start_backward(all, send_buf_, recv_buf_, /*copy_send=*/false, tag_of(layer, kBackward));
    }
    pending_ = std::move(pending_next_);
    bwd_active_ = nullptr;
    return;
  }
  // Stale: backward_end adds the gradients the owners' peers sent last epoch (epoch 1 of a run:
  // this epoch's, waited for); this epoch's travel meanwhile.
  Slot& s = slot(bwd_slots_, layer);
  bwd_active_ = &s;
  auto post = [&] {
    if (direct_)
      post_direct_backward(all, s.dsend, direct_payload(s.drecv, plan_.send_rows(), all.cols),
                           /*copy_send=*/true, tag_of(layer, kStaleBackward));
    else
      start_backward(all, s.send, s.recv, /*copy_send=*/true, tag_of(layer, kStaleBackward));
  };
  auto arrived = [&] {  // what just arrived becomes what backward_end adds
    std::swap(s.recv, s.prev);
    std::swap(s.drecv, s.dprev);
  };
  if (s.pending) {
    finish_pending(s.pending);
    arrived();
  } else if (!s.primed) {
    post();
    finish_pending(pending_next_);
    arrived();
    s.primed = true;
    return;
  }
  post();
  s.pending = std::move(pending_next_);
}

void HaloExchanger::backward_end(const MatrixView& all) {
  if (bwd_active_) {
    if (direct_)
      add_direct_received(bwd_active_->dprev.data(), all, bwd_active_);
    else
      add_received(bwd_active_->prev, all, bwd_active_);
    bwd_active_ = nullptr;
    return;
  }
  finish_pending(pending_);
  if (direct_)
    add_direct_received(dtype_ == HaloDtype::kF32 ? grad_stage_.data() : wire_recv_.data(), all,
                        nullptr);
  else
    add_received(recv_buf_, all, nullptr);
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
        s->averaging = false;
      }
  bwd_active_ = nullptr;
}

}  // namespace halo

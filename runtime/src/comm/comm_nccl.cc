// The NCCL communicators: halo rows and gradients move between GPUs without touching the host.
// NCCL is loaded at run time (dlopen of libnccl.so.2), not linked: a machine without NCCL still
// runs halo (ranks on GPUs then exchange through MPI with host staging), and the library can
// come from the CUDA toolkit or from a Python wheel's folder on LD_LIBRARY_PATH.
//
// No call blocks without a deadline. The communicators are non-blocking (ncclConfig_t
// blocking = 0, NCCL 2.14 or later): init, group ends and collectives return at once (possibly
// ncclInProgress) and halo polls ncclCommGetAsyncError against HALO_COMM_TIMEOUT_S
// (poll_until), so a peer that hangs (not only one that died) fails the rank with a named error
// instead of blocking it forever; so do waits for the GPU side, which poll a CUDA event and
// NCCL's asynchronous error. On a timeout or an error both communicators are aborted
// (ncclCommAbort, once: it frees them), so no rank stays blocked in a kernel.
//
// Two communicators, each with its own stream: halo exchanges on one, the gradient all-reduce
// on the other, so the all-reduce never queues behind a stale exchange still in flight (stale
// halos span an epoch) and its time is its own. Both are made from their own unique id (made
// by rank 0, broadcast over the bootstrap MPI communicator) rather than ncclCommSplit, which
// needs NCCL 2.18. NCCL's guide warns that operations of two communicators running at once can
// deadlock when their kernels cannot all be resident together; every rank issues the same
// exchanges and all-reduces in the same order (the trainer is SPMD), which avoids the
// cross-order case, and one GPU per rank leaves room for a halo exchange's and an all-reduce's
// kernels. Should a run hang there anyway, HALO_NCCL_SERIAL=1 orders each all-reduce after the
// exchanges queued before it (the old behaviour: no overlap of the two).
//
// Nothing else waits for NCCL's streams: posts are ordered after the backend's work by an event
// (recorded on the legacy default stream, which follows every blocking stream: the backend's),
// not by a device-wide synchronisation, so exchanges in flight overlap compute and a dead peer
// cannot block a rank outside a timed wait; and while an exception unwinds, the communicators
// are aborted before the first device free (add_unwind_hook), since cudaFree waits for the whole
// device.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "halo/gnn/cuda_check.h"
#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/runtime/comm/comm.h"

namespace halo {
namespace {

// The NCCL entry points halo uses, resolved from the shared library.
struct NcclApi {
  void* lib = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank_config)(ncclComm_t*, int, ncclUniqueId, int,
                                        ncclConfig_t*) = nullptr;
  ncclResult_t (*comm_finalize)(ncclComm_t) = nullptr;  // optional (NCCL 2.14)
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*get_async_error)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
  std::string why_not;  // empty when loaded

  static const NcclApi& get() {
    static const NcclApi api = load();
    return api;
  }

 private:
  static NcclApi load() {
    NcclApi a;
    a.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      a.why_not = std::string("libnccl.so.2 not found (") + dlerror() + ")";
      return a;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(a.lib, name));
      if (!fn && a.why_not.empty())
        a.why_not = std::string("libnccl.so.2 lacks ") + name + " (halo needs NCCL 2.14 or later)";
    };
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.comm_init_rank_config, "ncclCommInitRankConfig");
    sym(a.comm_abort, "ncclCommAbort");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.get_async_error, "ncclCommGetAsyncError");
    sym(a.group_start, "ncclGroupStart");
    sym(a.group_end, "ncclGroupEnd");
    sym(a.send, "ncclSend");
    sym(a.recv, "ncclRecv");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.error_string, "ncclGetErrorString");
    a.comm_finalize = reinterpret_cast<decltype(a.comm_finalize)>(dlsym(a.lib, "ncclCommFinalize"));
    return a;
  }
};

std::string nccl_error(ncclResult_t r) {
  const NcclApi& api = NcclApi::get();
  return api.error_string ? api.error_string(r) : "NCCL error " + std::to_string(int(r));
}

// A call on a non-blocking communicator: ncclInProgress means started (its completion is
// polled for); anything but that and success is an error.
void check_started(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw SystemError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    nccl_error(r));
}
#define HALO_NCCL_START(call) check_started((call), #call, __FILE__, __LINE__)

// One communicator and the stream its operations go on.
struct NcclLink {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// The communicators (halo rows, gradients) and whether they were aborted: ncclCommAbort frees a
// communicator, so it must happen once and nothing may use the handles after (shared by the
// communicator and its pending exchanges). A failure of either aborts both: the job is over.
struct NcclState {
  NcclLink rows, grads;
  bool aborted = false;
  void abort_once() {
    if (aborted) return;
    aborted = true;
    for (ncclComm_t c : {rows.comm, grads.comm})
      if (c) NcclApi::get().comm_abort(c);
  }
  // comm's asynchronous state: ncclSuccess (idle: every operation started so far is queued on
  // its stream), ncclInProgress, or the error that broke it.
  ncclResult_t state(ncclComm_t comm) const {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = NcclApi::get().get_async_error(comm, &async);
    return r != ncclSuccess ? r : async;
  }
  // Throws when comm is in error (aborting both first); true when it is idle.
  bool ready(ncclComm_t comm, const std::string& what) {
    if (aborted) throw SystemError(what + ": the NCCL communicator was aborted");
    const ncclResult_t r = state(comm);
    if (r == ncclSuccess) return true;
    if (r == ncclInProgress) return false;
    abort_once();
    throw SystemError(what + ": NCCL failed: " + nccl_error(r));
  }
  // Waits, with the communication deadline, until comm has queued what was started on it.
  void wait_ready(ncclComm_t comm, const std::string& what) {
    poll_until([&] { return ready(comm, what); }, comm_timeout_seconds(), what,
               [this] { abort_once(); });
  }
};

// Waits for an event on the GPU with the deadline, watching comm's asynchronous error; on
// timeout or error aborts the communicators and throws SystemError.
void wait_event(cudaEvent_t ev, NcclState& s, ncclComm_t comm, const std::string& what) {
  long polls = 0;
  poll_until(
      [&] {
        const cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return true;
        if (e != cudaErrorNotReady) HALO_CUDA_CHECK(e);
        if (s.aborted) throw SystemError(what + ": the NCCL communicator was aborted");
        if (++polls % 256 == 0) s.ready(comm, what);  // throws if NCCL failed
        return false;
      },
      comm_timeout_seconds(), what, [&s] { s.abort_once(); });
}

class NcclPending final : public Pending {
 public:
  NcclPending(cudaEvent_t ev, NcclState& state, ncclComm_t comm, std::string what)
      : ev_(ev), state_(state), comm_(comm), what_(std::move(what)) {}
  ~NcclPending() override {
    if (std::uncaught_exceptions() == 0) {
      try {
        wait();
      } catch (...) {
      }
    }
    cudaEventDestroy(ev_);
  }
  void wait() override {
    if (done_) return;
    wait_event(ev_, state_, comm_, what_);
    done_ = true;
  }

 private:
  cudaEvent_t ev_;
  NcclState& state_;
  ncclComm_t comm_;
  std::string what_;
  bool done_ = false;
};

// Halo rows and gradients go over NCCL; everything on the host (counts, losses, statistics,
// gathers) stays on the bootstrap communicator it forwards to.
class NcclCommunicator final : public ForwardingCommunicator {
 public:
  NcclCommunicator(Communicator& boot, int device) : ForwardingCommunicator(boot) {
    const NcclApi& api = NcclApi::get();
    if (!api.why_not.empty()) throw SystemError("NCCL: " + api.why_not);
    HALO_CUDA_CHECK(cudaSetDevice(device));
    ncclUniqueId ids[2] = {};
    if (boot.rank() == 0)
      for (ncclUniqueId& id : ids)
        check_started(api.get_unique_id(&id), "ncclGetUniqueId", __FILE__, __LINE__);
    boot.broadcast(ids, sizeof ids, 0);
    HALO_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    HALO_CUDA_CHECK(cudaEventCreateWithFlags(&rows_done_, cudaEventDisableTiming));
    const char* serial = std::getenv("HALO_NCCL_SERIAL");
    serial_ = serial && std::string(serial) == "1";
    unwind_hook_ = add_unwind_hook([this] { state_.abort_once(); });
    try {
      init(state_.rows, ids[0], "NCCL init (halo rows)");
      init(state_.grads, ids[1], "NCCL init (gradients)");
    } catch (...) {
      // Abort, not finalize: a finalize would wait for peers that may still be in init.
      state_.abort_once();
      teardown();
      throw;
    }
  }
  ~NcclCommunicator() override { teardown(); }
  const char* name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }
  bool needs_gpu_memory() const override { return true; }

  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends,
                                    std::span<const PeerBlock> recvs, int) override {
    const NcclApi& api = NcclApi::get();
    const NcclLink& l = state_.rows;
    if (state_.aborted) throw SystemError("halo exchange (NCCL): the communicator was aborted");
    after_backend_work(l.stream);
    HALO_NCCL_START(api.group_start());
    try {
      for (const PeerBlock& b : recvs)
        if (b.bytes)
          HALO_NCCL_START(api.recv(b.data, b.bytes, ncclUint8, b.peer, l.comm, l.stream));
      for (const PeerBlock& b : sends)
        if (b.bytes)
          HALO_NCCL_START(api.send(b.data, b.bytes, ncclUint8, b.peer, l.comm, l.stream));
    } catch (...) {
      // Close the group (an abort inside an open group is only queued), then end NCCL.
      api.group_end();
      state_.abort_once();
      throw;
    }
    HALO_NCCL_START(api.group_end());
    state_.wait_ready(l.comm, "halo exchange (NCCL)");  // queued on the stream
    return std::make_unique<NcclPending>(record(l.stream), state_, l.comm, "halo exchange (NCCL)");
  }

  void allreduce_device(float* data, std::int64_t n) override {
    const NcclApi& api = NcclApi::get();
    const NcclLink& l = state_.grads;
    if (state_.aborted)
      throw SystemError("gradient all-reduce (NCCL): the communicator was aborted");
    after_backend_work(l.stream);
    if (serial_) {  // HALO_NCCL_SERIAL=1: after the exchanges queued so far, too
      HALO_CUDA_CHECK(cudaEventRecord(rows_done_, state_.rows.stream));
      HALO_CUDA_CHECK(cudaStreamWaitEvent(l.stream, rows_done_, 0));
    }
    HALO_NCCL_START(
        api.all_reduce(data, data, std::size_t(n), ncclFloat32, ncclSum, l.comm, l.stream));
    state_.wait_ready(l.comm, "gradient all-reduce (NCCL)");
    NcclPending done(record(l.stream), state_, l.comm, "gradient all-reduce (NCCL)");
    done.wait();
  }

  void abort(int code) override {
    state_.abort_once();
    ForwardingCommunicator::abort(code);
  }

 private:
  // Makes link's stream and non-blocking communicator and waits (with the deadline) for every
  // rank to join it.
  void init(NcclLink& link, const ncclUniqueId& id, const char* what) {
    HALO_CUDA_CHECK(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    HALO_NCCL_START(NcclApi::get().comm_init_rank_config(&link.comm, size(), id, rank(), &config));
    state_.wait_ready(link.comm, what);
  }

  // Ends the communicators (aborting them while an exception unwinds, or when finalising does
  // not complete within the deadline) and frees the streams and events; never throws.
  void teardown() noexcept {
    remove_unwind_hook(unwind_hook_);
    const NcclApi& api = NcclApi::get();
    if (std::uncaught_exceptions() > 0) state_.abort_once();
    if (!state_.aborted && api.comm_finalize) {
      try {
        for (NcclLink* l : {&state_.rows, &state_.grads})
          if (l->comm) {
            HALO_NCCL_START(api.comm_finalize(l->comm));
            state_.wait_ready(l->comm, "NCCL finalize");
          }
      } catch (...) {
        state_.abort_once();  // a peer gone before the end: abort, do not wait forever
      }
    }
    if (!state_.aborted)
      for (NcclLink* l : {&state_.rows, &state_.grads})
        if (l->comm) api.comm_destroy(l->comm);
    for (NcclLink* l : {&state_.rows, &state_.grads})
      if (l->stream) cudaStreamDestroy(l->stream);
    if (ready_) cudaEventDestroy(ready_);
    if (rows_done_) cudaEventDestroy(rows_done_);
  }

  // Orders stream's next operations after all work queued so far on blocking streams (the
  // backend's kernels, the legacy stream's copies), without the host waiting.
  void after_backend_work(cudaStream_t stream) {
    HALO_CUDA_CHECK(cudaEventRecord(ready_, cudaStreamLegacy));
    HALO_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_, 0));
  }

  // A new event marking what is queued on stream so far.
  static cudaEvent_t record(cudaStream_t stream) {
    cudaEvent_t ev = nullptr;
    HALO_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    HALO_CUDA_CHECK(cudaEventRecord(ev, stream));
    return ev;
  }

  NcclState state_;
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t rows_done_ = nullptr;  // HALO_NCCL_SERIAL=1: the exchanges queued so far
  bool serial_ = false;
  int unwind_hook_ = 0;
};

}  // namespace

std::string nccl_unavailable_reason() { return NcclApi::get().why_not; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace halo

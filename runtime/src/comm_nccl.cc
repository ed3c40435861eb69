// The NCCL communicator: halo rows and gradients move between GPUs without touching the host.
// NCCL is loaded at run time (dlopen of libnccl.so.2), not linked: a machine without NCCL still
// runs halo (ranks on GPUs then exchange through MPI with host staging), and the library can
// come from the CUDA toolkit or from a Python wheel's folder on LD_LIBRARY_PATH.
//
// The unique id is made by rank 0 and broadcast over the bootstrap (MPI) communicator. Waits
// poll a CUDA event with the same deadline as MPI's (HALO_COMM_TIMEOUT_S), and NCCL's
// asynchronous error (a peer or the network failing leaves operations that never complete);
// on either the NCCL communicator is aborted (ncclCommAbort, once: it frees the communicator),
// so no rank stays blocked in a kernel. Nothing else waits for NCCL's stream: posts are ordered
// after the backend's work by an event (recorded on the legacy default stream, which follows
// every blocking stream: the backend's), not by a device-wide synchronisation, so exchanges in
// flight (stale ones span an epoch) overlap compute and a dead peer cannot block a rank outside
// a timed wait; and while an exception unwinds, the communicator is aborted before the first
// device free (add_unwind_hook), since cudaFree waits for the whole device.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

#include "halo/gnn/cuda_check.h"
#include "halo/gnn/device.h"
#include "halo/graph/error.h"
#include "halo/runtime/comm.h"

namespace halo {
namespace {

// The NCCL entry points halo uses, resolved from the shared library.
struct NcclApi {
  void* lib = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
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
      if (!fn && a.why_not.empty()) a.why_not = std::string("libnccl.so.2 lacks ") + name;
    };
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.comm_init_rank, "ncclCommInitRank");
    sym(a.comm_abort, "ncclCommAbort");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.get_async_error, "ncclCommGetAsyncError");
    sym(a.group_start, "ncclGroupStart");
    sym(a.group_end, "ncclGroupEnd");
    sym(a.send, "ncclSend");
    sym(a.recv, "ncclRecv");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.error_string, "ncclGetErrorString");
    return a;
  }
};

void check(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return;
  const NcclApi& api = NcclApi::get();
  throw SystemError(
      std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
      (api.error_string ? api.error_string(r) : "NCCL error " + std::to_string(int(r))));
}
#define HALO_NCCL_CHECK(call) check((call), #call, __FILE__, __LINE__)

// The communicator and whether it was aborted: ncclCommAbort frees it, so it must happen once
// and nothing may use the handle after (shared by the communicator and its pending exchanges).
struct NcclState {
  ncclComm_t comm = nullptr;
  bool aborted = false;
  void abort_once() {
    if (comm && !aborted) {
      aborted = true;
      NcclApi::get().comm_abort(comm);
    }
  }
};

// Waits for an event on the GPU with a deadline, watching NCCL's asynchronous error; on timeout
// or error aborts the NCCL communicator and throws SystemError.
void wait_event(cudaEvent_t ev, NcclState& s, const char* what) {
  const NcclApi& api = NcclApi::get();
  const auto start = std::chrono::steady_clock::now();
  for (long spin = 0;; ++spin) {
    const cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) HALO_CUDA_CHECK(e);
    if (s.aborted) throw SystemError(std::string(what) + ": the NCCL communicator was aborted");
    if (spin % 256 == 255) {
      ncclResult_t async = ncclSuccess;
      HALO_NCCL_CHECK(api.get_async_error(s.comm, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        s.abort_once();
        throw SystemError(std::string(what) + ": NCCL failed: " + api.error_string(async));
      }
    }
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > comm_timeout_seconds()) {
      s.abort_once();
      throw SystemError(std::string(what) + ": no answer from the other ranks after " +
                        std::to_string(int(waited)) +
                        " s (a rank died or hangs; HALO_COMM_TIMEOUT_S sets the limit)");
    }
  }
}

class NcclPending final : public Pending {
 public:
  NcclPending(cudaEvent_t ev, NcclState& state) : ev_(ev), state_(state) {}
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
    wait_event(ev_, state_, "halo exchange (NCCL)");
    done_ = true;
  }

 private:
  cudaEvent_t ev_;
  NcclState& state_;
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
    ncclUniqueId id{};
    if (boot.rank() == 0) HALO_NCCL_CHECK(api.get_unique_id(&id));
    boot.broadcast(&id, sizeof id, 0);
    HALO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    HALO_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    HALO_NCCL_CHECK(api.comm_init_rank(&state_.comm, boot.size(), id, boot.rank()));
    unwind_hook_ = add_unwind_hook([this] { state_.abort_once(); });
  }
  ~NcclCommunicator() override {
    remove_unwind_hook(unwind_hook_);
    if (state_.comm && !state_.aborted) {
      if (std::uncaught_exceptions() > 0)
        state_.abort_once();
      else
        NcclApi::get().comm_destroy(state_.comm);
    }
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  const char* name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }
  bool needs_gpu_memory() const override { return true; }

  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends,
                                    std::span<const PeerBlock> recvs, int) override {
    const NcclApi& api = NcclApi::get();
    if (state_.aborted) throw SystemError("halo exchange (NCCL): the communicator was aborted");
    after_backend_work();
    HALO_NCCL_CHECK(api.group_start());
    for (const PeerBlock& b : recvs)
      if (b.bytes)
        HALO_NCCL_CHECK(api.recv(b.data, b.bytes, ncclUint8, b.peer, state_.comm, stream_));
    for (const PeerBlock& b : sends)
      if (b.bytes)
        HALO_NCCL_CHECK(api.send(b.data, b.bytes, ncclUint8, b.peer, state_.comm, stream_));
    HALO_NCCL_CHECK(api.group_end());
    cudaEvent_t ev = nullptr;
    HALO_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    HALO_CUDA_CHECK(cudaEventRecord(ev, stream_));
    return std::make_unique<NcclPending>(ev, state_);
  }

  void allreduce_device(float* data, std::int64_t n) override {
    const NcclApi& api = NcclApi::get();
    if (state_.aborted)
      throw SystemError("gradient all-reduce (NCCL): the communicator was aborted");
    after_backend_work();
    HALO_NCCL_CHECK(
        api.all_reduce(data, data, std::size_t(n), ncclFloat32, ncclSum, state_.comm, stream_));
    cudaEvent_t ev = nullptr;
    HALO_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    HALO_CUDA_CHECK(cudaEventRecord(ev, stream_));
    NcclPending done(ev, state_);
    done.wait();
  }

  void abort(int code) override {
    state_.abort_once();
    ForwardingCommunicator::abort(code);
  }

 private:
  // Orders this stream's next operations after all work queued so far on blocking streams (the
  // backend's kernels, the legacy stream's copies), without the host waiting.
  void after_backend_work() {
    HALO_CUDA_CHECK(cudaEventRecord(ready_, cudaStreamLegacy));
    HALO_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  }

  NcclState state_;
  cudaEvent_t ready_ = nullptr;
  int unwind_hook_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::string nccl_unavailable_reason() { return NcclApi::get().why_not; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace halo

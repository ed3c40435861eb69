// Communicators: how ranks move bytes. One interface, three implementations: this process alone
// (LocalCommunicator), MPI (CPU ranks, host buffers), and NCCL (GPU ranks, comm_nccl.cc). The halo
// exchange and the trainer are written once against it.
//
// Failure model: every wait has a deadline (HALO_COMM_TIMEOUT_S, default 600 s). A rank whose
// peer died or hangs does not wait forever: the wait throws SystemError naming the operation,
// and the job is aborted (abort_job) — no rank is ever left blocked in a collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace halo {

// A contiguous block of bytes to send to, or receive from, one peer.
struct PeerBlock {
  int peer = 0;
  void* data = nullptr;
  std::size_t bytes = 0;
};

// An exchange in flight; wait() completes it (idempotent).
class Pending {
 public:
  virtual ~Pending() = default;
  virtual void wait() = 0;
};

enum class ReduceOp { kSum, kMin, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // Posts every receive and send (non-blocking) and returns the exchange in flight. Blocks must
  // stay valid and untouched until wait(). Exchanges started by all ranks with the same tag
  // match pairwise: a send to q is received by q's block from this rank with that tag.
  virtual std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends,
                                            std::span<const PeerBlock> recvs, int tag) = 0;
  // In-place reductions across all ranks; every rank gets the same bits.
  virtual void allreduce(float* data, std::int64_t n, ReduceOp op = ReduceOp::kSum) = 0;
  virtual void allreduce(double* data, std::int64_t n, ReduceOp op = ReduceOp::kSum) = 0;
  virtual void allreduce(std::int64_t* data, std::int64_t n, ReduceOp op = ReduceOp::kSum) = 0;
  // Every rank's bytes, concatenated in rank order, on root (empty elsewhere); counts[r] = the
  // number of bytes rank r gave (on root).
  virtual std::vector<char> gather(const void* data, std::size_t bytes, int root,
                                   std::vector<std::size_t>* counts) = 0;
  // Rank root's bytes to every rank, in place.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // True when exchange() takes the compute backend's memory as it is, so the halo exchange needs
  // no host staging (NCCL: GPU memory); false: host memory (MPI, local).
  virtual bool device_buffers() const { return false; }
  // True when that memory must be GPU memory (NCCL), so a CPU backend cannot use it.
  virtual bool needs_gpu_memory() const { return false; }
  // Sums n floats in device memory across ranks, in place (NCCL only).
  virtual void allreduce_device(float* data, std::int64_t n);
  // Ends every rank of the job with `code` (MPI_Abort); the local communicator returns, and its
  // caller exits normally.
  virtual void abort(int code) = 0;
};

// A communicator that passes every call to another one: the base of communicators that change
// only a few calls of the one they run over (NCCL over its bootstrap, the direct-path test hook).
class ForwardingCommunicator : public Communicator {
 public:
  // inner must outlive this communicator.
  explicit ForwardingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* name() const override { return inner_.name(); }
  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends,
                                    std::span<const PeerBlock> recvs, int tag) override {
    return inner_.exchange(sends, recvs, tag);
  }
  void allreduce(float* data, std::int64_t n, ReduceOp op) override {
    inner_.allreduce(data, n, op);
  }
  void allreduce(double* data, std::int64_t n, ReduceOp op) override {
    inner_.allreduce(data, n, op);
  }
  void allreduce(std::int64_t* data, std::int64_t n, ReduceOp op) override {
    inner_.allreduce(data, n, op);
  }
  std::vector<char> gather(const void* data, std::size_t bytes, int root,
                           std::vector<std::size_t>* counts) override {
    return inner_.gather(data, bytes, root, counts);
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    inner_.broadcast(data, bytes, root);
  }
  void barrier() override { inner_.barrier(); }
  bool device_buffers() const override { return inner_.device_buffers(); }
  bool needs_gpu_memory() const override { return inner_.needs_gpu_memory(); }
  void allreduce_device(float* data, std::int64_t n) override { inner_.allreduce_device(data, n); }
  void abort(int code) override { inner_.abort(code); }

 private:
  Communicator& inner_;
};

// The single-process communicator: rank 0 alone; blocks sent to itself land in its receives
// (in order, host memory); reductions are the identity.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* name() const override { return "local"; }
  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends,
                                    std::span<const PeerBlock> recvs, int tag) override;
  void allreduce(float*, std::int64_t, ReduceOp) override {}
  void allreduce(double*, std::int64_t, ReduceOp) override {}
  void allreduce(std::int64_t*, std::int64_t, ReduceOp) override {}
  std::vector<char> gather(const void* data, std::size_t bytes, int root,
                           std::vector<std::size_t>* counts) override;
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  void abort(int) override {}
};

// A communicator over NCCL for ranks that each own a GPU (`device`), bootstrapped over
// `bootstrap` (which must outlive it); host-memory reductions and gathers go through the
// bootstrap. Throws SystemError when NCCL cannot be loaded (nccl_unavailable_reason()).
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);
// Empty when NCCL can be used; else why not (not built, libnccl.so.2 missing, ...).
std::string nccl_unavailable_reason();

// True when this process was started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx).
// halo initialises MPI only then, so plain `halo ...` never pays for (or depends on) MPI start-up.
bool launched_by_mpi();

// MPI for the lifetime of the object (MPI_Init_thread .. MPI_Finalize) when launched_by_mpi().
// `library_threads`: a library's own threads will call MPI at once (PT-Scotch's), so ask for
// MPI_THREAD_MULTIPLE; otherwise MPI_THREAD_SERIALIZED, which halo's own threads need.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv, bool library_threads = false);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// MPI_COMM_WORLD when MPI is initialised, else a LocalCommunicator. Process-wide.
Communicator& world();

// world().abort(code): ends every rank of a multi-rank job; returns in a single process.
void abort_job(int code);

// For a rank that failed, before it reports: waits up to grace_s for every other rank of world()
// to fail too, and returns the lowest failing rank when all did (an error every rank meets, such
// as a bad flag or parts of another K: the lowest reports it, the others stay silent), or -1 when
// some rank did not fail within grace_s (it reports alone). Runs over a communicator of its own,
// so it never matches a collective the other ranks are waiting in. 0 in a single process.
int first_failed_rank(double grace_s);

// Seconds a wait may last before the job is declared dead (HALO_COMM_TIMEOUT_S, default 600).
double comm_timeout_seconds();

// A host-side wait with a deadline, for communication whose library has no deadline of its own
// (NCCL: init, group ends, kernels in flight; all polled, never blocked on). Calls poll() until
// it returns true, backing off from spinning to short sleeps; poll throws to fail (after
// cancelling what it must). When timeout_s passes first, calls give_up() once (cancel the
// communicator: it must not throw) and throws SystemError "<what>: no answer from the other
// ranks after N s (...; HALO_COMM_TIMEOUT_S sets the limit)".
void poll_until(const std::function<bool()>& poll, double timeout_s, const std::string& what,
                const std::function<void()>& give_up);

// Default OpenMP threads per rank: the CPUs this rank may use divided among the ranks that share
// them (a job of 4 unbound ranks on 8 cores runs 2 threads each instead of 8 and thrashing).
int default_threads_per_rank();

}  // namespace halo

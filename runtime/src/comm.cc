// The local and MPI communicators.
//
// MPI waits are polls (MPI_Testall) with a deadline rather than MPI_Waitall: a blocking wait on a
// peer that died without MPI noticing (a hung rank, a lost node) would never return; a poll can
// give up, name what it waited for, and let the caller abort the job. Polling yields the CPU
// after a short spin so oversubscribed ranks (more ranks than cores) still make progress.
#include "halo/runtime/comm.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "halo/graph/error.h"

namespace halo {
namespace {

struct Done final : Pending {
  void wait() override {}
};

bool g_mpi = false;  // MPI initialised by MpiSession

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, std::size_t(len));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw SystemError(std::string("MPI: ") + what + ": " + mpi_error(code));
}

std::vector<std::string> g_hosts;  // every rank's host name, for messages (MpiCommunicator)

// "rank 2 (node2) and rank 3 (node2)": the ranks behind the requests of `reqs` not complete yet.
std::string unanswered(std::vector<MPI_Request>& reqs, const std::vector<int>& peers) {
  std::vector<int> ranks;
  for (std::size_t i = 0; i < reqs.size() && i < peers.size(); ++i) {
    int flag = 1;
    MPI_Status st;
    if (reqs[i] != MPI_REQUEST_NULL) MPI_Request_get_status(reqs[i], &flag, &st);
    if (!flag && std::find(ranks.begin(), ranks.end(), peers[i]) == ranks.end()) ranks.push_back(peers[i]);
  }
  std::sort(ranks.begin(), ranks.end());
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + ("rank " + std::to_string(ranks[i]));
    if (std::size_t(ranks[i]) < g_hosts.size()) s += " (" + g_hosts[std::size_t(ranks[i])] + ")";
  }
  return s;
}

// Polls requests until all complete or the deadline passes (then throws naming `what` and, for
// point-to-point requests whose peers[i] is given, the ranks that did not answer).
void wait_all(std::vector<MPI_Request>& reqs, const std::string& what, const std::vector<int>& peers = {}) {
  if (reqs.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const double limit = comm_timeout_seconds();
  for (long spin = 0;; ++spin) {
    int done = 0;
    check(MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), what.c_str());
    if (done) return;
    if (spin > 2000) sched_yield();
    if (spin % 1024 == 0 && spin > 0) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > limit) {
        const std::string who = unanswered(reqs, peers);
        throw SystemError(what + ": no answer from " + (who.empty() ? "the other ranks" : who) + " after " +
                          std::to_string(int(waited)) + " s (a rank died or hangs, or its node or link is down; "
                          "HALO_COMM_TIMEOUT_S sets the limit)");
      }
      if (waited > 0.01) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

class MpiPending final : public Pending {
 public:
  MpiPending(std::vector<MPI_Request> reqs, std::vector<int> peers, int tag)
      : reqs_(std::move(reqs)), peers_(std::move(peers)), tag_(tag) {}
  ~MpiPending() override {
    // Never leave requests behind (the buffers are about to go) — except while an exception
    // unwinds: then the job is about to be aborted and waiting on peers could only hang.
    if (std::uncaught_exceptions() > 0) return;
    try {
      wait();
    } catch (...) {
    }
  }
  void wait() override {
    if (reqs_.empty()) return;
    wait_all(reqs_, "halo exchange (tag " + std::to_string(tag_) + ")", peers_);
    reqs_.clear();
  }

 private:
  std::vector<MPI_Request> reqs_;
  std::vector<int> peers_;  // the peer of each request
  int tag_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Every rank's host name, so that a wait that gives up can say where its peers run.
    constexpr int kName = 64;
    char mine[kName] = {};
    gethostname(mine, kName - 1);
    std::vector<char> all(std::size_t(size_) * kName, 0);
    std::vector<MPI_Request> req(1);
    check(MPI_Iallgather(mine, kName, MPI_CHAR, all.data(), kName, MPI_CHAR, MPI_COMM_WORLD, &req[0]),
          "MPI_Iallgather");
    wait_all(req, "start-up (host names)");
    for (int r = 0; r < size_; ++r) g_hosts.emplace_back(all.data() + std::size_t(r) * kName);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  std::unique_ptr<Pending> exchange(std::span<const PeerBlock> sends, std::span<const PeerBlock> recvs,
                                    int tag) override {
    std::vector<MPI_Request> reqs;
    std::vector<int> peers;
    reqs.reserve(sends.size() + recvs.size());
    for (const PeerBlock& b : recvs) {  // receives first: sends can then complete eagerly
      if (b.bytes == 0) continue;
      post(b, tag, /*send=*/false, reqs);
      peers.resize(reqs.size(), b.peer);
    }
    for (const PeerBlock& b : sends) {
      if (b.bytes == 0) continue;
      post(b, tag, /*send=*/true, reqs);
      peers.resize(reqs.size(), b.peer);
    }
    return std::make_unique<MpiPending>(std::move(reqs), std::move(peers), tag);
  }

  void allreduce(float* data, std::int64_t n, ReduceOp op) override { reduce(data, n, MPI_FLOAT, op); }
  void allreduce(double* data, std::int64_t n, ReduceOp op) override { reduce(data, n, MPI_DOUBLE, op); }
  void allreduce(std::int64_t* data, std::int64_t n, ReduceOp op) override { reduce(data, n, MPI_INT64_T, op); }

  std::vector<char> gather(const void* data, std::size_t bytes, int root, std::vector<std::size_t>* counts) override {
    long long mine = static_cast<long long>(bytes);
    std::vector<long long> sizes(std::size_t(size_), 0);
    std::vector<MPI_Request> req(1);
    check(MPI_Iallgather(&mine, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD, &req[0]),
          "MPI_Iallgather");
    wait_all(req, "gather (sizes)");
    // Large payloads (predictions of a big graph) are sent in chunks below INT_MAX bytes.
    std::vector<char> out;
    std::vector<std::size_t> offs(std::size_t(size_) + 1, 0);
    for (int r = 0; r < size_; ++r) offs[std::size_t(r) + 1] = offs[std::size_t(r)] + std::size_t(sizes[std::size_t(r)]);
    std::vector<MPI_Request> reqs;
    std::vector<int> gather_peers;  // the peer of each request
    constexpr std::size_t kChunk = std::size_t(1) << 30;
    if (rank_ == root) {
      out.resize(offs.back());
      for (int r = 0; r < size_; ++r) {
        if (r == root) {
          if (bytes) std::memcpy(out.data() + offs[std::size_t(r)], data, bytes);
          continue;
        }
        for (std::size_t at = 0; at < std::size_t(sizes[std::size_t(r)]); at += kChunk) {
          const std::size_t len = std::min(kChunk, std::size_t(sizes[std::size_t(r)]) - at);
          reqs.emplace_back();
          check(MPI_Irecv(out.data() + offs[std::size_t(r)] + at, int(len), MPI_BYTE, r, kGatherTag, MPI_COMM_WORLD,
                          &reqs.back()), "MPI_Irecv");
          gather_peers.push_back(r);
        }
      }
      if (counts) {
        counts->assign(std::size_t(size_), 0);
        for (int r = 0; r < size_; ++r) (*counts)[std::size_t(r)] = std::size_t(sizes[std::size_t(r)]);
      }
    } else {
      for (std::size_t at = 0; at < bytes; at += kChunk) {
        const std::size_t len = std::min(kChunk, bytes - at);
        reqs.emplace_back();
        check(MPI_Isend(static_cast<const char*>(data) + at, int(len), MPI_BYTE, root, kGatherTag, MPI_COMM_WORLD,
                        &reqs.back()), "MPI_Isend");
        gather_peers.push_back(root);
      }
    }
    wait_all(reqs, "gather", gather_peers);
    return out;
  }

  void barrier() override {
    std::vector<MPI_Request> req(1);
    check(MPI_Ibarrier(MPI_COMM_WORLD, &req[0]), "MPI_Ibarrier");
    wait_all(req, "barrier");
  }

  void abort(int code) override {
    if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    constexpr std::size_t kChunk = std::size_t(1) << 30;
    for (std::size_t at = 0; at < bytes; at += kChunk) {
      std::vector<MPI_Request> req(1);
      check(MPI_Ibcast(static_cast<char*>(data) + at, int(std::min(kChunk, bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD,
                       &req[0]),
            "MPI_Ibcast");
      wait_all(req, "broadcast");
    }
  }

 private:
  static constexpr int kGatherTag = 1 << 20;

  void post(const PeerBlock& b, int tag, bool send, std::vector<MPI_Request>& reqs) {
    // MPI counts are ints: blocks above 2 GiB travel as several messages with the same tag
    // (MPI keeps their order between one pair of ranks).
    constexpr std::size_t kChunk = std::size_t(1) << 30;
    for (std::size_t at = 0; at < b.bytes; at += kChunk) {
      const int len = int(std::min(kChunk, b.bytes - at));
      char* p = static_cast<char*>(b.data) + at;
      reqs.emplace_back();
      if (send)
        check(MPI_Isend(p, len, MPI_BYTE, b.peer, tag, MPI_COMM_WORLD, &reqs.back()), "MPI_Isend");
      else
        check(MPI_Irecv(p, len, MPI_BYTE, b.peer, tag, MPI_COMM_WORLD, &reqs.back()), "MPI_Irecv");
    }
  }

  void reduce(void* data, std::int64_t n, MPI_Datatype type, ReduceOp op) {
    // MPI_Iallreduce's count is an int: reduce in chunks.
    int tsize = 0;
    MPI_Type_size(type, &tsize);
    constexpr std::int64_t kChunk = std::int64_t(1) << 28;
    for (std::int64_t at = 0; at < n; at += kChunk) {
      std::vector<MPI_Request> req(1);
      check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * tsize, int(std::min(kChunk, n - at)), type,
                           mpi_op(op), MPI_COMM_WORLD, &req[0]),
            "MPI_Iallreduce");
      wait_all(req, "all-reduce");
    }
  }

  int rank_ = 0, size_ = 1;
};

}  // namespace

void Communicator::allreduce_device(float*, std::int64_t) {
  throw SystemError(std::string("the ") + name() + " communicator moves host memory only");
}

#ifndef HALO_HAVE_NCCL
std::string nccl_unavailable_reason() { return "halo was built without NCCL support"; }
std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int) {
  throw SystemError("NCCL: " + nccl_unavailable_reason());
}
#endif

std::unique_ptr<Pending> LocalCommunicator::exchange(std::span<const PeerBlock> sends,
                                                     std::span<const PeerBlock> recvs, int) {
  std::size_t sent = 0, received = 0;
  for (const PeerBlock& b : sends) {
    if (b.bytes && b.peer != 0) throw ParamError("local communicator: no rank " + std::to_string(b.peer));
    sent += b.bytes;
  }
  for (const PeerBlock& b : recvs) {
    if (b.bytes && b.peer != 0) throw ParamError("local communicator: no rank " + std::to_string(b.peer));
    received += b.bytes;
  }
  if (sent != received)
    throw ParamError("local communicator: " + std::to_string(sent) + " bytes sent to itself but " +
                     std::to_string(received) + " expected");
  // Rank 0's bytes to rank 0, as MPI would deliver them: the concatenated sends fill the
  // receives in order.
  std::size_t si = 0, so = 0;
  for (const PeerBlock& r : recvs)
    for (std::size_t done = 0; done < r.bytes;) {
      while (sends[si].bytes == so) ++si, so = 0;
      const std::size_t n = std::min(r.bytes - done, sends[si].bytes - so);
      std::memmove(static_cast<char*>(r.data) + done, static_cast<const char*>(sends[si].data) + so, n);
      done += n;
      so += n;
    }
  return std::make_unique<Done>();
}

std::vector<char> LocalCommunicator::gather(const void* data, std::size_t bytes, int,
                                            std::vector<std::size_t>* counts) {
  if (counts) counts->assign(1, bytes);
  const char* p = static_cast<const char*>(data);
  return std::vector<char>(p, p + bytes);
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

MpiSession::MpiSession(int* argc, char*** argv) {
  if (!launched_by_mpi()) return;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
  // Errors come back as codes (turned into exceptions with the call's name), not a silent exit.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_mpi = true;
}

MpiSession::~MpiSession() {
  if (g_mpi) MPI_Finalize();
  g_mpi = false;
}

Communicator& world() {
  if (g_mpi) {
    static MpiCommunicator mpi;
    return mpi;
  }
  static LocalCommunicator local;
  return local;
}

void abort_job(int code) { world().abort(code); }

double comm_timeout_seconds() {
  static const double s = [] {
    const char* v = std::getenv("HALO_COMM_TIMEOUT_S");
    if (!v || !*v) return 600.0;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end || !(x > 0)) throw ParamError(std::string("HALO_COMM_TIMEOUT_S='") + v + "': expected seconds > 0");
    return x;
  }();
  return s;
}

int default_threads_per_rank() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = int(std::thread::hardware_concurrency());
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  int local = 1;
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* s = std::getenv(v)) {
      local = std::max(1, std::atoi(s));
      break;
    }
  // A rank bound to fewer CPUs than the machine has already got its share.
  if (cpus < int(std::thread::hardware_concurrency())) return std::max(1, cpus);
  return std::max(1, cpus / local);
}

}  // namespace halo

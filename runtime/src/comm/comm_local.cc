// What every communicator shares and needs no MPI: the local (one-rank) communicator, the
// launcher and environment queries, and the stand-ins for a build without NCCL.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "halo/graph/error.h"
#include "halo/runtime/comm/comm.h"

namespace halo {
namespace {

struct Done final : Pending {
  void wait() override {}
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
    if (b.bytes && b.peer != 0)
      throw ParamError("local communicator: no rank " + std::to_string(b.peer));
    sent += b.bytes;
  }
  for (const PeerBlock& b : recvs) {
    if (b.bytes && b.peer != 0)
      throw ParamError("local communicator: no rank " + std::to_string(b.peer));
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
      std::memmove(static_cast<char*>(r.data) + done, static_cast<const char*>(sends[si].data) + so,
                   n);
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
  for (const char* v :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

double comm_timeout_seconds() {
  static const double s = [] {
    const char* v = std::getenv("HALO_COMM_TIMEOUT_S");
    if (!v || !*v) return 600.0;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end || !(x > 0))
      throw ParamError(std::string("HALO_COMM_TIMEOUT_S='") + v + "': expected seconds > 0");
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

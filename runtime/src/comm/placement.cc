// GPU placement and the exchange communicator (placement.h).
#include "comm/placement.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "halo/gnn/device.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

// The physical machine this process runs on: its kernel's boot id (shared by the containers and
// network namespaces of one host, whatever their host names), else the host name. GPUs belong
// to machines, so GPU placement counts ranks per machine; what users and launchers call a node
// is its host name, which names ranks in every message (comm.cc, the supervisor).
std::string machine_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot && std::getline(boot, id) && !id.empty()) return id;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Another communicator that claims to move the compute backend's memory as it is: on CPU ranks
// over MPI (host memory) it sends the halo exchange and TGN's in-place gradient all-reduce
// through their direct paths, the ones NCCL takes on GPUs, so that their buffer handling meets
// real peers without GPUs (HALO_TEST_DIRECT_EXCHANGE=1; a test hook, not a mode).
class DirectOver final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  bool device_buffers() const override { return true; }
  void allreduce_device(float* data, std::int64_t n) override {
    allreduce(data, n, ReduceOp::kSum);
  }
};

// Every rank's string (up to 127 bytes), in rank order, on every rank.
std::vector<std::string> every_rank(Communicator& comm, const std::string& mine) {
  constexpr std::size_t kRecord = 128;
  char record[kRecord] = {};
  std::strncpy(record, mine.c_str(), kRecord - 1);
  std::vector<char> all = comm.gather(record, kRecord, 0, nullptr);
  all.resize(kRecord * std::size_t(comm.size()));
  comm.broadcast(all.data(), all.size(), 0);
  std::vector<std::string> out;
  out.reserve(std::size_t(comm.size()));
  for (int r = 0; r < comm.size(); ++r) out.emplace_back(all.data() + kRecord * std::size_t(r));
  return out;
}

// This rank's place among the ranks of its machine, from every rank's machine id.
int local_rank(const std::vector<std::string>& hosts, int rank) {
  int local = 0;
  for (int r = 0; r < rank; ++r) local += hosts[std::size_t(r)] == hosts[std::size_t(rank)];
  return local;
}

// One GPU per rank on a machine, and NCCL when every rank can use it (then NCCL moves the halo
// rows and gradients, f32 or bf16, exact or stale, between device buffers); null otherwise
// (ranks sharing a GPU, no NCCL: MPI with host staging of the packed payload).
// Also counts the job's ranks on this rank's physical GPU into *sharing.
std::unique_ptr<Communicator> place_on_gpu(Communicator& comm, bool announce, std::ostream& out,
                                           int* sharing) {
  const int rank = comm.rank();
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) throw SystemError("--device cuda: " + devs.reason);
  // This rank's place among the ranks on its machine (from machine ids, whatever the launcher
  // or the host names), then whether two ranks drive one physical GPU (NCCL does not support
  // it: it may hang), from PCI bus ids rather than counts, so per-rank CUDA_VISIBLE_DEVICES is
  // read right.
  const std::vector<std::string> hosts = every_rank(comm, machine_id());
  const int local = local_rank(hosts, rank);
  use_device(local % devs.count);
  const std::vector<std::string> gpus =
      every_rank(comm, hosts[std::size_t(rank)] + "/" + device_pci_bus_id(local % devs.count));
  *sharing = int(std::count(gpus.begin(), gpus.end(), gpus[std::size_t(rank)]));
  std::string why = nccl_unavailable_reason();
  if (why.empty() && std::set<std::string>(gpus.begin(), gpus.end()).size() < gpus.size())
    why = "ranks share a GPU";
  std::int64_t ok = why.empty();
  comm.allreduce(&ok, 1, ReduceOp::kMin);  // every rank takes the same path
  std::unique_ptr<Communicator> nccl;
  if (ok) nccl = make_nccl_communicator(comm, local % devs.count);
  if (rank == 0 && announce) {
    if (!ok && why.empty()) why = "another rank cannot use NCCL";
    out << "halo exchange: "
        << (ok ? "NCCL, device to device" : "MPI with host staging (" + why + ")") << "\n";
  }
  return nccl;
}

}  // namespace

ExchangeComms place_rank(Communicator& comm, bool gpu, bool announce, std::ostream& out) {
  ExchangeComms c;
  const int ranks = comm.size();
  if (gpu && ranks > 1) c.nccl = place_on_gpu(comm, announce, out, &c.gpu_sharing);
  if (const char* v = std::getenv("HALO_TEST_DIRECT_EXCHANGE");
      v && std::string(v) == "1" && !gpu && ranks > 1)
    c.direct = std::make_unique<DirectOver>(comm);
  return c;
}

}  // namespace halo

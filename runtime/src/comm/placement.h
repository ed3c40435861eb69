// Where a rank of the full-graph trainer runs and which communicator carries its halo rows and
// gradients: one GPU per rank on a machine, NCCL between GPUs when every rank can use it, else
// the job's communicator (MPI with host staging). Private to runtime/.
#pragma once

#include <memory>
#include <ostream>

#include "halo/runtime/comm/comm.h"

namespace halo {

// The communicators a rank's halo exchange and gradient all-reduce go through.
struct ExchangeComms {
  std::unique_ptr<Communicator> nccl;    // GPU ranks, one GPU each, every rank with NCCL
  std::unique_ptr<Communicator> direct;  // the HALO_TEST_DIRECT_EXCHANGE=1 test hook (CPU ranks)
  int gpu_sharing = 1;  // the job's ranks on this rank's physical GPU (1: a CPU rank, or alone)
  // The one the halo exchange uses: NCCL, else the test hook, else comm itself.
  Communicator& exchange(Communicator& comm) const {
    return nccl ? *nccl : direct ? *direct : comm;
  }
};

// Places this rank on a GPU when gpu and the job has several ranks (the rank's index among the
// ranks of its machine, modulo the visible GPUs), and decides with every rank whether NCCL
// carries the exchange; rank 0 tells out which path was taken when `announce`. Collective;
// throws SystemError when gpu but no GPU is visible.
ExchangeComms place_rank(Communicator& comm, bool gpu, bool announce, std::ostream& out);

}  // namespace halo

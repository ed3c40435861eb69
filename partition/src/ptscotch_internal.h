// What the two halves of --method ptscotch share: ptscotch.cc (the job, its agreement on
// failures, PT-Scotch's mapping and the driver) and ptscotch_rounds.cc (the rounds that move
// each part's rows to the rank that writes it). Private to partition/src; PT-Scotch builds only.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "halo/graph/dataset.h"
#include "halo/partition/halo_plan.h"
#include "halo/partition/parts.h"

namespace halo::ptscotch_internal {

// Throws SystemError naming call when rc is not MPI_SUCCESS (halo's main sets MPI_ERRORS_RETURN).
void mpi_check(int rc, const char* call);
#define HALO_MPI(call) mpi_check((call), #call)

struct Job {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  std::function<void()> cleanup;  // what a failure anywhere undoes on this rank
};

// Runs step on every rank and agrees on the outcome: on a failure anywhere, every rank runs
// job.cleanup and the lowest failing rank rethrows its error (ptscotch.cc).
void agreed(const Job& job, const std::function<void()>& step);

// Each row's split membership (1 train, 2 valid, 4 test, one byte per split) for rows [b, e).
std::vector<std::uint8_t> split_flags(const GraphDataset& d, std::int64_t b, std::int64_t e);

// Round j of the shuffle: rank w writes part j * P + w (when it is below K). This rank packs,
// for every rank, the rows of its slice [b, e) that rank's part owns (columns, weights,
// features, labels, split flags) and the degree of each row of its slice that the part
// references from another part (the halo's degrees: the graph is symmetric, so those are the
// slice's rows with a neighbour in that part).
struct Outgoing {  // one stream per field, each with one vector per destination rank
  std::vector<std::vector<NodeId> > ids, lens, cols, halo, hdeg;
  std::vector<std::vector<float> > vals, feats;
  std::vector<std::vector<std::int32_t> > labs;
  std::vector<std::vector<std::uint8_t> > spl;
};

// Round `round`'s rows of slice [b, e) for every rank (see Outgoing).
Outgoing pack_round(const Job& job, const GraphDataset& d, const std::vector<PartId>& owner,
                    const std::vector<std::uint8_t>& flags, std::int64_t b, std::int64_t e,
                    int round, int k);

// What every rank packed for this one, in increasing id. Collective.
PartRows exchange_round(const Job& job, Outgoing o);

// Part p's halo lists from its gathered rows (the graph is symmetric), for build_halo_plan.
PartitionHalos halos_of_part(const PartRows& r, const std::vector<PartId>& owner, PartId p, int k);

}  // namespace halo::ptscotch_internal

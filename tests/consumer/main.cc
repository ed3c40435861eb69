// Uses each installed halo library once, so that a missing header, library or link dependency
// in the exported package fails to build or run: a CSR (graph), a METIS bisection (partition,
// pulls in METIS), the GCN operator (gnn) and the local communicator (runtime, pulls in MPI).
#include <cstdio>
#include <utility>
#include <vector>

#include "halo/gnn/graph_op.h"
#include "halo/graph/csr.h"
#include "halo/graph/dataset.h"
#include "halo/partition/partition.h"
#include "halo/runtime/comm/comm.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "halo_consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  // The path 0-1-...-7.
  halo::EdgeList path;
  path.num_nodes = 8;
  for (int u = 0; u + 1 < 8; ++u) {
    path.src.push_back(u);
    path.dst.push_back(u + 1);
  }
  halo::GraphDataset d;
  d.graph = halo::build_csr(std::move(path));
  if (d.graph.num_edges() != 14) return fail("build_csr: expected 14 stored edges");

  halo::PartitionOptions options;
  options.k = 2;
  const std::vector<halo::PartId> parts = halo::partition_metis(d, options);
  int in_part0 = 0;
  for (halo::PartId p : parts) in_part0 += p == 0;
  if (parts.size() != 8 || in_part0 != 4) return fail("partition_metis: expected two halves");

  std::vector<std::int32_t> degree(8);
  for (int u = 0; u < 8; ++u) degree[std::size_t(u)] = std::int32_t(d.graph.view().degree(u));
  const halo::GraphOperator op = halo::gcn_operator(d.graph.view(), 8, degree.data());
  if (op.fwd.values.size() != 14 + 8) return fail("gcn_operator: expected A + I");

  halo::LocalCommunicator comm;
  const int x = 42;
  std::vector<std::size_t> counts;
  const std::vector<char> all = comm.gather(&x, sizeof x, 0, &counts);
  if (all.size() != sizeof x || halo::launched_by_mpi()) return fail("local communicator");

  std::puts("halo_consumer: ok");
  return 0;
}

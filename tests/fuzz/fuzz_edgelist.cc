// libFuzzer target: edge lists (read_edge_list). The first byte picks the options: 1-based ids,
// directed, and a node count of 0 (from the ids) or a small fixed one.
#include "fuzz_util.h"
#include "halo/graph/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  halo::EdgeListOptions o;
  o.one_based = data[0] & 1;
  o.directed = data[0] & 2;
  o.num_nodes = (data[0] & 4) ? 64 : 0;
  const auto path = halo::fuzz::write_input("input.txt", data + 1, size - 1);
  halo::fuzz::expect_clean([&] { (void)halo::read_edge_list(path, o); });
  return 0;
}

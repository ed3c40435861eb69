// libFuzzer target: assignment files (read_assignment, `halo partition --assignment-in`). The
// first byte picks the format (bit 0: .npy, else gpmetis .part.K text), the second K (1-16),
// the third the node count (0-255).
#include "fuzz_util.h"
#include "halo/partition/partition.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool npy = data[0] & 1;
  const int k = 1 + (data[1] & 15);
  const std::int64_t n = data[2];
  const auto path = halo::fuzz::write_input(npy ? "input.npy" : "input.part", data + 3, size - 3);
  halo::fuzz::expect_clean([&] { (void)halo::read_assignment(path, n, k); });
  return 0;
}

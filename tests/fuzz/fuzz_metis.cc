// libFuzzer target: METIS graph files (read_metis).
#include "fuzz_util.h"
#include "halo/graph/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = halo::fuzz::write_input("input.graph", data, size);
  halo::fuzz::expect_clean([&] { (void)halo::read_metis(path); });
  return 0;
}

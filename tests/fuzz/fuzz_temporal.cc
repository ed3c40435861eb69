// libFuzzer target: temporal event lists. The first byte picks the reader: KONECT, SNAP or JODIE.
#include "fuzz_util.h"
#include "halo/graph/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto path = halo::fuzz::write_input("input.txt", data + 1, size - 1);
  halo::fuzz::expect_clean([&] {
    switch (data[0] % 3) {
      case 0:
        (void)halo::read_konect(path);
        break;
      case 1:
        (void)halo::read_snap(path);
        break;
      default:
        (void)halo::read_jodie(path);
        break;
    }
  });
  return 0;
}

// libFuzzer target: .npz archives (ogbn-papers100M's binary layout): the central directory,
// every entry's .npy header and its payload streamed as float and as int64.
#include <vector>

#include "fuzz_util.h"
#include "halo/graph/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = halo::fuzz::write_input("input.npz", data, size);
  halo::fuzz::expect_clean([&] {
    halo::NpzReader r(path);
    for (const std::string& key : r.keys()) {
      halo::fuzz::expect_clean([&] {
        (void)r.info(key);
        halo::stream_as<float>(
            r, key, [](const float*, std::size_t, std::uint64_t) {}, 4096);
        halo::stream_as<std::int64_t>(
            r, key, [](const std::int64_t*, std::size_t, std::uint64_t) {}, 4096);
      });
    }
  });
  return 0;
}

// The CUDA toolchain end to end: discovery, and a kernel round trip when a GPU is visible.
// Without one (CI, developer machines) the GPU test skips with the reason.
#include "halo/gnn/device.h"

#include <gtest/gtest.h>

#include "halo/graph/error.h"

namespace halo {
namespace {

TEST(Device, DiscoveryNeverThrowsAndExplainsAbsence) {
  const CudaDevices d = cuda_devices();
  if (d.count == 0) {
    EXPECT_FALSE(d.reason.empty());
  } else {
    EXPECT_TRUE(d.built);
    EXPECT_EQ(d.names.size(), std::size_t(d.count));
  }
}

TEST(Device, KernelRoundTrip) {
  const CudaDevices d = cuda_devices();
  if (d.count == 0) GTEST_SKIP() << d.reason;
  for (int n : {1, 31, 32, 33, 257, 100000}) {
    const std::vector<float> out = cuda_smoke_test(n);
    ASSERT_EQ(out.size(), std::size_t(n));
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[std::size_t(i)], 2.0f * float(i) + 1.0f) << i;
  }
}

TEST(Device, SmokeTestWithoutDeviceIsASystemError) {
  if (cuda_devices().count > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(cuda_smoke_test(4), SystemError);
}

}  // namespace
}  // namespace halo

// Which accelerators this build of halo can use. The CUDA side exists only when the build
// found nvcc (HALO_CUDA=AUTO|ON); without a GPU it reports why, so callers and tests can skip.
#pragma once

#include <string>
#include <vector>

namespace halo {

struct CudaDevices {
  bool built = false;              // compiled with the CUDA backend
  int count = 0;                   // visible devices (0 when none or not built)
  std::string reason;              // why count is 0, for logs and test skips
  std::vector<std::string> names;  // "NVIDIA H200 (sm_90, 139.8 GiB)"
};

// Enumerates the CUDA devices visible to this process; never throws.
CudaDevices cuda_devices();

// Round-trips n floats through device memory with a kernel computing out[i] = 2 * i + 1,
// proving compile, link, launch and copies work. Throws SystemError without a device.
std::vector<float> cuda_smoke_test(int n);

}  // namespace halo

// Device discovery without the CUDA backend: says so. The CUDA build defines these functions in
// device_cuda.cu instead.
#include "halo/gnn/device.h"

#include "halo/graph/error.h"

#ifndef HALO_HAVE_CUDA
namespace halo {

CudaDevices cuda_devices() {
  CudaDevices d;
  d.reason = "halo was built without the CUDA backend (no nvcc found, or HALO_CUDA=OFF)";
  return d;
}

std::vector<float> cuda_smoke_test(int) { throw SystemError(cuda_devices().reason); }

}  // namespace halo
#endif

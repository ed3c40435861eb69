// Device discovery and a smoke-test kernel for the CUDA build.
#include <memory>

#include "halo/gnn/cuda_check.h"
#include "halo/gnn/device.h"

namespace halo {
namespace {

__global__ void odd_numbers(float* d_out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d_out[i] = 2.0f * float(i) + 1.0f;
}

struct DeviceFree {
  void operator()(float* p) const { cudaFree(p); }
};

}  // namespace

CudaDevices cuda_devices() {
  CudaDevices d;
  d.built = true;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    d.reason = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return d;
  }
  if (count == 0) {
    d.reason = "no CUDA device visible";
    return d;
  }
  d.count = count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                  double(p.totalGlobalMem) / double(1ull << 30));
    d.names.push_back(buf);
  }
  return d;
}

std::vector<float> cuda_smoke_test(int n) {
  const CudaDevices devs = cuda_devices();
  if (devs.count == 0) throw SystemError(devs.reason);
  float* raw = nullptr;
  HALO_CUDA_CHECK(cudaMalloc(&raw, sizeof(float) * std::size_t(n > 0 ? n : 1)));
  std::unique_ptr<float, DeviceFree> d_out(raw);
  const int threads = 256;
  odd_numbers<<<(n + threads - 1) / threads, threads>>>(d_out.get(), n);
  HALO_CUDA_CHECK(cudaGetLastError());
  std::vector<float> h_out(std::size_t(n > 0 ? n : 0));
  HALO_CUDA_CHECK(cudaMemcpy(h_out.data(), d_out.get(), sizeof(float) * h_out.size(),
                             cudaMemcpyDeviceToHost));
  return h_out;
}

}  // namespace halo

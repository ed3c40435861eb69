// Device discovery and a smoke-test kernel for the CUDA build.
#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

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
  if (n <= 0) return {};  // a launch of zero blocks is an error, not a no-op
  float* raw = nullptr;
  HALO_CUDA_CHECK(cudaMalloc(&raw, sizeof(float) * std::size_t(n > 0 ? n : 1)));
  std::unique_ptr<float, DeviceFree> d_out(raw);
  const int threads = 256;
  odd_numbers<<<(n + threads - 1) / threads, threads>>>(d_out.get(), n);
  HALO_CUDA_CHECK(cudaGetLastError());
  std::vector<float> h_out(std::size_t(n > 0 ? n : 0));
  HALO_CUDA_CHECK(
      cudaMemcpy(h_out.data(), d_out.get(), sizeof(float) * h_out.size(), cudaMemcpyDeviceToHost));
  return h_out;
}

void use_device(int index) { HALO_CUDA_CHECK(cudaSetDevice(index)); }

namespace {
// Bytes halo holds on the GPU now and at most, for the peak-memory figure of the logs.
struct Usage {
  std::mutex mu;
  std::unordered_map<void*, std::size_t> sizes;
  std::size_t now = 0, peak = 0;
};
// Never destroyed: static RAII owners (the process-wide CUDA backend's buffers) free through it
// during exit, possibly after a function-local static would be gone.
Usage& usage() {
  static Usage* u = new Usage;
  return *u;
}
}  // namespace

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  HALO_CUDA_CHECK(cudaMalloc(&p, bytes));
  Usage& u = usage();
  std::lock_guard<std::mutex> lock(u.mu);
  u.sizes[p] = bytes;
  u.now += bytes;
  u.peak = std::max(u.peak, u.now);
  return p;
}

namespace {
struct UnwindHooks {
  std::mutex mu;
  std::map<int, std::function<void()>> hooks;
  int next = 1;
};
UnwindHooks& unwind_hooks() {
  static UnwindHooks* h = new UnwindHooks;  // never destroyed, like usage()
  return *h;
}
}  // namespace

int add_unwind_hook(std::function<void()> hook) {
  UnwindHooks& h = unwind_hooks();
  std::lock_guard<std::mutex> lock(h.mu);
  h.hooks[h.next] = std::move(hook);
  return h.next++;
}

void remove_unwind_hook(int id) {
  UnwindHooks& h = unwind_hooks();
  std::lock_guard<std::mutex> lock(h.mu);
  h.hooks.erase(id);
}

void device_free(void* p) noexcept {
  if (!p) return;
  if (std::uncaught_exceptions() > 0) {  // cancel what could keep cudaFree waiting forever
    std::map<int, std::function<void()>> run;
    {
      UnwindHooks& h = unwind_hooks();
      std::lock_guard<std::mutex> lock(h.mu);
      run.swap(h.hooks);
    }
    for (auto& [id, hook] : run) {
      try {
        hook();
      } catch (...) {
      }
    }
  }
  cudaFree(p);
  Usage& u = usage();
  std::lock_guard<std::mutex> lock(u.mu);
  const auto it = u.sizes.find(p);
  if (it == u.sizes.end()) return;
  u.now -= it->second;
  u.sizes.erase(it);
}

std::size_t device_peak_bytes() {
  Usage& u = usage();
  std::lock_guard<std::mutex> lock(u.mu);
  return u.peak;
}

std::size_t device_bytes_now() {
  Usage& u = usage();
  std::lock_guard<std::mutex> lock(u.mu);
  return u.now;
}

// An event recorded on the legacy default stream completes after all work queued before it on
// every blocking stream (the backend's is one), and does not wait for non-blocking streams.
void device_synchronize() {
  cudaEvent_t ev = nullptr;
  HALO_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const cudaError_t rec = cudaEventRecord(ev, cudaStreamLegacy);
  const cudaError_t done = rec == cudaSuccess ? cudaEventSynchronize(ev) : rec;
  cudaEventDestroy(ev);
  HALO_CUDA_CHECK(done);
}

std::string device_pci_bus_id(int index) {
  char id[32] = {};
  HALO_CUDA_CHECK(cudaDeviceGetPCIBusId(id, int(sizeof id), index));
  return id;
}

void device_copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                             : cudaMemcpyDeviceToDevice;
  HALO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, k));
}

void device_zero(void* p, std::size_t bytes) {
  if (bytes) HALO_CUDA_CHECK(cudaMemset(p, 0, bytes));
}

void* host_pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  HALO_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void host_pinned_free(void* p) noexcept {
  if (p) cudaFreeHost(p);
}

DeviceMemoryInfo device_memory_info() {
  DeviceMemoryInfo m;
  if (cudaMemGetInfo(&m.free, &m.total) != cudaSuccess) {
    cudaGetLastError();  // clear it: the caller only asked
    return {};
  }
  return m;
}

}  // namespace halo

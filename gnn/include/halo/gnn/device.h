// Which accelerators this build of halo can use. The CUDA side exists only when the build
// found nvcc (HALO_CUDA=AUTO|ON); without a GPU it reports why, so callers and tests can skip.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
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

// The most GPU memory halo's own allocations held at once (0 without CUDA; cudaMalloc is
// synchronous, so the count is current without waiting for the GPU).
std::size_t device_peak_bytes();
// The GPU memory halo's own allocations hold now (0 without CUDA).
std::size_t device_bytes_now();
// Waits for the work halo queued on the GPU (kernels, copies: every blocking stream), not for
// communication in flight on a non-blocking stream (NCCL's), which a dead peer can hold forever.
void device_synchronize();

// Registers `hook` to run (once) before the first device free made while an exception unwinds:
// cudaFree waits for the whole device, so communication that may never complete (a peer died)
// must be cancelled first (NCCL: ncclCommAbort). Returns an id for remove_unwind_hook.
int add_unwind_hook(std::function<void()> hook);
void remove_unwind_hook(int id);

// Makes GPU `index` the current device of this process (before any allocation).
void use_device(int index);
// The PCI bus id of visible GPU `index` ("0000:3b:00.0"): names the physical device whatever
// CUDA_VISIBLE_DEVICES renumbered. Throws SystemError without CUDA.
std::string device_pci_bus_id(int index);

// Raw device memory for RAII owners (Matrix, SparseMatrix). Throw SystemError naming the CUDA
// call on failure, or when halo was built without CUDA.
void* device_alloc(std::size_t bytes);
void device_free(void* p) noexcept;
enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
void device_copy(void* dst, const void* src, std::size_t bytes, CopyKind kind);
void device_zero(void* p, std::size_t bytes);

// Page-locked host memory (cudaMallocHost): a copy between it and the GPU needs no bounce
// buffer. For staging areas reused every batch, not for large tables (pinning is slow and takes
// memory from the OS's page cache). Throws SystemError naming the call, or without CUDA.
void* host_pinned_alloc(std::size_t bytes);
void host_pinned_free(void* p) noexcept;

// The current GPU's free and total memory in bytes, as the driver reports them now (other
// processes' allocations included); both 0 without CUDA or a usable device. Never throws.
struct DeviceMemoryInfo {
  std::size_t free = 0, total = 0;
};
DeviceMemoryInfo device_memory_info();

// A host array copied to device memory (RAII).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const T* host, std::size_t n) : n_(n) {
    p_.reset(device_alloc(sizeof(T) * n));
    device_copy(p_.get(), host, sizeof(T) * n, CopyKind::kHostToDevice);
  }
  T* data() const { return static_cast<T*>(p_.get()); }
  std::size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(void* p) const noexcept { device_free(p); }
  };
  std::unique_ptr<void, Free> p_;
  std::size_t n_ = 0;
};

// Round-trips n floats through device memory with a kernel computing out[i] = 2 * i + 1,
// proving compile, link, launch and copies work. Throws SystemError without a device.
std::vector<float> cuda_smoke_test(int n);

}  // namespace halo

// Device discovery without the CUDA backend: says so. The CUDA build defines these functions in
// device_cuda.cu instead. Also the backend-independent names of the GEMM precisions.
#include "halo/gnn/device.h"

#include "halo/gnn/backend.h"
#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"

namespace halo {

namespace {
constexpr EnumName<MatmulPrecision> kMatmulPrecisions[] = {{MatmulPrecision::kFp32, "fp32"},
                                                           {MatmulPrecision::kTf32, "tf32"},
                                                           {MatmulPrecision::kBf16, "bf16"}};
}  // namespace

// Worded as a range check, unlike the other enums' "unknown --flag": kept as users have seen it.
MatmulPrecision parse_matmul_precision(std::string_view s) {
  if (const auto* e = find_enum(kMatmulPrecisions, s)) return e->value;
  throw ParamError("--matmul-precision must be " + enum_choices(kMatmulPrecisions) + " (got '" +
                   std::string(s) + "')");
}

const char* to_string(MatmulPrecision p) { return enum_name(kMatmulPrecisions, p); }

}  // namespace halo

#ifndef HALO_HAVE_CUDA
namespace halo {

CudaDevices cuda_devices() {
  CudaDevices d;
  d.reason = "halo was built without the CUDA backend (no nvcc found, or HALO_CUDA=OFF)";
  return d;
}

std::vector<float> cuda_smoke_test(int) { throw SystemError(cuda_devices().reason); }

std::size_t device_peak_bytes() { return 0; }
std::size_t device_bytes_now() { return 0; }
void device_synchronize() { throw SystemError(cuda_devices().reason); }
int add_unwind_hook(std::function<void()>) { return 0; }  // no device memory to free
void remove_unwind_hook(int) {}
void use_device(int) { throw SystemError(cuda_devices().reason); }
std::string device_pci_bus_id(int) { throw SystemError(cuda_devices().reason); }
void* device_alloc(std::size_t) { throw SystemError(cuda_devices().reason); }
void device_free(void*) noexcept {}
void device_copy(void*, const void*, std::size_t, CopyKind) {
  throw SystemError(cuda_devices().reason);
}
void device_zero(void*, std::size_t) { throw SystemError(cuda_devices().reason); }
void* host_pinned_alloc(std::size_t) { throw SystemError(cuda_devices().reason); }
void host_pinned_free(void*) noexcept {}
DeviceMemoryInfo device_memory_info() { return {}; }
Backend& cuda_backend() { throw SystemError(cuda_devices().reason); }

}  // namespace halo
#endif

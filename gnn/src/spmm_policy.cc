// The CUDA SpMM's kernel choice and cuSPARSE status handling (see spmm_policy.h).
#include "halo/gnn/spmm_policy.h"

#include <cstdlib>

#include "halo/graph/error.h"

namespace halo {

const char* spmm_kernel_name(SpmmKernel k) {
  switch (k) {
    case SpmmKernel::kAlg3:
      return "alg3";
    case SpmmKernel::kAlg2:
      return "alg2";
    case SpmmKernel::kOwn:
      return "own";
  }
  return "?";
}

SpmmSettings spmm_settings_from_env() {
  SpmmSettings s;
  if (const char* v = std::getenv("HALO_CUDA_SPMM")) {
    const std::string k = v;
    bool known = false;
    for (SpmmKernel c : {SpmmKernel::kAlg3, SpmmKernel::kAlg2, SpmmKernel::kOwn})
      if (k == spmm_kernel_name(c)) {
        s.requested = c;
        known = true;
      }
    if (!known) throw ParamError("HALO_CUDA_SPMM=" + k + ": expected alg3, alg2 or own");
  }
  if (const char* v = std::getenv("HALO_CUDA_SPMM_STRICT")) {
    const std::string k = v;
    if (k != "0" && k != "1") throw ParamError("HALO_CUDA_SPMM_STRICT=" + k + ": expected 0 or 1");
    s.strict = k == "1";
  }
  return s;
}

bool cusparse_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kCusparseAlignment == 0;
}

SpmmKernel spmm_first_choice(const SpmmSettings& s, std::int64_t width, std::string* why) {
  if (s.requested == SpmmKernel::kOwn) return SpmmKernel::kOwn;
  if (width == 1) {
    if (why) *why = "width 1";
    return SpmmKernel::kOwn;
  }
  if (width % 4 != 0) {  // 4-byte floats: rows start 16-byte aligned only at widths 4k
    if (why) *why = "width not a multiple of 4: rows not 16-byte aligned";
    return SpmmKernel::kOwn;
  }
  return s.requested;
}

bool spmm_declined(SpmmStatus status, SpmmStage stage, const SpmmSettings& s, const char* call,
                   const char* status_name, const std::string& what) {
  if (status == SpmmStatus::kSuccess) return false;
  const bool decline = status == SpmmStatus::kNotSupported ||
                       status == SpmmStatus::kInsufficientResources ||
                       (status == SpmmStatus::kInvalidValue && stage != SpmmStage::kCall);
  if (!decline) throw SystemError(std::string(call) + " failed on " + what + ": " + status_name);
  if (s.strict)
    throw SystemError(std::string(call) + " declined " + what + " (" + status_name +
                      ") and HALO_CUDA_SPMM_STRICT=1 forbids the fallback to halo's own kernel");
  return true;
}

}  // namespace halo

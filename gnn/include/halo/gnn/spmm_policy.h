// How the CUDA backend chooses, and keeps, the kernel of each SpMM (spmm_cuda.cu): the host-side
// decisions, in a file of their own so that they are compiled and tested on every machine, GPU
// or not. A plan is one sparse operator at one dense width.
//
// - Choice: HALO_CUDA_SPMM asks for cuSPARSE's CSR ALG3 (default, bit-reproducible), ALG2
//   (row-major tuned, not reproducible) or halo's own kernel. Width 1 always takes the own
//   kernel (cuSPARSE may hand it to SpMV, which is not documented deterministic).
// - Declines: cuSPARSE refuses an algorithm/shape with NOT_SUPPORTED, INVALID_VALUE or
//   INSUFFICIENT_RESOURCES from bufferSize or preprocess, and may refuse with NOT_SUPPORTED or
//   INSUFFICIENT_RESOURCES from the call itself. By default the own kernel takes over (said on
//   stderr once per plan); with HALO_CUDA_SPMM_STRICT=1 (tests, benchmarks) a decline is an
//   error, so a test of ALG3 cannot pass on the own kernel. INVALID_VALUE from the call itself
//   is never a decline: the plan was accepted, so it means a bad argument.
// - Alignment: cuSPARSE documents only element alignment (4 bytes here), but a routine using
//   vector loads would fault on less than 16, and a fault ends the CUDA context (the whole run).
//   So cuSPARSE gets only 16-byte aligned arrays and rows: a row slice's indices and values
//   (offset by offsets[begin]) are copied once per operator when they are not; a width that is
//   not a multiple of 4 (rows of a row-major matrix then start unaligned) takes the own kernel,
//   as does a call whose dense input or output starts unaligned. Until a GPU run shows
//   cuSPARSE fine with less, this costs ALG3 only the odd widths (class counts such as 47).
// - Report: every call is counted under the kernel that ran and why ("alg3", "own (width 1)",
//   "own (unaligned dense operand)", "own (cuSPARSE declined: ...)"), which tests and
//   halo_bench_spmm read back (Backend::take_spmm_kernel_counts).
#pragma once

#include <cstdint>
#include <string>

namespace halo {

enum class SpmmKernel { kAlg3, kAlg2, kOwn };

// "alg3", "alg2" or "own".
const char* spmm_kernel_name(SpmmKernel k);

struct SpmmSettings {
  SpmmKernel requested = SpmmKernel::kAlg3;
  bool strict = false;  // a cuSPARSE decline throws SystemError instead of falling back
};

// HALO_CUDA_SPMM (alg3 | alg2 | own; unset = alg3) and HALO_CUDA_SPMM_STRICT (0 | 1; unset = 0).
// Throws ParamError naming the variable for any other value.
SpmmSettings spmm_settings_from_env();

// The alignment halo requires of every array it hands cuSPARSE.
constexpr std::uintptr_t kCusparseAlignment = 16;
// True when p is kCusparseAlignment-aligned (null counts as aligned: nothing is read).
bool cusparse_aligned(const void* p);

// The kernel a new plan starts with, before cuSPARSE is asked; `why` gets the reason when it
// is the own kernel although cuSPARSE was requested ("width 1", "width not a multiple of 4...").
SpmmKernel spmm_first_choice(const SpmmSettings& s, std::int64_t width, std::string* why);

enum class SpmmStage { kBufferSize, kPreprocess, kCall };
// cuSPARSE's statuses as far as the policy tells them apart.
enum class SpmmStatus { kSuccess, kNotSupported, kInvalidValue, kInsufficientResources, kOther };

// What cuSPARSE's status at `stage` means: false = go on with cuSPARSE (success); true = it
// declined and the own kernel takes the plan. Throws SystemError, naming `call`, `status_name`
// and `what` (the operator's rows and width), for an error, and for a decline when strict.
bool spmm_declined(SpmmStatus status, SpmmStage stage, const SpmmSettings& s, const char* call,
                   const char* status_name, const std::string& what);

}  // namespace halo

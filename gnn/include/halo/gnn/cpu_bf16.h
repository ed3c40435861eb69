// How the CPU backend computes --matmul-precision bf16 products. Both kernels round every GEMM
// input to bfloat16 (nearest even) and sum in float32, so they agree to float rounding; which is
// faster depends on the core:
// - dot: AVX-512 BF16's vdpbf16ps, two multiply-adds per lane and instruction. About 1.3x FP32
//   on AMD Zen 4; on Intel cores without AMX it does no more multiply-adds per cycle than an
//   FMA, so with the conversions it is slower than FP32 there (docs/BENCHMARKS.md).
// - fma: FP32 fused multiply-adds on the rounded inputs (the product of two bfloat16 is exact
//   in float32): FP32's speed with bf16's rounding; the SpMM still gathers half the bytes.
// auto (the default) times both on a probe product at first use and takes the faster, so bf16
// is never slower than FP32 on account of its GEMMs. AMX tiles are detected and reported; halo
// has no AMX kernel yet.
#pragma once

#include <string>
#include <string_view>

namespace halo {

enum class Bf16Kernel { kAuto, kDot, kFma };
// "auto" | "dot" | "fma"; throws ParamError naming --bf16-kernel otherwise.
Bf16Kernel parse_bf16_kernel(std::string_view s);
// The --bf16-kernel spelling of k.
const char* to_string(Bf16Kernel k);

// Seconds each kernel took for the probe (best of 3 of a 4096 x 256 by 256 x 256 product and its
// weight-gradient twin, 256 x 4096 by 4096 x 256), at the OpenMP thread count of the call.
struct Bf16Probe {
  double dot_s = 0, fma_s = 0;
};
// Runs the probe once per thread count (later calls return the cached times; ~35 ms on two
// cores). Throws SystemError where the CPU has no AVX-512 BF16.
Bf16Probe probe_bf16_kernels();
// The kernel for these times: fma when it took under 0.9x dot's time, else dot (the margin keeps
// machines where the two tie on one kernel from run to run).
Bf16Kernel pick_bf16_kernel(const Bf16Probe& p);

// Sets the kernel of the CPU backend's bf16 products from now on (process-wide); kAuto probes
// and picks. Throws SystemError where the CPU cannot run bf16 products at all.
void set_cpu_bf16_kernel(Bf16Kernel k);
// The kernel bf16 products run now: never kAuto once set_cpu_bf16_kernel or the backend's
// set_matmul_precision(kBf16) has run; kAuto before.
Bf16Kernel cpu_bf16_kernel();
// True when the CPU has AMX tiles for bf16 (cpuid) and the kernel supports their state
// (arch_prctl ARCH_GET_XCOMP_SUPP lists XTILEDATA).
bool cpu_has_amx_bf16();
// One line for the log: the kernel bf16 products run, how it was chosen (probe times or set),
// and AMX where the CPU has it.
std::string describe_cpu_bf16(bool chosen_by_probe);

}  // namespace halo

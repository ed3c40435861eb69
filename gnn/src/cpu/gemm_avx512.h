// The CPU's own GEMMs on AVX-512: mixed precision (--matmul-precision bf16: inputs rounded to
// bfloat16, products summed in float32 by AVX-512 BF16's dot-product instruction, twice FP32's
// arithmetic rate on the same cores) and FP32 for tall products. Internal to the CPU backend;
// each is entered only after fp32_gemm_supported() / bf16_gemm_supported() said yes.
#pragma once

#include <cstdint>

#include "halo/gnn/cpu_bf16.h"
#include "halo/gnn/matrix.h"

namespace halo::detail {

// True when halo was built with the kernels and this CPU executes AVX-512 (F, BW, VL, DQ), and
// for bf16 also AVX-512 BF16 (vdpbf16ps).
bool fp32_gemm_supported();
bool bf16_gemm_supported();

// The FP32 kernel takes products whose long dimension (rows of C, or k for a transposed A) has at
// least this many rows: the full-graph ones, where it beats OpenBLAS (docs/BENCHMARKS.md); small
// products (TGN's batches, Cora) stay with OpenBLAS.
constexpr std::int64_t kFp32MinRows = 16384;

// C = alpha op(A) op(B) + beta C in float32 (the same kernel and blocking as gemm_bf16, with
// fused multiply-adds over one k at a time). Returns false, touching nothing, for shapes it does
// not take (see kFp32MinRows, and gemm_bf16's). Requires fp32_gemm_supported().
bool gemm_fp32(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
               const MatrixView& C);

// C = alpha op(A) op(B) + beta C, with every element of A and B rounded to bfloat16 (nearest
// even) and the products summed in float32, by vdpbf16ps pairs (kDot) or FP32 fused
// multiply-adds one k at a time (kFma; cpu_bf16.h). Shapes and aliasing as Backend::gemm; C is
// not read when beta == 0; deterministic for a fixed thread count and kernel. Returns false,
// touching nothing, for the shapes it does not cover (a transposed A with an output over 4 Mi
// elements), which the caller computes in FP32. Requires bf16_gemm_supported(); kernel is
// never kAuto.
bool gemm_bf16(Bf16Kernel kernel, bool ta, bool tb, float alpha, const MatrixView& A,
               const MatrixView& B, float beta, const MatrixView& C);

// x rounded to bfloat16 (nearest even, subnormals to zero as the instruction does), as a float:
// the tests' oracle for what the kernel multiplies.
float round_to_bf16(float x);

}  // namespace halo::detail

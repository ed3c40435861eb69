// The CPU's mixed-precision GEMM (--matmul-precision bf16): inputs rounded to bfloat16, products
// summed in float32 by AVX-512 BF16's dot-product instruction, twice FP32's arithmetic rate on
// the same cores. Internal to the CPU backend; compiled with the AVX-512 BF16 target flags and
// only ever entered after bf16_gemm_supported() said yes.
#pragma once

#include "halo/gnn/matrix.h"

namespace halo::detail {

// True when halo was built with the kernel and this CPU executes AVX-512 BF16 (vdpbf16ps).
bool bf16_gemm_supported();

// C = alpha op(A) op(B) + beta C, with every element of A and B rounded to bfloat16 (nearest
// even) and the products summed in float32. Shapes and aliasing as Backend::gemm; C is not read
// when beta == 0; deterministic for a fixed thread count. Returns false, touching nothing, for
// the shapes it does not cover (a transposed A with an output over 4 Mi elements), which the
// caller computes in FP32. Requires bf16_gemm_supported().
bool gemm_bf16(bool ta, bool tb, float alpha, const MatrixView& A, const MatrixView& B, float beta,
               const MatrixView& C);

// x rounded to bfloat16 (nearest even, subnormals to zero as the instruction does), as a float:
// the tests' oracle for what the kernel multiplies.
float round_to_bf16(float x);

}  // namespace halo::detail

// GEMM benchmark: the eight products of one training epoch of the arxiv-sized benchmark's
// 3-layer GCN (169,343 rows; 128 -> 256 -> 256 -> 40: forward, weight gradients, input
// gradients), best of N runs each, at every matmul precision this CPU offers: fp32 (halo's
// AVX-512 kernel, or OpenBLAS under HALO_GEMM=openblas) and bf16 with each of its kernels
// (cpu_bf16.h: dot = vdpbf16ps, fma = FP32 FMAs on rounded inputs), then what --bf16-kernel auto
// picks here. One JSON line per product and variant, then the totals and the ratios to fp32.
//   [HALO_GEMM=openblas] halo_bench_gemm [--rows N] [--repeats 5]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/gnn/cpu_bf16.h"
#include "halo/graph/error.h"

namespace {

struct Shape {
  bool ta, tb;
  std::int64_t m, k, n;
  const char* what;
};

// Best of `repeats` seconds of the product s in be's current arithmetic; prints its JSON line.
double time_product(halo::Backend& be, const Shape& s, int repeats, const char* variant,
                    const char* fp32_gemm) {
  using halo::Matrix;
  Matrix A(s.ta ? s.k : s.m, s.ta ? s.m : s.k), B(s.tb ? s.n : s.k, s.tb ? s.k : s.n), C(s.m, s.n);
  for (std::int64_t i = 0; i < A.size(); ++i) A.data()[i] = float(i % 113) * 0.01f - 0.5f;
  for (std::int64_t i = 0; i < B.size(); ++i) B.data()[i] = float(i % 71) * 0.01f - 0.3f;
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = omp_get_wtime();
    be.gemm(s.ta, s.tb, 1.f, A.view(), B.view(), 0.f, C.view());
    best = std::min(best, omp_get_wtime() - t0);
  }
  std::printf(
      "{\"variant\": \"%s\", \"fp32_gemm\": \"%s\", \"product\": \"%s\", \"seconds\": %.6f, "
      "\"gflop_per_s\": %.1f}\n",
      variant, fp32_gemm, s.what, best, 2.0 * double(s.m) * double(s.k) * double(s.n) / best / 1e9);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace halo;
  std::int64_t n = 169343;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows")
      n = std::stoll(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: halo_bench_gemm [--rows N] [--repeats R]\n");
      return 2;
    }
  }
  // C (m x n) = op(A) op(B), op(A) m x k: the products of one epoch, in the order they run.
  const std::vector<Shape> shapes = {{false, false, n, 128, 256, "layer 0 forward: (A X) W"},
                                     {false, false, n, 256, 256, "layer 1 forward: H W"},
                                     {false, false, n, 256, 40, "layer 2 forward: H W"},
                                     {true, false, 256, n, 40, "layer 2 weight gradient"},
                                     {false, true, n, 40, 256, "layer 2 input gradient"},
                                     {true, false, 256, n, 256, "layer 1 weight gradient"},
                                     {false, true, n, 256, 256, "layer 1 input gradient"},
                                     {true, false, 128, n, 256, "layer 0 weight gradient"}};
  Backend& be = cpu_backend();
  const char* env = std::getenv("HALO_GEMM");
  const char* fp32_gemm =
      env && std::string(env) == "openblas" ? "openblas" : "halo where AVX-512, else openblas";
  struct Variant {
    MatmulPrecision p;
    Bf16Kernel k;
    const char* name;
  };
  std::vector<std::pair<std::string, double>> totals;
  for (const Variant v : {Variant{MatmulPrecision::kFp32, Bf16Kernel::kAuto, "fp32"},
                          Variant{MatmulPrecision::kBf16, Bf16Kernel::kDot, "bf16-dot"},
                          Variant{MatmulPrecision::kBf16, Bf16Kernel::kFma, "bf16-fma"}}) {
    const MatmulPrecision p = v.p;
    try {
      be.set_matmul_precision(p);
      if (p == MatmulPrecision::kBf16) set_cpu_bf16_kernel(v.k);
    } catch (const SystemError& e) {
      std::fprintf(stderr, "skipping %s: %s\n", v.name, e.what());
      continue;
    }
    double total = 0;
    for (const Shape& s : shapes) total += time_product(be, s, repeats, v.name, fp32_gemm);
    std::printf("{\"variant\": \"%s\", \"epoch_gemm_seconds\": %.6f}\n", v.name, total);
    totals.emplace_back(v.name, total);
  }
  be.set_matmul_precision(MatmulPrecision::kFp32);
  for (std::size_t i = 1; i < totals.size(); ++i)
    std::printf("{\"%s_time_over_fp32\": %.3f}\n", totals[i].first.c_str(),
                totals[i].second / totals[0].second);
  if (totals.size() == 3) {
    set_cpu_bf16_kernel(Bf16Kernel::kAuto);
    std::printf("{\"auto_picks\": \"%s\", \"log\": \"%s\"}\n", to_string(cpu_bf16_kernel()),
                describe_cpu_bf16(true).c_str());
  }
  return 0;
}

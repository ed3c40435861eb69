// GEMM benchmark: the eight products of one training epoch of the arxiv-sized benchmark's
// 3-layer GCN (169,343 rows; 128 -> 256 -> 256 -> 40: forward, weight gradients, input
// gradients), best of N runs each, at every matmul precision this CPU offers: fp32 (halo's
// AVX-512 kernel, or OpenBLAS under HALO_GEMM=openblas) and bf16 (halo's AVX-512 BF16 kernel).
// One JSON line per product and precision, then the totals.
//   [HALO_GEMM=openblas] halo_bench_gemm [--rows N] [--repeats 5]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "halo/gnn/backend.h"
#include "halo/graph/error.h"

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
  struct Shape {
    bool ta, tb;
    std::int64_t m, k, n;
    const char* what;
  };
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
  std::vector<std::pair<MatmulPrecision, double>> totals;
  for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kBf16}) {
    try {
      be.set_matmul_precision(p);
    } catch (const SystemError& e) {
      std::fprintf(stderr, "skipping %s: %s\n", to_string(p), e.what());
      continue;
    }
    double total = 0;
    for (const Shape& s : shapes) {
      Matrix A(s.ta ? s.k : s.m, s.ta ? s.m : s.k), B(s.tb ? s.n : s.k, s.tb ? s.k : s.n),
          C(s.m, s.n);
      for (std::int64_t i = 0; i < A.size(); ++i) A.data()[i] = float(i % 113) * 0.01f - 0.5f;
      for (std::int64_t i = 0; i < B.size(); ++i) B.data()[i] = float(i % 71) * 0.01f - 0.3f;
      double best = 1e30;
      for (int r = 0; r < repeats; ++r) {
        const double t0 = omp_get_wtime();
        be.gemm(s.ta, s.tb, 1.f, A.view(), B.view(), 0.f, C.view());
        best = std::min(best, omp_get_wtime() - t0);
      }
      total += best;
      std::printf(
          "{\"precision\": \"%s\", \"fp32_gemm\": \"%s\", \"product\": \"%s\", \"seconds\": %.6f, "
          "\"gflop_per_s\": %.1f}\n",
          to_string(p), fp32_gemm, s.what, best,
          2.0 * double(s.m) * double(s.k) * double(s.n) / best / 1e9);
    }
    std::printf("{\"precision\": \"%s\", \"epoch_gemm_seconds\": %.6f}\n", to_string(p), total);
    totals.emplace_back(p, total);
  }
  be.set_matmul_precision(MatmulPrecision::kFp32);
  if (totals.size() == 2)
    std::printf("{\"bf16_over_fp32\": %.3f}\n", totals[1].second / totals[0].second);
  return 0;
}

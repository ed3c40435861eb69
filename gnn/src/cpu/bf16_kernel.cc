// Which kernel the CPU's bf16 products run (cpu_bf16.h): the probe, the choice and the log line;
// and the CPU backend's precision setting, which starts them.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/gemm_avx512.h"
#include "halo/gnn/cpu_bf16.h"
#include "halo/graph/enum_names.h"
#include "halo/graph/error.h"

#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace halo {
namespace {

constexpr EnumName<Bf16Kernel> kKernels[] = {
    {Bf16Kernel::kAuto, "auto"}, {Bf16Kernel::kDot, "dot"}, {Bf16Kernel::kFma, "fma"}};

std::atomic<Bf16Kernel> g_kernel{Bf16Kernel::kAuto};

// Throws the one-line refusal where the CPU cannot run either kernel.
void require_bf16_cpu() {
  if (!detail::bf16_gemm_supported())
    throw SystemError(
        "--matmul-precision bf16 needs a CPU with AVX-512 BF16 (vdpbf16ps); this one has none, use "
        "fp32");
}

// Deterministic values in [-1, 1): the probe's time must not depend on denormals or zeros.
std::vector<float> probe_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) / float(1u << 23) - 1.f;
  }
  return v;
}

// Seconds of one forward and one weight-gradient probe product with kernel k.
double probe_once(Bf16Kernel k, std::vector<float>& h, std::vector<float>& w, std::vector<float>& y,
                  std::vector<float>& dw) {
  constexpr std::int64_t rows = 4096, f = 256;
  const MatrixView H{h.data(), rows, f}, W{w.data(), f, f}, Y{y.data(), rows, f},
      dW{dw.data(), f, f};
  const auto t0 = std::chrono::steady_clock::now();
  detail::gemm_bf16(k, false, false, 1.f, H, W, 0.f, Y);  // T = H W
  detail::gemm_bf16(k, true, false, 1.f, H, Y, 0.f, dW);  // dW = H^T dY
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Bf16Kernel parse_bf16_kernel(std::string_view s) {
  if (const auto* e = find_enum(kKernels, s)) return e->value;
  throw ParamError("--bf16-kernel must be " + enum_choices(kKernels) + " (got '" + std::string(s) +
                   "')");
}

const char* to_string(Bf16Kernel k) { return enum_name(kKernels, k); }

Bf16Probe probe_bf16_kernels() {
  require_bf16_cpu();
  static std::mutex mu;
  static std::map<int, Bf16Probe> cache;  // by thread count
  const std::lock_guard<std::mutex> lock(mu);
  const int threads = omp_get_max_threads();
  if (auto it = cache.find(threads); it != cache.end()) return it->second;
  constexpr std::size_t rows = 4096, f = 256;
  std::vector<float> h = probe_values(rows * f, 1), w = probe_values(f * f, 2), y(rows * f),
                     dw(f * f);
  Bf16Probe p{1e30, 1e30};
  probe_once(Bf16Kernel::kDot, h, w, y, dw);  // warm-up: pages, caches, clocks
  probe_once(Bf16Kernel::kFma, h, w, y, dw);
  for (int round = 0; round < 3; ++round) {  // interleaved, best of 3 each
    p.dot_s = std::min(p.dot_s, probe_once(Bf16Kernel::kDot, h, w, y, dw));
    p.fma_s = std::min(p.fma_s, probe_once(Bf16Kernel::kFma, h, w, y, dw));
  }
  cache[threads] = p;
  return p;
}

Bf16Kernel pick_bf16_kernel(const Bf16Probe& p) {
  return p.fma_s < 0.9 * p.dot_s ? Bf16Kernel::kFma : Bf16Kernel::kDot;
}

void set_cpu_bf16_kernel(Bf16Kernel k) {
  require_bf16_cpu();
  g_kernel = k == Bf16Kernel::kAuto ? pick_bf16_kernel(probe_bf16_kernels()) : k;
}

Bf16Kernel cpu_bf16_kernel() { return g_kernel; }

bool cpu_has_amx_bf16() {
#if defined(__linux__) && defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)))  // AMX-BF16
    return false;
  constexpr int kArchGetXcompSupp = 0x1021, kXtileData = 18;
  unsigned long features = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompSupp, &features) != 0) return false;
  return (features >> kXtileData) & 1u;
#else
  return false;
#endif
}

std::string describe_cpu_bf16(bool chosen_by_probe) {
  const Bf16Kernel k = cpu_bf16_kernel();
  std::string s =
      std::string("bf16 products: ") + to_string(k) +
      (k == Bf16Kernel::kFma ? " (FP32 FMAs on bf16-rounded inputs)" : " (AVX-512 BF16 vdpbf16ps)");
  char buf[128];
  if (chosen_by_probe) {
    const Bf16Probe p = probe_bf16_kernels();
    std::snprintf(buf, sizeof buf, ", the faster on this CPU: probe dot %.2f ms, fma %.2f ms",
                  1e3 * p.dot_s, 1e3 * p.fma_s);
    s += buf;
  } else {
    s += ", as --bf16-kernel set";
  }
  if (cpu_has_amx_bf16()) s += "; the CPU has AMX tiles, which halo has no kernel for yet";
  return s;
}

void CpuBackend::set_matmul_precision(MatmulPrecision p) {
  if (p == MatmulPrecision::kTf32)
    throw SystemError(
        "--matmul-precision tf32 is a GPU format (tensor cores); the CPU computes fp32 or bf16");
  if (p == MatmulPrecision::kBf16) require_bf16_cpu();
  if (p == MatmulPrecision::kBf16 && cpu_bf16_kernel() == Bf16Kernel::kAuto)
    set_cpu_bf16_kernel(Bf16Kernel::kAuto);  // the probe, once per process and thread count
  precision_ = p;
}

}  // namespace halo

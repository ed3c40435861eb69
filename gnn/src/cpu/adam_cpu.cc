// The CPU's Adam: one tensor (adam) or a model's tensors in one parallel region (adam_all), both
// through AdamBlocks, so a tensor's bits do not depend on which op updated it nor on the threads
// (the update is element-wise).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/cpu_backend.h"

namespace halo {
namespace {

// One Adam step's constants and its update of 8-float blocks [b0, b1) of one tensor.
class AdamBlocks {
 public:
  explicit AdamBlocks(const AdamStep& s)
      : step_size_(float(double(s.lr) / (1.0 - std::pow(double(s.beta1), double(s.step))))),
        bc2_sqrt_(float(std::sqrt(1.0 - std::pow(double(s.beta2), double(s.step))))),
        wd_(s.weight_decay),
        b1_(s.beta1),
        b2_(s.beta2),
        eps_(s.eps),
        c1_(1.f - s.beta1),
        c2_(1.f - s.beta2) {}
  static constexpr std::int64_t kWidth = 8;
  static std::int64_t blocks(std::int64_t n) { return (n + kWidth - 1) / kWidth; }

  void run(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t b0,
           std::int64_t b1) const {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t i0 = b * kWidth;
#if defined(__AVX2__) && defined(__FMA__)
      if (i0 + kWidth <= n) {
        const __m256 gi =
            _mm256_fmadd_ps(_mm256_set1_ps(wd_), _mm256_loadu_ps(p + i0), _mm256_loadu_ps(g + i0));
        const __m256 mi = _mm256_fmadd_ps(_mm256_set1_ps(b1_), _mm256_loadu_ps(m + i0),
                                          _mm256_mul_ps(_mm256_set1_ps(c1_), gi));
        const __m256 vi =
            _mm256_fmadd_ps(_mm256_set1_ps(b2_), _mm256_loadu_ps(v + i0),
                            _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(c2_), gi), gi));
        const __m256 den = _mm256_add_ps(
            _mm256_div_ps(_mm256_sqrt_ps(vi), _mm256_set1_ps(bc2_sqrt_)), _mm256_set1_ps(eps_));
        _mm256_storeu_ps(m + i0, mi);
        _mm256_storeu_ps(v + i0, vi);
        _mm256_storeu_ps(
            p + i0,
            _mm256_sub_ps(_mm256_loadu_ps(p + i0),
                          _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(step_size_), mi), den)));
        continue;
      }
#endif
      for (std::int64_t i = i0; i < std::min(n, i0 + kWidth); ++i) one(p, g, m, v, i);
    }
  }

 private:
  // One element, in the operations the vector loop uses (fma, sqrt and / are correctly rounded
  // in both), so an element's result does not depend on which loop took it. (The plain loop
  // stayed scalar: std::sqrt's errno path; Adam was 6-9% of a TGN epoch.)
  void one(float* p, const float* g, float* m, float* v, std::int64_t i) const {
    const float gi = std::fma(wd_, p[i], g[i]);
    const float mi = std::fma(b1_, m[i], c1_ * gi), vi = std::fma(b2_, v[i], (c2_ * gi) * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] - (step_size_ * mi) / (std::sqrt(vi) / bc2_sqrt_ + eps_);
  }
  float step_size_, bc2_sqrt_, wd_, b1_, b2_, eps_, c1_, c2_;
};

// Adam's updates are element-wise (any split gives the same bits); below this many elements
// they stay on the calling thread (Adam does ~10 flops an element, more than the other
// element-wise ops, hence a lower bar than kSerialElements).
constexpr std::int64_t kAdamSerial = 16384;

}  // namespace

void CpuBackend::do_adam(float* p, const float* g, float* m, float* v, std::int64_t n,
                         const AdamStep& s) {
  const AdamBlocks adam(s);
  const std::int64_t blocks = AdamBlocks::blocks(n);
#pragma omp parallel if (n > kAdamSerial)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    adam.run(p, g, m, v, n, blocks * t / nt, blocks * (t + 1) / nt);
  }
}

void CpuBackend::do_adam_all(const AdamTensor* t, std::size_t count, const AdamStep& s) {
  // Every tensor's blocks in one sequence, cut into one contiguous range per thread: a model's
  // whole update in one parallel region instead of one per parameter (TGN has 21, most small).
  const AdamBlocks adam(s);
  std::vector<std::int64_t> first(count + 1, 0);  // tensor i's blocks: [first[i], first[i + 1])
  std::int64_t elements = 0;
  for (std::size_t i = 0; i < count; ++i) {
    first[i + 1] = first[i] + AdamBlocks::blocks(t[i].n);
    elements += t[i].n;
  }
  const std::int64_t blocks = first[count];
#pragma omp parallel if (elements > kAdamSerial)
  {
    const std::int64_t id = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t b0 = blocks * id / nt, b1 = blocks * (id + 1) / nt;
    for (std::size_t i = 0; i < count; ++i) {
      const std::int64_t lo = std::max(b0, first[i]), hi = std::min(b1, first[i + 1]);
      if (lo < hi) adam.run(t[i].p, t[i].g, t[i].m, t[i].v, t[i].n, lo - first[i], hi - first[i]);
    }
  }
}

}  // namespace halo

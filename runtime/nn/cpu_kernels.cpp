#include "runtime/nn/cpu_kernels.h"

#include <ATen/Parallel.h>

#include <cmath>

namespace weft::nn::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WEFT_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WEFT_CPU_CLONES
#endif

// GCC contracts a * b + c into one fused multiply-add wherever the target has FMA (its C++
// default, across statements too): the AVX-512 clone of Rotate did, 1 ulp off the unfused ops it
// must equal bit for bit.
#if defined(__GNUC__) && !defined(__clang__)
#define WEFT_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define WEFT_NO_FP_CONTRACT
#endif

// 1 / sqrt(mean(x[0..dim)^2) + eps), the sum of squares in kLanes independent partial sums so
// the loop vectorizes without reassociating one float accumulator. Inlined into each clone.
inline float InverseRms(const float* __restrict x, int64_t dim, float eps) {
  constexpr int kLanes = 16;
  float partial[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= dim; d += kLanes) {
    for (int l = 0; l < kLanes; ++l) partial[l] += x[d + l] * x[d + l];
  }
  float squares = 0;
  for (int l = 0; l < kLanes; ++l) squares += partial[l];
  for (; d < dim; ++d) squares += x[d] * x[d];
  return 1.0f / std::sqrt(squares / static_cast<float>(dim) + eps);
}

WEFT_CPU_CLONES void RmsNormRange(const float* __restrict x, int64_t dim, const float* __restrict weight, float eps,
                                  float* __restrict out, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const float* __restrict xr = x + row * dim;
    float* __restrict yr = out + row * dim;
    const float inv = InverseRms(xr, dim, eps);
    if (weight != nullptr) {
      for (int64_t d = 0; d < dim; ++d) yr[d] = xr[d] * inv * weight[d];
    } else {
      for (int64_t d = 0; d < dim; ++d) yr[d] = xr[d] * inv;
    }
  }
}

WEFT_CPU_CLONES WEFT_NO_FP_CONTRACT void RotateRange(const float* __restrict x, int64_t seq, int64_t heads,
                                                     int64_t dim, const float* __restrict cos,
                                                     const float* __restrict sin, float* __restrict out, int64_t begin,
                                                     int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t s = (row / heads) % seq;
    const float* __restrict xr = x + row * dim;
    float* __restrict yr = out + row * dim;
    const float* __restrict cr = cos + s * dim;
    const float* __restrict sr = sin + s * dim;
    for (int64_t i = 0; i < dim; i += 2) {
      const float a = xr[i];
      const float b = xr[i + 1];
      yr[i] = a * cr[i] + (-b) * sr[i];
      yr[i + 1] = b * cr[i + 1] + a * sr[i + 1];
    }
  }
}

// e^t for t in [-87, 88] (clamped there; NaN passes through the clamps and the polynomial):
// e^t = 2^k e^r with k = round(t log2 e) and r = t - k ln 2 (ln 2 split in two so r is exact
// enough), e^r by Cephes' degree-6 minimax polynomial. Rounding by adding and subtracting 1.5 x
// 2^23 and the bit-built 2^k keep the loop free of calls, so it vectorizes.
inline float ExpClamped(float t) {
  t = t < -87.0f ? -87.0f : t;
  t = t > 88.0f ? 88.0f : t;
  const float k = (t * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (t - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * __builtin_bit_cast(float, (static_cast<int32_t>(k) + 127) << 23);
}

WEFT_CPU_CLONES void GeluTanhRange(float* __restrict x, int64_t begin, int64_t end) {
  constexpr float kTwoC = 2.0f * 0.7978845608028654f;  // 2 sqrt(2/pi)
  constexpr float kTwoCA = kTwoC * 0.044715f;
  for (int64_t i = begin; i < end; ++i) {
    const float v = x[i];
    const float t = -(kTwoC * v + kTwoCA * v * v * v);
    // Past the exp's clamp (v below about -10) GELU is below 1e-37 in magnitude: -0, as its limit at
    // -inf is (the comparison is false for NaN, which stays NaN).
    const float y = v / (1.0f + ExpClamped(t));
    x[i] = t >= 88.0f ? -0.0f : y;
  }
}

}  // namespace

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out) {
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) { RmsNormRange(x, dim, weight, eps, out, begin, end); });
}

void GeluTanhInPlace(float* x, int64_t n) {
  at::parallel_for(0, n, 1 << 14, [&](int64_t begin, int64_t end) { GeluTanhRange(x, begin, end); });
}

void Rotate(const float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, const float* cos, const float* sin,
            float* out) {
  at::parallel_for(0, batch * seq * heads, 256, [&](int64_t begin, int64_t end) {
    RotateRange(x, seq, heads, dim, cos, sin, out, begin, end);
  });
}

}  // namespace weft::nn::cpu

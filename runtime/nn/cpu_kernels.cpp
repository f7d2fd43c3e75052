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

// Rows [begin, end) of the flattened (B, S, H) index.
WEFT_CPU_CLONES void RmsNormRotateRange(const float* __restrict x, int64_t seq, int64_t heads, int64_t dim,
                                        const float* __restrict weight, float eps, const float* __restrict cos,
                                        const float* __restrict sin, float* __restrict out, RowStrides o,
                                        int64_t begin, int64_t end) {
  constexpr int kLanes = 16;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t h = row % heads, s = (row / heads) % seq, b = row / (heads * seq);
    const float* __restrict xr = x + row * dim;
    float* __restrict yr = out + b * o.batch + s * o.token + h * o.head;
    // Sum of squares in kLanes independent partial sums, so the loop vectorizes without
    // reassociating one float accumulator.
    float partial[kLanes] = {};
    int64_t d = 0;
    for (; d + kLanes <= dim; d += kLanes) {
      for (int l = 0; l < kLanes; ++l) partial[l] += xr[d + l] * xr[d + l];
    }
    float squares = 0;
    for (int l = 0; l < kLanes; ++l) squares += partial[l];
    for (; d < dim; ++d) squares += xr[d] * xr[d];
    const float inv = 1.0f / std::sqrt(squares / static_cast<float>(dim) + eps);
    const float* __restrict cr = cos + s * dim;
    const float* __restrict sr = sin + s * dim;
    for (int64_t i = 0; i < dim; i += 2) {
      const float a = xr[i] * inv * weight[i];
      const float bb = xr[i + 1] * inv * weight[i + 1];
      yr[i] = a * cr[i] - bb * sr[i];
      yr[i + 1] = a * sr[i] + bb * cr[i];
    }
  }
}

WEFT_CPU_CLONES void RotateRange(const float* __restrict x, int64_t seq, int64_t heads, int64_t dim,
                                 const float* __restrict cos, const float* __restrict sin, float* __restrict out,
                                 int64_t begin, int64_t end) {
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

}  // namespace

void Rotate(const float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, const float* cos, const float* sin,
            float* out) {
  at::parallel_for(0, batch * seq * heads, 256, [&](int64_t begin, int64_t end) {
    RotateRange(x, seq, heads, dim, cos, sin, out, begin, end);
  });
}

void RmsNormRotate(const float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, const float* weight,
                   float eps, const float* cos, const float* sin, float* out, RowStrides out_strides) {
  at::parallel_for(0, batch * seq * heads, 256, [&](int64_t begin, int64_t end) {
    RmsNormRotateRange(x, seq, heads, dim, weight, eps, cos, sin, out, out_strides, begin, end);
  });
}

}  // namespace weft::nn::cpu

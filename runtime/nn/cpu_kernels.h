#pragma once

// Hand-written CPU loops behind the program path's fast kernels (runtime/program/fast_kernels.h,
// fusions.h) and the tanh-GELU epilogue of runtime/nn/onednn_linear.h: op chains no library
// kernel covers in one pass. Plain C++ that the compiler vectorizes, built for AVX-512, AVX2 and
// baseline x86-64 with the variant picked at load time (GCC target_clones), so the binary runs on
// any x86-64 CPU.

#include <cstdint>

namespace weft::nn::cpu {

// RMSNorm over rows of `dim` floats (torch.nn.functional.rms_norm over the last dim): out = x *
// rsqrt(mean(x^2) + eps) (* weight when it is not null), x and out contiguous (rows, dim). One
// pass per row where ATen's CPU rms_norm makes four (pow, mean, two products): ~6x faster on
// Flux's q/k norms.
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);

// Rotary embedding alone, as diffusers' apply_rotary_emb computes it (use_real, pairs interleaved):
// for x (B, S, H, D) fp32 contiguous and each pair (a, b) = (x[2i], x[2i+1]),
// out[2i] = a cos[2i] + (-b) sin[2i] and out[2i+1] = b cos[2i+1] + a sin[2i+1], with cos/sin (S, D)
// fp32 contiguous -- the same products and sums, in the same order, as the ops it replaces, so the
// result is bitwise the same. `out` is (B, S, H, D) contiguous; D is even.
void Rotate(const float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, const float* cos, const float* sin,
            float* out);

// y = GELU(x) with the tanh approximation, in place over n floats: 0.5 x (1 + tanh(u)) with
// u = sqrt(2/pi) (x + 0.044715 x^3), computed as x / (1 + exp(-2u)) (the same function) with a
// polynomial exp (Cephes' expf: |relative error| < 2e-7 over float range), so one pass vectorizes.
// Within 2e-7 x max(1, |y|) of the exact GELU; at::gelu(approximate="tanh") (Sleef's tanhf) and
// oneDNN's GELU epilogue take 3x as long on AVX2. NaN stays NaN, +inf gives +inf, and -inf
// gives -0, GELU's limit there (torch's formula gives NaN: -inf x 0).
void GeluTanhInPlace(float* x, int64_t n);

}  // namespace weft::nn::cpu

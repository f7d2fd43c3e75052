#pragma once

// The switch for the program path's CPU fast kernels (runtime/program/fast_kernels.h,
// fusions.h), which replace ops and op chains by single passes with the same result (bitwise or
// within fp32 rounding, as each kernel states), and the one-pass RMS norm they share.

#include <ATen/core/Tensor.h>

#include <optional>

namespace weft::nn {

// Process-wide switch (default on): off (weft-run --unfused), every op runs as exported, for
// A/B runs and for tests that compare both paths.
void SetFusedKernels(bool enabled);
bool FusedKernelsEnabled();

// rms_norm(x, [x.size(-1)], weight, eps) as one pass per row (runtime/nn/cpu_kernels.h RmsNorm)
// for fp32 CPU x and weight (D,) or none, when fused kernels are on; nullopt elsewhere. ATen's
// CPU rms_norm makes four passes (pow, mean, two products): 20 ms of a small-Flux forward.
std::optional<at::Tensor> FastRmsNorm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps);

}  // namespace weft::nn

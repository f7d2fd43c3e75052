#pragma once

// Fused kernels for call sequences that have no hooks in between. Fusing never changes what a
// plan sees: a fused pair runs only when neither module has a hook installed (the executor's
// split/gather/reduce hooks, the graph tracer's and --trace's recording hooks all disable it),
// so every hooked call still happens one by one, and parity tests run both ways.

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "runtime/nn/layers.h"

namespace weft::nn {

// Process-wide switch (default on), for A/B runs and for tests that compare both paths.
void SetFusedKernels(bool enabled);
bool FusedKernelsEnabled();

// Without the oneDNN linear ops (onednn::Available(); x86 builds of the PyPI wheel have them)
// every Linear runs at::linear and LinearGelu runs unfused.

// proj's forward, x weight^T + bias with proj's Operands, as a oneDNN matmul on a packed copy of
// the weight (runtime/nn/onednn_linear.h) for fp32 CPU inputs; nullopt elsewhere (Linear::Forward
// then runs at::linear). Same function as forward, so hooks do not matter here: they run around
// forward either way.
std::optional<at::Tensor> PackedLinear(Linear& proj, const at::Tensor& x, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias);

// gelu(proj(x)) with the GELU inline in the caller's forward (diffusers' GELU module; tanh
// approximation when `approximate_tanh`). On CPU in fp32 with a hook-free `proj` this is
// one oneDNN matmul with the GELU as its epilogue, so the activation never makes a second pass
// over memory (unfused, a Flux forward spends ~8% of its time in GELU). Elsewhere: Call(proj),
// then at::gelu.
at::Tensor LinearGelu(Linear& proj, bool approximate_tanh, const at::Tensor& x);

// activation(proj(x)) where the GELU is a module of its own (Flux's single-block `act_mlp`):
// fused as above when neither module has a hook, else both are called.
at::Tensor LinearGelu(Linear& proj, GELUActivation& activation, const at::Tensor& x);

// shift + norm(x) * (1 + scale): diffusers' AdaLN modulation, scale and shift (B, dim). For
// one sample (B == 1) and a hook-free `norm` without affine parameters of its own, the
// modulation is that norm's affine transform: one at::layer_norm with weight 1 + scale and
// bias shift, one pass over x instead of two. Otherwise: Call(norm), then one addcmul.
at::Tensor ModulatedLayerNorm(LayerNorm& norm, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift);

// proj(cat(parts, -1)) without the concatenation when `proj` has no hook: one matmul per part
// against its (packed) column block of proj's weight, each adding the previous part's result in
// its epilogue (Flux's single blocks concatenate attention and MLP outputs, 2,560 features per
// token, only to feed proj_out; the copy cost ~3 ms per block in a small-Flux profile). Otherwise: Call(proj, at::cat(parts, -1)).
at::Tensor LinearOfConcat(Linear& proj, const std::vector<at::Tensor>& parts);

// at::cat(parts, dim), but a view when the parts already lie back to back in one buffer, in
// order (Flux's single blocks split the previous block's output into text and image tokens
// and concatenate them again). Same values either way; the view aliases the parts.
at::Tensor CatOrView(const std::vector<at::Tensor>& parts, int64_t dim);

// Rotary embedding of RMSNorm(x) for a q or k (B, S, H, D), with `norm` a torch.nn.RMSNorm
// over D and cos/sin (S, D) tables as diffusers builds them, written into `out` (B, S, H, D),
// which may be a slice of a larger buffer (joint attention's text or image rows). When `norm`
// has no hook and everything is fp32 on CPU, this is one pass (runtime/nn/cpu_kernels.h)
// instead of RMSNorm's five, the rotation's and the joint concatenation's, and returns true;
// otherwise it does nothing and returns false, and the caller runs the modules.
bool NormRotateInto(RMSNorm& norm, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& out);

// rms_norm(x, [x.size(-1)], weight, eps) as one pass per row (runtime/nn/cpu_kernels.h RmsNorm)
// for fp32 CPU x and weight (D,) or none, when fused kernels are on; nullopt elsewhere. ATen's
// CPU rms_norm makes four passes (pow, mean, two products): 20 ms of a small-Flux forward.
std::optional<at::Tensor> FastRmsNorm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps);

}  // namespace weft::nn

#pragma once

// A program's linear ops as oneDNN matmuls (the mkldnn:: ops libtorch_cpu registers; what
// Inductor emits for Linear on CPU) on weights packed once into oneDNN's blocked layout, for the
// fast kernels of runtime/program/fast_kernels.h and fusions.h. MKL's sgemm, behind at::linear,
// re-packs the weight on every call: a perf profile of a small-Flux run had MKL's packing copies
// at 6% of all CPU samples.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "runtime/nn/layers.h"

namespace weft::nn::onednn {

// Whether this LibTorch registers the oneDNN linear ops (x86 builds of the PyPI wheel do).
bool Available();

// What runs on the matmul's result: kGeluErf as oneDNN's post-op, kGeluTanh as weft's own pass
// over the result right after (runtime/nn/cpu_kernels.h GeluTanhInPlace, 3x as fast on AVX2).
enum class Epilogue { kNone, kGeluTanh, kGeluErf };

// epilogue(x W[:, cols]^T + bias) + add, for fp32 CPU tensors, with W = `weight` (out, in) and
// cols the `width` input features from `offset` (Flux's proj_out reads [attention, mlp] features).
// The packed copy of W[:, cols] lives in `proj` and is remade when the weight is replaced
// (tensor-parallel shards) or written in place. Packed copies of all layers together stay under
// a quarter of physical memory and never leave less than a quarter of it free (free as the
// kernel counts it, page cache excluded: right after a large checkpoint is read, packing may
// stop early); past that, the matmul reads the plain weight (reordered per call, as MKL does).
// `add` (same shape as the result) is summed in the matmul's epilogue; it needs Epilogue::kNone.
at::Tensor Matmul(Linear& proj, const at::Tensor& weight, const at::Tensor& x, int64_t offset, int64_t width,
                  const std::optional<at::Tensor>& bias, Epilogue epilogue, const at::Tensor* add = nullptr);

// Bytes of packed weights held by the process (for tests and reports).
int64_t PackedBytes();

// Memory that holds weights only for a while (the buffers weights sliced over ranks are gathered
// into, executor/weight_stream.h): a weight there is multiplied as it is, never packed nor held
// -- a packed copy would keep every block whole, and holding it would keep the buffer taken.
// Thread-safe.
void MarkTransient(const void* begin, int64_t bytes);

}  // namespace weft::nn::onednn

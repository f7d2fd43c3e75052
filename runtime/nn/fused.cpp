#include "runtime/nn/fused.h"

#include <ATen/ATen.h>

#include <atomic>

#include "runtime/nn/cpu_kernels.h"

namespace weft::nn {
namespace {

std::atomic<bool> g_fused{true};

}  // namespace

void SetFusedKernels(bool enabled) { g_fused.store(enabled, std::memory_order_relaxed); }
bool FusedKernelsEnabled() { return g_fused.load(std::memory_order_relaxed); }

std::optional<at::Tensor> FastRmsNorm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  if (!FusedKernelsEnabled() || !x.is_cpu() || x.scalar_type() != at::kFloat || x.dim() == 0 || x.numel() == 0) {
    return std::nullopt;
  }
  const int64_t dim = x.size(-1);
  if (weight && (!weight->is_cpu() || weight->scalar_type() != at::kFloat || weight->dim() != 1 || weight->size(0) != dim)) {
    return std::nullopt;
  }
  const at::Tensor xc = x.contiguous();
  const at::Tensor w = weight ? weight->contiguous() : at::Tensor();
  at::Tensor out = at::empty_like(xc);
  cpu::RmsNorm(xc.data_ptr<float>(), xc.numel() / dim, dim, weight ? w.data_ptr<float>() : nullptr,
               static_cast<float>(eps), out.data_ptr<float>());
  return out;
}

}  // namespace weft::nn

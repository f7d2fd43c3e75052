#include "runtime/nn/fused.h"

#include <ATen/ATen.h>
#include <c10/util/strides.h>

#include <atomic>
#include <optional>
#include <vector>

#include "runtime/nn/cpu_kernels.h"
#include "runtime/nn/onednn_linear.h"

namespace weft::nn {
namespace {

std::atomic<bool> g_fused{true};

// fp32 CPU operands for the oneDNN paths (bf16 matmuls would need CPU features probed first).
bool OneDnnOperands(const at::Tensor& x, const at::Tensor& weight) {
  return g_fused.load(std::memory_order_relaxed) && onednn::Available() && x.device().is_cpu() && x.numel() > 0 &&
         x.scalar_type() == at::kFloat && weight.device().is_cpu() && weight.scalar_type() == at::kFloat;
}

// The fused kernel, or nothing when proj's operands do not suit it.
std::optional<at::Tensor> FusedLinearGelu(Linear& proj, bool approximate_tanh, const at::Tensor& x) {
  if (!proj.hooks().empty()) return std::nullopt;
  auto [weight, bias] = proj.Operands(x.size(-1));
  if (!OneDnnOperands(x, weight)) return std::nullopt;
  return onednn::Matmul(proj, weight, x, 0, x.size(-1), bias,
                        approximate_tanh ? onednn::Epilogue::kGeluTanh : onednn::Epilogue::kGeluErf);
}

}  // namespace

void SetFusedKernels(bool enabled) { g_fused.store(enabled, std::memory_order_relaxed); }
bool FusedKernelsEnabled() { return g_fused.load(std::memory_order_relaxed); }

std::optional<at::Tensor> PackedLinear(Linear& proj, const at::Tensor& x, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias) {
  if (!OneDnnOperands(x, weight)) return std::nullopt;
  return onednn::Matmul(proj, weight, x, 0, x.size(-1), bias, onednn::Epilogue::kNone);
}

at::Tensor LinearGelu(Linear& proj, bool approximate_tanh, const at::Tensor& x) {
  if (auto fused = FusedLinearGelu(proj, approximate_tanh, x)) return *fused;
  return at::gelu(Call(proj, x), approximate_tanh ? "tanh" : "none");
}

at::Tensor LinearGelu(Linear& proj, GELUActivation& activation, const at::Tensor& x) {
  if (activation.hooks().empty()) {
    if (auto fused = FusedLinearGelu(proj, activation.approximate_tanh(), x)) return *fused;
  }
  return Call(activation, Call(proj, x));
}

at::Tensor ModulatedLayerNorm(LayerNorm& norm, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  const bool fusable = FusedKernelsEnabled() && norm.hooks().empty() && !norm.elementwise_affine() && !x.is_meta() &&
                       scale.dim() == 2 && scale.size(0) == 1 && shift.sizes() == scale.sizes() &&
                       scale.scalar_type() == x.scalar_type() && shift.scalar_type() == x.scalar_type() &&
                       x.size(-1) == norm.dim() && scale.size(1) == norm.dim();
  if (fusable) return at::layer_norm(x, {norm.dim()}, (1 + scale).reshape({-1}), shift.reshape({-1}), norm.eps());
  return at::addcmul(shift.unsqueeze(1), Call(norm, x), 1 + scale.unsqueeze(1));
}

at::Tensor LinearOfConcat(Linear& proj, const std::vector<at::Tensor>& parts) {
  bool fusable = FusedKernelsEnabled() && proj.hooks().empty() && !parts.empty();
  int64_t width = 0;
  for (const at::Tensor& p : parts) {
    fusable = fusable && !p.is_meta() && p.dim() >= 2 && p.size(-1) > 0 && p.scalar_type() == parts[0].scalar_type() &&
              p.device() == parts[0].device() && p.sizes().slice(0, p.dim() - 1) == parts[0].sizes().slice(0, parts[0].dim() - 1);
    if (p.dim() >= 1) width += p.size(-1);
  }
  if (!fusable) return Call(proj, at::cat(parts, -1));
  auto [weight, bias] = proj.Operands(width);
  if (weight.scalar_type() != parts[0].scalar_type() || weight.device() != parts[0].device()) {
    return Call(proj, at::cat(parts, -1));
  }
  at::Tensor out;
  int64_t offset = 0;
  if (OneDnnOperands(parts[0], weight)) {
    // part_0 W_0^T + b, then part_i W_i^T + previous, the sum in each matmul's epilogue.
    for (const at::Tensor& p : parts) {
      out = onednn::Matmul(proj, weight, p, offset, p.size(-1), out.defined() ? std::nullopt : bias, onednn::Epilogue::kNone,
                           out.defined() ? &out : nullptr);
      offset += p.size(-1);
    }
    return out;
  }
  // out = sum_i part_i W[:, block i]^T (+ bias); W's column blocks are strided views that BLAS
  // reads as transposed matrices, so nothing is copied.
  for (const at::Tensor& p : parts) {
    const at::Tensor rows = p.reshape({-1, p.size(-1)});
    const at::Tensor block = weight.narrow(1, offset, p.size(-1)).t();
    if (!out.defined()) {
      out = bias ? at::addmm(*bias, rows, block) : at::mm(rows, block);
    } else {
      out.addmm_(rows, block);
    }
    offset += p.size(-1);
  }
  std::vector<int64_t> shape(parts[0].sizes().begin(), parts[0].sizes().end());
  shape.back() = weight.size(0);
  return out.view(shape);
}

at::Tensor CatOrView(const std::vector<at::Tensor>& parts, int64_t dim) {
  TORCH_CHECK(!parts.empty(), "CatOrView: no tensors");
  const at::Tensor& first = parts[0];
  const int64_t d = dim < 0 ? dim + first.dim() : dim;
  // Back to back means: every part contiguous in one storage, each starting where the previous
  // ends, and only size-1 dims before `dim` (so the parts follow each other in memory).
  bool adjacent = !first.is_meta() && d >= 0 && d < first.dim() && first.is_contiguous();
  for (int64_t i = 0; adjacent && i < d; ++i) adjacent = first.size(i) == 1;
  int64_t extent = 0, next_offset = first.storage_offset();
  for (const at::Tensor& p : parts) {
    if (!adjacent) break;
    adjacent = p.is_contiguous() && p.dim() == first.dim() && p.scalar_type() == first.scalar_type() &&
               p.device() == first.device() && p.storage().is_alias_of(first.storage()) &&
               p.storage_offset() == next_offset;
    for (int64_t i = 0; adjacent && i < first.dim(); ++i) adjacent = i == d || p.size(i) == first.size(i);
    extent += adjacent ? p.size(d) : 0;
    next_offset += p.numel();
  }
  if (!adjacent) return at::cat(parts, dim);
  std::vector<int64_t> shape(first.sizes().begin(), first.sizes().end());
  shape[d] = extent;
  return first.as_strided(shape, c10::contiguous_strides(shape), first.storage_offset());
}

bool NormRotateInto(RMSNorm& norm, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& out) {
  if (!FusedKernelsEnabled() || !norm.hooks().empty() || norm.flavour() != RMSNorm::Flavour::kTorch ||
      !norm.elementwise_affine() || norm.statistics_sharded()) {
    return false;
  }
  auto cpu_fp32 = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  const at::Tensor& weight = norm.Parameter("weight");
  if (!cpu_fp32(x) || !cpu_fp32(cos) || !cpu_fp32(sin) || !cpu_fp32(out) || !cpu_fp32(weight)) return false;
  if (x.dim() != 4 || out.sizes() != x.sizes() || out.stride(3) != 1 || x.size(3) != norm.dim() ||
      x.size(3) % 2 != 0 || weight.numel() != x.size(3)) {
    return false;
  }
  const std::vector<int64_t> table = {x.size(1), x.size(3)};
  if (cos.sizes() != table || sin.sizes() != table) return false;
  const at::Tensor xc = x.contiguous(), cc = cos.contiguous(), sc = sin.contiguous(), wc = weight.contiguous();
  cpu::RmsNormRotate(xc.data_ptr<float>(), x.size(0), x.size(1), x.size(2), x.size(3), wc.data_ptr<float>(),
                     static_cast<float>(norm.eps()), cc.data_ptr<float>(), sc.data_ptr<float>(), out.data_ptr<float>(),
                     {out.stride(0), out.stride(1), out.stride(2)});
  return true;
}

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

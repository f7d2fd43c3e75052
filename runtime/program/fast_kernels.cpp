#include "runtime/program/fast_kernels.h"

#include <ATen/ATen.h>

#include <limits>

#include "runtime/nn/fused.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/onednn_linear.h"

namespace weft::interp {
namespace {

// aten.linear as a oneDNN matmul. The nn::Linear only holds the packed copy of the weight; it is
// remade when a different weight tensor arrives (a shard, a reload) or the weight is written. A
// weight the forward computes (WanAnimate's motion encoder scales its weights on every call) is an
// inference tensor, new each call and without the version counter a packed copy is checked
// against: it runs on at::linear. So does an empty one (NucleusMoE's tiny config has a Linear of
// 0 output features), which oneDNN has no primitive for.
class PackedLinear final : public FastKernel {
 public:
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    const at::Tensor x = stack[0].toTensor();
    const at::Tensor w = stack[1].toTensor();
    std::optional<at::Tensor> b;
    if (!stack[2].isNone()) b = stack[2].toTensor();
    at::Tensor out;
    if (x.is_cpu() && x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && w.dim() == 2 &&
        w.numel() > 0 && x.numel() > 0 && !w.is_inference() && (!b || b->scalar_type() == at::kFloat) && nn::FusedKernelsEnabled()) {
      if (!holder_ || holder_->in_features() != w.size(1) || holder_->out_features() != w.size(0)) {
        holder_ = std::make_unique<nn::Linear>(w.size(1), w.size(0), b.has_value());
      }
      out = nn::onednn::Matmul(*holder_, w, x, 0, w.size(1), b, nn::onednn::Epilogue::kNone);
    } else {
      out = at::linear(x, w, b);
    }
    stack.clear();
    stack.push_back(std::move(out));
  }

 private:
  std::unique_ptr<nn::Linear> holder_;
};

// aten.rms_norm(input, normalized_shape, weight?, eps?) over the last dim as one pass per row
// (nn::FastRmsNorm); made only for a one-entry normalized_shape, and when that entry is not the
// input's last size, or for another dtype or device, the operator runs. eps None is torch's: the
// input dtype's machine epsilon.
class RmsNormKernel final : public FastKernel {
 public:
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    const at::Tensor x = stack[0].toTensor();
    std::optional<at::Tensor> weight;
    if (!stack[2].isNone()) weight = stack[2].toTensor();
    const std::optional<double> eps = stack[3].isNone() ? std::nullopt : std::optional<double>(stack[3].toDouble());
    std::optional<at::Tensor> out;
    if (x.dim() >= 1 && stack[1].toIntList().get(0) == x.size(-1)) {
      out = nn::FastRmsNorm(x, weight, eps ? *eps : std::numeric_limits<float>::epsilon());
    }
    if (!out) out = at::rms_norm(x, stack[1].toDimVector(), weight, eps);
    stack.clear();
    stack.push_back(std::move(*out));
  }
};

// Whether `node`'s normalized_shape has exactly one entry (constant or symbolic).
bool NormalizesOneDim(const program::Node& node) {
  for (const program::NamedArgument& in : node.inputs) {
    if (in.name != "normalized_shape") continue;
    return (in.arg.kind == program::Argument::Kind::kInts && in.arg.ints.size() == 1) ||
           (in.arg.kind == program::Argument::Kind::kSymInts && in.arg.sym_ints.size() == 1);
  }
  return false;
}

}  // namespace

std::unique_ptr<FastKernel> MakeFastKernel(const FastKernelContext& ctx) {
  if (!ctx.device.is_cpu()) return nullptr;
  if (ctx.node.target == "torch.ops.aten.linear.default" && nn::onednn::Available()) return std::make_unique<PackedLinear>();
  if (ctx.node.target == "torch.ops.aten.rms_norm.default" && NormalizesOneDim(ctx.node)) {
    return std::make_unique<RmsNormKernel>();
  }
  return nullptr;
}

}  // namespace weft::interp

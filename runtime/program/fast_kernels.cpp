#include "runtime/program/fast_kernels.h"

#include <ATen/ATen.h>

#include "runtime/nn/fused.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/onednn_linear.h"

namespace weft::interp {
namespace {

// aten.linear as a oneDNN matmul. The nn::Linear only holds the packed copy of the weight; it is
// remade when a different weight tensor arrives (a shard, a reload) or the weight is written.
class PackedLinear final : public FastKernel {
 public:
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    const at::Tensor x = stack[0].toTensor();
    const at::Tensor w = stack[1].toTensor();
    std::optional<at::Tensor> b;
    if (!stack[2].isNone()) b = stack[2].toTensor();
    at::Tensor out;
    if (x.is_cpu() && x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && w.dim() == 2 &&
        (!b || b->scalar_type() == at::kFloat) && nn::FusedKernelsEnabled()) {
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

}  // namespace

std::unique_ptr<FastKernel> MakeFastKernel(const FastKernelContext& ctx) {
  if (!ctx.device.is_cpu()) return nullptr;
  if (ctx.node.target == "torch.ops.aten.linear.default" && nn::onednn::Available()) return std::make_unique<PackedLinear>();
  return nullptr;
}

}  // namespace weft::interp

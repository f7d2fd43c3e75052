#include "runtime/nn/layers.h"

#include <ATen/ATen.h>

#include <limits>

namespace weft::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Module("Linear"), in_features_(in_features), out_features_(out_features), has_bias_(bias) {
  AddParameter("weight", {out_features, in_features});
  if (bias) AddParameter("bias", {out_features});
}

Outputs Linear::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("input");
  if (!has_bias_) return {at::linear(x, Parameter("weight"))};
  return {at::linear(x, Parameter("weight"), Parameter("bias"))};
}

at::Tensor ShardedRmsNorm(const at::Tensor& x, int64_t dims, int64_t full_width, const std::optional<at::Tensor>& weight,
                          std::optional<double> eps, const std::function<void(at::Tensor&)>& sum_over_shards) {
  TORCH_CHECK(dims >= 1 && dims <= x.dim() && full_width > 0, "sharded RMS norm of ", dims,
              " dims over a full width of ", full_width, " on a rank-", x.dim(), " tensor");
  std::vector<int64_t> reduced;
  for (int64_t d = x.dim() - dims; d < x.dim(); ++d) reduced.push_back(d);
  const at::Tensor xf = x.to(at::kFloat);
  at::Tensor sum = xf.pow(2).sum(reduced, /*keepdim=*/true).contiguous();
  sum_over_shards(sum);
  const double epsilon = eps ? *eps : AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "rms_norm eps", [] {
    return static_cast<double>(std::numeric_limits<scalar_t>::epsilon());
  });
  at::Tensor y = (xf * at::rsqrt(sum / static_cast<double>(full_width) + epsilon)).to(x.scalar_type());
  return weight ? y * *weight : y;
}

}  // namespace weft::nn

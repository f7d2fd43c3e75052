#include "runtime/nn/layers.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

#include "runtime/nn/fused.h"

namespace weft::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Module("Linear"), in_features_(in_features), out_features_(out_features), has_bias_(bias), bias_in_forward_(bias) {
  AddParameter("weight", {out_features, in_features});
  if (bias) AddParameter("bias", {out_features});
}

std::pair<at::Tensor, std::optional<at::Tensor>> Linear::Operands(int64_t input_width) {
  const at::Tensor& weight = Parameter("weight");
  if (input_width != weight.size(1)) {
    throw std::invalid_argument("Linear `" + fqn() + "`: input width " + std::to_string(input_width) +
                                " but weight is [" + std::to_string(weight.size(0)) + ", " +
                                std::to_string(weight.size(1)) + "]");
  }
  if (!bias_in_forward_) return {weight, std::nullopt};
  return {weight, Parameter("bias")};
}

Outputs Linear::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("input");
  auto [weight, bias] = Operands(x.size(-1));
  if (auto packed = PackedLinear(*this, x, weight, bias)) return {*packed};
  return {bias ? at::linear(x, weight, *bias) : at::linear(x, weight)};
}

at::Tensor Linear::DetachBias() {
  if (!has_bias_) return {};
  bias_in_forward_ = false;
  return Parameter("bias");
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool elementwise_affine)
    : Module("LayerNorm"), dim_(dim), eps_(eps), affine_(elementwise_affine) {
  if (affine_) {
    AddParameter("weight", {dim});
    AddParameter("bias", {dim});
  }
}

Outputs LayerNorm::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("input");
  // LibTorch has no C++ meta kernel for layer_norm (Python registers one); on the meta device
  // (graph dumps) only the shape matters, and a layer norm keeps shape and dtype.
  if (x.is_meta()) return {at::empty_like(x)};
  if (affine_) return {at::layer_norm(x, {dim_}, Parameter("weight"), Parameter("bias"), eps_)};
  return {at::layer_norm(x, {dim_}, {}, {}, eps_)};
}

RMSNorm::RMSNorm(int64_t dim, double eps, bool elementwise_affine, Flavour flavour)
    : Module("RMSNorm"), dim_(dim), eps_(eps), affine_(elementwise_affine), flavour_(flavour) {
  if (affine_) AddParameter("weight", {dim});
}

void RMSNorm::ShardStatistics(std::function<void(at::Tensor&)> sum_over_shards, int64_t full_dim) {
  sum_over_shards_ = std::move(sum_over_shards);
  full_dim_ = full_dim;
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

Outputs RMSNorm::Forward(Args& args) {
  const at::Tensor& x = args.Tensor(flavour_ == Flavour::kTorch ? "x" : "hidden_states");
  const std::optional<at::Tensor> affine = affine_ ? std::optional<at::Tensor>(Parameter("weight")) : std::nullopt;
  if (sum_over_shards_) return {ShardedRmsNorm(x, 1, full_dim_, affine, eps_, sum_over_shards_)};
  if (std::optional<at::Tensor> y = FastRmsNorm(x, affine, eps_)) return {*y};  // fp32: both flavours agree
  if (flavour_ == Flavour::kTorch) return {at::rms_norm(x, {dim_}, affine, eps_)};
  at::Tensor variance = x.to(at::kFloat).pow(2).mean(-1, /*keepdim=*/true);
  at::Tensor y = x * at::rsqrt(variance + eps_);
  if (!affine_) return {y.to(x.scalar_type())};
  const at::Tensor& weight = Parameter("weight");
  // As diffusers: half-precision weights cast the normalised value to their dtype first.
  if (weight.scalar_type() == at::kHalf || weight.scalar_type() == at::kBFloat16) y = y.to(weight.scalar_type());
  return {y * weight};
}

Outputs SiLU::Forward(Args& args) { return {at::silu(args.Tensor("input"))}; }

Outputs GELUActivation::Forward(Args& args) { return {at::gelu(args.Tensor("input"), tanh_ ? "tanh" : "none")}; }

Outputs ModuleList::Forward(Args&) {
  throw std::logic_error("ModuleList `" + fqn() + "` cannot be called; call its entries");
}

GELU::GELU(int64_t dim_in, int64_t dim_out, bool approximate_tanh, bool bias)
    : Module("GELU"), tanh_(approximate_tanh) {
  AddChild("proj", std::make_unique<Linear>(dim_in, dim_out, bias));
}

Outputs GELU::Forward(Args& args) {
  return {LinearGelu(static_cast<Linear&>(*Child("proj")), tanh_, args.Tensor("hidden_states"))};
}

FeedForward::FeedForward(int64_t dim, int64_t dim_out, int64_t inner_dim, bool approximate_tanh)
    : Module("FeedForward") {
  auto& net = AddChild("net", std::make_unique<ModuleList>());
  net.Append(std::make_unique<GELU>(dim, inner_dim, approximate_tanh));
  net.Append(std::make_unique<Dropout>());
  net.Append(std::make_unique<Linear>(inner_dim, dim_out));
}

Outputs FeedForward::Forward(Args& args) {
  auto& net = static_cast<ModuleList&>(*Child("net"));
  at::Tensor h = args.Tensor("hidden_states");
  for (size_t i = 0; i < net.size(); ++i) h = Call(net[i], h);
  return {h};
}

}  // namespace weft::nn

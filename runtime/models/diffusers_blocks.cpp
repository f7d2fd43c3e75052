#include "runtime/models/diffusers_blocks.h"

#include <ATen/ATen.h>

#include <cmath>
#include <memory>

#include "runtime/nn/fused.h"

namespace weft::models {

using nn::Args;
using nn::Call;
using nn::Outputs;

at::Tensor SplitHeads(const at::Tensor& x, int64_t head_dim) { return x.unflatten(-1, {-1, head_dim}); }

at::Tensor TimestepEmbeddingTable(const at::Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                                  double downscale_freq_shift, double scale, double max_period) {
  TORCH_CHECK(timesteps.dim() == 1, "timesteps must be 1-D, got ", timesteps.sizes());
  const int64_t half = dim / 2;
  at::Tensor exponent = at::arange(0, half, at::TensorOptions().dtype(at::kFloat).device(timesteps.device())) *
                        (-std::log(max_period));
  exponent = exponent / (static_cast<double>(half) - downscale_freq_shift);
  at::Tensor emb = timesteps.unsqueeze(1).to(at::kFloat) * at::exp(exponent).unsqueeze(0) * scale;
  emb = flip_sin_to_cos ? at::cat({at::cos(emb), at::sin(emb)}, -1) : at::cat({at::sin(emb), at::cos(emb)}, -1);
  if (dim % 2 == 1) emb = at::constant_pad_nd(emb, {0, 1, 0, 0});
  return emb;
}

std::pair<at::Tensor, at::Tensor> RotaryTables(int64_t dim, const at::Tensor& positions, double theta) {
  TORCH_CHECK(dim % 2 == 0, "rotary dim must be even, got ", dim);
  auto f64 = at::TensorOptions().dtype(at::kDouble).device(positions.device());
  at::Tensor freqs = 1.0 / at::pow(theta, at::arange(0, dim, 2, f64) / static_cast<double>(dim));
  at::Tensor angles = at::outer(positions.to(at::kDouble), freqs);  // (S, dim/2)
  return {at::cos(angles).repeat_interleave(2, 1).to(at::kFloat), at::sin(angles).repeat_interleave(2, 1).to(at::kFloat)};
}

at::Tensor RotatePairs(const at::Tensor& x, const at::Tensor& cos_half, const at::Tensor& sin_half) {
  // Pairs (x[2i], x[2i+1]) as complex numbers times (cos + i sin): (a c - b s, a s + b c), the
  // same products and sums as diffusers' x * cos + stack(-b, a) * sin, in one pass over x
  // instead of a stack, two products and a sum (rotary embedding was 8% of a Flux forward).
  // No C++ meta kernel for at::complex; on the meta device (graph dumps) only shape and dtype
  // matter, and a rotation keeps both.
  if (x.is_meta()) return at::empty_like(x);
  const at::Tensor pairs = x.to(at::kFloat).contiguous().unflatten(-1, {-1, 2});
  const at::Tensor rotation = at::complex(cos_half.to(at::kFloat), sin_half.to(at::kFloat));
  return at::view_as_real(at::view_as_complex(pairs) * rotation).flatten(-2).to(x.scalar_type());
}

at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  // cos/sin (S, D) repeat each angle twice; one of each pair is the pair's angle. (1, S, 1, D/2).
  auto half = [](const at::Tensor& t) { return t.slice(-1, 0, t.size(-1), 2).unsqueeze(0).unsqueeze(2); };
  return RotatePairs(x, half(cos), half(sin));
}

Outputs Timesteps::Forward(Args& args) {
  return {TimestepEmbeddingTable(args.Tensor("timesteps"), channels_, flip_, shift_)};
}

TimestepEmbedding::TimestepEmbedding(int64_t in_channels, int64_t time_embed_dim) : Module("TimestepEmbedding") {
  AddChild("linear_1", std::make_unique<nn::Linear>(in_channels, time_embed_dim));
  AddChild("act", std::make_unique<nn::SiLU>());
  AddChild("linear_2", std::make_unique<nn::Linear>(time_embed_dim, time_embed_dim));
}

Outputs TimestepEmbedding::Forward(Args& args) {
  at::Tensor h = Call(*Child("linear_1"), args.Tensor("sample"));
  h = Call(*Child("act"), h);
  return {Call(*Child("linear_2"), h)};
}

PixArtAlphaTextProjection::PixArtAlphaTextProjection(int64_t in_features, int64_t hidden_size, Activation act)
    : Module("PixArtAlphaTextProjection") {
  AddChild("linear_1", std::make_unique<nn::Linear>(in_features, hidden_size));
  if (act == Activation::kSiLU) {
    AddChild("act_1", std::make_unique<nn::SiLU>());
  } else {
    AddChild("act_1", std::make_unique<nn::GELUActivation>(/*approximate_tanh=*/true));
  }
  AddChild("linear_2", std::make_unique<nn::Linear>(hidden_size, hidden_size));
}

Outputs PixArtAlphaTextProjection::Forward(Args& args) {
  at::Tensor h = Call(*Child("linear_1"), args.Tensor("caption"));
  h = Call(*Child("act_1"), h);
  return {Call(*Child("linear_2"), h)};
}

CombinedTimestepTextProjEmbeddings::CombinedTimestepTextProjEmbeddings(int64_t embedding_dim,
                                                                       int64_t pooled_projection_dim,
                                                                       bool with_guidance)
    : Module(with_guidance ? "CombinedTimestepGuidanceTextProjEmbeddings" : "CombinedTimestepTextProjEmbeddings"),
      guidance_(with_guidance) {
  AddChild("time_proj", std::make_unique<Timesteps>(256, /*flip_sin_to_cos=*/true, /*shift=*/0.0));
  AddChild("timestep_embedder", std::make_unique<TimestepEmbedding>(256, embedding_dim));
  if (guidance_) AddChild("guidance_embedder", std::make_unique<TimestepEmbedding>(256, embedding_dim));
  AddChild("text_embedder", std::make_unique<PixArtAlphaTextProjection>(
                                pooled_projection_dim, embedding_dim, PixArtAlphaTextProjection::Activation::kSiLU));
}

std::vector<std::string> CombinedTimestepTextProjEmbeddings::Signature() const {
  if (guidance_) return {"timestep", "guidance", "pooled_projection"};
  return {"timestep", "pooled_projection"};
}

Outputs CombinedTimestepTextProjEmbeddings::Forward(Args& args) {
  const at::Tensor& pooled = args.Tensor("pooled_projection");
  auto embed = [&](const std::string& embedder, const at::Tensor& t) {
    at::Tensor table = Call(*Child("time_proj"), t);
    return Call(*Child(embedder), table.to(pooled.scalar_type()));
  };
  at::Tensor conditioning = embed("timestep_embedder", args.Tensor("timestep"));
  if (guidance_) conditioning = conditioning + embed("guidance_embedder", args.Tensor("guidance"));
  return {conditioning + Call(*Child("text_embedder"), pooled)};
}

AdaLayerNormZero::AdaLayerNormZero(int64_t dim) : Module("AdaLayerNormZero") {
  AddChild("silu", std::make_unique<nn::SiLU>());
  AddChild("linear", std::make_unique<nn::Linear>(dim, 6 * dim));
  AddChild("norm", std::make_unique<nn::LayerNorm>(dim, 1e-6, /*elementwise_affine=*/false));
}

Outputs AdaLayerNormZero::Forward(Args& args) {
  at::Tensor emb = Call(*Child("linear"), Call(*Child("silu"), args.Tensor("emb")));
  std::vector<at::Tensor> c = emb.chunk(6, 1);  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
  at::Tensor x = nn::ModulatedLayerNorm(static_cast<nn::LayerNorm&>(*Child("norm")), args.Tensor("x"), c[1], c[0]);
  return {x, c[2], c[3], c[4], c[5]};
}

AdaLayerNormZeroSingle::AdaLayerNormZeroSingle(int64_t dim) : Module("AdaLayerNormZeroSingle") {
  AddChild("silu", std::make_unique<nn::SiLU>());
  AddChild("linear", std::make_unique<nn::Linear>(dim, 3 * dim));
  AddChild("norm", std::make_unique<nn::LayerNorm>(dim, 1e-6, /*elementwise_affine=*/false));
}

Outputs AdaLayerNormZeroSingle::Forward(Args& args) {
  at::Tensor emb = Call(*Child("linear"), Call(*Child("silu"), args.Tensor("emb")));
  std::vector<at::Tensor> c = emb.chunk(3, 1);  // shift_msa, scale_msa, gate_msa
  at::Tensor x = nn::ModulatedLayerNorm(static_cast<nn::LayerNorm&>(*Child("norm")), args.Tensor("x"), c[1], c[0]);
  return {x, c[2]};
}

AdaLayerNormContinuous::AdaLayerNormContinuous(int64_t dim, int64_t conditioning_dim, bool elementwise_affine,
                                               double eps)
    : Module("AdaLayerNormContinuous") {
  AddChild("silu", std::make_unique<nn::SiLU>());
  AddChild("linear", std::make_unique<nn::Linear>(conditioning_dim, 2 * dim));
  AddChild("norm", std::make_unique<nn::LayerNorm>(dim, eps, elementwise_affine));
}

Outputs AdaLayerNormContinuous::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("x");
  at::Tensor cond = Call(*Child("silu"), args.Tensor("conditioning_embedding")).to(x.scalar_type());
  std::vector<at::Tensor> c = Call(*Child("linear"), cond).chunk(2, 1);  // scale, shift
  return {nn::ModulatedLayerNorm(static_cast<nn::LayerNorm&>(*Child("norm")), x, c[0], c[1])};
}

FP32LayerNorm::FP32LayerNorm(int64_t dim, double eps, bool elementwise_affine)
    : Module("FP32LayerNorm"), dim_(dim), eps_(eps), affine_(elementwise_affine) {
  if (affine_) {
    AddParameter("weight", {dim}).fill_(1.0);
    AddParameter("bias", {dim});
  }
}

Outputs FP32LayerNorm::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("inputs");
  if (x.is_meta()) return {at::empty_like(x)};  // no C++ meta kernel for layer_norm; shape and dtype kept
  at::Tensor y = affine_ ? at::layer_norm(x.to(at::kFloat), {dim_}, Parameter("weight").to(at::kFloat),
                                          Parameter("bias").to(at::kFloat), eps_)
                         : at::layer_norm(x.to(at::kFloat), {dim_}, {}, {}, eps_);
  return {y.to(x.scalar_type())};
}

Conv3d::Conv3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
               std::vector<int64_t> stride, bool bias)
    : Module("Conv3d"), stride_(std::move(stride)), has_bias_(bias) {
  TORCH_CHECK(kernel_size.size() == 3 && stride_.size() == 3, "Conv3d: kernel_size and stride need 3 entries");
  AddParameter("weight", {out_channels, in_channels, kernel_size[0], kernel_size[1], kernel_size[2]});
  if (has_bias_) AddParameter("bias", {out_channels});
}

Outputs Conv3d::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("input");
  const at::Tensor& weight = Parameter("weight");
  TORCH_CHECK(x.dim() == 5 && x.size(1) == weight.size(1), "Conv3d `", fqn(), "`: input must be (B, ",
              weight.size(1), ", F, H, W), got ", x.sizes());
  if (x.is_meta()) {
    // LibTorch has no C++ meta kernel for convolution; on the meta device (graph dumps) only
    // the shape matters: no padding, no dilation.
    std::vector<int64_t> shape = {x.size(0), weight.size(0)};
    for (int64_t d = 0; d < 3; ++d) shape.push_back((x.size(2 + d) - weight.size(2 + d)) / stride_[d] + 1);
    return {at::empty(shape, x.options())};
  }
  std::optional<at::Tensor> bias;
  if (has_bias_) bias = Parameter("bias");
  return {at::conv3d(x, weight, bias, stride_)};
}

}  // namespace weft::models

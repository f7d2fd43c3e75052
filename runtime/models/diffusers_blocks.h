#pragma once

// diffusers' embedding and adaptive-norm modules shared by the built-in DiTs, with
// diffusers' class names, child names, argument names and math
// (diffusers/models/embeddings.py and normalization.py).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/nn/layers.h"
#include "runtime/nn/module.h"

namespace weft::models {

// (B, S, H*D) -> (B, S, H, D) with D fixed: under tensor parallelism the width is a shard
// and the local head count follows from it.
at::Tensor SplitHeads(const at::Tensor& x, int64_t head_dim);

// Sinusoidal embedding of 1-D timesteps: (N,) -> (N, dim), sin then cos (cos first when
// flip_sin_to_cos), frequencies exp(-ln(max_period) * i / (dim/2 - shift)).
at::Tensor TimestepEmbeddingTable(const at::Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                                  double downscale_freq_shift, double scale = 1.0, double max_period = 10000.0);

// RoPE tables for one axis: positions (S,) -> (cos, sin), each (S, dim), every frequency
// repeated twice (interleaved real/imag pairs), frequencies computed in fp64, tables fp32.
std::pair<at::Tensor, at::Tensor> RotaryTables(int64_t dim, const at::Tensor& positions, double theta);

// Rotates x (B, S, H, D) by tables (S, D) along the sequence dim 1, interleaved pairs.
at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// Rotates the pairs (x[..., 2i], x[..., 2i+1]) of x (..., D) by the angles whose cosines and
// sines are cos_half/sin_half (broadcastable to (..., D/2)); computed in fp32, returned in x's dtype.
at::Tensor RotatePairs(const at::Tensor& x, const at::Tensor& cos_half, const at::Tensor& sin_half);

// Timesteps: no parameters; (N,) -> (N, num_channels).
class Timesteps : public nn::Module {
 public:
  Timesteps(int64_t num_channels, bool flip_sin_to_cos, double downscale_freq_shift)
      : Module("Timesteps"), channels_(num_channels), flip_(flip_sin_to_cos), shift_(downscale_freq_shift) {}
  std::vector<std::string> Signature() const override { return {"timesteps"}; }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  int64_t channels_;
  bool flip_;
  double shift_;
};

// TimestepEmbedding: linear_1, act (SiLU), linear_2.
class TimestepEmbedding : public nn::Module {
 public:
  TimestepEmbedding(int64_t in_channels, int64_t time_embed_dim);
  std::vector<std::string> Signature() const override { return {"sample", "condition"}; }
  nn::Outputs Forward(nn::Args& args) override;
};

// PixArtAlphaTextProjection: linear_1, act_1 (SiLU or GELU-tanh), linear_2.
class PixArtAlphaTextProjection : public nn::Module {
 public:
  enum class Activation { kSiLU, kGeluTanh };
  PixArtAlphaTextProjection(int64_t in_features, int64_t hidden_size, Activation act);
  std::vector<std::string> Signature() const override { return {"caption"}; }
  nn::Outputs Forward(nn::Args& args) override;
};

// CombinedTimestepTextProjEmbeddings (and, with guidance, CombinedTimestepGuidance...):
// time_proj, timestep_embedder, [guidance_embedder,] text_embedder; returns the sum.
class CombinedTimestepTextProjEmbeddings : public nn::Module {
 public:
  CombinedTimestepTextProjEmbeddings(int64_t embedding_dim, int64_t pooled_projection_dim, bool with_guidance);
  std::vector<std::string> Signature() const override;
  nn::Outputs Forward(nn::Args& args) override;

 private:
  bool guidance_;
};

// AdaLayerNormZero: silu, linear (dim -> 6 dim), norm (LayerNorm, no affine, eps 1e-6).
// Arguments (x, emb); outputs (x, gate_msa, shift_mlp, scale_mlp, gate_mlp).
class AdaLayerNormZero : public nn::Module {
 public:
  explicit AdaLayerNormZero(int64_t dim);
  std::vector<std::string> Signature() const override { return {"x", "timestep", "class_labels", "hidden_dtype", "emb"}; }
  nn::Outputs Forward(nn::Args& args) override;
};

// AdaLayerNormZeroSingle: silu, linear (dim -> 3 dim), norm. Outputs (x, gate_msa).
class AdaLayerNormZeroSingle : public nn::Module {
 public:
  explicit AdaLayerNormZeroSingle(int64_t dim);
  std::vector<std::string> Signature() const override { return {"x", "emb"}; }
  nn::Outputs Forward(nn::Args& args) override;
};

// AdaLayerNormContinuous (layer-norm variant): silu, linear (cond -> 2 dim), norm.
// x * (1 + scale) + shift with (scale, shift) = chunk(linear(silu(cond)), 2).
class AdaLayerNormContinuous : public nn::Module {
 public:
  AdaLayerNormContinuous(int64_t dim, int64_t conditioning_dim, bool elementwise_affine, double eps);
  std::vector<std::string> Signature() const override { return {"x", "conditioning_embedding"}; }
  nn::Outputs Forward(nn::Args& args) override;
};

// diffusers.models.normalization.FP32LayerNorm: torch.nn.LayerNorm computed in fp32 (input,
// weight and bias cast up), the result cast back to the input's dtype. Argument `inputs`;
// `weight`/`bias` only when elementwise_affine.
class FP32LayerNorm : public nn::Module {
 public:
  FP32LayerNorm(int64_t dim, double eps, bool elementwise_affine);
  std::vector<std::string> Signature() const override { return {"inputs"}; }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  int64_t dim_;
  double eps_;
  bool affine_;
};

// torch.nn.Identity (diffusers uses it for switched-off norms, e.g. Wan's `norm2` without
// cross_attn_norm). Argument `input`, returned unchanged.
class Identity : public nn::Module {
 public:
  Identity() : Module("Identity") {}
  std::vector<std::string> Signature() const override { return {"input"}; }
  nn::Outputs Forward(nn::Args& args) override { return {args.Get("input")}; }
};

// torch.nn.Conv3d without padding or dilation (diffusers' video patch embeddings): parameters
// `weight` (out, in, kt, kh, kw) and `bias` (out). Argument `input` (B, in, F, H, W).
class Conv3d : public nn::Module {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
         bool bias = true);
  std::vector<std::string> Signature() const override { return {"input"}; }
  nn::Outputs Forward(nn::Args& args) override;
  const std::vector<int64_t>& stride() const { return stride_; }

 private:
  std::vector<int64_t> stride_;
  bool has_bias_;
};

}  // namespace weft::models

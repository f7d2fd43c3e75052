#pragma once

// FluxTransformer2DModel (diffusers/models/transformers/transformer_flux.py) in C++: the same
// module tree, parameter names, argument names and math, so diffusers checkpoints, plans and
// graphs apply unchanged.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/nn/attention_site.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/module.h"

namespace weft::models {

// The model's config.json fields.
struct FluxConfig {
  int64_t patch_size = 1;
  int64_t in_channels = 64;
  int64_t out_channels = 0;  // 0: same as in_channels (diffusers' None)
  int64_t num_layers = 19;
  int64_t num_single_layers = 38;
  int64_t attention_head_dim = 128;
  int64_t num_attention_heads = 24;
  int64_t joint_attention_dim = 4096;
  int64_t pooled_projection_dim = 768;
  bool guidance_embeds = false;
  std::vector<int64_t> axes_dims_rope = {16, 56, 56};

  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }
  int64_t mlp_hidden_dim() const { return inner_dim() * 4; }
};

// FluxAttention with FluxAttnProcessor. Joint (double-stream) when built with
// added_kv_proj_dim: text q/k/v come first in the joint sequence. Arguments: hidden_states,
// encoder_hidden_states, attention_mask, image_rotary_emb = (cos, sin); outputs
// (hidden_states[, encoder_hidden_states]).
class FluxAttention : public nn::AttentionModule {
 public:
  FluxAttention(int64_t dim, int64_t heads, int64_t head_dim, bool joint, bool pre_only);
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "encoder_hidden_states", "attention_mask", "image_rotary_emb"};
  }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  // q or k, normalised and rotated: [norm `added_norm`(encoder_x); norm `norm`(x)] with the
  // (cos, sin) tables `rope`, written part by part into one buffer by nn::NormRotateInto, so
  // no RMSNorm, concatenation or rotation pass of its own runs. nullopt where that fast path
  // does not apply (a hook on a norm, not fp32 on CPU ...); the caller then calls the modules.
  std::optional<at::Tensor> NormRotateJoint(const char* norm, const at::Tensor& x, const char* added_norm,
                                            const at::Tensor* encoder_x, const std::vector<at::Tensor>& rope);

  bool joint_;
  bool pre_only_;
};

class FluxTransformerBlock : public nn::Module {
 public:
  FluxTransformerBlock(int64_t dim, int64_t heads, int64_t head_dim);
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "encoder_hidden_states", "temb", "image_rotary_emb", "joint_attention_kwargs"};
  }
  // Outputs (encoder_hidden_states, hidden_states), as diffusers.
  nn::Outputs Forward(nn::Args& args) override;
};

class FluxSingleTransformerBlock : public nn::Module {
 public:
  FluxSingleTransformerBlock(int64_t dim, int64_t heads, int64_t head_dim, int64_t mlp_hidden_dim);
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "encoder_hidden_states", "temb", "image_rotary_emb", "joint_attention_kwargs"};
  }
  nn::Outputs Forward(nn::Args& args) override;
};

// FluxPosEmbed: ids (S, n_axes) -> outputs (cos, sin), each (S, sum(axes_dim)).
class FluxPosEmbed : public nn::Module {
 public:
  FluxPosEmbed(double theta, std::vector<int64_t> axes_dim)
      : Module("FluxPosEmbed"), theta_(theta), axes_dim_(std::move(axes_dim)) {}
  std::vector<std::string> Signature() const override { return {"ids"}; }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  double theta_;
  std::vector<int64_t> axes_dim_;
};

// The whole model. Arguments: hidden_states (B, S_img, in_channels), encoder_hidden_states
// (B, S_txt, joint_attention_dim), pooled_projections (B, pooled), timestep (B,), img_ids
// (S_img, 3), txt_ids (S_txt, 3), guidance (B,) when guidance_embeds. Output 0: (B, S_img,
// patch^2 * out_channels).
class FluxTransformer2DModel : public nn::Module {
 public:
  explicit FluxTransformer2DModel(FluxConfig config);
  const FluxConfig& config() const { return config_; }
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "encoder_hidden_states", "pooled_projections", "timestep", "img_ids", "txt_ids",
            "guidance", "joint_attention_kwargs", "controlnet_block_samples", "controlnet_single_block_samples",
            "return_dict", "controlnet_blocks_repeat"};
  }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  FluxConfig config_;
};

// The config from a diffusers config.json text (as save_pretrained writes it; keys starting
// with "_" are ignored, absent keys keep diffusers' defaults, out_channels null means
// in_channels). Throws std::invalid_argument naming the key for malformed JSON, a wrong value
// type, an unknown key, or a `_class_name` other than FluxTransformer2DModel.
FluxConfig FluxConfigFromJson(const std::string& config_json);

// Named configs: "tiny" (tests: 2 double + 2 single blocks, 4 heads x 16), "small" (the
// benchmark model: 2 double + 4 single, hidden 512), "dev" (FLUX.1-dev), "schnell".
// Throws std::invalid_argument listing the known names.
FluxConfig FluxConfigByName(const std::string& name);

// `c` as diffusers' config.json would hold it (every key, in diffusers' order, null for an
// unset out_channels), without `_class_name`.
std::string FluxConfigToJson(const FluxConfig& c);

}  // namespace weft::models

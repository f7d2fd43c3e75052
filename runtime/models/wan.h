#pragma once

// WanTransformer3DModel (diffusers/models/transformers/transformer_wan.py) in C++: the same
// module tree, parameter names, argument names and math, so diffusers checkpoints, plans and
// graphs apply unchanged. Covers Wan 2.1 T2V, Wan 2.1 I2V (image context through
// `added_kv_proj_dim` / `image_dim`) and Wan 2.2 TI2V (per-token timesteps (B, S)).

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/nn/attention_site.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/module.h"

namespace weft::models {

// The model's config.json fields (diffusers' defaults). 0 stands for diffusers' null.
// Wan I2V's cross-attention takes the last 512 context tokens as text and those before as the
// image (diffusers' WanAttnProcessor: image_context_length = length - 512).
inline constexpr int64_t kWanTextContextLength = 512;

struct WanConfig {
  std::vector<int64_t> patch_size = {1, 2, 2};  // (t, h, w)
  int64_t num_attention_heads = 40;
  int64_t attention_head_dim = 128;
  int64_t in_channels = 16;
  int64_t out_channels = 16;  // 0: same as in_channels
  int64_t text_dim = 4096;
  int64_t freq_dim = 256;
  int64_t ffn_dim = 13824;
  int64_t num_layers = 40;
  bool cross_attn_norm = true;
  // diffusers stores it but WanAttention always has norm_q/norm_k (RMSNorm across heads).
  std::string qk_norm = "rms_norm_across_heads";
  double eps = 1e-6;
  int64_t image_dim = 0;          // I2V: width of the CLIP image tokens (1280)
  int64_t added_kv_proj_dim = 0;  // I2V: attn2.add_k_proj / add_v_proj input width
  int64_t rope_max_seq_len = 1024;
  int64_t pos_embed_seq_len = 0;  // FLF2V: image_embedder.pos_embed length

  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }
  int64_t out_dim() const { return out_channels > 0 ? out_channels : in_channels; }
};

// WanRotaryPosEmbed: 3-D RoPE. The head dim is split into (t, h, w) parts with h = w =
// 2 * (head_dim / 6) and t the rest; each part rotates by its axis' patch index. Argument
// hidden_states (B, C, F, H, W); outputs (freqs_cos, freqs_sin), each (1, F'*H'*W', 1,
// head_dim) fp32, frequencies repeated for interleaved pairs. No parameters (diffusers'
// tables are non-persistent buffers; here they are computed per call, the same numbers).
class WanRotaryPosEmbed : public nn::Module {
 public:
  WanRotaryPosEmbed(int64_t attention_head_dim, std::vector<int64_t> patch_size, int64_t max_seq_len,
                    double theta = 10000.0);
  std::vector<std::string> Signature() const override { return {"hidden_states"}; }
  nn::Outputs Forward(nn::Args& args) override;
  int64_t t_dim() const { return t_dim_; }
  int64_t h_dim() const { return h_dim_; }
  int64_t w_dim() const { return w_dim_; }

 private:
  std::vector<int64_t> patch_size_;
  int64_t max_seq_len_;
  double theta_;
  int64_t t_dim_;
  int64_t h_dim_;
  int64_t w_dim_;
};

// WanAttention with WanAttnProcessor. Children to_q, to_k, to_v, to_out = [Linear, Dropout],
// norm_q, norm_k (torch RMSNorm over all heads' width) and, with added_kv_proj_dim (I2V
// cross-attention), add_k_proj, add_v_proj, norm_added_k. Arguments hidden_states,
// encoder_hidden_states (cross-attention K/V source; nothing for self-attention),
// attention_mask (optional key-padding mask (B, S_kv)), rotary_emb = (cos, sin) as made by
// WanRotaryPosEmbed. Output 0: (B, S, dim). In I2V cross-attention the first
// S_enc - 512 context tokens are the image tokens (diffusers hard-codes the 512 text tokens);
// they are attended separately through add_k_proj/add_v_proj and the results summed.
class WanAttention : public nn::AttentionModule {
 public:
  WanAttention(int64_t dim, int64_t heads, int64_t head_dim, double eps, int64_t added_kv_proj_dim, bool cross);
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "encoder_hidden_states", "attention_mask", "rotary_emb"};
  }
  nn::Outputs Forward(nn::Args& args) override;
  bool is_cross_attention() const { return cross_; }

 private:
  bool cross_;
};

// WanImageEmbedding (I2V): norm1 (FP32LayerNorm), ff (FeedForward, exact GELU, inner =
// in_features), norm2; parameter pos_embed (1, pos_embed_seq_len, in_features) when set.
// Argument encoder_hidden_states_image (B, S_img, image_dim) -> (B, S_img, dim).
class WanImageEmbedding : public nn::Module {
 public:
  WanImageEmbedding(int64_t in_features, int64_t out_features, int64_t pos_embed_seq_len);
  std::vector<std::string> Signature() const override { return {"encoder_hidden_states_image"}; }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  bool has_pos_embed_;
};

// WanTimeTextImageEmbedding: timesteps_proj, time_embedder, act_fn, time_proj, text_embedder
// [, image_embedder]. Arguments timestep (N,), encoder_hidden_states (B, L, text_dim),
// encoder_hidden_states_image (optional), timestep_seq_len (optional 0-d integer tensor: N =
// B * timestep_seq_len per-token timesteps). Outputs (temb (B[, S], dim), timestep_proj (B[,
// S], 6 dim), encoder_hidden_states (B, L, dim), encoder_hidden_states_image or nothing).
class WanTimeTextImageEmbedding : public nn::Module {
 public:
  WanTimeTextImageEmbedding(int64_t dim, int64_t time_freq_dim, int64_t time_proj_dim, int64_t text_embed_dim,
                            int64_t image_embed_dim, int64_t pos_embed_seq_len);
  std::vector<std::string> Signature() const override {
    return {"timestep", "encoder_hidden_states", "encoder_hidden_states_image", "timestep_seq_len"};
  }
  nn::Outputs Forward(nn::Args& args) override;
};

// WanTransformerBlock: norm1, attn1 (self), attn2 (cross), norm2 (FP32LayerNorm with
// cross_attn_norm, else Identity), ffn (FeedForward, GELU-tanh), norm3; parameter
// scale_shift_table (1, 6, dim). Arguments hidden_states (B, S, dim), encoder_hidden_states
// (B, L, dim), temb (B, 6, dim), or (B, S, 6, dim) for per-token timesteps, rotary_emb =
// (cos, sin). Output 0: hidden_states.
class WanTransformerBlock : public nn::Module {
 public:
  WanTransformerBlock(int64_t dim, int64_t ffn_dim, int64_t heads, bool cross_attn_norm, double eps,
                      int64_t added_kv_proj_dim);
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "encoder_hidden_states", "temb", "rotary_emb"};
  }
  nn::Outputs Forward(nn::Args& args) override;
};

// The whole model: rope, patch_embedding (Conv3d, kernel = stride = patch_size),
// condition_embedder, blocks, norm_out, proj_out; parameter scale_shift_table (1, 2, dim).
// Arguments hidden_states (B, in_channels, F, H, W), timestep (B,) or (B, F'*H'*W') per
// token, encoder_hidden_states (B, L, text_dim), encoder_hidden_states_image (B, S_img,
// image_dim) for I2V configs; return_dict and attention_kwargs are accepted and ignored.
// Output 0: (B, out_channels, F, H, W) (the patched part of each dim).
class WanTransformer3DModel : public nn::Module {
 public:
  explicit WanTransformer3DModel(WanConfig config);
  const WanConfig& config() const { return config_; }
  std::vector<std::string> Signature() const override {
    return {"hidden_states", "timestep", "encoder_hidden_states", "encoder_hidden_states_image", "return_dict",
            "attention_kwargs"};
  }
  nn::Outputs Forward(nn::Args& args) override;

 private:
  WanConfig config_;
};

// The config from a diffusers config.json text (as save_pretrained writes it; keys starting
// with "_" and unknown keys are ignored, absent keys keep diffusers' defaults, null means
// unset). Throws std::invalid_argument naming the key for malformed JSON, a wrong value type,
// a patch_size without 3 entries, or a `_class_name` other than WanTransformer3DModel.
WanConfig WanConfigFromJson(const std::string& config_json);

// diffusers' WanTransformer3DModel._keep_in_fp32_modules: whether the parameter `param_fqn`
// (e.g. "blocks.3.norm2.weight") has a dotted component rope, time_embedder,
// scale_shift_table, norm1, norm2 or norm3, and so stays fp32 when diffusers loads the
// model in half precision (from_pretrained(torch_dtype=...)).
bool WanKeepsInFp32(const std::string& param_fqn);

// Casts every parameter of `model` to `dtype`, except those WanKeepsInFp32 names, which
// become fp32: the dtypes from_pretrained(torch_dtype=dtype) gives. Load the checkpoint in
// fp32 first (nn::LoadWeights(model, files, at::kFloat)), then call this.
void CastWanParameters(nn::Module& model, at::ScalarType dtype);

// Named configs: "tiny" (tests: 2 blocks, 4 heads x 16, ffn 128, text 32, 4 channels),
// "tiny-i2v" (tiny with image_dim 24 and added_kv_proj_dim 64), "small" (2 blocks, 8 heads
// x 64), "1.3b" (Wan2.1-T2V-1.3B), "14b" (Wan2.1-T2V-14B, also each Wan2.2-T2V-A14B
// expert), "i2v-14b" (Wan2.1-I2V-14B-480P/720P), "ti2v-5b" (Wan2.2-TI2V-5B). Throws
// std::invalid_argument listing the known names.
WanConfig WanConfigByName(const std::string& name);

// `c` as diffusers' config.json would hold it (every key, in diffusers' order, null where
// unset), without `_class_name`.
std::string WanConfigToJson(const WanConfig& c);

}  // namespace weft::models

#include "runtime/models/flux.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/models/diffusers_blocks.h"
#include "runtime/nn/fused.h"

namespace weft::models {

using nn::Args;
using nn::Call;
using nn::Outputs;
using nn::OutputTensor;

namespace {

// residual + gate * update, one pass (addcmul).
at::Tensor GatedAdd(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& update) {
  return at::addcmul(residual, gate.unsqueeze(1), update);
}

}  // namespace

FluxAttention::FluxAttention(int64_t dim, int64_t heads, int64_t head_dim, bool joint, bool pre_only)
    : AttentionModule("FluxAttention", heads, head_dim), joint_(joint), pre_only_(pre_only) {
  const int64_t inner = heads * head_dim;
  using Flavour = nn::RMSNorm::Flavour;
  AddChild("norm_q", std::make_unique<nn::RMSNorm>(head_dim, 1e-6, true, Flavour::kTorch));
  AddChild("norm_k", std::make_unique<nn::RMSNorm>(head_dim, 1e-6, true, Flavour::kTorch));
  AddChild("to_q", std::make_unique<nn::Linear>(dim, inner));
  AddChild("to_k", std::make_unique<nn::Linear>(dim, inner));
  AddChild("to_v", std::make_unique<nn::Linear>(dim, inner));
  if (!pre_only_) {
    auto& to_out = AddChild("to_out", std::make_unique<nn::ModuleList>());
    to_out.Append(std::make_unique<nn::Linear>(inner, dim));
    to_out.Append(std::make_unique<nn::Dropout>());
  }
  if (joint_) {
    AddChild("norm_added_q", std::make_unique<nn::RMSNorm>(head_dim, 1e-6, true, Flavour::kTorch));
    AddChild("norm_added_k", std::make_unique<nn::RMSNorm>(head_dim, 1e-6, true, Flavour::kTorch));
    AddChild("add_q_proj", std::make_unique<nn::Linear>(dim, inner));
    AddChild("add_k_proj", std::make_unique<nn::Linear>(dim, inner));
    AddChild("add_v_proj", std::make_unique<nn::Linear>(dim, inner));
    AddChild("to_add_out", std::make_unique<nn::Linear>(inner, dim));
  }
}

Outputs FluxAttention::Forward(Args& args) {
  const at::Tensor& hidden = args.Tensor("hidden_states");
  const int64_t d = head_dim();
  std::optional<at::Tensor> encoder = args.OptionalTensor("encoder_hidden_states");
  if (encoder && !joint_) throw std::invalid_argument("FluxAttention `" + fqn() + "` takes no encoder_hidden_states");
  // diffusers' order of calls (all projections, then the norms), so a graph dumped from this
  // model traces the calls in the order diffusers makes them.
  at::Tensor q = SplitHeads(Call(*Child("to_q"), hidden), d);
  at::Tensor k = SplitHeads(Call(*Child("to_k"), hidden), d);
  at::Tensor v = SplitHeads(Call(*Child("to_v"), hidden), d);
  at::Tensor eq, ek, ev;
  if (encoder) {
    eq = SplitHeads(Call(*Child("add_q_proj"), *encoder), d);
    ek = SplitHeads(Call(*Child("add_k_proj"), *encoder), d);
    ev = SplitHeads(Call(*Child("add_v_proj"), *encoder), d);
  }
  const bool rotate =
      args.Has("image_rotary_emb") && !std::holds_alternative<std::monostate>(args.Get("image_rotary_emb"));
  std::optional<at::Tensor> fused_q, fused_k;
  if (rotate) {
    const std::vector<at::Tensor>& rope = args.Tuple("image_rotary_emb");
    fused_q = NormRotateJoint("norm_q", q, "norm_added_q", encoder ? &eq : nullptr, rope);
    if (fused_q) fused_k = NormRotateJoint("norm_k", k, "norm_added_k", encoder ? &ek : nullptr, rope);
  }
  if (fused_q && fused_k) {
    q = *fused_q;
    k = *fused_k;
    if (encoder) v = at::cat({ev, v}, 1);
  } else {
    q = Call(*Child("norm_q"), q);
    k = Call(*Child("norm_k"), k);
    if (encoder) {
      q = at::cat({Call(*Child("norm_added_q"), eq), q}, 1);
      k = at::cat({Call(*Child("norm_added_k"), ek), k}, 1);
      v = at::cat({ev, v}, 1);
    }
    if (rotate) {
      const std::vector<at::Tensor>& rope = args.Tuple("image_rotary_emb");
      q = ApplyRotary(q, rope.at(0), rope.at(1));
      k = ApplyRotary(k, rope.at(0), rope.at(1));
    }
  }
  at::Tensor out = Attend(q, k, v, args.OptionalTensor("attention_mask")).flatten(2, 3).to(q.scalar_type());
  if (!encoder) return {out};
  const int64_t text = encoder->size(1);
  at::Tensor encoder_out = out.narrow(1, 0, text);
  at::Tensor image_out = out.narrow(1, text, out.size(1) - text);
  auto& to_out = static_cast<nn::ModuleList&>(*Child("to_out"));
  image_out = Call(to_out[1], Call(to_out[0], image_out.contiguous()));
  encoder_out = Call(*Child("to_add_out"), encoder_out.contiguous());
  return {image_out, encoder_out};
}

std::optional<at::Tensor> FluxAttention::NormRotateJoint(const char* norm, const at::Tensor& x, const char* added_norm,
                                                         const at::Tensor* encoder_x,
                                                         const std::vector<at::Tensor>& rope) {
  const int64_t text = encoder_x != nullptr ? encoder_x->size(1) : 0;
  if (rope.size() != 2 || rope[0].dim() != 2 || rope[0].size(0) != text + x.size(1)) return std::nullopt;
  at::Tensor out = at::empty({x.size(0), text + x.size(1), x.size(2), x.size(3)}, x.options());
  auto part = [&](const char* name, const at::Tensor& in, int64_t start) {
    at::Tensor rows = out.narrow(1, start, in.size(1));
    return nn::NormRotateInto(static_cast<nn::RMSNorm&>(*Child(name)), in, rope[0].narrow(0, start, in.size(1)),
                              rope[1].narrow(0, start, in.size(1)), rows);
  };
  if (encoder_x != nullptr && !part(added_norm, *encoder_x, 0)) return std::nullopt;
  if (!part(norm, x, text)) return std::nullopt;
  return out;
}

FluxTransformerBlock::FluxTransformerBlock(int64_t dim, int64_t heads, int64_t head_dim)
    : Module("FluxTransformerBlock") {
  AddChild("norm1", std::make_unique<AdaLayerNormZero>(dim));
  AddChild("norm1_context", std::make_unique<AdaLayerNormZero>(dim));
  AddChild("attn", std::make_unique<FluxAttention>(dim, heads, head_dim, /*joint=*/true, /*pre_only=*/false));
  AddChild("norm2", std::make_unique<nn::LayerNorm>(dim, 1e-6, false));
  AddChild("ff", std::make_unique<nn::FeedForward>(dim, dim, 4 * dim, /*approximate_tanh=*/true));
  AddChild("norm2_context", std::make_unique<nn::LayerNorm>(dim, 1e-6, false));
  AddChild("ff_context", std::make_unique<nn::FeedForward>(dim, dim, 4 * dim, /*approximate_tanh=*/true));
}

Outputs FluxTransformerBlock::Forward(Args& args) {
  at::Tensor hidden = args.Tensor("hidden_states");
  at::Tensor encoder = args.Tensor("encoder_hidden_states");
  const at::Tensor& temb = args.Tensor("temb");
  // (normed, gate_msa, shift_mlp, scale_mlp, gate_mlp)
  Outputs n = Call(*Child("norm1"), Args().Set("x", hidden).Set("emb", temb));
  Outputs c = Call(*Child("norm1_context"), Args().Set("x", encoder).Set("emb", temb));
  Args attn_args;
  attn_args.Set("hidden_states", n[0]).Set("encoder_hidden_states", c[0]);
  if (args.Has("image_rotary_emb")) attn_args.Set("image_rotary_emb", args.Get("image_rotary_emb"));
  Module& attn = *Child("attn");
  Outputs attn_out = Call(attn, std::move(attn_args));
  auto t = [&](const Outputs& o, size_t i, const Module& m) { return OutputTensor(o, i, m); };
  const Module& norm1 = *Child("norm1");
  const Module& norm1c = *Child("norm1_context");

  hidden = GatedAdd(hidden, t(n, 1, norm1), t(attn_out, 0, attn));
  at::Tensor normed = nn::ModulatedLayerNorm(static_cast<nn::LayerNorm&>(*Child("norm2")), hidden, t(n, 3, norm1), t(n, 2, norm1));
  hidden = GatedAdd(hidden, t(n, 4, norm1), Call(*Child("ff"), normed));

  encoder = GatedAdd(encoder, t(c, 1, norm1c), t(attn_out, 1, attn));
  at::Tensor normed_c =
      nn::ModulatedLayerNorm(static_cast<nn::LayerNorm&>(*Child("norm2_context")), encoder, t(c, 3, norm1c), t(c, 2, norm1c));
  encoder = GatedAdd(encoder, t(c, 4, norm1c), Call(*Child("ff_context"), normed_c));
  if (encoder.scalar_type() == at::kHalf) encoder = encoder.clip(-65504, 65504);
  return {encoder, hidden};
}

FluxSingleTransformerBlock::FluxSingleTransformerBlock(int64_t dim, int64_t heads, int64_t head_dim,
                                                       int64_t mlp_hidden_dim)
    : Module("FluxSingleTransformerBlock") {
  AddChild("norm", std::make_unique<AdaLayerNormZeroSingle>(dim));
  AddChild("proj_mlp", std::make_unique<nn::Linear>(dim, mlp_hidden_dim));
  AddChild("act_mlp", std::make_unique<nn::GELUActivation>(/*approximate_tanh=*/true));
  AddChild("proj_out", std::make_unique<nn::Linear>(dim + mlp_hidden_dim, dim)).SetPackedRowBlocks({dim, mlp_hidden_dim});
  AddChild("attn", std::make_unique<FluxAttention>(dim, heads, head_dim, /*joint=*/false, /*pre_only=*/true));
}

Outputs FluxSingleTransformerBlock::Forward(Args& args) {
  const at::Tensor& encoder = args.Tensor("encoder_hidden_states");
  const int64_t text = encoder.size(1);
  // The previous single block's outputs are halves of one tensor: no copy to join them again.
  at::Tensor hidden = nn::CatOrView({encoder, args.Tensor("hidden_states")}, 1);
  const at::Tensor residual = hidden;
  Outputs n = Call(*Child("norm"), Args().Set("x", hidden).Set("emb", args.Tensor("temb")));
  const at::Tensor& normed = OutputTensor(n, 0, *Child("norm"));
  at::Tensor mlp = nn::LinearGelu(static_cast<nn::Linear&>(*Child("proj_mlp")),
                                  static_cast<nn::GELUActivation&>(*Child("act_mlp")), normed);
  Args attn_args;
  attn_args.Set("hidden_states", normed);
  if (args.Has("image_rotary_emb")) attn_args.Set("image_rotary_emb", args.Get("image_rotary_emb"));
  Module& attn = *Child("attn");
  at::Tensor attn_out = OutputTensor(Call(attn, std::move(attn_args)), 0, attn);
  const at::Tensor projected = nn::LinearOfConcat(static_cast<nn::Linear&>(*Child("proj_out")), {attn_out, mlp});
  hidden = GatedAdd(residual, OutputTensor(n, 1, *Child("norm")), projected);
  if (hidden.scalar_type() == at::kHalf) hidden = hidden.clip(-65504, 65504);
  return {hidden.narrow(1, 0, text), hidden.narrow(1, text, hidden.size(1) - text)};
}

Outputs FluxPosEmbed::Forward(Args& args) {
  const at::Tensor& ids = args.Tensor("ids");
  if (ids.dim() != 2 || ids.size(1) != static_cast<int64_t>(axes_dim_.size())) {
    throw std::invalid_argument("FluxPosEmbed: ids must be (S, " + std::to_string(axes_dim_.size()) + "), got " +
                                c10::str(ids.sizes()));
  }
  at::Tensor positions = ids.to(at::kFloat);
  std::vector<at::Tensor> cos, sin;
  for (size_t axis = 0; axis < axes_dim_.size(); ++axis) {
    auto [c, s] = RotaryTables(axes_dim_[axis], positions.select(1, static_cast<int64_t>(axis)), theta_);
    cos.push_back(c);
    sin.push_back(s);
  }
  return {at::cat(cos, -1), at::cat(sin, -1)};
}

FluxTransformer2DModel::FluxTransformer2DModel(FluxConfig config)
    : Module("FluxTransformer2DModel"), config_(std::move(config)) {
  const FluxConfig& c = config_;
  const int64_t inner = c.inner_dim();
  int64_t rope_sum = 0;
  for (int64_t d : c.axes_dims_rope) rope_sum += d;
  if (rope_sum != c.attention_head_dim) {
    throw std::invalid_argument("FluxConfig: axes_dims_rope sum to " + std::to_string(rope_sum) +
                                " but attention_head_dim is " + std::to_string(c.attention_head_dim));
  }
  AddChild("pos_embed", std::make_unique<FluxPosEmbed>(10000.0, c.axes_dims_rope));
  AddChild("time_text_embed",
           std::make_unique<CombinedTimestepTextProjEmbeddings>(inner, c.pooled_projection_dim, c.guidance_embeds));
  AddChild("context_embedder", std::make_unique<nn::Linear>(c.joint_attention_dim, inner));
  AddChild("x_embedder", std::make_unique<nn::Linear>(c.in_channels, inner));
  auto& blocks = AddChild("transformer_blocks", std::make_unique<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.Append(std::make_unique<FluxTransformerBlock>(inner, c.num_attention_heads, c.attention_head_dim));
  }
  auto& singles = AddChild("single_transformer_blocks", std::make_unique<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_single_layers; ++i) {
    singles.Append(std::make_unique<FluxSingleTransformerBlock>(inner, c.num_attention_heads, c.attention_head_dim,
                                                                c.mlp_hidden_dim()));
  }
  AddChild("norm_out", std::make_unique<AdaLayerNormContinuous>(inner, inner, /*elementwise_affine=*/false, 1e-6));
  const int64_t out_channels = c.out_channels > 0 ? c.out_channels : c.in_channels;
  AddChild("proj_out", std::make_unique<nn::Linear>(inner, c.patch_size * c.patch_size * out_channels));
}

Outputs FluxTransformer2DModel::Forward(Args& args) {
  at::Tensor hidden = Call(*Child("x_embedder"), args.Tensor("hidden_states"));
  at::Tensor timestep = args.Tensor("timestep").to(hidden.scalar_type()) * 1000;
  Args embed_args;
  embed_args.Set("timestep", timestep).Set("pooled_projection", args.Tensor("pooled_projections"));
  if (config_.guidance_embeds) {
    std::optional<at::Tensor> guidance = args.OptionalTensor("guidance");
    if (!guidance) throw std::invalid_argument("FluxTransformer2DModel: this config has guidance_embeds; pass `guidance`");
    embed_args.Set("guidance", guidance->to(hidden.scalar_type()) * 1000);
  }
  at::Tensor temb = OutputTensor(Call(*Child("time_text_embed"), std::move(embed_args)), 0, *Child("time_text_embed"));
  at::Tensor encoder = Call(*Child("context_embedder"), args.Tensor("encoder_hidden_states"));
  at::Tensor txt_ids = args.Tensor("txt_ids");
  at::Tensor img_ids = args.Tensor("img_ids");
  if (txt_ids.dim() == 3) txt_ids = txt_ids[0];  // deprecated batched ids, as diffusers accepts
  if (img_ids.dim() == 3) img_ids = img_ids[0];
  Module& pos_embed = *Child("pos_embed");
  Outputs tables = Call(pos_embed, nn::Args().Set("ids", at::cat({txt_ids, img_ids}, 0)));
  nn::Value rope = std::vector<at::Tensor>{OutputTensor(tables, 0, pos_embed), OutputTensor(tables, 1, pos_embed)};

  auto run_blocks = [&](const std::string& list_name) {
    auto& blocks = static_cast<nn::ModuleList&>(*Child(list_name));
    for (size_t i = 0; i < blocks.size(); ++i) {
      Outputs out = Call(blocks[i], Args()
                                        .Set("hidden_states", hidden)
                                        .Set("encoder_hidden_states", encoder)
                                        .Set("temb", temb)
                                        .Set("image_rotary_emb", rope)
                                        .Set("joint_attention_kwargs", nn::Value()));
      encoder = OutputTensor(out, 0, blocks[i]);
      hidden = OutputTensor(out, 1, blocks[i]);
    }
  };
  run_blocks("transformer_blocks");
  run_blocks("single_transformer_blocks");
  Module& norm_out = *Child("norm_out");
  hidden = OutputTensor(Call(norm_out, Args().Set("x", hidden).Set("conditioning_embedding", temb)), 0, norm_out);
  return {Call(*Child("proj_out"), hidden)};
}

FluxConfig FluxConfigFromJson(const std::string& config_json) {
  const nlohmann::json json = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) throw std::invalid_argument("Flux config.json: not a JSON object");
  FluxConfig c;
  for (auto it = json.begin(); it != json.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    // Every size has a bound, far above any published config, so a bad config is an error and
    // not a model of a billion layers that grows until the machine runs out of memory.
    auto integer = [&](int64_t& field, bool nullable, int64_t lo, int64_t hi) {
      if (v.is_null() && nullable) {
        field = 0;
      } else if (v.is_number_integer()) {
        const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) : true;
        field = fits ? v.get<int64_t>() : hi + 1;
        if (!fits || field < lo || field > hi) {
          throw std::invalid_argument("Flux config.json: `" + key + "` is " + v.dump() + "; weft accepts " +
                                      std::to_string(lo) + ".." + std::to_string(hi) + (nullable ? " or null" : ""));
        }
      } else {
        throw std::invalid_argument("Flux config.json: `" + key + "` must be an integer" + (nullable ? " or null" : ""));
      }
    };
    if (key == "_class_name") {
      if (v != "FluxTransformer2DModel") {
        throw std::invalid_argument("Flux config.json: `_class_name` is " + v.dump() + ", not FluxTransformer2DModel");
      }
    } else if (!key.empty() && key[0] == '_') {
      continue;
    } else if (key == "patch_size") {
      integer(c.patch_size, false, 1, 64);
    } else if (key == "in_channels") {
      integer(c.in_channels, false, 1, 65536);
    } else if (key == "out_channels") {
      integer(c.out_channels, true, 0, 65536);
    } else if (key == "num_layers") {
      integer(c.num_layers, false, 0, 1000);
    } else if (key == "num_single_layers") {
      integer(c.num_single_layers, false, 0, 1000);
    } else if (key == "attention_head_dim") {
      integer(c.attention_head_dim, false, 1, 4096);
    } else if (key == "num_attention_heads") {
      integer(c.num_attention_heads, false, 1, 1024);
    } else if (key == "joint_attention_dim") {
      integer(c.joint_attention_dim, false, 1, 65536);
    } else if (key == "pooled_projection_dim") {
      integer(c.pooled_projection_dim, false, 1, 65536);
    } else if (key == "guidance_embeds") {
      if (!v.is_boolean()) throw std::invalid_argument("Flux config.json: `guidance_embeds` must be true or false");
      c.guidance_embeds = v.get<bool>();
    } else if (key == "axes_dims_rope") {
      if (!v.is_array()) throw std::invalid_argument("Flux config.json: `axes_dims_rope` must be a list of integers");
      c.axes_dims_rope.clear();
      if (v.size() > 8) throw std::invalid_argument("Flux config.json: `axes_dims_rope` has " + std::to_string(v.size()) +
                                                    " entries; weft accepts at most 8");
      for (const nlohmann::json& d : v) {
        if (!d.is_number_integer()) throw std::invalid_argument("Flux config.json: `axes_dims_rope` must be a list of integers");
        if (d.get<int64_t>() < 0 || d.get<int64_t>() > 4096 || (d.is_number_unsigned() && d.get<uint64_t>() > 4096)) {
          throw std::invalid_argument("Flux config.json: `axes_dims_rope` has entry " + d.dump() + "; weft accepts 0..4096");
        }
        c.axes_dims_rope.push_back(d.get<int64_t>());
      }
    } else {
      throw std::invalid_argument("Flux config.json: unknown key `" + key + "` for FluxTransformer2DModel");
    }
  }
  return c;
}

std::string FluxConfigToJson(const FluxConfig& c) {
  nlohmann::ordered_json j;  // diffusers' __init__ order, every key
  j["patch_size"] = c.patch_size;
  j["in_channels"] = c.in_channels;
  j["out_channels"] = c.out_channels > 0 ? nlohmann::ordered_json(c.out_channels) : nlohmann::ordered_json();
  j["num_layers"] = c.num_layers;
  j["num_single_layers"] = c.num_single_layers;
  j["attention_head_dim"] = c.attention_head_dim;
  j["num_attention_heads"] = c.num_attention_heads;
  j["joint_attention_dim"] = c.joint_attention_dim;
  j["pooled_projection_dim"] = c.pooled_projection_dim;
  j["guidance_embeds"] = c.guidance_embeds;
  j["axes_dims_rope"] = c.axes_dims_rope;
  return j.dump();
}

FluxConfig FluxConfigByName(const std::string& name) {
  FluxConfig c;
  if (name == "dev" || name == "schnell") {
    c.guidance_embeds = name == "dev";
    return c;
  }
  if (name == "tiny") {
    c.in_channels = 16;
    c.num_layers = 2;
    c.num_single_layers = 2;
    c.attention_head_dim = 16;
    c.num_attention_heads = 4;
    c.joint_attention_dim = 32;
    c.pooled_projection_dim = 24;
    c.guidance_embeds = true;
    c.axes_dims_rope = {4, 6, 6};
    return c;
  }
  if (name == "small") {
    c.num_layers = 2;
    c.num_single_layers = 4;
    c.attention_head_dim = 64;
    c.num_attention_heads = 8;
    c.joint_attention_dim = 256;
    c.pooled_projection_dim = 128;
    c.guidance_embeds = true;
    c.axes_dims_rope = {8, 28, 28};
    return c;
  }
  throw std::invalid_argument("unknown Flux config `" + name + "` (known: tiny, small, dev, schnell)");
}

}  // namespace weft::models

#include "runtime/models/wan.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <utility>

#include "runtime/models/diffusers_blocks.h"

namespace weft::models {

using nn::Args;
using nn::Call;
using nn::Outputs;
using nn::OutputTensor;

namespace {

// diffusers' I2V processor assumes exactly this many text tokens after the image tokens.

// Wan's real-valued RoPE on x (B, S, H, D) with tables (1, S, 1, D) whose entries repeat for
// each interleaved (even, odd) pair: even' = e cos - o sin, odd' = e sin + o cos. Computed in
// the promoted dtype (fp32 tables), cast back to x's dtype, as diffusers.
at::Tensor ApplyWanRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  // diffusers' Wan reads the pair's cosine at the even and its sine at the odd position.
  return RotatePairs(x, cos.slice(-1, 0, cos.size(-1), 2), sin.slice(-1, 1, sin.size(-1), 2));
}

bool IsSet(const Args& args, const std::string& name) {
  return args.Has(name) && !std::holds_alternative<std::monostate>(args.Get(name));
}

// The (shift, scale, gate, ...) rows of `table` (1, n, D) plus `temb`: temb (B, n, D) gives
// n tensors (B, 1, D); temb (B, S, n, D) (per-token timesteps) gives n tensors (B, S, D).
std::vector<at::Tensor> Modulation(const at::Tensor& table, const at::Tensor& temb, int64_t n) {
  if (temb.dim() == 4) {
    std::vector<at::Tensor> rows = (table.unsqueeze(0) + temb.to(at::kFloat)).chunk(n, 2);
    for (at::Tensor& row : rows) row = row.squeeze(2);
    return rows;
  }
  return (table + temb.to(at::kFloat)).chunk(n, 1);
}

}  // namespace

WanRotaryPosEmbed::WanRotaryPosEmbed(int64_t attention_head_dim, std::vector<int64_t> patch_size,
                                     int64_t max_seq_len, double theta)
    : Module("WanRotaryPosEmbed"), patch_size_(std::move(patch_size)), max_seq_len_(max_seq_len), theta_(theta) {
  if (patch_size_.size() != 3) throw std::invalid_argument("WanRotaryPosEmbed: patch_size needs 3 entries");
  h_dim_ = w_dim_ = 2 * (attention_head_dim / 6);
  t_dim_ = attention_head_dim - h_dim_ - w_dim_;
  // diffusers precomputes (max_seq_len, head_dim) tables; Forward computes only the rows it uses.
  DeclareBuffer("freqs_cos", {max_seq_len_, attention_head_dim});
  DeclareBuffer("freqs_sin", {max_seq_len_, attention_head_dim});
}

Outputs WanRotaryPosEmbed::Forward(Args& args) {
  const at::Tensor& x = args.Tensor("hidden_states");
  if (x.dim() != 5) {
    throw std::invalid_argument("WanRotaryPosEmbed `" + fqn() + "`: hidden_states must be (B, C, F, H, W), got " +
                                c10::str(x.sizes()));
  }
  const int64_t f = x.size(2) / patch_size_[0];
  const int64_t h = x.size(3) / patch_size_[1];
  const int64_t w = x.size(4) / patch_size_[2];
  for (int64_t n : {f, h, w}) {
    if (n > max_seq_len_) {
      throw std::invalid_argument("WanRotaryPosEmbed `" + fqn() + "`: " + std::to_string(n) +
                                  " patches along an axis exceed rope_max_seq_len " + std::to_string(max_seq_len_));
    }
  }
  // Each row depends only on its position, so tables for positions [0, n) equal the first n
  // rows of diffusers' precomputed [0, max_seq_len) tables.
  auto positions = [&](int64_t n) { return at::arange(n, at::TensorOptions().dtype(at::kLong).device(x.device())); };
  auto [cos_t, sin_t] = RotaryTables(t_dim_, positions(f), theta_);
  auto [cos_h, sin_h] = RotaryTables(h_dim_, positions(h), theta_);
  auto [cos_w, sin_w] = RotaryTables(w_dim_, positions(w), theta_);
  auto grid = [&](const at::Tensor& t, const at::Tensor& hh, const at::Tensor& ww) {
    at::Tensor table = at::cat({t.view({f, 1, 1, -1}).expand({f, h, w, -1}),
                                hh.view({1, h, 1, -1}).expand({f, h, w, -1}),
                                ww.view({1, 1, w, -1}).expand({f, h, w, -1})},
                               -1);
    return table.reshape({1, f * h * w, 1, -1});
  };
  return {grid(cos_t, cos_h, cos_w).to(buffer_dtype()), grid(sin_t, sin_h, sin_w).to(buffer_dtype())};
}

WanAttention::WanAttention(int64_t dim, int64_t heads, int64_t head_dim, double eps, int64_t added_kv_proj_dim,
                           bool cross)
    : AttentionModule("WanAttention", heads, head_dim), cross_(cross) {
  const int64_t inner = heads * head_dim;
  using Flavour = nn::RMSNorm::Flavour;
  AddChild("to_q", std::make_unique<nn::Linear>(dim, inner));
  AddChild("to_k", std::make_unique<nn::Linear>(dim, inner));
  AddChild("to_v", std::make_unique<nn::Linear>(dim, inner));
  auto& to_out = AddChild("to_out", std::make_unique<nn::ModuleList>());
  to_out.Append(std::make_unique<nn::Linear>(inner, dim));
  to_out.Append(std::make_unique<nn::Dropout>());
  AddChild("norm_q", std::make_unique<nn::RMSNorm>(inner, eps, true, Flavour::kTorch));
  AddChild("norm_k", std::make_unique<nn::RMSNorm>(inner, eps, true, Flavour::kTorch));
  if (added_kv_proj_dim > 0) {
    AddChild("add_k_proj", std::make_unique<nn::Linear>(added_kv_proj_dim, inner));
    AddChild("add_v_proj", std::make_unique<nn::Linear>(added_kv_proj_dim, inner));
    AddChild("norm_added_k", std::make_unique<nn::RMSNorm>(inner, eps, true, Flavour::kTorch));
  }
}

Outputs WanAttention::Forward(Args& args) {
  const at::Tensor& hidden = args.Tensor("hidden_states");
  std::optional<at::Tensor> encoder = args.OptionalTensor("encoder_hidden_states");
  std::optional<at::Tensor> image;
  if (Child("add_k_proj") != nullptr) {
    if (!encoder) throw std::invalid_argument("WanAttention `" + fqn() + "` (I2V) needs encoder_hidden_states");
    const int64_t image_length = encoder->size(1) - kWanTextContextLength;
    if (image_length < 0) {
      throw std::invalid_argument("WanAttention `" + fqn() + "` (I2V): encoder_hidden_states has " +
                                  std::to_string(encoder->size(1)) + " tokens; expected image tokens followed by " +
                                  std::to_string(kWanTextContextLength) + " text tokens");
    }
    image = encoder->narrow(1, 0, image_length);
    encoder = encoder->narrow(1, image_length, kWanTextContextLength);
  }
  const at::Tensor& context = encoder ? *encoder : hidden;
  const int64_t d = head_dim();
  // diffusers' order of calls (projections, then norms; image attention before text), so a
  // graph dumped from this model traces the calls in the order diffusers makes them.
  at::Tensor q = Call(*Child("to_q"), hidden);
  at::Tensor k = Call(*Child("to_k"), context);
  at::Tensor v = SplitHeads(Call(*Child("to_v"), context), d);
  q = SplitHeads(Call(*Child("norm_q"), q), d);
  k = SplitHeads(Call(*Child("norm_k"), k), d);
  if (IsSet(args, "rotary_emb")) {
    const std::vector<at::Tensor>& rope = args.Tuple("rotary_emb");
    q = ApplyWanRotary(q, rope.at(0), rope.at(1));
    k = ApplyWanRotary(k, rope.at(0), rope.at(1));
  }
  std::optional<at::Tensor> out_img;
  if (image && image->size(1) > 0) {
    at::Tensor k_img = Call(*Child("add_k_proj"), *image);
    at::Tensor v_img = SplitHeads(Call(*Child("add_v_proj"), *image), d);
    k_img = SplitHeads(Call(*Child("norm_added_k"), k_img), d);
    out_img = Attend(q, k_img, v_img).flatten(2, 3).to(q.scalar_type());
  }
  at::Tensor out = Attend(q, k, v, args.OptionalTensor("attention_mask")).flatten(2, 3).to(q.scalar_type());
  if (out_img) out = out + *out_img;
  auto& to_out = static_cast<nn::ModuleList&>(*Child("to_out"));
  return {Call(to_out[1], Call(to_out[0], out))};
}

WanImageEmbedding::WanImageEmbedding(int64_t in_features, int64_t out_features, int64_t pos_embed_seq_len)
    : Module("WanImageEmbedding"), has_pos_embed_(pos_embed_seq_len > 0) {
  AddChild("norm1", std::make_unique<FP32LayerNorm>(in_features, 1e-5, true));
  AddChild("ff", std::make_unique<nn::FeedForward>(in_features, out_features, in_features, /*approximate_tanh=*/false));
  AddChild("norm2", std::make_unique<FP32LayerNorm>(out_features, 1e-5, true));
  if (has_pos_embed_) AddParameter("pos_embed", {1, pos_embed_seq_len, in_features});
}

Outputs WanImageEmbedding::Forward(Args& args) {
  at::Tensor x = args.Tensor("encoder_hidden_states_image");
  if (has_pos_embed_) {
    // FLF2V: the two images' tokens are laid end to end before the learned positions.
    x = x.reshape({-1, 2 * x.size(1), x.size(2)}) + Parameter("pos_embed");
  }
  x = Call(*Child("norm1"), x);
  x = Call(*Child("ff"), x);
  return {Call(*Child("norm2"), x)};
}

WanTimeTextImageEmbedding::WanTimeTextImageEmbedding(int64_t dim, int64_t time_freq_dim, int64_t time_proj_dim,
                                                     int64_t text_embed_dim, int64_t image_embed_dim,
                                                     int64_t pos_embed_seq_len)
    : Module("WanTimeTextImageEmbedding") {
  AddChild("timesteps_proj", std::make_unique<Timesteps>(time_freq_dim, /*flip_sin_to_cos=*/true, /*shift=*/0.0));
  AddChild("time_embedder", std::make_unique<TimestepEmbedding>(time_freq_dim, dim));
  AddChild("act_fn", std::make_unique<nn::SiLU>());
  AddChild("time_proj", std::make_unique<nn::Linear>(dim, time_proj_dim));
  AddChild("text_embedder", std::make_unique<PixArtAlphaTextProjection>(text_embed_dim, dim,
                                                                        PixArtAlphaTextProjection::Activation::kGeluTanh));
  if (image_embed_dim > 0) {
    AddChild("image_embedder", std::make_unique<WanImageEmbedding>(image_embed_dim, dim, pos_embed_seq_len));
  }
}

Outputs WanTimeTextImageEmbedding::Forward(Args& args) {
  const at::Tensor& text = args.Tensor("encoder_hidden_states");
  at::Tensor table = Call(*Child("timesteps_proj"), args.Tensor("timestep"));
  if (std::optional<at::Tensor> seq_len = args.OptionalTensor("timestep_seq_len")) {
    table = table.unflatten(0, {-1, seq_len->item<int64_t>()});
  }
  Module& time_embedder = *Child("time_embedder");
  const at::Tensor& embedder_weight = time_embedder.Child("linear_1")->Parameter("weight");
  if (embedder_weight.scalar_type() != at::kChar) table = table.to(embedder_weight.scalar_type());
  at::Tensor temb = OutputTensor(Call(time_embedder, Args().Set("sample", table)), 0, time_embedder)
                        .to(text.scalar_type());
  at::Tensor timestep_proj = Call(*Child("time_proj"), Call(*Child("act_fn"), temb));
  at::Tensor encoder = Call(*Child("text_embedder"), text);
  nn::Value image;
  if (std::optional<at::Tensor> image_in = args.OptionalTensor("encoder_hidden_states_image")) {
    Module* image_embedder = Child("image_embedder");
    if (image_embedder == nullptr) {
      throw std::invalid_argument("WanTimeTextImageEmbedding `" + fqn() +
                                  "`: encoder_hidden_states_image given but the config has no image_dim");
    }
    image = OutputTensor(Call(*image_embedder, Args().Set("encoder_hidden_states_image", *image_in)), 0,
                         *image_embedder);
  }
  return {temb, timestep_proj, encoder, image};
}

WanTransformerBlock::WanTransformerBlock(int64_t dim, int64_t ffn_dim, int64_t heads, bool cross_attn_norm,
                                         double eps, int64_t added_kv_proj_dim)
    : Module("WanTransformerBlock") {
  const int64_t head_dim = dim / heads;
  AddChild("norm1", std::make_unique<FP32LayerNorm>(dim, eps, false));
  AddChild("attn1", std::make_unique<WanAttention>(dim, heads, head_dim, eps, 0, /*cross=*/false));
  AddChild("attn2", std::make_unique<WanAttention>(dim, heads, head_dim, eps, added_kv_proj_dim, /*cross=*/true));
  if (cross_attn_norm) {
    AddChild("norm2", std::make_unique<FP32LayerNorm>(dim, eps, true));
  } else {
    AddChild("norm2", std::make_unique<Identity>());
  }
  AddChild("ffn", std::make_unique<nn::FeedForward>(dim, dim, ffn_dim, /*approximate_tanh=*/true));
  AddChild("norm3", std::make_unique<FP32LayerNorm>(dim, eps, false));
  AddParameter("scale_shift_table", {1, 6, dim});
}

Outputs WanTransformerBlock::Forward(Args& args) {
  at::Tensor hidden = args.Tensor("hidden_states");
  const at::ScalarType dtype = hidden.scalar_type();
  // shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa
  std::vector<at::Tensor> m = Modulation(Parameter("scale_shift_table"), args.Tensor("temb"), 6);

  at::Tensor normed = (Call(*Child("norm1"), hidden.to(at::kFloat)) * (1 + m[1]) + m[0]).to(dtype);
  Module& attn1 = *Child("attn1");
  Outputs self_out = Call(attn1, Args()
                                     .Set("hidden_states", normed)
                                     .Set("encoder_hidden_states", std::monostate())
                                     .Set("attention_mask", std::monostate())
                                     .Set("rotary_emb", args.Has("rotary_emb") ? args.Get("rotary_emb") : nn::Value()));
  hidden = (hidden.to(at::kFloat) + OutputTensor(self_out, 0, attn1) * m[2]).to(dtype);

  normed = Call(*Child("norm2"), hidden.to(at::kFloat)).to(dtype);
  Module& attn2 = *Child("attn2");
  Outputs cross_out = Call(attn2, Args()
                                      .Set("hidden_states", normed)
                                      .Set("encoder_hidden_states", args.Tensor("encoder_hidden_states"))
                                      .Set("attention_mask", std::monostate())
                                      .Set("rotary_emb", std::monostate()));
  hidden = hidden + OutputTensor(cross_out, 0, attn2);

  normed = (Call(*Child("norm3"), hidden.to(at::kFloat)) * (1 + m[4]) + m[3]).to(dtype);
  at::Tensor ff = Call(*Child("ffn"), normed);
  hidden = (hidden.to(at::kFloat) + ff.to(at::kFloat) * m[5]).to(dtype);
  return {hidden};
}

WanTransformer3DModel::WanTransformer3DModel(WanConfig config)
    : Module("WanTransformer3DModel"), config_(std::move(config)) {
  const WanConfig& c = config_;
  if (c.patch_size.size() != 3) throw std::invalid_argument("WanConfig: patch_size needs 3 entries (t, h, w)");
  const int64_t inner = c.inner_dim();
  AddChild("rope", std::make_unique<WanRotaryPosEmbed>(c.attention_head_dim, c.patch_size, c.rope_max_seq_len));
  AddChild("patch_embedding", std::make_unique<Conv3d>(c.in_channels, inner, c.patch_size, c.patch_size));
  AddChild("condition_embedder", std::make_unique<WanTimeTextImageEmbedding>(inner, c.freq_dim, 6 * inner, c.text_dim,
                                                                             c.image_dim, c.pos_embed_seq_len));
  auto& blocks = AddChild("blocks", std::make_unique<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.Append(std::make_unique<WanTransformerBlock>(inner, c.ffn_dim, c.num_attention_heads, c.cross_attn_norm,
                                                        c.eps, c.added_kv_proj_dim));
  }
  AddChild("norm_out", std::make_unique<FP32LayerNorm>(inner, c.eps, false));
  AddChild("proj_out", std::make_unique<nn::Linear>(inner, c.out_dim() * c.patch_size[0] * c.patch_size[1] *
                                                               c.patch_size[2]));
  AddParameter("scale_shift_table", {1, 2, inner});
}

Outputs WanTransformer3DModel::Forward(Args& args) {
  const at::Tensor& input = args.Tensor("hidden_states");
  if (input.dim() != 5 || input.size(1) != config_.in_channels) {
    throw std::invalid_argument("WanTransformer3DModel: hidden_states must be (B, " +
                                std::to_string(config_.in_channels) + ", F, H, W), got " + c10::str(input.sizes()));
  }
  const std::vector<int64_t>& p = config_.patch_size;
  const int64_t batch = input.size(0);
  const int64_t frames = input.size(2) / p[0];
  const int64_t height = input.size(3) / p[1];
  const int64_t width = input.size(4) / p[2];

  Module& rope = *Child("rope");
  Outputs tables = Call(rope, Args().Set("hidden_states", input));
  nn::Value rotary = std::vector<at::Tensor>{OutputTensor(tables, 0, rope), OutputTensor(tables, 1, rope)};

  at::Tensor hidden = Call(*Child("patch_embedding"), input).flatten(2).transpose(1, 2).contiguous();

  at::Tensor timestep = args.Tensor("timestep");
  nn::Value timestep_seq_len;
  if (timestep.dim() == 2) {
    // Per-token timesteps (Wan 2.2 TI2V): (B, S) -> B*S embeddings, regrouped per batch.
    timestep_seq_len = at::scalar_tensor(timestep.size(1), at::TensorOptions().dtype(at::kLong));
    timestep = timestep.flatten();
  } else if (timestep.dim() != 1) {
    throw std::invalid_argument("WanTransformer3DModel: timestep must be (B,) or (B, S), got " +
                                c10::str(timestep.sizes()));
  }
  Module& embedder = *Child("condition_embedder");
  Args embed_args;
  embed_args.Set("timestep", timestep)
      .Set("encoder_hidden_states", args.Tensor("encoder_hidden_states"))
      .Set("encoder_hidden_states_image", args.Has("encoder_hidden_states_image")
                                              ? args.Get("encoder_hidden_states_image")
                                              : nn::Value())
      .Set("timestep_seq_len", timestep_seq_len);
  Outputs cond = Call(embedder, std::move(embed_args));
  const at::Tensor& temb = OutputTensor(cond, 0, embedder);
  at::Tensor timestep_proj = OutputTensor(cond, 1, embedder);
  at::Tensor encoder = OutputTensor(cond, 2, embedder);
  // (B, 6 dim) -> (B, 6, dim); per token (B, S, 6 dim) -> (B, S, 6, dim).
  timestep_proj = timestep_proj.unflatten(timestep_proj.dim() - 1, {6, -1});
  if (cond.size() > 3 && std::holds_alternative<at::Tensor>(cond[3])) {
    encoder = at::cat({std::get<at::Tensor>(cond[3]), encoder}, 1);
  }

  auto& blocks = static_cast<nn::ModuleList&>(*Child("blocks"));
  for (size_t i = 0; i < blocks.size(); ++i) {
    Outputs out = Call(blocks[i], Args()
                                      .Set("hidden_states", hidden)
                                      .Set("encoder_hidden_states", encoder)
                                      .Set("temb", timestep_proj)
                                      .Set("rotary_emb", rotary));
    hidden = OutputTensor(out, 0, blocks[i]);
  }

  // shift, scale from the model's table plus temb (B, dim), or (B, S, dim) per token.
  std::vector<at::Tensor> m = Modulation(Parameter("scale_shift_table"), temb.unsqueeze(-2), 2);
  hidden = (Call(*Child("norm_out"), hidden.to(at::kFloat)) * (1 + m[1]) + m[0]).to(hidden.scalar_type());
  hidden = Call(*Child("proj_out"), hidden);

  // Unpatchify: (B, F'H'W', pt ph pw C) -> (B, C, F' pt, H' ph, W' pw).
  hidden = hidden.reshape({batch, frames, height, width, p[0], p[1], p[2], -1});
  hidden = hidden.permute({0, 7, 1, 4, 2, 5, 3, 6});
  return {hidden.flatten(6, 7).flatten(4, 5).flatten(2, 3)};
}

WanConfig WanConfigFromJson(const std::string& config_json) {
  const nlohmann::json json = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    throw std::invalid_argument("Wan config.json: not a JSON object");
  }
  WanConfig c;
  auto fail = [](const std::string& key, const std::string& want) {
    throw std::invalid_argument("Wan config.json: `" + key + "` must be " + want);
  };
  // Every size has a bound, far above any published config (see FluxConfigFromJson).
  auto bounded = [&](const std::string& key, const nlohmann::json& v, int64_t lo, int64_t hi, bool nullable) {
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) : true;
    const int64_t value = fits ? v.get<int64_t>() : hi + 1;
    if (!fits || value < lo || value > hi) {
      throw std::invalid_argument("Wan config.json: `" + key + "` is " + v.dump() + "; weft accepts " + std::to_string(lo) +
                                  ".." + std::to_string(hi) + (nullable ? " or null" : ""));
    }
    return value;
  };
  auto integer = [&](const char* key, int64_t& field, bool nullable, int64_t lo, int64_t hi) {
    auto it = json.find(key);
    if (it == json.end()) return;
    if (it->is_null() && nullable) {
      field = 0;
    } else if (it->is_number_integer()) {
      field = bounded(key, *it, lo, hi, nullable);
    } else {
      fail(key, nullable ? "an integer or null" : "an integer");
    }
  };
  if (auto it = json.find("_class_name"); it != json.end() && *it != "WanTransformer3DModel") {
    throw std::invalid_argument("Wan config.json: `_class_name` is " + it->dump() + ", not WanTransformer3DModel");
  }
  if (auto it = json.find("patch_size"); it != json.end()) {
    if (!it->is_array() || it->size() != 3) fail("patch_size", "a list of 3 integers");
    c.patch_size.clear();
    for (const auto& v : *it) {
      if (!v.is_number_integer()) fail("patch_size", "a list of 3 integers");
      c.patch_size.push_back(bounded("patch_size", v, 1, 64, false));
    }
  }
  integer("num_attention_heads", c.num_attention_heads, false, 1, 1024);
  integer("attention_head_dim", c.attention_head_dim, false, 1, 4096);
  integer("in_channels", c.in_channels, false, 1, 65536);
  integer("out_channels", c.out_channels, true, 0, 65536);
  integer("text_dim", c.text_dim, false, 1, 65536);
  integer("freq_dim", c.freq_dim, false, 2, 65536);
  integer("ffn_dim", c.ffn_dim, false, 1, 1 << 20);
  integer("num_layers", c.num_layers, false, 0, 1000);
  integer("image_dim", c.image_dim, true, 0, 65536);
  integer("added_kv_proj_dim", c.added_kv_proj_dim, true, 0, 65536);
  integer("rope_max_seq_len", c.rope_max_seq_len, false, 1, 1 << 20);
  integer("pos_embed_seq_len", c.pos_embed_seq_len, true, 0, 1 << 20);
  if (auto it = json.find("cross_attn_norm"); it != json.end()) {
    if (!it->is_boolean()) fail("cross_attn_norm", "true or false");
    c.cross_attn_norm = it->get<bool>();
  }
  if (auto it = json.find("qk_norm"); it != json.end()) {
    if (!it->is_null() && !it->is_string()) fail("qk_norm", "a string or null");
    c.qk_norm = it->is_null() ? "" : it->get<std::string>();
  }
  if (auto it = json.find("eps"); it != json.end()) {
    if (!it->is_number()) fail("eps", "a number");
    c.eps = it->get<double>();
    if (!(c.eps > 0 && c.eps < 1)) fail("eps", "a number between 0 and 1 (exclusive)");
  }
  return c;
}

std::string WanConfigToJson(const WanConfig& c) {
  using J = nlohmann::ordered_json;
  auto nullable = [](int64_t v) { return v > 0 ? J(v) : J(); };
  J j;  // diffusers' __init__ order, every key
  j["patch_size"] = c.patch_size;
  j["num_attention_heads"] = c.num_attention_heads;
  j["attention_head_dim"] = c.attention_head_dim;
  j["in_channels"] = c.in_channels;
  j["out_channels"] = nullable(c.out_channels);
  j["text_dim"] = c.text_dim;
  j["freq_dim"] = c.freq_dim;
  j["ffn_dim"] = c.ffn_dim;
  j["num_layers"] = c.num_layers;
  j["cross_attn_norm"] = c.cross_attn_norm;
  j["qk_norm"] = c.qk_norm.empty() ? J() : J(c.qk_norm);
  j["eps"] = c.eps;
  j["image_dim"] = nullable(c.image_dim);
  j["added_kv_proj_dim"] = nullable(c.added_kv_proj_dim);
  j["rope_max_seq_len"] = c.rope_max_seq_len;
  j["pos_embed_seq_len"] = nullable(c.pos_embed_seq_len);
  return j.dump();
}

bool WanKeepsInFp32(const std::string& param_fqn) {
  static const char* const kKept[] = {"rope", "time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"};
  size_t start = 0;
  while (start <= param_fqn.size()) {
    size_t dot = param_fqn.find('.', start);
    if (dot == std::string::npos) dot = param_fqn.size();
    const std::string component = param_fqn.substr(start, dot - start);
    for (const char* kept : kKept) {
      if (component == kept) return true;
    }
    start = dot + 1;
  }
  return false;
}

void CastWanParameters(nn::Module& model, at::ScalarType dtype) {
  for (auto& [name, slot] : model.NamedParameters()) *slot = slot->to(WanKeepsInFp32(name) ? at::kFloat : dtype);
}

WanConfig WanConfigByName(const std::string& name) {
  WanConfig c;
  if (name == "14b") return c;
  if (name == "1.3b") {
    c.num_attention_heads = 12;
    c.ffn_dim = 8960;
    c.num_layers = 30;
    return c;
  }
  if (name == "i2v-14b") {
    c.in_channels = 36;
    c.image_dim = 1280;
    c.added_kv_proj_dim = 5120;
    return c;
  }
  if (name == "ti2v-5b") {
    c.num_attention_heads = 24;
    c.ffn_dim = 14336;
    c.num_layers = 30;
    c.in_channels = 48;
    c.out_channels = 48;
    return c;
  }
  if (name == "tiny" || name == "tiny-i2v") {
    c.num_attention_heads = 4;
    c.attention_head_dim = 16;
    c.in_channels = 4;
    c.out_channels = 4;
    c.text_dim = 32;
    c.freq_dim = 32;
    c.ffn_dim = 128;
    c.num_layers = 2;
    if (name == "tiny-i2v") {
      c.image_dim = 24;
      c.added_kv_proj_dim = 64;
    }
    return c;
  }
  if (name == "small") {
    c.num_attention_heads = 8;
    c.attention_head_dim = 64;
    c.text_dim = 256;
    c.ffn_dim = 2048;
    c.num_layers = 2;
    return c;
  }
  throw std::invalid_argument("unknown Wan config `" + name +
                              "` (known: tiny, tiny-i2v, small, 1.3b, 14b, i2v-14b, ti2v-5b)");
}

}  // namespace weft::models

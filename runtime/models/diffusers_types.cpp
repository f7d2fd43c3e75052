#include "runtime/models/diffusers_types.h"

#include <stdexcept>

namespace weft::models {
namespace {

constexpr const char* kFlux = "diffusers.models.transformers.transformer_flux";
constexpr const char* kWan = "diffusers.models.transformers.transformer_wan";
constexpr const char* kEmbeddings = "diffusers.models.embeddings";
constexpr const char* kNormalization = "diffusers.models.normalization";

PythonArg Req(const char* name) { return {name, false, false}; }
PythonArg Opt(const char* name) { return {name, true, false}; }

const std::vector<PythonType>& Table() {
  static const std::vector<PythonType> table = {
      // torch.nn
      {"Linear", "torch.nn.modules.linear", {Req("input")}, false, 1},
      {"LayerNorm", "torch.nn.modules.normalization", {Req("input")}, false, 1},
      {"RMSNorm", "torch.nn.modules.normalization", {Req("x")}, false, 1},
      {"SiLU", "torch.nn.modules.activation", {Req("input")}, false, 1},
      {"GELU", "torch.nn.modules.activation", {Req("input")}, false, 1},
      {"Dropout", "torch.nn.modules.dropout", {Req("input")}, false, 1},
      {"Conv3d", "torch.nn.modules.conv", {Req("input")}, false, 1},
      {"ModuleList", "torch.nn.modules.container", {}, true, 0},
      // diffusers building blocks
      {"GELU", "diffusers.models.activations", {Req("hidden_states")}, false, 1},
      {"FeedForward", "diffusers.models.attention", {Req("hidden_states")}, true, 1},
      {"RMSNorm", kNormalization, {Req("hidden_states")}, false, 1},
      {"FP32LayerNorm", kNormalization, {Req("inputs")}, false, 1},
      {"AdaLayerNormZero",
       kNormalization,
       {Req("x"), Opt("timestep"), Opt("class_labels"), Opt("hidden_dtype"), Opt("emb")},
       false,
       1},
      {"AdaLayerNormZeroSingle", kNormalization, {Req("x"), Opt("emb")}, false, 1},
      {"AdaLayerNormContinuous", kNormalization, {Req("x"), Req("conditioning_embedding")}, false, 2},
      {"Timesteps", kEmbeddings, {Req("timesteps")}, false, 1},
      {"TimestepEmbedding", kEmbeddings, {Req("sample"), Opt("condition")}, false, 1},
      {"PixArtAlphaTextProjection", kEmbeddings, {Req("caption")}, false, 1},
      {"CombinedTimestepGuidanceTextProjEmbeddings",
       kEmbeddings,
       {Req("timestep"), Req("guidance"), Req("pooled_projection")},
       false,
       3},
      {"CombinedTimestepTextProjEmbeddings", kEmbeddings, {Req("timestep"), Req("pooled_projection")}, false, 2},
      // Flux
      {"FluxTransformer2DModel",
       kFlux,
       {Req("hidden_states"), Opt("encoder_hidden_states"), Opt("pooled_projections"), Opt("timestep"),
        Opt("img_ids"), Opt("txt_ids"), Opt("guidance"), Opt("joint_attention_kwargs"),
        Opt("controlnet_block_samples"), Opt("controlnet_single_block_samples"), Opt("return_dict"),
        Opt("controlnet_blocks_repeat")},
       false,
       0},
      {"FluxPosEmbed", kFlux, {Req("ids")}, false, 1},
      {"FluxTransformerBlock",
       kFlux,
       {Req("hidden_states"), Req("encoder_hidden_states"), Req("temb"), Opt("image_rotary_emb"),
        Opt("joint_attention_kwargs")},
       false,
       0},
      {"FluxSingleTransformerBlock",
       kFlux,
       {Req("hidden_states"), Req("encoder_hidden_states"), Req("temb"), Opt("image_rotary_emb"),
        Opt("joint_attention_kwargs")},
       false,
       0},
      {"FluxAttention",
       kFlux,
       {Req("hidden_states"), Opt("encoder_hidden_states"), Opt("attention_mask"), Opt("image_rotary_emb")},
       true,
       0},
      // Wan
      {"WanTransformer3DModel",
       kWan,
       {Req("hidden_states"), Req("timestep"), Req("encoder_hidden_states"), Opt("encoder_hidden_states_image"),
        Opt("return_dict"), Opt("attention_kwargs")},
       false,
       0},
      {"WanRotaryPosEmbed", kWan, {Req("hidden_states")}, false, 1},
      {"WanTimeTextImageEmbedding",
       kWan,
       {Req("timestep"), Req("encoder_hidden_states"), Opt("encoder_hidden_states_image"), Opt("timestep_seq_len")},
       false,
       3},
      {"WanImageEmbedding", kWan, {Req("encoder_hidden_states_image")}, false, 1},
      {"WanTransformerBlock", kWan, {Req("hidden_states"), Req("encoder_hidden_states"), Req("temb"), Req("rotary_emb")},
       false, 4},
      {"WanAttention",
       kWan,
       {Req("hidden_states"), Opt("encoder_hidden_states"), Opt("attention_mask"), Opt("rotary_emb")},
       true,
       4},
  };
  return table;
}

}  // namespace

const PythonType& PythonTypeOf(const nn::Module& module) {
  const std::vector<std::string> signature = module.Signature();
  const std::string first = signature.empty() ? "" : signature.front();
  for (const PythonType& type : Table()) {
    if (type.name != module.type()) continue;
    const std::string python_first = type.args.empty() ? "" : type.args.front().name;
    if (python_first == first) return type;
  }
  throw std::invalid_argument("module `" + module.fqn() + "` (" + module.type() + "(" + first +
                              ", ...)) has no Python class on record in runtime/models/diffusers_types.cpp");
}

}  // namespace weft::models

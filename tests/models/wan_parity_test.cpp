// The built-in Wan against diffusers' WanTransformer3DModel on the same random weights and
// inputs (fixtures from tools/make_fixtures.py): fp32 max abs error <= 1e-4 x max|reference|,
// for T2V with (B,) timesteps, per-token (B, S) timesteps and I2V image context; and the
// module tree (fqns, class names, parameter shapes, registration order) equal to diffusers'.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/io/safetensors.h"
#include "runtime/models/wan.h"
#include "runtime/nn/load_weights.h"

namespace weft::models {
namespace {

const std::string kFixtures = std::string(WEFT_FIXTURES);

struct Parity {
  double error;
  double scale;
};

// Loads `fixture`'s weights into a model of config `config_name`, runs it on
// inputs[_case].safetensors and compares with outputs[_case].safetensors.
// `tweak`, when given, edits the loaded model before the run.
Parity RunFixture(const std::string& fixture, const std::string& config_name, const std::string& case_name = "",
                  const std::function<void(nn::Module&)>& tweak = nullptr) {
  const std::string dir = kFixtures + "/" + fixture;
  const std::string suffix = case_name.empty() ? "" : "_" + case_name;
  io::SafetensorsFile weights = io::SafetensorsFile::Open(dir + "/weights.safetensors");
  io::SafetensorsFile inputs = io::SafetensorsFile::Open(dir + "/inputs" + suffix + ".safetensors");
  io::SafetensorsFile outputs = io::SafetensorsFile::Open(dir + "/outputs" + suffix + ".safetensors");
  WanTransformer3DModel model(WanConfigByName(config_name));
  nn::LoadWeights(model, {&weights}, at::kFloat);
  if (tweak) tweak(model);
  nn::Args args;
  for (const std::string& key : inputs.Keys()) args.Set(key, inputs.Load(key));
  at::Tensor got = nn::OutputTensor(nn::Call(model, args), 0, model);
  at::Tensor want = outputs.Load("output");
  EXPECT_EQ(got.sizes(), want.sizes());
  if (got.sizes() != want.sizes()) return {1e30, 0};
  return {(got - want).abs().max().item<double>(), want.abs().max().item<double>()};
}

TEST(WanParityTest, TinyMatchesDiffusersUnsharded) {
  Parity p = RunFixture("wan_tiny", "tiny");
  EXPECT_GT(p.scale, 0.5);  // a non-trivial reference
  EXPECT_LE(p.error, 1e-4 * p.scale) << "max abs error " << p.error << " vs max|ref| " << p.scale;
  std::cout << "wan_tiny: max abs error " << p.error << ", max|ref| " << p.scale << "\n";
}

TEST(WanParityTest, TinyPerTokenTimestepsMatchDiffusers) {
  Parity p = RunFixture("wan_tiny", "tiny", "seq_timestep");
  EXPECT_GT(p.scale, 0.5);
  EXPECT_LE(p.error, 1e-4 * p.scale) << "max abs error " << p.error << " vs max|ref| " << p.scale;
  std::cout << "wan_tiny (per-token timesteps): max abs error " << p.error << ", max|ref| " << p.scale << "\n";
}

TEST(WanParityTest, TinyImageToVideoMatchesDiffusers) {
  Parity p = RunFixture("wan_tiny_i2v", "tiny-i2v");
  EXPECT_GT(p.scale, 0.5);
  EXPECT_LE(p.error, 1e-4 * p.scale) << "max abs error " << p.error << " vs max|ref| " << p.scale;
  std::cout << "wan_tiny_i2v: max abs error " << p.error << ", max|ref| " << p.scale << "\n";
}

// bf16 as diffusers runs it after from_pretrained(torch_dtype=bfloat16): the fp32-kept
// parameters (time_embedder, scale_shift_table, norm2) and RoPE tables stay fp32, the rest
// is bf16; fp32 islands (norms, modulation, residual adds) in the same places. bf16 rounding
// differs between kernels, so the bound is looser than fp32's but far below the bf16-vs-fp32
// gap (about 0.93 here), which a dtype slip in the C++ would show as.
TEST(WanParityTest, TinyBfloat16MatchesDiffusersBfloat16) {
  const std::string dir = kFixtures + "/wan_tiny";
  io::SafetensorsFile weights = io::SafetensorsFile::Open(dir + "/weights.safetensors");
  io::SafetensorsFile inputs = io::SafetensorsFile::Open(dir + "/inputs_bf16.safetensors");
  io::SafetensorsFile outputs = io::SafetensorsFile::Open(dir + "/outputs_bf16.safetensors");
  WanTransformer3DModel model(WanConfigByName("tiny"));
  nn::LoadWeights(model, {&weights}, at::kFloat);
  CastWanParameters(model, at::kBFloat16);
  EXPECT_EQ(model.Parameter("scale_shift_table").scalar_type(), at::kFloat);
  EXPECT_EQ(model.Find("blocks.0.norm2")->Parameter("weight").scalar_type(), at::kFloat);
  EXPECT_EQ(model.Find("blocks.0.attn1.to_q")->Parameter("weight").scalar_type(), at::kBFloat16);
  nn::Args args;
  for (const std::string& key : inputs.Keys()) args.Set(key, inputs.Load(key).to(at::kBFloat16));
  at::Tensor got = nn::OutputTensor(nn::Call(model, args), 0, model);
  EXPECT_EQ(got.scalar_type(), at::kBFloat16);
  at::Tensor want = outputs.Load("output");
  const double scale = want.abs().max().item<double>();
  const double error = (got.to(at::kFloat) - want).abs().max().item<double>();
  EXPECT_LE(error, 2e-2 * scale) << "bf16 max abs error " << error << " vs max|ref| " << scale;
  std::cout << "wan_tiny bf16 vs diffusers bf16: max abs error " << error << ", max|ref| " << scale << "\n";
}

TEST(WanParityTest, KeepsDiffusersFp32Modules) {
  EXPECT_TRUE(WanKeepsInFp32("scale_shift_table"));
  EXPECT_TRUE(WanKeepsInFp32("blocks.7.scale_shift_table"));
  EXPECT_TRUE(WanKeepsInFp32("condition_embedder.time_embedder.linear_1.weight"));
  EXPECT_TRUE(WanKeepsInFp32("condition_embedder.image_embedder.norm1.bias"));
  EXPECT_FALSE(WanKeepsInFp32("condition_embedder.time_proj.weight"));
  EXPECT_FALSE(WanKeepsInFp32("blocks.0.attn1.norm_q.weight"));
  EXPECT_FALSE(WanKeepsInFp32("norm_out_extra.weight"));
}

// The comparison is sharp: a 2% change of one late projection is far outside the tolerance.
TEST(WanParityTest, PerturbedWeightIsCaught) {
  Parity p = RunFixture("wan_tiny", "tiny", "", [](nn::Module& model) {
    model.Find("blocks.1.attn1.to_out.0")->Parameter("weight").mul_(1.02);
  });
  EXPECT_GT(p.error, 1e-3 * p.scale) << "max abs error " << p.error << " vs max|ref| " << p.scale;
  std::cout << "wan_tiny (perturbed): max abs error " << p.error << "\n";
}

// One line per module, formatted as Python's json.dumps writes make_fixtures.py's modules.json.
std::vector<std::string> ModuleLines(nn::Module& model) {
  std::vector<std::string> lines;
  model.Walk([&](nn::Module& module) {
    std::ostringstream line;
    line << "{\"fqn\": \"" << module.fqn() << "\", \"type\": \"" << module.type() << "\", \"params\": [";
    bool first = true;
    for (const auto& [name, tensor] : module.parameters()) {
      line << (first ? "" : ", ") << "[\"" << name << "\", [";
      for (int64_t d = 0; d < tensor.dim(); ++d) line << (d ? ", " : "") << tensor.size(d);
      line << "]]";
      first = false;
    }
    line << "]}";
    lines.push_back(line.str());
  });
  return lines;
}

std::vector<std::string> FixtureModuleLines(const std::string& fixture) {
  std::ifstream in(kFixtures + "/" + fixture + "/modules.json");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line == "[" || line == "]") continue;
    if (!line.empty() && line.back() == ',') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

void ExpectTreeMatches(const std::string& fixture, const std::string& config_name) {
  WanTransformer3DModel model(WanConfigByName(config_name));
  std::vector<std::string> got = ModuleLines(model);
  std::vector<std::string> want = FixtureModuleLines(fixture);
  ASSERT_GT(want.size(), 40u) << "modules.json of " << fixture << " missing or short";
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    ASSERT_EQ(got[i], want[i]) << "module " << i << " differs";
  }
  EXPECT_EQ(got.size(), want.size());
}

TEST(WanParityTest, TinyModuleTreeMatchesDiffusers) { ExpectTreeMatches("wan_tiny", "tiny"); }

TEST(WanParityTest, TinyImageToVideoModuleTreeMatchesDiffusers) { ExpectTreeMatches("wan_tiny_i2v", "tiny-i2v"); }

// "blocks.{0..39}.attn1" -> "blocks.0.attn1" ... "blocks.39.attn1" (export_graph.py's
// compression of repeated blocks).
std::vector<std::string> ExpandPath(const std::string& path) {
  const size_t open = path.find('{');
  if (open == std::string::npos) return {path};
  const size_t dots = path.find("..", open);
  const size_t close = path.find('}', open);
  const int first = std::stoi(path.substr(open + 1, dots - open - 1));
  const int last = std::stoi(path.substr(dots + 2, close - dots - 2));
  std::vector<std::string> out;
  for (int i = first; i <= last; ++i) {
    for (const std::string& rest : ExpandPath(path.substr(close + 1))) {
      out.push_back(path.substr(0, open) + std::to_string(i) + rest);
    }
  }
  return out;
}

// The C++ tree of a published config equals the module section of the graph that
// tools/export_graph.py traced from diffusers (graphs/*.graph.json): every fqn, class name,
// child order, parameter name and shape (buffers aside), and the attention sites' heads.
// Parameters are on the meta device, so even 14B costs no memory.
void ExpectTreeMatchesGraph(const std::string& graph_file, const std::string& config_name) {
  std::ifstream in(std::string(WEFT_GRAPHS) + "/" + graph_file);
  ASSERT_TRUE(in.good()) << graph_file;
  const nlohmann::json graph = nlohmann::json::parse(in);
  ASSERT_EQ(graph["model"]["class_name"], "WanTransformer3DModel");
  WanTransformer3DModel model(WanConfigByName(config_name));
  size_t modules = 0;
  for (const auto& entry : graph["modules"]) {
    for (const std::string& fqn : ExpandPath(entry["path"].get<std::string>())) {
      ++modules;
      nn::Module* module = model.Find(fqn);
      ASSERT_NE(module, nullptr) << "no module `" << fqn << "`";
      EXPECT_EQ(module->type(), entry["type"].get<std::string>()) << fqn;
      std::vector<std::string> children;
      for (const auto& child : module->children()) children.push_back(child.first);
      EXPECT_EQ(children, entry.value("children", std::vector<std::string>{})) << fqn;
      std::vector<std::pair<std::string, std::vector<int64_t>>> want, got;
      for (const auto& param : entry.value("params", nlohmann::json::array())) {
        if (!param.value("buffer", false)) want.emplace_back(param["name"], param["shape"].get<std::vector<int64_t>>());
      }
      for (const auto& [name, tensor] : module->parameters()) got.emplace_back(name, tensor.sizes().vec());
      EXPECT_EQ(got, want) << fqn;
    }
  }
  size_t cpp_modules = 0;
  model.Walk([&](nn::Module&) { ++cpp_modules; });
  EXPECT_EQ(cpp_modules, modules);
  for (const auto& site : graph["attention_sites"]) {
    for (const std::string& fqn : ExpandPath(site["path"].get<std::string>())) {
      auto* attention = dynamic_cast<nn::AttentionModule*>(model.Find(fqn));
      ASSERT_NE(attention, nullptr) << fqn << " is no attention site";
      EXPECT_EQ(attention->heads(), site["heads"].get<int64_t>()) << fqn;
      EXPECT_EQ(attention->head_dim(), site["head_dim"].get<int64_t>()) << fqn;
    }
  }
}

TEST(WanParityTest, Wan14bTreeMatchesExportedGraph) {
  ExpectTreeMatchesGraph("wan2.1-t2v-14b.graph.json", "14b");
}

TEST(WanParityTest, Wan1p3bTreeMatchesExportedGraph) {
  ExpectTreeMatchesGraph("wan2.1-t2v-1.3b.graph.json", "1.3b");
}

TEST(WanParityTest, ConfigsAreNamed) {
  WanConfig big = WanConfigByName("14b");
  EXPECT_EQ(big.num_attention_heads, 40);
  EXPECT_EQ(big.attention_head_dim, 128);
  EXPECT_EQ(big.inner_dim(), 5120);
  EXPECT_EQ(big.ffn_dim, 13824);
  EXPECT_EQ(big.num_layers, 40);
  EXPECT_EQ(big.text_dim, 4096);
  EXPECT_EQ(big.patch_size, (std::vector<int64_t>{1, 2, 2}));
  WanConfig small = WanConfigByName("1.3b");
  EXPECT_EQ(small.inner_dim(), 1536);
  EXPECT_EQ(small.ffn_dim, 8960);
  EXPECT_EQ(small.num_layers, 30);
  WanConfig i2v = WanConfigByName("i2v-14b");
  EXPECT_EQ(i2v.in_channels, 36);
  EXPECT_EQ(i2v.image_dim, 1280);
  EXPECT_EQ(i2v.added_kv_proj_dim, 5120);
  WanConfig ti2v = WanConfigByName("ti2v-5b");
  EXPECT_EQ(ti2v.inner_dim(), 3072);
  EXPECT_EQ(ti2v.ffn_dim, 14336);
  EXPECT_EQ(ti2v.out_dim(), 48);
  EXPECT_THROW(WanConfigByName("huge"), std::invalid_argument);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void ExpectSameConfig(const WanConfig& got, const WanConfig& want) {
  EXPECT_EQ(got.patch_size, want.patch_size);
  EXPECT_EQ(got.num_attention_heads, want.num_attention_heads);
  EXPECT_EQ(got.attention_head_dim, want.attention_head_dim);
  EXPECT_EQ(got.in_channels, want.in_channels);
  EXPECT_EQ(got.out_dim(), want.out_dim());
  EXPECT_EQ(got.text_dim, want.text_dim);
  EXPECT_EQ(got.freq_dim, want.freq_dim);
  EXPECT_EQ(got.ffn_dim, want.ffn_dim);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.cross_attn_norm, want.cross_attn_norm);
  EXPECT_EQ(got.eps, want.eps);
  EXPECT_EQ(got.image_dim, want.image_dim);
  EXPECT_EQ(got.added_kv_proj_dim, want.added_kv_proj_dim);
  EXPECT_EQ(got.rope_max_seq_len, want.rope_max_seq_len);
  EXPECT_EQ(got.pos_embed_seq_len, want.pos_embed_seq_len);
}

TEST(WanParityTest, ConfigJsonMatchesNamedConfigs) {
  ExpectSameConfig(WanConfigFromJson(ReadText(kFixtures + "/wan_tiny/config.json")), WanConfigByName("tiny"));
  ExpectSameConfig(WanConfigFromJson(ReadText(kFixtures + "/wan_tiny_i2v/config.json")), WanConfigByName("tiny-i2v"));
  // The published 14B config.json (model-configs.md 4a), with nulls as a recent diffusers writes them.
  const std::string published = R"({
    "_class_name": "WanTransformer3DModel", "_diffusers_version": "0.35.0.dev0", "added_kv_proj_dim": null,
    "attention_head_dim": 128, "cross_attn_norm": true, "eps": 1e-06, "ffn_dim": 13824, "freq_dim": 256,
    "image_dim": null, "in_channels": 16, "num_attention_heads": 40, "num_layers": 40, "out_channels": 16,
    "patch_size": [1, 2, 2], "pos_embed_seq_len": null, "qk_norm": "rms_norm_across_heads",
    "rope_max_seq_len": 1024, "text_dim": 4096})";
  ExpectSameConfig(WanConfigFromJson(published), WanConfigByName("14b"));
  // Absent keys take diffusers' defaults.
  WanConfig i2v = WanConfigFromJson(R"({"image_dim": 1280, "added_kv_proj_dim": 5120, "in_channels": 36})");
  ExpectSameConfig(i2v, WanConfigByName("i2v-14b"));
}

TEST(WanParityTest, BadConfigJsonIsNamed) {
  auto message = [](const std::string& text) -> std::string {
    try {
      WanConfigFromJson(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message("{"), "Wan config.json: not a JSON object");
  EXPECT_EQ(message(R"({"patch_size": [1, 2]})"), "Wan config.json: `patch_size` must be a list of 3 integers");
  EXPECT_EQ(message(R"({"num_layers": "40"})"), "Wan config.json: `num_layers` must be an integer");
  EXPECT_EQ(message(R"({"num_layers": null})"), "Wan config.json: `num_layers` must be an integer");
  EXPECT_EQ(message(R"({"_class_name": "FluxTransformer2DModel"})"),
            "Wan config.json: `_class_name` is \"FluxTransformer2DModel\", not WanTransformer3DModel");
}

TEST(WanParityTest, RopeSplitsHeadDimLikeDiffusers) {
  WanRotaryPosEmbed rope(128, {1, 2, 2}, 1024);
  EXPECT_EQ(rope.t_dim(), 44);
  EXPECT_EQ(rope.h_dim(), 42);
  EXPECT_EQ(rope.w_dim(), 42);
  nn::Outputs out = nn::Call(rope, nn::Args().Set("hidden_states", at::zeros({1, 16, 3, 4, 6})));
  ASSERT_EQ(out.size(), 2u);
  const at::Tensor& cos = nn::OutputTensor(out, 0, rope);
  EXPECT_EQ(cos.sizes(), (std::vector<int64_t>{1, 3 * 2 * 3, 1, 128}));
  // Token 0 sits at position 0 on every axis: cos 1 everywhere.
  EXPECT_TRUE(at::allclose(cos[0][0], at::ones({1, 128})));
}

TEST(WanParityTest, BadInputsAreNamed) {
  WanTransformer3DModel model(WanConfigByName("tiny"));
  nn::RandomizeParameters(model, 7);
  nn::Args args;
  args.Set("hidden_states", at::zeros({1, 5, 2, 4, 4}))
      .Set("timestep", at::zeros({1}))
      .Set("encoder_hidden_states", at::zeros({1, 3, 32}));
  try {
    nn::Call(model, args);
    FAIL() << "expected an error for 5 input channels";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_states must be (B, 4, F, H, W)"), std::string::npos) << e.what();
  }
  // The I2V image context without an image embedder.
  args.Set("hidden_states", at::zeros({1, 4, 2, 4, 4})).Set("encoder_hidden_states_image", at::zeros({1, 2, 24}));
  EXPECT_THROW(nn::Call(model, args), std::invalid_argument);
}

}  // namespace
}  // namespace weft::models

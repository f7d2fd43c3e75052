// The built-in Flux against diffusers' FluxTransformer2DModel on the same random weights and
// inputs (fixtures from tools/make_fixtures.py): fp32 max abs error <= 1e-4 x max|reference|.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/io/diffusers_dir.h"
#include "runtime/io/safetensors.h"
#include "runtime/models/flux.h"
#include "runtime/nn/fused.h"
#include "runtime/nn/load_weights.h"

namespace weft::models {
namespace {

const std::string kDir = std::string(WEFT_FIXTURES) + "/flux_tiny";

// Runs the fixture's forward; error = max|weft - diffusers|, scale = max|diffusers|.
void ExpectTinyMatchesDiffusers() {
  // The weights as diffusers' save_pretrained wrote them: an index and two shards.
  std::vector<io::SafetensorsFile> shards;
  for (const std::string& file : io::DiffusersWeightFiles(kDir + "/model")) shards.push_back(io::SafetensorsFile::Open(file));
  ASSERT_EQ(shards.size(), 2u);
  io::SafetensorsFile inputs = io::SafetensorsFile::Open(kDir + "/inputs.safetensors");
  io::SafetensorsFile outputs = io::SafetensorsFile::Open(kDir + "/outputs.safetensors");
  FluxTransformer2DModel model(FluxConfigByName("tiny"));
  nn::LoadWeights(model, {&shards[0], &shards[1]}, at::kFloat);
  nn::Args args;
  for (const std::string& key : inputs.Keys()) args.Set(key, inputs.Load(key));
  at::Tensor got = nn::OutputTensor(nn::Call(model, args), 0, model);
  at::Tensor want = outputs.Load("output");
  ASSERT_EQ(got.sizes(), want.sizes());
  const double scale = want.abs().max().item<double>();
  const double error = (got - want).abs().max().item<double>();
  EXPECT_LE(error, 1e-4 * scale) << "max abs error " << error << " vs max|ref| " << scale;
}

// Fused kernels (oneDNN Linear+GELU, LayerNorm+modulation, split proj_out) are on by default.
TEST(FluxParityTest, TinyMatchesDiffusersUnsharded) {
  ASSERT_TRUE(nn::FusedKernelsEnabled());
  ExpectTinyMatchesDiffusers();
}

TEST(FluxParityTest, TinyMatchesDiffusersUnshardedWithoutFusedKernels) {
  nn::SetFusedKernels(false);
  ExpectTinyMatchesDiffusers();
  nn::SetFusedKernels(true);
}

TEST(FluxParityTest, ConfigsAreNamed) {
  EXPECT_EQ(FluxConfigByName("dev").inner_dim(), 3072);
  EXPECT_TRUE(FluxConfigByName("dev").guidance_embeds);
  EXPECT_FALSE(FluxConfigByName("schnell").guidance_embeds);
  EXPECT_THROW(FluxConfigByName("huge"), std::invalid_argument);
}

}  // namespace
}  // namespace weft::models

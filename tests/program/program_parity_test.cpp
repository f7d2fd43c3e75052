// Programs exported by tools/export_program.py, run by weft's interpreter, against diffusers'
// own outputs on the same weights and inputs (fixtures from tools/make_fixtures.py).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "compiler/program/program_reader.h"
#include "runtime/io/diffusers_dir.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/load_weights.h"
#include "runtime/program/program_model.h"

namespace weft::interp {
namespace {

const std::string kFixtures = WEFT_FIXTURES;

TEST(ProgramParityTest, FluxTinyMatchesDiffusers) {
  auto program = std::make_shared<program::Program>(program::ReadProgramFile(kFixtures + "/programs/flux-tiny.pt2"));
  auto model = ProgramModel::Create(program, LoadOptions{});
  std::vector<io::SafetensorsFile> shards;
  for (const std::string& f : io::DiffusersWeightFiles(kFixtures + "/flux_tiny/model")) shards.push_back(io::SafetensorsFile::Open(f));
  nn::LoadWeights(*model, {&shards[0], &shards[1]}, at::kFloat);
  model->ConformParameters(c10::Device(c10::kCPU));
  io::SafetensorsFile inputs = io::SafetensorsFile::Open(kFixtures + "/flux_tiny/inputs.safetensors");
  nn::Args args;
  for (const std::string& key : inputs.Keys()) args.Set(key, inputs.Load(key));
  at::Tensor got = nn::OutputTensor(nn::Call(*model, args), 0, *model);
  at::Tensor want = io::SafetensorsFile::Open(kFixtures + "/flux_tiny/outputs.safetensors").Load("output");
  ASSERT_EQ(got.sizes(), want.sizes());
  const double scale = want.abs().max().item<double>();
  const double error = (got - want).abs().max().item<double>();
  EXPECT_LE(error, 1e-4 * scale) << "max abs error " << error << " vs max|ref| " << scale;
  std::cerr << "error " << error << " scale " << scale << " fast nodes " << model->interpreter().fast_nodes() << "/"
            << model->interpreter().num_nodes() << "\n";
}

}  // namespace
}  // namespace weft::interp

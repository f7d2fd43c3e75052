// Bad programs, weights and inputs are refused with the node, key or argument named, before
// anything runs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "compiler/program/program_reader.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/load_weights.h"
#include "runtime/program/program_model.h"
#include "tests/unit/program/test_archives.h"

namespace weft::interp {
namespace {

using program::testing::CopyArchive;
using program::testing::TempPath;

const std::string kFlux = std::string(WEFT_FIXTURES) + "/programs/flux-tiny/program.pt2";

// A copy of the tiny Flux program whose model.json `edit` changes.
template <typename Edit>
std::string Edited(const std::string& name, Edit edit) {
  const std::string path = TempPath(name);
  CopyArchive(kFlux, path, [&](const std::string& entry, std::string data) -> std::optional<std::string> {
    if (entry != "models/model.json") return data;
    nlohmann::json j = nlohmann::json::parse(data);
    edit(j);
    return j.dump();
  });
  return path;
}

std::string LoadError(const std::string& path) {
  try {
    auto program = std::make_shared<program::Program>(program::ReadProgramFile(path));
    ProgramModel::Create(program, LoadOptions{});
  } catch (const program::ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

// The index of the first node with `target`.
size_t NodeIndex(const nlohmann::json& j, const std::string& target) {
  const auto& nodes = j["graph_module"]["graph"]["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i]["target"] == target) return i;
  }
  return 0;
}

TEST(ProgramErrorsTest, AnOperatorLibTorchLacksIsRefusedAtLoadNamingTheNode) {
  std::string node;
  const std::string path = Edited("no_such_op.pt2", [&](nlohmann::json& j) {
    auto& n = j["graph_module"]["graph"]["nodes"][NodeIndex(j, "torch.ops.aten.gelu.default")];
    n["target"] = "torch.ops.aten.weft_no_such_op.default";
    node = n["name"];
  });
  const std::string error = LoadError(path);
  EXPECT_EQ(error.rfind(path + ": node `" + node + "` (torch.ops.aten.weft_no_such_op.default, module `", 0), 0u) << error;
  EXPECT_NE(error.find(std::string("): this LibTorch (") + TORCH_VERSION + ") has no operator aten::weft_no_such_op"),
            std::string::npos)
      << error;
}

TEST(ProgramErrorsTest, AnArgumentTheOperatorDoesNotTakeIsRefused) {
  std::string node;
  const std::string path = Edited("bad_arg.pt2", [&](nlohmann::json& j) {
    auto& n = j["graph_module"]["graph"]["nodes"][NodeIndex(j, "torch.ops.aten.gelu.default")];
    n["inputs"].push_back({{"name", "weft_extra"}, {"arg", {{"as_int", 3}}}, {"kind", 1}});
    node = n["name"];
  });
  const std::string error = LoadError(path);
  EXPECT_NE(error.find("node `" + node + "`"), std::string::npos) << error;
  EXPECT_NE(error.find("the operator aten::gelu has no argument `weft_extra`"), std::string::npos) << error;
}

TEST(ProgramErrorsTest, ControlFlowOperatorsAreRefused) {
  const std::string path = Edited("hop.pt2", [&](nlohmann::json& j) {
    j["graph_module"]["graph"]["nodes"][NodeIndex(j, "torch.ops.aten.gelu.default")]["target"] = "torch.ops.higher_order.cond";
  });
  const std::string error = LoadError(path);
  EXPECT_NE(error.find("(torch.ops.higher_order.cond"), std::string::npos) << error;
  EXPECT_NE(error.find("this higher-order operator is not supported (weft runs grad-mode and autocast-off regions, "
                       "inlined when the program is read; not control flow or autocast on)"),
            std::string::npos)
      << error;
}

TEST(ProgramErrorsTest, ProgramsThatMutateBuffersAreRefused) {
  const std::string path = Edited("mutation.pt2", [&](nlohmann::json& j) {
    j["graph_module"]["signature"]["output_specs"].push_back(
        {{"buffer_mutation", {{"arg", {{"name", "linear"}}}, {"buffer_name", "x_embedder.cache"}}}});
    j["graph_module"]["graph"]["outputs"].push_back({{"as_tensor", {{"name", "linear"}}}});
  });
  EXPECT_EQ(LoadError(path), path + ": the program mutates or returns `x_embedder.cache` besides its outputs; weft runs "
                                    "inference programs without mutations");
}

std::unique_ptr<ProgramModel> Flux() {
  auto program = std::make_shared<program::Program>(program::ReadProgramFile(kFlux));
  return ProgramModel::Create(program, LoadOptions{});
}

std::string WeightsError(const std::map<std::string, at::Tensor>& tensors) {
  const std::string path = TempPath("weights.safetensors");
  io::WriteSafetensors(path, tensors);
  io::SafetensorsFile file = io::SafetensorsFile::Open(path);
  auto model = Flux();
  try {
    nn::LoadWeights(*model, {&file}, at::kFloat);
  } catch (const nn::WeightsError& e) {
    return e.what();
  }
  return "(no error)";
}

std::map<std::string, at::Tensor> SeededCheckpoint() {
  auto model = Flux();
  nn::RandomizeParameters(*model, 3);
  std::map<std::string, at::Tensor> out;
  for (auto& [name, slot] : model->NamedParameters()) out[name] = *slot;
  return out;
}

TEST(ProgramErrorsTest, CheckpointsThatDoNotFitNameTheKey) {
  std::map<std::string, at::Tensor> ckpt = SeededCheckpoint();
  EXPECT_EQ(WeightsError(ckpt), "(no error)");
  ckpt.erase("proj_out.bias");
  std::string error = WeightsError(ckpt);
  EXPECT_NE(error.find("1 missing parameter(s):\n    proj_out.bias [16]"), std::string::npos) << error;
  ckpt = SeededCheckpoint();
  ckpt["proj_out.bias"] = at::zeros({17});
  error = WeightsError(ckpt);
  EXPECT_NE(error.find("proj_out.bias: checkpoint [17]"), std::string::npos) << error;
  ckpt = SeededCheckpoint();
  ckpt["proj_out.bias"] = at::zeros({16}, at::kInt);
  error = WeightsError(ckpt);
  EXPECT_NE(error.find("1 non-floating dtype(s) for floating parameters:\n    proj_out.bias: checkpoint I32"), std::string::npos)
      << error;
}

TEST(ProgramErrorsTest, InputsThatDoNotFitAreRefusedBeforeRunning) {
  auto model = Flux();
  nn::RandomizeParameters(*model, 3);
  model->ConformParameters(c10::Device(c10::kCPU));
  nn::Args args;
  args.Set("hidden_states", at::randn({2, 24, 16}))
      .Set("encoder_hidden_states", at::randn({2, 8, 32}))
      .Set("pooled_projections", at::randn({2, 24}))
      .Set("timestep", at::rand({2}))
      .Set("img_ids", at::randn({24, 3}))
      .Set("txt_ids", at::zeros({8, 3}));
  try {
    nn::Call(*model, args);
    ADD_FAILURE() << "ran without guidance";
  } catch (const program::ProgramError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(kFlux + ": missing forward argument `guidance`", 0), 0u) << e.what();
  }
  args.Set("guidance", at::rand({2}));
  EXPECT_EQ(nn::OutputTensor(nn::Call(*model, args), 0, *model).sizes(), (std::vector<int64_t>{2, 24, 16}));
  args.Set("txt_ids", at::zeros({1, 3})).Set("encoder_hidden_states", at::randn({2, 1, 32}));
  try {
    nn::Call(*model, args);
    ADD_FAILURE() << "ran with one text token";
  } catch (const program::ProgramError& e) {
    EXPECT_NE(std::string(e.what()).find("is 1, below the program's minimum 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::interp

// Binding a program's symbolic sizes to inputs: every mismatch is refused by name before running.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/program/bindings.h"
#include "compiler/program/program_reader.h"

namespace weft::program {
namespace {

const std::string kPrograms = std::string(WEFT_FIXTURES) + "/programs";

InputDesc T(const std::string& name, std::vector<int64_t> shape, const std::string& dtype = "f32") {
  InputDesc d;
  d.name = name;
  d.tensor = true;
  d.shape = std::move(shape);
  d.dtype = dtype;
  return d;
}

InputDesc V(const std::string& name, const std::string& json) {
  InputDesc d;
  d.name = name;
  d.value_json = json;
  return d;
}

// Flux tiny, exported at batch 2 with 64 image and 16 text tokens.
std::vector<InputDesc> Flux(int64_t batch, int64_t image, int64_t text) {
  return {T("hidden_states", {batch, image, 16}), T("encoder_hidden_states", {batch, text, 32}),
          T("pooled_projections", {batch, 24}), T("timestep", {batch}), T("img_ids", {image, 3}),
          T("txt_ids", {text, 3}), T("guidance", {batch})};
}

std::string ErrorOf(const Program& p, const std::vector<InputDesc>& inputs) {
  try {
    Bindings::Bind(p, inputs);
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

class FluxBindings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { program_ = new Program(ReadProgramFile(kPrograms + "/flux-tiny/program.pt2")); }
  static void TearDownTestSuite() { delete program_; }
  static Program* program_;
  const std::string where_ = kPrograms + "/flux-tiny/program.pt2: ";
};
Program* FluxBindings::program_ = nullptr;

TEST_F(FluxBindings, BindsTokenCountsOtherThanTheExports) {
  Bindings b = Bindings::Bind(*program_, Flux(3, 24, 8));
  // Sizes the graph computes from the symbols: the joint sequence is image + text tokens.
  const TensorMeta* out = program_->FindTensor(program_->outputs[0].name);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(b.Sizes(*out), (std::vector<int64_t>{3, 24, 16}));
}

// The RoPE ids must cover the joint sequence: torch recorded it as a guard.
TEST_F(FluxBindings, RefusesInputsThatBreakAGuard) {
  std::vector<InputDesc> in = Flux(2, 24, 8);
  in[4] = T("img_ids", {25, 3});
  EXPECT_EQ(ErrorOf(*program_, in), where_ + "the inputs break the program's guard `(L['encoder_hidden_states'].size()[1] + "
                                              "L['hidden_states'].size()[1]) == (L['img_ids'].size()[0] + "
                                              "L['txt_ids'].size()[0])`");
}

// A size the model's own code fixed (FluxPosEmbed loops over the position ids' axes): the refusal
// says where, from what the export recorded.
TEST_F(FluxBindings, SaysWhereTheForwardFixedASize) {
  std::vector<InputDesc> in = Flux(2, 24, 8);
  in[5] = T("txt_ids", {8, 4});
  EXPECT_EQ(ErrorOf(*program_, in), where_ + "txt_ids.size(1) is 4; the program was exported with it fixed at 3 by the "
                                             "forward, at diffusers/models/transformers/transformer_flux.py:513 in "
                                             "forward (`for i in range(n_axes):`)");
}

TEST_F(FluxBindings, RefusesATokenCountBelowTheMinimum) {
  EXPECT_EQ(ErrorOf(*program_, Flux(2, 24, 1)),
            where_ + "encoder_hidden_states.size(1) (size s31) is 1, below the program's minimum 2");
}

TEST_F(FluxBindings, RefusesFixedSizesRanksDtypesAndNames) {
  std::vector<InputDesc> in = Flux(2, 24, 8);
  in[0] = T("hidden_states", {2, 24, 17});
  EXPECT_EQ(ErrorOf(*program_, in), where_ + "hidden_states.size(2) is 17; the program was exported with it fixed at 16");
  in = Flux(2, 24, 8);
  in[0] = T("hidden_states", {2, 24});
  EXPECT_EQ(ErrorOf(*program_, in), where_ + "forward argument `hidden_states` has 2 dimensions; the program takes 3");
  in = Flux(2, 24, 8);
  in[0] = T("hidden_states", {2, 24, 16}, "bf16");
  EXPECT_EQ(ErrorOf(*program_, in), where_ + "forward argument `hidden_states` is bf16; the program was exported with f32");
  in = Flux(2, 24, 8);
  in.erase(in.begin() + 6);
  EXPECT_EQ(ErrorOf(*program_, in),
            where_ + "missing forward argument `guidance` (the program takes hidden_states, encoder_hidden_states, "
                     "pooled_projections, timestep, img_ids, txt_ids, guidance, return_dict)");
  in = Flux(2, 24, 8);
  in.push_back(T("controlnet_block_samples", {1}));
  EXPECT_EQ(ErrorOf(*program_, in).rfind(where_ + "the program has no forward argument `controlnet_block_samples`", 0), 0u);
}

// One batch size: every input's batch dim is the same symbol.
TEST_F(FluxBindings, RefusesInputsThatDisagree) {
  std::vector<InputDesc> in = Flux(2, 24, 8);
  in[2] = T("pooled_projections", {3, 24});
  EXPECT_EQ(ErrorOf(*program_, in), where_ + "pooled_projections.size(0) is 3 but hidden_states.size(0) is 2; the program "
                                              "requires them equal (both are its size s2)");
}

TEST(LtxBindings, IntegerArgumentsBindSymbolsTheTokenCountMustFit) {
  const std::string path = kPrograms + "/ltx-video-tiny/program.pt2";
  Program p = ReadProgramFile(path);
  // 96x64x9 at batch 2: latent 2 x 2 x 3 = 12 tokens of 16 channels, 8 text tokens of 32.
  std::vector<InputDesc> in = {T("hidden_states", {2, 12, 16}), T("encoder_hidden_states", {2, 8, 32}),
                               T("timestep", {2}), T("encoder_attention_mask", {2, 8}), V("num_frames", "2"),
                               V("height", "2"), V("width", "3"), V("rope_interpolation_scale", "[0.32, 32, 32]")};
  EXPECT_NO_THROW(Bindings::Bind(p, in));
  in[4] = V("num_frames", "3");
  const std::string error = ErrorOf(p, in);
  EXPECT_EQ(error.rfind(path + ": hidden_states.size(1) is 12; the program requires 18 (", 0), 0u) << error;
  in[4] = V("num_frames", "\"two\"");
  EXPECT_EQ(ErrorOf(p, in), path + ": `num_frames` must be an integer");
}

// A tuple of tensors (SanaWMLTX2Refiner's (cos, sin) `video_rotary_emb`): each tensor is given on
// its own, named by its path, as an inputs file holds it; the whole argument as one is refused
// naming the paths.
TEST(TupleBindings, TensorsInsideATupleAreGivenByTheirPath) {
  const std::string path = std::string(WEFT_FIXTURES) + "/zoo/SanaWMLTX2RefinerTransformer3DModel/program.pt2";
  Program p = ReadProgramFile(path);
  const std::vector<std::string> keys = InputKeys(FlattenInputs(p));
  EXPECT_NE(std::find(keys.begin(), keys.end(), "video_rotary_emb[0]"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "video_rotary_emb[1]"), keys.end());
  EXPECT_EQ(std::find(keys.begin(), keys.end(), "video_rotary_emb"), keys.end());
  std::vector<InputDesc> in = {T("hidden_states", {2, 32, 8}), T("encoder_hidden_states", {2, 12, 16}),
                               T("timestep", {2}), T("encoder_attention_mask", {2, 12}, "i64"),
                               T("video_rotary_emb[0]", {2, 32, 32}), T("video_rotary_emb[1]", {2, 32, 32})};
  EXPECT_NO_THROW(Bindings::Bind(p, in));
  std::vector<InputDesc> mismatched = in;
  mismatched[5] = T("video_rotary_emb[1]", {2, 30, 32});
  const std::string error = ErrorOf(p, mismatched);
  EXPECT_NE(error.find("video_rotary_emb[1].size(1) is 30"), std::string::npos) << error;
  std::vector<InputDesc> whole(in.begin(), in.begin() + 4);
  whole.push_back(T("video_rotary_emb", {2, 2, 32, 32}));
  EXPECT_EQ(ErrorOf(p, whole), path + ": forward argument `video_rotary_emb` holds tensors, each given on its own: "
                                      "video_rotary_emb[0], video_rotary_emb[1]");
  std::vector<InputDesc> missing(in.begin(), in.begin() + 5);
  EXPECT_EQ(ErrorOf(p, missing).rfind(path + ": missing forward argument `video_rotary_emb[1]`", 0), 0u) << ErrorOf(p, missing);
}

}  // namespace
}  // namespace weft::program

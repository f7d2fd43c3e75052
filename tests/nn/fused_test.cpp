// runtime/nn/fused.h: every fast path gives the unfused result (fp32, stated tolerances), runs
// only when no hook would be skipped, and is off after SetFusedKernels(false).
#include "runtime/nn/fused.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/onednn_linear.h"

namespace weft::nn {
namespace {

// Counts the calls of the module it is installed on.
class CountCalls : public Hook {
 public:
  explicit CountCalls(int* calls) : calls_(calls) {}
  void PreForward(Module&, Args&) override { ++*calls_; }

 private:
  int* calls_;
};

std::unique_ptr<Linear> RandomLinear(int64_t in, int64_t out) {
  auto linear = std::make_unique<Linear>(in, out);
  linear->Parameter("weight") = at::randn({out, in}) / std::sqrt(static_cast<double>(in));
  linear->Parameter("bias") = at::randn({out});
  return linear;
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

class FusedTest : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(0); }
  void TearDown() override { SetFusedKernels(true); }
};

TEST_F(FusedTest, LinearGeluMatchesLinearThenGelu) {
#if defined(__x86_64__)
  ASSERT_TRUE(onednn::Available());  // so this test checks the fused kernel, not the fallback
#endif
  auto proj = RandomLinear(64, 256);
  const at::Tensor x = at::randn({1, 40, 64}) * 3;
  for (bool tanh : {true, false}) {
    const at::Tensor want = at::gelu(at::linear(x, proj->Parameter("weight"), proj->Parameter("bias")), tanh ? "tanh" : "none");
    const at::Tensor got = LinearGelu(*proj, tanh, x);
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE(RelativeError(got, want), 1e-5) << "tanh " << tanh;
  }
}

TEST_F(FusedTest, LinearGeluCallsHookedModules) {
  auto proj = RandomLinear(16, 32);
  GELUActivation act(/*approximate_tanh=*/true);
  const at::Tensor x = at::randn({2, 5, 16});
  int proj_calls = 0, act_calls = 0;
  act.AddHook(std::make_shared<CountCalls>(&act_calls));
  const at::Tensor want = at::gelu(at::linear(x, proj->Parameter("weight"), proj->Parameter("bias")), "tanh");
  // Unfused: Call(proj) (itself a oneDNN matmul on CPU fp32, so not bit for bit) then Call(act).
  EXPECT_LE(RelativeError(LinearGelu(*proj, act, x), want), 1e-6);
  EXPECT_EQ(act_calls, 1);
  act.ClearHooks();
  proj->AddHook(std::make_shared<CountCalls>(&proj_calls));
  EXPECT_LE(RelativeError(LinearGelu(*proj, act, x), want), 1e-6);
  EXPECT_LE(RelativeError(LinearGelu(*proj, /*approximate_tanh=*/true, x), want), 1e-6);
  EXPECT_EQ(proj_calls, 2);
}

TEST_F(FusedTest, DisabledFusionRunsTheUnfusedOps) {
  SetFusedKernels(false);
  auto proj = RandomLinear(64, 256);
  const at::Tensor x = at::randn({1, 40, 64});
  EXPECT_TRUE(at::equal(LinearGelu(*proj, true, x),
                        at::gelu(at::linear(x, proj->Parameter("weight"), proj->Parameter("bias")), "tanh")));
}

TEST_F(FusedTest, ModulatedLayerNormMatchesNormThenModulation) {
  LayerNorm norm(48, 1e-6, /*elementwise_affine=*/false);
  for (int64_t batch : {1, 3}) {  // batch 3 cannot fold the modulation into the norm
    const at::Tensor x = at::randn({batch, 20, 48}) * 2 + 1;
    const at::Tensor scale = at::randn({batch, 48}), shift = at::randn({batch, 48});
    const at::Tensor want = at::layer_norm(x, {48}, {}, {}, 1e-6) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1);
    EXPECT_LE(RelativeError(ModulatedLayerNorm(norm, x, scale, shift), want), 1e-6) << "batch " << batch;
  }
  int calls = 0;
  norm.AddHook(std::make_shared<CountCalls>(&calls));
  const at::Tensor x = at::randn({1, 20, 48}), scale = at::randn({1, 48}), shift = at::randn({1, 48});
  ModulatedLayerNorm(norm, x, scale, shift);
  EXPECT_EQ(calls, 1);
}

TEST_F(FusedTest, LinearOfConcatMatchesLinearOfCat) {
  auto proj = RandomLinear(24 + 96, 24);
  const at::Tensor a = at::randn({1, 30, 24}), b = at::randn({1, 30, 96});
  const at::Tensor want = at::linear(at::cat({a, b}, -1), proj->Parameter("weight"), proj->Parameter("bias"));
  const at::Tensor got = LinearOfConcat(*proj, {a, b});
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LE(RelativeError(got, want), 1e-6);
  // A hook must see the concatenated input: the module is called on it.
  int64_t seen_width = 0;
  class Width : public Hook {
   public:
    explicit Width(int64_t* w) : w_(w) {}
    void PreForward(Module&, Args& args) override { *w_ = args.Tensor("input").size(-1); }
    int64_t* w_;
  };
  proj->AddHook(std::make_shared<Width>(&seen_width));
  EXPECT_LE(RelativeError(LinearOfConcat(*proj, {a, b}), want), 1e-6);
  EXPECT_EQ(seen_width, 120);
  // A width the weight does not have is the module's own error.
  proj->ClearHooks();
  EXPECT_THROW(LinearOfConcat(*proj, {a, a}), std::invalid_argument);
}

// diffusers' apply_rotary_emb (use_real, unbind_dim -1) after torch.nn.RMSNorm, op by op.
at::Tensor ReferenceNormRotate(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& cos,
                               const at::Tensor& sin) {
  const at::Tensor y = at::rms_norm(x, {x.size(-1)}, weight, eps);
  const std::vector<at::Tensor> pair = y.unflatten(-1, {-1, 2}).unbind(-1);
  const at::Tensor rotated = at::stack({-pair[1], pair[0]}, -1).flatten(3);
  return y * cos.unsqueeze(0).unsqueeze(2) + rotated * sin.unsqueeze(0).unsqueeze(2);
}

TEST_F(FusedTest, NormRotateMatchesRmsNormThenRotaryIntoAnySlice) {
  for (int64_t dim : {64, 24}) {  // 24: the kernel's sum has a remainder after 16 lanes
    RMSNorm norm(dim, 1e-6, /*elementwise_affine=*/true, RMSNorm::Flavour::kTorch);
    norm.Parameter("weight") = at::rand({dim}) + 0.5;
    const int64_t text = 3, image = 11, heads = 5;
    const at::Tensor angles = at::rand({text + image, dim / 2}) * 6.3;
    const at::Tensor cos = at::cos(angles).repeat_interleave(2, 1), sin = at::sin(angles).repeat_interleave(2, 1);
    const at::Tensor x = at::randn({2, image, heads, dim}) * 4;
    // Write the image rows of a joint (text + image) buffer, as joint attention does.
    at::Tensor joint = at::zeros({2, text + image, heads, dim});
    at::Tensor rows = joint.narrow(1, text, image);
    ASSERT_TRUE(NormRotateInto(norm, x, cos.narrow(0, text, image), sin.narrow(0, text, image), rows)) << dim;
    const at::Tensor want = ReferenceNormRotate(x, norm.Parameter("weight"), 1e-6, cos.narrow(0, text, image),
                                                sin.narrow(0, text, image));
    EXPECT_LE(RelativeError(joint.narrow(1, text, image), want), 1e-6) << dim;
    EXPECT_EQ(joint.narrow(1, 0, text).abs().max().item<float>(), 0.0f) << "text rows untouched";
  }
}

TEST_F(FusedTest, NormRotateLeavesHookedShardedOrNonFp32NormsToTheModules) {
  RMSNorm norm(8, 1e-6, true, RMSNorm::Flavour::kTorch);
  norm.Parameter("weight") = at::ones({8});
  const at::Tensor cos = at::ones({4, 8}), sin = at::zeros({4, 8});
  const at::Tensor x = at::randn({1, 4, 2, 8});
  at::Tensor out = at::empty_like(x);
  int calls = 0;
  norm.AddHook(std::make_shared<CountCalls>(&calls));
  EXPECT_FALSE(NormRotateInto(norm, x, cos, sin, out));
  norm.ClearHooks();
  at::Tensor half_out = at::empty_like(x, at::kDouble);
  EXPECT_FALSE(NormRotateInto(norm, x.to(at::kDouble), cos, sin, half_out));
  EXPECT_FALSE(NormRotateInto(norm, x, cos.narrow(0, 0, 3), sin.narrow(0, 0, 3), out));  // table for 3 tokens
  norm.ShardStatistics([](at::Tensor&) {}, 16);
  EXPECT_FALSE(NormRotateInto(norm, x, cos, sin, out));
  EXPECT_EQ(calls, 0);
  SetFusedKernels(false);
  RMSNorm plain(8, 1e-6, true, RMSNorm::Flavour::kTorch);
  plain.Parameter("weight") = at::ones({8});
  EXPECT_FALSE(NormRotateInto(plain, x, cos, sin, out));
}

TEST_F(FusedTest, CatOrViewIsAViewOnlyForBackToBackParts) {
  const at::Tensor whole = at::randn({1, 10, 8});
  const at::Tensor front = whole.narrow(1, 0, 3), back = whole.narrow(1, 3, 7);
  const at::Tensor joined = CatOrView({front, back}, 1);
  EXPECT_TRUE(at::equal(joined, whole));
  EXPECT_EQ(joined.data_ptr(), whole.data_ptr());  // no copy
  // Out of order, from different buffers, or with a batch dim in front: a real concatenation.
  for (const auto& parts : std::vector<std::vector<at::Tensor>>{{back, front}, {front, back.clone()}}) {
    const at::Tensor got = CatOrView(parts, 1);
    EXPECT_TRUE(at::equal(got, at::cat(parts, 1)));
    EXPECT_NE(got.data_ptr(), whole.data_ptr());
  }
  const at::Tensor batched = at::randn({2, 10, 8});
  const std::vector<at::Tensor> halves = {batched.narrow(1, 0, 4), batched.narrow(1, 4, 6)};
  EXPECT_TRUE(at::equal(CatOrView(halves, 1), batched));
  EXPECT_NE(CatOrView(halves, 1).data_ptr(), batched.data_ptr());
}

}  // namespace
}  // namespace weft::nn

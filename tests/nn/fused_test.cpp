// runtime/nn/fused.h: FastRmsNorm gives rms_norm's result (fp32, stated tolerance), including on
// strided inputs, declines what its kernel does not cover, and is off after SetFusedKernels(false).
#include "runtime/nn/fused.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>

namespace weft::nn {
namespace {

class FusedTest : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(0); }
  void TearDown() override { SetFusedKernels(true); }
};

TEST_F(FusedTest, FastRmsNormMatchesRmsNorm) {
  for (const int64_t dim : {1, 24, 77}) {
    // A transposed view: the kernel must read it in logical order, not storage order.
    const at::Tensor x = (at::randn({dim, 6, 2}) * 3).permute({2, 1, 0});
    const at::Tensor w = at::rand({dim}) + 0.5;
    for (const bool weighted : {false, true}) {
      const std::optional<at::Tensor> weight = weighted ? std::optional<at::Tensor>(w) : std::nullopt;
      const std::optional<at::Tensor> got = FastRmsNorm(x, weight, 1e-6);
      ASSERT_TRUE(got.has_value()) << dim;
      ASSERT_EQ(got->sizes(), x.sizes());
      const at::Tensor want = at::rms_norm(x.to(at::kDouble), {dim}, weighted ? std::optional<at::Tensor>(w.to(at::kDouble)) : std::nullopt, 1e-6);
      EXPECT_LE(((got->to(at::kDouble) - want).abs() / (want.abs() + 1)).max().item<double>(), 1e-6)
          << "dim " << dim << (weighted ? " with weight" : "");
    }
  }
}

TEST_F(FusedTest, FastRmsNormDeclinesWhatItsKernelDoesNotCover) {
  const at::Tensor x = at::randn({3, 8});
  EXPECT_FALSE(FastRmsNorm(x.to(at::kBFloat16), std::nullopt, 1e-6));
  EXPECT_FALSE(FastRmsNorm(x, at::ones({4}), 1e-6));                  // weight of another width
  EXPECT_FALSE(FastRmsNorm(x, at::ones({8}, at::kDouble), 1e-6));     // weight of another dtype
  EXPECT_FALSE(FastRmsNorm(at::scalar_tensor(2.0f), std::nullopt, 1e-6));
  EXPECT_FALSE(FastRmsNorm(at::empty({0, 8}), std::nullopt, 1e-6));
  ASSERT_TRUE(FusedKernelsEnabled());
  SetFusedKernels(false);
  EXPECT_FALSE(FusedKernelsEnabled());
  EXPECT_FALSE(FastRmsNorm(x, std::nullopt, 1e-6));
}

}  // namespace
}  // namespace weft::nn

// runtime/nn/cpu_kernels.h: RMSNorm matches torch's; the rotary embedding is bitwise the ops it
// replaces; the hand-written GELU agrees with the exact tanh GELU everywhere on the float line, odd
// sizes (vector tails) included, keeps NaN, and gives GELU's limits at +-inf.
#include "runtime/nn/cpu_kernels.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace weft::nn::cpu {
namespace {

// The tanh GELU in double precision: what both float kernels approximate.
double ExactGeluTanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

TEST(GeluTanhInPlace, WithinTwoTenMillionthsOfTheExactFunctionAndOfTorch) {
  at::manual_seed(3);
  // Normal values at three scales, a dense sweep of [-12, 12] (where tanh bends), the clamp
  // region of the exp (|2u| near 88) and an odd length so every vector width leaves a tail.
  const at::Tensor x = at::cat({at::randn({4099}), at::randn({4099}) * 8, at::linspace(-12, 12, 24001),
                                at::linspace(-40, 40, 801), at::randn({3}) * 1e-20});
  at::Tensor y = x.clone();
  GeluTanhInPlace(y.data_ptr<float>(), y.numel());
  const at::Tensor torch_gelu = at::gelu(x, "tanh");
  double worst_exact = 0, worst_torch = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x[i].item<float>(), got = y[i].item<float>();
    const double scale = std::max(1.0, std::fabs(ExactGeluTanh(v)));
    worst_exact = std::max(worst_exact, std::fabs(got - ExactGeluTanh(v)) / scale);
    worst_torch = std::max(worst_torch, std::fabs(got - torch_gelu[i].item<float>()) / scale);
  }
  EXPECT_LE(worst_exact, 2e-7);
  EXPECT_LE(worst_torch, 4e-7);
}

TEST(GeluTanhInPlace, KeepsNanAndGivesTheLimitsAtInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {std::nanf(""), inf, -inf, 0.0f, -0.0f, 1e30f, -1e30f};
  GeluTanhInPlace(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_EQ(x[1], inf);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_EQ(x[4], 0.0f);
  EXPECT_EQ(x[5], 1e30f);
  EXPECT_EQ(x[6], 0.0f);
  EXPECT_TRUE(std::signbit(x[6]));  // (torch's 0.5 x (1 + tanh(u)) gives NaN at -inf: -inf x 0)
}

TEST(RmsNorm, MatchesTorchWithAndWithoutWeightOnOddWidths) {
  at::manual_seed(7);
  // Widths below, at and past the 16 partial sums, with a tail; rows of very different scale.
  for (const int64_t dim : {1, 15, 16, 64, 77, 3072}) {
    const at::Tensor x = at::randn({5, 3, dim}) * at::logspace(-3, 3, 3).view({1, 3, 1});
    const at::Tensor w = at::randn({dim});
    for (const bool weighted : {false, true}) {
      at::Tensor out = at::empty_like(x);
      RmsNorm(x.data_ptr<float>(), 15, dim, weighted ? w.data_ptr<float>() : nullptr, 1e-6f, out.data_ptr<float>());
      const at::Tensor want = at::rms_norm(x.to(at::kDouble), {dim}, weighted ? std::optional<at::Tensor>(w.to(at::kDouble)) : std::nullopt, 1e-6);
      const double err = ((out.to(at::kDouble) - want).abs() / (want.abs() + 1)).max().item<double>();
      EXPECT_LE(err, 1e-6) << "dim " << dim << (weighted ? " with weight" : "");
    }
  }
}

// diffusers' apply_rotary_emb (use_real, unbind_dim -1), op by op, as a program records it.
TEST(Rotate, BitwiseEqualToTheOpsItReplaces) {
  at::manual_seed(11);
  const int64_t batch = 2, seq = 13, heads = 3;
  for (const int64_t dim : {2, 24, 64}) {
    const at::Tensor x = at::randn({batch, seq, heads, dim}) * 4;
    const at::Tensor angles = at::rand({seq, dim / 2}) * 6.3;
    const at::Tensor cos = at::cos(angles).repeat_interleave(2, 1), sin = at::sin(angles).repeat_interleave(2, 1);
    at::Tensor out = at::empty_like(x);
    Rotate(x.data_ptr<float>(), batch, seq, heads, dim, cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<float>());
    const std::vector<at::Tensor> pair = x.unflatten(-1, {-1, 2}).unbind(-1);
    const at::Tensor rotated = at::stack({pair[1].neg(), pair[0]}, -1).flatten(3);
    const at::Tensor want = x * cos.view({1, seq, 1, dim}) + rotated * sin.view({1, seq, 1, dim});
    EXPECT_TRUE(at::equal(out, want)) << "dim " << dim << ", max difference "
                                      << (out - want).abs().max().item<float>();
  }
}

}  // namespace
}  // namespace weft::nn::cpu

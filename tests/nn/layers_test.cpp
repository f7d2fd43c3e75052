// runtime/nn/layers.h: ShardedRmsNorm over shards, their statistics summed as an all-reduce would,
// gives the RMS norm of the whole width (fp32, stated tolerance), for one and two normalized dims.
#include "runtime/nn/layers.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace weft::nn {
namespace {

// ShardedRmsNorm of each of `shards` slices of x along dim `split`, each rank's statistics
// replaced by the sum over all of them (what the all-reduce gives), concatenated again.
at::Tensor ByShards(const at::Tensor& x, int64_t dims, int64_t split, int64_t shards, const std::optional<at::Tensor>& weight,
                    std::optional<double> eps) {
  const std::vector<at::Tensor> parts = x.chunk(shards, split);
  std::vector<at::Tensor> weights;
  if (weight) weights = weight->chunk(shards, split - x.dim());
  std::vector<int64_t> reduced;
  for (int64_t d = x.dim() - dims; d < x.dim(); ++d) reduced.push_back(d);
  const at::Tensor total = x.pow(2).sum(reduced, /*keepdim=*/true);
  int64_t full_width = 1;
  for (int64_t d : reduced) full_width *= x.size(d);
  std::vector<at::Tensor> out;
  for (size_t r = 0; r < parts.size(); ++r) {
    int calls = 0;
    out.push_back(ShardedRmsNorm(parts[r], dims, full_width, weight ? std::optional<at::Tensor>(weights[r]) : std::nullopt, eps,
                                 [&](at::Tensor& sum) {
                                   ++calls;
                                   EXPECT_EQ(sum.sizes(), total.sizes());
                                   sum.copy_(total);
                                 }));
    EXPECT_EQ(calls, 1);
  }
  return at::cat(out, split);
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

TEST(ShardedRmsNorm, MatchesRmsNormOfTheWholeWidth) {
  at::manual_seed(5);
  // Over the last dim, split in two (a q norm over all heads, its features sharded).
  const at::Tensor x = at::randn({2, 9, 48}) * 3;
  const at::Tensor w = at::rand({48}) + 0.5;
  EXPECT_LE(RelativeError(ByShards(x, 1, 2, 2, w, 1e-6), at::rms_norm(x, {48}, w, 1e-6)), 1e-6);
  // No weight, and eps nullopt: aten's default, the dtype's epsilon.
  EXPECT_LE(RelativeError(ByShards(x, 1, 2, 4, std::nullopt, std::nullopt), at::rms_norm(x, {48}, std::nullopt, std::nullopt)),
            1e-6);
  // Over (heads, head_dim), sharded by heads.
  const at::Tensor heads = at::randn({2, 9, 6, 8});
  const at::Tensor hw = at::rand({6, 8}) + 0.5;
  EXPECT_LE(RelativeError(ByShards(heads, 2, 2, 3, hw, 1e-6), at::rms_norm(heads, {6, 8}, hw, 1e-6)), 1e-6);
}

TEST(ShardedRmsNorm, KeepsTheInputDtype) {
  const at::Tensor x = at::randn({3, 16}).to(at::kBFloat16);
  const at::Tensor y = ShardedRmsNorm(x, 1, 16, std::nullopt, 1e-6, [](at::Tensor&) {});
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  // The statistics are fp32 even for a bf16 input; the result is only rounded to bf16 at the end.
  const at::Tensor want = at::rms_norm(x.to(at::kFloat), {16}, std::nullopt, 1e-6);
  EXPECT_LE(RelativeError(y.to(at::kFloat), want), 1.0 / 128);
}

}  // namespace
}  // namespace weft::nn

// Tensor parallelism (and CP x TP on one mesh) on the built-in Flux with diffusers' fixture:
// fp32 max abs error <= 1e-4 x max|reference| on every rank, whole-then-sliced weights and
// streamed shards alike; per-rank parameter bytes equal the hand-computed numbers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "executor/exec_error.h"

#include "tests/executor/flux_plans.h"
#include "tests/support/multi_rank.h"

namespace weft::exec {
namespace {

using testing::FluxPlan;
using testing::Mesh;
using testing::RunFlux;

// Elements of tiny Flux's tensor-parallel parameters (inner 64, mlp 256): per double block
// 6 x (64x64 + 64) q/k/v, 2 x 64x64 outs, 2 x (256x64 + 256) mlp-in, 2 x 64x256 mlp-out =
// 99200; per single block 3 x (64x64 + 64) + (256x64 + 256) + 64x320 = 49600; two of each.
constexpr int64_t kShardedElements = 2 * 99200 + 2 * 49600;

void ExpectMatchesDiffusers(int world, dist::MeshShape shape, bool streamed) {
  weft::testing::RunOnRanks(world, shape, [&](dist::DistContext& ctx) {
    InstalledPlan installed;
    auto [out, ref] = RunFlux(ctx, FluxPlan(shape, plan::RotateMethod::kP2p, false), streamed, &installed);
    ASSERT_EQ(out.sizes(), ref.sizes());
    const double scale = ref.abs().max().item<double>();
    const double error = (out - ref).abs().max().item<double>();
    EXPECT_LE(error, 1e-4 * scale) << "rank " << ctx.rank() << ": max abs error " << error;
    EXPECT_EQ(installed.sharded_param_bytes, kShardedElements / shape.tp * 4);
    EXPECT_EQ(installed.tp_modules, 2 * 12 + 2 * 5);
  });
}

TEST(FluxTpTest, Tp2) { ExpectMatchesDiffusers(2, Mesh(1, 1, 2), false); }
TEST(FluxTpTest, Tp4) { ExpectMatchesDiffusers(4, Mesh(1, 1, 4), false); }
TEST(FluxTpTest, Tp2StreamedShards) { ExpectMatchesDiffusers(2, Mesh(1, 1, 2), true); }
TEST(FluxTpTest, Tp2Ulysses2) { ExpectMatchesDiffusers(4, Mesh(1, 2, 2), true); }
TEST(FluxTpTest, Tp2Ring2) { ExpectMatchesDiffusers(4, Mesh(2, 1, 2), false); }

TEST(FluxTpTest, ShardThatDoesNotFitIsRefused) {
  weft::testing::RunOnRanks(2, Mesh(1, 1, 2), [&](dist::DistContext& ctx) {
    plan::ExecutionPlan p = FluxPlan(Mesh(1, 1, 2), plan::RotateMethod::kP2p, false);
    for (plan::ModuleStep& step : p.steps) {
      if (step.module == "single_transformer_blocks.0.proj_out") step.tp->params[0].blocks = {64, 200};
    }
    try {
      RunFlux(ctx, p);
      ADD_FAILURE() << "expected ExecError";
    } catch (const ExecError& e) {
      EXPECT_EQ(std::string(e.what()),
                "parameter `single_transformer_blocks.0.proj_out.weight`: its dim 1 has extent 320 but the plan's "
                "blocks sum to 264");
    }
  });
}

}  // namespace
}  // namespace weft::exec

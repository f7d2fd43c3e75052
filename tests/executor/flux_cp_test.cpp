// Context parallelism on the built-in Flux: the plan of plans/flux.weft (built here as an
// ExecutionPlan by hand, so this test does not depend on the compiler) installed on tiny
// Flux with diffusers' fixture weights; every rank's gathered output must match diffusers'
// unsharded output: fp32 max abs error <= 1e-4 x max|reference|.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "compiler/plan/execution_plan.h"
#include "executor/exec_error.h"
#include "executor/install.h"
#include "runtime/models/flux.h"
#include "tests/executor/flux_plans.h"
#include "tests/support/multi_rank.h"

namespace weft::exec {
namespace {

using testing::FluxPlan;
using testing::Mesh;
using testing::RunFlux;

void ExpectMatchesDiffusers(int world, dist::MeshShape shape, plan::RotateMethod rotate, bool anything) {
  weft::testing::RunOnRanks(world, shape, [&](dist::DistContext& ctx) {
    auto [out, ref] = RunFlux(ctx, FluxPlan(shape, rotate, anything));
    ASSERT_EQ(out.sizes(), ref.sizes());
    const double scale = ref.abs().max().item<double>();
    const double error = (out - ref).abs().max().item<double>();
    EXPECT_LE(error, 1e-4 * scale) << "rank " << ctx.rank() << ": max abs error " << error;
  });
}


TEST(FluxCpTest, Ulysses2) { ExpectMatchesDiffusers(2, Mesh(1, 2), plan::RotateMethod::kAllGather, false); }
TEST(FluxCpTest, Ring2AllGather) { ExpectMatchesDiffusers(2, Mesh(2, 1), plan::RotateMethod::kAllGather, false); }
TEST(FluxCpTest, Ring2P2p) { ExpectMatchesDiffusers(2, Mesh(2, 1), plan::RotateMethod::kP2p, false); }
TEST(FluxCpTest, Ring2Ulysses2) { ExpectMatchesDiffusers(4, Mesh(2, 2), plan::RotateMethod::kP2p, false); }
// 8 text tokens over 3 ranks: 3, 3, 2 (uneven joint sequences 11, 11, 10).
TEST(FluxCpTest, Ring3UnevenP2p) { ExpectMatchesDiffusers(3, Mesh(3, 1), plan::RotateMethod::kP2p, true); }
// USP over 6 ranks with uneven pieces on both axes: text 2, 2, 1, 1, 1, 1; image 4 each.
TEST(FluxCpTest, Ring3Ulysses2Uneven) { ExpectMatchesDiffusers(6, Mesh(3, 2), plan::RotateMethod::kP2p, true); }
TEST(FluxCpTest, Ring3Ulysses2UnevenAllGather) {
  ExpectMatchesDiffusers(6, Mesh(3, 2), plan::RotateMethod::kAllGather, true);
}

TEST(FluxCpTest, EvenModeRefusesLengthThatDoesNotDivide) {
  weft::testing::MultiRankResult result = weft::testing::RunRanks(3, Mesh(3, 1), [&](dist::DistContext& ctx) {
    try {
      RunFlux(ctx, FluxPlan(Mesh(3, 1), plan::RotateMethod::kAllGather, /*anything=*/false));
      ADD_FAILURE() << "expected ExecError";
    } catch (const ExecError& e) {
      EXPECT_EQ(std::string(e.what()),
                "rank " + std::to_string(ctx.rank()) +
                    ": module `` (rule at plans/flux.weft:7:3): argument `encoder_hidden_states` has length 8 along "
                    "dim 1, not divisible by the CP degree 3 (ring x ulysses); enable --ulysses-anything or "
                    "--ring-anything for uneven splits");
    }
  });
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(FluxCpTest, PlanForAnotherModelIsRefused) {
  weft::testing::RunOnRanks(2, Mesh(1, 2), [&](dist::DistContext& ctx) {
    plan::ExecutionPlan p = FluxPlan(Mesh(1, 2), plan::RotateMethod::kAllGather, false);
    p.model_class = "WanTransformer3DModel";
    models::FluxTransformer2DModel model(models::FluxConfigByName("tiny"));
    try {
      Install(p, model, ctx);
      ADD_FAILURE() << "expected ExecError";
    } catch (const ExecError& e) {
      EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(ctx.rank()) +
                                           ": the plan is for WanTransformer3DModel but the model is "
                                           "FluxTransformer2DModel");
    }
  });
}

TEST(FluxCpTest, RanksWithDifferentPlansFailTogether) {
  weft::testing::RunOnRanks(2, Mesh(1, 2), [&](dist::DistContext& ctx) {
    models::FluxTransformer2DModel model(models::FluxConfigByName("tiny"));
    InstallOptions options;
    options.plan_hash = ctx.rank() == 0 ? "sha256:aaaa" : "sha256:bbbb";
    try {
      Install(FluxPlan(Mesh(1, 2), plan::RotateMethod::kAllGather, false), model, ctx, options);
      ADD_FAILURE() << "expected ExecError";
    } catch (const ExecError& e) {
      EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(ctx.rank()) +
                                           ": ranks 1 run a different plan than rank 0 (every rank must load the "
                                           "same one)");
    }
  });
}

}  // namespace
}  // namespace weft::exec

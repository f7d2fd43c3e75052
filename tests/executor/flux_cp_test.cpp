// Context parallelism on the built-in Flux: the plan of plans/flux.weft (built here as an
// ExecutionPlan by hand, so this test does not depend on the compiler) installed on tiny
// Flux with diffusers' fixture weights; every rank's gathered output must match diffusers'
// unsharded output: fp32 max abs error <= 1e-4 x max|reference|.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "compiler/plan/execution_plan.h"
#include "executor/exec_error.h"
#include "executor/install.h"
#include "runtime/io/safetensors.h"
#include "runtime/models/flux.h"
#include "runtime/nn/load_weights.h"
#include "tests/support/multi_rank.h"

namespace weft::exec {
namespace {

const std::string kDir = std::string(WEFT_FIXTURES) + "/flux_tiny";

plan::Origin At(int line) { return plan::Origin{"plans/flux.weft", line, 3, false}; }

plan::Split SplitArg(const std::string& name, int64_t dim, int64_t rank, int line) {
  plan::Split split;
  split.argument = name;
  split.dim = dim;
  split.rank = rank;
  split.origin = At(line);
  return split;
}

// The Flux CP plan for `mesh`: split the four sequence inputs at the root, gather proj_out,
// every attention site context-parallel in the mesh's mode.
plan::ExecutionPlan FluxPlan(const dist::MeshShape& shape, plan::RotateMethod rotate, bool anything) {
  plan::ExecutionPlan p;
  p.plan_name = "flux";
  p.model_class = "FluxTransformer2DModel";
  p.mesh.axes = {{"ring", shape.ring}, {"ulysses", shape.ulysses}, {"tp", shape.tp}};
  p.mesh.world_size = shape.WorldSize();
  p.mesh.rotate_method = rotate;
  p.mesh.ring_anything = anything && shape.ring > 1;
  p.mesh.ulysses_anything = anything && shape.ulysses > 1;
  plan::ModuleStep root;
  root.module = "";
  root.splits = {SplitArg("hidden_states", 1, 3, 6), SplitArg("encoder_hidden_states", 1, 3, 7),
                 SplitArg("img_ids", 0, 2, 8), SplitArg("txt_ids", 0, 2, 9)};
  p.steps.push_back(root);
  plan::AttentionMode mode = shape.ring > 1 && shape.ulysses > 1 ? plan::AttentionMode::kUsp
                             : shape.ring > 1                    ? plan::AttentionMode::kRing
                                                                 : plan::AttentionMode::kUlysses;
  for (std::string list : {"transformer_blocks", "single_transformer_blocks"}) {
    for (int i = 0; i < 2; ++i) {
      plan::ModuleStep step;
      step.module = list + "." + std::to_string(i) + ".attn";
      plan::Attention attention;
      attention.mode = mode;
      attention.heads = 4;
      attention.head_dim = 16;
      attention.ring = shape.ring;
      attention.ulysses = shape.ulysses;
      attention.rotate_method = rotate;
      attention.origin = At(12);
      step.attention = attention;
      p.steps.push_back(step);
    }
  }
  plan::ModuleStep out;
  out.module = "proj_out";
  plan::Gather gather;
  gather.output = 0;
  gather.dim = 1;
  gather.rank = 3;
  gather.origin = At(10);
  out.gathers = {gather};
  p.steps.push_back(out);
  return p;
}

// Runs tiny Flux with `plan` installed on this rank; returns (output, reference).
std::pair<at::Tensor, at::Tensor> RunFlux(dist::DistContext& ctx, const plan::ExecutionPlan& plan) {
  io::SafetensorsFile weights = io::SafetensorsFile::Open(kDir + "/weights.safetensors");
  io::SafetensorsFile inputs = io::SafetensorsFile::Open(kDir + "/inputs.safetensors");
  models::FluxTransformer2DModel model(models::FluxConfigByName("tiny"));
  nn::LoadWeights(model, {&weights}, at::kFloat);
  Install(plan, model, ctx, {"sha256:test-plan", ""});
  nn::Args args;
  for (const std::string& key : inputs.Keys()) args.Set(key, inputs.Load(key));
  at::Tensor out = nn::OutputTensor(nn::Call(model, args), 0, model);
  return {out, io::SafetensorsFile::Open(kDir + "/outputs.safetensors").Load("output")};
}

void ExpectMatchesDiffusers(int world, dist::MeshShape shape, plan::RotateMethod rotate, bool anything) {
  testing::RunOnRanks(world, shape, [&](dist::DistContext& ctx) {
    auto [out, ref] = RunFlux(ctx, FluxPlan(shape, rotate, anything));
    ASSERT_EQ(out.sizes(), ref.sizes());
    const double scale = ref.abs().max().item<double>();
    const double error = (out - ref).abs().max().item<double>();
    EXPECT_LE(error, 1e-4 * scale) << "rank " << ctx.rank() << ": max abs error " << error;
  });
}

dist::MeshShape Mesh(int ring, int ulysses) {
  dist::MeshShape shape;
  shape.ring = ring;
  shape.ulysses = ulysses;
  return shape;
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
  testing::MultiRankResult result = testing::RunRanks(3, Mesh(3, 1), [&](dist::DistContext& ctx) {
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
  testing::RunOnRanks(2, Mesh(1, 2), [&](dist::DistContext& ctx) {
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
  testing::RunOnRanks(2, Mesh(1, 2), [&](dist::DistContext& ctx) {
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

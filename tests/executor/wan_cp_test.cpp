// Context parallelism on the built-in Wan: plans/wan.weft's steps (built by hand as an
// ExecutionPlan) installed on tiny Wan with diffusers' fixture weights; every rank's gathered
// output must match diffusers' unsharded output: fp32 max abs error <= 1e-4 x max|reference|.
// wan_tiny has 40 latent tokens (5 x 2 x 4): even over 2 and 4 CP ranks, uneven over 3 and 6.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "compiler/plan/execution_plan.h"
#include "executor/exec_error.h"
#include "executor/install.h"
#include "runtime/io/safetensors.h"
#include "runtime/models/wan.h"
#include "runtime/nn/load_weights.h"
#include "tests/executor/flux_plans.h"
#include "tests/support/multi_rank.h"

namespace weft::exec {
namespace {

const std::string kDir = std::string(WEFT_FIXTURES) + "/wan_tiny";

plan::Origin At(int line) { return plan::Origin{"plans/wan.weft", line, 3, false}; }

plan::ExecutionPlan WanPlan(const dist::MeshShape& shape, plan::RotateMethod rotate, bool anything) {
  plan::ExecutionPlan p;
  p.plan_name = "wan";
  p.model_class = "WanTransformer3DModel";
  p.mesh.axes = {{"tp", shape.tp}, {"ring", shape.ring}, {"ulysses", shape.ulysses}};
  p.mesh.world_size = shape.WorldSize();
  p.mesh.rotate_method = rotate;
  p.mesh.ring_anything = anything && shape.ring > 1;
  p.mesh.ulysses_anything = anything && shape.ulysses > 1;

  if (shape.ring * shape.ulysses > 1) {
    plan::ModuleStep root;
    root.module = "";
    plan::Split timestep;
    timestep.argument = "timestep";
    timestep.dim = 1;
    timestep.rank = 2;
    timestep.optional = true;
    timestep.origin = At(8);
    root.splits = {timestep};
    p.steps.push_back(root);

    plan::ModuleStep rope;
    rope.module = "rope";
    for (int64_t output : {0, 1}) {
      plan::Split split;
      split.target = plan::Split::Target::kOutput;
      split.output = output;
      split.dim = 1;
      split.rank = 4;
      split.origin = At(10 + static_cast<int>(output));
      rope.splits.push_back(split);
    }
    p.steps.push_back(rope);

    plan::ModuleStep block0;
    block0.module = "blocks.0";
    plan::Split hidden;
    hidden.argument = "hidden_states";
    hidden.dim = 1;
    hidden.rank = 3;
    hidden.origin = At(13);
    block0.splits = {hidden};
    p.steps.push_back(block0);

    plan::AttentionMode mode = shape.ring > 1 && shape.ulysses > 1 ? plan::AttentionMode::kUsp
                               : shape.ring > 1                    ? plan::AttentionMode::kRing
                                                                   : plan::AttentionMode::kUlysses;
    for (int i = 0; i < 2; ++i) {
      plan::ModuleStep step;
      step.module = "blocks." + std::to_string(i) + ".attn1";
      plan::Attention attention;
      attention.mode = mode;
      attention.heads = 4;
      attention.head_dim = 16;
      attention.ring = shape.ring;
      attention.ulysses = shape.ulysses;
      attention.rotate_method = rotate;
      attention.origin = At(15);
      step.attention = attention;
      p.steps.push_back(step);
    }
    plan::ModuleStep out;
    out.module = "proj_out";
    plan::Gather gather;
    gather.output = 0;
    gather.dim = 1;
    gather.rank = 3;
    gather.origin = At(14);
    out.gathers = {gather};
    p.steps.push_back(out);
  }

  // Tensor parallelism as plans/wan.weft: q/k/v and their cross-head norms colwise, outputs rowwise.
  if (shape.tp > 1) {
    const int64_t t = shape.tp, inner = 64, ffn = 128;
    auto add = [&](const std::string& module, plan::ShardStyle style, std::vector<plan::ParamShard> params) {
      plan::ModuleStep step;
      step.module = module;
      plan::TensorParallel tp;
      tp.style = style;
      tp.params = std::move(params);
      tp.all_reduce_output = style == plan::ShardStyle::kRowwise;
      tp.origin = At(22);
      step.tp = tp;
      p.steps.push_back(step);
    };
    auto colwise = [&](int64_t in, int64_t out) {
      return std::vector<plan::ParamShard>{{"weight", 0, {out}, {out, in}, {out / t, in}},
                                           {"bias", 0, {out}, {out}, {out / t}}};
    };
    auto rowwise = [&](int64_t in, int64_t out) {
      return std::vector<plan::ParamShard>{{"weight", 1, {in}, {out, in}, {out, in / t}}, {"bias", -1, {}, {out}, {out}}};
    };
    const std::vector<plan::ParamShard> norm = {{"weight", 0, {inner}, {inner}, {inner / t}}};
    for (int i = 0; i < 2; ++i) {
      const std::string block = "blocks." + std::to_string(i);
      for (const char* attn : {".attn1", ".attn2"}) {
        for (const char* proj : {".to_q", ".to_k", ".to_v"}) add(block + attn + proj, plan::ShardStyle::kColwise, colwise(inner, inner));
        add(block + attn + ".norm_q", plan::ShardStyle::kColwise, norm);
        add(block + attn + ".norm_k", plan::ShardStyle::kColwise, norm);
        add(block + attn + ".to_out.0", plan::ShardStyle::kRowwise, rowwise(inner, inner));
      }
      add(block + ".ffn.net.0.proj", plan::ShardStyle::kColwise, colwise(inner, ffn));
      add(block + ".ffn.net.2", plan::ShardStyle::kRowwise, rowwise(ffn, inner));
    }
  }
  return p;
}

// `case_name` picks the fixture's inputs/outputs (`bf16`: diffusers' bf16 run, as loaded by
// from_pretrained(torch_dtype=bfloat16); compared at 2e-2 x max|ref| like the unsharded bf16
// parity test, since bf16 rounding differs between kernels and reduction orders).
void ExpectMatchesDiffusers(int world, dist::MeshShape shape, plan::RotateMethod rotate, bool anything,
                            const std::string& case_name = "") {
  const bool bf16 = case_name == "bf16";
  weft::testing::RunOnRanks(world, shape, [&](dist::DistContext& ctx) {
    const std::string suffix = case_name.empty() ? "" : "_" + case_name;
    io::SafetensorsFile weights = io::SafetensorsFile::Open(kDir + "/weights.safetensors");
    io::SafetensorsFile inputs = io::SafetensorsFile::Open(kDir + "/inputs" + suffix + ".safetensors");
    models::WanTransformer3DModel model(models::WanConfigByName("tiny"));
    nn::LoadWeights(model, {&weights}, at::kFloat);
    if (bf16) models::CastWanParameters(model, at::kBFloat16);
    Install(WanPlan(shape, rotate, anything), model, ctx, {"sha256:test-plan", ""});
    nn::Args args;
    for (const std::string& key : inputs.Keys()) {
      args.Set(key, bf16 ? inputs.Load(key).to(at::kBFloat16) : inputs.Load(key));
    }
    at::Tensor out = nn::OutputTensor(nn::Call(model, args), 0, model);
    if (bf16) {
      ASSERT_EQ(out.scalar_type(), at::kBFloat16);
      out = out.to(at::kFloat);
    }
    at::Tensor ref = io::SafetensorsFile::Open(kDir + "/outputs" + suffix + ".safetensors").Load("output");
    ASSERT_EQ(out.sizes(), ref.sizes());
    const double scale = ref.abs().max().item<double>();
    const double error = (out - ref).abs().max().item<double>();
    EXPECT_LE(error, (bf16 ? 2e-2 : 1e-4) * scale) << "rank " << ctx.rank() << ": max abs error " << error;
    if (ctx.rank() == 0) std::cout << "max abs error " << error << " (max|ref| " << scale << ")\n";
  });
}

using testing::Mesh;

TEST(WanCpTest, Ulysses2) { ExpectMatchesDiffusers(2, Mesh(1, 2), plan::RotateMethod::kAllGather, false); }
TEST(WanCpTest, Ring2AllGather) { ExpectMatchesDiffusers(2, Mesh(2, 1), plan::RotateMethod::kAllGather, false); }
TEST(WanCpTest, Ring2P2p) { ExpectMatchesDiffusers(2, Mesh(2, 1), plan::RotateMethod::kP2p, false); }
TEST(WanCpTest, Ring2Ulysses2) { ExpectMatchesDiffusers(4, Mesh(2, 2), plan::RotateMethod::kP2p, false); }
TEST(WanCpTest, Ring3UnevenP2p) { ExpectMatchesDiffusers(3, Mesh(3, 1), plan::RotateMethod::kP2p, true); }
// (ulysses=3 is refused by UlyssesAttention: 4 heads padded to 6 would leave the last rank no real head.)
TEST(WanCpTest, Ring2Ulysses2PerTokenTimesteps) {
  ExpectMatchesDiffusers(4, Mesh(2, 2), plan::RotateMethod::kP2p, false, "seq_timestep");
}
TEST(WanCpTest, Ring3UnevenPerTokenTimesteps) {
  ExpectMatchesDiffusers(3, Mesh(3, 1), plan::RotateMethod::kAllGather, true, "seq_timestep");
}
// bf16 as diffusers runs it, sharded: every mode stays within the unsharded bf16 bound.
TEST(WanCpTest, Ulysses2Bf16) { ExpectMatchesDiffusers(2, Mesh(1, 2), plan::RotateMethod::kAllGather, false, "bf16"); }
TEST(WanCpTest, Ring2P2pBf16) { ExpectMatchesDiffusers(2, Mesh(2, 1), plan::RotateMethod::kP2p, false, "bf16"); }
TEST(WanCpTest, Ring3UnevenBf16) { ExpectMatchesDiffusers(3, Mesh(3, 1), plan::RotateMethod::kAllGather, true, "bf16"); }
TEST(WanCpTest, Ring2Ulysses2Bf16) { ExpectMatchesDiffusers(4, Mesh(2, 2), plan::RotateMethod::kP2p, false, "bf16"); }
TEST(WanTpTest, Tp2Bf16) { ExpectMatchesDiffusers(2, Mesh(1, 1, 2), plan::RotateMethod::kP2p, false, "bf16"); }

// Tensor parallelism: Wan's q/k RMSNorms normalise over all heads, so with colwise q/k each
// rank holds a slice of the norm weight and the squared sums are all-reduced over tp.
TEST(WanTpTest, Tp2) { ExpectMatchesDiffusers(2, Mesh(1, 1, 2), plan::RotateMethod::kP2p, false); }
TEST(WanTpTest, Tp4) { ExpectMatchesDiffusers(4, Mesh(1, 1, 4), plan::RotateMethod::kP2p, false); }
TEST(WanTpTest, Tp2Ulysses2) { ExpectMatchesDiffusers(4, Mesh(1, 2, 2), plan::RotateMethod::kP2p, false); }
TEST(WanTpTest, Tp2Ring2PerTokenTimesteps) {
  ExpectMatchesDiffusers(4, Mesh(2, 1, 2), plan::RotateMethod::kP2p, false, "seq_timestep");
}

}  // namespace
}  // namespace weft::exec

#include "tests/executor/flux_plans.h"

#include <ATen/ATen.h>

#include "runtime/io/diffusers_dir.h"
#include "runtime/io/safetensors.h"
#include "runtime/models/flux.h"
#include "runtime/nn/load_weights.h"

namespace weft::exec::testing {
namespace {

const std::string kDir = std::string(WEFT_FIXTURES) + "/flux_tiny";
constexpr int64_t kInner = 64, kMlp = 256, kHeads = 4, kHeadDim = 16;

plan::Origin At(int line) { return plan::Origin{"plans/flux.weft", line, 3, false}; }

plan::Split SplitArg(const std::string& name, int64_t dim, int64_t rank, int line) {
  plan::Split split;
  split.argument = name;
  split.dim = dim;
  split.rank = rank;
  split.origin = At(line);
  return split;
}

plan::ModuleStep& StepFor(plan::ExecutionPlan& p, const std::string& module) {
  for (plan::ModuleStep& step : p.steps) {
    if (step.module == module) return step;
  }
  p.steps.push_back(plan::ModuleStep{});
  p.steps.back().module = module;
  return p.steps.back();
}

// A tensor-parallel step for a Linear(in, out): colwise shards weight rows and bias;
// rowwise shards weight columns (blocks: packed input layout) and keeps the bias whole.
void AddTp(plan::ExecutionPlan& p, const std::string& module, plan::ShardStyle style, int64_t in, int64_t out,
           std::vector<int64_t> row_blocks = {}) {
  plan::TensorParallel tp;
  tp.style = style;
  tp.origin = At(20);
  const int64_t t = p.mesh.Tp();
  if (style == plan::ShardStyle::kColwise) {
    tp.params = {{"weight", 0, {out}, {out, in}, {out / t, in}}, {"bias", 0, {out}, {out}, {out / t}}};
  } else {
    if (row_blocks.empty()) row_blocks = {in};
    tp.params = {{"weight", 1, row_blocks, {out, in}, {out, in / t}}, {"bias", -1, {}, {out}, {out}}};
    tp.all_reduce_output = true;
  }
  tp.blocks = style == plan::ShardStyle::kColwise ? std::vector<int64_t>{out} : row_blocks;
  StepFor(p, module).tp = tp;
}

}  // namespace

plan::ExecutionPlan FluxPlan(const dist::MeshShape& shape, plan::RotateMethod rotate, bool anything) {
  plan::ExecutionPlan p;
  p.plan_name = "flux";
  p.model_class = "FluxTransformer2DModel";
  p.mesh.axes = {{"tp", shape.tp}, {"ring", shape.ring}, {"ulysses", shape.ulysses}};
  p.mesh.world_size = shape.WorldSize();
  p.mesh.rotate_method = rotate;
  p.mesh.ring_anything = anything && shape.ring > 1;
  p.mesh.ulysses_anything = anything && shape.ulysses > 1;
  const bool cp = shape.ring * shape.ulysses > 1;
  if (cp) {
    StepFor(p, "").splits = {SplitArg("hidden_states", 1, 3, 6), SplitArg("encoder_hidden_states", 1, 3, 7),
                             SplitArg("img_ids", 0, 2, 8), SplitArg("txt_ids", 0, 2, 9)};
  }
  const plan::AttentionMode mode = shape.ring > 1 && shape.ulysses > 1 ? plan::AttentionMode::kUsp
                                   : shape.ring > 1                    ? plan::AttentionMode::kRing
                                   : shape.ulysses > 1                 ? plan::AttentionMode::kUlysses
                                                                       : plan::AttentionMode::kLocal;
  for (std::string list : {"transformer_blocks", "single_transformer_blocks"}) {
    for (int i = 0; i < 2; ++i) {
      const std::string block = list + "." + std::to_string(i);
      if (cp) {
        plan::Attention attention;
        attention.mode = mode;
        attention.heads = kHeads;
        attention.head_dim = kHeadDim;
        attention.local_heads = kHeads / shape.tp;
        attention.ring = shape.ring;
        attention.ulysses = shape.ulysses;
        attention.rotate_method = rotate;
        attention.origin = At(12);
        StepFor(p, block + ".attn").attention = attention;
      }
      if (shape.tp > 1) {
        using S = plan::ShardStyle;
        for (const char* proj : {".attn.to_q", ".attn.to_k", ".attn.to_v"}) AddTp(p, block + proj, S::kColwise, kInner, kInner);
        if (list == "transformer_blocks") {
          for (const char* proj : {".attn.add_q_proj", ".attn.add_k_proj", ".attn.add_v_proj"}) {
            AddTp(p, block + proj, S::kColwise, kInner, kInner);
          }
          AddTp(p, block + ".attn.to_out.0", S::kRowwise, kInner, kInner);
          AddTp(p, block + ".attn.to_add_out", S::kRowwise, kInner, kInner);
          for (const char* ff : {".ff", ".ff_context"}) {
            AddTp(p, block + ff + ".net.0.proj", S::kColwise, kInner, kMlp);
            AddTp(p, block + ff + ".net.2", S::kRowwise, kMlp, kInner);
          }
        } else {
          AddTp(p, block + ".proj_mlp", S::kColwise, kInner, kMlp);
          AddTp(p, block + ".proj_out", S::kPackedRowwise, kInner + kMlp, kInner, {kInner, kMlp});
        }
      }
    }
  }
  if (cp) {
    plan::Gather gather;
    gather.output = 0;
    gather.dim = 1;
    gather.rank = 3;
    gather.origin = At(10);
    StepFor(p, "proj_out").gathers = {gather};
  }
  return p;
}

std::pair<at::Tensor, at::Tensor> RunFlux(dist::DistContext& ctx, const plan::ExecutionPlan& plan, bool streamed_shards,
                                          InstalledPlan* installed) {
  std::vector<io::SafetensorsFile> shards;
  for (const std::string& file : io::DiffusersWeightFiles(kDir + "/model")) shards.push_back(io::SafetensorsFile::Open(file));
  std::vector<const io::SafetensorsFile*> weights;
  for (const io::SafetensorsFile& shard : shards) weights.push_back(&shard);
  io::SafetensorsFile inputs = io::SafetensorsFile::Open(kDir + "/inputs.safetensors");
  models::FluxTransformer2DModel model(models::FluxConfigByName("tiny"));
  InstallOptions options;
  options.plan_hash = "sha256:test-plan";
  if (streamed_shards) {
    LoadPlannedWeights(plan, model, ctx, weights, at::kFloat);
    options.weights_already_sharded = true;
  } else {
    nn::LoadWeights(model, weights, at::kFloat);
  }
  InstalledPlan result = Install(plan, model, ctx, options);
  if (installed != nullptr) *installed = result;
  nn::Args args;
  for (const std::string& key : inputs.Keys()) args.Set(key, inputs.Load(key));
  at::Tensor out = nn::OutputTensor(nn::Call(model, args), 0, model);
  return {out, io::SafetensorsFile::Open(kDir + "/outputs.safetensors").Load("output")};
}

dist::MeshShape Mesh(int ring, int ulysses, int tp) {
  dist::MeshShape shape;
  shape.ring = ring;
  shape.ulysses = ulysses;
  shape.tp = tp;
  return shape;
}

}  // namespace weft::exec::testing

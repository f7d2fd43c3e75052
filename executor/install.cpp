#include "executor/install.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "executor/cp_hooks.h"
#include "executor/exec_error.h"
#include "executor/tp_shard.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/load_weights.h"
#include "runtime/nn/attention_site.h"

namespace weft::exec {
namespace {

constexpr int64_t kHashBytes = 64;

// Rowwise tensor parallelism: every rank holds a slice of the input features, so forward
// gives partial sums; they are all-reduced over the tp axis and the bias is added once.
class RowwiseReduceHook : public nn::Hook {
 public:
  RowwiseReduceHook(at::Tensor bias, plan::Origin origin, dist::DistContext& ctx)
      : bias_(bias.defined() ? std::optional<at::Tensor>(std::move(bias)) : std::nullopt),
        origin_(std::move(origin)),
        ctx_(ctx) {}
  void PostForward(nn::Module& module, const nn::Args&, nn::Outputs& outputs) override {
    outputs[0] = SumRowwisePartials(ctx_, nn::OutputTensor(outputs, 0, module), bias_,
                                    Where(ctx_, module.fqn(), origin_) + ": rowwise all-reduce");
  }

 private:
  std::optional<at::Tensor> bias_;
  plan::Origin origin_;
  dist::DistContext& ctx_;
};

// Shards the parameters of one Linear, or of a colwise RMSNorm (or checks that they already are
// shards). A rowwise Linear's bias moves after an all-reduce hook; a colwise RMSNorm
// all-reduces its statistics over tp. Returns the local bytes of its sharded parameters.
int64_t InstallTensorParallel(const plan::ModuleStep& step, nn::Module& module, dist::DistContext& ctx,
                              const std::map<std::string, ShardSpec>& specs, const InstallOptions& options) {
  const plan::TensorParallel& tp = *step.tp;
  auto* linear = dynamic_cast<nn::Linear*>(&module);
  auto* norm = dynamic_cast<nn::RMSNorm*>(&module);
  const bool sharded_norm = norm != nullptr && tp.style == plan::ShardStyle::kColwise;
  if (linear == nullptr && !sharded_norm) {
    throw ExecError(Where(ctx, step.module, tp.origin) + ": " + std::string(plan::ShardStyleName(tp.style)) +
                    " applies to Linear layers (and colwise to RMSNorm over a sharded width), but this module is a " +
                    module.type());
  }
  int64_t bytes = 0;
  for (auto& [name, param] : module.parameters()) {
    const std::string fqn = step.module.empty() ? name : step.module + "." + name;
    auto spec = specs.find(fqn);
    if (spec == specs.end()) continue;
    at::Tensor& slot = module.Parameter(name);
    if (slot.is_meta()) {
      throw ExecError(Where(ctx, step.module, tp.origin) + ": parameter `" + fqn + "` has no value (load weights first)");
    }
    if (options.weights_already_sharded) {
      if (slot.size(spec->second.dim) != spec->second.LocalSize()) {
        throw ExecError(Where(ctx, step.module, tp.origin) + ": parameter `" + fqn + "` has extent " +
                        std::to_string(slot.size(spec->second.dim)) + " along dim " + std::to_string(spec->second.dim) +
                        " but this rank's shard should have " + std::to_string(spec->second.LocalSize()));
      }
    } else {
      slot = ShardTensor(slot, spec->second, fqn);
    }
    bytes += slot.numel() * slot.element_size();
  }
  if (sharded_norm) {
    auto spec = specs.find(step.module.empty() ? "weight" : step.module + ".weight");
    if (spec == specs.end()) {
      throw ExecError(Where(ctx, step.module, tp.origin) + ": the plan shards no `weight` of this RMSNorm");
    }
    int64_t full = 0;
    for (int64_t block : spec->second.blocks) full += block;
    dist::DistContext* context = &ctx;
    norm->ShardStatistics([context](at::Tensor& sum) { context->AllReduce(dist::Axis::kTp, sum); }, full);
  } else if (tp.style == plan::ShardStyle::kRowwise || tp.style == plan::ShardStyle::kPackedRowwise) {
    module.AddHook(std::make_shared<RowwiseReduceHook>(linear->DetachBias(), tp.origin, ctx));
  }
  return bytes;
}

}  // namespace

void LoadPlannedWeights(const plan::ExecutionPlan& plan, nn::Module& model, const dist::DistContext& ctx,
                        const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype) {
  const std::map<std::string, ShardSpec> specs = ShardSpecs(plan, ctx.AxisRank(dist::Axis::kTp));
  nn::LoadWeights(model, files, dtype, [&](const io::SafetensorsFile& file, const std::string& key, at::ScalarType type) {
    auto spec = specs.find(key);
    return spec == specs.end() ? at::Tensor() : LoadShard(file, key, spec->second, type);
  });
}

at::Tensor SumRowwisePartials(dist::DistContext& ctx, const at::Tensor& partial, const std::optional<at::Tensor>& bias,
                              const std::string& what) {
  at::Tensor sum = partial.contiguous();
  try {
    ctx.AllReduce(dist::Axis::kTp, sum);
  } catch (const std::exception& e) {
    throw ExecError(what + " failed: " + ErrorText(e));
  }
  return bias ? sum.add_(*bias) : sum;
}

bool LoadWeightFiles(const std::vector<std::string>& paths, const plan::ExecutionPlan* plan, nn::Module& model,
                     const dist::DistContext& ctx, at::ScalarType dtype) {
  std::vector<io::SafetensorsFile> files;
  for (const std::string& path : paths) files.push_back(io::SafetensorsFile::Open(path));
  std::vector<const io::SafetensorsFile*> pointers;
  for (const auto& f : files) pointers.push_back(&f);
  if (plan != nullptr && plan->mesh.Tp() > 1) {
    LoadPlannedWeights(*plan, model, ctx, pointers, dtype);
    return true;
  }
  nn::LoadWeights(model, pointers, dtype);
  return false;
}

void CheckMesh(const plan::ExecutionPlan& plan, const dist::DistContext& ctx) {
  const dist::MeshShape& shape = ctx.mesh().shape();
  if (plan.mesh.Ring() != shape.ring || plan.mesh.Ulysses() != shape.ulysses || plan.mesh.Tp() != shape.tp) {
    throw ExecError("rank " + std::to_string(ctx.rank()) + ": the plan was compiled for mesh " + plan.mesh.ToString() +
                    " but this job runs on " + shape.ToString());
  }
}

void CheckSameOnAllRanks(dist::DistContext& ctx, const std::string& what, const std::string& hash) {
  at::Tensor mine = at::zeros({kHashBytes}, at::kByte);
  std::memcpy(mine.data_ptr(), hash.data(), std::min<size_t>(hash.size(), kHashBytes));
  at::Tensor all = ctx.AllGather(dist::Axis::kWorld, mine, 0).reshape({ctx.world_size(), kHashBytes});
  std::string differing;
  for (int r = 1; r < ctx.world_size(); ++r) {
    if (!at::equal(all[r], all[0])) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differing.empty()) {
    throw ExecError("rank " + std::to_string(ctx.rank()) + ": ranks " + differing + " run a different " + what +
                    " than rank 0 (every rank must load the same one)");
  }
}

InstalledPlan Install(const plan::ExecutionPlan& plan, nn::Module& model, dist::DistContext& ctx,
                      const InstallOptions& options) {
  const std::string me = "rank " + std::to_string(ctx.rank()) + ": ";
  if (!options.plan_hash.empty()) CheckSameOnAllRanks(ctx, "plan", options.plan_hash);
  if (plan.model_class != model.type()) {
    throw ExecError(me + "the plan is for " + plan.model_class + " but the model is " + model.type());
  }
  if (!options.model_graph_hash.empty() && !plan.graph_hash.empty() && options.model_graph_hash != plan.graph_hash) {
    throw ExecError(me + "the plan was compiled against graph " + plan.graph_hash + " but the model's graph is " +
                    options.model_graph_hash + " (recompile the plan for this model and config)");
  }
  CheckMesh(plan, ctx);
  const bool uneven = plan.mesh.Uneven();
  const std::map<std::string, ShardSpec> specs = ShardSpecs(plan, ctx.AxisRank(dist::Axis::kTp));

  InstalledPlan installed;
  for (const plan::ModuleStep& step : plan.steps) {
    nn::Module* module = model.Find(step.module);
    if (module == nullptr) {
      throw ExecError(me + "the plan has a step for module `" + step.module + "`, which " + model.type() + " does not have");
    }
    for (const plan::Split& split : step.splits) {
      module->AddHook(std::make_shared<SplitHook>(split, uneven, ctx));
      ++installed.split_hooks;
      installed.lines.push_back(step.module + ": split " +
                                (split.target == plan::Split::Target::kArgument ? "`" + split.argument + "`"
                                                                                : "output " + std::to_string(split.output)) +
                                " dim " + std::to_string(split.dim));
    }
    for (const plan::Gather& gather : step.gathers) {
      module->AddHook(std::make_shared<GatherHook>(gather, uneven, ctx));
      ++installed.gather_hooks;
      installed.lines.push_back(step.module + ": gather output " + std::to_string(gather.output) + " dim " +
                                std::to_string(gather.dim));
    }
    if (step.attention) {
      auto* site = dynamic_cast<nn::AttentionModule*>(module);
      if (site == nullptr) {
        throw ExecError(Where(ctx, step.module, step.attention->origin) + ": the plan sets an attention mode, but " +
                        module->type() + " is not an attention site");
      }
      if (step.attention->mode == plan::AttentionMode::kLocal) {
        site->SetKernel(std::make_shared<nn::LocalAttentionKernel>());
        ++installed.local_attention_sites;
      } else {
        site->SetKernel(std::make_shared<CpAttentionKernel>(*step.attention, step.module, uneven, ctx));
        ++installed.cp_attention_sites;
      }
      installed.lines.push_back(step.module + ": attention " + site->kernel().Name());
    }
    if (step.tp && step.tp->style != plan::ShardStyle::kReplicate && plan.mesh.Tp() > 1) {
      installed.sharded_param_bytes += InstallTensorParallel(step, *module, ctx, specs, options);
      ++installed.tp_modules;
      installed.lines.push_back(step.module + ": " + std::string(plan::ShardStyleName(step.tp->style)));
    }
  }
  return installed;
}

void Uninstall(nn::Module& model) {
  model.Walk([](nn::Module& module) {
    module.ClearHooks();
    if (auto* site = dynamic_cast<nn::AttentionModule*>(&module)) site->SetKernel(std::make_shared<nn::LocalAttentionKernel>());
  });
}

}  // namespace weft::exec

#include "executor/install.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "executor/cp_hooks.h"
#include "executor/exec_error.h"
#include "runtime/nn/attention_site.h"

namespace weft::exec {
namespace {

constexpr int64_t kHashBytes = 64;

void CheckMesh(const plan::ExecutionPlan& plan, const dist::DistContext& ctx) {
  const dist::MeshShape& shape = ctx.mesh().shape();
  if (plan.mesh.Ring() != shape.ring || plan.mesh.Ulysses() != shape.ulysses || plan.mesh.Tp() != shape.tp) {
    throw ExecError("rank " + std::to_string(ctx.rank()) + ": the plan was compiled for mesh " + plan.mesh.ToString() +
                    " but this job runs on " + shape.ToString());
  }
}

}  // namespace

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
        site->SetKernel(std::make_shared<CpAttentionKernel>(*step.attention, step.module, ctx));
        ++installed.cp_attention_sites;
      }
      installed.lines.push_back(step.module + ": attention " + site->kernel().Name());
    }
    if (step.tp && step.tp->style != plan::ShardStyle::kReplicate && plan.mesh.Tp() > 1) {
      throw ExecError(Where(ctx, step.module, step.tp->origin) +
                      ": tensor-parallel steps are not supported by this executor yet");
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

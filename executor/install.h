#pragma once

// Install: puts an ExecutionPlan onto a model, on one rank. Every split and gather step
// becomes a hook on its module, every attention step sets its site's kernel. The model is
// then run as usual (nn::Call on the root) and computes the sharded forward.

#include <optional>
#include <string>
#include <vector>

#include "compiler/plan/execution_plan.h"
#include "runtime/dist/dist_context.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/module.h"

namespace weft::exec {

struct InstallOptions {
  // Content hash of the plan. When set, every rank's hash is compared over the world
  // before anything else (one all-gather): ranks that loaded different plans fail at once,
  // naming the ranks, instead of hanging or computing garbage in the first collective.
  std::string plan_hash;
  // Graph hash of the model being installed on (its weft.graph/1 structure). When set and
  // the plan names a graph hash, they must be equal.
  std::string model_graph_hash;
  // The model's tensor-parallel parameters already hold this rank's shards (loaded with
  // LoadPlannedWeights' streaming path); Install then only checks their shapes. Otherwise
  // Install slices the full parameters in place.
  bool weights_already_sharded = false;
};

// What was installed, for reports and tests.
struct InstalledPlan {
  int split_hooks = 0;
  int gather_hooks = 0;
  int cp_attention_sites = 0;
  int local_attention_sites = 0;
  int tp_modules = 0;
  int64_t sharded_param_bytes = 0;     // this rank's bytes of tensor-parallel parameters
  // One line per step: "transformer_blocks.0.attn: attention usp(p2p)".
  std::vector<std::string> lines;
};

// Installs `plan` on `model` (hooks are added to whatever the model already has; call
// Uninstall first to replace a plan). Throws ExecError when the model's class differs from
// the plan's, a step's module does not exist or an attention step names a module that is no
// attention site, the plan has tensor-parallel steps on a tp > 1 mesh (not supported yet),
// the mesh differs from the context's, or the hashes disagree (see InstallOptions).
InstalledPlan Install(const plan::ExecutionPlan& plan, nn::Module& model, dist::DistContext& ctx,
                      const InstallOptions& options = {});

// Loads `files` into `model` for `plan` on this rank: tensor-parallel parameters are read as
// this rank's shard only (one slice read per block, never the full tensor), the rest whole.
// Install with weights_already_sharded afterwards.
void LoadPlannedWeights(const plan::ExecutionPlan& plan, nn::Module& model, const dist::DistContext& ctx,
                        const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype);

// Opens the safetensors `paths` and loads them into `model`: through LoadPlannedWeights when
// `plan` (non-null) shards parameters over tp, else whole. Returns whether the weights are this
// rank's shards (Install then needs weights_already_sharded).
bool LoadWeightFiles(const std::vector<std::string>& paths, const plan::ExecutionPlan* plan, nn::Module& model,
                     const dist::DistContext& ctx, at::ScalarType dtype);

// Removes every hook and resets every attention site to local attention. Tensor-parallel
// shards stay: to run unsharded again, reload the weights.
void Uninstall(nn::Module& model);

// Throws ExecError when `plan` was compiled for another mesh than the one `ctx` runs (a
// compiled plan for tp=2 on a job started as ulysses=2 would otherwise shard by the wrong axis).
void CheckMesh(const plan::ExecutionPlan& plan, const dist::DistContext& ctx);

// A rowwise layer's partial sums (each rank holds a slice of its input features) summed over
// the tp axis, `bias` added once. `what` names the step for the ExecError a failed all-reduce
// becomes ("<rank> <module> (rule at ...): rowwise all-reduce").
at::Tensor SumRowwisePartials(dist::DistContext& ctx, const at::Tensor& partial, const std::optional<at::Tensor>& bias,
                              const std::string& what);

// Compares `hash` across every rank of the world (one all-gather of 64 bytes). Throws
// ExecError listing the ranks whose hash differs from rank 0's.
void CheckSameOnAllRanks(dist::DistContext& ctx, const std::string& what, const std::string& hash);

}  // namespace weft::exec

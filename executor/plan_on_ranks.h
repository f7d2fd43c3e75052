#pragma once

// What every rank of a plan's job does around the program: loads the weights (tensor-parallel
// parameters read as this rank's shard only), checks that every rank runs the same plan on the
// mesh it was compiled for, and sums rowwise partial results over the tp group.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "compiler/plan/execution_plan.h"
#include "runtime/dist/dist_context.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/module.h"

namespace weft::exec {

// Loads `files` into `model` for `plan` on this rank: tensor-parallel parameters are read as
// this rank's shard only (one slice read per block, never the full tensor), the rest whole.
// `loading`, when given, is told each parameter's fqn just before it gets its value, in the
// model's order (the weights' slicing, executor/weight_stream.h, follows the load with it).
using ParamLoading = std::function<void(const std::string& fqn)>;
void LoadPlannedWeights(const plan::ExecutionPlan& plan, nn::Module& model, const dist::DistContext& ctx,
                        const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype,
                        const ParamLoading& loading = nullptr);

// Opens the safetensors `paths` and loads them into `model`: through LoadPlannedWeights when
// `plan` (non-null) shards parameters over tp, else whole. Returns whether the weights are this
// rank's shards.
bool LoadWeightFiles(const std::vector<std::string>& paths, const plan::ExecutionPlan* plan, nn::Module& model,
                     const dist::DistContext& ctx, at::ScalarType dtype, const ParamLoading& loading = nullptr);

// Throws ExecError when `plan` was compiled for another mesh than the one `ctx` runs (a
// compiled plan for tp=2 on a job started as ulysses=2 would otherwise shard by the wrong axis).
void CheckMesh(const plan::ExecutionPlan& plan, const dist::DistContext& ctx);

// Partial sums summed over `axis`, `bias` added once: a rowwise layer's over tp (each rank holds
// a slice of its input features), a sum over split tokens over the CP group (a linear
// attention's key sums). `what` names the step for the ExecError a failed all-reduce becomes
// ("<rank> <module> (rule at ...): rowwise all-reduce").
at::Tensor SumPartials(dist::DistContext& ctx, dist::Axis axis, const at::Tensor& partial,
                       const std::optional<at::Tensor>& bias, const std::string& what);

// Compares `hash` across every rank of the world (one all-gather of 64 bytes). Throws
// ExecError listing the ranks whose hash differs from rank 0's.
void CheckSameOnAllRanks(dist::DistContext& ctx, const std::string& what, const std::string& hash);

}  // namespace weft::exec

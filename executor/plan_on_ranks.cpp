#include "executor/plan_on_ranks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "executor/exec_error.h"
#include "executor/tp_shard.h"
#include "runtime/nn/load_weights.h"

namespace weft::exec {
namespace {

constexpr int64_t kHashBytes = 64;

}  // namespace

void LoadPlannedWeights(const plan::ExecutionPlan& plan, nn::Module& model, const dist::DistContext& ctx,
                        const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype,
                        const ParamLoading& loading) {
  const std::map<std::string, ShardSpec> specs = ShardSpecs(plan, ctx.AxisRank(dist::Axis::kTp));
  nn::LoadWeights(model, files, dtype, [&](const io::SafetensorsFile& file, const std::string& key, at::ScalarType type) {
    if (loading) loading(key);
    auto spec = specs.find(key);
    return spec == specs.end() ? at::Tensor() : LoadShard(file, key, spec->second, type);
  });
}

at::Tensor SumPartials(dist::DistContext& ctx, dist::Axis axis, const at::Tensor& partial,
                       const std::optional<at::Tensor>& bias, const std::string& what) {
  at::Tensor sum = partial.contiguous();
  try {
    ctx.AllReduce(axis, sum);
  } catch (const std::exception& e) {
    throw ExecError(what + " failed: " + ErrorText(e));
  }
  return bias ? sum.add_(*bias) : sum;
}

bool LoadWeightFiles(const std::vector<std::string>& paths, const plan::ExecutionPlan* plan, nn::Module& model,
                     const dist::DistContext& ctx, at::ScalarType dtype, const ParamLoading& loading) {
  std::vector<io::SafetensorsFile> files;
  for (const std::string& path : paths) files.push_back(io::SafetensorsFile::Open(path));
  std::vector<const io::SafetensorsFile*> pointers;
  for (const auto& f : files) pointers.push_back(&f);
  if (plan != nullptr && (plan->mesh.Tp() > 1 || loading)) {
    LoadPlannedWeights(*plan, model, ctx, pointers, dtype, loading);
    return plan->mesh.Tp() > 1;
  }
  nn::LoadWeights(model, pointers, dtype);
  return false;
}

void CheckMesh(const plan::ExecutionPlan& plan, const dist::DistContext& ctx) {
  const dist::MeshShape& shape = ctx.mesh().shape();
  if (plan.mesh.Ring() != shape.ring || plan.mesh.Ulysses() != shape.ulysses || plan.mesh.Tp() != shape.tp ||
      plan.mesh.Cfg() != shape.cfg) {
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

}  // namespace weft::exec

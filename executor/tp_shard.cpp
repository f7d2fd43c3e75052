#include "executor/tp_shard.h"

#include <ATen/ATen.h>

#include <numeric>

#include "executor/exec_error.h"

namespace weft::exec {
namespace {

void CheckBlocks(const ShardSpec& spec, int64_t extent, const std::string& name) {
  const int64_t sum = std::accumulate(spec.blocks.begin(), spec.blocks.end(), int64_t{0});
  if (sum != extent) {
    throw ExecError("parameter `" + name + "`: its dim " + std::to_string(spec.dim) + " has extent " +
                    std::to_string(extent) + " but the plan's blocks sum to " + std::to_string(sum));
  }
  for (int64_t block : spec.blocks) {
    if (block % spec.tp_size != 0) {
      throw ExecError("parameter `" + name + "`: block of " + std::to_string(block) + " along dim " +
                      std::to_string(spec.dim) + " does not divide by tp " + std::to_string(spec.tp_size));
    }
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> ShardSpec::Pieces() const {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t offset = 0;
  for (int64_t block : blocks) {
    const int64_t length = block / tp_size;
    pieces.emplace_back(offset + tp_rank * length, length);
    offset += block;
  }
  return pieces;
}

int64_t ShardSpec::LocalSize() const {
  int64_t size = 0;
  for (int64_t block : blocks) size += block / tp_size;
  return size;
}

std::map<std::string, ShardSpec> ShardSpecs(const plan::ExecutionPlan& plan, int64_t tp_rank) {
  std::map<std::string, ShardSpec> specs;
  const int64_t tp = plan.mesh.Tp();
  if (tp <= 1) return specs;
  for (const plan::ModuleStep& step : plan.steps) {
    if (!step.tp) continue;
    for (const plan::ParamShard& param : step.tp->params) {
      if (param.dim < 0) continue;
      ShardSpec spec;
      spec.dim = param.dim;
      spec.blocks = param.blocks;
      if (spec.blocks.empty() && param.dim < static_cast<int64_t>(param.full_shape.size())) {
        spec.blocks = {param.full_shape[param.dim]};
      }
      spec.tp_size = tp;
      spec.tp_rank = tp_rank;
      specs[step.module.empty() ? param.name : step.module + "." + param.name] = spec;
    }
  }
  return specs;
}

at::Tensor ShardTensor(const at::Tensor& full, const ShardSpec& spec, const std::string& name) {
  if (spec.dim >= full.dim()) {
    throw ExecError("parameter `" + name + "` has rank " + std::to_string(full.dim()) + "; cannot shard dim " +
                    std::to_string(spec.dim));
  }
  CheckBlocks(spec, full.size(spec.dim), name);
  std::vector<at::Tensor> parts;
  for (auto [offset, length] : spec.Pieces()) parts.push_back(full.narrow(spec.dim, offset, length));
  return at::cat(parts, spec.dim).contiguous();
}

at::Tensor LoadShard(const io::SafetensorsFile& file, const std::string& key, const ShardSpec& spec,
                     at::ScalarType dtype) {
  const io::TensorInfo& info = file.Info(key);
  if (spec.dim >= static_cast<int64_t>(info.shape.size())) {
    throw ExecError("parameter `" + key + "` has rank " + std::to_string(info.shape.size()) +
                    " in the checkpoint; cannot shard dim " + std::to_string(spec.dim));
  }
  CheckBlocks(spec, info.shape[spec.dim], key);
  std::vector<at::Tensor> parts;
  for (auto [offset, length] : spec.Pieces()) parts.push_back(file.LoadSlice(key, spec.dim, offset, length, dtype));
  return parts.size() == 1 ? parts[0] : at::cat(parts, spec.dim).contiguous();
}

}  // namespace weft::exec

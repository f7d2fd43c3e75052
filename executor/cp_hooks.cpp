#include "executor/cp_hooks.h"

#include <ATen/ATen.h>

#include <numeric>

#include "executor/exec_error.h"
#include "runtime/attention/attention.h"

namespace weft::exec {

std::string Where(const dist::DistContext& ctx, const std::string& fqn, const plan::Origin& origin) {
  std::string where = "rank " + std::to_string(ctx.rank()) + ": module `" + fqn + "`";
  if (origin.Known()) where += " (rule at " + origin.ToString() + ")";
  return where;
}

at::Tensor SplitHook::Slice(const nn::Module& module, const at::Tensor& tensor, const std::string& what) const {
  const std::string where = Where(ctx_, module.fqn(), split_.origin);
  if (tensor.dim() != split_.rank) {
    throw ExecError(where + ": " + what + " has rank " + std::to_string(tensor.dim()) + " but the plan splits a rank-" +
                    std::to_string(split_.rank) + " tensor along dim " + std::to_string(split_.dim));
  }
  const int64_t parts = ctx_.AxisSize(dist::Axis::kCp);
  const int64_t length = tensor.size(split_.dim);
  if (!uneven_ && length % parts != 0) {
    throw ExecError(where + ": " + what + " has length " + std::to_string(length) + " along dim " +
                    std::to_string(split_.dim) + ", not divisible by the CP degree " + std::to_string(parts) +
                    " (ring x ulysses); enable --ulysses-anything or --ring-anything for uneven splits");
  }
  const std::vector<int64_t> sizes = plan::SplitSizes(length, parts);
  const int index = ctx_.AxisRank(dist::Axis::kCp);
  const int64_t offset = std::accumulate(sizes.begin(), sizes.begin() + index, int64_t{0});
  return tensor.narrow(split_.dim, offset, sizes[index]);
}

void SplitHook::PreForward(nn::Module& module, nn::Args& args) {
  if (split_.target != plan::Split::Target::kArgument) return;
  const std::string& name = split_.argument;
  if (!args.Has(name) || std::holds_alternative<std::monostate>(args.Get(name))) {
    if (split_.optional) return;
    throw ExecError(Where(ctx_, module.fqn(), split_.origin) + ": the plan splits argument `" + name +
                    "` but the call does not pass it");
  }
  nn::Value& value = args.Get(name);
  if (split_.element < 0) {
    const auto* tensor = std::get_if<at::Tensor>(&value);
    if (tensor == nullptr) {
      throw ExecError(Where(ctx_, module.fqn(), split_.origin) + ": argument `" + name + "` is not a tensor");
    }
    if (split_.optional && tensor->dim() != split_.rank) return;  // diffusers' expected_dims filter
    value = Slice(module, *tensor, "argument `" + name + "`");
    return;
  }
  auto* tuple = std::get_if<std::vector<at::Tensor>>(&value);
  if (tuple == nullptr || split_.element >= static_cast<int64_t>(tuple->size())) {
    throw ExecError(Where(ctx_, module.fqn(), split_.origin) + ": argument `" + name + "` has no element " +
                    std::to_string(split_.element));
  }
  std::vector<at::Tensor> copy = *tuple;
  copy[split_.element] = Slice(module, copy[split_.element],
                               "element " + std::to_string(split_.element) + " of argument `" + name + "`");
  value = std::move(copy);
}

void SplitHook::PostForward(nn::Module& module, const nn::Args&, nn::Outputs& outputs) {
  if (split_.target != plan::Split::Target::kOutput) return;
  const std::string what = "output " + std::to_string(split_.output);
  if (split_.output >= static_cast<int64_t>(outputs.size())) {
    throw ExecError(Where(ctx_, module.fqn(), split_.origin) + ": the plan splits " + what + " but the module returned " +
                    std::to_string(outputs.size()) + " output(s)");
  }
  auto* tensor = std::get_if<at::Tensor>(&outputs[split_.output]);
  if (tensor == nullptr) throw ExecError(Where(ctx_, module.fqn(), split_.origin) + ": " + what + " is not a tensor");
  outputs[split_.output] = Slice(module, *tensor, what);
}

void GatherHook::PostForward(nn::Module& module, const nn::Args&, nn::Outputs& outputs) {
  const std::string where = Where(ctx_, module.fqn(), gather_.origin);
  if (gather_.output >= static_cast<int64_t>(outputs.size())) {
    throw ExecError(where + ": the plan gathers output " + std::to_string(gather_.output) + " but the module returned " +
                    std::to_string(outputs.size()) + " output(s)");
  }
  auto* tensor = std::get_if<at::Tensor>(&outputs[gather_.output]);
  if (tensor == nullptr || tensor->dim() != gather_.rank) {
    throw ExecError(where + ": output " + std::to_string(gather_.output) + " is not a rank-" +
                    std::to_string(gather_.rank) + " tensor, as the plan's gather expects");
  }
  try {
    at::Tensor local = tensor->contiguous();
    outputs[gather_.output] = uneven_ ? ctx_.AllGatherUneven(dist::Axis::kCp, local, gather_.dim)
                                      : ctx_.AllGather(dist::Axis::kCp, local, gather_.dim);
  } catch (const std::exception& e) {
    throw ExecError(where + ": gather of output " + std::to_string(gather_.output) + " failed: " + ErrorText(e));
  }
}

at::Tensor CpAttentionKernel::Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::optional<at::Tensor>& key_padding_mask) {
  runtime::CpAttentionOptions options;
  options.convert_to_fp32 = attention_.convert_to_fp32;
  options.rotate = attention_.rotate_method == plan::RotateMethod::kP2p ? runtime::RingRotate::kP2p
                                                                         : runtime::RingRotate::kAllGather;
  options.label = site_;
  options.exchange_shapes = uneven_ || !shapes_checked_;
  try {
    at::Tensor out;
    switch (attention_.mode) {
      case plan::AttentionMode::kLocal:
        out = runtime::LocalAttention(q, k, v, key_padding_mask, {std::nullopt, runtime::LocalKernel::kAuto, false}).out;
        break;
      case plan::AttentionMode::kUlysses:
        out = runtime::UlyssesAttention(ctx_, q, k, v, key_padding_mask, options).out;
        break;
      case plan::AttentionMode::kRing:
        out = runtime::RingAttention(ctx_, q, k, v, key_padding_mask, options).out;
        break;
      case plan::AttentionMode::kUsp:
        out = runtime::UspAttention(ctx_, q, k, v, key_padding_mask, options).out;
        break;
    }
    if (!out.defined()) throw ExecError("unreachable attention mode");
    shapes_checked_ = true;
    return out;
  } catch (const ExecError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecError(Where(ctx_, site_, attention_.origin) + ": " + std::string(plan::AttentionModeName(attention_.mode)) +
                    " attention failed: " + ErrorText(e));
  }
}

std::string CpAttentionKernel::Name() const {
  std::string name(plan::AttentionModeName(attention_.mode));
  if (attention_.mode == plan::AttentionMode::kRing || attention_.mode == plan::AttentionMode::kUsp) {
    name += "(" + std::string(plan::RotateMethodName(attention_.rotate_method)) + ")";
  }
  return name;
}

}  // namespace weft::exec

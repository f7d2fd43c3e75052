#include "executor/cp_attention.h"

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

namespace {

// The runtime's name for a plan's attention mode.
runtime::CpMode ModeOf(plan::AttentionMode mode) {
  switch (mode) {
    case plan::AttentionMode::kUlysses: return runtime::CpMode::kUlysses;
    case plan::AttentionMode::kRing: return runtime::CpMode::kRing;
    case plan::AttentionMode::kUsp: return runtime::CpMode::kUsp;
    case plan::AttentionMode::kLocal: break;
  }
  return runtime::CpMode::kLocal;
}

}  // namespace

at::Tensor CpAttentionKernel::Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::optional<at::Tensor>& key_padding_mask,
                                  const std::optional<at::Tensor>& pair_mask, const runtime::WholeRows& whole) {
  runtime::CpAttentionOptions options;
  options.pair_mask = pair_mask;
  options.convert_to_fp32 = attention_.convert_to_fp32;
  options.rotate = attention_.rotate_method == plan::RotateMethod::kP2p ? runtime::RingRotate::kP2p
                                                                         : runtime::RingRotate::kAllGather;
  options.label = site_;
  options.exchange_shapes = uneven_ || !shapes_checked_;
  try {
    const runtime::CpMode mode = ModeOf(attention_.mode);
    at::Tensor out = whole.Any()
                         ? runtime::AttentionWithWholeRows(ctx_, mode, q, k, v, key_padding_mask, whole, options).out
                         : runtime::AttentionInMode(ctx_, mode, q, k, v, key_padding_mask, options).out;
    shapes_checked_ = true;
    return out;
  } catch (const ExecError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecError(Where(ctx_, site_, attention_.origin) + ": " + std::string(plan::AttentionModeName(attention_.mode)) +
                    " attention failed: " + ErrorText(e));
  }
}

}  // namespace weft::exec

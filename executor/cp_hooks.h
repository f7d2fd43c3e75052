#pragma once

// The context-parallel steps of an ExecutionPlan as nn hooks and attention kernels:
// SplitHook keeps this CP rank's slice of an argument (before forward) or an output (after
// forward); GatherHook all-gathers an output over the CP group; CpAttentionKernel runs an
// attention site as Ulysses, ring or USP. Split sizes are recomputed from the tensors at run
// time (even: equal chunks, the length must divide; uneven: first ranks get one more), so a
// workload other than the compiled one still splits correctly; gathers of uneven pieces
// exchange the lengths first.

#include <string>

#include "compiler/plan/execution_plan.h"
#include "runtime/dist/dist_context.h"
#include "runtime/nn/attention_site.h"
#include "runtime/nn/module.h"

namespace weft::exec {

class SplitHook : public nn::Hook {
 public:
  // `uneven` allows lengths that do not divide by the CP degree (an anything mode).
  SplitHook(plan::Split split, bool uneven, dist::DistContext& ctx) : split_(std::move(split)), uneven_(uneven), ctx_(ctx) {}
  void PreForward(nn::Module& module, nn::Args& args) override;
  void PostForward(nn::Module& module, const nn::Args& args, nn::Outputs& outputs) override;

 private:
  // This rank's slice of `tensor`, or an ExecError naming `what` and the step's origin.
  at::Tensor Slice(const nn::Module& module, const at::Tensor& tensor, const std::string& what) const;

  plan::Split split_;
  bool uneven_;
  dist::DistContext& ctx_;
};

class GatherHook : public nn::Hook {
 public:
  GatherHook(plan::Gather gather, bool uneven, dist::DistContext& ctx) : gather_(std::move(gather)), uneven_(uneven), ctx_(ctx) {}
  void PostForward(nn::Module& module, const nn::Args& args, nn::Outputs& outputs) override;

 private:
  plan::Gather gather_;
  bool uneven_;
  dist::DistContext& ctx_;
};

// Context-parallel attention for one site, configured from its plan step.
//
// Shape records (every rank's batch, lengths, heads, head dim, dtype, mask and options; one
// small all-gather, runtime/attention) are exchanged on the site's first call, so ranks that
// disagree fail there with every rank's shapes in the message. With even splits (`uneven`
// false: the split hooks refuse a length that does not divide) every rank's lengths equal its
// own, so later calls skip the exchange: one collective and, on GPUs, one device-to-host copy
// fewer per attention. Uneven plans exchange on every call: the lengths are not known otherwise.
class CpAttentionKernel : public nn::AttentionKernel {
 public:
  CpAttentionKernel(plan::Attention attention, std::string site, bool uneven, dist::DistContext& ctx)
      : attention_(std::move(attention)), site_(std::move(site)), uneven_(uneven), ctx_(ctx) {}
  at::Tensor Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& key_padding_mask) override;
  std::string Name() const override;

 private:
  plan::Attention attention_;
  std::string site_;
  bool uneven_;
  bool shapes_checked_ = false;
  dist::DistContext& ctx_;
};

// "rank 2: <what> at module `fqn` (rule at plans/flux.weft:7:5)": the prefix every executor
// error message starts with.
std::string Where(const dist::DistContext& ctx, const std::string& fqn, const plan::Origin& origin);

}  // namespace weft::exec

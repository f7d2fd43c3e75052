#pragma once

// Context-parallel attention as a plan's attention edits run it on a program
// (executor/program_backend.h): Ulysses, ring or USP over the job's cp group, from
// runtime/attention, with the error prefix every executor message starts with.

#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "compiler/plan/execution_plan.h"
#include "runtime/attention/attention.h"
#include "runtime/dist/dist_context.h"

namespace weft::exec {

// Context-parallel attention for one site, configured from its plan step.
//
// Shape records (every rank's batch, lengths, heads, head dim, dtype, mask and options; one
// small all-gather, runtime/attention) are exchanged on the site's first call, so ranks that
// disagree fail there with every rank's shapes in the message. With even splits (`uneven`
// false: the split edits refuse a length that does not divide) every rank's lengths equal its
// own, so later calls skip the exchange: one collective and, on GPUs, one device-to-host copy
// fewer per attention. Uneven plans exchange on every call: the lengths are not known otherwise.
class CpAttentionKernel {
 public:
  CpAttentionKernel(plan::Attention attention, std::string site, bool uneven, dist::DistContext& ctx)
      : attention_(std::move(attention)), site_(std::move(site)), uneven_(uneven), ctx_(ctx) {}
  // `pair_mask`: a whole mask over (query, key) pairs (plan::Attention::pair_mask), bool
  // (B or 1, 1, Sq, Skv) over every rank's queries and keys.
  // `whole`: rows of a joint sequence every rank holds whole (runtime::AttentionWithWholeRows).
  at::Tensor Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& key_padding_mask,
                 const std::optional<at::Tensor>& pair_mask = std::nullopt, const runtime::WholeRows& whole = {});

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

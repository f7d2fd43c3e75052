#pragma once

// What a plan's edits of a program (compiler/program/edits.h) need from the runtime: the
// collectives and attention kernels of the job's mesh. The executor implements it on a
// dist::DistContext; the interpreter calls it for weft's own nodes.

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "compiler/plan/execution_plan.h"

namespace weft::interp {

class EditBackend {
 public:
  virtual ~EditBackend() = default;
  // This CP rank's part of `x` along edit.dim (weft.split); with `parts` (the full lengths of
  // the streams laid out along that dim, edit.parts), this rank's part of each, concatenated.
  virtual at::Tensor Split(const at::Tensor& x, const plan::ProgramEdit& edit, const std::vector<int64_t>& parts) = 0;
  // `x` all-gathered along edit.dim over the CP group (weft.gather).
  virtual at::Tensor Gather(const at::Tensor& x, const plan::ProgramEdit& edit) = 0;
  // scaled_dot_product_attention(q, k, v, attn_mask, scale) as edit.attention says, q/k/v in the
  // operator's (B, H, S, D) layout; returns (B, H, S, D) (weft.attention).
  virtual at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& attn_mask, std::optional<double> scale,
                               const plan::ProgramEdit& edit) = 0;
};

}  // namespace weft::interp

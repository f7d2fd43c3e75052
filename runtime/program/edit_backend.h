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
  // the streams laid out along that dim, edit.parts), this rank's part of each, concatenated;
  // with `unit` (factors of a row's length, edit.unit) or `rows` > 0 (a count of equal rows,
  // edit.rows), in whole rows.
  virtual at::Tensor Split(const at::Tensor& x, const plan::ProgramEdit& edit, const std::vector<int64_t>& parts,
                           const std::vector<int64_t>& unit, int64_t rows) = 0;
  // `x` all-gathered along edit.dim over the CP group (weft.gather).
  virtual at::Tensor Gather(const at::Tensor& x, const plan::ProgramEdit& edit) = 0;
  // scaled_dot_product_attention(q, k, v, attn_mask, scale) as edit.attention says, q/k/v in the
  // operator's (B, H, S, D) layout; returns (B, H, S, D) (weft.attention). `mask_parts`: when
  // the mask is over (query, key) pairs of a joint sequence, the full length of each split stream
  // it lays out (edit.parts), in its order; empty otherwise. `whole_lengths`: the length of each
  // stream every rank holds whole (edit.whole_parts, in their order), read at run time.
  virtual at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& attn_mask, std::optional<double> scale,
                               const plan::ProgramEdit& edit, const std::vector<int64_t>& mask_parts,
                               const std::vector<int64_t>& whole_lengths) = 0;
  // A rowwise Linear's partial output summed over the tp group, `bias` added once after the sum
  // (weft.all_reduce). May sum in place: nothing else reads the partial output.
  virtual at::Tensor AllReduce(at::Tensor x, const std::optional<at::Tensor>& bias, const plan::ProgramEdit& edit) = 0;
  // rms_norm(x, normalized_shape, weight, eps) whose normalized width (edit.new_value elements in
  // full) is sharded over the tp group: the mean of squares is taken over the group (weft.rms_norm).
  // `x`, split over the CP group along spatial dim edit.dim in CP rank order, with edit.new_value
  // rows of each neighbouring rank's part added on either side of it (zeros before the first part
  // and after the last): what a convolution over the whole dim reads for this rank's output rows
  // (weft.halo).
  virtual at::Tensor Halo(const at::Tensor& x, const plan::ProgramEdit& edit) = 0;
  virtual at::Tensor RmsNorm(const at::Tensor& x, int64_t normalized_dims, const std::optional<at::Tensor>& weight,
                             std::optional<double> eps, const plan::ProgramEdit& edit) = 0;
};

}  // namespace weft::interp

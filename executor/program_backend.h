#pragma once

// The runtime side of a plan's edits of a program (runtime/program/edit_backend.h) on the job's
// mesh: splits keep this CP rank's slice, gathers all-gather over the CP group, attention runs
// weft's Ulysses / ring / USP kernels, a convolution over a split grid gets its neighbours' rows,
// rowwise outputs and sharded RMS statistics are summed over
// the tp group -- exactly the collectives the compiler's cost section predicts.

#include <map>
#include <memory>
#include <vector>

#include "executor/cp_attention.h"
#include "runtime/dist/dist_context.h"
#include "runtime/program/edit_backend.h"

namespace weft::exec {

class ProgramBackend : public interp::EditBackend {
 public:
  explicit ProgramBackend(dist::DistContext& ctx) : ctx_(ctx) {}
  at::Tensor Split(const at::Tensor& x, const plan::ProgramEdit& edit, const std::vector<int64_t>& parts,
                   const std::vector<int64_t>& unit, int64_t rows) override;
  at::Tensor Gather(const at::Tensor& x, const plan::ProgramEdit& edit) override;
  at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::optional<at::Tensor>& attn_mask, std::optional<double> scale,
                       const plan::ProgramEdit& edit, const std::vector<int64_t>& mask_parts,
                       const std::vector<int64_t>& whole_lengths) override;
  at::Tensor AllReduce(at::Tensor x, const std::optional<at::Tensor>& bias, const plan::ProgramEdit& edit) override;
  at::Tensor RmsNorm(const at::Tensor& x, int64_t normalized_dims, const std::optional<at::Tensor>& weight,
                     std::optional<double> eps, const plan::ProgramEdit& edit) override;
  // Each neighbour's edge rows exchanged point to point over the CP group (one SendRecv).
  at::Tensor Halo(const at::Tensor& x, const plan::ProgramEdit& edit) override;

 private:
  at::Tensor InRankOrder(const at::Tensor& mask, const std::vector<int64_t>& parts, const plan::ProgramEdit& edit,
                         const std::string& where);

  // A pair mask's rows and columns in the ranks' order, for the stream lengths it was made for.
  struct RankOrder {
    std::vector<int64_t> parts;
    at::Tensor index;
  };

  dist::DistContext& ctx_;
  std::map<const plan::ProgramEdit*, std::unique_ptr<CpAttentionKernel>> kernels_;
  std::map<const plan::ProgramEdit*, RankOrder> rank_orders_;
};

}  // namespace weft::exec

#include "executor/program_backend.h"

#include <ATen/ATen.h>

#include <cmath>
#include <numeric>

#include "executor/exec_error.h"

namespace weft::exec {

at::Tensor ProgramBackend::Split(const at::Tensor& x, const plan::ProgramEdit& edit) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  if (x.dim() != edit.rank) {
    throw ExecError(where + ": `" + edit.value + "` has rank " + std::to_string(x.dim()) + " but the plan splits a rank-" +
                    std::to_string(edit.rank) + " tensor along dim " + std::to_string(edit.dim));
  }
  const int64_t parts = ctx_.AxisSize(dist::Axis::kCp);
  const int64_t length = x.size(edit.dim);
  if (!edit.uneven && length % parts != 0) {
    throw ExecError(where + ": `" + edit.value + "` has length " + std::to_string(length) + " along dim " +
                    std::to_string(edit.dim) + ", not divisible by the CP degree " + std::to_string(parts) +
                    " (ring x ulysses); enable --ulysses-anything or --ring-anything for uneven splits");
  }
  const std::vector<int64_t> sizes = plan::SplitSizes(length, parts);
  const int index = ctx_.AxisRank(dist::Axis::kCp);
  const int64_t offset = std::accumulate(sizes.begin(), sizes.begin() + index, int64_t{0});
  return x.narrow(edit.dim, offset, sizes[index]);
}

at::Tensor ProgramBackend::Gather(const at::Tensor& x, const plan::ProgramEdit& edit) {
  try {
    const at::Tensor local = x.contiguous();
    return edit.uneven ? ctx_.AllGatherUneven(dist::Axis::kCp, local, edit.dim) : ctx_.AllGather(dist::Axis::kCp, local, edit.dim);
  } catch (const std::exception& e) {
    throw ExecError(Where(ctx_, edit.module, edit.origin) + ": gather of `" + edit.value + "` failed: " + e.what());
  }
}

at::Tensor ProgramBackend::Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const std::optional<at::Tensor>& attn_mask, std::optional<double> scale,
                                     const plan::ProgramEdit& edit) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  if (scale && std::abs(*scale - 1.0 / std::sqrt(static_cast<double>(q.size(-1)))) > 1e-12) {
    throw ExecError(where + ": context-parallel attention with a scale other than 1/sqrt(head_dim) is not supported");
  }
  if (attn_mask) {
    throw ExecError(where + ": context-parallel attention of a program with an attention mask is not supported yet");
  }
  auto& kernel = kernels_[&edit];
  if (!kernel) kernel = std::make_unique<CpAttentionKernel>(*edit.attention, edit.module, edit.uneven, ctx_);
  // The operator's (B, H, S, D) as weft's kernels take it, (B, S, H, D): views, no copies.
  return kernel->Run(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), std::nullopt).transpose(1, 2);
}

}  // namespace weft::exec

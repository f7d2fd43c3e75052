#include "executor/program_backend.h"

#include <ATen/ATen.h>

#include <cmath>
#include <numeric>
#include <utility>

#include "executor/exec_error.h"
#include "executor/plan_on_ranks.h"
#include "runtime/nn/layers.h"

namespace weft::exec {
namespace {

// Rank `rank`'s piece of a stream of `length` split over `ranks`: its offset and length
// (plan::SplitSizes: equal when `ranks` divides `length`, the first ranks one more otherwise).
std::pair<int64_t, int64_t> PieceOf(int64_t length, int64_t ranks, int64_t rank) {
  const std::vector<int64_t> sizes = plan::SplitSizes(length, ranks);
  return {std::accumulate(sizes.begin(), sizes.begin() + rank, int64_t{0}), sizes[static_cast<size_t>(rank)]};
}

}  // namespace

at::Tensor ProgramBackend::Split(const at::Tensor& x, const plan::ProgramEdit& edit, const std::vector<int64_t>& parts,
                                 const std::vector<int64_t>& unit, int64_t rows_of_view) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  if (x.dim() != edit.rank) {
    throw ExecError(where + ": `" + edit.value + "` has rank " + std::to_string(x.dim()) + " but the plan splits a rank-" +
                    std::to_string(edit.rank) + " tensor along dim " + std::to_string(edit.dim));
  }
  const bool branches = edit.group == plan::kCfgAxis;
  // A whole value sliced over tp where it meets tp-sharded heads (shard_flow.h): even by
  // construction, the colwise weights' blocks.
  const bool tp = edit.group == plan::kTpAxis;
  const dist::Axis axis = branches ? dist::Axis::kCfg : tp ? dist::Axis::kTp : dist::Axis::kCp;
  const int64_t ranks = ctx_.AxisSize(axis);
  const int index = ctx_.AxisRank(axis);
  const int64_t length = x.size(edit.dim);
  const std::vector<int64_t> streams = parts.empty() ? std::vector<int64_t>{length} : parts;
  if (std::accumulate(streams.begin(), streams.end(), int64_t{0}) != length) {
    throw ExecError(where + ": `" + edit.value + "` has length " + std::to_string(length) + " along dim " +
                    std::to_string(edit.dim) + ", but its parts (" + c10::str(streams) + ") do not add up to it");
  }
  // A stream a view parts into rows is split in whole rows, alike on every rank (each knows the
  // length and the row): every check below decides the same everywhere, so no rank is left waiting.
  int64_t row = 1;
  for (const int64_t u : unit) row *= u;
  if (rows_of_view > 0) {  // a count of rows, their length inferred (edit.rows)
    if (!parts.empty() || length % rows_of_view != 0) {
      throw ExecError(where + ": `" + edit.value + "` has length " + std::to_string(length) + " along dim " +
                      std::to_string(edit.dim) + ", which is no " + std::to_string(rows_of_view) +
                      " rows of equal length (the plan splits it in the rows the program views it as)");
    }
    row = length / rows_of_view;
  }
  if (row > 1 || rows_of_view > 0) {
    const int64_t rows = length / row;
    if (!parts.empty() || length % row != 0) {
      throw ExecError(where + ": `" + edit.value + "` has length " + std::to_string(length) + " along dim " +
                      std::to_string(edit.dim) + ", which is no number of whole rows of " + std::to_string(row) +
                      " (the plan splits it in rows)");
    }
    const int64_t min_rows = std::max<int64_t>(1, edit.min_rows);
    if (rows < ranks * min_rows) {
      // More than one row each only where a convolution reads its neighbours' (a halo); else one.
      const std::string why = min_rows > 1 ? " (a convolution over them reads that many of each neighbour's)"
                                           : " (the model views them as rows, so each rank takes whole ones)";
      throw ExecError(where + ": `" + edit.value + "` holds " + std::to_string(rows) + " row(s) of " + std::to_string(row) +
                      " along dim " + std::to_string(edit.dim) + ", and each of the " + std::to_string(ranks) +
                      " CP ranks (ring x ulysses) needs at least " + std::to_string(min_rows) + why + "; use at most " +
                      std::to_string(rows / min_rows) + " CP ranks, or a larger input");
    }
    if (!edit.uneven && rows % ranks != 0) {
      throw ExecError(where + ": `" + edit.value + "` holds " + std::to_string(rows) + " row(s) of " + std::to_string(row) +
                      " along dim " + std::to_string(edit.dim) + ", not divisible by the CP degree " +
                      std::to_string(ranks) + " (ring x ulysses); enable --ulysses-anything or --ring-anything for " +
                      "uneven splits");
    }
    const auto [offset, rows_here] = PieceOf(rows, ranks, index);
    return x.narrow(edit.dim, offset * row, rows_here * row);
  }
  std::vector<at::Tensor> local;
  int64_t start = 0;
  for (const int64_t part : streams) {
    if (!edit.uneven && part % ranks != 0) {
      throw ExecError(where + ": `" + edit.value + "` has length " + std::to_string(part) + " along dim " +
                      std::to_string(edit.dim) + (parts.empty() ? "" : " in one of its parts") +
                      (branches ? ", not divisible by cfg=" + std::to_string(ranks) +
                                      " as the plan was compiled for; compile it for this batch of branches"
                       : tp     ? ", not divisible by tp=" + std::to_string(ranks) + " as the plan was compiled for"
                                : ", not divisible by the CP degree " + std::to_string(ranks) +
                                      " (ring x ulysses); enable --ulysses-anything or --ring-anything for uneven splits"));
    }
    if (branches && part < ranks) {
      throw ExecError(where + ": `" + edit.value + "` carries " + std::to_string(part) + " guidance branches along dim " +
                      std::to_string(edit.dim) + ", fewer than the " + std::to_string(ranks) + " cfg ranks");
    }
    const auto [offset, length_here] = PieceOf(part, ranks, index);
    local.push_back(x.narrow(edit.dim, start + offset, length_here));
    start += part;
  }
  return local.size() == 1 ? local[0] : at::cat(local, edit.dim);
}

at::Tensor ProgramBackend::Gather(const at::Tensor& x, const plan::ProgramEdit& edit) {
  try {
    const at::Tensor local = x.contiguous();
    const dist::Axis axis = edit.group == plan::kCfgAxis ? dist::Axis::kCfg : dist::Axis::kCp;
    return edit.uneven ? ctx_.AllGatherUneven(axis, local, edit.dim) : ctx_.AllGather(axis, local, edit.dim);
  } catch (const std::exception& e) {
    throw ExecError(Where(ctx_, edit.module, edit.origin) + ": gather of `" + edit.value + "` failed: " + e.what());
  }
}

namespace {

// scaled_dot_product_attention's attn_mask (broadcast to (B, H, Sq, Skv); bool: true = attend,
// float: added to the scores) as the key-padding mask (B, Skv) bool that weft's kernels move with
// their keys, `mask` holding this CP rank's keys. Only a mask that depends on the batch and the
// key alone is one (it may be expanded along heads and queries): a mask that varies along them,
// one holding NaN, or an additive mask whose values are not 0 and -inf (or <= -1e3) is refused.
//
// An additive mask says more than a boolean one where a row masks every key: one device adds
// the same -10000 (diffusers' (1 - mask) * -10000.0) to all of that row's scores, which softmax
// cancels, so the row attends to every key; a boolean or -inf row attends to none (output 0).
// Whether a row is masked whole is a question about every rank's keys, so the rows' maxima are
// all-reduced over the CP group (B floats, compiler/plan/cost.h KeyMaskCollectives) and each row
// is shifted by its own: a row masked whole becomes all 0, open.
at::Tensor KeyPaddingMask(const at::Tensor& mask, const at::Tensor& q, const at::Tensor& k, const std::string& where,
                          dist::DistContext& ctx) {
  const int64_t batch = q.size(0), keys = k.size(2);
  std::vector<int64_t> shape(static_cast<size_t>(std::max<int64_t>(0, 4 - mask.dim())), 1);
  for (int64_t d = 0; d < mask.dim(); ++d) shape.push_back(mask.size(d));
  auto refuse = [&](const std::string& why) {
    return ExecError(where + ": context-parallel attention takes a mask over the keys only ((B, 1, 1, Skv), here Skv = " +
                     std::to_string(keys) + "), but this attention's mask " + c10::str(mask.sizes()) + " " + why);
  };
  if (mask.dim() > 4 || shape[3] != keys || (shape[0] != 1 && shape[0] != batch)) throw refuse("does not broadcast so");
  const bool floating = at::isFloatingType(mask.scalar_type());
  if (mask.scalar_type() != at::kBool && !floating) {
    throw ExecError(where + ": attention mask of dtype " + std::string(c10::toString(mask.scalar_type())) +
                    "; scaled_dot_product_attention takes bool or floating masks");
  }
  if (floating && mask.isnan().any().item<bool>()) {
    const at::Tensor first = mask.isnan().nonzero().select(0, 0).to(at::kCPU).contiguous();
    std::string index;
    for (int64_t d = 0; d < first.numel(); ++d) index += (d ? ", " : "") + std::to_string(first[d].item<int64_t>());
    throw ExecError(where + ": the attention mask " + c10::str(mask.sizes()) + " holds NaN (first at index [" + index +
                    "], this rank's keys); every score it is added to would be NaN");
  }
  const at::Tensor m4 = mask.reshape(shape);
  // A mask expanded along heads or queries (LTX repeats its text mask per head) is one if every
  // head and query row holds the same keys.
  at::Tensor m = m4.select(1, 0).select(1, 0);
  if ((shape[1] != 1 || shape[2] != 1) && !at::equal(m4, m.unsqueeze(1).unsqueeze(1).expand_as(m4))) {
    throw refuse("varies along heads or queries");
  }
  if (!floating) return m.expand({batch, keys}).contiguous();
  // 0: attended; -inf or at most -1e3: not attended -- exp(-1e3) is 0 in fp32 and fp64 (they
  // underflow below -104 and -745), so the scores such a key adds are none unless it outscores
  // the row's open keys by hundreds. -1e3, not diffusers' -1e4: in bf16 -10000 is -9984. Checked
  // on this rank's keys before any collective, so a rank with a bad mask leaves at once, naming it.
  constexpr double kMaskedAtMost = -1e3;
  auto binary = [&](const at::Tensor& x) { return ((x == 0) | (x <= kMaskedAtMost)).all().item<bool>(); };
  if (!binary(m)) {
    throw ExecError(where + ": context-parallel attention takes additive masks of 0 (attend) and -inf or <= -1e3 "
                    "(do not) only; this one has other values");
  }
  const at::Tensor rows = m.expand({batch, keys}).to(at::kFloat);
  at::Tensor row_max = rows.amax(1).contiguous();  // (B); -inf for no keys
  try {
    if (ctx.AxisSize(dist::Axis::kCp) > 1) ctx.AllReduce(dist::Axis::kCp, row_max, dist::ReduceKind::kMax);
  } catch (const std::exception& e) {
    throw ExecError(where + ": all-reduce of the attention mask's row maxima failed: " + ErrorText(e));
  }
  const at::Tensor finite = row_max.isfinite();
  const at::Tensor shifted = rows - at::where(finite, row_max, at::zeros_like(row_max)).unsqueeze(1);
  if (!binary(shifted)) {
    throw ExecError(where + ": context-parallel attention takes additive masks of 0 (attend) and -inf or <= -1e3 "
                    "(do not) only; a row of this one masks every key by amounts less than 1e3 apart");
  }
  return (shifted == 0).contiguous();
}

// scaled_dot_product_attention's attn_mask over (query, key) pairs, whole on every rank (the
// plan's pair_mask: a sliding window, segments of packed samples, a text mask squared into
// pairs), as the (B or 1, 1, Sq, Skv) mask the kernels slice per rank: bool, or a float bias the
// kernels add to the scores as the operator does. A float one of 0 (attend) and -inf or <= -1e3
// (do not) becomes bool, which the kernels skip where it masks nothing; a row masked whole by a
// finite amount then attends to every key, as the one device's softmax does (the row's maximum is
// subtracted: the mask is whole here, so no collective).
at::Tensor PairMask(const at::Tensor& mask, const at::Tensor& q, const std::string& where) {
  if (mask.dim() < 2 || mask.dim() > 4) {
    throw ExecError(where + ": the attention mask over (query, key) pairs has " + std::to_string(mask.dim()) +
                    " dimensions; it must broadcast to (B, H, Sq, Skv)");
  }
  std::vector<int64_t> shape(static_cast<size_t>(4 - mask.dim()), 1);
  for (int64_t d = 0; d < mask.dim(); ++d) shape.push_back(mask.size(d));
  at::Tensor m4 = mask.reshape(shape);
  if (shape[0] != 1 && shape[0] != q.size(0)) {
    throw ExecError(where + ": the attention mask over (query, key) pairs " + c10::str(mask.sizes()) +
                    " does not broadcast over the batch of " + std::to_string(q.size(0)));
  }
  // Expanded along the heads (a mask repeated per head) it is one mask; one that differs between
  // heads would need each rank's own heads of it under Ulysses, which weft does not slice.
  if (shape[1] != 1) {
    const at::Tensor first = m4.narrow(1, 0, 1);
    if (!at::equal(m4, first.expand_as(m4))) {
      throw ExecError(where + ": the attention mask over (query, key) pairs " + c10::str(mask.sizes()) +
                      " differs between heads; context-parallel attention applies one mask to every head");
    }
    m4 = first;
  }
  if (mask.scalar_type() == at::kBool) return m4;
  if (!at::isFloatingType(mask.scalar_type())) {
    throw ExecError(where + ": attention mask of dtype " + std::string(c10::toString(mask.scalar_type())) +
                    "; scaled_dot_product_attention takes bool or floating masks");
  }
  constexpr double kMaskedAtMost = -1e3;  // as KeyPaddingMask
  const at::Tensor f = m4.to(at::kFloat);
  if (f.isnan().any().item<bool>()) {
    throw ExecError(where + ": the attention mask over (query, key) pairs holds NaN");
  }
  auto binary = [&](const at::Tensor& x) { return ((x == 0) | (x <= kMaskedAtMost)).all().item<bool>(); };
  if (binary(f)) {
    const at::Tensor row_max = f.amax(3, /*keepdim=*/true);
    const at::Tensor shifted = f - at::where(row_max.isfinite(), row_max, at::zeros_like(row_max));
    if (binary(shifted)) return shifted == 0;
  }
  return m4;
}

}  // namespace

// A whole mask over (query, key) pairs of a joint sequence (`parts`: each split stream's full
// length, in the mask's order) with its rows and columns reordered as the kernels take them: every
// CP rank's piece of each stream, rank after rank (what Split gives each rank, in rank order).
// A local gather: no communication. The order is made once per site and lengths.
at::Tensor ProgramBackend::InRankOrder(const at::Tensor& mask, const std::vector<int64_t>& parts,
                                       const plan::ProgramEdit& edit, const std::string& where) {
  const int64_t ranks = ctx_.AxisSize(dist::Axis::kCp);
  const int64_t total = std::accumulate(parts.begin(), parts.end(), int64_t{0});
  if (mask.size(2) != total || mask.size(3) != total) {
    throw ExecError(where + ": the attention mask over (query, key) pairs " + c10::str(mask.sizes()) +
                    " does not lay out the joint sequence of " + c10::str(parts) + " tokens the plan split");
  }
  if (ranks == 1) return mask;
  RankOrder& cached = rank_orders_[&edit];
  if (!cached.index.defined() || cached.parts != parts || cached.index.device() != mask.device()) {
    for (const int64_t part : parts) {
      if (!edit.uneven && part % ranks != 0) {
        throw ExecError(where + ": a stream of " + std::to_string(part) + " tokens under the attention mask is not "
                        "divisible by the CP degree " + std::to_string(ranks) +
                        " (ring x ulysses); enable --ulysses-anything or --ring-anything for uneven splits");
      }
    }
    std::vector<int64_t> order;
    order.reserve(static_cast<size_t>(total));
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t start = 0;
      for (const int64_t part : parts) {
        const auto [offset, length] = PieceOf(part, ranks, r);
        for (int64_t i = 0; i < length; ++i) order.push_back(start + offset + i);
        start += part;
      }
    }
    cached = {parts, at::tensor(order, at::TensorOptions().dtype(at::kLong)).to(mask.device())};
  }
  return mask.index_select(2, cached.index).index_select(3, cached.index);
}

at::Tensor ProgramBackend::Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const std::optional<at::Tensor>& attn_mask, std::optional<double> scale,
                                     const plan::ProgramEdit& edit, const std::vector<int64_t>& mask_parts,
                                     const std::vector<int64_t>& whole_lengths) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  if (scale && std::abs(*scale - 1.0 / std::sqrt(static_cast<double>(q.size(-1)))) > 1e-12) {
    throw ExecError(where + ": context-parallel attention with a scale other than 1/sqrt(head_dim) is not supported");
  }
  std::optional<at::Tensor> key_mask, pair_mask;
  if (attn_mask && edit.attention->pair_mask) {
    pair_mask = PairMask(*attn_mask, q, where);
    if (!mask_parts.empty()) pair_mask = InRankOrder(*pair_mask, mask_parts, edit, where);
  } else if (attn_mask) {
    key_mask = KeyPaddingMask(*attn_mask, q, k, where, ctx_);
  }
  // Streams every rank holds whole, around its split rows (edit.whole_parts).
  runtime::WholeRows whole;
  if (whole_lengths.size() != edit.whole_parts.size()) {
    throw ExecError(where + ": " + std::to_string(whole_lengths.size()) + " whole-stream lengths for " +
                    std::to_string(edit.whole_parts.size()) + " whole streams (the program and the plan disagree; compile again)");
  }
  for (size_t i = 0; i < whole_lengths.size(); ++i) {
    const std::string& at = edit.whole_parts[i].at;
    int64_t* rows = at == "q_before" ? &whole.q_before : at == "q_after" ? &whole.q_after
                  : at == "kv_before" ? &whole.kv_before : at == "kv_after" ? &whole.kv_after : nullptr;
    if (rows == nullptr) throw ExecError(where + ": whole stream `" + edit.whole_parts[i].value + "` at `" + at + "`, not one of q_before, q_after, kv_before, kv_after");
    *rows += whole_lengths[i];
  }
  auto& kernel = kernels_[&edit];
  if (!kernel) kernel = std::make_unique<CpAttentionKernel>(*edit.attention, edit.module, edit.uneven, ctx_);
  // The operator's (B, H, S, D) as weft's kernels take it, (B, S, H, D): views, no copies.
  return kernel->Run(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), key_mask, pair_mask, whole).transpose(1, 2);
}

at::Tensor ProgramBackend::AllReduce(at::Tensor x, const std::optional<at::Tensor>& bias, const plan::ProgramEdit& edit) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  if (edit.group == plan::kCpGroup) {  // a sum over split tokens (a linear attention's key sums)
    return SumPartials(ctx_, dist::Axis::kCp, x, bias, where + ": all-reduce over the CP group of `" + edit.value + "`");
  }
  if (edit.new_value > 0) {  // a sum or mean over the tp-sharded dim: the ranks' parts, a mean's divided by tp
    at::Tensor sum = SumPartials(ctx_, dist::Axis::kTp, x, bias, where + ": all-reduce over tp of `" + edit.value + "`");
    return edit.new_value > 1 ? sum.div_(static_cast<double>(edit.new_value)) : sum;
  }
  return SumPartials(ctx_, dist::Axis::kTp, x, bias, where + ": rowwise all-reduce of `" + edit.value + "`");
}

at::Tensor ProgramBackend::Halo(const at::Tensor& x, const plan::ProgramEdit& edit) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  const int64_t d = edit.dim, rows = edit.new_value;
  if (x.dim() != edit.rank || d < 0 || d >= x.dim() || rows <= 0) {
    throw ExecError(where + ": halo of " + std::to_string(rows) + " row(s) along dim " + std::to_string(d) + " of `" +
                    edit.value + "`, a rank-" + std::to_string(x.dim()) + " tensor, but the plan was compiled for rank " +
                    std::to_string(edit.rank));
  }
  const int n = ctx_.AxisSize(dist::Axis::kCp), r = ctx_.AxisRank(dist::Axis::kCp);
  const int64_t length = x.size(d);
  // A split made in rows gives every rank at least the widest halo's rows (its min_rows, checked
  // alike on every rank at the split), so this holds everywhere; it guards a split made otherwise.
  if (length < rows && n > 1) {
    throw ExecError(where + ": node `" + edit.node + "` convolves this rank's " + std::to_string(length) + " row(s) of `" +
                    edit.value + "` along dim " + std::to_string(d) + " with a kernel reaching " + std::to_string(rows) +
                    " row(s) past each end, which its neighbours must hold: with " + std::to_string(n) +
                    " CP ranks each holds fewer; use a lower CP degree or a larger input");
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape[static_cast<size_t>(d)] = rows;
  at::Tensor before = at::zeros(shape, x.options()), after = at::zeros(shape, x.options());
  if (n > 1) {
    std::vector<dist::DistContext::Send> sends;
    std::vector<dist::DistContext::Recv> recvs;
    if (r > 0) {
      sends.push_back({x.narrow(d, 0, rows).contiguous(), r - 1});
      recvs.push_back({before, r - 1});
    }
    if (r < n - 1) {
      sends.push_back({x.narrow(d, length - rows, rows).contiguous(), r + 1});
      recvs.push_back({after, r + 1});
    }
    try {
      ctx_.SendRecv(dist::Axis::kCp, std::move(sends), std::move(recvs)).Wait();
    } catch (const std::exception& e) {
      throw ExecError(where + ": halo exchange of `" + edit.value + "` for node `" + edit.node + "` failed: " + ErrorText(e));
    }
  }
  return at::cat({before, x, after}, d);
}

at::Tensor ProgramBackend::RmsNorm(const at::Tensor& x, int64_t normalized_dims, const std::optional<at::Tensor>& weight,
                                   std::optional<double> eps, const plan::ProgramEdit& edit) {
  const std::string where = Where(ctx_, edit.module, edit.origin);
  if (normalized_dims < 1 || normalized_dims > x.dim() || edit.new_value <= 0) {
    throw ExecError(where + ": sharded RMS norm of " + std::to_string(normalized_dims) + " dims over a full width of " +
                    std::to_string(edit.new_value) + " on a rank-" + std::to_string(x.dim()) + " tensor");
  }
  return nn::ShardedRmsNorm(x, normalized_dims, edit.new_value, weight, eps, [&](at::Tensor& sum) {
    try {
      ctx_.AllReduce(dist::Axis::kTp, sum);
    } catch (const std::exception& e) {
      throw ExecError(where + ": all-reduce of the RMS statistics of `" + edit.value + "` failed: " + ErrorText(e));
    }
  });
}

}  // namespace weft::exec

#include "runtime/attention/local.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace weft::runtime {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void CheckInputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& key_mask) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention: q, k, v must be (B, S, H, D); got q ", q.sizes(), ", k ", k.sizes(),
              ", v ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), "attention: k ", k.sizes(), " and v ", v.sizes(),
              " differ");
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3),
              "attention: q ", q.sizes(), " and k ", k.sizes(),
              " disagree on batch, heads or head dim");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "attention: q, k, v dtypes differ (", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type(), ")");
  if (key_mask) {
    TORCH_CHECK(key_mask->dim() == 2 && key_mask->size(0) == k.size(0) &&
                    key_mask->size(1) == k.size(1),
                "attention: key mask must be (B, Skv) = (", k.size(0), ", ", k.size(1),
                "); got ", key_mask->sizes());
    TORCH_CHECK(key_mask->scalar_type() == at::kBool, "attention: key mask must be bool, got ",
                key_mask->scalar_type());
  }
}

void CheckPairMask(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& pair_mask) {
  if (!pair_mask) return;
  const at::Tensor& m = *pair_mask;
  TORCH_CHECK(m.dim() == 4 && (m.size(0) == 1 || m.size(0) == q.size(0)) && m.size(1) == 1 && m.size(2) == q.size(1) &&
                  m.size(3) == k.size(1),
              "attention: a mask over (query, key) pairs must be (B or 1, 1, Sq, Skv) = (", q.size(0), ", 1, ", q.size(1),
              ", ", k.size(1), "); got ", m.sizes());
  TORCH_CHECK(m.scalar_type() == at::kBool || at::isFloatingType(m.scalar_type()),
              "attention: a mask over (query, key) pairs must be bool or floating (a bias), got ", m.scalar_type());
}

// A mask is bool (true = attend) or a floating bias added to the scores (-inf = do not attend),
// as scaled_dot_product_attention takes its attn_mask.
bool IsBias(const at::Tensor& mask) { return mask.scalar_type() != at::kBool; }

// Where `mask` lets a query attend a key.
at::Tensor Attends(const at::Tensor& mask) { return IsBias(mask) ? at::isneginf(mask).logical_not() : mask; }

// The key mask and the pair mask as one (B or 1, 1, Sq or 1, Skv) mask: bool (true = attend),
// or a bias when the pair mask is one (its masked keys -inf).
std::optional<at::Tensor> CombinedMask(const at::Tensor& k, const std::optional<at::Tensor>& key_mask,
                                       const std::optional<at::Tensor>& pair_mask) {
  std::optional<at::Tensor> keys;
  if (key_mask) keys = key_mask->view({k.size(0), 1, 1, k.size(1)});
  if (!pair_mask) return keys;
  if (!keys) return *pair_mask;
  if (IsBias(*pair_mask)) return at::where(*keys, *pair_mask, at::full({}, kNegInf, pair_mask->options()));
  return pair_mask->logical_and(*keys);
}

// `mask` as an additive float bias of `dtype`.
at::Tensor AdditiveOf(const at::Tensor& mask, const at::TensorOptions& options) {
  if (IsBias(mask)) return mask.to(options.dtype());
  return at::zeros(mask.sizes(), options).masked_fill_(mask.logical_not(), kNegInf);
}

double ScaleOf(const at::Tensor& q, const std::optional<double>& scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}


AttentionOutput EmptyKeys(const at::Tensor& q, bool return_lse) {
  AttentionOutput result;
  result.out = at::zeros_like(q, at::MemoryFormat::Contiguous);
  if (return_lse) {
    result.lse = at::full({q.size(0), q.size(1), q.size(2)}, kNegInf, q.options().dtype(at::kFloat));
  }
  return result;
}

// Fully masked rows of `mask` (B or 1, 1, Sq or 1, Skv): out 0, lse -inf, whatever the kernel
// reported.
void FixEmptyRows(AttentionOutput& result, const at::Tensor& mask) {
  const at::Tensor empty = Attends(mask).logical_not().all(3);  // (B or 1, 1, Sq or 1)
  if (empty.device().is_cpu() && !empty.any().item<bool>()) return;
  const at::Tensor rows = empty.transpose(1, 2);  // (B or 1, Sq or 1, 1): out and lse are (B, Sq, H[, D])
  result.out = result.out.masked_fill(rows.unsqueeze(-1), 0);
  if (result.lse.defined()) result.lse = result.lse.masked_fill(rows, kNegInf);
}

// `mask`: (B or 1, 1, Sq or 1, Skv) bool (true = attend) or a bias.
AttentionOutput MathAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const std::optional<at::Tensor>& mask, double scale,
                              at::ScalarType compute_dtype, at::ScalarType lse_dtype) {
  const at::Tensor qh = q.to(compute_dtype).transpose(1, 2);  // (B, H, Sq, D)
  const at::Tensor kh = k.to(compute_dtype).transpose(1, 2);
  const at::Tensor vh = v.to(compute_dtype).transpose(1, 2);
  at::Tensor scores = at::matmul(qh, kh.transpose(-1, -2)).mul_(scale);  // (B, H, Sq, Skv)
  if (mask && IsBias(*mask)) {
    scores.add_(mask->to(compute_dtype));
  } else if (mask) {
    scores.masked_fill_(mask->logical_not(), kNegInf);
  }
  at::Tensor lse = at::logsumexp(scores, -1, /*keepdim=*/true);  // -inf for empty rows
  at::Tensor probs = at::exp(scores.sub_(lse));
  probs.masked_fill_(at::isneginf(lse), 0);
  AttentionOutput result;
  result.out = at::matmul(probs, vh).transpose(1, 2).contiguous().to(q.scalar_type());
  result.lse = lse.squeeze(-1).transpose(1, 2).contiguous().to(lse_dtype);
  return result;
}

#ifdef WEFT_WITH_CUDA
AttentionOutput CudaFusedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::optional<at::Tensor>& mask, double scale) {
  const at::Tensor qh = q.transpose(1, 2);
  const at::Tensor kh = k.transpose(1, 2);
  const at::Tensor vh = v.transpose(1, 2);
  const int64_t b = q.size(0), h = q.size(2), sq = q.size(1), skv = k.size(1);
  const bool half = q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16;
  AttentionOutput result;
  if (!mask && half && q.size(3) % 8 == 0 && q.size(3) <= 256) {
    auto outputs = at::_scaled_dot_product_flash_attention(qh, kh, vh, 0.0, false, false, scale);
    result.out = std::get<0>(outputs).transpose(1, 2);
    result.lse = std::get<1>(outputs).narrow(-1, 0, sq).transpose(1, 2);
    return result;
  }
  std::optional<at::Tensor> bias;
  if (mask) {
    // The memory-efficient kernel wants the bias's last dim aligned to 16 elements.
    const int64_t aligned = (skv + 15) / 16 * 16;
    at::Tensor storage = at::zeros({mask->size(0), 1, mask->size(2), aligned}, q.options());
    storage.narrow(-1, 0, skv).copy_(AdditiveOf(*mask, q.options()));
    bias = storage.narrow(-1, 0, skv).expand({b, h, sq, skv});
  }
  auto outputs = at::_scaled_dot_product_efficient_attention(qh, kh, vh, bias,
                                                             /*compute_log_sumexp=*/true, 0.0,
                                                             false, scale);
  result.out = std::get<0>(outputs).transpose(1, 2);
  result.lse = std::get<1>(outputs).narrow(-1, 0, sq).transpose(1, 2).to(at::kFloat);
  return result;
}
#endif

}  // namespace

const char* LocalKernelName(LocalKernel kernel) {
  switch (kernel) {
    case LocalKernel::kAuto: return "auto";
    case LocalKernel::kFused: return "fused";
    case LocalKernel::kMath: return "math";
    case LocalKernel::kNoLse: return "sdpa-no-lse";
  }
  return "?";
}

bool KernelReturnsLse(LocalKernel kernel) { return kernel != LocalKernel::kNoLse; }

AttentionOutput LocalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& key_mask,
                               const LocalAttentionOptions& options) {
  return LocalAttention(q, k, v, key_mask, std::nullopt, options);
}

AttentionOutput LocalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& key_mask,
                               const std::optional<at::Tensor>& pair_mask,
                               const LocalAttentionOptions& options) {
  CheckInputs(q, k, v, key_mask);
  CheckPairMask(q, k, pair_mask);
  TORCH_CHECK(!(options.return_lse && !KernelReturnsLse(options.kernel)),
              "attention: kernel '", LocalKernelName(options.kernel),
              "' does not return the log-sum-exp");
  const double scale = ScaleOf(q, options.scale);
  if (k.size(1) == 0 || q.size(1) == 0) return EmptyKeys(q, options.return_lse);
  // On CPU the checks are cheap: an all-true mask is no mask (the fused kernel is faster
  // without one), and a block whose keys are all masked needs no kernel at all (ring blocks of
  // padding). On CUDA they would synchronise, so the mask is always applied there.
  std::optional<at::Tensor> mask = CombinedMask(k, key_mask, pair_mask);
  if (mask && mask->device().is_cpu()) {
    if (!Attends(*mask).any().item<bool>()) {
      return EmptyKeys(q, options.return_lse);
    } else if (IsBias(*mask) ? mask->eq(0).all().item<bool>() : mask->all().item<bool>()) {
      mask.reset();
    }
  }

  LocalKernel kernel = options.kernel;
  if (kernel == LocalKernel::kAuto) {
#ifdef WEFT_WITH_CUDA
    const bool fused_device = q.device().is_cpu() || q.device().is_cuda();
#else
    const bool fused_device = q.device().is_cpu();
#endif
    kernel = fused_device ? LocalKernel::kFused : LocalKernel::kMath;
  }

  AttentionOutput result;
  switch (kernel) {
    case LocalKernel::kFused: {
#ifdef WEFT_WITH_CUDA
      if (q.device().is_cuda()) {
        result = CudaFusedAttention(q, k, v, mask, scale);
        break;
      }
#endif
      TORCH_CHECK(q.device().is_cpu(), "attention: no fused kernel for device ", q.device(),
                  " in this build");
      // The CPU kernel takes an additive float mask of q's dtype (a bool mask is rejected).
      std::optional<at::Tensor> additive;
      if (mask) additive = AdditiveOf(*mask, q.options());
      auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
          q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, false, additive, scale);
      result.out = out.transpose(1, 2);
      result.lse = lse.transpose(1, 2);
      break;
    }
    case LocalKernel::kMath: {
      const bool low = q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16;
      result = MathAttention(q, k, v, mask, scale, low ? at::kFloat : q.scalar_type(),
                             at::kFloat);
      break;
    }
    case LocalKernel::kNoLse: {
      std::optional<at::Tensor> m;
      if (mask) m = IsBias(*mask) ? mask->to(q.scalar_type()) : *mask;
      result.out = at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                    v.transpose(1, 2), m, 0.0, false, scale)
                       .transpose(1, 2);
      break;
    }
    case LocalKernel::kAuto: break;
  }
  if (!options.return_lse) result.lse = at::Tensor();
  if (mask) FixEmptyRows(result, *mask);
  if (result.lse.defined()) result.lse = result.lse.to(at::kFloat);
  return result;
}

AttentionOutput ReferenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::optional<at::Tensor>& key_mask,
                                   std::optional<double> scale, at::ScalarType compute_dtype,
                                   const std::optional<at::Tensor>& pair_mask) {
  CheckInputs(q, k, v, key_mask);
  CheckPairMask(q, k, pair_mask);
  const at::ScalarType lse_dtype = compute_dtype == at::kDouble ? at::kDouble : at::kFloat;
  if (k.size(1) == 0) {
    AttentionOutput empty = EmptyKeys(q, true);
    empty.lse = empty.lse.to(lse_dtype);
    return empty;
  }
  return MathAttention(q, k, v, CombinedMask(k, key_mask, pair_mask), ScaleOf(q, scale), compute_dtype, lse_dtype);
}

void LseMerger::Add(const at::Tensor& out_i, const at::Tensor& lse_i) {
  at::Tensor out = convert_to_fp32_ ? out_i.to(at::kFloat) : out_i;
  at::Tensor lse = lse_i.to(at::kFloat).unsqueeze(-1);
  if (!out_.defined()) {
    // The merge updates out_ in place, so never alias a tensor the caller may still hold.
    out_ = out.is_same(out_i) ? out.clone() : out;
    lse_ = lse;
    return;
  }
  const at::Tensor prev_empty = at::isneginf(lse_);
  const at::Tensor cur_empty = at::isneginf(lse);
  // sigmoid(-inf - -inf) is NaN: an empty block gets weight 0, an empty history weight 1.
  at::Tensor weight = at::sigmoid(lse - lse_);
  weight = at::where(cur_empty, 0.0, at::where(prev_empty, 1.0, weight));
  out_.sub_((out_ - out).mul_(weight.to(out_.scalar_type())));
  const at::Tensor merged = lse_ - at::log_sigmoid(lse_ - lse);
  lse_ = at::where(prev_empty, lse, at::where(cur_empty, lse_, merged));
}

AttentionOutput LseMerger::Finish(at::ScalarType dtype) const {
  TORCH_CHECK(out_.defined(), "LseMerger::Finish: no block was added");
  return AttentionOutput{out_.to(dtype), lse_.squeeze(-1)};
}

std::vector<int64_t> SplitSizes(int64_t total, int64_t parts) {
  TORCH_CHECK(parts > 0 && total >= 0, "SplitSizes: bad split of ", total, " into ", parts);
  std::vector<int64_t> sizes(parts, total / parts);
  for (int64_t i = 0; i < total % parts; ++i) ++sizes[i];
  return sizes;
}

at::Tensor SplitPiece(const at::Tensor& t, int64_t dim, int64_t parts, int64_t index) {
  const std::vector<int64_t> sizes = SplitSizes(t.size(dim), parts);
  TORCH_CHECK(index >= 0 && index < parts, "SplitPiece: index ", index, " out of ", parts);
  int64_t start = 0;
  for (int64_t i = 0; i < index; ++i) start += sizes[i];
  return t.narrow(dim, start, sizes[index]);
}

at::Tensor SplitJoint(const std::vector<at::Tensor>& streams, int64_t parts, int64_t index) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(streams.size());
  for (const at::Tensor& s : streams) pieces.push_back(SplitPiece(s, 1, parts, index));
  return at::cat(pieces, 1);
}

HeadPadding PadHeads(int64_t heads, int64_t degree, const std::string& where) {
  TORCH_CHECK(heads > 0 && degree > 0, where, ": bad head count ", heads, " or degree ", degree);
  HeadPadding p;
  p.heads = heads;
  p.pad = (degree - heads % degree) % degree;
  p.padded = heads + p.pad;
  p.per_rank = p.padded / degree;
  TORCH_CHECK(p.pad < p.per_rank, where, ": ", heads, " heads over ulysses degree ", degree,
              " need ", p.pad, " zero-padded heads but each rank holds only ", p.per_rank,
              ", so the last rank would hold no real head; choose a ulysses degree that leaves ",
              "every rank a real head (or put the rest of the degree on the ring axis)");
  return p;
}

at::Tensor PadHeadDim(const at::Tensor& t, const HeadPadding& padding) {
  if (padding.pad == 0) return t;
  TORCH_CHECK(t.size(2) == padding.heads, "PadHeadDim: tensor has ", t.size(2),
              " heads, expected ", padding.heads);
  std::vector<int64_t> shape = t.sizes().vec();
  shape[2] = padding.pad;
  return at::cat({t, at::zeros(shape, t.options())}, 2);
}

}  // namespace weft::runtime

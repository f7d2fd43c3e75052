#pragma once

// Single-process building blocks of context-parallel attention: local attention that returns
// the log-sum-exp, the online out/LSE merge, sequence split helpers and head padding.
// Everything here is communication-free, so the ring merge can be checked exactly in one
// process. Layouts (diffusers' "model layout"): q/k/v/out (B, S, H, D), LSE (B, S, H),
// key-padding masks (B, Skv) bool, true = attend.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::runtime {

// Which local kernel computes one block of attention.
//   kAuto: fused when the device has one, else math.
//   kFused: LibTorch's fused flash attention (CPU: _scaled_dot_product_flash_attention_for_cpu;
//     CUDA, when built WEFT_WITH_CUDA: flash without a mask, memory-efficient with one). Both
//     return the LSE.
//   kMath: plain softmax(q k^T * scale) v, in the input dtype (or fp64 for tests); returns LSE.
//   kNoLse: at::scaled_dot_product_attention, which returns no LSE (diffusers' `native`).
//     Usable by Ulysses and local attention; ring modes refuse it.
enum class LocalKernel { kAuto, kFused, kMath, kNoLse };

// Name used in messages ("fused", "math", ...).
const char* LocalKernelName(LocalKernel kernel);

// True when `kernel` returns a log-sum-exp (everything except kNoLse).
bool KernelReturnsLse(LocalKernel kernel);

struct LocalAttentionOptions {
  // Softmax scale; nullopt means 1/sqrt(D).
  std::optional<double> scale;
  LocalKernel kernel = LocalKernel::kAuto;
  // Return the LSE (B, Sq, H) in fp32. Must be false for kNoLse.
  bool return_lse = true;
};

// out (B, Sq, H, D) in q's dtype; lse (B, Sq, H) fp32 natural-log (undefined when not asked).
// Rows whose every key is masked have out = 0 and lse = -inf (the fused CPU kernel reports 0;
// it is corrected here), so they carry zero weight in a merge and never produce NaN.
struct AttentionOutput {
  at::Tensor out;
  at::Tensor lse;
};

// Attention of q (B, Sq, H, D) over k, v (B, Skv, H, D) with an optional key-padding mask
// (B, Skv) bool (true = attend). Throws c10::Error on shape or dtype disagreement.
AttentionOutput LocalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& key_mask,
                               const LocalAttentionOptions& options = {});

// As above, with a mask over (query, key) pairs as well: `pair_mask` (B or 1, 1, Sq, Skv) bool,
// true = attend (a sliding window, a block-diagonal segment mask), or floating: a bias added to
// the scores, -inf = do not attend (scaled_dot_product_attention's float attn_mask: ALiBi, a
// relative-position bias, Chroma's 0/1 mask). Combined with the key mask. A query row with no
// key left has out 0 and lse -inf.
AttentionOutput LocalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& key_mask,
                               const std::optional<at::Tensor>& pair_mask,
                               const LocalAttentionOptions& options);

// Reference for tests: the math path computed in `compute_dtype` (fp64 by default), output
// cast back to q's dtype, LSE in fp32 (or fp64 when compute_dtype is fp64).
AttentionOutput ReferenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::optional<at::Tensor>& key_mask,
                                   std::optional<double> scale = std::nullopt,
                                   at::ScalarType compute_dtype = at::kDouble,
                                   const std::optional<at::Tensor>& pair_mask = std::nullopt);

// Online-softmax accumulator for blocks of keys seen by the same queries. Add() merges one
// block's (out_i, lse_i) with
//   out = out_prev - sigmoid(lse_i - lse_prev) * (out_prev - out_i)
//   lse = lse_prev - logsigmoid(lse_prev - lse_i)
// computed in fp32 when convert_to_fp32 (else in out's dtype, LSE always fp32). Blocks whose
// rows are fully masked (lse = -inf) contribute nothing, also when every block so far is
// empty: no NaN is ever produced.
class LseMerger {
 public:
  explicit LseMerger(bool convert_to_fp32) : convert_to_fp32_(convert_to_fp32) {}
  // out_i (B, S, H, D), lse_i (B, S, H).
  void Add(const at::Tensor& out_i, const at::Tensor& lse_i);
  bool empty() const { return !out_.defined(); }
  // Merged out cast to `dtype`, and LSE (B, S, H) fp32. Requires at least one Add().
  AttentionOutput Finish(at::ScalarType dtype) const;

 private:
  bool convert_to_fp32_;
  at::Tensor out_;  // (B, S, H, D)
  at::Tensor lse_;  // (B, S, H, 1)
};

// Per-rank lengths of a dimension of size `total` split over `parts` ranks: even when it
// divides (chunk), else tensor_split's rule (the first total % parts ranks get one more).
std::vector<int64_t> SplitSizes(int64_t total, int64_t parts);

// Rank `index`'s piece of `t` along `dim` under SplitSizes (a view).
at::Tensor SplitPiece(const at::Tensor& t, int64_t dim, int64_t parts, int64_t index);

// Joint sequences: each stream split separately, the local pieces concatenated in stream order
// (diffusers' cat(text, image) per rank). Streams are (B, S_s, ...) tensors split on dim 1.
at::Tensor SplitJoint(const std::vector<at::Tensor>& streams, int64_t parts, int64_t index);

// Head padding for Ulysses with `degree` ranks and `heads` heads: heads are zero-padded at the
// end to a multiple of the degree.
struct HeadPadding {
  int64_t heads = 0;        // real heads H
  int64_t padded = 0;       // H + pad, a multiple of degree
  int64_t per_rank = 0;     // padded / degree
  int64_t pad = 0;          // padded - heads
};

// Computes the padding; throws c10::Error (with `where` in the message) when the padding would
// fill a whole rank's heads (pad >= per_rank, e.g. H = 30 over 16 ranks), since that rank
// would have no real head.
HeadPadding PadHeads(int64_t heads, int64_t degree, const std::string& where);

// Zero-pads dim 2 (heads) of a (B, S, H, D) tensor to `padding.padded`.
at::Tensor PadHeadDim(const at::Tensor& t, const HeadPadding& padding);

}  // namespace weft::runtime

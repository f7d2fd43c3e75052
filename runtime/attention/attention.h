#pragma once

// Context-parallel attention over runtime/dist: Ulysses, Ring (rotate = allgather or p2p),
// USP (Ulysses on the inner axis, ring on the outer), with uneven sequence lengths on either
// or both axes, heads that do not divide the Ulysses degree, Sq != Skv, and key-padding masks
// in every mode. The math follows reference/diffusers-parallelism.md section 3, with the
// fixes of its section 8 (masks travel with their keys; uneven masks concatenate each rank's
// unpadded piece; a real p2p ring).
//
// Conventions. Every rank passes its local pieces: q (B, Sq_r, H, D), k and v (B, Skv_r, H, D),
// an optional key-padding mask (B, Skv_r) bool (true = attend; absent = all true). The
// global sequence is the concatenation of the ranks' pieces in axis rank order (for USP:
// CP rank = ring_index * U + ulysses_index, the order of Mesh::AxisRank(kCp)). Lengths may
// differ between ranks (0 allowed); B, H, D and the dtype may not. Outputs: out (B, Sq_r, H, D)
// in q's dtype, the attention of this rank's queries over the whole global key sequence, and
// (when asked) lse (B, Sq_r, H) fp32. Rows with no key to attend to give out 0, lse -inf.
//
// Blocking and errors: every function is collective over the named axes (all ranks of the
// group must call it with the same options) and blocks until done. Before moving data, each
// call exchanges a small shape record (one all-gather of kShapeFields int64 per rank; see
// `exchange_shapes`), so ranks that disagree on B, H, D, the dtype or the options all throw
// the same c10::Error, naming the rank, the call and the disagreeing ranks, instead of
// hanging. Local errors (a ring mode with a kernel that has no LSE, too much head
// padding) are detected before any communication; collective failures surface as
// dist::DistError from runtime/dist.

#include "runtime/attention/local.h"
#include "runtime/dist/counters.h"
#include "runtime/dist/mesh.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::dist {
class DistContext;
}

namespace weft::runtime {

// How ring attention moves K/V.
//   kAllGather: diffusers' behaviour: one all-gather of K/V (and mask) up front; every rank
//     then holds the full K/V (O(S) memory), no overlap.
//   kP2p: a true ring: at step i each rank posts the send of its current K/V block (and mask
//     block) to the next rank and the receive of the following block from the previous one,
//     computes on the current block, waits, swaps. At most two blocks held: O(S/R) K/V.
enum class RingRotate { kAllGather, kP2p };
const char* RingRotateName(RingRotate rotate);

enum class CpMode { kLocal, kUlysses, kRing, kUsp };
const char* CpModeName(CpMode mode);

struct CpAttentionOptions {
  // Softmax scale; nullopt: 1/sqrt(D).
  std::optional<double> scale;
  // Kernel for every local block. Ring and USP need one that returns the LSE (not kNoLse).
  LocalKernel kernel = LocalKernel::kAuto;
  // Merge ring blocks in fp32 (out and LSE), as diffusers' convert_to_fp32. Off: out is
  // merged in its own dtype (LSE stays fp32).
  bool convert_to_fp32 = true;
  RingRotate rotate = RingRotate::kAllGather;
  // Also return the LSE (B, Sq_r, H) fp32. Ulysses then moves it back with one more
  // all-to-all.
  bool return_lse = false;
  // One all-gather of the shape record per call (validation + every rank's lengths). Off:
  // no validation, and every rank is assumed to have this rank's lengths (an even split);
  // mask presence must then agree on every rank. Communication is then exactly the
  // formula minimum of peers-and-limits.md (c).
  bool exchange_shapes = true;
  // Name of the call site (e.g. "transformer_blocks.3.attn"), used in error messages.
  std::string label;
  // A mask over (query, key) pairs of the whole call -- a sliding window, a block-diagonal
  // segment mask -- as (B or 1, 1, Sq_total, Skv_total) bool, true = attend, or a float bias added
  // to the scores (-inf = do not attend), the same on every
  // rank of the group, its rows and columns in the global order (the ranks' pieces concatenated
  // in rank order). It never moves: each rank applies the rows of its queries and the columns of
  // each key block it attends to, so the bytes sent are those without it. Combined with the key
  // mask when both are given.
  std::optional<at::Tensor> pair_mask;
};

// Ulysses on `axis` (default kUlysses): all-to-all q/k/v (scatter heads, gather sequence),
// local attention over the whole sequence with this rank's head group, all-to-all back.
// Heads not divisible by the degree are zero-padded at the end (PadHeads rules). Masks are
// gathered in rank order, each rank's piece unpadded. k and v travel in one all-to-all, and
// q joins them when every rank has Sq_r == Skv_r.
AttentionOutput UlyssesAttention(dist::DistContext& ctx, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                                 const CpAttentionOptions& options = {},
                                 dist::Axis axis = dist::Axis::kUlysses);

// Ring on `axis` (default kRing): q stays local; K/V blocks (with their mask blocks) visit
// every rank (options.rotate) and the blocks' (out, lse) are merged with LseMerger.
AttentionOutput RingAttention(dist::DistContext& ctx, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                              const CpAttentionOptions& options = {},
                              dist::Axis axis = dist::Axis::kRing);

// USP on the kUlysses (inner) and kRing (outer) axes: Ulysses all-to-all, ring attention
// over the ring slices (each slice = the concatenation of its ulysses group's pieces; slice
// lengths may differ), reverse all-to-all. The shape record goes over kCp.
AttentionOutput UspAttention(dist::DistContext& ctx, const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                             const CpAttentionOptions& options = {});

// The mode for a mesh: both ring and ulysses > 1: kUsp; ring > 1: kRing; ulysses > 1:
// kUlysses; else kLocal.
CpMode ModeForMesh(int ring, int ulysses);

// Dispatches on ModeForMesh(ctx's ring and ulysses sizes); kLocal runs LocalAttention.
AttentionOutput ContextParallelAttention(dist::DistContext& ctx, const at::Tensor& q,
                                         const at::Tensor& k, const at::Tensor& v,
                                         const std::optional<at::Tensor>& key_mask,
                                         const CpAttentionOptions& options = {});

// The rows of a joint sequence that every rank of the group holds whole, before and after its
// split rows, in q and in k/v (Mochi joins each sample's valid text tokens, the same on every
// rank, to the rank's split video tokens).
struct WholeRows {
  int64_t q_before = 0, q_after = 0, kv_before = 0, kv_after = 0;
  bool Any() const { return q_before + q_after + kv_before + kv_after > 0; }
};

// `mode` (which ContextParallelAttention would pick for ctx's mesh, or another) over such a
// joint sequence. Whole keys are attended once, not once per rank: this rank's split queries run
// `mode` over every rank's split keys, merged (by LSE) with a local attention over the whole
// keys. Whole queries attend this rank's split keys and, on every rank alike, the whole keys; the
// ranks' partial (out, lse) are all-gathered over the CP group and merged in rank order, so
// every rank gets the same whole rows, bit for bit. Communication beyond `mode`'s: one
// all-gather of B x (whole query rows) x H x (D + 1) values. Masks with whole rows are refused
// (options.pair_mask and `key_mask`), as is a kernel without LSE. Outputs are laid out as q.
AttentionOutput AttentionWithWholeRows(dist::DistContext& ctx, CpMode mode, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                                       const WholeRows& whole, const CpAttentionOptions& options = {});

// `mode` run as ContextParallelAttention runs it (kLocal: LocalAttention).
AttentionOutput AttentionInMode(dist::DistContext& ctx, CpMode mode, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                                const CpAttentionOptions& options = {});

// Number of int64 fields in the shape record.
inline constexpr int64_t kShapeFields = 8;

// Everything that decides one rank's communication in one attention call.
struct CommShape {
  CpMode mode = CpMode::kLocal;
  int ring = 1;                  // ring degree R
  int ulysses = 1;               // ulysses degree U
  int cp_rank = 0;               // this rank's CP index: ring_index * U + ulysses_index
  int64_t batch = 1, heads = 1, head_dim = 1;
  int64_t element_bytes = 4;     // bytes per element of q/k/v
  std::vector<int64_t> sq;       // query length of every CP rank, in CP rank order
  std::vector<int64_t> skv;      // key length of every CP rank
  // Masks move: with exchange_shapes, when some rank's mask has a false entry; without it,
  // whenever a mask is passed.
  bool mask = false;
};

// The calls and bytes this rank sends in one call with `options`, in runtime/dist's counting
// convention (counters.h), per axis and collective. Tests compare it with the counters.
dist::CommCounters PredictComm(const CommShape& shape, const CpAttentionOptions& options);

// The closed forms of peers-and-limits.md (c) for an even split, in bytes sent per rank
// (forward, no mask, no LSE): Ulysses 4*B*S*d*b*(U-1)/U^2, ring 2*B*S*d*b*(R-1)/R, USP
// 4*B*S*d*b*(U-1)/(U^2*R) + 2*B*S*d*b*(R-1)/(R*U), with d = H*D.
int64_t FormulaBytes(CpMode mode, int ring, int ulysses, int64_t batch, int64_t seq,
                     int64_t heads, int64_t head_dim, int64_t element_bytes);

}  // namespace weft::runtime

#pragma once

// The cost model: bytes each rank sends per collective, collectives per attention call, and
// per-rank memory of sharded parameters. Pure arithmetic on the plan's types, so both lowerings
// use it: compiler/lower fills the ExecutionPlan's cost section with it, compiler/program matches
// that cost to the program's edits; `weft explain` prints them.
//
// Formulas (shared/reference/peers-and-limits.md, section (c)); B batch, S tokens, d = H*D the
// width exchanged, b bytes per element, U/R/T the ulysses/ring/tp degrees. "Bytes per rank" is
// what one rank sends (about what it receives), summed over the collectives of one call:
//   Ulysses   4*B*S*d*b*(U-1)/U^2                      (q, k, v in; out back: 4 all-to-alls)
//   Ring      2*B*S*d*b*(R-1)/R                        (K and V travel R-1 hops)
//   USP       4*B*S*d*b*(U-1)/(U^2*R) + 2*B*S*d*b*(R-1)/(R*U)
//   TP        2*B*S*d*b*(T-1)/T per all-reduce         (ring all-reduce)
//   gather    N*b*(W-1)/W for an all-gather of an N-element tensor over W ranks
// With different query and key/value lengths (cross-attention), the Ulysses volume is
// (2*Sq + 2*Skv)*B*d*b*(U-1)/U^2 (q and out carry Sq, k and v carry Skv) and the ring volume
// uses Skv; with Sq == Skv they are the formulas above. Results are rounded to the nearest byte.

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/plan/execution_plan.h"

namespace weft::plan {

// 4*B*S*d*b*(U-1)/U^2: one Ulysses attention call on a degree-U group (R = 1).
int64_t UlyssesBytes(int64_t batch, int64_t seq, int64_t width, int64_t elem_bytes, int64_t ulysses);

// 2*B*S*d*b*(R-1)/R: one ring attention call on a degree-R ring (U = 1), K/V of length S.
int64_t RingBytes(int64_t batch, int64_t seq, int64_t width, int64_t elem_bytes, int64_t ring);

// 2*B*S*d*b*(T-1)/T: one all-reduce of a (B, S, d) tensor over T ranks.
int64_t TpAllReduceBytes(int64_t batch, int64_t seq, int64_t width, int64_t elem_bytes, int64_t tp);

// N*b*(W-1)/W: one all-gather that leaves a `total_bytes` tensor on each of W ranks.
int64_t AllGatherBytes(int64_t total_bytes, int64_t ranks);

// One attention call, as the executor runs it.
struct AttentionCommInput {
  int64_t batch = 1;
  int64_t q_len = 0;   // global query length
  int64_t kv_len = 0;  // global key/value length
  int64_t heads = 0;   // heads this rank's projections produce (after TP), before Ulysses padding
  int64_t head_dim = 0;
  int64_t elem_bytes = 2;
  int64_t ulysses = 1;
  int64_t ring = 1;
  bool uneven_heads = false;  // pad heads up to a multiple of U (ulysses_anything)
  plan::RotateMethod rotate_method = plan::RotateMethod::kAllGather;
  // The queries are whole on every rank (LTX-2's audio queries over split video keys): each rank
  // sends its whole Sq, not Sq / (U*R), through the Ulysses exchange and back.
  bool q_replicated = false;
  // The kernel returns each query row's log-sum-exp (attention over streams every rank holds
  // whole merges by it): the Ulysses exchange brings it back with the output, one more
  // all-to-all of B x Sq x heads fp32.
  bool return_lse = false;
};

// One call of context-parallel attention `at` (a plan step's): its batch (this cfg rank's), global
// lengths and element bytes, the heads, degrees and rotation from `at`.
AttentionCommInput CommInputOf(const plan::Attention& at, int64_t batch, int64_t q_len, int64_t kv_len,
                               int64_t elem_bytes);

// Heads appended so that `heads + pad` divides by `ulysses` (0 when it already does).
int64_t HeadPad(int64_t heads, int64_t ulysses);

// The mode the degrees imply: U>1,R>1 usp; U>1 ulysses; R>1 ring; else local.
plan::AttentionMode ModeFor(int64_t ulysses, int64_t ring);

// Collectives of one attention call with their bytes per rank. Ulysses part: 4 all-to-alls on
// the ulysses axis; ring part: one all-gather of K/V (allgather) or R-1 send/recv steps (p2p)
// on the ring axis. Width d = (heads + pad) * head_dim. Empty for local attention.
std::vector<plan::Collective> AttentionCollectives(const AttentionCommInput& in);

// Collectives that move one context-parallel attention call's key-padding mask with its keys
// (bool, one byte per key and batch row; runtime/attention/attention.cpp PredictComm), as CP
// rank 0 sends them: on the ulysses axis one all-gather of its keys' mask to the U-1 others; on
// the ring axis its ulysses group's slice to the R-1 others, as one all-gather (allgather
// rotation) or riding the K/V send/recv steps (p2p: bytes, no calls of its own). Keys split as
// plan::SplitSizes(kv_len, U*R). An additive (floating) mask adds one all-reduce (max) of its
// rows' maxima on the cp group, B fp32 values (2(n-1)/n of them per rank, n = U*R): a row masked
// whole attends to every key there, as on one device (executor/program_backend.cpp). Empty when
// U = R = 1.
std::vector<plan::Collective> KeyMaskCollectives(int64_t batch, int64_t kv_len, int64_t ulysses, int64_t ring,
                                                 plan::RotateMethod rotate_method, bool additive = false);

// Adds `c` to the entry of `list` with its op and axis (calls and bytes, saturating), or appends
// it: sums a step's collectives over its traced calls.
void AddCollective(std::vector<plan::Collective>& list, const plan::Collective& c);

// `total`, summed over a step's `calls` traced calls, per call (a saturated count or byte total
// stays saturated).
plan::Collective PerCall(plan::Collective total, int64_t calls);

// Extra activation memory per rank of one attention call's K/V exchange: allgather
// materialises the full K and V (2*B*Skv_u*d*b, Skv_u = K/V length after the Ulysses
// exchange, d = this rank's heads * head_dim); p2p holds the current and the incoming block
// (4*B*(Skv_u/R)*d*b). 0 without a ring.
int64_t RingKvBufferBytes(const AttentionCommInput& in);

// How a parameter of shape `full_shape` is held by one of `tp` ranks under `style`. Linear
// weights are [out, in]: colwise shards dim 0 (bias dim 0 too), rowwise dim 1 (bias
// replicated). Packed styles shard each of `blocks` (which must sum to the dim) separately.
// Replicate keeps the full tensor. Callers check divisibility first; this rounds down.
plan::ParamShard ShardParam(const std::string& name, const std::vector<int64_t>& full_shape,
                            plan::ShardStyle style, const std::vector<int64_t>& blocks, int64_t tp);

// Elements of `shape`.
int64_t Numel(const std::vector<int64_t>& shape);

}  // namespace weft::plan

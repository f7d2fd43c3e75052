#include "compiler/plan/cost.h"

#include <algorithm>
#include <initializer_list>

#include "compiler/source/checked_math.h"

namespace weft::plan {
namespace {

__extension__ typedef __int128 Wide;  // products like 4*B*S*d*b*(U-1) may pass 2^63 for long videos

// The largest Wide; a product past it (sizes from a hostile graph) stays here.
const Wide kWideSaturated = ((Wide{1} << 126) - 1) * 2 + 1;

// The product of non-negative factors, saturated at kWideSaturated instead of wrapping.
Wide Prod(std::initializer_list<Wide> factors) {
  Wide p = 1;
  for (Wide f : factors) {
    if (f <= 0) return 0;
    if (p == kWideSaturated || __builtin_mul_overflow(p, f, &p)) p = kWideSaturated;
  }
  return p;
}

Wide Sum(Wide a, Wide b) {
  Wide out = 0;
  return a == kWideSaturated || b == kWideSaturated || __builtin_add_overflow(a, b, &out) ? kWideSaturated : out;
}

// round(num / den) for non-negative num, positive den; source::kSaturated when the result
// does not fit int64 (Lower reports it as CostOverflow).
int64_t DivRound(Wide num, Wide den) {
  if (den <= 0 || num <= 0) return 0;
  if (num == kWideSaturated) return source::kSaturated;
  const Wide q = Sum(num, den / 2) / den;
  return q >= Wide{source::kSaturated} ? source::kSaturated : static_cast<int64_t>(q);
}

}  // namespace

int64_t Numel(const std::vector<int64_t>& shape) { return source::SaturatingProduct(shape); }

int64_t UlyssesBytes(int64_t batch, int64_t seq, int64_t width, int64_t elem_bytes, int64_t ulysses) {
  if (ulysses <= 1) return 0;
  const Wide num = Prod({4, batch, seq, width, elem_bytes, ulysses - 1});
  return DivRound(num, Prod({ulysses, ulysses}));
}

int64_t RingBytes(int64_t batch, int64_t seq, int64_t width, int64_t elem_bytes, int64_t ring) {
  if (ring <= 1) return 0;
  const Wide num = Prod({2, batch, seq, width, elem_bytes, ring - 1});
  return DivRound(num, ring);
}

int64_t TpAllReduceBytes(int64_t batch, int64_t seq, int64_t width, int64_t elem_bytes, int64_t tp) {
  if (tp <= 1) return 0;
  const Wide num = Prod({2, batch, seq, width, elem_bytes, tp - 1});
  return DivRound(num, tp);
}

int64_t AllGatherBytes(int64_t total_bytes, int64_t ranks) {
  if (ranks <= 1) return 0;
  if (total_bytes == source::kSaturated) return source::kSaturated;
  return DivRound(Prod({total_bytes, ranks - 1}), ranks);
}

int64_t HeadPad(int64_t heads, int64_t ulysses) {
  if (ulysses <= 1 || heads % ulysses == 0) return 0;
  return ulysses - heads % ulysses;
}

plan::AttentionMode ModeFor(int64_t ulysses, int64_t ring) {
  if (ulysses > 1 && ring > 1) return plan::AttentionMode::kUsp;
  if (ulysses > 1) return plan::AttentionMode::kUlysses;
  if (ring > 1) return plan::AttentionMode::kRing;
  return plan::AttentionMode::kLocal;
}

AttentionCommInput CommInputOf(const plan::Attention& at, int64_t batch, int64_t q_len, int64_t kv_len,
                               int64_t elem_bytes) {
  AttentionCommInput in;
  in.batch = batch;
  in.q_len = q_len;
  in.kv_len = kv_len;
  in.heads = at.local_heads;
  in.head_dim = at.head_dim;
  in.elem_bytes = elem_bytes;
  in.ulysses = at.ulysses;
  in.ring = at.ring;
  in.uneven_heads = at.head_pad > 0;
  in.rotate_method = at.rotate_method;
  return in;
}

std::vector<plan::Collective> AttentionCollectives(const AttentionCommInput& in) {
  std::vector<plan::Collective> out;
  const int64_t U = in.ulysses < 1 ? 1 : in.ulysses;
  const int64_t R = in.ring < 1 ? 1 : in.ring;
  const Wide heads = Wide{in.heads} + (in.uneven_heads ? HeadPad(in.heads, U) : 0);
  const Wide width = Prod({heads, in.head_dim});
  if (U > 1) {
    // q and out carry Sq tokens, k and v carry Skv; a ring behind the exchange divides by R.
    // runtime/attention packs k with v, and q with them when Sq == Skv: 2 all-to-alls for
    // self/joint attention (qkv in, out back), 3 for cross attention; the bytes are the same.
    const Wide q_tokens = in.q_replicated ? Prod({in.q_len, U, R}) : Wide{in.q_len};
    const Wide num = Prod({Sum(Prod({2, q_tokens}), Prod({2, in.kv_len})), in.batch, width, in.elem_bytes, U - 1});
    out.push_back({plan::CollectiveOp::kAllToAll, std::string(plan::kUlyssesAxis), in.q_len == in.kv_len ? 2 : 3,
                   DivRound(num, Prod({U, U, R}))});
    if (in.return_lse) {
      const Wide lse = Prod({q_tokens, in.batch, heads, 4, U - 1});
      out.push_back({plan::CollectiveOp::kAllToAll, std::string(plan::kUlyssesAxis), 1, DivRound(lse, Prod({U, U, R}))});
    }
  }
  if (R > 1) {
    const Wide num = Prod({2, in.batch, in.kv_len, width, in.elem_bytes, R - 1});
    const int64_t bytes = DivRound(num, Prod({R, U}));
    if (in.rotate_method == plan::RotateMethod::kP2p) {
      out.push_back({plan::CollectiveOp::kSendRecv, std::string(plan::kRingAxis), R - 1, bytes});
    } else {
      out.push_back({plan::CollectiveOp::kAllGather, std::string(plan::kRingAxis), 1, bytes});
    }
  }
  return out;
}

std::vector<plan::Collective> KeyMaskCollectives(int64_t batch, int64_t kv_len, int64_t ulysses, int64_t ring,
                                                 plan::RotateMethod rotate_method, bool additive) {
  std::vector<plan::Collective> out;
  const int64_t U = ulysses < 1 ? 1 : ulysses;
  const int64_t R = ring < 1 ? 1 : ring;
  if (U * R == 1) return out;
  if (additive) {
    const int64_t n = U * R;
    out.push_back({plan::CollectiveOp::kAllReduce, std::string(plan::kCpGroup), 1,
                   source::SaturatingMul(source::SaturatingMul(batch, 4), 2 * (n - 1)) / n});
  }
  const std::vector<int64_t> keys = plan::SplitSizes(kv_len, U * R);
  int64_t slice = 0;  // rank 0's ring slice: the keys of its ulysses group
  for (int64_t u = 0; u < U; ++u) slice += keys[static_cast<size_t>(u)];
  if (U > 1) {
    out.push_back({plan::CollectiveOp::kAllGather, std::string(plan::kUlyssesAxis), 1,
                   source::SaturatingMul(source::SaturatingMul(batch, keys[0]), U - 1)});
  }
  if (R > 1) {
    const int64_t bytes = source::SaturatingMul(source::SaturatingMul(batch, slice), R - 1);
    if (rotate_method == plan::RotateMethod::kP2p) {
      out.push_back({plan::CollectiveOp::kSendRecv, std::string(plan::kRingAxis), 0, bytes});
    } else {
      out.push_back({plan::CollectiveOp::kAllGather, std::string(plan::kRingAxis), 1, bytes});
    }
  }
  return out;
}

void AddCollective(std::vector<plan::Collective>& list, const plan::Collective& c) {
  for (plan::Collective& x : list) {
    if (x.op == c.op && x.axis == c.axis) {
      x.count = source::SaturatingAdd(x.count, c.count);
      x.bytes = source::SaturatingAdd(x.bytes, c.bytes);
      return;
    }
  }
  list.push_back(c);
}

plan::Collective PerCall(plan::Collective total, int64_t calls) {
  const int64_t n = std::max<int64_t>(1, calls);
  if (total.count != source::kSaturated) total.count /= n;
  if (total.bytes != source::kSaturated) total.bytes /= n;
  return total;
}

int64_t RingKvBufferBytes(const AttentionCommInput& in) {
  const int64_t U = in.ulysses < 1 ? 1 : in.ulysses;
  const int64_t R = in.ring < 1 ? 1 : in.ring;
  if (R <= 1) return 0;
  const Wide heads = Wide{in.heads} + (in.uneven_heads ? HeadPad(in.heads, U) : 0);
  // After the Ulysses exchange a rank holds heads/U heads over U times its tokens: the K/V
  // width per rank is (heads/U)*D and the ring group's total K/V length is kv_len / 1.
  const Wide width = Prod({heads, in.head_dim});
  const Wide full = Prod({2, in.batch, in.kv_len, width, in.elem_bytes});  // K and V, all tokens, all heads
  if (in.rotate_method == plan::RotateMethod::kP2p) {
    return DivRound(Prod({full, 2}), Prod({R, U}));  // current + incoming block of this rank's heads
  }
  return DivRound(full, U);  // every K/V block of this rank's heads
}

plan::ParamShard ShardParam(const std::string& name, const std::vector<int64_t>& full_shape,
                            plan::ShardStyle style, const std::vector<int64_t>& blocks, int64_t tp) {
  plan::ParamShard p;
  p.name = name;
  p.full_shape = full_shape;
  p.local_shape = full_shape;
  if (tp < 1) tp = 1;
  int64_t dim = -1;
  const bool is_bias = full_shape.size() == 1;
  switch (style) {
    case plan::ShardStyle::kReplicate:
      break;
    case plan::ShardStyle::kColwise:
    case plan::ShardStyle::kPackedColwise:
      dim = 0;
      break;
    case plan::ShardStyle::kRowwise:
    case plan::ShardStyle::kPackedRowwise:
      dim = is_bias ? -1 : 1;  // the bias is added once, after the all-reduce
      break;
  }
  if (dim < 0 || dim >= static_cast<int64_t>(full_shape.size())) {
    p.dim = -1;
    return p;
  }
  p.dim = dim;
  const int64_t extent = full_shape[static_cast<size_t>(dim)];
  const bool packed = style == plan::ShardStyle::kPackedColwise || style == plan::ShardStyle::kPackedRowwise;
  p.blocks = packed && !blocks.empty() ? blocks : std::vector<int64_t>{extent};
  int64_t local = 0;
  for (int64_t b : p.blocks) local += b / tp;
  p.local_shape[static_cast<size_t>(dim)] = local;
  return p;
}

}  // namespace weft::plan

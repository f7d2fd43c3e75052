#include "runtime/attention/attention.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "runtime/dist/dist_context.h"

namespace weft::runtime {
namespace {

using dist::Axis;
using dist::CommOp;
using dist::DistContext;

// "rank 3 (ring rank 1 of 2): RingAttention `blocks.0.attn`" -- the prefix of every message.
std::string Where(DistContext& ctx, const char* call, Axis axis, const CpAttentionOptions& o) {
  std::ostringstream s;
  s << "rank " << ctx.rank() << " (" << dist::AxisName(axis) << " rank " << ctx.AxisRank(axis)
    << " of " << ctx.AxisSize(axis) << "): " << call;
  if (!o.label.empty()) s << " `" << o.label << "`";
  return s.str();
}

void CheckLocalInputs(const std::string& where, const at::Tensor& q, const at::Tensor& k,
                      const at::Tensor& v, const std::optional<at::Tensor>& key_mask) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, where,
              ": q, k, v must be (B, S, H, D); got q ", q.sizes(), ", k ", k.sizes(), ", v ",
              v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), where, ": k ", k.sizes(), " and v ", v.sizes(), " differ");
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3), where,
              ": q ", q.sizes(), " and k ", k.sizes(), " disagree on batch, heads or head dim");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), where,
              ": q, k, v dtypes differ");
  if (key_mask) {
    TORCH_CHECK(key_mask->dim() == 2 && key_mask->size(0) == k.size(0) &&
                    key_mask->size(1) == k.size(1) && key_mask->scalar_type() == at::kBool,
                where, ": key mask must be bool (B, Skv) = (", k.size(0), ", ", k.size(1),
                "); got ", key_mask->scalar_type(), " ", key_mask->sizes());
  }
}

void CheckRingKernel(const std::string& where, const CpAttentionOptions& o) {
  TORCH_CHECK(KernelReturnsLse(o.kernel), where,
              ": ring attention merges key blocks by their log-sum-exp, but kernel '",
              LocalKernelName(o.kernel), "' returns none; use kernel 'fused' or 'math'");
}

bool HasFalse(const std::optional<at::Tensor>& key_mask) {
  return key_mask && key_mask->numel() > 0 && !key_mask->all().item<bool>();
}

int64_t OptionBits(const CpAttentionOptions& o) {
  return static_cast<int64_t>(o.kernel) | static_cast<int64_t>(o.rotate) << 3 |
         static_cast<int64_t>(o.convert_to_fp32) << 4 | static_cast<int64_t>(o.return_lse) << 5 |
         (o.scale ? 1 : 0) << 6 | (o.pair_mask ? 1 : 0) << 7;
}

// Where each rank's piece starts in the global order: the sums of the lengths before it.
std::vector<int64_t> Offsets(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> offsets(lengths.size(), 0);
  for (size_t i = 1; i < lengths.size(); ++i) offsets[i] = offsets[i - 1] + lengths[i - 1];
  return offsets;
}

// The pair mask checked against the global lengths the ranks hold (it must cover exactly their
// queries and keys, in their order), on q's device.
at::Tensor PairMaskOf(const std::string& where, const at::Tensor& pair, const at::Tensor& q, int64_t sq_total,
                      int64_t skv_total) {
  TORCH_CHECK(pair.dim() == 4 && (pair.size(0) == 1 || pair.size(0) == q.size(0)) && pair.size(1) == 1 &&
                  pair.size(2) == sq_total && pair.size(3) == skv_total &&
                  (pair.scalar_type() == at::kBool || at::isFloatingType(pair.scalar_type())),
              where, ": the mask over (query, key) pairs must be bool or a float bias (B or 1, 1, Sq, Skv) over every rank's queries "
              "and keys, (", q.size(0), ", 1, ", sq_total, ", ", skv_total, "); got ", pair.scalar_type(), " ",
              pair.sizes());
  return pair.to(q.device());
}

// A field of the shape record as a reader wants it.
std::string FieldText(int field, int64_t value) {
  std::ostringstream s;
  if (field == 5) {
    s << c10::toString(static_cast<at::ScalarType>(value));
  } else if (field == 7) {
    s << "{kernel " << LocalKernelName(static_cast<LocalKernel>(value & 7)) << ", rotate "
      << RingRotateName(static_cast<RingRotate>(value >> 3 & 1)) << ", convert_to_fp32 "
      << (value >> 4 & 1) << ", return_lse " << (value >> 5 & 1) << ", scale "
      << ((value >> 6 & 1) ? "given" : "default") << ", pair mask " << ((value >> 7 & 1) ? "given" : "none") << "}";
  } else {
    s << value;
  }
  return s.str();
}

// What the shape record tells every rank: the lengths of every rank of the group (in axis
// rank order) and whether any mask has a false entry.
struct Lengths {
  std::vector<int64_t> sq, skv;
  bool mask = false;
};

Lengths ExchangeShapes(DistContext& ctx, Axis axis, const std::string& where, const at::Tensor& q,
                       const at::Tensor& k, const std::optional<at::Tensor>& key_mask,
                       const CpAttentionOptions& o) {
  const int n = ctx.AxisSize(axis);
  Lengths lengths;
  if (!o.exchange_shapes) {
    lengths.sq.assign(n, q.size(1));
    lengths.skv.assign(n, k.size(1));
    lengths.mask = key_mask.has_value();
    return lengths;
  }
  const int64_t record[kShapeFields] = {q.size(0), q.size(1), k.size(1), q.size(2), q.size(3),
                                        static_cast<int64_t>(q.scalar_type()),
                                        HasFalse(key_mask) ? 1 : 0, OptionBits(o)};
  const at::Tensor mine = at::from_blob(const_cast<int64_t*>(record), {kShapeFields}, at::kLong);
  const at::Tensor all = ctx.AllGather(axis, mine.clone(), 0).view({n, kShapeFields}).cpu();
  const auto a = all.accessor<int64_t, 2>();
  static const char* const kNames[kShapeFields] = {"batch",    "query length", "key length",
                                                   "heads",    "head dim",     "dtype",
                                                   "mask",     "options"};
  for (int field : {0, 3, 4, 5, 7}) {
    for (int j = 1; j < n; ++j) {
      if (a[j][field] == a[0][field]) continue;
      std::ostringstream s;
      s << where << ": ranks disagree on the " << kNames[field] << ": " << dist::AxisName(axis)
        << " rank 0 has " << FieldText(field, a[0][field]) << ", " << dist::AxisName(axis)
        << " rank " << j << " has " << FieldText(field, a[j][field]) << " (every rank's (B, Sq, Skv, H, D):";
      for (int i = 0; i < n; ++i) {
        s << " [" << a[i][0] << ", " << a[i][1] << ", " << a[i][2] << ", " << a[i][3] << ", "
          << a[i][4] << "]";
      }
      s << ")";
      TORCH_CHECK(false, s.str());
    }
  }
  for (int j = 0; j < n; ++j) {
    lengths.sq.push_back(a[j][1]);
    lengths.skv.push_back(a[j][2]);
    lengths.mask = lengths.mask || a[j][6] != 0;
  }
  return lengths;
}

bool AllEqual(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v.front(); });
}

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

// All-gather along `dim` when every rank's size on it is `sizes`: the even collective when the
// sizes agree, else the uneven one (which exchanges the sizes once more inside runtime/dist).
at::Tensor GatherKnown(DistContext& ctx, Axis axis, const at::Tensor& t, int64_t dim,
                       const std::vector<int64_t>& sizes) {
  return AllEqual(sizes) ? ctx.AllGather(axis, t.contiguous(), dim)
                         : ctx.AllGatherUneven(axis, t.contiguous(), dim);
}

// The global key mask (B, sum(sizes)) bool: each rank's own (unpadded) piece in rank order,
// all-true for a rank without a mask, made on `device` (q's), so that every rank's piece takes
// the same backend (NCCL for CUDA, else shared memory or Gloo).
at::Tensor GatherMask(DistContext& ctx, Axis axis, const std::optional<at::Tensor>& key_mask,
                      int64_t batch, const std::vector<int64_t>& sizes, at::Device device) {
  const int64_t mine = sizes[ctx.AxisRank(axis)];
  const at::Tensor local = key_mask ? key_mask->to(device, at::kByte)
                                    : at::ones({batch, mine}, at::TensorOptions().dtype(at::kByte).device(device));
  return GatherKnown(ctx, axis, local, 1, sizes).to(at::kBool);
}

// Ulysses forward exchange for tensors that share per-rank lengths: each (B, L_r, H, D) is
// head-padded and split into n head groups; group j of every rank goes to rank j, which gets
// (B, sum L, H/n', D) in rank order. Several tensors travel in one all-to-all.
std::vector<at::Tensor> ScatterHeads(DistContext& ctx, Axis axis,
                                     const std::vector<at::Tensor>& tensors,
                                     const std::vector<int64_t>& lengths,
                                     const HeadPadding& padding) {
  const int64_t n = ctx.AxisSize(axis);
  const int64_t mine = lengths[ctx.AxisRank(axis)];
  const int64_t b = tensors[0].size(0), d = tensors[0].size(3);
  const int64_t m = static_cast<int64_t>(tensors.size());
  // (n, L, B, m, Hl, D): rows of chunk j are this rank's tokens for head group j. Each tensor is
  // copied into its slot (at::stack of the permuted views takes ~2x as long on CPU).
  at::Tensor packed = at::empty({n, mine, b, m, padding.per_rank, d}, tensors[0].options());
  for (int64_t j = 0; j < m; ++j) {
    packed.select(3, j).copy_(PadHeadDim(tensors[static_cast<size_t>(j)], padding)
                                  .reshape({b, mine, n, padding.per_rank, d})
                                  .permute({2, 1, 0, 3, 4}));  // (n, L, B, Hl, D)
  }
  const at::Tensor send = packed.view({n * mine, b, m, padding.per_rank, d});
  const at::Tensor recv = ctx.AllToAllSingle(axis, send, std::vector<int64_t>(n, mine), lengths);
  std::vector<at::Tensor> out;
  for (int64_t j = 0; j < m; ++j) out.push_back(recv.select(2, j).permute({1, 0, 2, 3}));
  return out;
}

// Reverse exchange: t (B, sum L, Hl, X) for this rank's head group -> (B, L_me, H, X) with
// every head group, padding heads dropped.
at::Tensor GatherHeads(DistContext& ctx, Axis axis, const at::Tensor& t,
                       const std::vector<int64_t>& lengths, const HeadPadding& padding) {
  const int64_t n = ctx.AxisSize(axis);
  const int64_t mine = lengths[ctx.AxisRank(axis)];
  const int64_t b = t.size(0), x = t.size(3);
  const at::Tensor send = t.permute({1, 0, 2, 3}).contiguous();  // (sum L, B, Hl, X)
  const at::Tensor recv =
      ctx.AllToAllSingle(axis, send, lengths, std::vector<int64_t>(n, mine));  // (n*L, B, Hl, X)
  return recv.view({n, mine, b, padding.per_rank, x})
      .permute({2, 1, 0, 3, 4})
      .reshape({b, mine, padding.padded, x})
      .narrow(2, 0, padding.heads);
}

struct UlyssesExchanged {
  at::Tensor q, k, v;
  std::optional<at::Tensor> mask;
};

UlyssesExchanged UlyssesIn(DistContext& ctx, Axis axis, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                           const std::vector<int64_t>& sq, const std::vector<int64_t>& skv,
                           bool move_mask, const HeadPadding& padding) {
  UlyssesExchanged x;
  if (sq == skv) {
    auto t = ScatterHeads(ctx, axis, {q, k, v}, sq, padding);
    x.q = t[0], x.k = t[1], x.v = t[2];
  } else {
    x.q = ScatterHeads(ctx, axis, {q}, sq, padding)[0];
    auto t = ScatterHeads(ctx, axis, {k, v}, skv, padding);
    x.k = t[0], x.v = t[1];
  }
  if (move_mask) x.mask = GatherMask(ctx, axis, key_mask, q.size(0), skv, q.device());
  return x;
}

AttentionOutput UlyssesOut(DistContext& ctx, Axis axis, const AttentionOutput& local,
                           const std::vector<int64_t>& sq, const HeadPadding& padding,
                           bool return_lse) {
  AttentionOutput result;
  result.out = GatherHeads(ctx, axis, local.out, sq, padding);
  if (return_lse) {
    result.lse = GatherHeads(ctx, axis, local.lse.unsqueeze(-1), sq, padding).squeeze(-1);
  }
  return result;
}

// Ring over `axis` with known key-block lengths (one per axis rank). `key_mask` is this
// rank's block mask when masks move (move_mask), else ignored.
// `pair_rows`: the pair mask's rows of this rank's queries over every key of the axis, (B or 1,
// 1, Sq, sum skv); each key block attends under its own columns.
AttentionOutput RingCore(DistContext& ctx, Axis axis, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                         const std::vector<int64_t>& skv, bool move_mask,
                         const CpAttentionOptions& o, const std::optional<at::Tensor>& pair_rows = std::nullopt) {
  const int n = ctx.AxisSize(axis);
  const int r = ctx.AxisRank(axis);
  const int64_t b = q.size(0);
  const LocalAttentionOptions local{o.scale, o.kernel, /*return_lse=*/true};
  const std::vector<int64_t> key_offsets = Offsets(skv);
  LseMerger merger(o.convert_to_fp32);
  std::optional<at::Tensor> my_mask;
  if (move_mask) {
    my_mask = key_mask ? *key_mask : at::ones({b, k.size(1)}, q.options().dtype(at::kBool));
  }
  // `from`: the axis rank whose keys kb holds, -1 for all of them in rank order.
  auto attend = [&](const at::Tensor& kb, const at::Tensor& vb, const std::optional<at::Tensor>& mb, int from) {
    std::optional<at::Tensor> pb;
    if (pair_rows) pb = from < 0 ? *pair_rows : pair_rows->narrow(3, key_offsets[from], skv[from]);
    const AttentionOutput part = LocalAttention(q, kb, vb, mb, pb, local);
    merger.Add(part.out, part.lse);
  };

  if (n == 1) {
    attend(k, v, my_mask, -1);
  } else if (o.rotate == RingRotate::kAllGather) {
    // diffusers' "ring": every rank materialises all K/V (and the mask). With all of it here,
    // one attention call over the whole sequence is the softmax that merging n per-block results
    // by their LSE rebuilds: one kernel call instead of n and no merge. Same speed on flux:small
    // ring=2 (4 alternating pairs, 350-394 vs 357-400 ms), slightly closer to one device
    // (max relative error 7.9e-7 vs 8.1e-7), and less code.
    const at::Tensor kv = GatherKnown(ctx, axis, at::stack({k, v}, 2), 1, skv);  // (B,S,2,H,D)
    std::optional<at::Tensor> masks;
    if (move_mask) masks = GatherKnown(ctx, axis, my_mask->to(at::kByte), 1, skv).to(at::kBool);
    attend(kv.select(2, 0), kv.select(2, 1), masks, -1);
  } else {
    // True ring: at step i this rank holds the block of rank (r - i) mod n, forwards it to
    // r + 1 and receives the block of rank (r - i - 1) mod n from r - 1 while computing.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    at::Tensor cur_k = k.contiguous(), cur_v = v.contiguous(), cur_m;
    if (move_mask) cur_m = my_mask->to(at::kByte).contiguous();
    for (int i = 0; i < n; ++i) {
      dist::P2PHandle handle;
      at::Tensor nxt_k, nxt_v, nxt_m;
      const bool more = i + 1 < n;
      if (more) {
        // Empty blocks are neither sent nor received; both sides know the lengths.
        const int64_t send_len = skv[(r - i + 2 * n) % n];
        const int64_t recv_len = skv[(r - i - 1 + 2 * n) % n];
        std::vector<DistContext::Send> sends;
        std::vector<DistContext::Recv> recvs;
        if (send_len > 0) {
          sends.push_back({cur_k, next});
          sends.push_back({cur_v, next});
          if (move_mask) sends.push_back({cur_m, next});
        }
        nxt_k = at::empty({b, recv_len, k.size(2), k.size(3)}, k.options());
        nxt_v = at::empty_like(nxt_k);
        if (move_mask) nxt_m = at::empty({b, recv_len}, q.options().dtype(at::kByte));
        if (recv_len > 0) {
          recvs.push_back({nxt_k, prev});
          recvs.push_back({nxt_v, prev});
          if (move_mask) recvs.push_back({nxt_m, prev});
        }
        handle = ctx.SendRecv(axis, std::move(sends), std::move(recvs));
      }
      std::optional<at::Tensor> mb;
      if (move_mask) mb = i == 0 ? *my_mask : cur_m.to(at::kBool);
      attend(cur_k, cur_v, mb, (r - i + 2 * n) % n);
      if (more) {
        handle.Wait();
        cur_k = std::move(nxt_k);
        cur_v = std::move(nxt_v);
        cur_m = std::move(nxt_m);
      }
    }
  }
  AttentionOutput result = merger.Finish(q.scalar_type());
  if (!o.return_lse) result.lse = at::Tensor();
  return result;
}

}  // namespace

const char* RingRotateName(RingRotate rotate) {
  return rotate == RingRotate::kAllGather ? "allgather" : "p2p";
}

const char* CpModeName(CpMode mode) {
  switch (mode) {
    case CpMode::kLocal: return "local";
    case CpMode::kUlysses: return "ulysses";
    case CpMode::kRing: return "ring";
    case CpMode::kUsp: return "usp";
  }
  return "?";
}

AttentionOutput UlyssesAttention(DistContext& ctx, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                                 const CpAttentionOptions& options, Axis axis) {
  const std::string where = Where(ctx, "UlyssesAttention", axis, options);
  CheckLocalInputs(where, q, k, v, key_mask);
  TORCH_CHECK(!(options.return_lse && !KernelReturnsLse(options.kernel)), where,
              ": return_lse with kernel '", LocalKernelName(options.kernel), "', which has no LSE");
  const HeadPadding padding = PadHeads(q.size(2), ctx.AxisSize(axis), where);
  const Lengths lengths = ExchangeShapes(ctx, axis, where, q, k, key_mask, options);
  std::optional<at::Tensor> pair;
  if (options.pair_mask) pair = PairMaskOf(where, *options.pair_mask, q, Sum(lengths.sq), Sum(lengths.skv));
  const UlyssesExchanged x =
      UlyssesIn(ctx, axis, q, k, v, key_mask, lengths.sq, lengths.skv, lengths.mask, padding);
  // After the exchange this rank holds every query and key of the group: the whole pair mask.
  const AttentionOutput local = LocalAttention(
      x.q, x.k, x.v, x.mask, pair, {options.scale, options.kernel, options.return_lse});
  return UlyssesOut(ctx, axis, local, lengths.sq, padding, options.return_lse);
}

AttentionOutput RingAttention(DistContext& ctx, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                              const CpAttentionOptions& options, Axis axis) {
  const std::string where = Where(ctx, "RingAttention", axis, options);
  CheckRingKernel(where, options);
  CheckLocalInputs(where, q, k, v, key_mask);
  const Lengths lengths = ExchangeShapes(ctx, axis, where, q, k, key_mask, options);
  std::optional<at::Tensor> rows;
  if (options.pair_mask) {
    const int me = ctx.AxisRank(axis);
    rows = PairMaskOf(where, *options.pair_mask, q, Sum(lengths.sq), Sum(lengths.skv))
               .narrow(2, Offsets(lengths.sq)[me], lengths.sq[me]);
  }
  return RingCore(ctx, axis, q, k, v, key_mask, lengths.skv, lengths.mask, options, rows);
}

AttentionOutput UspAttention(DistContext& ctx, const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                             const CpAttentionOptions& options) {
  const std::string where = Where(ctx, "UspAttention", Axis::kCp, options);
  CheckRingKernel(where, options);
  CheckLocalInputs(where, q, k, v, key_mask);
  const int ring = ctx.AxisSize(Axis::kRing), ulysses = ctx.AxisSize(Axis::kUlysses);
  const int ring_index = ctx.AxisRank(Axis::kRing);
  TORCH_CHECK(ctx.AxisRank(Axis::kCp) == ring_index * ulysses + ctx.AxisRank(Axis::kUlysses),
              where, ": CP rank is not ring_index * ulysses + ulysses_index");
  const HeadPadding padding = PadHeads(q.size(2), ulysses, where);
  const Lengths all = ExchangeShapes(ctx, Axis::kCp, where, q, k, key_mask, options);
  // My ulysses group's lengths, and every ring slice's key length.
  const std::vector<int64_t> sq(all.sq.begin() + ring_index * ulysses,
                                all.sq.begin() + (ring_index + 1) * ulysses);
  const std::vector<int64_t> skv(all.skv.begin() + ring_index * ulysses,
                                 all.skv.begin() + (ring_index + 1) * ulysses);
  std::vector<int64_t> slices(ring, 0);
  for (int j = 0; j < ring; ++j) {
    for (int u = 0; u < ulysses; ++u) slices[j] += all.skv[j * ulysses + u];
  }
  // After the Ulysses exchange this rank's queries are its ring slice (its ulysses group's pieces,
  // contiguous in the CP order): the pair mask's rows of that slice, columns per ring slice.
  std::optional<at::Tensor> rows;
  if (options.pair_mask) {
    rows = PairMaskOf(where, *options.pair_mask, q, Sum(all.sq), Sum(all.skv))
               .narrow(2, Offsets(all.sq)[ring_index * ulysses], Sum(sq));
  }
  const UlyssesExchanged x =
      UlyssesIn(ctx, Axis::kUlysses, q, k, v, key_mask, sq, skv, all.mask, padding);
  const AttentionOutput local =
      RingCore(ctx, Axis::kRing, x.q, x.k, x.v, x.mask, slices, all.mask, options, rows);
  return UlyssesOut(ctx, Axis::kUlysses, local, sq, padding, options.return_lse);
}

CpMode ModeForMesh(int ring, int ulysses) {
  if (ring > 1 && ulysses > 1) return CpMode::kUsp;
  if (ring > 1) return CpMode::kRing;
  if (ulysses > 1) return CpMode::kUlysses;
  return CpMode::kLocal;
}

AttentionOutput AttentionInMode(DistContext& ctx, CpMode mode, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                                const CpAttentionOptions& options) {
  switch (mode) {
    case CpMode::kUsp: return UspAttention(ctx, q, k, v, key_mask, options);
    case CpMode::kRing: return RingAttention(ctx, q, k, v, key_mask, options);
    case CpMode::kUlysses: return UlyssesAttention(ctx, q, k, v, key_mask, options);
    case CpMode::kLocal: break;
  }
  return LocalAttention(q, k, v, key_mask, options.pair_mask,
                        {options.scale, options.kernel, options.return_lse});
}

AttentionOutput ContextParallelAttention(DistContext& ctx, const at::Tensor& q,
                                         const at::Tensor& k, const at::Tensor& v,
                                         const std::optional<at::Tensor>& key_mask,
                                         const CpAttentionOptions& options) {
  return AttentionInMode(ctx, ModeForMesh(ctx.AxisSize(Axis::kRing), ctx.AxisSize(Axis::kUlysses)), q, k, v,
                         key_mask, options);
}

AttentionOutput AttentionWithWholeRows(DistContext& ctx, CpMode mode, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const std::optional<at::Tensor>& key_mask,
                                       const WholeRows& whole, const CpAttentionOptions& options) {
  const std::string where = Where(ctx, "AttentionWithWholeRows", Axis::kCp, options);
  CheckLocalInputs(where, q, k, v, std::nullopt);
  TORCH_CHECK(!key_mask && !options.pair_mask, where,
              ": a mask over a joint sequence with streams every rank holds whole is not supported");
  TORCH_CHECK(KernelReturnsLse(options.kernel), where, ": whole rows are merged by their log-sum-exp, but kernel '",
              LocalKernelName(options.kernel), "' returns none");
  TORCH_CHECK(whole.q_before >= 0 && whole.q_after >= 0 && whole.kv_before >= 0 && whole.kv_after >= 0 &&
                  whole.q_before + whole.q_after <= q.size(1) && whole.kv_before + whole.kv_after <= k.size(1),
              where, ": whole rows (q ", whole.q_before, " + ", whole.q_after, ", k/v ", whole.kv_before, " + ",
              whole.kv_after, ") exceed the local lengths q ", q.size(1), ", k ", k.size(1));
  const LocalAttentionOptions local{options.scale, options.kernel, true};
  // The rows of `t` along dim 1 that every rank holds whole, and those split.
  auto whole_of = [](const at::Tensor& t, int64_t before, int64_t after) {
    if (after == 0) return t.narrow(1, 0, before);
    return at::cat({t.narrow(1, 0, before), t.narrow(1, t.size(1) - after, after)}, 1);
  };
  auto split_of = [](const at::Tensor& t, int64_t before, int64_t after) {
    return t.narrow(1, before, t.size(1) - before - after);
  };
  const at::Tensor qs = split_of(q, whole.q_before, whole.q_after), qw = whole_of(q, whole.q_before, whole.q_after);
  const at::Tensor ks = split_of(k, whole.kv_before, whole.kv_after), kw = whole_of(k, whole.kv_before, whole.kv_after);
  const at::Tensor vs = split_of(v, whole.kv_before, whole.kv_after), vw = whole_of(v, whole.kv_before, whole.kv_after);

  // Split queries: every rank's split keys through `mode`, then the whole keys once.
  CpAttentionOptions split_options = options;
  split_options.return_lse = true;
  LseMerger split_rows(options.convert_to_fp32);
  const AttentionOutput over_split = AttentionInMode(ctx, mode, qs, ks, vs, std::nullopt, split_options);
  split_rows.Add(over_split.out, over_split.lse);
  if (kw.size(1) > 0) {
    const AttentionOutput over_whole = LocalAttention(qs, kw, vw, std::nullopt, local);
    split_rows.Add(over_whole.out, over_whole.lse);
  }
  const AttentionOutput s = split_rows.Finish(q.scalar_type());
  if (qw.size(1) == 0) return s;

  // Whole queries: this rank's split keys, gathered with every rank's and merged in rank order
  // (the same order on every rank), then the whole keys.
  const AttentionOutput mine = LocalAttention(qw, ks, vs, std::nullopt, local);
  const int ranks = ctx.AxisSize(Axis::kCp);
  at::Tensor packed = at::cat({mine.out.to(at::kFloat), mine.lse.to(at::kFloat).unsqueeze(-1)}, -1);
  const at::Tensor all = ranks > 1 ? ctx.AllGather(Axis::kCp, packed.contiguous(), 0) : packed;
  LseMerger whole_rows(options.convert_to_fp32);
  const int64_t d = q.size(3);
  for (int r = 0; r < ranks; ++r) {
    const at::Tensor part = all.narrow(0, r * q.size(0), q.size(0));
    whole_rows.Add(part.narrow(-1, 0, d), part.select(-1, d));
  }
  if (kw.size(1) > 0) {
    const AttentionOutput over_whole = LocalAttention(qw, kw, vw, std::nullopt, local);
    whole_rows.Add(over_whole.out, over_whole.lse);
  }
  const AttentionOutput w = whole_rows.Finish(q.scalar_type());
  auto layout = [&](const at::Tensor& split_part, const at::Tensor& whole_part) {
    std::vector<at::Tensor> pieces;
    if (whole.q_before > 0) pieces.push_back(whole_part.narrow(1, 0, whole.q_before));
    pieces.push_back(split_part);
    if (whole.q_after > 0) pieces.push_back(whole_part.narrow(1, whole.q_before, whole.q_after));
    return at::cat(pieces, 1);
  };
  AttentionOutput out{layout(s.out, w.out), at::Tensor()};
  if (options.return_lse) out.lse = layout(s.lse, w.lse);
  return out;
}

namespace {

int64_t UnevenGatherSizesBytes(const std::vector<int64_t>& sizes) {
  return AllEqual(sizes) ? -1 : 8 * static_cast<int64_t>(sizes.size() - 1);
}

// An all-gather of `bytes_per_row * sizes[me]` bytes per rank over `sizes.size()` ranks, as
// GatherKnown issues it.
void PredictGather(dist::CommCounters& c, Axis axis, const std::vector<int64_t>& sizes, int me,
                   int64_t bytes_per_row) {
  const int64_t sizes_bytes = UnevenGatherSizesBytes(sizes);
  if (sizes_bytes >= 0) c.Record(axis, CommOp::kAllGatherSizes, sizes_bytes);
  c.Record(axis, CommOp::kAllGather,
           bytes_per_row * sizes[me] * static_cast<int64_t>(sizes.size() - 1));
}

void PredictUlysses(dist::CommCounters& c, Axis axis, const CommShape& s,
                    const std::vector<int64_t>& sq, const std::vector<int64_t>& skv, int me,
                    const HeadPadding& padding, bool return_lse, bool move_mask,
                    int64_t out_element_bytes) {
  const int64_t n = static_cast<int64_t>(sq.size());
  const int64_t row = s.batch * padding.per_rank * s.head_dim * s.element_bytes;
  if (sq == skv) {
    c.Record(axis, CommOp::kAllToAll, 3 * row * sq[me] * (n - 1));
  } else {
    c.Record(axis, CommOp::kAllToAll, row * sq[me] * (n - 1));
    c.Record(axis, CommOp::kAllToAll, 2 * row * skv[me] * (n - 1));
  }
  if (move_mask) PredictGather(c, axis, skv, me, s.batch);
  const int64_t others = Sum(sq) - sq[me];
  c.Record(axis, CommOp::kAllToAll,
           s.batch * padding.per_rank * s.head_dim * out_element_bytes * others);
  if (return_lse) c.Record(axis, CommOp::kAllToAll, s.batch * padding.per_rank * 4 * others);
}

void PredictRing(dist::CommCounters& c, Axis axis, const CommShape& s,
                 const std::vector<int64_t>& skv, int me, int64_t heads, bool move_mask,
                 RingRotate rotate) {
  const int n = static_cast<int>(skv.size());
  if (n == 1) return;
  const int64_t kv_row = 2 * s.batch * heads * s.head_dim * s.element_bytes;
  if (rotate == RingRotate::kAllGather) {
    PredictGather(c, axis, skv, me, kv_row);
    if (move_mask) PredictGather(c, axis, skv, me, s.batch);
    return;
  }
  for (int i = 0; i + 1 < n; ++i) {
    const int64_t len = skv[(me - i + 2 * n) % n];
    c.Record(axis, CommOp::kSendRecv, len * (kv_row + (move_mask ? s.batch : 0)));
  }
}

}  // namespace

dist::CommCounters PredictComm(const CommShape& s, const CpAttentionOptions& o) {
  dist::CommCounters c;
  const int cp = s.ring * s.ulysses;
  TORCH_CHECK(static_cast<int>(s.sq.size()) == cp && static_cast<int>(s.skv.size()) == cp,
              "PredictComm: need one length per CP rank (", cp, ")");
  const int64_t record_bytes = 8 * kShapeFields;
  const int64_t out_bytes = s.element_bytes;
  switch (s.mode) {
    case CpMode::kLocal: break;
    case CpMode::kUlysses: {
      if (o.exchange_shapes) c.Record(Axis::kUlysses, CommOp::kAllGather, record_bytes * (cp - 1));
      PredictUlysses(c, Axis::kUlysses, s, s.sq, s.skv, s.cp_rank,
                     PadHeads(s.heads, s.ulysses, "PredictComm"), o.return_lse, s.mask,
                     out_bytes);
      break;
    }
    case CpMode::kRing: {
      if (o.exchange_shapes) c.Record(Axis::kRing, CommOp::kAllGather, record_bytes * (cp - 1));
      PredictRing(c, Axis::kRing, s, s.skv, s.cp_rank, s.heads, s.mask, o.rotate);
      break;
    }
    case CpMode::kUsp: {
      if (o.exchange_shapes) c.Record(Axis::kCp, CommOp::kAllGather, record_bytes * (cp - 1));
      const int ring_index = s.cp_rank / s.ulysses, me = s.cp_rank % s.ulysses;
      const std::vector<int64_t> sq(s.sq.begin() + ring_index * s.ulysses,
                                    s.sq.begin() + (ring_index + 1) * s.ulysses);
      const std::vector<int64_t> skv(s.skv.begin() + ring_index * s.ulysses,
                                     s.skv.begin() + (ring_index + 1) * s.ulysses);
      std::vector<int64_t> slices(s.ring, 0);
      for (int j = 0; j < s.ring; ++j) {
        for (int u = 0; u < s.ulysses; ++u) slices[j] += s.skv[j * s.ulysses + u];
      }
      const HeadPadding padding = PadHeads(s.heads, s.ulysses, "PredictComm");
      // The forward exchange and mask gather, then the ring, then the way back.
      PredictUlysses(c, Axis::kUlysses, s, sq, skv, me, padding, o.return_lse, s.mask,
                     out_bytes);
      PredictRing(c, Axis::kRing, s, slices, ring_index, padding.per_rank, s.mask, o.rotate);
      break;
    }
  }
  return c;
}

int64_t FormulaBytes(CpMode mode, int ring, int ulysses, int64_t batch, int64_t seq,
                     int64_t heads, int64_t head_dim, int64_t element_bytes) {
  const int64_t bsdb = batch * seq * heads * head_dim * element_bytes;
  const int64_t r = ring, u = ulysses;
  switch (mode) {
    case CpMode::kLocal: return 0;
    case CpMode::kUlysses: return 4 * bsdb * (u - 1) / (u * u);
    case CpMode::kRing: return 2 * bsdb * (r - 1) / r;
    case CpMode::kUsp: return 4 * bsdb * (u - 1) / (u * u * r) + 2 * bsdb * (r - 1) / (r * u);
  }
  return 0;
}

}  // namespace weft::runtime

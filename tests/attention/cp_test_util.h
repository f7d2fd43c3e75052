#pragma once

// Shared driver of the multi-rank attention tests: builds the same global inputs on every
// rank (same seed), computes full attention in fp64 in-process as the reference, runs one
// context-parallel mode on this rank's pieces (each stream split separately, concatenated
// locally), and checks the output, the LSE and the exact call/byte counters.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "runtime/attention/attention.h"
#include "runtime/dist/dist_context.h"
#include "tests/support/multi_rank.h"

namespace weft::runtime::test {

struct Spec {
  std::string name;
  std::optional<CpMode> mode;  // default: ModeForMesh of the context's mesh
  int64_t batch = 2, heads = 24, head_dim = 8;
  std::vector<int64_t> q_streams{32, 256};  // text + image, split per stream
  std::vector<int64_t> kv_streams;          // empty: self-attention over q_streams
  // Key-padding mask: batch 1 masks the last `mask_tail` keys of kv stream 0, and when
  // `empty_row` batch 0 masks every key (a fully masked row). No mask when both are off.
  int64_t mask_tail = 0;
  bool empty_row = false;
  // A mask over (query, key) pairs (CpAttentionOptions::pair_mask), by the positions in the
  // streams' own order: a sliding window (query i sees key j when |i - j| <= pair_window, lengths
  // scaled when Sq != Skv), or `pair_segments` blocks on the diagonal (packed samples). The
  // ranks get it in the global order of their pieces. None when both are 0.
  int64_t pair_window = 0;
  int64_t pair_segments = 0;
  // The pair mask as a float bias added to the scores (scaled_dot_product_attention's float
  // attn_mask): a seeded value where it attends, -inf elsewhere.
  bool pair_bias = false;
  at::ScalarType dtype = at::kFloat;
  CpAttentionOptions options;
  // Also check that the data bytes equal peers-and-limits.md (c)'s closed form (even splits,
  // no mask, no LSE, heads divisible, exchange_shapes off).
  bool check_formula = false;
  uint64_t seed = 1234;
};

inline double MaxAbs(const at::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.to(at::kDouble).abs().max().item<double>();
}

inline dist::CommCounters Minus(const dist::CommCounters& after, const dist::CommCounters& before) {
  dist::CommCounters d;
  for (dist::Axis axis : dist::kAllAxes) {
    for (int op = 0; op < dist::kNumCommOps; ++op) {
      const auto o = static_cast<dist::CommOp>(op);
      const dist::CommStat a = after.Get(axis, o), b = before.Get(axis, o);
      for (int64_t c = 0; c < a.calls - b.calls; ++c) {
        d.Record(axis, o, c == 0 ? a.bytes_sent - b.bytes_sent : 0);
      }
    }
  }
  return d;
}

inline void ExpectSameCounters(const dist::CommCounters& got, const dist::CommCounters& want) {
  for (dist::Axis axis : dist::kAllAxes) {
    for (int op = 0; op < dist::kNumCommOps; ++op) {
      const auto o = static_cast<dist::CommOp>(op);
      EXPECT_EQ(got.Get(axis, o).calls, want.Get(axis, o).calls)
          << dist::AxisName(axis) << " " << dist::CommOpName(o) << "\ngot:\n"
          << got.Report() << "\npredicted:\n" << want.Report();
      EXPECT_EQ(got.Get(axis, o).bytes_sent, want.Get(axis, o).bytes_sent)
          << dist::AxisName(axis) << " " << dist::CommOpName(o) << "\ngot:\n"
          << got.Report() << "\npredicted:\n" << want.Report();
    }
  }
}

inline std::vector<int64_t> JointSizes(const std::vector<int64_t>& streams, int parts) {
  std::vector<int64_t> total(parts, 0);
  for (int64_t len : streams) {
    const std::vector<int64_t> s = SplitSizes(len, parts);
    for (int j = 0; j < parts; ++j) total[j] += s[j];
  }
  return total;
}

inline std::vector<at::Tensor> SplitStreams(const at::Tensor& t, const std::vector<int64_t>& lens) {
  std::vector<at::Tensor> out;
  int64_t start = 0;
  for (int64_t len : lens) {
    out.push_back(t.narrow(1, start, len));
    start += len;
  }
  return out;
}

inline void RunCase(dist::DistContext& ctx, const Spec& s) {
  SCOPED_TRACE("case " + s.name);
  using dist::Axis;
  at::manual_seed(s.seed);
  const std::vector<int64_t>& kv_lens = s.kv_streams.empty() ? s.q_streams : s.kv_streams;
  std::vector<at::Tensor> qs, ks, vs, ms;
  auto rand = [&](int64_t len) {
    return at::randn({s.batch, len, s.heads, s.head_dim}, at::kFloat).to(s.dtype);
  };
  for (int64_t len : s.q_streams) qs.push_back(rand(len));
  for (int64_t len : kv_lens) {
    ks.push_back(rand(len));
    vs.push_back(rand(len));
  }
  const bool masked = s.mask_tail > 0 || s.empty_row;
  for (size_t i = 0; i < kv_lens.size(); ++i) {
    at::Tensor m = at::ones({s.batch, kv_lens[i]}, at::kBool);
    if (i == 0 && s.mask_tail > 0) m[1].narrow(0, kv_lens[i] - s.mask_tail, s.mask_tail).fill_(false);
    if (s.empty_row) m[0].fill_(false);
    ms.push_back(m);
  }
  const at::Tensor q = at::cat(qs, 1), k = at::cat(ks, 1), v = at::cat(vs, 1);
  std::optional<at::Tensor> mask;
  if (masked) mask = at::cat(ms, 1);
  std::optional<at::Tensor> pair;
  if (s.pair_window > 0 || s.pair_segments > 0) {
    const int64_t sq = q.size(1), skv = k.size(1);
    const at::Tensor i = at::arange(sq, at::kLong).view({sq, 1}), j = at::arange(skv, at::kLong).view({1, skv});
    const at::Tensor m = s.pair_window > 0 ? (i * skv - j * sq).abs() <= s.pair_window * std::max(sq, skv)
                                           : (i * s.pair_segments).div(sq, "floor") == (j * s.pair_segments).div(skv, "floor");
    pair = m.view({1, 1, sq, skv});
    if (s.pair_bias) {
      pair = at::where(*pair, at::randn({1, 1, sq, skv}, at::kDouble),
                       at::full({}, -std::numeric_limits<double>::infinity(), at::kDouble));
    }
  }
  const AttentionOutput ref = ReferenceAttention(q, k, v, mask, s.options.scale, at::kDouble, pair);

  const int ring = ctx.AxisSize(Axis::kRing), ulysses = ctx.AxisSize(Axis::kUlysses);
  const CpMode mode = s.mode ? *s.mode : ModeForMesh(ring, ulysses);
  int parts = 1, index = 0;
  switch (mode) {
    case CpMode::kLocal: break;
    case CpMode::kUlysses: parts = ulysses, index = ctx.AxisRank(Axis::kUlysses); break;
    case CpMode::kRing: parts = ring, index = ctx.AxisRank(Axis::kRing); break;
    case CpMode::kUsp: parts = ring * ulysses, index = ctx.AxisRank(Axis::kCp); break;
  }
  const at::Tensor lq = SplitJoint(qs, parts, index), lk = SplitJoint(ks, parts, index),
                   lv = SplitJoint(vs, parts, index);
  std::optional<at::Tensor> lmask;
  if (masked) lmask = SplitJoint(ms, parts, index);
  CpAttentionOptions options = s.options;
  if (pair) {
    // The global order of the ranks' pieces: every rank's joint piece of the positions, in rank order.
    auto order = [&](const std::vector<int64_t>& lens) {
      const at::Tensor positions = at::arange(std::accumulate(lens.begin(), lens.end(), int64_t{0}), at::kLong);
      std::vector<at::Tensor> pieces;
      for (int r = 0; r < parts; ++r) pieces.push_back(SplitJoint(SplitStreams(positions.view({1, -1}), lens), parts, r));
      return at::cat(pieces, 1).view({-1});
    };
    options.pair_mask = pair->index_select(2, order(s.q_streams)).index_select(3, order(kv_lens));
  }

  const dist::CommCounters before = ctx.counters();
  AttentionOutput got;
  // Without an explicit mode the mesh decides, through the dispatcher.
  switch (s.mode ? mode : CpMode::kLocal) {
    case CpMode::kLocal:
      got = ContextParallelAttention(ctx, lq, lk, lv, lmask, options);
      break;
    case CpMode::kUlysses: got = UlyssesAttention(ctx, lq, lk, lv, lmask, options); break;
    case CpMode::kRing: got = RingAttention(ctx, lq, lk, lv, lmask, options); break;
    case CpMode::kUsp: got = UspAttention(ctx, lq, lk, lv, lmask, options); break;
  }
  const dist::CommCounters used = Minus(ctx.counters(), before);

  // Output: this rank's rows of the reference, split the same way.
  const at::Tensor want = SplitJoint(SplitStreams(ref.out, s.q_streams), parts, index);
  ASSERT_EQ(got.out.sizes(), want.sizes());
  EXPECT_EQ(got.out.scalar_type(), s.dtype);
  const double tol = s.dtype == at::kFloat ? 1e-5 : 2e-2;
  const double scale = MaxAbs(ref.out);
  const double err = MaxAbs(got.out.to(at::kDouble) - want);
  EXPECT_FALSE(at::isnan(got.out).any().item<bool>());
  EXPECT_LE(err, tol * scale) << "max abs error " << err << ", max|out| " << scale << ", mode "
                              << CpModeName(mode) << ", rank " << ctx.rank();
  if (s.options.return_lse) {
    const at::Tensor want_lse = SplitJoint(SplitStreams(ref.lse, s.q_streams), parts, index);
    ASSERT_TRUE(got.lse.defined());
    ASSERT_EQ(got.lse.sizes(), want_lse.sizes());
    EXPECT_TRUE(at::equal(at::isneginf(got.lse), at::isneginf(want_lse)));
    const at::Tensor finite = at::isfinite(want_lse);
    const double lse_err = MaxAbs(got.lse.to(at::kDouble).masked_select(finite) -
                                  want_lse.masked_select(finite));
    EXPECT_LE(lse_err, s.dtype == at::kFloat ? 1e-4 : 2e-2);
  }

  // Exact communication.
  CommShape shape;
  shape.mode = mode;
  shape.ring = mode == CpMode::kUlysses ? 1 : (mode == CpMode::kLocal ? 1 : ring);
  shape.ulysses = mode == CpMode::kRing ? 1 : (mode == CpMode::kLocal ? 1 : ulysses);
  shape.cp_rank = index;
  shape.batch = s.batch, shape.heads = s.heads, shape.head_dim = s.head_dim;
  shape.element_bytes = static_cast<int64_t>(c10::elementSize(s.dtype));
  shape.sq = JointSizes(s.q_streams, parts);
  shape.skv = JointSizes(kv_lens, parts);
  shape.mask = s.options.exchange_shapes ? (masked && !mask->all().item<bool>()) : masked;
  if (!s.options.exchange_shapes) {
    // Every rank is assumed to hold this rank's lengths.
    shape.sq.assign(parts, lq.size(1));
    shape.skv.assign(parts, lk.size(1));
  }
  ExpectSameCounters(used, PredictComm(shape, s.options));
  if (s.check_formula) {
    int64_t total = 0;
    for (dist::Axis axis : dist::kAllAxes) total += used.Total(axis).bytes_sent;
    int64_t seq = 0;
    for (int64_t len : s.q_streams) seq += len;
    EXPECT_EQ(total, FormulaBytes(mode, shape.ring, shape.ulysses, s.batch, seq, s.heads,
                                  s.head_dim, shape.element_bytes));
  }
}

}  // namespace weft::runtime::test

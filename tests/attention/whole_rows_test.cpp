// Attention over a joint sequence some of whose streams every rank holds whole (Mochi's valid text
// tokens joined to each rank's split video tokens), in every CP mode on forked Gloo ranks, against
// one process computing the whole joint sequence in fp64: fp32 max abs error <= 1e-5 x max|out|.
// The split stream is cut unevenly (37 rows over 2, 3 or 4 ranks), the whole stream is 5 rows
// before or after it, batch 2; every rank must get the same whole rows, bit for bit.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/attention/attention.h"
#include "runtime/attention/local.h"
#include "runtime/dist/dist_context.h"
#include "tests/support/multi_rank.h"

namespace weft::runtime::test {
namespace {

using dist::MeshShape;
using testing::MultiRankOptions;
using testing::RunOnRanks;

struct Case {
  CpMode mode;
  RingRotate rotate = RingRotate::kAllGather;
  int64_t split = 37, whole = 5;
  bool whole_first = false;  // the whole stream before the split one (else after)
  bool whole_keys_only = false;  // queries are the split stream only; keys are joint
};

void Check(dist::DistContext& ctx, const Case& c) {
  const int64_t B = 2, H = 4, D = 8;
  at::manual_seed(77);
  const at::Tensor split_q = at::randn({B, c.split, H, D}), split_k = at::randn({B, c.split, H, D}),
                   split_v = at::randn({B, c.split, H, D});
  const at::Tensor whole_q = at::randn({B, c.whole, H, D}), whole_k = at::randn({B, c.whole, H, D}),
                   whole_v = at::randn({B, c.whole, H, D});
  auto joint = [&](const at::Tensor& s, const at::Tensor& w) {
    return c.whole_first ? at::cat({w, s}, 1) : at::cat({s, w}, 1);
  };
  const at::Tensor global_q = c.whole_keys_only ? split_q : joint(split_q, whole_q);
  const AttentionOutput want = ReferenceAttention(global_q, joint(split_k, whole_k), joint(split_v, whole_v), std::nullopt);

  const int ranks = ctx.AxisSize(dist::Axis::kCp), me = ctx.AxisRank(dist::Axis::kCp);
  const at::Tensor mine_q = SplitPiece(split_q, 1, ranks, me), mine_k = SplitPiece(split_k, 1, ranks, me),
                   mine_v = SplitPiece(split_v, 1, ranks, me);
  const at::Tensor q = c.whole_keys_only ? mine_q : joint(mine_q, whole_q);
  WholeRows rows;
  (c.whole_first ? rows.kv_before : rows.kv_after) = c.whole;
  if (!c.whole_keys_only) (c.whole_first ? rows.q_before : rows.q_after) = c.whole;
  CpAttentionOptions options;
  options.rotate = c.rotate;
  options.return_lse = true;
  const AttentionOutput got =
      AttentionWithWholeRows(ctx, c.mode, q, joint(mine_k, whole_k), joint(mine_v, whole_v), std::nullopt, rows, options);

  // This rank's rows of the reference: its piece of the split stream, and the whole stream.
  const std::vector<int64_t> sizes = SplitSizes(c.split, ranks);
  int64_t start = 0;
  for (int r = 0; r < me; ++r) start += sizes[r];
  const int64_t offset = c.whole_first && !c.whole_keys_only ? c.whole : 0;
  at::Tensor want_split = want.out.narrow(1, offset + start, sizes[me]);
  at::Tensor want_rows = want_split, want_lse = want.lse.narrow(1, offset + start, sizes[me]);
  if (!c.whole_keys_only) {
    const int64_t w_at = c.whole_first ? 0 : c.split;
    want_rows = joint(want_split, want.out.narrow(1, w_at, c.whole));
    want_lse = joint(want_lse, want.lse.narrow(1, w_at, c.whole));
  }
  ASSERT_EQ(got.out.sizes(), want_rows.sizes());
  const double scale = want.out.abs().max().item<double>();
  EXPECT_LE((got.out.to(at::kDouble) - want_rows.to(at::kDouble)).abs().max().item<double>(), 1e-5 * scale)
      << CpModeName(c.mode) << " " << RingRotateName(c.rotate) << " whole_first " << c.whole_first;
  EXPECT_LE((got.lse.to(at::kDouble) - want_lse.to(at::kDouble)).abs().max().item<double>(), 1e-4);
  if (!c.whole_keys_only) {
    // The whole rows are the same on every rank, bit for bit.
    const at::Tensor whole_out = got.out.narrow(1, c.whole_first ? 0 : got.out.size(1) - c.whole, c.whole).contiguous();
    const at::Tensor all = ctx.AllGather(dist::Axis::kCp, whole_out, 0);
    for (int r = 1; r < ranks; ++r) EXPECT_TRUE(at::equal(all.narrow(0, r * B, B), all.narrow(0, 0, B)));
  }
}

void RunAll(int world, MeshShape mesh, CpMode mode) {
  RunOnRanks(world, mesh, [=](dist::DistContext& ctx) {
    for (RingRotate rotate : {RingRotate::kAllGather, RingRotate::kP2p}) {
      if (mode == CpMode::kUlysses && rotate == RingRotate::kP2p) continue;
      for (bool whole_first : {false, true}) {
        for (bool keys_only : {false, true}) Check(ctx, {mode, rotate, 37, 5, whole_first, keys_only});
      }
    }
  }, [] {
    MultiRankOptions o;
    o.deadline = std::chrono::seconds(100);
    return o;
  }());
}

TEST(WholeRows, Ulysses2) { RunAll(2, MeshShape{1, 2, 1}, CpMode::kUlysses); }
TEST(WholeRows, Ring3Uneven) { RunAll(3, MeshShape{3, 1, 1}, CpMode::kRing); }
TEST(WholeRows, Usp2x2) { RunAll(4, MeshShape{2, 2, 1}, CpMode::kUsp); }

TEST(WholeRows, MasksAreRefused) {
  RunOnRanks(2, MeshShape{1, 2, 1}, [](dist::DistContext& ctx) {
    const at::Tensor t = at::randn({1, 6, 2, 4});
    WholeRows rows;
    rows.q_after = rows.kv_after = 2;
    try {
      AttentionWithWholeRows(ctx, CpMode::kUlysses, t, t, t, at::ones({1, 6}, at::kBool), rows);
      ADD_FAILURE() << "a key mask with whole rows ran";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("a mask over a joint sequence with streams every rank holds whole is not supported"),
                std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace weft::runtime::test

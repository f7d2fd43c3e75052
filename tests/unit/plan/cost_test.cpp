// The cost model against hand-computed values, including the two worked cases of
// shared/reference/peers-and-limits.md section (c).
#include "compiler/plan/cost.h"

#include <gtest/gtest.h>

#include <string_view>

#include "compiler/source/checked_math.h"

namespace weft::plan {
namespace {

using plan::AttentionMode;
using plan::CollectiveOp;
using plan::RotateMethod;
using plan::ShardStyle;

// Flux.1-dev at 1024x1024: S = 4096 image + 512 text, d = 24 * 128, bf16, 57 attention layers
// (19 double + 38 single).
constexpr int64_t kFluxS = 4608;
constexpr int64_t kFluxD = 3072;
constexpr int64_t kFluxLayers = 57;

TEST(CostTest, UlyssesFormula) {
  // 4*1*4608*3072*2*3/16 = 21,233,664 bytes per layer.
  EXPECT_EQ(UlyssesBytes(1, kFluxS, kFluxD, 2, 4), 21'233'664);
  // x 57 layers = 1.21 GB per rank per forward (the reference table's value).
  EXPECT_EQ(kFluxLayers * UlyssesBytes(1, kFluxS, kFluxD, 2, 4), 1'210'318'848);
  // Ulysses-8: 4*4608*3072*2*7/64 = 12,386,304 per layer, 0.71 GB per forward.
  EXPECT_EQ(UlyssesBytes(1, kFluxS, kFluxD, 2, 8), 12'386'304);
  EXPECT_EQ(kFluxLayers * UlyssesBytes(1, kFluxS, kFluxD, 2, 8), 706'019'328);
  EXPECT_EQ(UlyssesBytes(1, kFluxS, kFluxD, 2, 1), 0);
  EXPECT_EQ(UlyssesBytes(2, kFluxS, kFluxD, 2, 4), 2 * 21'233'664);  // linear in B
}

TEST(CostTest, RingFormula) {
  // 2*4608*3072*2*3/4 = 42,467,328 per layer; 2.42 GB per forward at R=4, 2.82 GB at R=8.
  EXPECT_EQ(RingBytes(1, kFluxS, kFluxD, 2, 4), 42'467'328);
  EXPECT_EQ(kFluxLayers * RingBytes(1, kFluxS, kFluxD, 2, 4), 2'420'637'696);
  EXPECT_EQ(kFluxLayers * RingBytes(1, kFluxS, kFluxD, 2, 8), 2'824'077'312);
  // Ring moves R/2 times the Ulysses volume.
  EXPECT_EQ(RingBytes(1, kFluxS, kFluxD, 2, 4), 2 * UlyssesBytes(1, kFluxS, kFluxD, 2, 4));
}

TEST(CostTest, TpAllReduceFormula) {
  // Per all-reduce of a (1, 4608, 3072) bf16 tensor at T=4: 2*4608*3072*2*3/4 = 42,467,328.
  EXPECT_EQ(TpAllReduceBytes(1, kFluxS, kFluxD, 2, 4), 42'467'328);
  // Flux: 2 all-reduce equivalents per double block (image and text streams, attention and
  // MLP), 1 per single block: 19*2 + 38 = 76 -> 3.23 GB at T=4, 3.77 GB at T=8.
  EXPECT_EQ(76 * TpAllReduceBytes(1, kFluxS, kFluxD, 2, 4), 3'227'516'928);
  EXPECT_EQ(76 * TpAllReduceBytes(1, kFluxS, kFluxD, 2, 8), 3'765'436'416);
  EXPECT_EQ(TpAllReduceBytes(1, kFluxS, kFluxD, 2, 1), 0);
}

// Wan 2.1 14B at 1280x720x81: S = 75,600, d = 5120, 40 blocks.
TEST(CostTest, WanWorkedCase) {
  constexpr int64_t S = 75'600, d = 5120;
  // One (S, d) bf16 tensor is 774 MB.
  EXPECT_EQ(S * d * 2, 774'144'000);
  // Ulysses-4: 23.2 GB per forward.
  EXPECT_EQ(40 * UlyssesBytes(1, S, d, 2, 4), 23'224'320'000);
  // Ulysses-8: 13.5 GB (the reference table rounds this to 13.6).
  EXPECT_EQ(40 * UlyssesBytes(1, S, d, 2, 8), 13'547'520'000);
  // TP with 3 all-reduces per block: 139 GB at T=4, 163 GB at T=8.
  EXPECT_EQ(120 * TpAllReduceBytes(1, S, d, 2, 4), 139'345'920'000);
  EXPECT_EQ(120 * TpAllReduceBytes(1, S, d, 2, 8), 162'570'240'000);
}

TEST(CostTest, UspCombinesBothAxes) {
  AttentionCommInput in;
  in.q_len = in.kv_len = kFluxS;
  in.heads = 24;
  in.head_dim = 128;
  in.ulysses = 2;
  in.ring = 2;
  const auto cs = AttentionCollectives(in);
  ASSERT_EQ(cs.size(), 2u);
  // Ulysses part 4*B*S*d*b*(U-1)/(U^2*R) = 4*4608*3072*2*1/8 = 14,155,776.
  EXPECT_EQ(cs[0].op, CollectiveOp::kAllToAll);
  EXPECT_EQ(cs[0].axis, "ulysses");
  EXPECT_EQ(cs[0].count, 2);  // q, k, v packed into one all-to-all (Sq == Skv), out back
  EXPECT_EQ(cs[0].bytes, 14'155'776);
  // Ring part 2*B*S*d*b*(R-1)/(R*U) = 2*4608*3072*2/4 = 14,155,776.
  EXPECT_EQ(cs[1].op, CollectiveOp::kAllGather);
  EXPECT_EQ(cs[1].axis, "ring");
  EXPECT_EQ(cs[1].count, 1);
  EXPECT_EQ(cs[1].bytes, 14'155'776);
  // p2p: R-1 send/recv steps, same bytes.
  in.rotate_method = RotateMethod::kP2p;
  const auto p2p = AttentionCollectives(in);
  EXPECT_EQ(p2p[1].op, CollectiveOp::kSendRecv);
  EXPECT_EQ(p2p[1].count, 1);
  EXPECT_EQ(p2p[1].bytes, 14'155'776);
  in.ring = 4;
  EXPECT_EQ(AttentionCollectives(in)[1].count, 3);
}

TEST(CostTest, AttentionCollectivesMatchTheClosedForms) {
  AttentionCommInput in;
  in.q_len = in.kv_len = kFluxS;
  in.heads = 24;
  in.head_dim = 128;
  in.ulysses = 4;
  auto cs = AttentionCollectives(in);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].bytes, UlyssesBytes(1, kFluxS, kFluxD, 2, 4));
  in.ulysses = 1;
  in.ring = 4;
  cs = AttentionCollectives(in);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].bytes, RingBytes(1, kFluxS, kFluxD, 2, 4));
  in.ring = 1;
  EXPECT_TRUE(AttentionCollectives(in).empty());
}

TEST(CostTest, CrossAttentionUsesBothLengths) {
  // Wan attn2 made context-parallel (it need not be): Sq = 32760, Skv = 512, d = 5120, U = 4:
  // (2*32760 + 2*512)*5120*2*3/16 = 127,764,480.
  AttentionCommInput in;
  in.q_len = 32760;
  in.kv_len = 512;
  in.heads = 40;
  in.head_dim = 128;
  in.ulysses = 4;
  EXPECT_EQ(AttentionCollectives(in)[0].bytes, 127'764'480);
  EXPECT_EQ(AttentionCollectives(in)[0].count, 3);  // q; k and v packed; out back
  // Ring moves only K/V: 2*512*5120*2*3/4 = 7,864,320.
  in.ulysses = 1;
  in.ring = 4;
  EXPECT_EQ(AttentionCollectives(in)[0].bytes, 7'864'320);
}

TEST(CostTest, UnevenHeadsArePadded) {
  EXPECT_EQ(HeadPad(40, 16), 8);
  EXPECT_EQ(HeadPad(30, 8), 2);
  EXPECT_EQ(HeadPad(24, 4), 0);
  EXPECT_EQ(HeadPad(5, 1), 0);
  AttentionCommInput in;
  in.q_len = in.kv_len = 1000;
  in.heads = 30;
  in.head_dim = 64;
  in.ulysses = 8;
  in.uneven_heads = true;
  // Width (30 + 2) * 64 = 2048: 4*1000*2048*2*7/64 = 1,792,000.
  EXPECT_EQ(AttentionCollectives(in)[0].bytes, 1'792'000);
}

TEST(CostTest, TpWithLocalHeads) {
  // TP=2 x Ulysses=2 on Flux: each rank's projections carry 12 heads; Ulysses moves those.
  AttentionCommInput in;
  in.q_len = in.kv_len = kFluxS;
  in.heads = 12;
  in.head_dim = 128;
  in.ulysses = 2;
  EXPECT_EQ(AttentionCollectives(in)[0].bytes, UlyssesBytes(1, kFluxS, 1536, 2, 2));
  EXPECT_EQ(AttentionCollectives(in)[0].bytes, 14'155'776);
}

TEST(CostTest, RingKvBuffers) {
  AttentionCommInput in;
  in.q_len = in.kv_len = kFluxS;
  in.heads = 24;
  in.head_dim = 128;
  in.ring = 4;
  // allgather materialises all of K and V: 2*4608*3072*2 = 56,623,104.
  EXPECT_EQ(RingKvBufferBytes(in), 56'623'104);
  // p2p holds two blocks of K and V: 2 * 2*1152*3072*2 = 28,311,552.
  in.rotate_method = RotateMethod::kP2p;
  EXPECT_EQ(RingKvBufferBytes(in), 28'311'552);
  in.ring = 1;
  EXPECT_EQ(RingKvBufferBytes(in), 0);
}

// `c` is `count` collectives `op` on `axis` sending `bytes`.
void ExpectCollective(const Collective& c, CollectiveOp op, std::string_view axis, int64_t count, int64_t bytes) {
  EXPECT_EQ(c.op, op);
  EXPECT_EQ(c.axis, axis);
  EXPECT_EQ(c.count, count);
  EXPECT_EQ(c.bytes, bytes);
}

TEST(CostTest, KeyMasksTravelWithTheirKeys) {
  // Batch 2, 10 keys over ulysses 2 x ring 2: SplitSizes gives 3, 3, 2, 2. Rank 0 all-gathers its
  // 3 keys' mask to 1 ulysses peer (2*3*1 bytes), then its group's 6 keys to 1 ring peer (2*6*1).
  std::vector<Collective> c = KeyMaskCollectives(2, 10, 2, 2, RotateMethod::kAllGather);
  ASSERT_EQ(c.size(), 2u);
  ExpectCollective(c[0], CollectiveOp::kAllGather, kUlyssesAxis, 1, 6);
  ExpectCollective(c[1], CollectiveOp::kAllGather, kRingAxis, 1, 12);
  // p2p: the ring's mask rides the K/V send/recv steps (bytes, no calls); ring 4 alone, 10 keys
  // (3, 3, 2, 2): rank 0's 3 keys to 3 peers, batch 1.
  c = KeyMaskCollectives(1, 10, 1, 4, RotateMethod::kP2p);
  ASSERT_EQ(c.size(), 1u);
  ExpectCollective(c[0], CollectiveOp::kSendRecv, kRingAxis, 0, 9);
  EXPECT_TRUE(KeyMaskCollectives(4, 10, 1, 1, RotateMethod::kAllGather).empty());
  // An additive mask first all-reduces (max) its 2 rows' fp32 maxima over the 4 cp ranks:
  // 2(n-1)/n x 8 bytes = 12.
  c = KeyMaskCollectives(2, 10, 2, 2, RotateMethod::kAllGather, /*additive=*/true);
  ASSERT_EQ(c.size(), 3u);
  ExpectCollective(c[0], CollectiveOp::kAllReduce, kCpGroup, 1, 12);
  EXPECT_TRUE(KeyMaskCollectives(4, 10, 1, 1, RotateMethod::kAllGather, true).empty());
}

TEST(CostTest, CollectivesSumOverCallsAndDivideBack) {
  std::vector<Collective> list;
  AddCollective(list, {CollectiveOp::kAllToAll, std::string(kUlyssesAxis), 2, 100});
  AddCollective(list, {CollectiveOp::kAllGather, std::string(kRingAxis), 1, 30});
  AddCollective(list, {CollectiveOp::kAllToAll, std::string(kUlyssesAxis), 2, 101});
  AddCollective(list, {CollectiveOp::kAllToAll, std::string(kRingAxis), 1, 7});  // same op, other axis
  ASSERT_EQ(list.size(), 3u);
  ExpectCollective(list[0], CollectiveOp::kAllToAll, kUlyssesAxis, 4, 201);
  ExpectCollective(list[1], CollectiveOp::kAllGather, kRingAxis, 1, 30);
  ExpectCollective(list[2], CollectiveOp::kAllToAll, kRingAxis, 1, 7);
  ExpectCollective(PerCall(list[0], 2), CollectiveOp::kAllToAll, kUlyssesAxis, 2, 100);  // rounds down
  ExpectCollective(PerCall(list[1], 0), CollectiveOp::kAllGather, kRingAxis, 1, 30);     // no calls: as one
  // Saturated sums stay saturated, and dividing them keeps the mark.
  AddCollective(list, {CollectiveOp::kAllGather, std::string(kRingAxis), 1, source::kSaturated});
  EXPECT_EQ(list[1].bytes, source::kSaturated);
  EXPECT_EQ(PerCall(list[1], 4).bytes, source::kSaturated);
  EXPECT_EQ(PerCall(list[1], 4).count, 0);
}

TEST(CostTest, AllGatherOfAnOutput) {
  // proj_out of Flux, (1, 4096, 64) bf16 = 524,288 bytes gathered over 4 ranks: 3/4 of it sent.
  EXPECT_EQ(AllGatherBytes(1 * 4096 * 64 * 2, 4), 393'216);
  EXPECT_EQ(AllGatherBytes(1000, 1), 0);
  EXPECT_EQ(AllGatherBytes(1000, 3), 667);  // rounded to the nearest byte
}

TEST(CostTest, ModeFromDegrees) {
  EXPECT_EQ(ModeFor(1, 1), AttentionMode::kLocal);
  EXPECT_EQ(ModeFor(4, 1), AttentionMode::kUlysses);
  EXPECT_EQ(ModeFor(1, 2), AttentionMode::kRing);
  EXPECT_EQ(ModeFor(2, 2), AttentionMode::kUsp);
}

TEST(CostTest, ShardParam) {
  auto w = ShardParam("weight", {12288, 3072}, ShardStyle::kColwise, {}, 4);
  EXPECT_EQ(w.dim, 0);
  EXPECT_EQ(w.local_shape, (std::vector<int64_t>{3072, 3072}));
  EXPECT_EQ(w.blocks, (std::vector<int64_t>{12288}));
  auto b = ShardParam("bias", {12288}, ShardStyle::kColwise, {}, 4);
  EXPECT_EQ(b.local_shape, (std::vector<int64_t>{3072}));
  auto r = ShardParam("weight", {3072, 12288}, ShardStyle::kRowwise, {}, 4);
  EXPECT_EQ(r.dim, 1);
  EXPECT_EQ(r.local_shape, (std::vector<int64_t>{3072, 3072}));
  auto rb = ShardParam("bias", {3072}, ShardStyle::kRowwise, {}, 4);
  EXPECT_EQ(rb.dim, -1);
  EXPECT_EQ(rb.local_shape, (std::vector<int64_t>{3072}));
  // Flux single block proj_out: packed rowwise over [inner 3072 | mlp 12288].
  auto packed = ShardParam("weight", {3072, 15360}, ShardStyle::kPackedRowwise, {3072, 12288}, 4);
  EXPECT_EQ(packed.dim, 1);
  EXPECT_EQ(packed.blocks, (std::vector<int64_t>{3072, 12288}));
  EXPECT_EQ(packed.local_shape, (std::vector<int64_t>{3072, 768 + 3072}));
  auto rep = ShardParam("weight", {64, 3072}, ShardStyle::kReplicate, {}, 4);
  EXPECT_EQ(rep.dim, -1);
  EXPECT_EQ(rep.local_shape, rep.full_shape);
  EXPECT_EQ(Numel(packed.local_shape), 3072 * 3840);
}

TEST(CostTest, HugeSizesSaturateInsteadOfWrapping) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(RingBytes(1, big, 64, 2, 2), source::kSaturated);  // 2^69: was a wrapped number
  EXPECT_EQ(UlyssesBytes(big, big, big, 2, 4), source::kSaturated);  // past int128 too
  EXPECT_EQ(AllGatherBytes(source::kSaturated, 4), source::kSaturated);
  EXPECT_EQ(Numel({2147483648, 2147483648, 4}), source::kSaturated);
  AttentionCommInput in;
  in.q_len = in.kv_len = big;
  in.heads = 24;
  in.head_dim = 128;
  in.ulysses = 2;
  in.ring = 2;
  for (const plan::Collective& c : AttentionCollectives(in)) EXPECT_EQ(c.bytes, source::kSaturated);
  EXPECT_EQ(RingKvBufferBytes(in), source::kSaturated);
  // Ordinary sizes are unchanged.
  EXPECT_EQ(RingBytes(1, 4608, 3072, 2, 2), 4608 * 3072 * 2);
}

}  // namespace
}  // namespace weft::plan

// Multi-process (Gloo, forked ranks) parity tests of context-parallel attention against one
// process computing full attention in fp64: fp32 max abs error <= 1e-5 x max|out|, bf16
// <= 2e-2 x max|out|; plus the exact call and byte counts of every call.
//
// Sizes are the shapes scaled down for 2 cores: the Flux joint sequence 512 text +
// 4096 image becomes 32 + 256 (split per stream), heads 24/30/40 with small D; the exact
// lengths 4089 and 1241 run with 3 heads of dim 8.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/attention/cp_test_util.h"

namespace weft::runtime::test {
namespace {

using dist::MeshShape;
using testing::MultiRankOptions;
using testing::RunOnRanks;

MultiRankOptions Options() {
  MultiRankOptions o;
  o.deadline = std::chrono::seconds(100);
  return o;
}

CpAttentionOptions Rotate(RingRotate rotate) {
  CpAttentionOptions o;
  o.rotate = rotate;
  return o;
}

// Cases every mode runs: an even joint sequence (`even_streams` divide the CP degree) with no
// shape exchange, whose bytes must equal the closed form when the heads divide too; uneven
// lengths with a padding mask and the LSE; cross-attention (Sq != Skv) with split K/V; fully
// masked rows and blocks; bf16 with fp32 and with bf16 merging.
std::vector<Spec> CommonCases(int64_t heads, RingRotate rotate, std::vector<int64_t> even_streams,
                              bool heads_divide) {
  std::vector<Spec> cases;
  Spec even;
  even.name = "even_joint";
  even.heads = heads;
  even.q_streams = even_streams;
  even.options = Rotate(rotate);
  even.options.exchange_shapes = false;
  even.check_formula = heads_divide;
  cases.push_back(even);

  Spec uneven;
  uneven.name = "uneven_joint_mask_lse";
  uneven.heads = heads;
  uneven.q_streams = {29, 251};
  uneven.mask_tail = 20;
  uneven.options = Rotate(rotate);
  uneven.options.return_lse = true;
  cases.push_back(uneven);

  Spec cross;
  cross.name = "cross_attention_split_kv_mask";
  cross.heads = heads;
  cross.q_streams = {61};
  cross.kv_streams = {13, 40};
  cross.mask_tail = 11;
  cross.options = Rotate(rotate);
  cases.push_back(cross);

  Spec empty;
  empty.name = "fully_masked_row_and_blocks";
  empty.heads = heads;
  empty.q_streams = {37};
  empty.kv_streams = {23};
  empty.mask_tail = 21;  // batch 1 keeps 2 keys: most ranks' blocks are fully masked
  empty.empty_row = true;
  empty.options = Rotate(rotate);
  empty.options.return_lse = true;
  cases.push_back(empty);

  Spec bf16;
  bf16.name = "bf16_fp32_merge";
  bf16.heads = heads;
  bf16.dtype = at::kBFloat16;
  bf16.mask_tail = 7;
  bf16.options = Rotate(rotate);
  cases.push_back(bf16);

  // Masks over (query, key) pairs: a sliding window over a joint sequence with uneven pieces,
  // a padding mask and the LSE; block-diagonal segments in cross-attention over split K/V.
  Spec window;
  window.name = "pair_sliding_window_uneven_joint";
  window.heads = heads;
  window.q_streams = {29, 251};
  window.mask_tail = 20;
  window.pair_window = 17;
  window.options = Rotate(rotate);
  window.options.return_lse = true;
  cases.push_back(window);

  // The window as a float bias (a relative-position bias, Chroma's 0/1 mask squared into pairs):
  // each rank adds its rows' and each key block's columns of it.
  Spec bias = window;
  bias.name = "pair_bias_uneven_joint";
  bias.pair_bias = true;
  cases.push_back(bias);

  Spec segments;
  segments.name = "pair_segments_cross_attention";
  segments.heads = heads;
  segments.q_streams = {61};
  segments.kv_streams = {13, 40};
  segments.pair_segments = 3;
  segments.options = Rotate(rotate);
  cases.push_back(segments);

  Spec bf16_raw;
  bf16_raw.name = "bf16_bf16_merge";
  bf16_raw.heads = heads;
  bf16_raw.dtype = at::kBFloat16;
  bf16_raw.q_streams = {30, 101};
  bf16_raw.options = Rotate(rotate);
  bf16_raw.options.convert_to_fp32 = false;
  cases.push_back(bf16_raw);
  return cases;
}

// 512 + 4096 scaled by 1/16 when the degree is a power of two, else a multiple of 6.
std::vector<int64_t> EvenStreams(int world) {
  return world % 3 == 0 ? std::vector<int64_t>{48, 240} : std::vector<int64_t>{32, 256};
}

void RunModes(int world, MeshShape mesh, int64_t heads, bool both_rotations) {
  const bool heads_divide = heads % mesh.ulysses == 0;
  RunOnRanks(world, mesh, [=](dist::DistContext& ctx) {
    for (const Spec& s :
         CommonCases(heads, RingRotate::kAllGather, EvenStreams(world), heads_divide)) {
      RunCase(ctx, s);
    }
    if (both_rotations) {
      for (Spec s : CommonCases(heads, RingRotate::kP2p, EvenStreams(world), heads_divide)) {
        s.name += "_p2p";
        RunCase(ctx, s);
      }
    }
  }, Options());
}

MeshShape Ulysses(int u) { return MeshShape{1, u, 1}; }
MeshShape Ring(int r) { return MeshShape{r, 1, 1}; }
MeshShape Usp(int r, int u) { return MeshShape{r, u, 1}; }

TEST(CpAttention, World1LocalAndDegenerateAxes) {
  RunOnRanks(1, Usp(1, 1), [](dist::DistContext& ctx) {
    for (CpMode mode : {CpMode::kLocal, CpMode::kUlysses, CpMode::kRing}) {
      for (Spec s : CommonCases(24, RingRotate::kP2p, {32, 256}, true)) {
        s.mode = mode;
        s.check_formula = false;
        s.name += std::string("_") + CpModeName(mode);
        RunCase(ctx, s);
      }
    }
  }, Options());
}

// Ulysses: heads 24 divide 2, 3, 4, 6, 8; 30 and 40 need zero-padded heads.
TEST(CpAttention, Ulysses2Heads24) { RunModes(2, Ulysses(2), 24, false); }
TEST(CpAttention, Ulysses3Heads40Padded) { RunModes(3, Ulysses(3), 40, false); }
TEST(CpAttention, Ulysses4Heads30Padded) { RunModes(4, Ulysses(4), 30, false); }
TEST(CpAttention, Ulysses6Heads40Padded) { RunModes(6, Ulysses(6), 40, false); }
TEST(CpAttention, Ulysses8Heads24) { RunModes(8, Ulysses(8), 24, false); }
TEST(CpAttention, Ulysses8Heads30Padded) {
  RunOnRanks(8, Ulysses(8), [](dist::DistContext& ctx) {
    Spec s;
  s.name = "h30_uneven_mask";
    s.heads = 30;
    s.q_streams = {29, 251};
    s.mask_tail = 20;
    s.options.return_lse = true;
    RunCase(ctx, s);
  }, Options());
}

// Ring: both rotations.
TEST(CpAttention, Ring2) { RunModes(2, Ring(2), 24, true); }
TEST(CpAttention, Ring3Heads30) { RunModes(3, Ring(3), 30, true); }
TEST(CpAttention, Ring4Heads40) { RunModes(4, Ring(4), 40, true); }
TEST(CpAttention, Ring6) { RunModes(6, Ring(6), 24, true); }
TEST(CpAttention, Ring8) { RunModes(8, Ring(8), 24, true); }

// USP: ulysses inner, ring outer; uneven lengths on both axes at once.
TEST(CpAttention, Usp2x2) { RunModes(4, Usp(2, 2), 24, true); }
TEST(CpAttention, Usp2x3Heads40Padded) { RunModes(6, Usp(2, 3), 40, true); }
TEST(CpAttention, Usp3x2Heads30) { RunModes(6, Usp(3, 2), 30, true); }

// The exact lengths of the issue: 4089 keys, 1241 queries (cross-attention with split K/V
// and self-attention), 3 heads (padded over ulysses 2), with a padding mask.
TEST(CpAttention, PrimeLengths4089And1241) {
  RunOnRanks(4, Usp(2, 2), [](dist::DistContext& ctx) {
    for (CpMode mode : {CpMode::kUsp, CpMode::kRing, CpMode::kUlysses}) {
      for (RingRotate rotate : {RingRotate::kAllGather, RingRotate::kP2p}) {
        if (mode == CpMode::kUlysses && rotate == RingRotate::kP2p) continue;
        Spec cross;
  cross.name = std::string("cross_1241x4089_") + CpModeName(mode) + "_" +
                   RingRotateName(rotate);
        cross.mode = mode;
        cross.batch = 1;
        cross.heads = 3;
        cross.q_streams = {1241};
        cross.kv_streams = {4089};
        cross.mask_tail = 0;
        cross.options.rotate = rotate;
        cross.options.return_lse = true;
        RunCase(ctx, cross);
      }
    }
    Spec self;
  self.name = "self_1241_usp_p2p_mask";
    self.batch = 2;
    self.heads = 3;
    self.q_streams = {1241};
    self.mask_tail = 300;
    self.options.rotate = RingRotate::kP2p;
    RunCase(ctx, self);
  }, [] {
    MultiRankOptions o = Options();
    o.deadline = std::chrono::seconds(150);
    return o;
  }());
}

}  // namespace
}  // namespace weft::runtime::test

// Single-process tests of the communication-free parts: local kernels with LSE, the online
// merge (simulating R ranks' K/V blocks in every ring order), splits and head padding.

#include "runtime/attention/local.h"
#include "runtime/attention/attention.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace weft::runtime {
namespace {

// max |a - b| / max |b| (relative to the output scale, as the tolerance is stated).
double RelErr(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.to(at::kDouble).abs().max().item<double>();
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         std::max(scale, 1e-30);
}

at::Tensor Rand(std::vector<int64_t> shape, at::ScalarType dtype = at::kFloat) {
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat)).to(dtype);
}

// Key-padding mask (B, S): batch b keeps its first S - pad[b] keys.
at::Tensor PaddingMask(int64_t s, const std::vector<int64_t>& pad) {
  at::Tensor m = at::ones({static_cast<int64_t>(pad.size()), s}, at::kBool);
  for (size_t b = 0; b < pad.size(); ++b) m[b].narrow(0, s - pad[b], pad[b]).fill_(false);
  return m;
}

TEST(LocalAttention, FusedCpuMatchesReferenceAndLseIsNaturalLog) {
  at::manual_seed(1);
  const at::Tensor q = Rand({2, 37, 6, 16}), k = Rand({2, 53, 6, 16}), v = Rand({2, 53, 6, 16});
  for (bool masked : {false, true}) {
    std::optional<at::Tensor> mask;
    if (masked) mask = PaddingMask(53, {0, 20});
    const AttentionOutput ref = ReferenceAttention(q, k, v, mask);
    const AttentionOutput fused = LocalAttention(q, k, v, mask, {std::nullopt, LocalKernel::kFused});
    const AttentionOutput math = LocalAttention(q, k, v, mask, {std::nullopt, LocalKernel::kMath});
    ASSERT_EQ(fused.out.sizes(), q.sizes());
    ASSERT_EQ(fused.lse.sizes(), (std::vector<int64_t>{2, 37, 6}));
    EXPECT_EQ(fused.lse.scalar_type(), at::kFloat);
    EXPECT_LE(RelErr(fused.out, ref.out), 1e-5);
    EXPECT_LE(RelErr(math.out, ref.out), 1e-5);
    // LSE: absolute, natural log (log(sum exp(q.k*scale))).
    EXPECT_LE((fused.lse.to(at::kDouble) - ref.lse).abs().max().item<double>(), 1e-5);
    EXPECT_LE((math.lse.to(at::kDouble) - ref.lse).abs().max().item<double>(), 1e-5);
    LocalAttentionOptions no_lse{std::nullopt, LocalKernel::kNoLse, /*return_lse=*/false};
    const AttentionOutput sdpa = LocalAttention(q, k, v, mask, no_lse);
    EXPECT_FALSE(sdpa.lse.defined());
    EXPECT_LE(RelErr(sdpa.out, ref.out), 1e-5);
  }
}

TEST(LocalAttention, ScaleIsHonoured) {
  at::manual_seed(2);
  const at::Tensor q = Rand({1, 9, 2, 8}), k = Rand({1, 11, 2, 8}), v = Rand({1, 11, 2, 8});
  const AttentionOutput ref = ReferenceAttention(q, k, v, std::nullopt, 0.7);
  const AttentionOutput fused = LocalAttention(q, k, v, std::nullopt, {0.7, LocalKernel::kFused});
  EXPECT_LE(RelErr(fused.out, ref.out), 1e-5);
}

TEST(LocalAttention, FullyMaskedRowsGiveZeroOutAndMinusInfLse) {
  at::manual_seed(3);
  const at::Tensor q = Rand({2, 5, 3, 8}), k = Rand({2, 7, 3, 8}), v = Rand({2, 7, 3, 8});
  at::Tensor mask = at::ones({2, 7}, at::kBool);
  mask[1].fill_(false);
  for (LocalKernel kernel : {LocalKernel::kFused, LocalKernel::kMath}) {
    const AttentionOutput r = LocalAttention(q, k, v, mask, {std::nullopt, kernel});
    EXPECT_EQ(r.out[1].abs().max().item<float>(), 0.0f) << LocalKernelName(kernel);
    EXPECT_TRUE(at::isneginf(r.lse[1]).all().item<bool>()) << LocalKernelName(kernel);
    EXPECT_TRUE(at::isfinite(r.lse[0]).all().item<bool>());
  }
  const AttentionOutput sdpa =
      LocalAttention(q, k, v, mask, {std::nullopt, LocalKernel::kNoLse, false});
  EXPECT_FALSE(at::isnan(sdpa.out).any().item<bool>());
  // A block with no keys at all (an uneven split can leave a rank empty).
  const AttentionOutput none =
      LocalAttention(q, k.narrow(1, 0, 0), v.narrow(1, 0, 0), std::nullopt, {});
  EXPECT_EQ(none.out.abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(at::isneginf(none.lse).all().item<bool>());
}

// A mask over (query, key) pairs with a key mask on top, every kernel against the fp64
// reference; a query row that the two leave without a key gives out 0 and lse -inf.
TEST(LocalAttention, PairMaskEveryKernelAndRowsLeftWithoutKeys) {
  at::manual_seed(5);
  const at::Tensor q = Rand({2, 6, 3, 8}), k = Rand({2, 9, 3, 8}), v = Rand({2, 9, 3, 8});
  // Query i sees keys i .. i + 3; batch 1 pads its last 4 keys, so its query 5 (keys 5..8) sees none.
  const at::Tensor i = at::arange(6, at::kLong).view({6, 1}), j = at::arange(9, at::kLong).view({1, 9});
  const at::Tensor pair = ((j >= i) & (j <= i + 3)).view({1, 1, 6, 9});
  at::Tensor keys = at::ones({2, 9}, at::kBool);
  keys[1].narrow(0, 5, 4).fill_(false);
  const AttentionOutput ref = ReferenceAttention(q, k, v, keys, std::nullopt, at::kDouble, pair);
  for (LocalKernel kernel : {LocalKernel::kFused, LocalKernel::kMath}) {
    const AttentionOutput r = LocalAttention(q, k, v, keys, pair, {std::nullopt, kernel});
    EXPECT_LE(RelErr(r.out, ref.out), 1e-5) << LocalKernelName(kernel);
    EXPECT_EQ(r.out[1][5].abs().max().item<float>(), 0.0f) << LocalKernelName(kernel);
    EXPECT_TRUE(at::isneginf(r.lse[1][5]).all().item<bool>()) << LocalKernelName(kernel);
    EXPECT_TRUE(at::isfinite(r.lse[0]).all().item<bool>()) << LocalKernelName(kernel);
  }
  const AttentionOutput sdpa = LocalAttention(q, k, v, keys, pair, {std::nullopt, LocalKernel::kNoLse, false});
  EXPECT_LE(RelErr(sdpa.out[0], ref.out[0]), 1e-5);
  // Not (B or 1, 1, Sq, Skv) bool: named.
  try {
    LocalAttention(q, k, v, std::nullopt, pair.narrow(3, 0, 8), {});
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("a mask over (query, key) pairs must be (B or 1, 1, Sq, Skv) = (2, 1, 6, 9)"),
              std::string::npos) << e.what();
  }
}

// A float mask over (query, key) pairs is a bias added to the scores, as
// scaled_dot_product_attention adds its float attn_mask: every kernel against torch's own, with
// -inf entries masking, a key mask on top, and a row the two leave without a key giving out 0.
TEST(LocalAttention, PairBiasIsAddedToTheScoresAsTorchDoes) {
  at::manual_seed(6);
  const at::Tensor q = Rand({2, 6, 3, 8}), k = Rand({2, 9, 3, 8}), v = Rand({2, 9, 3, 8});
  const at::Tensor i = at::arange(6, at::kLong).view({6, 1}), j = at::arange(9, at::kLong).view({1, 9});
  const at::Tensor window = ((j >= i) & (j <= i + 3)).view({1, 1, 6, 9});
  const at::Tensor bias = at::where(window, Rand({1, 1, 6, 9}), at::full({}, -INFINITY, at::kFloat));
  at::Tensor keys = at::ones({2, 9}, at::kBool);
  keys[1].narrow(0, 5, 4).fill_(false);
  const at::Tensor torch_bias = at::where(keys.view({2, 1, 1, 9}), bias, at::full({}, -INFINITY, at::kFloat));
  const at::Tensor want =
      at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), torch_bias)
          .transpose(1, 2);
  for (LocalKernel kernel : {LocalKernel::kFused, LocalKernel::kMath, LocalKernel::kNoLse}) {
    const AttentionOutput r =
        LocalAttention(q, k, v, keys, bias, {std::nullopt, kernel, kernel != LocalKernel::kNoLse});
    // Batch 1's query 5 sees no key: torch gives NaN or 0 there, weft 0.
    EXPECT_LE(RelErr(r.out[0], want[0]), 1e-5) << LocalKernelName(kernel);
    EXPECT_LE(RelErr(r.out[1].narrow(0, 0, 5), want[1].narrow(0, 0, 5)), 1e-5) << LocalKernelName(kernel);
    EXPECT_EQ(r.out[1][5].abs().max().item<float>(), 0.0f) << LocalKernelName(kernel);
  }
  // A bias of zeros is no mask at all.
  const AttentionOutput zero = LocalAttention(q, k, v, std::nullopt, at::zeros({1, 1, 6, 9}), {});
  EXPECT_LE(RelErr(zero.out, LocalAttention(q, k, v, std::nullopt, {}).out), 1e-6);
}

TEST(LocalAttention, BadShapesAreClearErrors) {
  const at::Tensor q = Rand({1, 5, 3, 8}), k = Rand({1, 7, 3, 8});
  EXPECT_THROW(LocalAttention(q, k, Rand({1, 6, 3, 8}), std::nullopt), c10::Error);
  EXPECT_THROW(LocalAttention(q, Rand({1, 7, 4, 8}), Rand({1, 7, 4, 8}), std::nullopt), c10::Error);
  EXPECT_THROW(LocalAttention(q, k, k, at::ones({1, 6}, at::kBool)), c10::Error);
  try {
    LocalAttention(q, k, k, std::nullopt, {std::nullopt, LocalKernel::kNoLse, true});
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not return the log-sum-exp"), std::string::npos);
  }
}

// Simulates a ring of R ranks in one process: K/V (and the mask) split with tensor_split's
// rule, rank r visits blocks r, r+1, ... (mod R) and merges. Must equal full attention.
void CheckSimulatedRing(at::ScalarType dtype, bool convert_to_fp32, double tol) {
  at::manual_seed(4);
  const int64_t b = 2, sq = 29, skv = 4089 % 97, h = 5, d = 12;  // skv = 15: uneven over 2..8
  const at::Tensor q = Rand({b, sq, h, d}, dtype), k = Rand({b, skv, h, d}, dtype),
                   v = Rand({b, skv, h, d}, dtype);
  // Batch 1 pads its last 9 keys: with R >= 3 whole blocks are fully masked.
  const at::Tensor mask = PaddingMask(skv, {0, 9});
  for (bool masked : {false, true}) {
    std::optional<at::Tensor> full_mask;
    if (masked) full_mask = mask;
    const AttentionOutput ref = ReferenceAttention(q, k, v, full_mask);
    for (int64_t ranks : {1, 2, 3, 4, 6, 8}) {
      for (int64_t r = 0; r < ranks; ++r) {
        LseMerger merger(convert_to_fp32);
        for (int64_t i = 0; i < ranks; ++i) {
          const int64_t block = (r + i) % ranks;
          std::optional<at::Tensor> block_mask;
          if (masked) block_mask = SplitPiece(mask, 1, ranks, block);
          const AttentionOutput part =
              LocalAttention(q, SplitPiece(k, 1, ranks, block), SplitPiece(v, 1, ranks, block),
                             block_mask);
          merger.Add(part.out, part.lse);
        }
        const AttentionOutput got = merger.Finish(dtype);
        ASSERT_FALSE(at::isnan(got.out).any().item<bool>()) << ranks << " " << r;
        EXPECT_LE(RelErr(got.out, ref.out), tol)
            << "ranks=" << ranks << " r=" << r << " masked=" << masked;
        if (dtype == at::kFloat) {
          EXPECT_LE((got.lse.to(at::kDouble) - ref.lse).abs().max().item<double>(), 1e-5);
        }
      }
    }
  }
}

TEST(LseMerger, SimulatedRingEqualsFullAttentionFp32) { CheckSimulatedRing(at::kFloat, true, 1e-5); }
TEST(LseMerger, SimulatedRingEqualsFullAttentionBf16Fp32Merge) {
  CheckSimulatedRing(at::kBFloat16, true, 2e-2);
}
TEST(LseMerger, SimulatedRingEqualsFullAttentionBf16Bf16Merge) {
  CheckSimulatedRing(at::kBFloat16, false, 2e-2);
}

TEST(LseMerger, EmptyBlocksInAnyPositionNeverNaN) {
  // Rows empty in the first block, the last block, and every block.
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor out_a = at::zeros({1, 3, 1, 2});
  at::Tensor lse_a = at::tensor({-inf, 0.5, -inf}, at::kFloat).view({1, 3, 1});
  at::Tensor out_b = at::ones({1, 3, 1, 2});
  out_b[0][2].zero_();
  at::Tensor lse_b = at::tensor({1.0, -inf, -inf}, at::kFloat).view({1, 3, 1});
  LseMerger m(true);
  m.Add(out_a, lse_a);
  m.Add(out_b, lse_b);
  const AttentionOutput r = m.Finish(at::kFloat);
  EXPECT_FALSE(at::isnan(r.out).any().item<bool>());
  EXPECT_FLOAT_EQ(r.out[0][0][0][0].item<float>(), 1.0f);  // only block b
  EXPECT_FLOAT_EQ(r.out[0][1][0][0].item<float>(), 0.0f);  // only block a
  EXPECT_FLOAT_EQ(r.out[0][2][0][0].item<float>(), 0.0f);  // nothing
  EXPECT_FLOAT_EQ(r.lse[0][0][0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(r.lse[0][1][0].item<float>(), 0.5f);
  EXPECT_TRUE(std::isinf(r.lse[0][2][0].item<float>()));
  // The caller's tensors are not modified by the in-place merge.
  EXPECT_EQ(out_a.abs().max().item<float>(), 0.0f);
}

TEST(Split, TensorSplitRuleAndJointStreams) {
  EXPECT_EQ(SplitSizes(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(SplitSizes(9, 4), (std::vector<int64_t>{3, 2, 2, 2}));
  EXPECT_EQ(SplitSizes(4089, 8), (std::vector<int64_t>{512, 511, 511, 511, 511, 511, 511, 511}));
  EXPECT_EQ(SplitSizes(2, 3), (std::vector<int64_t>{1, 1, 0}));
  const at::Tensor text = at::arange(5).view({1, 5}), image = at::arange(100, 111).view({1, 11});
  // Rank 1 of 3: text rows [2, 4), image rows [4, 8).
  const at::Tensor joint = SplitJoint({text, image}, 3, 1);
  EXPECT_TRUE(at::equal(joint, at::tensor({2, 3, 104, 105, 106, 107}, at::kLong).view({1, 6})));
}

std::vector<int64_t> JointSizesOf(const std::vector<int64_t>& streams, int64_t parts) {
  std::vector<int64_t> total(parts, 0);
  for (int64_t len : streams) {
    const std::vector<int64_t> s = SplitSizes(len, parts);
    for (int64_t j = 0; j < parts; ++j) total[j] += s[j];
  }
  return total;
}

TEST(HeadPadding, PadsAtTheEndAndRejectsAWholeRankOfPadding) {
  const HeadPadding p = PadHeads(30, 8, "ulysses");
  EXPECT_EQ(p.pad, 2);
  EXPECT_EQ(p.per_rank, 4);
  EXPECT_EQ(PadHeads(24, 4, "u").pad, 0);
  EXPECT_EQ(PadHeads(40, 6, "u").per_rank, 7);
  const at::Tensor x = at::ones({1, 2, 30, 4});
  const at::Tensor padded = PadHeadDim(x, p);
  EXPECT_EQ(padded.size(2), 32);
  EXPECT_EQ(padded.narrow(2, 30, 2).abs().max().item<float>(), 0.0f);
  try {
    PadHeads(30, 16, "UlyssesAttention on rank 3");
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("UlyssesAttention on rank 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("30 heads over ulysses degree 16"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace weft::runtime

namespace weft::runtime {
namespace {

// peers-and-limits.md (c), worked case 1: Flux.1-dev 1024^2, S = 4096 + 512, H = 24, D = 128,
// bf16, 57 attention layers, P = 4: Ulysses 1.21 GB and ring 2.42 GB per rank per forward.
// The prediction (no shape record, no mask) must equal the closed form exactly.
TEST(CommPrediction, FluxWorkedCaseMatchesTheReference) {
  CpAttentionOptions o;
  o.exchange_shapes = false;
  for (CpMode mode : {CpMode::kUlysses, CpMode::kRing, CpMode::kUsp}) {
    CommShape s;
    s.mode = mode;
    s.ring = mode == CpMode::kUlysses ? 1 : (mode == CpMode::kUsp ? 2 : 4);
    s.ulysses = mode == CpMode::kRing ? 1 : (mode == CpMode::kUsp ? 2 : 4);
    s.batch = 1, s.heads = 24, s.head_dim = 128, s.element_bytes = 2;
    s.sq = JointSizesOf({512, 4096}, 4);
    s.skv = s.sq;
    for (int rank = 0; rank < 4; ++rank) {
      s.cp_rank = rank;
      for (RingRotate rotate : {RingRotate::kAllGather, RingRotate::kP2p}) {
        o.rotate = rotate;
        const int64_t bytes = PredictComm(s, o).Total().bytes_sent;
        EXPECT_EQ(bytes, FormulaBytes(mode, s.ring, s.ulysses, 1, 4608, 24, 128, 2))
            << CpModeName(mode) << " " << RingRotateName(rotate);
        const double gb_per_forward = 57.0 * static_cast<double>(bytes) / 1e9;
        if (mode == CpMode::kUlysses) {
          EXPECT_NEAR(gb_per_forward, 1.21, 0.005);
        }
        if (mode == CpMode::kRing) {
          EXPECT_NEAR(gb_per_forward, 2.42, 0.005);
        }
      }
    }
  }
  // Calls: Ulysses packs q, k, v into one all-to-all (+1 back); the allgather ring is one
  // all-gather; the p2p ring R - 1 send/recv batches.
  CommShape u;
  u.mode = CpMode::kUlysses, u.ulysses = 4, u.heads = 24, u.head_dim = 128;
  u.sq = u.skv = {1152, 1152, 1152, 1152};
  EXPECT_EQ(PredictComm(u, o).Get(dist::Axis::kUlysses, dist::CommOp::kAllToAll).calls, 2);
  CommShape r = u;
  r.mode = CpMode::kRing, r.ring = 4, r.ulysses = 1;
  o.rotate = RingRotate::kP2p;
  EXPECT_EQ(PredictComm(r, o).Get(dist::Axis::kRing, dist::CommOp::kSendRecv).calls, 3);
  o.rotate = RingRotate::kAllGather;
  EXPECT_EQ(PredictComm(r, o).Get(dist::Axis::kRing, dist::CommOp::kAllGather).calls, 1);
}

}  // namespace
}  // namespace weft::runtime

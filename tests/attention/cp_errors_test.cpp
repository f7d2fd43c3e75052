// Bad input to context-parallel attention: every rank gets a clear c10::Error naming its rank
// and the call, quickly (no hang): shapes or options that disagree across ranks, too much
// head padding, ring modes with a kernel that returns no LSE.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "runtime/attention/attention.h"
#include "runtime/dist/dist_context.h"
#include "tests/support/multi_rank.h"

namespace weft::runtime {
namespace {

using dist::DistContext;
using dist::MeshShape;

// Runs `call` and expects a c10::Error whose message contains every string of `needles`
// (plus "rank <this rank>").
void ExpectError(DistContext& ctx, const std::function<void()>& call,
                 const std::vector<std::string>& needles) {
  try {
    call();
    ADD_FAILURE() << "rank " << ctx.rank() << ": expected an error";
  } catch (const c10::Error& e) {
    const std::string msg = e.msg();
    EXPECT_NE(msg.find("rank " + std::to_string(ctx.rank()) + " ("), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

at::Tensor Qkv(int64_t b, int64_t s, int64_t h, int64_t d, at::ScalarType dtype = at::kFloat) {
  return at::randn({b, s, h, d}, at::kFloat).to(dtype);
}

testing::MultiRankOptions Fast() {
  testing::MultiRankOptions o;
  o.deadline = std::chrono::seconds(40);
  return o;
}

TEST(CpAttentionErrors, HeadsThatDisagreeAcrossRanks) {
  const auto r = testing::RunOnRanks(3, MeshShape{1, 3, 1}, [](DistContext& ctx) {
    const int64_t h = ctx.rank() == 2 ? 8 : 6;
    const at::Tensor x = Qkv(1, 5, h, 4);
    CpAttentionOptions o;
    o.label = "blocks.0.attn";
    ExpectError(ctx, [&] { UlyssesAttention(ctx, x, x, x, std::nullopt, o); },
                {"UlyssesAttention `blocks.0.attn`", "ranks disagree on the heads",
                 "ulysses rank 0 has 6, ulysses rank 2 has 8"});
  }, Fast());
  EXPECT_LT(r.seconds, 20.0);
}

TEST(CpAttentionErrors, BatchDtypeAndOptionsThatDisagree) {
  const auto r = testing::RunOnRanks(4, MeshShape{2, 2, 1}, [](DistContext& ctx) {
    // Ring groups are {0, 2} and {1, 3}: one rank of each disagrees.
    const at::Tensor x = Qkv(ctx.rank() == 1 || ctx.rank() == 2 ? 2 : 1, 6, 4, 4);
    CpAttentionOptions ring;
    ring.rotate = RingRotate::kP2p;
    ExpectError(ctx, [&] { RingAttention(ctx, x, x, x, std::nullopt, ring); },
                {"RingAttention", "ranks disagree on the batch"});
    const at::Tensor y = Qkv(1, 6, 4, 4, ctx.rank() == 3 ? at::kBFloat16 : at::kFloat);
    ExpectError(ctx, [&] { UspAttention(ctx, y, y, y, std::nullopt, {}); },
                {"UspAttention", "ranks disagree on the dtype: cp rank 0 has Float, cp rank 3 has BFloat16"});
    const at::Tensor z = Qkv(1, 6, 4, 4);
    CpAttentionOptions mixed;
    mixed.rotate = ctx.rank() == 0 ? RingRotate::kP2p : RingRotate::kAllGather;
    ExpectError(ctx, [&] { UspAttention(ctx, z, z, z, std::nullopt, mixed); },
                {"UspAttention", "ranks disagree on the options", "rotate p2p", "rotate allgather"});
  }, Fast());
  EXPECT_LT(r.seconds, 20.0);
}

TEST(CpAttentionErrors, TooMuchHeadPadding) {
  testing::RunOnRanks(4, MeshShape{1, 4, 1}, [](DistContext& ctx) {
    const at::Tensor x = Qkv(1, 4, 5, 4);  // 5 heads over 4: 3 padding heads, 2 per rank
    ExpectError(ctx, [&] { UlyssesAttention(ctx, x, x, x, std::nullopt, {}); },
                {"UlyssesAttention", "5 heads over ulysses degree 4", "no real head"});
    const at::Tensor y = Qkv(1, 4, 2, 4);  // fewer heads than ranks
    ExpectError(ctx, [&] { UlyssesAttention(ctx, y, y, y, std::nullopt, {}); },
                {"2 heads over ulysses degree 4"});
    // Nothing was sent: the failed calls left no collective behind.
    EXPECT_EQ(ctx.counters().Total().calls, 0);
  }, Fast());
}

TEST(CpAttentionErrors, RingModesNeedAKernelWithLse) {
  testing::RunOnRanks(4, MeshShape{2, 2, 1}, [](DistContext& ctx) {
    const at::Tensor x = Qkv(1, 4, 4, 4);
    CpAttentionOptions o;
    o.kernel = LocalKernel::kNoLse;
    for (RingRotate rotate : {RingRotate::kAllGather, RingRotate::kP2p}) {
      o.rotate = rotate;
      ExpectError(ctx, [&] { RingAttention(ctx, x, x, x, std::nullopt, o); },
                  {"RingAttention", "log-sum-exp", "sdpa-no-lse"});
      ExpectError(ctx, [&] { UspAttention(ctx, x, x, x, std::nullopt, o); },
                  {"UspAttention", "log-sum-exp"});
    }
    EXPECT_EQ(ctx.counters().Total().calls, 0);
    // Ulysses needs no LSE: the same kernel works there (and matches the fused one).
    o.rotate = RingRotate::kAllGather;
    const AttentionOutput a = UlyssesAttention(ctx, x, x, x, std::nullopt, o);
    const AttentionOutput b = UlyssesAttention(ctx, x, x, x, std::nullopt, {});
    EXPECT_LE((a.out - b.out).abs().max().item<float>(), 1e-5f);
  }, Fast());
}

}  // namespace
}  // namespace weft::runtime

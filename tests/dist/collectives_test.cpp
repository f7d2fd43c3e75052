// Collective wrappers of DistContext on real multi-process Gloo groups (tests/support).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/dist/dist_context.h"
#include "tests/support/multi_rank.h"

namespace weft::dist {
namespace {

using testing::MultiRankOptions;
using testing::RunOnRanks;
using testing::RunRanks;

MeshShape Shape(int ring, int ulysses, int tp,
                std::array<Axis, 3> order = {Axis::kTp, Axis::kRing, Axis::kUlysses}) {
  MeshShape s;
  s.ring = ring;
  s.ulysses = ulysses;
  s.tp = tp;
  s.order = {Axis::kCfg, order[0], order[1], order[2]};
  return s;
}

#define EXPECT_TENSOR_EQ(got, want)                                                            \
  do {                                                                                         \
    at::Tensor g_ = (got), w_ = (want);                                                        \
    EXPECT_TRUE(g_.sizes() == w_.sizes() && g_.scalar_type() == w_.scalar_type() &&           \
                at::equal(g_, w_))                                                             \
        << "got " << g_.sizes() << " " << g_.scalar_type() << "\n"                            \
        << g_ << "\nwant " << w_.sizes() << " " << w_.scalar_type() << "\n"                   \
        << w_;                                                                                 \
  } while (0)

// Every wrapper on one axis, checked exactly against values recomputed locally.
void CheckEveryWrapper(DistContext& ctx, Axis axis) {
  SCOPED_TRACE(std::string("axis ") + AxisName(axis));
  const int n = ctx.AxisSize(axis);
  const int r = ctx.AxisRank(axis);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);

  at::Tensor sum = at::full({5}, int64_t{r * r}, i64);
  ctx.AllReduce(axis, sum);
  EXPECT_TENSOR_EQ(sum, at::full({5}, int64_t{(n - 1) * n * (2 * n - 1) / 6}, i64));
  at::Tensor mn = at::full({2}, 10.0 + r, f64);
  ctx.AllReduce(axis, mn, ReduceKind::kMin);
  EXPECT_TENSOR_EQ(mn, at::full({2}, 10.0, f64));

  // Even all_gather along a middle dim of a 3-d tensor.
  auto piece = [&](int j) { return at::arange(2 * 2 * 3, i64).view({2, 2, 3}) * 10 + j; };
  std::vector<at::Tensor> parts;
  for (int j = 0; j < n; ++j) parts.push_back(piece(j));
  EXPECT_TENSOR_EQ(ctx.AllGather(axis, piece(r), -2), at::cat(parts, 1));

  // Uneven all_gather: axis rank j holds (j % 3) rows (so some shards are empty).
  auto shard = [&](int j) { return at::full({2, j % 3, 2}, 1.5 * j, f64); };
  parts.clear();
  for (int j = 0; j < n; ++j) parts.push_back(shard(j));
  EXPECT_TENSOR_EQ(ctx.AllGatherUneven(axis, shard(r), 1), at::cat(parts, 1));

  // Ulysses-shaped all_to_all: (B, S/n, H, D) -> (B, S, H/n, D) and back is the identity, and
  // the forward result equals the slice of the global tensor.
  const int64_t B = 2, s_local = 3, H = 2 * n, D = 4;
  at::Tensor global = at::arange(B * s_local * n * H * D, f64).view({B, s_local * n, H, D});
  at::Tensor local = global.narrow(1, r * s_local, s_local).contiguous();
  at::Tensor heads = ctx.AllToAll(axis, local, /*scatter_dim=*/2, /*gather_dim=*/1);
  EXPECT_TENSOR_EQ(heads, global.narrow(2, r * (H / n), H / n).contiguous());
  EXPECT_TENSOR_EQ(ctx.AllToAll(axis, heads, 1, 2), local);

  // Even all_to_all_single.
  at::Tensor rows = at::arange(2 * n * 3, i64).view({2 * n, 3}) + 1000 * r;
  parts.clear();
  for (int j = 0; j < n; ++j) parts.push_back((at::arange(2 * n * 3, i64).view({2 * n, 3}) + 1000 * j).narrow(0, 2 * r, 2));
  EXPECT_TENSOR_EQ(ctx.AllToAllSingle(axis, rows), at::cat(parts, 0));

  // Uneven all_to_all_single: rank i sends (i + 2 j) % 3 rows of value 100 i + j to rank j
  // (zero rows allowed).
  std::vector<int64_t> in_splits, out_splits;
  std::vector<at::Tensor> in_parts;
  parts.clear();
  for (int j = 0; j < n; ++j) {
    in_splits.push_back((r + 2 * j) % 3);
    out_splits.push_back((j + 2 * r) % 3);
    in_parts.push_back(at::full({(r + 2 * j) % 3, 2}, 100.0 * r + j, f64));
    parts.push_back(at::full({(j + 2 * r) % 3, 2}, 100.0 * j + r, f64));
  }
  EXPECT_TENSOR_EQ(ctx.AllToAllSingle(axis, at::cat(in_parts, 0), in_splits, out_splits), at::cat(parts, 0));

  // Ring rotation of two tensors (K and V) per step; the V recv buffer is non-contiguous.
  if (n > 1) {
    at::Tensor k = at::full({2, 3}, 1.0 * r, f64), v = at::full({3, 2}, -1.0 * r, f64);
    for (int step = 1; step < n; ++step) {
      at::Tensor k_in = at::empty_like(k);
      at::Tensor v_in = at::empty({2, 3}, f64).t();  // (3, 2), non-contiguous
      P2PHandle h = ctx.SendRecv(axis, {{k, (r + 1) % n}, {v, (r + 1) % n}},
                                 {{k_in, (r - 1 + n) % n}, {v_in, (r - 1 + n) % n}});
      h.Wait();
      EXPECT_TRUE(h.done());
      const int src = ((r - step) % n + n) % n;
      EXPECT_TENSOR_EQ(k_in, at::full({2, 3}, 1.0 * src, f64));
      EXPECT_TENSOR_EQ(v_in.contiguous(), at::full({3, 2}, -1.0 * src, f64));
      k = k_in;
      v = v_in.contiguous();
    }
  }
  ctx.Barrier(axis);
}

struct WorldCase {
  int world_size;
  MeshShape mesh;
  bool gloo_only = false;  // shared memory off: every CPU collective over Gloo
};

void PrintTo(const WorldCase& c, std::ostream* os) {
  *os << c.world_size << " ranks, " << c.mesh.ToString() << (c.gloo_only ? ", gloo only" : "");
}

class EveryWrapper : public ::testing::TestWithParam<WorldCase> {};

TEST_P(EveryWrapper, ExactOnEveryAxis) {
  const WorldCase c = GetParam();
  MultiRankOptions o;
  if (c.gloo_only) o.dist.shm_budget_bytes = 0;
  RunOnRanks(c.world_size, c.mesh, [&](DistContext& ctx) {
    for (Axis axis : kAllAxes) {
      const std::string want = ctx.AxisSize(axis) == 1 ? "local"
                               : c.gloo_only           ? "gloo (shared memory is turned off)"
                                                       : "shm";
      EXPECT_EQ(ctx.CpuTransport(axis), want) << AxisName(axis);
      CheckEveryWrapper(ctx, axis);
    }
  }, o);
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, EveryWrapper,
    ::testing::Values(WorldCase{1, Shape(1, 1, 1)}, WorldCase{2, Shape(2, 1, 1)},
                      WorldCase{3, Shape(1, 3, 1)}, WorldCase{4, Shape(2, 2, 1)},
                      WorldCase{6, Shape(3, 2, 1, {Axis::kUlysses, Axis::kRing, Axis::kTp})},
                      WorldCase{8, Shape(2, 2, 2)}, WorldCase{3, Shape(1, 3, 1), true},
                      WorldCase{4, Shape(2, 2, 1), true}),
    [](const ::testing::TestParamInfo<WorldCase>& p) {
      return "world" + std::to_string(p.param.world_size) + (p.param.gloo_only ? "_gloo" : "");
    });

// One rank with shared memory off: every group it is in falls back to Gloo as a whole (no rank
// waits for it at setup), groups without it keep shared memory, and everything still works.
TEST(Collectives, ARankWithSharedMemoryOffMovesItsGroupsToGloo) {
  MultiRankOptions o;
  o.per_rank_dist = [](int rank, DistOptions& d) {
    if (rank == 3) d.shm_budget_bytes = 0;
  };
  RunOnRanks(4, Shape(2, 2, 1), [](DistContext& ctx) {
    const bool with_rank3 = [&] {
      for (int r : ctx.GroupRanks(Axis::kUlysses)) {
        if (r == 3) return true;
      }
      return false;
    }();
    const std::string off = ctx.rank() == 3 ? "gloo (shared memory is turned off)"
                                            : "gloo (shared memory is turned off on group rank " +
                                                  std::to_string(ctx.mesh().AxisRank(3, Axis::kWorld)) + ")";
    EXPECT_EQ(ctx.CpuTransport(Axis::kWorld), off);
    if (with_rank3) {
      EXPECT_EQ(ctx.CpuTransport(Axis::kUlysses).rfind("gloo (shared memory is turned off", 0), 0u);
    } else {
      EXPECT_EQ(ctx.CpuTransport(Axis::kUlysses), "shm");
    }
    for (Axis axis : kAllAxes) CheckEveryWrapper(ctx, axis);
  }, o);
}

// Messages larger than a shared-memory piece (1 MiB for two ranks) stream through in pieces,
// from and into strided tensors, both ways, several times over.
TEST(Collectives, LargeStridedMessagesOverSharedMemory) {
  RunOnRanks(2, Shape(1, 2, 1), [](DistContext& ctx) {
    ASSERT_EQ(ctx.CpuTransport(Axis::kUlysses), "shm");
    const int r = ctx.rank();
    const int64_t S = 3000, H = 8, D = 64;  // 6.1 MB per rank; 3 pieces per peer each way
    at::Tensor global = at::arange(2 * S * H * D, at::kFloat).view({1, 2 * S, H, D});
    at::Tensor local = global.narrow(1, r * S, S);  // strided (a slice along the sequence)
    for (int round = 0; round < 3; ++round) {
      at::Tensor heads = ctx.AllToAll(Axis::kUlysses, local, 2, 1);
      EXPECT_TENSOR_EQ(heads, global.narrow(2, r * H / 2, H / 2).contiguous());
      EXPECT_TENSOR_EQ(ctx.AllToAll(Axis::kUlysses, heads, 1, 2), local.contiguous());
    }
    at::Tensor sum = at::arange(S * D, at::kDouble) * (r + 1);
    ctx.AllReduce(Axis::kUlysses, sum);
    EXPECT_TENSOR_EQ(sum, at::arange(S * D, at::kDouble) * 3);
  });
}

// The c10d groups really contain the ranks Mesh says: all-gathering the global rank over each
// axis gives GroupRanks, for two shapes in non-default orders.
TEST(Groups, MembershipMatchesMeshArithmetic) {
  for (const MeshShape& shape : {Shape(2, 2, 2, {Axis::kUlysses, Axis::kTp, Axis::kRing}),
                                 Shape(3, 2, 1, {Axis::kRing, Axis::kUlysses, Axis::kTp})}) {
    RunOnRanks(shape.WorldSize(), shape, [](DistContext& ctx) {
      for (Axis axis : kAllAxes) {
        std::vector<int64_t> got = ctx.AllGatherSizes(axis, ctx.rank());
        std::vector<int> want = ctx.mesh().GroupRanks(ctx.rank(), axis);
        EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.end())) << AxisName(axis);
        EXPECT_EQ(ctx.GroupRanks(axis), want);
        EXPECT_EQ(ctx.AxisRank(axis), ctx.mesh().AxisRank(ctx.rank(), axis));
      }
    });
  }
}

// Empty tensors: a rank that sends nothing, a gather of nothing, a zero-length local sequence.
TEST(Collectives, EmptyPieces) {
  RunOnRanks(2, Shape(1, 2, 1), [](DistContext& ctx) {
    const int r = ctx.rank();
    // Rank 0 sends nothing; rank 1 sends 3 rows to rank 0 and keeps 1.
    at::Tensor in = r == 0 ? at::zeros({0, 2}) : at::full({4, 2}, 7.0f);
    std::vector<int64_t> in_splits = r == 0 ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{3, 1};
    std::vector<int64_t> out_splits = r == 0 ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{0, 1};
    at::Tensor out = ctx.AllToAllSingle(Axis::kUlysses, in, in_splits, out_splits);
    EXPECT_TENSOR_EQ(out, at::full({r == 0 ? 3 : 1, 2}, 7.0f));
    // Every shard empty.
    EXPECT_TENSOR_EQ(ctx.AllGatherUneven(Axis::kUlysses, at::zeros({0, 3}), 0), at::zeros({0, 3}));
    // all_to_all of zero-length sequences (same shape on every rank, as required).
    at::Tensor g = ctx.AllToAll(Axis::kUlysses, at::zeros({1, 0, 2, 2}), 2, 1);
    EXPECT_EQ(g.sizes(), (at::IntArrayRef{1, 0, 1, 2}));
  });
}

// Sizes are exchanged on every call (never cached).
TEST(Collectives, UnevenAllGatherSizesChangeBetweenCalls) {
  RunOnRanks(3, Shape(1, 3, 1), [](DistContext& ctx) {
    const int r = ctx.rank();
    for (int round = 0; round < 3; ++round) {
      const int64_t mine = (r + round) % 3 + 1;
      at::Tensor got = ctx.AllGatherUneven(Axis::kUlysses, at::full({mine}, 1.0 * r), 0);
      std::vector<at::Tensor> want;
      for (int j = 0; j < 3; ++j) want.push_back(at::full({(j + round) % 3 + 1}, 1.0 * j));
      EXPECT_TENSOR_EQ(got, at::cat(want, 0));
    }
    EXPECT_EQ(ctx.counters().Get(Axis::kUlysses, CommOp::kAllGatherSizes).calls, 3);
  });
}

// Compute can run between SendRecv and Wait (the overlap the ring needs).
TEST(Collectives, SendRecvOverlapsCompute) {
  RunOnRanks(2, Shape(2, 1, 1), [](DistContext& ctx) {
    const int r = ctx.rank();
    at::Tensor block = at::full({256, 256}, 1.0f + r);
    at::Tensor in = at::empty_like(block);
    P2PHandle h = ctx.SendRecv(Axis::kRing, {{block, 1 - r}}, {{in, 1 - r}});
    EXPECT_FALSE(h.done());
    at::Tensor local = at::mm(block, block);  // runs while the block travels
    h.Wait();
    h.Wait();  // idempotent
    EXPECT_TENSOR_EQ(in, at::full({256, 256}, 2.0f - r));
    EXPECT_EQ(local.sum().item<float>(), 256.0f * 256 * 256 * (1.0f + r) * (1.0f + r));
  });
}

TEST(Collectives, BadArgumentsAreDistErrorsNamingTheCall) {
  RunOnRanks(2, Shape(1, 2, 1), [](DistContext& ctx) {
    try {
      ctx.AllToAll(Axis::kUlysses, at::zeros({3, 4}), 0, 1);
      ADD_FAILURE() << "no error";
    } catch (const DistError& e) {
      EXPECT_EQ(std::string(e.what()),
                "rank " + std::to_string(ctx.rank()) +
                    ": all_to_all on axis `ulysses` (group ranks 0,1): input [3, 4] Float dim 0 (size 3) does "
                    "not divide by the group size 2; use AllToAllSingle with explicit splits");
    }
    EXPECT_THROW(ctx.AllToAllSingle(Axis::kUlysses, at::zeros({3}), {1, 1}, {1, 1}), DistError);
    EXPECT_THROW(ctx.AllGather(Axis::kUlysses, at::zeros({3}), 1), DistError);
    EXPECT_THROW(ctx.SendRecv(Axis::kUlysses, {{at::zeros({1}), ctx.rank()}}, {}), DistError);
  });
}

// Byte counters, exactly, against hand-computed values (conventions in counters.h).
TEST(Counters, ExactBytesOnRing2Ulysses2) {
  RunOnRanks(4, Shape(2, 2, 1), [](DistContext& ctx) {
    const int r = ctx.rank();
    // all_gather of 6 floats (24 B) over ulysses (n=2): 24 B sent.
    ctx.AllGather(Axis::kUlysses, at::zeros({2, 3}), 0);
    EXPECT_EQ(ctx.counters().Get(Axis::kUlysses, CommOp::kAllGather), (CommStat{1, 24}));
    // all_gather over cp (n=4) of 10 doubles (80 B): 240 B.
    ctx.AllGather(Axis::kCp, at::zeros({10}, at::kDouble), 0);
    EXPECT_EQ(ctx.counters().Get(Axis::kCp, CommOp::kAllGather), (CommStat{1, 240}));
    // all_to_all over cp of (8, 4) floats (128 B): 3/4 leaves = 96 B.
    ctx.AllToAll(Axis::kCp, at::zeros({8, 4}), 0, 1);
    EXPECT_EQ(ctx.counters().Get(Axis::kCp, CommOp::kAllToAll), (CommStat{1, 96}));
    // Uneven all_to_all_single over the world: rank i sends i + j + 1 rows of 2 floats (8 B)
    // to rank j and keeps 2 i + 1 rows: sent = (sum_j (i + j + 1) - (2 i + 1)) * 8.
    std::vector<int64_t> in_splits, out_splits;
    int64_t total = 0;
    for (int j = 0; j < 4; ++j) {
      in_splits.push_back(r + j + 1);
      out_splits.push_back(j + r + 1);
      total += r + j + 1;
    }
    ctx.AllToAllSingle(Axis::kWorld, at::zeros({total, 2}), in_splits, out_splits);
    const int64_t want_a2a[4] = {(10 - 1) * 8, (14 - 3) * 8, (18 - 5) * 8, (22 - 7) * 8};
    EXPECT_EQ(ctx.counters().Get(Axis::kWorld, CommOp::kAllToAll), (CommStat{1, want_a2a[r]}));
    // all_reduce over the world of 100 floats (400 B): 2 * 3 / 4 * 400 = 600 B.
    at::Tensor t = at::zeros({100});
    ctx.AllReduce(Axis::kWorld, t);
    EXPECT_EQ(ctx.counters().Get(Axis::kWorld, CommOp::kAllReduce), (CommStat{1, 600}));
    // Uneven all_gather over ring (n=2): rank r holds r + 1 doubles: (r + 1) * 8 B sent, plus
    // one all_gather_sizes of 8 B.
    ctx.AllGatherUneven(Axis::kRing, at::zeros({ctx.AxisRank(Axis::kRing) + 1}, at::kDouble), 0);
    EXPECT_EQ(ctx.counters().Get(Axis::kRing, CommOp::kAllGather),
              (CommStat{1, (ctx.AxisRank(Axis::kRing) + 1) * 8}));
    EXPECT_EQ(ctx.counters().Get(Axis::kRing, CommOp::kAllGatherSizes), (CommStat{1, 8}));
    // send_recv: two sends of 12 floats on ring, 96 B; recvs add nothing.
    const int peer = 1 - ctx.AxisRank(Axis::kRing);
    at::Tensor a = at::zeros({12}), b = at::zeros({12}), ra = at::empty({12}), rb = at::empty({12});
    ctx.SendRecv(Axis::kRing, {{a, peer}, {b, peer}}, {{ra, peer}, {rb, peer}}).Wait();
    EXPECT_EQ(ctx.counters().Get(Axis::kRing, CommOp::kSendRecv), (CommStat{1, 96}));
    // tp has size 1: calls counted, 0 bytes.
    ctx.AllGather(Axis::kTp, at::zeros({4}), 0);
    EXPECT_EQ(ctx.counters().Get(Axis::kTp, CommOp::kAllGather), (CommStat{1, 0}));
    ctx.Barrier(Axis::kWorld);
    EXPECT_EQ(ctx.counters().Get(Axis::kWorld, CommOp::kBarrier), (CommStat{1, 0}));
    EXPECT_EQ(ctx.counters().Total(Axis::kRing), (CommStat{3, (ctx.AxisRank(Axis::kRing) + 1) * 8 + 8 + 96}));
    ctx.counters().Reset();
    EXPECT_EQ(ctx.counters().Total(), (CommStat{0, 0}));
  });
}

// Ring all-reduce bytes round down: 2 (n-1) nbytes / n with n = 3 and 20 B gives 26.
TEST(Counters, AllReduceBytesRoundDown) {
  RunOnRanks(3, Shape(3, 1, 1), [](DistContext& ctx) {
    at::Tensor t = at::ones({5});
    ctx.AllReduce(Axis::kRing, t);
    EXPECT_EQ(ctx.counters().Get(Axis::kRing, CommOp::kAllReduce), (CommStat{1, 26}));
    EXPECT_TENSOR_EQ(t, at::full({5}, 3.0f));
  });
}

// A rank that exits early: its peers fail within the timeout with a message naming rank,
// axis, collective and group, instead of hanging.
TEST(Failure, PeerExitingEarlyFailsTheOthersWithANamedError) {
  MultiRankOptions o;
  o.dist.timeout = std::chrono::seconds(3);
  o.deadline = std::chrono::seconds(30);
  auto start = std::chrono::steady_clock::now();
  testing::MultiRankResult res = RunRanks(4, Shape(2, 2, 1), [](DistContext& ctx) {
    ctx.Barrier(Axis::kWorld);
    if (ctx.rank() == 3) std::_Exit(0);
    at::Tensor t = at::ones({1 << 10});
    ctx.AllToAll(Axis::kCp, t, 0, 0);
  }, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(res.ranks.size(), 4u);
  EXPECT_EQ(res.ranks[3].exit_code, 0) << res.Summary(true);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res.ranks[r].exit_code, 3) << res.Summary(true);
    const std::string want = "rank " + std::to_string(r) +
                             ": all_to_all on axis `cp` (group ranks 0,1,2,3) with input [1024] Float failed after";
    EXPECT_NE(res.ranks[r].output.find(want), std::string::npos) << res.ranks[r].output;
    EXPECT_NE(res.ranks[r].output.find("(timeout 3000 ms)"), std::string::npos) << res.ranks[r].output;
    EXPECT_NE(res.ranks[r].output.find("(a peer may have exited, stopped, or become unreachable)"), std::string::npos) << res.ranks[r].output;
  }
  EXPECT_LT(seconds, 3 + 8.0) << res.Summary(true);
}

// The ring neighbour exits mid-rotation: Wait() fails naming send_recv, the axis and the peer.
TEST(Failure, PeerExitingDuringRingRotationFailsWait) {
  MultiRankOptions o;
  o.dist.timeout = std::chrono::seconds(3);
  o.final_barrier = false;
  testing::MultiRankResult res = RunRanks(3, Shape(3, 1, 1), [](DistContext& ctx) {
    const int r = ctx.rank();
    at::Tensor held = at::full({64}, 1.0f * r);
    for (int step = 0; step < 2; ++step) {
      if (step == 1 && r == 2) std::_Exit(0);
      at::Tensor in = at::empty_like(held);
      ctx.SendRecv(Axis::kRing, {{held, (r + 1) % 3}}, {{in, (r + 2) % 3}}).Wait();
      held = in;
    }
  }, o);
  ASSERT_EQ(res.ranks.size(), 3u);
  // Rank 0 receives from rank 2 (gone): posting the recv fails when Gloo has already seen the
  // closed connection, else its Wait does. Either way the message names the call, the peer, and
  // that rank 2's process is gone.
  EXPECT_EQ(res.ranks[0].exit_code, 3) << res.Summary(true);
  const std::string& out = res.ranks[0].output;
  const std::string call = "rank 0: send_recv on axis `ring` (group ranks 0,1,2) failed ";
  EXPECT_TRUE(out.find(call + "in recv [64] Float from axis rank 2") != std::string::npos ||
              out.find(call + "posting recv [64] Float from axis rank 2") != std::string::npos)
      << out;
  EXPECT_NE(out.find("; rank 2 (pid "), std::string::npos) << out;
  EXPECT_NE(out.find(") is no longer running (a peer may have exited, stopped, or become unreachable)"), std::string::npos) << out;
}

// Half-precision payloads move bit-exactly (all_to_all, all_gather, send/recv are copies).
TEST(Collectives, HalfPrecisionPayloads) {
  RunOnRanks(2, Shape(1, 2, 1), [](DistContext& ctx) {
    const int r = ctx.rank();
    for (at::ScalarType dt : {at::kBFloat16, at::kHalf}) {
      at::Tensor x = (at::arange(8, at::kFloat).view({4, 2}) / 3 + r).to(dt);
      std::vector<at::Tensor> want;
      for (int j = 0; j < 2; ++j) want.push_back((at::arange(8, at::kFloat).view({4, 2}) / 3 + j).to(dt).narrow(0, 2 * r, 2));
      EXPECT_TENSOR_EQ(ctx.AllToAll(Axis::kUlysses, x, 0, 1), at::cat(want, 1));
      std::vector<at::Tensor> all;
      for (int j = 0; j < 2; ++j) all.push_back((at::arange(8, at::kFloat).view({4, 2}) / 3 + j).to(dt));
      EXPECT_TENSOR_EQ(ctx.AllGather(Axis::kUlysses, x, 0), at::cat(all, 0));
      at::Tensor in = at::empty_like(x);
      ctx.SendRecv(Axis::kUlysses, {{x, 1 - r}}, {{in, 1 - r}}).Wait();
      EXPECT_TENSOR_EQ(in, all[1 - r]);
    }
  });
}

// A peer that stays alive but never joins: the others time out after the configured limit.
TEST(Failure, SilentPeerTimesOut) {
  MultiRankOptions o;
  o.dist.timeout = std::chrono::milliseconds(1000);
  o.deadline = std::chrono::seconds(30);
  o.final_barrier = false;
  testing::MultiRankResult res = RunRanks(2, Shape(1, 2, 1), [](DistContext& ctx) {
    if (ctx.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      std::_Exit(0);
    }
    at::Tensor t = at::ones({4});
    ctx.AllReduce(Axis::kUlysses, t);
  }, o);
  ASSERT_EQ(res.ranks.size(), 2u);
  EXPECT_EQ(res.ranks[0].exit_code, 3) << res.Summary(true);
  const std::string& out = res.ranks[0].output;
  EXPECT_NE(out.find("rank 0: all_reduce on axis `ulysses` (group ranks 0,1) with tensor [4] Float failed after"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("(timeout 1000 ms)"), std::string::npos) << out;
}

// The harness itself: a failed assertion on one rank is reported for that rank with its output.
TEST(Harness, ReportsTheFailingRankAndItsOutput) {
  testing::MultiRankResult res = RunRanks(3, Shape(1, 3, 1), [](DistContext& ctx) {
    EXPECT_NE(ctx.rank(), 1) << "rank one complains";
  });
  ASSERT_EQ(res.ranks.size(), 3u);
  EXPECT_TRUE(res.ranks[0].ok());
  EXPECT_EQ(res.ranks[1].exit_code, 1);
  EXPECT_NE(res.ranks[1].output.find("rank one complains"), std::string::npos);
  EXPECT_NE(res.Summary().find("rank 1: exit 1 (gtest failure in the body)"), std::string::npos) << res.Summary();
  EXPECT_FALSE(res.ok());
}

}  // namespace
}  // namespace weft::dist

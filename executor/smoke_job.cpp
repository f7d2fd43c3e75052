#include "executor/smoke_job.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace weft::exec {
namespace {

using dist::Axis;
using dist::CommOp;

class Checker {
 public:
  Checker(dist::DistContext& ctx, SmokeResult& result) : ctx_(ctx), result_(result) {}

  void Equal(Axis axis, const char* what, const at::Tensor& got, const at::Tensor& want) {
    ++result_.checks;
    if (got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() && at::equal(got, want)) {
      return;
    }
    std::ostringstream os;
    os << "rank " << ctx_.rank() << ": " << what << " on axis `" << dist::AxisName(axis)
       << "`: got " << got.sizes() << " " << got.scalar_type() << ", want " << want.sizes() << " "
       << want.scalar_type();
    if (got.sizes() == want.sizes()) {
      os << "; max |diff| " << (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
    }
    result_.failures.push_back(os.str());
  }

  void EqualInt(Axis axis, const char* what, int64_t got, int64_t want) {
    ++result_.checks;
    if (got == want) return;
    result_.failures.push_back("rank " + std::to_string(ctx_.rank()) + ": " + what + " on axis `" +
                               dist::AxisName(axis) + "`: got " + std::to_string(got) + ", want " +
                               std::to_string(want));
  }

 private:
  dist::DistContext& ctx_;
  SmokeResult& result_;
};

// Input of all_to_all on axis rank `r`: (2n, 3) with a value unique to (rank, row, col).
at::Tensor AllToAllInput(int r, int n) {
  return at::arange(2 * n * 3, at::kFloat).view({2 * n, 3}) + 1000.0 * r;
}

void RunAxis(dist::DistContext& ctx, Axis axis, Checker& check) {
  const int n = ctx.AxisSize(axis);
  const int r = ctx.AxisRank(axis);
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);

  // all_reduce: sum of (rank + 1) and max of ranks.
  at::Tensor t = at::full({4}, r + 1.0, f32);
  ctx.AllReduce(axis, t);
  check.Equal(axis, "all_reduce(sum)", t, at::full({4}, n * (n + 1) / 2.0, f32));
  at::Tensor m = at::full({2, 2}, static_cast<double>(r), f32);
  ctx.AllReduce(axis, m, dist::ReduceKind::kMax);
  check.Equal(axis, "all_reduce(max)", m, at::full({2, 2}, n - 1.0, f32));

  // all_gather along dim 1 of (2, 3) blocks.
  auto block = [&](int j) { return at::arange(6, f32).view({2, 3}) + 100.0 * j; };
  std::vector<at::Tensor> want;
  for (int j = 0; j < n; ++j) want.push_back(block(j));
  check.Equal(axis, "all_gather", ctx.AllGather(axis, block(r), 1), at::cat(want, 1));

  // all_gather_sizes and the uneven all_gather: axis rank j holds j + 1 rows (rank 0 of a
  // group of 3+ also tries an empty shard below).
  std::vector<int64_t> sizes = ctx.AllGatherSizes(axis, 10 + r);
  for (int j = 0; j < n; ++j) check.EqualInt(axis, "all_gather_sizes", sizes[j], 10 + j);
  auto rows = [&](int j) { return at::full({j + 1, 2}, static_cast<double>(j), f32); };
  want.clear();
  for (int j = 0; j < n; ++j) want.push_back(rows(j));
  check.Equal(axis, "all_gather (uneven)", ctx.AllGatherUneven(axis, rows(r), 0), at::cat(want, 0));
  auto maybe_empty = [&](int j) { return at::full({2, j == 0 && n > 2 ? 0 : j, 3}, j + 0.5, f32); };
  want.clear();
  for (int j = 0; j < n; ++j) want.push_back(maybe_empty(j));
  check.Equal(axis, "all_gather (uneven, one empty shard)", ctx.AllGatherUneven(axis, maybe_empty(r), 1),
              at::cat(want, 1));

  // all_to_all: scatter dim 0, gather dim 1.
  want.clear();
  for (int j = 0; j < n; ++j) want.push_back(AllToAllInput(j, n).narrow(0, 2 * r, 2));
  check.Equal(axis, "all_to_all(scatter 0, gather 1)", ctx.AllToAll(axis, AllToAllInput(r, n), 0, 1),
              at::cat(want, 1));

  // all_to_all_single, even: 2 rows per peer.
  want.clear();
  for (int j = 0; j < n; ++j) want.push_back(AllToAllInput(j, n).narrow(0, 2 * r, 2));
  check.Equal(axis, "all_to_all_single (even)", ctx.AllToAllSingle(axis, AllToAllInput(r, n)),
              at::cat(want, 0));

  // all_to_all_single, uneven: rank i sends i + j + 1 rows of value 1000 i + j to rank j.
  std::vector<int64_t> in_splits, out_splits;
  std::vector<at::Tensor> in_parts;
  want.clear();
  for (int j = 0; j < n; ++j) {
    in_splits.push_back(r + j + 1);
    out_splits.push_back(j + r + 1);
    in_parts.push_back(at::full({r + j + 1, 2}, 1000.0 * r + j, f32));
    want.push_back(at::full({j + r + 1, 2}, 1000.0 * j + r, f32));
  }
  check.Equal(axis, "all_to_all_single (uneven)",
              ctx.AllToAllSingle(axis, at::cat(in_parts, 0), in_splits, out_splits), at::cat(want, 0));

  // Ring rotation with batched send/recv, overlapped with local work, n - 1 steps: after
  // step s a rank holds the block of axis rank r - s - 1.
  if (n > 1) {
    at::Tensor held = at::full({3, 4}, static_cast<double>(r), f32);
    for (int step = 0; step < n - 1; ++step) {
      at::Tensor incoming = at::empty_like(held);
      dist::P2PHandle h = ctx.SendRecv(axis, {{held, (r + 1) % n}}, {{incoming, (r - 1 + n) % n}});
      at::Tensor busy = at::mm(held, held.t());  // stands for attention on the current block
      (void)busy;
      h.Wait();
      held = incoming;
      check.Equal(axis, "send_recv (ring rotation)", held,
                  at::full({3, 4}, static_cast<double>(((r - step - 1) % n + n) % n), f32));
    }
  }
  ctx.Barrier(axis);
}

}  // namespace

SmokeResult RunSmokeJob(dist::DistContext& ctx) {
  SmokeResult result;
  Checker check(ctx, result);
  const auto start = std::chrono::steady_clock::now();
  const dist::CommCounters before = ctx.counters();
  for (Axis axis : dist::kAllAxes) RunAxis(ctx, axis, check);
  result.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  // Counters: the byte conventions of counters.h, recomputed by hand for this job (float32).
  for (Axis axis : dist::kAllAxes) {
    const int64_t n = ctx.AxisSize(axis);
    const int64_t r = ctx.AxisRank(axis);
    auto delta = [&](CommOp op) {
      return ctx.counters().Get(axis, op).bytes_sent - before.Get(axis, op).bytes_sent;
    };
    // all_reduce: 16 and 16 bytes, each 2 (n-1) bytes / n.
    check.EqualInt(axis, "all_reduce bytes", delta(CommOp::kAllReduce), 2 * (2 * (n - 1) * 16 / n));
    // all_gather: 24 bytes; uneven: 8 (r+1) bytes and 4 * 6 * cols bytes; each times (n - 1).
    const int64_t cols = (r == 0 && n > 2) ? 0 : r;
    check.EqualInt(axis, "all_gather bytes", delta(CommOp::kAllGather),
                   (24 + 8 * (r + 1) + 24 * cols) * (n - 1));
    // One explicit all_gather_sizes and one inside each uneven all_gather.
    check.EqualInt(axis, "all_gather_sizes bytes", delta(CommOp::kAllGatherSizes), 3 * 8 * (n - 1));
    // all_to_all: (2n x 3) floats twice, keeping 1/n; uneven: all rows but the r + r + 1 kept.
    int64_t uneven_rows = 0;
    for (int64_t j = 0; j < n; ++j) uneven_rows += (j == r) ? 0 : r + j + 1;
    check.EqualInt(axis, "all_to_all bytes", delta(CommOp::kAllToAll),
                   2 * (24 * n) * (n - 1) / n + uneven_rows * 8);
    check.EqualInt(axis, "send_recv bytes", delta(CommOp::kSendRecv), (n - 1) * 48);
  }
  return result;
}

int RunSmokeJobAndReport(dist::DistContext& ctx, double setup_ms, std::ostream& out) {
  SmokeResult result = RunSmokeJob(ctx);
  for (const std::string& f : result.failures) std::cerr << "smoke check failed: " << f << "\n";
  at::Tensor bad = at::full({1}, static_cast<double>(result.failures.size()), at::kDouble);
  ctx.AllReduce(Axis::kWorld, bad);
  const int total_bad = static_cast<int>(bad.item<double>());
  if (ctx.rank() == 0) {
    char line[256];
    std::snprintf(line, sizeof line, "weft-run smoke job: mesh %s on %d ranks (%d intra-op threads each)\n",
                  ctx.mesh().shape().ToString().c_str(), ctx.world_size(), at::get_num_threads());
    out << line;
    std::snprintf(line, sizeof line,
                  "  rendezvous + groups %.0f ms, collectives %.0f ms, %d exact checks on rank 0\n",
                  setup_ms, result.milliseconds, result.checks);
    out << line << "  rank 0 collectives (bytes sent, see runtime/dist/counters.h):\n"
        << ctx.counters().Report();
    if (total_bad == 0) {
      out << "smoke job passed on every rank\n";
    } else {
      out << "smoke job FAILED: " << total_bad << " failed checks over all ranks\n";
    }
    out.flush();
  }
  return total_bad == 0 ? 0 : 1;
}

}  // namespace weft::exec

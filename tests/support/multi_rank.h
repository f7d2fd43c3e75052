#pragma once

// Multi-rank test harness: run one test body on N ranks, each a forked process with its own
// DistContext (TCPStore on a free loopback port, Gloo groups per mesh axis), and get per-rank
// pass/fail with each failing rank's output.
//
//   #include "tests/support/multi_rank.h"
//   using weft::dist::Axis;
//   TEST(Ulysses, RoundTrip) {
//     weft::testing::RunOnRanks(4, {/*ring*/ 2, /*ulysses*/ 2}, [](weft::dist::DistContext& ctx) {
//       at::Tensor x = at::arange(8.0).view({2, 4}) + ctx.rank();
//       at::Tensor y = ctx.AllToAll(Axis::kUlysses, x, 1, 0);
//       EXPECT_EQ(y.size(0), 4);  // gtest assertions work inside the body
//     });
//   }
//
// How it works, and the rules that keep it robust:
// - The calling (parent) process forks `world_size` children; the parent itself never touches
//   torch. Do not run tensor ops in the test before RunOnRanks (a thread pool created in the
//   parent is not fork-safe); build inputs inside the body, e.g. from a seeded generator or
//   from ctx.rank(). A warning is printed when the parent already has threads.
// - Each child redirects stdout/stderr to a temp file, sets intra-op threads to
//   max(1, cores / world_size), creates the DistContext, runs the body, then (by default)
//   a world barrier so that no rank exits while a peer still needs it (skipped after the
//   body threw), and leaves with
//   _exit: 0 = passed; 1 = a gtest assertion failed inside the body; 2 = DistContext::Create
//   threw; 3 = the body threw (the exception is printed); 4 = the final barrier failed.
//   A body may end its rank on purpose with std::_Exit(code) (e.g. to test peer failure).
// - Children die with the parent (PR_SET_PDEATHSIG). The parent waits until every rank has
//   exited, or `deadline` passes, or `failure_grace` after the first failing rank, and
//   SIGKILLs what is left. ctest never hangs on a broken collective.
// - RunOnRanks records a gtest failure listing every rank's status and the output of the
//   failing ranks; RunRanks only returns the result, for tests that expect a failure.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "runtime/dist/dist_context.h"

namespace weft::testing {

struct MultiRankOptions {
  // Collective / rendezvous timeout inside each rank (short, so a broken peer fails fast).
  dist::DistOptions dist = [] {
    dist::DistOptions d;
    d.timeout = std::chrono::seconds(15);
    return d;
  }();
  // Hard limit for the whole run; ranks still alive then are SIGKILLed.
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};
  // After the first rank fails, the others get this long to notice and exit on their own.
  // Negative: dist.timeout + 2 s.
  std::chrono::milliseconds failure_grace{-1};
  // World barrier after the body (skipped on ranks whose body threw).
  bool final_barrier = true;
  // Intra-op threads per rank; 0 = max(1, cores / world_size).
  int threads_per_rank = 0;
  // When set, adjusts `dist` for one rank before its DistContext is created (ranks configured
  // differently, e.g. one with shared memory off).
  std::function<void(int rank, dist::DistOptions&)> per_rank_dist;
};

struct RankOutcome {
  int rank = 0;
  int exit_code = -1;      // exit status when the rank exited, else -1
  int signal = 0;          // signal that killed it, else 0
  bool killed_by_harness = false;  // SIGKILLed at the deadline / after failure_grace
  std::string output;      // everything the rank printed (stdout and stderr)
  bool ok() const { return exit_code == 0; }
  // "passed", "exit 1 (gtest failure)", "exit 3 (exception)", "killed by signal 9", ...
  std::string Status() const;
};

struct MultiRankResult {
  std::vector<RankOutcome> ranks;  // indexed by rank
  double seconds = 0;              // wall time of the run
  bool ok() const;
  // One line per rank with its status; then, for each failing rank (or every rank when
  // `all_output`), its output.
  std::string Summary(bool all_output = false) const;
};

using RankBody = std::function<void(dist::DistContext&)>;

// Runs `body` on `world_size` forked ranks over `mesh` (mesh.WorldSize() must equal
// world_size; checked in the parent). Never throws for rank failures; returns them.
MultiRankResult RunRanks(int world_size, const dist::MeshShape& mesh, const RankBody& body,
                         const MultiRankOptions& options = {});

// As RunRanks, and ADD_FAILURE()s with Summary() unless every rank passed.
MultiRankResult RunOnRanks(int world_size, const dist::MeshShape& mesh, const RankBody& body,
                           const MultiRankOptions& options = {});
// Shorthand: mesh ring=world_size (ring, cp and world are then one group), given timeout.
MultiRankResult RunOnRanks(int world_size, const RankBody& body,
                           std::chrono::milliseconds collective_timeout = std::chrono::seconds(15));

}  // namespace weft::testing

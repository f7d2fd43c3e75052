#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/dist/dist_context.h"

namespace weft::exec {

// Outcome of the distributed smoke job on one rank.
struct SmokeResult {
  int checks = 0;                     // exact comparisons made
  std::vector<std::string> failures;  // one sentence per failed comparison
  double milliseconds = 0;            // wall time of the collectives part
  bool ok() const { return failures.empty(); }
};

// The distributed smoke job: on every axis of the mesh (ring, ulysses, tp, cp, world; size 1
// included) runs each collective wrapper of DistContext -- all_reduce (sum, max), all_gather,
// all_gather_sizes, uneven all_gather, all_to_all (scatter one dim, gather another), even and
// uneven all_to_all_single, a ring rotation with batched send/recv overlapped with local work,
// and barrier -- on inputs built from the ranks, and compares every result exactly with the
// value computed locally. It also checks the byte counters against the conventions of
// runtime/dist/counters.h. Collective failures throw dist::DistError; wrong values are
// reported in the result. Every rank of the world must call it.
SmokeResult RunSmokeJob(dist::DistContext& ctx);

// RunSmokeJob, then every rank's failures are printed on that rank's stderr, the failure
// counts are summed over the world, and rank 0 prints a short report to `out`: mesh, ranks,
// threads, timings (`setup_ms` = rendezvous + group creation, measured by the caller), its
// calls and bytes per axis and op, and the verdict. Returns the exit status: 0 when every
// rank passed, else 1 (on every rank).
int RunSmokeJobAndReport(dist::DistContext& ctx, double setup_ms, std::ostream& out);

}  // namespace weft::exec

#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "runtime/dist/mesh.h"

namespace weft::dist {

// The collectives that DistContext counts.
enum class CommOp { kAllGather, kAllGatherSizes, kAllToAll, kAllReduce, kSendRecv, kBarrier };
inline constexpr int kNumCommOps = 6;
// "all_gather", "all_gather_sizes", "all_to_all", "all_reduce", "send_recv", "barrier".
const char* CommOpName(CommOp op);

// Calls and bytes SENT by this rank. Convention ("bytes sent", per rank, per call; n = the
// group size, nbytes = numel * element size), chosen to match the formulas of
// reference/peers-and-limits.md (c):
//   all_gather (even or uneven) : local_bytes * (n - 1)   (my shard goes to every peer)
//   all_gather_sizes            : 8 * (n - 1)             (one int64 per peer; the size
//                                                          exchange of uneven all_gather is
//                                                          counted here, not under all_gather)
//   all_to_all (any split)      : bytes of every chunk not kept locally
//                                 = input_bytes - bytes of my own chunk
//                                 (even: input_bytes * (n - 1) / n)
//   all_reduce                  : 2 * (n - 1) * nbytes / n, integer division (a ring
//                                 all-reduce: reduce-scatter + all-gather), whatever
//                                 algorithm the backend really runs
//   send_recv                   : sum of the bytes of the tensors sent (recvs add nothing);
//                                 one call per SendRecv batch
//   barrier                     : 0 bytes
// A group of size 1 counts the call and 0 bytes. Thus Ulysses (4 all-to-alls of a local
// B*S/U*d tensor) gives 4*B*S*d*b*(U-1)/U^2 and a ring all-gather of K and V gives
// 2*B*S*d*b*(R-1)/R, as in the reference.
struct CommStat {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
  bool operator==(const CommStat& o) const { return calls == o.calls && bytes_sent == o.bytes_sent; }
};

class CommCounters {
 public:
  const CommStat& Get(Axis axis, CommOp op) const {
    return stats_[static_cast<int>(axis)][static_cast<int>(op)];
  }
  // Sum over ops on one axis, and over every axis and op.
  CommStat Total(Axis axis) const;
  CommStat Total() const;
  // What was recorded after `earlier` (a copy taken before): these counters minus those.
  CommCounters Since(const CommCounters& earlier) const;
  // Adds one call and `bytes_sent` bytes.
  void Record(Axis axis, CommOp op, int64_t bytes_sent);
  void Reset() { stats_ = {}; }
  // A small table, one line per (axis, op) with calls > 0:
  //   "  ulysses   all_to_all          3 calls        1536 bytes"
  // followed by a total line. Empty counters give "  (no collectives)".
  std::string Report() const;

 private:
  std::array<std::array<CommStat, kNumCommOps>, kNumAxes> stats_{};
};

}  // namespace weft::dist

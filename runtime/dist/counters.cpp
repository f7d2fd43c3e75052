#include "runtime/dist/counters.h"

#include <cstdio>

namespace weft::dist {

const char* CommOpName(CommOp op) {
  switch (op) {
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kAllGatherSizes: return "all_gather_sizes";
    case CommOp::kAllToAll: return "all_to_all";
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kSendRecv: return "send_recv";
    case CommOp::kBarrier: return "barrier";
  }
  return "?";
}

void CommCounters::Record(Axis axis, CommOp op, int64_t bytes_sent) {
  CommStat& s = stats_[static_cast<int>(axis)][static_cast<int>(op)];
  s.calls += 1;
  s.bytes_sent += bytes_sent;
}

CommStat CommCounters::Total(Axis axis) const {
  CommStat t;
  for (const CommStat& s : stats_[static_cast<int>(axis)]) {
    t.calls += s.calls;
    t.bytes_sent += s.bytes_sent;
  }
  return t;
}

CommStat CommCounters::Total() const {
  CommStat t;
  for (Axis a : kAllAxes) {
    CommStat s = Total(a);
    t.calls += s.calls;
    t.bytes_sent += s.bytes_sent;
  }
  return t;
}

std::string CommCounters::Report() const {
  std::string out;
  char line[160];
  for (Axis a : kAllAxes) {
    for (int op = 0; op < kNumCommOps; ++op) {
      const CommStat& s = stats_[static_cast<int>(a)][op];
      if (s.calls == 0) continue;
      std::snprintf(line, sizeof line, "  %-8s %-17s %6lld calls %14lld bytes sent\n",
                    AxisName(a), CommOpName(static_cast<CommOp>(op)),
                    static_cast<long long>(s.calls), static_cast<long long>(s.bytes_sent));
      out += line;
    }
  }
  if (out.empty()) return "  (no collectives)\n";
  CommStat t = Total();
  std::snprintf(line, sizeof line, "  %-8s %-17s %6lld calls %14lld bytes sent\n", "total", "",
                static_cast<long long>(t.calls), static_cast<long long>(t.bytes_sent));
  out += line;
  return out;
}

CommCounters CommCounters::Since(const CommCounters& earlier) const {
  CommCounters diff;
  for (int a = 0; a < kNumAxes; ++a) {
    for (int op = 0; op < kNumCommOps; ++op) {
      diff.stats_[a][op].calls = stats_[a][op].calls - earlier.stats_[a][op].calls;
      diff.stats_[a][op].bytes_sent = stats_[a][op].bytes_sent - earlier.stats_[a][op].bytes_sent;
    }
  }
  return diff;
}

}  // namespace weft::dist

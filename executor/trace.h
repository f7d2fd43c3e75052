#pragma once

// Chrome trace events (chrome://tracing, Perfetto) of module calls on one rank: a hook on
// every module down to a depth records the wall time of each call; with AttachCollectives every
// collective (axis, op, wall time including the wait for peers) lands on a second track.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/dist_context.h"
#include "runtime/nn/module.h"

namespace weft::exec {

class Tracer {
 public:
  explicit Tracer(int rank) : rank_(rank), start_(std::chrono::steady_clock::now()) {}
  // Installs recording hooks on `model` and its descendants up to `max_depth` levels below
  // the root (0 = the root only).
  void Attach(nn::Module& model, int max_depth);
  // Records every collective `ctx` issues until Detach(ctx).
  void AttachCollectives(dist::DistContext& ctx);
  void DetachCollectives(dist::DistContext& ctx);
  // A call recorded by someone else (a program's module spans): begun at `start_us` (NowUs()).
  void AddCall(const std::string& name, const std::string& type, double start_us) {
    events_.push_back({name, type, start_us, NowUs() - start_us});
  }
  double NowUs() const;
  // Writes {"traceEvents": [...]} with one complete ("X") event per recorded call.
  void Write(const std::string& path) const;
  size_t events() const { return events_.size(); }

  struct Event {
    std::string name;
    std::string type;
    double start_us = 0;
    double duration_us = 0;
    int track = 0;  // 0 module calls, 1 collectives
  };

 private:
  friend class TraceHook;
  int rank_;
  std::chrono::steady_clock::time_point start_;
  std::vector<Event> events_;
};

}  // namespace weft::exec

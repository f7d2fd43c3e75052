#include "executor/trace.h"
#include "compiler/source/output_file.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace weft::exec {

// Records one event per call; calls nest, so the open calls form a stack.
class TraceHook : public nn::Hook {
 public:
  explicit TraceHook(Tracer& tracer) : tracer_(tracer) {}
  void PreForward(nn::Module&, nn::Args&) override { starts_.push_back(tracer_.NowUs()); }
  void PostForward(nn::Module& module, const nn::Args&, nn::Outputs&) override {
    const double start = starts_.back();
    starts_.pop_back();
    tracer_.events_.push_back({module.fqn().empty() ? "<root>" : module.fqn(), module.type(), start,
                               tracer_.NowUs() - start});
  }

 private:
  Tracer& tracer_;
  std::vector<double> starts_;
};

double Tracer::NowUs() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
}

void Tracer::Attach(nn::Module& model, int max_depth) {
  const size_t root_depth = model.fqn().empty() ? 0 : std::count(model.fqn().begin(), model.fqn().end(), '.') + 1;
  model.Walk([&](nn::Module& module) {
    const size_t depth =
        module.fqn().empty() ? 0 : std::count(module.fqn().begin(), module.fqn().end(), '.') + 1 - root_depth;
    if (static_cast<int>(depth) <= max_depth && module.type() != "ModuleList") {
      module.AddHook(std::make_shared<TraceHook>(*this));
    }
  });
}

void Tracer::AttachCollectives(dist::DistContext& ctx) {
  ctx.SetCollectiveObserver([this](dist::Axis axis, const char* op, std::chrono::steady_clock::time_point start,
                                   std::chrono::steady_clock::time_point end) {
    const double start_us = std::chrono::duration<double, std::micro>(start - start_).count();
    events_.push_back({std::string(dist::AxisName(axis)) + " " + op, "collective", start_us,
                       std::chrono::duration<double, std::micro>(end - start).count(), 1});
  });
}

void Tracer::DetachCollectives(dist::DistContext& ctx) { ctx.SetCollectiveObserver({}); }

void Tracer::Write(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : events_) {
    events.push_back({{"name", e.name}, {"cat", e.type}, {"ph", "X"}, {"ts", e.start_us}, {"dur", e.duration_us},
                      {"pid", rank_}, {"tid", e.track}});
  }
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0}, {"args", {{"name", "modules"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 1}, {"args", {{"name", "collectives"}}}});
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  source::WriteFileOrThrow(path, nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n");
}

}  // namespace weft::exec

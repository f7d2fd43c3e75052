#include "executor/plan_loader.h"


#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "compiler/compile.h"
#include "runtime/dist/launcher.h"

namespace weft::exec {
namespace {

std::string ExeDir() { return std::filesystem::path(dist::SelfExecutable("./weft-run")).parent_path().string(); }

}  // namespace

std::string DataDir() {
  if (const char* env = std::getenv("WEFT_DATA_DIR"); env != nullptr && *env != '\0') return env;
  if (std::filesystem::exists(std::string(WEFT_SOURCE_DIR) + "/plans")) return WEFT_SOURCE_DIR;
  return ExeDir() + "/../share/weft";
}

LoadedPlan LoadPlan(const PlanRequest& request) {
  LoadedPlan loaded;
  if (!request.compiled_file.empty()) {
    plan::PlanReadResult read = plan::ReadPlanFile(request.compiled_file);
    if (!read.plan) {
      std::string message = "cannot use compiled plan `" + request.compiled_file + "`:";
      for (const plan::PlanError& e : read.errors) message += "\n  " + plan::FormatPlanError(request.compiled_file, e);
      throw std::runtime_error(message);
    }
    loaded.plan = std::move(*read.plan);
    loaded.hash = plan::PlanContentHash(loaded.plan);
    return loaded;
  }
  model::GraphReadResult graph;
  if (!request.graph) throw std::logic_error("LoadPlan: a plan to compile needs the program's graph view");
  for (const std::string& problem : model::CheckGraph(*request.graph)) {
    graph.errors.push_back(model::GraphError{"", problem});
  }
  if (graph.errors.empty()) graph.graph = *request.graph;
  if (!graph.graph) {
    const std::string name = "<graph " + request.graph->name + ", the program's view>";
    std::string message = "cannot use graph `" + name + "`:";
    for (const model::GraphError& e : graph.errors) message += "\n  " + model::FormatGraphError(name, e);
    throw std::runtime_error(message);
  }
  const model::Workload* workload = request.workload.empty() ? (graph.graph->workloads.empty() ? nullptr : &graph.graph->workloads[0])
                                                             : graph.graph->FindWorkload(request.workload);
  if (workload == nullptr) {
    std::string names;
    for (const model::Workload& w : graph.graph->workloads) names += (names.empty() ? "`" : ", `") + w.name + "`";
    throw std::runtime_error("graph `" + graph.graph->name + "` has no workload `" + request.workload + "`; it has " + names);
  }
  loaded.graph_workload = *workload;

  source::SourceManager sources;
  std::ostringstream rendered;
  diag::TextRenderer renderer(rendered);
  diag::ErrorTrackingConsumer tracker(renderer);
  diag::Emitter diags(sources, tracker, 20);
  std::string error;
  auto buffer = source::SourceBuffer::FromFile(request.plan_file, &error);
  if (!buffer) throw std::runtime_error(error);
  const source::SourceBuffer& src = sources.Get(sources.Add(std::move(*buffer)));
  std::optional<syntax::PlanAst> ast = syntax::ParsePlan(src, diags);
  std::optional<plan::ExecutionPlan> compiled;
  if (ast && !ast->has_error && !tracker.seen_error()) {
    bind::BindOptions options;
    options.mesh = request.mesh;
    options.world_size = request.mesh.world_size;
    options.workload = workload->name;
    options.plan_file = request.plan_file;
    options.activation_bytes = request.activation_bytes;
    options.branches = request.branches;
    options.checked_by_dataflow = true;  // a program's dataflow checks every gather and colwise chain
    compiled = CompileAst(*ast, *graph.graph, options, diags);
  }
  tracker.Flush();
  if (!compiled || tracker.seen_error()) {
    throw std::runtime_error("plan `" + request.plan_file + "` does not compile for graph " + graph.graph->name +
                             ", mesh " + request.mesh.ToString() + ", workload " + workload->name + ":\n" + rendered.str());
  }
  loaded.plan = std::move(*compiled);
  loaded.hash = plan::PlanContentHash(loaded.plan);
  return loaded;
}

}  // namespace weft::exec

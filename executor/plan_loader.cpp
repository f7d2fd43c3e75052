#include "executor/plan_loader.h"


#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "compiler/compile.h"
#include "executor/plan_check.h"
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

std::string GraphFileFor(const models::ModelSpec& spec, const std::string& data_dir) {
  const std::string path = data_dir + "/graphs/" + models::PublishedName(spec) + ".graph.json";
  return std::filesystem::exists(path) ? path : "";
}

std::string PlanFileFor(const models::ModelSpec& spec, const std::string& data_dir) {
  return data_dir + "/plans/" + spec.family + ".weft";
}

models::Workload WorkloadFromGraph(const std::string& family, const model::Workload& workload) {
  models::Workload w;
  const int64_t height = workload.IntParam("height").value_or(0);
  const int64_t width = workload.IntParam("width").value_or(0);
  const int64_t frames = workload.IntParam("frames").value_or(0);
  w.text = workload.IntParam("text_len").value_or(0);
  if (family == "flux") {  // 8x VAE, 2x2 packing: one token per 16x16 pixels
    w.height = height / 16;
    w.width = width / 16;
  } else if (family == "wan") {  // 8x spatial, 4x temporal VAE; the model patchifies 2x2
    w.height = height / 8;
    w.width = width / 8;
    w.frames = frames > 0 ? (frames - 1) / 4 + 1 : 0;
  }
  return w;
}

model::Workload GraphWorkloadFor(const std::string& family, const models::Workload& sizes) {
  model::Workload w;
  auto param = [&](const char* key, int64_t value) { w.params.emplace_back(key, std::to_string(value)); };
  if (family == "flux") {
    const int64_t height = sizes.height * 16, width = sizes.width * 16;
    w.name = std::to_string(width) + "x" + std::to_string(height);
    param("height", height);
    param("width", width);
  } else {
    const int64_t height = sizes.height * 8, width = sizes.width * 8, frames = (sizes.frames - 1) * 4 + 1;
    w.name = std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(frames);
    param("width", width);
    param("height", height);
    param("frames", frames);
  }
  param("text_len", sizes.text);
  return w;
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
    if (!request.model_graph_hash.empty() && !loaded.plan.graph_hash.empty() &&
        loaded.plan.graph_hash != request.model_graph_hash) {
      throw std::runtime_error("compiled plan `" + request.compiled_file + "`: the plan was compiled against graph " +
                               loaded.plan.graph_hash + " but the model's graph is " + request.model_graph_hash +
                               " (recompile the plan for this model and config)");
    }
    if (request.model) CheckPlanAgainstModel(loaded.plan, *request.model, "compiled plan `" + request.compiled_file + "`");
    return loaded;
  }
  model::GraphReadResult graph;
  if (request.graph) {
    for (const std::string& problem : model::CheckGraph(*request.graph)) {
      graph.errors.push_back(model::GraphError{"", problem});
    }
    if (graph.errors.empty()) graph.graph = *request.graph;
  } else {
    graph = model::ReadGraphFile(request.graph_file);
  }
  if (!graph.graph) {
    const std::string name = request.graph ? "<graph " + request.graph->name + ", traced from the model>" : request.graph_file;
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
    options.gathers_checked_by_dataflow = request.program_view;
    compiled = CompileAst(*ast, *graph.graph, options, diags);
  }
  tracker.Flush();
  if (!compiled || tracker.seen_error()) {
    throw std::runtime_error("plan `" + request.plan_file + "` does not compile for graph " + graph.graph->name +
                             ", mesh " + request.mesh.ToString() + ", workload " + workload->name + ":\n" + rendered.str());
  }
  loaded.plan = std::move(*compiled);
  loaded.hash = plan::PlanContentHash(loaded.plan);
  if (request.model) {
    const std::string graph_name = request.graph ? "the graph traced from " + request.model->ToString()
                                                 : "graph `" + request.graph_file + "`";
    CheckPlanAgainstModel(loaded.plan, *request.model, "plan `" + request.plan_file + "` compiled against " + graph_name);
  }
  return loaded;
}

}  // namespace weft::exec

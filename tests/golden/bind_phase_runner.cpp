// Golden runner of the bind phase (testdata/bind/): binds and lowers the case's plan against a
// committed graph, mesh and workload given as directives, and renders
//   stderr   the diagnostics (text renderer, sorted)
//   plan     plan::DumpPlan of the ExecutionPlan ("" when there is none)
// Directives: `# GRAPH: flux1-dev` (graphs/<name>.graph.json) or `# GRAPH-FILE: huge` (a
// synthetic graph, tests/golden/graphs/<name>.graph.json), `# MESH: ring=2,ulysses=2` (split
// here without the driver's checks, so the binder's own mesh checks are reachable),
// `# WORKLOAD: 1024x1024`, and optionally `# ARGS:` with --ulysses-anything, --ring-anything,
// --rotate=p2p, --attention-kernel=K, --world-size=N, --max-errors=N.
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "compiler/compile.h"
#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

std::map<std::string, std::string> RunBindPhase(const std::string& path, const Expected& expected) {
  std::map<std::string, std::string> out;
  const std::string name = std::filesystem::path(path).filename().string();
  source::SourceManager sources;
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer(name, ReadFile(path))));
  std::ostringstream text;
  diag::TextRenderer renderer(text);
  diag::SortingConsumer sorted(renderer);
  uint32_t max_errors = 50;
  bind::BindOptions options;
  options.plan_file = name;
  options.workload = Directive(expected, "WORKLOAD");
  std::stringstream mesh(Directive(expected, "MESH"));
  std::string item;
  while (std::getline(mesh, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    options.mesh.axes.push_back({item.substr(0, eq), std::stoll(item.substr(eq + 1))});
  }
  std::stringstream args(Directive(expected, "ARGS"));
  while (args >> item) {
    if (item == "--ulysses-anything") options.mesh.ulysses_anything = true;
    if (item == "--ring-anything") options.mesh.ring_anything = true;
    if (item == "--rotate=p2p") options.mesh.rotate_method = plan::RotateMethod::kP2p;
    if (item.rfind("--attention-kernel=", 0) == 0) options.attention_kernel = item.substr(19);
    if (item.rfind("--world-size=", 0) == 0) options.world_size = std::stoll(item.substr(13));
    if (item.rfind("--max-errors=", 0) == 0) max_errors = static_cast<uint32_t>(std::stoul(item.substr(13)));
  }
  diag::Emitter diags(sources, sorted, max_errors);
  std::optional<syntax::PlanAst> ast = syntax::ParsePlan(src, diags);
  const std::string graph_file = Directive(expected, "GRAPH-FILE");
  const std::string graph_path =
      graph_file.empty() ? std::string(WEFT_PLANS_DIR) + "/../graphs/" + Directive(expected, "GRAPH") + ".graph.json"
                         : std::string(WEFT_GOLDEN_DIR) + "/../graphs/" + graph_file + ".graph.json";
  model::GraphReadResult graph = model::ReadGraphFile(graph_path);
  std::optional<plan::ExecutionPlan> plan;
  if (!graph.graph) {
    text << "golden: cannot read " << graph_path << " (set # GRAPH:)\n";
  } else if (graph.graph->FindWorkload(options.workload) == nullptr) {
    text << "golden: graph has no workload `" << options.workload << "` (set # WORKLOAD:)\n";
  } else if (ast && !ast->has_error) {
    plan = CompileAst(*ast, *graph.graph, options, diags);
  }
  sorted.Flush();
  out["stderr"] = text.str();
  out["plan"] = plan ? plan::DumpPlan(*plan) : "";
  return out;
}

const bool kBindRunner = RegisterPhaseRunner("bind", &RunBindPhase);

}  // namespace
}  // namespace weft::golden

#include "executor/plan_check.h"

#include <stdexcept>

#include "compiler/compile.h"
#include "compiler/rederive.h"
#include "executor/graph_dump.h"

namespace weft::exec {

void CheckPlanAgainstModel(const plan::ExecutionPlan& plan, const models::ModelSpec& spec, const std::string& what) {
  if (plan.model_class != models::DiffusersConfigOf(*models::CreateModel(spec)).first) return;
  model::Workload workload;
  workload.name = plan.workload.name;
  workload.params = plan.workload.params;
  model::ModelGraph graph;
  try {
    graph = TraceModelGraphAt(spec, workload);
  } catch (const std::exception& e) {
    throw std::runtime_error(what + ": cannot trace " + spec.ToString() + " at the plan's workload `" + workload.name +
                             "`: " + e.what());
  }
  std::vector<std::string> problems = model::CheckGraph(graph);
  if (!problems.empty()) {
    std::string message = "the graph traced from " + spec.ToString() + " is inconsistent:";
    for (const std::string& p : problems) message += "\n  " + p;
    throw std::runtime_error(message);
  }
  const std::string context = what + " does not hold for " + spec.ToString() + " (re-derived from the model traced at workload `" +
                              workload.name + "`, mesh " + plan.mesh.ToString() + ")";

  // The plan's steps as rules, bound and lowered again against the model's own trace.
  const plan::ExecutionPlan derived = CompileRules(plan, graph, "<" + what + ", as rules>", context, /*program_view=*/false);
  const std::vector<std::string> differences = StepDifferences(plan, derived);
  if (differences.empty()) return;
  throw std::runtime_error(ListDifferences(context, differences) + "\n  (the plan was edited after it was compiled, or compiled against a graph that does not describe this model; "
                           "recompile it)");
}

}  // namespace weft::exec

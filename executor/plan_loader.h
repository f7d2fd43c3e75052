#pragma once

// Where weft-run gets its ExecutionPlan: a plan (.weft or .json) compiled here against the
// program's graph view for the job's mesh, or an already compiled plan (weft.plan/1 JSON). Every
// rank does this itself, then checks that all ranks hold the same content hash
// (executor/plan_on_ranks.h); a compiled plan is derived again from the program before it runs
// (executor/program_job.cpp).

#include <optional>
#include <string>

#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"

namespace weft::exec {

struct PlanRequest {
  std::string plan_file;      // .weft / .json plan to compile against `graph`
  std::string compiled_file;  // or: a compiled weft.plan/1 file
  std::optional<model::ModelGraph> graph;  // the program's graph view (compiler/program/graph_view.h)
  std::string workload;       // graph workload to compile for ("" = the graph's first)
  plan::Mesh mesh;            // axes + flags
  int64_t activation_bytes = 2;  // element size of the run's activations (cost model)
  int64_t branches = 0;          // guidance branches given as calls of their own (--inputs files)
};

struct LoadedPlan {
  plan::ExecutionPlan plan;
  std::string hash;                 // content hash ("sha256:...")
  model::Workload graph_workload;   // the workload the plan was compiled for (params)
};

// Compiles or reads the plan. On a problem, throws std::runtime_error whose message holds the
// rendered diagnostics (file:line:col: error: ... with the source line and caret), so a bad
// plan reads the same from weft-run as from `weft check`. An in-memory `graph` must pass
// model::CheckGraph first.
LoadedPlan LoadPlan(const PlanRequest& request);

// The directory weft-run finds plans/ and graphs/ in: $WEFT_DATA_DIR, else the source tree
// it was built from, else <exe>/../share/weft.
std::string DataDir();

}  // namespace weft::exec

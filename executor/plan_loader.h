#pragma once

// Where weft-run gets its ExecutionPlan: a plan (.weft or .json) compiled here against the
// model's graph for the job's mesh, or an already compiled plan (weft.plan/1 JSON). Every rank
// does this itself; Install then checks that all ranks hold the same content hash.

#include <optional>
#include <string>

#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"
#include "runtime/models/registry.h"

namespace weft::exec {

struct PlanRequest {
  std::string plan_file;      // .weft / .json plan to compile (with `graph_file`)
  std::string compiled_file;  // or: a compiled weft.plan/1 file
  std::string graph_file;     // the model's weft.graph/1 file
  std::optional<model::ModelGraph> graph;  // or: the graph itself (traced from the model)
  bool program_view = false;  // `graph` is a program's view (its dataflow checks gathers)
  std::string workload;       // graph workload to compile for ("" = the graph's first)
  plan::Mesh mesh;            // axes + flags
  int64_t activation_bytes = 2;  // element size of the run's activations (cost model)
  // The model the plan will run on. When set, the plan (compiled here or read) must be what the
  // compiler gives for this model traced at the plan's workload (CheckPlanAgainstModel,
  // executor/plan_check.h): an edited compiled plan, or a graph file whose traces are not the
  // model's, is refused before anything runs.
  std::optional<models::ModelSpec> model;
  // ModelGraphHash of `model` when known: a compiled plan whose graph hash differs is refused
  // first, with the shorter message (compiled for another config of the class).
  std::string model_graph_hash;
};

struct LoadedPlan {
  plan::ExecutionPlan plan;
  std::string hash;                 // content hash ("sha256:...")
  model::Workload graph_workload;   // the workload the plan was compiled for (params)
};

// Compiles or reads the plan. On a problem, throws std::runtime_error whose message holds the
// rendered diagnostics (file:line:col: error: ... with the source line and caret), so a bad
// plan reads the same from weft-run as from `weft check`. An in-memory `graph` must pass
// model::CheckGraph first, as a graph file must pass the reader's checks.
LoadedPlan LoadPlan(const PlanRequest& request);

// The directory weft-run finds plans/ and graphs/ in: $WEFT_DATA_DIR, else the source tree
// it was built from, else <exe>/../share/weft.
std::string DataDir();

// The graph file of a built-in model in `data_dir`/graphs, e.g. flux:tiny -> flux-tiny,
// flux:dev -> flux1-dev, wan:14b -> wan2.1-t2v-14b. Empty when there is none.
std::string GraphFileFor(const models::ModelSpec& spec, const std::string& data_dir);

// The default plan of a model class: plans/<family>.weft in `data_dir`.
std::string PlanFileFor(const models::ModelSpec& spec, const std::string& data_dir);

// Example-input sizes (latent units) from a graph workload's params (pixels, frames,
// text_len), for the model family.
models::Workload WorkloadFromGraph(const std::string& family, const model::Workload& workload);

// The inverse: the graph workload (named like the committed ones: 1024x1024, 832x480x81) whose
// params give `sizes` (latent units) back through WorkloadFromGraph.
model::Workload GraphWorkloadFor(const std::string& family, const models::Workload& sizes);

}  // namespace weft::exec

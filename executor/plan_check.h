#pragma once

// The executor does not trust an ExecutionPlan: a compiled plan is a JSON file anyone can edit
// (and re-hash), and a plan compiled here is only as right as the graph file it was compiled
// against. Before a plan is installed, CheckPlanAgainstModel re-derives it from the model weft
// actually runs and refuses any difference.
//
// How: the model is traced on the meta device at the plan's workload (the same trace as
// `weft-run --dump-graph`, so shapes are the model's, not a file's); the plan's steps are
// written back as plan rules (a split/gather rule per step, the plan's explicit attention
// modes, its tensor-parallel styles and block sizes; attention the compiler derived is left to
// be derived again); those rules are bound and lowered by the compiler against that trace for
// the plan's mesh, so every check of design.md 5.2 runs again (attention sites with split K/V
// must run context-parallel, heads must divide, a split output must be gathered, ...); and the
// result must equal the plan step for step, size for size (origins and the cost section aside).

#include <string>

#include "compiler/plan/execution_plan.h"
#include "runtime/models/registry.h"

namespace weft::exec {

// Throws std::runtime_error when `plan` is not what the compiler gives for `spec`'s model at the
// plan's workload and mesh. `what` names the plan in the message ("compiled plan `p.json`",
// "plan `plans/flux.weft` compiled against graph `g.graph.json`"). Returns quietly for a plan of
// another model class (Install refuses it with its own message).
void CheckPlanAgainstModel(const plan::ExecutionPlan& plan, const models::ModelSpec& spec, const std::string& what);

}  // namespace weft::exec

#pragma once

// The runner does not trust an ExecutionPlan it is handed: a compiled plan is a JSON file anyone
// can edit and re-hash (the content hash only catches careless edits). Before a plan runs, it is
// derived again from what weft actually runs and any difference is refused, named.
//
// How: the plan's steps are written back as plan rules (PlanAsRules: a split/gather rule per
// step, its explicit attention modes, its tensor-parallel styles and block sizes; attention the
// compiler derived is left to be derived again), bound and lowered by the compiler for the plan's
// mesh, so every check runs again, and lowered into the program. The result must
// equal the plan step for step and size for size, and -- what the interpreter actually applies --
// edit for edit (origins and the cost section aside). Torch-free: weft-run calls it, and so can
// any tool that is handed a plan.

#include <string>
#include <vector>

#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft {

// The plan's steps as plan rules (the DSL) for `CompileRules`.
std::string PlanAsRules(const plan::ExecutionPlan& plan);

// The plan's steps as rules (`name` labels them in messages), compiled against `graph` (a
// program's graph view: its dataflow checks the gathers) at the plan's workload and mesh. Throws
// std::runtime_error carrying the compiler's diagnostics when they do not compile; `context`
// starts that message.
plan::ExecutionPlan CompileRules(const plan::ExecutionPlan& plan, const model::ModelGraph& graph, const std::string& name,
                                 const std::string& context);

// The differences between `given` and `derived`, one line each: per module, its splits, gathers,
// attention and tensor-parallel step (every field the executor acts on) and calls per forward.
std::vector<std::string> StepDifferences(const plan::ExecutionPlan& given, const plan::ExecutionPlan& derived);

// The differences between two programs' edits, as a multiset: edits the plan has that the
// compiler does not give, and edits the compiler gives that the plan lacks (every field but
// origins, messages' module names and the attention's traced lengths).
std::vector<std::string> EditDifferences(const plan::ProgramEdits& given, const plan::ProgramEdits& derived);

// "<context>: N difference(s) from what the compiler gives" and the first 8 of them, a line each.
std::string ListDifferences(const std::string& context, const std::vector<std::string>& differences);

// Throws std::runtime_error naming every difference (up to 8) when `plan` is not what the compiler
// gives for program `p` (read from `program_file`) at the plan's workload and mesh. `run` is the
// workload of the job's own inputs (named "run"), used when the plan was compiled for it and the
// program's manifest does not have the plan's workload. `what` names the plan ("compiled plan
// `p.json`").
void CheckPlanAgainstProgram(const plan::ExecutionPlan& plan, const program::Program& p, const std::string& program_file,
                             const program::ManifestWorkload& run, const std::string& what);

}  // namespace weft

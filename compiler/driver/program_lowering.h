#pragma once

// A compiled plan lowered into the program its graph is the view of (`weft check --program`,
// `weft compile --program`): every edit decided (compiler/program/lowering.h), the cost matched
// to the edits, and the edits applied to a copy, as weft-run will. A refusal is reported as the
// diagnostic kind of its check, at the plan rule it comes from, with the program node in a note.

#include "compiler/diag/emitter.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/plan/execution_plan.h"

namespace weft::driver {

// Sets `plan.program` to the edits of `plan` on the program of combination `c`; false (and a
// diagnostic in `diags`) when the plan does not lower.
bool LowerIntoProgram(const Inputs& in, const Combination& c, plan::ExecutionPlan& plan, diag::Emitter& diags);

}  // namespace weft::driver

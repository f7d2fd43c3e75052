#pragma once

// A compiled plan lowered into the program its graph is the view of (`weft check --program`,
// `weft compile --program`): every edit decided (compiler/program/lowering.h), the cost matched
// to the edits, and the edits applied to a copy, as weft-run will. A refusal is reported as the
// diagnostic kind of its check, at the plan rule it comes from, with the program node in a note.

#include "compiler/diag/emitter.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/plan/execution_plan.h"
#include "compiler/program/plan_edit_error.h"
#include "compiler/source/source_buffer.h"

namespace weft::driver {

// Sets `plan.program` to the edits of `plan` on the program of combination `c`; false (and a
// diagnostic in `diags`) when the plan does not lower.
bool LowerIntoProgram(const Inputs& in, const Combination& c, plan::ExecutionPlan& plan, diag::Emitter& diags);

// A refusal of the lowering as a diagnostic: the kind of its check (ProgramLacksPlanValue,
// SplitDimReduced, TpShardedDimReduced, ...), at the plan rule it comes from (to the end of that
// rule's line; no location when the rule is not in `plan`), with the program node and its module
// in a note.
void ReportPlanEditError(const program::PlanEditError& e, const source::SourceBuffer& plan, diag::Emitter& diags);

}  // namespace weft::driver

#pragma once

// The lowering phase: BoundPlan + ModelGraph -> ExecutionPlan. Merges the bound rules per
// module into concrete steps (module order), resolves attention modes and TP shard layouts to
// numbers, and fills the cost section with compiler/plan/cost.h.

#include <optional>

#include "compiler/bind/bound_plan.h"
#include "compiler/diag/emitter.h"
#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"

namespace weft::lower {

// `graph` must be the graph `bound` was bound against. Every check of the plan runs in the
// binder; the lowering reports only CostOverflow (at the plan header): a byte or call count
// of the cost section that does not fit int64 (sizes are computed saturating, never wrapped),
// and then returns std::nullopt.
std::optional<plan::ExecutionPlan> Lower(const bind::BoundPlan& bound, const model::ModelGraph& graph,
                                         diag::Emitter& diags);

}  // namespace weft::lower

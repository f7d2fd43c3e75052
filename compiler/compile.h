#pragma once

// weft::compiler: the plan compiler behind one header. The pipeline is
// Parse -> PlanAst -> Bind -> BoundPlan -> Lower -> ExecutionPlan; each phase is declared
// in its layer's public header and joined here.

#include "compiler/source/version.h"

// Parse phase (compiler/syntax): SourceBuffer -> PlanAst from the DSL or the JSON form, and
// the canonical printers. Diagnostics: compiler/diag (emitter, consumers, renderers).
#include "compiler/diag/consumer.h"
#include "compiler/diag/emitter.h"
#include "compiler/source/source_buffer.h"
#include "compiler/syntax/format.h"
#include "compiler/syntax/parse.h"
#include "compiler/syntax/plan_ast.h"

// Bind and lower phases (compiler/bind, compiler/lower): PlanAst + ModelGraph + mesh +
// workload -> BoundPlan -> ExecutionPlan; the graph and plan formats (compiler/model,
// compiler/plan) and the cost model (compiler/plan/cost.h).
#include <optional>

#include "compiler/bind/bind.h"
#include "compiler/lower/lower.h"
#include "compiler/model/graph_json.h"
#include "compiler/plan/cost.h"
#include "compiler/plan/plan_json.h"

namespace weft {

// Bind then Lower: the ExecutionPlan of `ast` for one graph, mesh and workload, or nullopt
// when a diagnostic was reported. `ast` must have no parse errors.
std::optional<plan::ExecutionPlan> CompileAst(const syntax::PlanAst& ast, const model::ModelGraph& graph,
                                              const bind::BindOptions& options, diag::Emitter& diags);

}  // namespace weft

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

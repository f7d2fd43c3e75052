#pragma once

// The parse phase: SourceBuffer -> PlanAst, from either surface form. These are the only
// entry points of compiler/syntax besides the printers in format.h; ANTLR stays private.

#include <optional>

#include "compiler/diag/emitter.h"
#include "compiler/source/source_buffer.h"
#include "compiler/syntax/plan_ast.h"

namespace weft::syntax {

// Parses a plan written in the DSL (grammar/WeftPlan.g4). `src` must belong to the
// SourceManager the emitter resolves through. Syntax errors are reported through `diags`
// and the parser recovers, so independent mistakes are all reported (up to the emitter's
// error limit). Returns the AST, with `has_error` on the nodes that failed; std::nullopt
// only when not even the `plan <name> for <Model>` header could be read.
std::optional<PlanAst> ParseDsl(const source::SourceBuffer& src, diag::Emitter& diags);

// Reads a plan in its JSON form (grammar/plan.schema.json) into the same AST. Unknown
// fields, wrong types and missing fields are diagnosed; every JSON value the reader visits
// is annotated on `src` with its JSON pointer, so diagnostics (also later phases') name
// it. Returns std::nullopt when the text is not JSON or has no usable header.
std::optional<PlanAst> ReadJsonPlan(const source::SourceBuffer& src, diag::Emitter& diags);

// ReadJsonPlan for files ending in `.json`, ParseDsl otherwise.
std::optional<PlanAst> ParsePlan(const source::SourceBuffer& src, diag::Emitter& diags);

}  // namespace weft::syntax

#pragma once

// Printers of a PlanAst: canonical DSL, canonical JSON, and a debug dump for golden tests.

#include <string>

#include "compiler/syntax/plan_ast.h"

namespace weft::syntax {

// The canonical DSL text of `plan` (what `weft fmt` writes): header, then the
// context_parallel section, then the tensor_parallel section; two-space indentation; one
// rule per line; a split or gather with one item (and no comments on it) inline, otherwise
// in braces with the fields aligned; comments kept. Parsing the result gives an AST with
// the same Dump(), and printing that again gives the same text (a fixed point).
// Nodes with has_error are printed as well as they can be; callers normally refuse to
// format a plan with errors.
std::string PrintDsl(const PlanAst& plan);

// The canonical JSON form (grammar/plan.schema.json), comments included, two-space
// indentation, objects holding only scalars on one line. ReadJsonPlan of the result gives
// an AST with the same Dump() (without locations) as `plan`.
std::string PrintJson(const PlanAst& plan);

struct DumpOptions {
  // Append `@line:col` to each node (golden `ast` sections); off to compare ASTs read from
  // different surface forms.
  bool locations = true;
};

// A canonical, line-per-node text of the AST (comments omitted), for golden files and
// `weft dump --phase=parse`. Nodes with has_error are marked `<error>`.
std::string Dump(const PlanAst& plan, const DumpOptions& options = {});

}  // namespace weft::syntax

#pragma once

// Internal to compiler/syntax: checks on a freshly read PlanAst that do not depend on the
// surface form (both readers call it last), plus diagnostics both readers share.

#include <string>

#include "compiler/diag/emitter.h"
#include "compiler/syntax/plan_ast.h"

namespace weft::syntax {

WEFT_DIAGNOSTIC(DuplicateSection, Error, "second `{0}` section; a plan has at most one",
                std::string);
WEFT_DIAGNOSTIC(PreviousSection, Note, "first `{0}` section is here", std::string);
WEFT_DIAGNOSTIC(DuplicateField, Error, "`{0}` is given twice", std::string);
WEFT_DIAGNOSTIC(PreviousField, Note, "first `{0}` is here", std::string);
WEFT_DIAGNOSTIC(MissingDim, Error, "{0} has no `dim`; say which tensor dim to {1}",
                std::string, std::string);
WEFT_DIAGNOSTIC(IntegerTooLarge, Error, "integer `{0}` is too large; the largest is {1}",
                std::string, int64_t);
WEFT_DIAGNOSTIC(UnknownAttentionMode, Error, "unknown attention mode `{0}`{1}", std::string,
                std::string);
WEFT_DIAGNOSTIC(UnknownStyle, Error, "unknown tensor-parallel style `{0}`{1}", std::string,
                std::string);

// The largest integer literal a plan may hold.
inline constexpr int64_t kMaxInteger = 2147483647;

// Checks, on nodes without has_error: gathers address outputs and are not `optional`;
// `optional` comes with a `rank`; split/gather rules list at least one tensor; `packed`
// lists at least one block and is not used with `replicate`. Marks failing nodes (and the
// plan) has_error.
void CheckStructure(PlanAst& plan, diag::Emitter& diags);

// Display of a target for messages: "`hidden_states`", "`rotary_emb[0]`", "`output 0`".
std::string DescribeTarget(const Target& target);

}  // namespace weft::syntax

#include "compiler/syntax/structure_check.h"

namespace weft::syntax {
namespace {

WEFT_DIAGNOSTIC(GatherNeedsOutput, Error,
                "gather of argument {0}; a gather collects forward outputs, as in `output 0`",
                std::string);
WEFT_DIAGNOSTIC(OptionalOnGather, Error,
                "`optional` on a gather; only splits can be skipped when the rank differs", );
WEFT_DIAGNOSTIC(OptionalWithoutRank, Error,
                "`optional` split of {0} has no `rank`; it is skipped only when the tensor's "
                "rank differs from a declared `rank N`",
                std::string);
WEFT_DIAGNOSTIC(EmptyRule, Error, "`{0}` of `\"{1}\"` lists no tensors", std::string,
                std::string);
WEFT_DIAGNOSTIC(EmptyPacked, Error, "`packed` lists no block sizes", );
WEFT_DIAGNOSTIC(CallsOutsideGuidance, Error,
                "`calls` belongs in `guidance_parallel`: it says that each guidance branch is a forward call of "
                "its own", );
WEFT_DIAGNOSTIC(CallsNotAtRoot, Error,
                "`calls` names the model's own forward calls, one per guidance branch; write `calls \"\"`, not "
                "`calls \"{0}\"`",
                std::string);
WEFT_DIAGNOSTIC(CallsItemNotAnArgument, Error,
                "`calls` lists the model's forward arguments that differ between the branches' calls; {0}",
                std::string);
WEFT_DIAGNOSTIC(CallsWithBatchRules, Error,
                "`guidance_parallel` has both `calls` and a `{0}` rule: the branches are either the batch of one "
                "call (split and gather it) or forward calls of their own (`calls`), not both",
                std::string);
WEFT_DIAGNOSTIC(PackedOnReplicate, Error,
                "`packed` on a `replicate` rule; only `colwise` and `rowwise` weights are "
                "sharded by blocks", );

}  // namespace

std::string DescribeTarget(const Target& target) {
  switch (target.kind) {
    case TargetKind::kArgument:
      return "`" + target.argument.text + "`";
    case TargetKind::kArgumentElement:
      return "`" + target.argument.text + "[" + std::to_string(target.index.value) + "]`";
    case TargetKind::kOutput:
      return "`output " + std::to_string(target.index.value) + "`";
  }
  return "``";
}

namespace {

// `calls` (guidance branches as forward calls of their own): in guidance_parallel only, at the
// root, naming arguments without fields, and not beside split or gather rules.
void CheckCalls(PlanAst& plan, diag::Emitter& diags) {
  if (plan.context_parallel) {
    for (CpRule& rule : plan.context_parallel->rules) {
      if (rule.kind != CpRuleKind::kCalls || rule.has_error) continue;
      diags.Emit(rule.keyword_range, CallsOutsideGuidance);
      rule.has_error = plan.has_error = true;
    }
  }
  if (!plan.guidance_parallel) return;
  const CpRule* calls = nullptr;
  for (CpRule& rule : plan.guidance_parallel->rules) {
    if (rule.kind == CpRuleKind::kCalls && !rule.has_error) calls = &rule;
  }
  if (calls == nullptr) return;
  for (CpRule& rule : plan.guidance_parallel->rules) {
    if (rule.has_error) continue;
    if (rule.kind == CpRuleKind::kSplit || rule.kind == CpRuleKind::kGather) {
      diags.Emit(rule.keyword_range, CallsWithBatchRules, CpRuleKindName(rule.kind));
      rule.has_error = plan.has_error = true;
      continue;
    }
    if (rule.kind != CpRuleKind::kCalls) continue;
    if (!rule.pattern.text.empty()) {
      diags.Emit(rule.pattern.range, CallsNotAtRoot, rule.pattern.text);
      rule.has_error = plan.has_error = true;
    }
    for (ShardItem& item : rule.items) {
      if (item.has_error) continue;
      std::string why;
      source::SourceRange at = item.target.range;
      if (item.target.kind == TargetKind::kOutput) {
        why = DescribeTarget(item.target) + " is an output, not an argument";
      } else if (item.dim.range.length != 0) {
        why = "a branch's argument is passed whole, so it takes no `dim`";
        at = item.dim.range;
      } else if (item.rank) {
        why = "a branch's argument is passed whole, so it takes no `rank`";
        at = item.rank->range;
      } else if (item.optional) {
        why = "an argument a call does not pass is the same in every call; drop `optional`";
        at = *item.optional;
      }
      if (why.empty()) continue;
      diags.Emit(at, CallsItemNotAnArgument, why);
      item.has_error = rule.has_error = plan.has_error = true;
    }
  }
}

}  // namespace

void CheckStructure(PlanAst& plan, diag::Emitter& diags) {
  CheckCalls(plan, diags);
  for (std::optional<ContextParallelSection>* section : {&plan.context_parallel, &plan.guidance_parallel}) {
    if (!*section) continue;
    for (CpRule& rule : (*section)->rules) {
      if (rule.has_error || rule.kind == CpRuleKind::kAttention) continue;
      if (rule.items.empty()) {
        diags.Emit(rule.range, EmptyRule, CpRuleKindName(rule.kind), rule.pattern.text);
        rule.has_error = plan.has_error = true;
        continue;
      }
      for (ShardItem& item : rule.items) {
        if (item.has_error) continue;
        bool bad = false;
        if (rule.kind == CpRuleKind::kGather) {
          if (item.target.kind != TargetKind::kOutput) {
            diags.Emit(item.target.range, GatherNeedsOutput, DescribeTarget(item.target));
            bad = true;
          }
          if (item.optional) {
            diags.Emit(*item.optional, OptionalOnGather);
            bad = true;
          }
        } else if (rule.kind == CpRuleKind::kCalls) {
          // CheckCalls checked its items.
        } else if (item.optional && !item.rank) {
          diags.Emit(*item.optional, OptionalWithoutRank, DescribeTarget(item.target));
          bad = true;
        }
        if (bad) item.has_error = rule.has_error = plan.has_error = true;
      }
    }
  }
  if (plan.tensor_parallel) {
    for (TpRule& rule : plan.tensor_parallel->rules) {
      if (rule.has_error || !rule.packed) continue;
      if (rule.style == TpStyle::kReplicate) {
        diags.Emit(rule.packed->range, PackedOnReplicate);
        rule.has_error = plan.has_error = true;
      } else if (rule.packed->blocks.empty()) {
        diags.Emit(rule.packed->range, EmptyPacked);
        rule.has_error = plan.has_error = true;
      }
    }
  }
}

const char* TpStyleName(TpStyle style) {
  switch (style) {
    case TpStyle::kColwise:
      return "colwise";
    case TpStyle::kRowwise:
      return "rowwise";
    case TpStyle::kReplicate:
      return "replicate";
  }
  return "?";
}

const char* AttentionModeName(AttentionMode mode) {
  return mode == AttentionMode::kLocal ? "local" : "context_parallel";
}

const char* CpRuleKindName(CpRuleKind kind) {
  switch (kind) {
    case CpRuleKind::kSplit:
      return "split";
    case CpRuleKind::kGather:
      return "gather";
    case CpRuleKind::kAttention:
      return "attention";
    case CpRuleKind::kCalls:
      return "calls";
  }
  return "?";
}

}  // namespace weft::syntax

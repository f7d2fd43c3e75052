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

void CheckStructure(PlanAst& plan, diag::Emitter& diags) {
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
  }
  return "?";
}

}  // namespace weft::syntax

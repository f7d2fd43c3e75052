#include "compiler/driver/program_lowering.h"

#include <algorithm>

#include "compiler/program/edits.h"
#include "compiler/program/lowering.h"
#include "compiler/program/plan_edit_error.h"

namespace weft::driver {
namespace {

const diag::DiagnosticDef<std::string>& DiagnosticOf(program::EditCheck check) {
  using C = program::EditCheck;
  switch (check) {
    case C::kProgramLacksValue: return ProgramLacksPlanValue;
    case C::kFullLengthWithoutShard: return FullLengthWithoutShard;
    case C::kCpAttentionOverWholeKeys: return ContextParallelOverWholeKeys;
    case C::kMaskNotLaidOutWithKeys: return MaskNotLaidOutWithKeys;
    case C::kTpReducesShardedDim: return TpShardedDimReduced;
    case C::kTpColwiseEscapes: return ColwiseOutputEscapes;
    case C::kTpRowwiseInputNotSharded: return RowwiseInputNotSharded;
    case C::kTpAttentionHeadsMismatch: return TpAttentionHeadsMismatch;
    case C::kTpUnsupportedOperator: return TpUnsupportedOperator;
    case C::kTpShardReachesOutput: return TpShardReachesOutput;
    case C::kCpReducesSplitDim: return SplitDimReduced;
    case C::kCpSplitMixedWithWhole: return SplitMixedWithWhole;
    case C::kLocalAttentionOverSplitKeys: return LocalAttentionOverSplitKeys;
    case C::kCpUnsupportedOperator: return SplitThroughUnsupportedOperator;
    case C::kSplitNeverGathered: return SplitNeverGathered;
    case C::kGatherOfUnsplitValue: return GatherOfUnsplitValue;
    case C::kGatherOnOtherDim: return GatherOnOtherDim;
    case C::kSplitOfSplitValue: return SplitOfSplitValue;
    case C::kSplitOfJointSequence: return SplitOfJointSequence;
  }
  return PlanDoesNotLowerToProgram;
}

// The source range of the plan rule at `origin` in `plan` (to the end of its line), or an
// invalid range when the origin is unknown or in another file.
source::SourceRange RuleRange(const source::SourceBuffer& plan, const plan::Origin& origin) {
  if (!origin.Known() || origin.file != plan.filename() || origin.line < 1 ||
      static_cast<uint32_t>(origin.line) > plan.line_count()) {
    return {};
  }
  const std::string_view line = plan.LineText(static_cast<uint32_t>(origin.line));
  const size_t col = static_cast<size_t>(std::max(1, origin.col)) - 1;
  if (col >= line.size()) return {};
  size_t end = line.size();
  while (end > col && (line[end - 1] == ' ' || line[end - 1] == '\r' || line[end - 1] == '\n')) --end;
  const uint32_t offset = static_cast<uint32_t>(line.data() - plan.text().data() + col);
  return plan.RangeAt(plan.id(), offset, static_cast<uint32_t>(end - col));
}

}  // namespace

void ReportPlanEditError(const program::PlanEditError& e, const source::SourceBuffer& plan, diag::Emitter& diags) {
  auto built = diags.Build(RuleRange(plan, e.origin()), DiagnosticOf(e.check()), e.what());
  if (!e.node().empty()) built.NoteAt(diag::Location{}, AtProgramNode, e.node(), e.module());
  built.Emit();
}

bool LowerIntoProgram(const Inputs& in, const Combination& c, plan::ExecutionPlan& plan, diag::Emitter& diags) {
  const program::Program& p = *in.programs[c.graph];
  try {
    program::LowerToProgramWithCost(plan, p, in.graph_files[c.graph], in.graphs[c.graph]);
    program::Program edited = p;
    program::ApplyEdits(edited, *plan.program);
    return true;
  } catch (const program::PlanEditError& e) {
    ReportPlanEditError(e, in.sources.Get(in.plans[c.plan]->file), diags);
  } catch (const program::ProgramError& e) {
    diags.EmitAt(diag::Location{}, PlanDoesNotLowerToProgram, e.what());
  }
  plan.program.reset();
  return false;
}

}  // namespace weft::driver

// How `weft check --program` / `weft compile --program` report a refusal of the lowering
// (compiler/driver/program_lowering.h): each check as its own diagnostic kind, at the plan rule,
// with the program node in a note. The goldens reach only the kinds that a fixture program
// reaches past the graph-level checks (tests/golden/diagnostic_coverage_test.cpp exempts the
// others); this covers the check -> kind mapping of all of them and the location.
#include "compiler/driver/program_lowering.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "compiler/diag/consumer.h"

namespace weft::driver {
namespace {

using program::EditCheck;

constexpr const char* kPlan =
    "plan \"p\" for FluxTransformer2DModel\n"
    "context_parallel {\n"
    "  split \"\" hidden_states dim 1   \n"
    "}\n";

diag::Diagnostic Report(EditCheck check, const plan::Origin& origin, const std::string& node = "add_7") {
  source::SourceManager sources;
  const source::FileId file = sources.Add(source::SourceBuffer("p.weft", kPlan));
  diag::CollectingConsumer collected;
  diag::Emitter diags(sources, collected);
  ReportPlanEditError(program::PlanEditError(check, origin, "the message", node, "transformer_blocks.0"),
                      sources.Get(file), diags);
  EXPECT_EQ(collected.diagnostics().size(), 1u);
  return collected.diagnostics().empty() ? diag::Diagnostic{} : collected.diagnostics()[0];
}

TEST(ReportPlanEditError, EveryCheckIsItsOwnKind) {
  const std::map<EditCheck, std::string> kind_of = {
      {EditCheck::kProgramLacksValue, "ProgramLacksPlanValue"},
      {EditCheck::kFullLengthWithoutShard, "FullLengthWithoutShard"},
      {EditCheck::kCpAttentionOverWholeKeys, "ContextParallelOverWholeKeys"},
      {EditCheck::kMaskNotLaidOutWithKeys, "MaskNotLaidOutWithKeys"},
      {EditCheck::kTpReducesShardedDim, "TpShardedDimReduced"},
      {EditCheck::kTpColwiseEscapes, "ColwiseOutputEscapes"},
      {EditCheck::kTpRowwiseInputNotSharded, "RowwiseInputNotSharded"},
      {EditCheck::kTpAttentionHeadsMismatch, "TpAttentionHeadsMismatch"},
      {EditCheck::kTpUnsupportedOperator, "TpUnsupportedOperator"},
      {EditCheck::kTpShardReachesOutput, "TpShardReachesOutput"},
      {EditCheck::kCpReducesSplitDim, "SplitDimReduced"},
      {EditCheck::kCpSplitMixedWithWhole, "SplitMixedWithWhole"},
      {EditCheck::kLocalAttentionOverSplitKeys, "LocalAttentionOverSplitKeys"},
      {EditCheck::kCpUnsupportedOperator, "SplitThroughUnsupportedOperator"},
      {EditCheck::kSplitNeverGathered, "SplitNeverGathered"},
      {EditCheck::kGatherOfUnsplitValue, "GatherOfUnsplitValue"},
      {EditCheck::kGatherOnOtherDim, "GatherOnOtherDim"},
      {EditCheck::kSplitOfSplitValue, "SplitOfSplitValue"},
      {EditCheck::kSplitOfJointSequence, "SplitOfJointSequence"},
  };
  // The table names every check (the enum's values run 0 .. kSplitOfJointSequence).
  ASSERT_EQ(kind_of.size(), static_cast<size_t>(EditCheck::kSplitOfJointSequence) + 1);
  std::set<std::string> seen;
  for (const auto& [check, kind] : kind_of) {
    SCOPED_TRACE(kind);
    const diag::Diagnostic d = Report(check, plan::Origin{"p.weft", 3, 3});
    ASSERT_FALSE(d.messages.empty());
    EXPECT_EQ(diag::KindName(d.messages[0].kind), kind);
    EXPECT_EQ(d.level, diag::Level::kError);
    seen.insert(kind);
  }
  EXPECT_EQ(seen.size(), kind_of.size());  // no two checks share a kind
}

TEST(ReportPlanEditError, PointsAtTheRuleWithTheNodeInANote) {
  // The range runs from the rule's column to the end of its line, trailing blanks left out.
  EXPECT_EQ(diag::RenderText(Report(EditCheck::kCpReducesSplitDim, plan::Origin{"p.weft", 3, 3})),
            "p.weft:3:3: error: the message [SplitDimReduced]\n"
            "    split \"\" hidden_states dim 1   \n"
            "    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
            "note: at node `add_7` of module `transformer_blocks.0` in the program [AtProgramNode]\n");
}

TEST(ReportPlanEditError, RuleOfAnotherFileOrNoNodeHasNoLocationOrNote) {
  EXPECT_EQ(diag::RenderText(Report(EditCheck::kSplitNeverGathered, plan::Origin{"other.weft", 3, 3}, "")),
            "error: the message [SplitNeverGathered]\n");
  EXPECT_EQ(diag::RenderText(Report(EditCheck::kSplitNeverGathered, plan::Origin{"p.weft", 99, 1}, "")),
            "error: the message [SplitNeverGathered]\n");
}

}  // namespace
}  // namespace weft::driver

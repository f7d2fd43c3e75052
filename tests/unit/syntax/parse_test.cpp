#include <gtest/gtest.h>

#include "compiler/syntax/pattern_check.h"
#include "compiler/syntax/spelling.h"
#include "tests/unit/syntax/syntax_test_util.h"

namespace weft::syntax {
namespace {

const char* kPlan = R"(# header
plan example for ExampleModel

context_parallel {
  split "" {
    hidden_states     dim 1 rank 3
    rotary_emb[1]     dim 0 rank 2 optional
  }
  split "rope" output 1 dim 1 rank 4
  gather "blocks.{0..3}.{attn,ffn}" output 0 dim 1
  attention "blocks.*.attn2" local
}

tensor_parallel {
  colwise "blocks.*.to_q"
  rowwise "blocks.*.out" packed [inner_dim, 3]
  replicate "norm"
}
)";

TEST(ParseDslTest, BuildsEveryConstruct) {
  auto out = ParseText("p.weft", kPlan);
  ASSERT_TRUE(out->plan) << out->diagnostics;
  EXPECT_EQ(out->diagnostics, "");
  const PlanAst& plan = *out->plan;
  EXPECT_FALSE(plan.has_error);
  EXPECT_EQ(plan.name.text, "example");
  EXPECT_EQ(plan.model.text, "ExampleModel");
  EXPECT_EQ(plan.model.range.line, 2u);
  EXPECT_EQ(plan.model.range.col, 18u);
  ASSERT_EQ(plan.comments.leading.size(), 1u);
  EXPECT_EQ(plan.comments.leading[0], "header");

  ASSERT_TRUE(plan.context_parallel);
  const auto& rules = plan.context_parallel->rules;
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].kind, CpRuleKind::kSplit);
  EXPECT_EQ(rules[0].pattern.text, "");
  EXPECT_EQ(rules[0].pattern.range.length, 2u);  // the quotes
  ASSERT_EQ(rules[0].items.size(), 2u);
  const ShardItem& a = rules[0].items[0];
  EXPECT_EQ(a.target.kind, TargetKind::kArgument);
  EXPECT_EQ(a.target.argument.text, "hidden_states");
  EXPECT_EQ(a.dim.value, 1);
  EXPECT_EQ(a.dim.range.line, 6u);
  EXPECT_EQ(a.dim.range.col, 27u);
  ASSERT_TRUE(a.rank);
  EXPECT_EQ(a.rank->value, 3);
  EXPECT_FALSE(a.optional);
  const ShardItem& b = rules[0].items[1];
  EXPECT_EQ(b.target.kind, TargetKind::kArgumentElement);
  EXPECT_EQ(b.target.argument.text, "rotary_emb");
  EXPECT_EQ(b.target.index.value, 1);
  EXPECT_TRUE(b.optional);
  EXPECT_EQ(rules[1].items[0].target.kind, TargetKind::kOutput);
  EXPECT_EQ(rules[1].items[0].target.index.value, 1);
  EXPECT_EQ(rules[2].kind, CpRuleKind::kGather);
  EXPECT_EQ(rules[2].pattern.text, "blocks.{0..3}.{attn,ffn}");
  EXPECT_FALSE(rules[2].items[0].rank);
  EXPECT_EQ(rules[3].kind, CpRuleKind::kAttention);
  EXPECT_EQ(rules[3].mode, AttentionMode::kLocal);
  EXPECT_EQ(rules[3].mode_range.col, 30u);

  ASSERT_TRUE(plan.tensor_parallel);
  const auto& tp = plan.tensor_parallel->rules;
  ASSERT_EQ(tp.size(), 3u);
  EXPECT_EQ(tp[0].style, TpStyle::kColwise);
  EXPECT_EQ(tp[1].style, TpStyle::kRowwise);
  ASSERT_TRUE(tp[1].packed);
  ASSERT_EQ(tp[1].packed->blocks.size(), 2u);
  EXPECT_TRUE(tp[1].packed->blocks[0].is_name);
  EXPECT_EQ(tp[1].packed->blocks[0].name, "inner_dim");
  EXPECT_FALSE(tp[1].packed->blocks[1].is_name);
  EXPECT_EQ(tp[1].packed->blocks[1].value, 3);
  EXPECT_EQ(tp[2].style, TpStyle::kReplicate);
  EXPECT_EQ(tp[2].style_range.length, 9u);
}

TEST(ParseDslTest, RootPatternAndEmptySectionsParse) {
  auto out = ParseText("p.weft", "plan p for M\ncontext_parallel {}\ntensor_parallel {\n}\n");
  ASSERT_TRUE(out->plan) << out->diagnostics;
  EXPECT_FALSE(out->plan->has_error);
  EXPECT_TRUE(out->plan->context_parallel->rules.empty());
  EXPECT_TRUE(out->plan->tensor_parallel->rules.empty());
}

TEST(ParseDslTest, ThreeIndependentMistakesGiveThreeErrors) {
  auto out = ParseText("p.weft", R"(plan p for M
context_parallel {
  split "" hidden_states dimm 1
  gather "proj_out" output 0 dim 1
}
tensor_parallel {
  colwis "a"
  rowwise "b" packed [1 2]
  colwise "c"
}
)");
  EXPECT_EQ(out->errors, 3u) << out->diagnostics;
  EXPECT_NE(out->diagnostics.find("[UnknownField]"), std::string::npos);
  EXPECT_NE(out->diagnostics.find("[UnknownStyle]"), std::string::npos);
  EXPECT_NE(out->diagnostics.find("[UnexpectedToken]"), std::string::npos);
  ASSERT_TRUE(out->plan);
  EXPECT_TRUE(out->plan->has_error);
  // The rules that were fine are kept, complete and unmarked.
  const auto& cp = out->plan->context_parallel->rules;
  ASSERT_EQ(cp.size(), 2u);
  EXPECT_TRUE(cp[0].has_error);
  EXPECT_FALSE(cp[1].has_error);
  const auto& tp = out->plan->tensor_parallel->rules;
  ASSERT_EQ(tp.size(), 2u);
  EXPECT_TRUE(tp[0].has_error);
  EXPECT_FALSE(tp[1].has_error);
  EXPECT_EQ(tp[1].pattern.text, "c");
}

TEST(ParseDslTest, NoHeaderGivesNoAst) {
  auto out = ParseText("p.weft", "context_parallel {}\n");
  EXPECT_FALSE(out->plan);
  EXPECT_GE(out->errors, 1u);
}

TEST(ParseDslTest, NonAsciiTextKeepsByteColumns) {
  auto out = ParseText("p.weft", "# caf\xc3\xa9\nplan p for M # \xe2\x80\x94\ntensor_parallel { colwise \"x\" }\n");
  ASSERT_TRUE(out->plan) << out->diagnostics;
  EXPECT_EQ(out->plan->tensor_parallel->rules[0].pattern.range.col, 27u);
  EXPECT_EQ(out->plan->comments.leading[0], "caf\xc3\xa9");
  EXPECT_EQ(*out->plan->comments.trailing, "\xe2\x80\x94");
}

TEST(ParseDslTest, ErrorLimitStopsReporting) {
  auto out = ParseText("p.weft", "plan p for M\ntensor_parallel {\n a \"x\"\n b \"y\"\n c \"z\"\n}\n", 1);
  EXPECT_NE(out->diagnostics.find("[TooManyErrors]"), std::string::npos) << out->diagnostics;
  EXPECT_EQ(out->errors, 1u);
}

TEST(SpellingTest, SuggestsCloseKeywords) {
  EXPECT_EQ(EditDistance("colwis", "colwise"), 1u);
  EXPECT_EQ(EditDistance("rnak", "rank"), 1u);  // transposition
  EXPECT_EQ(ClosestMatch("colwis", {"colwise", "rowwise"}).value_or(""), "colwise");
  EXPECT_EQ(ClosestMatch("rowwis", {"colwise", "rowwise"}).value_or(""), "rowwise");
  EXPECT_FALSE(ClosestMatch("sequence", {"colwise", "rowwise", "replicate"}));
  EXPECT_FALSE(ClosestMatch("x", {"dim"}));
  EXPECT_EQ(BacktickedList({"a"}), "`a`");
  EXPECT_EQ(BacktickedList({"a", "b", "c"}), "`a`, `b` or `c`");
  EXPECT_EQ(SuggestionSuffix("locl", {"context_parallel", "local"}), "; did you mean `local`?");
}

bool PatternOk(const std::string& pattern) {
  source::SourceManager sources;
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer("p", "\"" + pattern + "\"")));
  diag::CollectingConsumer collected;
  diag::Emitter diags(sources, collected);
  return CheckPattern(pattern, src, src.RangeAt(src.id(), 0, src.size()), true, 1, diags);
}

TEST(PatternCheckTest, AcceptsTheGlobLanguage) {
  for (const char* ok : {"", "proj_out", "blocks.*.attn", "blocks.{0..39}.{attn1,attn2,ffn}",
                         "a.{to_out.0,to_add_out}", "a.to_*", "blocks.{7..7}", "x.{a.*.b,c}"}) {
    EXPECT_TRUE(PatternOk(ok)) << ok;
  }
  for (const char* bad : {".a", "a.", "a..b", "a.**", "a.{b", "a.}", "a.{}", "a.{b,}", "a.{2..1}",
                          "a.{x..1}", "a.{b,{c}}", "a b", "a/b", "a.{b..}"}) {
    EXPECT_FALSE(PatternOk(bad)) << bad;
  }
}

}  // namespace
}  // namespace weft::syntax

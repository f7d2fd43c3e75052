#include <gtest/gtest.h>

#include "tests/unit/syntax/syntax_test_util.h"

namespace weft::syntax {
namespace {

TEST(JsonReaderTest, ReadsTheSameAstAsTheDsl) {
  const char* dsl = R"(plan p for M

context_parallel {
  split "" {
    x     dim 1 rank 3 optional
    y[0]  dim 0
  }
  gather "o" output 0 dim 1 rank 3
  attention "a.*" context_parallel
}

tensor_parallel {
  rowwise "r" packed [inner_dim, 2]
}
)";
  auto from_dsl = ParseText("p.weft", dsl);
  ASSERT_TRUE(from_dsl->plan) << from_dsl->diagnostics;
  std::string json = PrintJson(*from_dsl->plan);
  auto from_json = ParseText("p.json", json);
  ASSERT_TRUE(from_json->plan) << from_json->diagnostics;
  EXPECT_EQ(from_json->diagnostics, "");
  DumpOptions no_locations;
  no_locations.locations = false;
  EXPECT_EQ(Dump(*from_dsl->plan, no_locations), Dump(*from_json->plan, no_locations));
  EXPECT_EQ(PrintDsl(*from_json->plan), dsl);
}

TEST(JsonReaderTest, RangesPointAtJsonValuesAndPointersAreRecorded) {
  const std::string json = R"({"weft_plan": 1, "name": "p", "model": "M",
 "tensor_parallel": {"rules": [{"colwise": "a.b"}]}})";
  source::SourceManager sources;
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer("p.json", json)));
  diag::CollectingConsumer collected;
  diag::Emitter diags(sources, collected);
  auto plan = ReadJsonPlan(src, diags);
  ASSERT_TRUE(plan);
  const TpRule& rule = plan->tensor_parallel->rules[0];
  EXPECT_EQ(rule.pattern.range.line, 2u);
  EXPECT_EQ(rule.pattern.range.col, 44u);
  EXPECT_EQ(json.substr(rule.pattern.range.offset, rule.pattern.range.length), "\"a.b\"");
  EXPECT_EQ(src.JsonPointerAt(rule.pattern.range.offset).value_or(""), "/tensor_parallel/rules/0/colwise");
  EXPECT_EQ(src.JsonPointerAt(plan->name.range.offset).value_or(""), "/name");
}

TEST(JsonReaderTest, EscapedPointerTokens) {
  auto out = ParseText("p.json", R"({"weft_plan": 1, "name": "p", "model": "M", "a/b~c": 1})");
  EXPECT_NE(out->diagnostics.find("at /a~1b~0c"), std::string::npos) << out->diagnostics;
}

TEST(JsonReaderTest, SyntaxErrorsAreLocated) {
  auto out = ParseText("p.json", "{\n  \"weft_plan\": 1,\n  \"name\": \"p\"\n  \"model\": \"M\"\n}\n");
  EXPECT_FALSE(out->plan);
  EXPECT_EQ(out->diagnostics,
            "p.json:4:3: error: expected `,` or `}` after the object member [JsonSyntax]\n"
            "    \"model\": \"M\"\n"
            "    ^\n");
}

TEST(JsonReaderTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep(10000, '[');
  auto out = ParseText("p.json", deep);
  EXPECT_FALSE(out->plan);
  EXPECT_NE(out->diagnostics.find("nested deeper than 64 levels"), std::string::npos);
}

TEST(JsonReaderTest, StringEscapesAndUnicodeDecode) {
  auto out = ParseText("p.json", R"({"weft_plan": 1, "name": "p", "model": "M", "comments": ["caf\u00e9 \ud83d\ude00 \"q\""]})");
  ASSERT_TRUE(out->plan) << out->diagnostics;
  EXPECT_EQ(out->plan->comments.leading[0], "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"");
}

}  // namespace
}  // namespace weft::syntax

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "compiler/diag/consumer.h"
#include "compiler/diag/emitter.h"

namespace weft::diag {
namespace {

WEFT_DIAGNOSTIC(UnknownStyle, Error, "unknown tensor-parallel style `{0}`{1}", std::string,
                std::string);
WEFT_DIAGNOSTIC(PreviousSection, Note, "first `{0}` section is here", std::string);
WEFT_DIAGNOSTIC(EmptyPacked, Error, "`packed` lists no block sizes", );
WEFT_DIAGNOSTIC(IntegerTooLarge, Error, "integer `{0}` is too large; the largest is {1}",
                std::string, int64_t);

class DiagTest : public testing::Test {
 protected:
  DiagTest() {
    file_ = sources_.Add(source::SourceBuffer("plan.weft", "tensor_parallel {\n\tcolwis \"a\"\n}\n"));
  }
  source::SourceRange At(uint32_t offset, uint32_t length) {
    return sources_.Get(file_).RangeAt(file_, offset, length);
  }
  source::SourceManager sources_;
  source::FileId file_;
};

TEST(FormatMessageTest, SubstitutesPositionalArguments) {
  EXPECT_EQ(FormatMessage("a {1} b {0}", {"x", "y"}), "a y b x");
  EXPECT_EQ(FormatMessage("{{literal}} {0}", {"x"}), "{literal} x");
  EXPECT_EQ(FormatMessage("missing {3}", {"x"}), "missing {3}");
  EXPECT_EQ(FormatMessage("{", {}), "{");
}

TEST(KindsTest, RegistryNamesEveryKind) {
  EXPECT_EQ(KindName(Kind::kTooManyErrors), "TooManyErrors");
  EXPECT_EQ(KindName(Kind::kUnknownStyle), "UnknownStyle");
  EXPECT_EQ(AllKinds().front(), Kind::kTooManyErrors);
  for (Kind kind : AllKinds()) EXPECT_NE(KindName(kind), "Unknown");
}

TEST_F(DiagTest, TextRendererPrintsLocationSourceLineAndCaret) {
  CollectingConsumer collected;
  Emitter diags(sources_, collected);
  diags.Build(At(19, 6), UnknownStyle, "colwis", "; did you mean `colwise`?")
      .Note(At(0, 15), PreviousSection, "tensor_parallel")
      .Emit();
  ASSERT_EQ(collected.diagnostics().size(), 1u);
  EXPECT_EQ(RenderText(collected.diagnostics()[0]),
            "plan.weft:2:2: error: unknown tensor-parallel style `colwis`; did you mean `colwise`? [UnknownStyle]\n"
            "  \tcolwis \"a\"\n"
            "  \t^~~~~~\n"
            "plan.weft:1:1: note: first `tensor_parallel` section is here [PreviousSection]\n"
            "  tensor_parallel {\n"
            "  ^~~~~~~~~~~~~~~\n");
  EXPECT_TRUE(diags.has_errors());
  EXPECT_EQ(diags.error_count(), 1u);
}

TEST_F(DiagTest, UnderlineStopsAtTheEndOfTheLine) {
  CollectingConsumer collected;
  Emitter diags(sources_, collected);
  diags.Emit(At(19, 100), EmptyPacked);
  EXPECT_EQ(RenderText(collected.diagnostics()[0]),
            "plan.weft:2:2: error: `packed` lists no block sizes [EmptyPacked]\n"
            "  \tcolwis \"a\"\n"
            "  \t^~~~~~~~~~\n");
}

TEST_F(DiagTest, UnlocatedDiagnosticsRenderWithoutSourceLine) {
  CollectingConsumer collected;
  Emitter diags(sources_, collected);
  diags.Emit(source::SourceRange{}, IntegerTooLarge, "99", 7);
  EXPECT_EQ(RenderText(collected.diagnostics()[0]),
            "error: integer `99` is too large; the largest is 7 [IntegerTooLarge]\n");
}

TEST_F(DiagTest, MaxErrorsStopsWithOneTooManyErrors) {
  CollectingConsumer collected;
  Emitter diags(sources_, collected, 2);
  for (int i = 0; i < 5; ++i) diags.Emit(At(19, 6), EmptyPacked);
  ASSERT_EQ(collected.diagnostics().size(), 3u);
  EXPECT_EQ(collected.diagnostics()[2].messages[0].kind, Kind::kTooManyErrors);
  EXPECT_EQ(collected.diagnostics()[2].messages[0].text, "too many errors; stopping after 2");
  EXPECT_TRUE(diags.limit_reached());
  EXPECT_EQ(diags.error_count(), 2u);
}

TEST_F(DiagTest, SortingConsumerOrdersByPositionAndKeepsUnlocatedLast) {
  CollectingConsumer collected;
  SortingConsumer sorted(collected);
  Emitter diags(sources_, sorted);
  diags.Emit(source::SourceRange{}, EmptyPacked);
  diags.Emit(At(19, 6), EmptyPacked);
  diags.Emit(At(0, 6), EmptyPacked);
  EXPECT_TRUE(collected.diagnostics().empty());  // buffered until Flush
  sorted.Flush();
  ASSERT_EQ(collected.diagnostics().size(), 3u);
  EXPECT_EQ(collected.diagnostics()[0].messages[0].loc.line, 1u);
  EXPECT_EQ(collected.diagnostics()[1].messages[0].loc.line, 2u);
  EXPECT_EQ(collected.diagnostics()[2].messages[0].loc.line, 0u);
}

TEST_F(DiagTest, ErrorTrackingConsumerCountsErrors) {
  CollectingConsumer collected;
  ErrorTrackingConsumer tracking(collected);
  Emitter diags(sources_, tracking);
  EXPECT_FALSE(tracking.seen_error());
  diags.Emit(At(0, 1), EmptyPacked);
  EXPECT_TRUE(tracking.seen_error());
  EXPECT_EQ(tracking.error_count(), 1u);
  EXPECT_EQ(collected.diagnostics().size(), 1u);
}

TEST_F(DiagTest, JsonRendererWritesOneDocument) {
  std::ostringstream out;
  JsonRenderer renderer(out);
  Emitter diags(sources_, renderer);
  diags.Build(At(19, 6), UnknownStyle, "colwis", "").Note(At(0, 15), PreviousSection, "tp").Emit();
  renderer.Flush();
  nlohmann::json doc = nlohmann::json::parse(out.str());
  EXPECT_EQ(doc["version"], 1);
  ASSERT_EQ(doc["diagnostics"].size(), 1u);
  const auto& d = doc["diagnostics"][0];
  EXPECT_EQ(d["kind"], "UnknownStyle");
  EXPECT_EQ(d["level"], "error");
  EXPECT_EQ(d["file"], "plan.weft");
  EXPECT_EQ(d["line"], 2);
  EXPECT_EQ(d["column"], 2);
  EXPECT_EQ(d["length"], 6);
  EXPECT_EQ(d["notes"][0]["kind"], "PreviousSection");
  EXPECT_EQ(d["notes"][0]["level"], "note");
}

TEST_F(DiagTest, SarifRendererWritesA210Log) {
  std::ostringstream out;
  SarifRenderer renderer(out, "1.2.3");
  Emitter diags(sources_, renderer);
  diags.Build(At(19, 6), UnknownStyle, "colwis", "").Note(At(0, 15), PreviousSection, "tp").Emit();
  diags.Emit(At(0, 1), EmptyPacked);
  renderer.Flush();
  nlohmann::json log = nlohmann::json::parse(out.str());
  EXPECT_EQ(log["version"], "2.1.0");
  EXPECT_EQ(log["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
  const auto& run = log["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "weft");
  EXPECT_EQ(run["tool"]["driver"]["version"], "1.2.3");
  ASSERT_EQ(run["tool"]["driver"]["rules"].size(), 2u);
  ASSERT_EQ(run["results"].size(), 2u);
  const auto& r = run["results"][0];
  EXPECT_EQ(r["ruleId"], "UnknownStyle");
  EXPECT_EQ(run["tool"]["driver"]["rules"][r["ruleIndex"].get<int>()]["id"], "UnknownStyle");
  EXPECT_EQ(r["level"], "error");
  const auto& region = r["locations"][0]["physicalLocation"]["region"];
  EXPECT_EQ(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "plan.weft");
  EXPECT_EQ(region["startLine"], 2);
  EXPECT_EQ(region["startColumn"], 2);
  EXPECT_EQ(region["endColumn"], 8);
  EXPECT_EQ(r["relatedLocations"][0]["message"]["text"], "first `tp` section is here [PreviousSection]");
}

TEST_F(DiagTest, JsonPointerIsPrintedForJsonPlans) {
  source::FileId json = sources_.Add(source::SourceBuffer("plan.json", "{\"name\": 3}"));
  sources_.Get(json).AnnotateJsonPointer(9, "/name");
  CollectingConsumer collected;
  Emitter diags(sources_, collected);
  diags.Emit(sources_.Get(json).RangeAt(json, 9, 1), EmptyPacked);
  EXPECT_EQ(collected.diagnostics()[0].messages[0].loc.json_pointer, "/name");
  EXPECT_NE(RenderText(collected.diagnostics()[0]).find("\n  at /name\n"), std::string::npos);
}

TEST_F(DiagTest, RenderersReplaceBytesThatAreNotUtf8) {
  source::FileId bad = sources_.Add(source::SourceBuffer("bad.weft", "x \xff y"));
  std::ostringstream out;
  JsonRenderer renderer(out);
  Emitter diags(sources_, renderer);
  diags.Emit(sources_.Get(bad).RangeAt(bad, 2, 1), EmptyPacked);
  renderer.Flush();
  EXPECT_NO_THROW(nlohmann::json::parse(out.str()));
}

}  // namespace
}  // namespace weft::diag

// The plans in plans/: each DSL file parses cleanly, is in canonical form, and has a JSON
// twin that is the canonical JSON of the same AST; both forms round-trip to each other.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "compiler/compile.h"
#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

struct Parsed {
  std::optional<syntax::PlanAst> plan;
  std::string diagnostics;
};

Parsed Parse(source::SourceManager& sources, const std::string& name, const std::string& text) {
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer(name, text)));
  diag::CollectingConsumer collected;
  diag::Emitter diags(sources, collected);
  Parsed parsed;
  parsed.plan = syntax::ParsePlan(src, diags);
  for (const diag::Diagnostic& d : collected.diagnostics()) parsed.diagnostics += diag::RenderText(d);
  return parsed;
}

class CorpusCase : public testing::Test {
 public:
  explicit CorpusCase(std::string dsl_path) : dsl_path_(std::move(dsl_path)) {}

  void TestBody() override {
    const std::string json_path =
        std::filesystem::path(dsl_path_).replace_extension(".json").string();
    ASSERT_TRUE(std::filesystem::exists(json_path)) << json_path << " (the JSON twin) is missing";
    const std::string dsl_text = ReadFile(dsl_path_);
    const std::string json_text = ReadFile(json_path);
    source::SourceManager sources;

    Parsed dsl = Parse(sources, dsl_path_, dsl_text);
    ASSERT_TRUE(dsl.plan && !dsl.plan->has_error && dsl.diagnostics.empty()) << dsl.diagnostics;
    Parsed json = Parse(sources, json_path, json_text);
    ASSERT_TRUE(json.plan && !json.plan->has_error && json.diagnostics.empty()) << json.diagnostics;

    syntax::DumpOptions no_locations;
    no_locations.locations = false;
    EXPECT_EQ(syntax::Dump(*dsl.plan, no_locations), syntax::Dump(*json.plan, no_locations))
        << "the DSL and JSON twins differ";
    EXPECT_EQ(syntax::PrintDsl(*dsl.plan), dsl_text)
        << dsl_path_ << " is not canonical; run `weft fmt --write " << dsl_path_ << "`";
    EXPECT_EQ(syntax::PrintJson(*dsl.plan), json_text)
        << json_path << " is not `weft fmt --to=json` of the DSL";
    // DSL -> JSON -> DSL gives identical text.
    EXPECT_EQ(syntax::PrintDsl(*json.plan), dsl_text);
    // DSL -> AST -> DSL is a fixed point.
    Parsed again = Parse(sources, dsl_path_, syntax::PrintDsl(*dsl.plan));
    ASSERT_TRUE(again.plan) << again.diagnostics;
    EXPECT_EQ(syntax::PrintDsl(*again.plan), dsl_text);
  }

 private:
  std::string dsl_path_;
};

const bool kRegistered = [] {
  for (const std::string& path : ListFiles(WEFT_PLANS_DIR, {".weft"})) {
    std::string name = std::filesystem::path(path).stem().string();
    testing::RegisterTest("Corpus", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [path]() -> testing::Test* { return new CorpusCase(path); });
  }
  return true;
}();

TEST(CorpusFiles, EveryJsonPlanHasADslTwin) {
  size_t plans = 0;
  for (const std::string& path : ListFiles(WEFT_PLANS_DIR, {".json"})) {
    // plans/ may hold other JSON (graphs live in their own folder); twins sit beside .weft.
    if (std::filesystem::path(path).parent_path() != std::filesystem::path(WEFT_PLANS_DIR)) continue;
    ++plans;
    std::string dsl = std::filesystem::path(path).replace_extension(".weft").string();
    EXPECT_TRUE(std::filesystem::exists(dsl)) << path << " has no DSL twin " << dsl;
  }
  EXPECT_GT(plans, 0u) << "no plans found in " << WEFT_PLANS_DIR;
}

TEST(CorpusFiles, NamesAreLowerSnakeCase) {
  for (const std::string& path : ListFiles(WEFT_PLANS_DIR, {".weft"})) {
    std::string stem = std::filesystem::path(path).stem().string();
    for (char c : stem) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << path;
    }
  }
}

}  // namespace
}  // namespace weft::golden

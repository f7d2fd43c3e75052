// Every plan in plans/ with a JSON twin compiles to the same ExecutionPlan from both forms
// (design.md 7), for every graph of its class, at every workload, on ring 2 x ulysses 2 with
// uneven splits allowed. Origins and the plan file name necessarily differ and are cleared.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace weft {
namespace {

std::optional<syntax::PlanAst> Parse(source::SourceManager& sources, const std::string& path) {
  std::string error;
  auto buffer = source::SourceBuffer::FromFile(path, &error);
  if (!buffer) return std::nullopt;
  const source::SourceBuffer& src = sources.Get(sources.Add(std::move(*buffer)));
  diag::CollectingConsumer sink;
  diag::Emitter diags(sources, sink);
  return syntax::ParsePlan(src, diags);
}

void ClearOrigins(plan::ExecutionPlan& p) {
  p.plan_file.clear();
  for (plan::ModuleStep& s : p.steps) {
    for (plan::Split& x : s.splits) x.origin = {};
    for (plan::Gather& x : s.gathers) x.origin = {};
    if (s.attention) s.attention->origin = {};
    if (s.tp) s.tp->origin = {};
  }
}

TEST(TwinsTest, DslAndJsonCompileToTheSamePlan) {
  const std::string root = WEFT_SOURCE_DIR;
  std::vector<model::ModelGraph> graphs;
  for (const auto& e : std::filesystem::directory_iterator(root + "/graphs")) {
    auto r = model::ReadGraphFile(e.path().string());
    ASSERT_TRUE(r.graph) << e.path();
    graphs.push_back(std::move(*r.graph));
  }
  int compared = 0;
  for (const auto& e : std::filesystem::directory_iterator(root + "/plans")) {
    if (e.path().extension() != ".weft") continue;
    const std::string json = std::filesystem::path(e.path()).replace_extension(".json").string();
    if (!std::filesystem::exists(json)) continue;
    source::SourceManager sources;
    auto dsl_ast = Parse(sources, e.path().string());
    auto json_ast = Parse(sources, json);
    ASSERT_TRUE(dsl_ast && json_ast) << e.path();
    for (const model::ModelGraph& g : graphs) {
      if (g.class_name != dsl_ast->model.text) continue;
      for (const model::Workload& w : g.workloads) {
        bind::BindOptions options;
        options.mesh.axes = {{"ring", 2}, {"ulysses", 2}};
        options.mesh.ulysses_anything = true;
        options.workload = w.name;
        diag::CollectingConsumer sink;
        diag::Emitter diags(sources, sink);
        auto a = CompileAst(*dsl_ast, g, options, diags);
        auto b = CompileAst(*json_ast, g, options, diags);
        ASSERT_EQ(a.has_value(), b.has_value()) << e.path() << " " << g.name << " " << w.name;
        if (!a) continue;
        ClearOrigins(*a);
        ClearOrigins(*b);
        EXPECT_EQ(plan::CanonicalPlanJson(*a), plan::CanonicalPlanJson(*b)) << e.path() << " " << w.name;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 10);
}

}  // namespace
}  // namespace weft

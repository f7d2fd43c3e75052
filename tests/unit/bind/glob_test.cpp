#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/bind/bind.h"
#include "compiler/bind/glob.h"

namespace weft::bind {
namespace {

model::ModelGraph Toy() {
  model::ModelGraph g;
  g.class_name = "Toy";
  g.types = {{"Toy", "", {}, false}, {"ModuleList", "", {}, true}, {"Block", "", {}, false}, {"Linear", "", {}, false}};
  g.modules.push_back({"", "Toy", model::Container::kNone, {"blocks", "proj_out"}, {}, {}});
  std::vector<std::string> items;
  for (int i = 0; i < 4; ++i) items.push_back(std::to_string(i));
  g.modules.push_back({"blocks", "ModuleList", model::Container::kList, items, {}, {}});
  for (int i = 0; i < 4; ++i) {
    const std::string b = "blocks." + std::to_string(i);
    g.modules.push_back({b, "Block", model::Container::kNone, {"attn", "ff"}, {}, {}});
    g.modules.push_back({b + ".attn", "Block", model::Container::kNone, {"to_q", "to_out"}, {}, {}});
    g.modules.push_back({b + ".attn.to_q", "Linear", model::Container::kNone, {}, {}, {}});
    g.modules.push_back({b + ".attn.to_out", "ModuleList", model::Container::kList, {"0"}, {}, {}});
    g.modules.push_back({b + ".attn.to_out.0", "Linear", model::Container::kNone, {}, {}, {}});
    g.modules.push_back({b + ".ff", "Linear", model::Container::kNone, {}, {}, {}});
  }
  g.modules.push_back({"proj_out", "Linear", model::Container::kNone, {}, {}, {}});
  g.Reindex();
  return g;
}

std::vector<std::string> Paths(const model::ModelGraph& g, const std::string& pattern) {
  std::vector<model::ModuleId> ids;
  std::string error;
  EXPECT_TRUE(MatchPattern(g, pattern, ids, error)) << error;
  std::vector<std::string> out;
  for (auto id : ids) out.push_back(g.modules[id].path);
  return out;
}

TEST(GlobTest, RootLiteralStarAlternationRange) {
  const model::ModelGraph g = Toy();
  EXPECT_EQ(Paths(g, ""), std::vector<std::string>{""});
  EXPECT_EQ(Paths(g, "proj_out"), std::vector<std::string>{"proj_out"});
  EXPECT_EQ(Paths(g, "blocks.*.ff").size(), 4u);
  EXPECT_EQ(Paths(g, "blocks.{1..2}.ff"), (std::vector<std::string>{"blocks.1.ff", "blocks.2.ff"}));
  // Alternatives may contain dots, and results come in module order without duplicates.
  EXPECT_EQ(Paths(g, "blocks.0.{ff,attn.to_out.0,attn.to_q,ff}"),
            (std::vector<std::string>{"blocks.0.attn.to_q", "blocks.0.attn.to_out.0", "blocks.0.ff"}));
  EXPECT_EQ(Paths(g, "*"), (std::vector<std::string>{"blocks", "proj_out"}));
  EXPECT_TRUE(Paths(g, "blocks.4.ff").empty());
  EXPECT_TRUE(Paths(g, "blocks.*.nope").empty());
}

TEST(GlobTest, FailureLocatesTheMissingSegment) {
  const model::ModelGraph g = Toy();
  std::vector<model::ModuleId> ids;
  std::string error;
  MatchFailure f;
  ASSERT_TRUE(MatchPatternDetailed(g, "blocks.7.attn", ids, error, &f));
  EXPECT_TRUE(ids.empty());
  ASSERT_TRUE(f.set);
  EXPECT_EQ(g.modules[f.parent].path, "blocks");
  EXPECT_EQ(f.segment, "7");
}

TEST(GlobTest, MalformedPatterns) {
  const model::ModelGraph g = Toy();
  std::vector<model::ModuleId> ids;
  std::string error;
  EXPECT_FALSE(MatchPattern(g, "blocks.{0..2", ids, error));
  EXPECT_FALSE(MatchPattern(g, "blocks.{3..1}", ids, error));
  EXPECT_FALSE(MatchPattern(g, "blocks.{a,{b}}", ids, error));
}

}  // namespace
}  // namespace weft::bind

#include "compiler/model/path_pattern.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace weft::model {
namespace {

std::vector<std::string> Expand(std::string_view pattern) {
  std::vector<std::string> out;
  std::string error;
  EXPECT_TRUE(ExpandPathPattern(pattern, out, error)) << error;
  return out;
}

TEST(PathPatternTest, PlainPathsExpandToThemselves) {
  EXPECT_EQ(Expand(""), std::vector<std::string>{""});
  EXPECT_EQ(Expand("proj_out"), std::vector<std::string>{"proj_out"});
  EXPECT_EQ(Expand("blocks.3.attn1"), std::vector<std::string>{"blocks.3.attn1"});
}

TEST(PathPatternTest, RangesListsAndProducts) {
  EXPECT_EQ(Expand("blocks.{0..2}.attn"),
            (std::vector<std::string>{"blocks.0.attn", "blocks.1.attn", "blocks.2.attn"}));
  EXPECT_EQ(Expand("b.{0,2,5..6}"), (std::vector<std::string>{"b.0", "b.2", "b.5", "b.6"}));
  EXPECT_EQ(Expand("{0..1}.x.{3,4}"), (std::vector<std::string>{"0.x.3", "0.x.4", "1.x.3", "1.x.4"}));
  EXPECT_EQ(Expand("blocks.{0..39}.ffn").size(), 40u);
}

TEST(PathPatternTest, MalformedSetsAreErrors) {
  for (const char* bad : {"b.{}", "b.{3..1}", "b.{a}", "b.{0..2", "b.0}", "b.x{0}", "b.{0}x", "b.{1..}"}) {
    std::vector<std::string> out;
    std::string error;
    EXPECT_FALSE(ExpandPathPattern(bad, out, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(PathPatternTest, CompressMergesEqualListItemsOnly) {
  const std::set<std::string> lists = {"blocks", "blocks.0.net", "blocks.1.net", "blocks.2.net", "blocks.3.net"};
  auto is_list = [&](std::string_view p) { return lists.count(std::string(p)) > 0; };
  std::vector<std::pair<std::string, std::string>> entries = {
      {"", "root"},           {"blocks", "list"},      {"blocks.0", "B"},   {"blocks.1", "B"},
      {"blocks.2", "B"},      {"blocks.3", "C"},       {"blocks.0.net.0", "L"}, {"blocks.1.net.0", "L"},
      {"blocks.2.net.0", "L"}, {"blocks.3.net.0", "L"}, {"blocks.0.net.1", "L"}, {"blocks.1.net.1", "L"},
      {"blocks.2.net.1", "L"}, {"blocks.3.net.1", "L"}, {"other.5", "X"}, {"other.6", "X"}};
  const auto groups = CompressPaths(entries, is_list);
  std::vector<std::string> patterns;
  for (const auto& g : groups) patterns.push_back(g.first);
  // `other` is not a list, so its numeric children stay apart.
  EXPECT_EQ(patterns, (std::vector<std::string>{"", "blocks", "blocks.{0..2}", "blocks.3",
                                                "blocks.{0..3}.net.{0,1}", "other.5", "other.6"}));
  // Round trip: expanding the patterns gives back exactly the input paths.
  std::multiset<std::string> expanded, original;
  for (const auto& e : entries) original.insert(e.first);
  for (const auto& g : groups) {
    for (const std::string& p : Expand(g.first)) {
      expanded.insert(p);
    }
  }
  EXPECT_EQ(expanded, original);
}

TEST(PathPatternTest, CompressKeepsNonContiguousSetsExact) {
  auto is_list = [](std::string_view p) { return p == "b"; };
  std::vector<std::pair<std::string, std::string>> entries = {
      {"b.0", "x"}, {"b.1", "y"}, {"b.2", "x"}, {"b.3", "x"}, {"b.4", "x"}, {"b.5", "y"}};
  const auto groups = CompressPaths(entries, is_list);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].first, "b.{0,2..4}");
  EXPECT_EQ(groups[1].first, "b.{1,5}");
  EXPECT_EQ(entries[groups[1].second].second, "y");
}

}  // namespace
}  // namespace weft::model

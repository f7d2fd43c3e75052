// A program's flattened inputs found inside non-tensor arguments given as JSON: object members by
// the key the input spec names (a Python dict's order is its insertion order, a JSON object's here
// its keys' order), list elements by position; another structure is nullptr, not an exception.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/program/argument_leaf.h"

namespace weft::interp {
namespace {

program::FlatInput Leaf(std::string arg, std::string path, std::vector<size_t> index) {
  program::FlatInput f;
  f.arg = std::move(arg);
  f.path = std::move(path);
  f.index = std::move(index);
  return f;
}

TEST(ArgumentLeaf, ObjectMembersByTheirKeyNotTheirPosition) {
  // {"resolution": 7, "aspect_ratio": 3} as Python ordered it: resolution is leaf 0.
  const nlohmann::json arg = nlohmann::json::parse(R"({"resolution": 7, "aspect_ratio": 3})");
  const nlohmann::json* r = ArgumentLeaf(arg, Leaf("added_cond_kwargs", "added_cond_kwargs['resolution']", {0}));
  const nlohmann::json* a = ArgumentLeaf(arg, Leaf("added_cond_kwargs", "added_cond_kwargs['aspect_ratio']", {1}));
  ASSERT_NE(r, nullptr);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(r->get<int>(), 7);
  EXPECT_EQ(a->get<int>(), 3);
}

TEST(ArgumentLeaf, NestedListsAndObjects) {
  const nlohmann::json shapes = nlohmann::json::parse("[[[1, 4, 6]], [[1, 2, 3]]]");
  const nlohmann::json* w = ArgumentLeaf(shapes, Leaf("img_shapes", "img_shapes[1][0][2]", {1, 0, 2}));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->get<int>(), 3);
  const nlohmann::json mixed = nlohmann::json::parse(R"({"z": [5, 6], "a": {"k": null}})");
  const nlohmann::json* z1 = ArgumentLeaf(mixed, Leaf("m", "m['z'][1]", {0, 1}));
  ASSERT_NE(z1, nullptr);
  EXPECT_EQ(z1->get<int>(), 6);
  const nlohmann::json* k = ArgumentLeaf(mixed, Leaf("m", "m['a']['k']", {1, 0}));
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->is_null());
}

TEST(ArgumentLeaf, AnotherStructureIsNullNotAThrow) {
  const nlohmann::json arg = nlohmann::json::parse(R"({"resolution": null})");
  EXPECT_EQ(ArgumentLeaf(arg, Leaf("c", "c['aspect_ratio']", {1})), nullptr);  // no such key
  EXPECT_EQ(ArgumentLeaf(nlohmann::json::parse("[1]"), Leaf("l", "l[3]", {3})), nullptr);
  EXPECT_EQ(ArgumentLeaf(nlohmann::json::parse("4"), Leaf("n", "n[0]", {0})), nullptr);  // a number has no items
  const nlohmann::json whole = nlohmann::json::parse("12");
  EXPECT_EQ(ArgumentLeaf(whole, Leaf("num_frames", "num_frames", {})), &whole);
}

}  // namespace
}  // namespace weft::interp

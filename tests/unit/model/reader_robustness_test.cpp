// The graph and plan readers never crash and always answer with a value or errors, whatever
// bytes they are given (a deterministic mutation run; the fuzz targets of design.md 7 in
// miniature, cheap enough for every ctest run).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "compiler/model/graph_json.h"
#include "compiler/plan/plan_json.h"

namespace weft {
namespace {

// xorshift64*, fixed seed: the same mutations on every run.
struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

std::string Mutate(const std::string& text, Rng& rng) {
  std::string t = text;
  const int edits = 1 + static_cast<int>(rng.Below(4));
  static const char kBytes[] = "{}[]\",:0123456789-.eE tfnul\\/{}*\x01\xff";
  for (int e = 0; e < edits && !t.empty(); ++e) {
    const size_t at = rng.Below(t.size());
    switch (rng.Below(4)) {
      case 0:
        t[at] = kBytes[rng.Below(sizeof(kBytes) - 1)];
        break;
      case 1:
        t.erase(at, 1 + rng.Below(8));
        break;
      case 2:
        t.insert(at, 1, kBytes[rng.Below(sizeof(kBytes) - 1)]);
        break;
      default:
        t.resize(at);
        break;
    }
  }
  return t;
}

constexpr const char* kGraph = R"({"format": "weft.graph/1", "model": {"name": "m", "class_name": "M"},
"config": {"inner_dim": 8},
"types": {"M": {"forward": {"args": [{"name": "hidden_states"}], "outputs": 1}}, "ModuleList": {"forward": {"args": [], "variadic": true}},
          "Linear": {"forward": {"args": [{"name": "input"}]}}},
"modules": [{"path": "", "type": "M", "children": ["blocks"]},
            {"path": "blocks", "type": "ModuleList", "container": "list", "children": ["0", "1"]},
            {"path": "blocks.{0,1}", "type": "Linear", "params": [{"name": "weight", "shape": [8, 8], "dtype": "bf16"}],
             "attrs": {"in_features": 8, "out_features": 8, "bias": false, "tp_packed_row_blocks": [4, 4]}}],
"attention_sites": [{"path": "blocks.{0..1}", "heads": 2, "head_dim": 4, "kind": "self", "q": ["input"], "kv": ["input"]}],
"workloads": [{"name": "w", "params": {"tokens": 16},
  "calls": [{"module": "", "calls": [{"args": {"hidden_states": {"shape": [1, 16, 8], "dtype": "bf16"}, "x": null,
             "t": {"tuple": [{"shape": [16], "dtype": "f32"}]}, "s": {"value": [1, 2]}}, "positional": 1,
             "outputs": [{"shape": [1, 16, 8], "dtype": "bf16"}]}]}],
  "attention": [{"site": "blocks.{0,1}", "calls": [{"q": [1, 16, 2, 4], "k": [1, 16, 2, 4], "v": [1, 16, 2, 4]}]}]}]})";

TEST(ReaderRobustnessTest, GraphReaderSurvivesMutations) {
  const model::GraphReadResult clean = model::ReadGraphJson(kGraph);
  ASSERT_TRUE(clean.errors.empty()) << clean.errors[0].pointer << ": " << clean.errors[0].message;
  Rng rng;
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    const model::GraphReadResult r = model::ReadGraphJson(Mutate(kGraph, rng));
    EXPECT_NE(r.graph.has_value(), !r.errors.empty());
    if (!r.graph) {
      ++rejected;
      for (const auto& e : r.errors) EXPECT_FALSE(e.message.empty());
    }
  }
  EXPECT_GT(rejected, 2000);
}

TEST(ReaderRobustnessTest, PlanReaderSurvivesMutations) {
  plan::ExecutionPlan p;
  p.plan_name = "p";
  p.mesh.axes = {{"ulysses", 2}};
  p.mesh.world_size = 2;
  plan::ModuleStep s;
  s.module = "";
  plan::Split split;
  split.argument = "hidden_states";
  split.dim = 1;
  split.rank = 3;
  split.global_size = 16;
  split.sizes = {8, 8};
  s.splits = {split};
  s.attention = plan::Attention{};
  s.attention->heads = s.attention->local_heads = 2;
  s.attention->head_dim = 4;
  s.attention->ulysses = 2;
  p.steps = {s};
  const std::string text = plan::WritePlanJson(p);
  ASSERT_TRUE(plan::ReadPlanJson(text).errors.empty());
  Rng rng;
  for (int i = 0; i < 3000; ++i) {
    const plan::PlanReadResult r = plan::ReadPlanJson(Mutate(text, rng));
    EXPECT_NE(r.plan.has_value(), !r.errors.empty());
  }
}

}  // namespace
}  // namespace weft

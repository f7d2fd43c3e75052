// The mesh specification parser weft and weft-run share (compiler/plan/mesh_spec.h): closed,
// exact vocabulary, bounded sizes, and the exact messages.
#include "compiler/plan/mesh_spec.h"

#include <gtest/gtest.h>

#include <string>

namespace weft::plan {
namespace {

std::string Error(const std::string& text) {
  std::string error;
  if (ParseMeshSpec(text, &error)) return "parsed";
  return error;
}

std::string AxesText(const std::vector<MeshAxis>& axes) {
  std::string out;
  for (const MeshAxis& a : axes) out += (out.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return out;
}

TEST(MeshSpecTest, ParsesAxesInWorldOrder) {
  std::string error;
  std::optional<MeshSpec> s = ParseMeshSpec("ulysses=2,ring=4", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->ring, 4);
  EXPECT_EQ(s->ulysses, 2);
  EXPECT_EQ(s->tp, 1);
  EXPECT_EQ(s->WorldSize(), 8);
  EXPECT_FALSE(s->order_given);
  EXPECT_EQ(AxesText(s->Axes(false)), "ring=4,ulysses=2");           // only the axes given
  EXPECT_EQ(AxesText(s->Axes(true)), "tp=1,ring=4,ulysses=2");       // default order
}

TEST(MeshSpecTest, OrderSpacesAndEmpty) {
  std::string error;
  std::optional<MeshSpec> s = ParseMeshSpec(" tp = 2 , ulysses=3 ,order=ulysses:ring:tp", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_TRUE(s->order_given);
  EXPECT_EQ(AxesText(s->Axes(false)), "ulysses=3,tp=2");
  EXPECT_EQ(AxesText(s->Axes(true)), "ulysses=3,ring=1,tp=2");
  std::optional<MeshSpec> empty = ParseMeshSpec("", &error);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->WorldSize(), 1);
  EXPECT_TRUE(empty->Axes(false).empty());
  EXPECT_EQ(ParseMeshSpec("ulysses=65536", &error)->ulysses, kMaxMeshWorldSize);
  EXPECT_EQ(ParseMeshSpec("ring=256,ulysses=256", &error)->WorldSize(), 65536);
  auto order = ParseMeshOrder("tp,ring,ulysses", &error);  // weft-run's --mesh-order
  ASSERT_TRUE(order);
  EXPECT_EQ((*order)[0], kCfgAxis);  // three names: cfg stays outermost
  EXPECT_EQ((*order)[1], kTpAxis);
  EXPECT_EQ((*order)[3], kUlyssesAxis);
  order = ParseMeshOrder("tp:ring:ulysses:cfg", &error);
  ASSERT_TRUE(order) << error;
  EXPECT_EQ((*order)[3], kCfgAxis);
  std::optional<MeshSpec> cfg = ParseMeshSpec("cfg=2,ulysses=2", &error);
  ASSERT_TRUE(cfg) << error;
  EXPECT_EQ(cfg->WorldSize(), 4);
  EXPECT_EQ(AxesText(cfg->Axes(false)), "cfg=2,ulysses=2");
  EXPECT_EQ(AxesText(cfg->Axes(true)), "cfg=2,tp=1,ring=1,ulysses=2");  // cfg outermost by default
  EXPECT_EQ(AxesText(s->Axes(true)), "ulysses=3,ring=1,tp=2");           // no cfg axis unless named
}

TEST(MeshSpecTest, ExactMessages) {
  EXPECT_EQ(Error("ULYSSES=2"),
            "mesh `ULYSSES=2`: unknown axis `ULYSSES`; did you mean `ulysses`? (mesh keys are lower case)");
  EXPECT_EQ(Error("Ring=2"), "mesh `Ring=2`: unknown axis `Ring`; did you mean `ring`? (mesh keys are lower case)");
  EXPECT_EQ(Error("pipeline=2"),
            "mesh `pipeline=2`: unknown axis `pipeline`; weft's mesh axes are `ring`, `ulysses`, `tp` and `cfg` (and "
            "the key `order`)");
  EXPECT_EQ(Error("cgf=2"), "mesh `cgf=2`: unknown axis `cgf`; did you mean `cfg`?");
  EXPECT_EQ(Error("cfg=256,ring=256,ulysses=2"),
            "mesh `cfg=256,ring=256,ulysses=2`: ring 256 x ulysses 2 x tp 1 x cfg 256 = 131072 ranks, more than the "
            "65536 ranks a mesh may have");
  EXPECT_EQ(Error("order=cfg:ring:tp"),
            "mesh `order=cfg:ring:tp`: order `cfg:ring:tp` places `cfg` among three axes; name all four (e.g. "
            "tp:ring:ulysses:cfg) or leave cfg out to keep it outermost");
  EXPECT_EQ(Error("foo=2"),
            "mesh `foo=2`: unknown axis `foo`; weft's mesh axes are `ring`, `ulysses`, `tp` and `cfg` (and the key `order`)");
  EXPECT_EQ(Error("ulyses=2"), "mesh `ulyses=2`: unknown axis `ulyses`; did you mean `ulysses`?");
  EXPECT_EQ(Error("cp=4"),
            "mesh `cp=4`: `cp` is the ring x ulysses group, not an axis; give its factors as `ring` and `ulysses`");
  EXPECT_EQ(Error("ulysses=1000000"),
            "mesh `ulysses=1000000`: axis `ulysses` has size 1000000, more than the 65536 ranks a mesh may have");
  EXPECT_EQ(Error("tp=99999999999999999999999"),
            "mesh `tp=99999999999999999999999`: axis `tp` has size 99999999999999999999999, more than the 65536 ranks "
            "a mesh may have");
  EXPECT_EQ(Error("ring=256,ulysses=512"),
            "mesh `ring=256,ulysses=512`: ring 256 x ulysses 512 x tp 1 = 131072 ranks, more than the 65536 ranks a "
            "mesh may have");
  EXPECT_EQ(Error("ring=0"), "mesh `ring=0`: axis `ring` has size 0; sizes are at least 1");
  EXPECT_EQ(Error("ring=-3"), "mesh `ring=-3`: axis `ring` has size -3; sizes are at least 1");
  EXPECT_EQ(Error("ring=two"),
            "mesh `ring=two`: size `two` of axis `ring` is not a whole number; expected a positive integer such as 2");
  EXPECT_EQ(Error("ring=2.5"),
            "mesh `ring=2.5`: size `2.5` of axis `ring` is not a whole number; expected a positive integer such as 2");
  EXPECT_EQ(Error("ring=+2"),
            "mesh `ring=+2`: size `+2` of axis `ring` is not a whole number; expected a positive integer such as 2");
  EXPECT_EQ(Error("ring=1e3"),
            "mesh `ring=1e3`: size `1e3` of axis `ring` is not a whole number; expected a positive integer such as 2");
  EXPECT_EQ(Error("ring="), "mesh `ring=`: axis `ring` has no size; expected a positive integer");
  EXPECT_EQ(Error("ring=2,ring=2"), "mesh `ring=2,ring=2`: axis `ring` is given twice");
  EXPECT_EQ(Error("ring=2,,tp=2"),
            "mesh `ring=2,,tp=2`: item 2 is empty; expected axis=size items separated by commas (e.g. "
            "ring=2,ulysses=2,tp=1)");
  EXPECT_EQ(Error("ring=2,"),
            "mesh `ring=2,`: item 2 is empty; expected axis=size items separated by commas (e.g. ring=2,ulysses=2,tp=1)");
  EXPECT_EQ(Error("ring"), "mesh `ring`: `ring` is not axis=size; expected items like ring=2,ulysses=2,tp=1");
  EXPECT_EQ(Error("=2"), "mesh `=2`: `=2` is not axis=size; expected items like ring=2,ulysses=2,tp=1");
  EXPECT_EQ(Error("order=ring:ring:tp"),
            "mesh `order=ring:ring:tp`: order `ring:ring:tp` names `ring` twice; it names each of ring, ulysses and tp "
            "(and cfg) once, outermost first");
  EXPECT_EQ(Error("order=ring:tp"),
            "mesh `order=ring:tp`: order `ring:tp` names 2 axes; it names the three axes ring, ulysses and tp, "
            "outermost first (e.g. tp:ring:ulysses), or those and cfg");
  EXPECT_EQ(Error("order=ring:ulysses:TP"),
            "mesh `order=ring:ulysses:TP`: order `ring:ulysses:TP` names unknown axis `TP`; did you mean `tp`? (mesh "
            "keys are lower case)");
  EXPECT_EQ(Error("order=tp:ring:ulysses,order=tp:ring:ulysses"),
            "mesh `order=tp:ring:ulysses,order=tp:ring:ulysses`: `order` is given twice");
}

}  // namespace
}  // namespace weft::plan

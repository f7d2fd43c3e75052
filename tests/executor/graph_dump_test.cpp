// `weft-run --dump-graph` (executor/graph_dump.h): the graph of each built-in config, traced from
// the C++ model on the meta device, equals the committed graph tools/export_graph.py exported
// from diffusers for the same config -- every module, parameter, attribute, signature, attention
// site and traced call, in the same order -- except the producer line.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "compiler/model/graph_json.h"
#include "executor/graph_dump.h"
#include "runtime/models/registry.h"

namespace weft::exec {
namespace {

const std::string kSource = WEFT_SOURCE_DIR;

// The first line where `a` and `b` differ, with both lines, for a readable failure.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(sa, la));
    const bool more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "";
    if (la != lb || more_a != more_b) {
      return "line " + std::to_string(line) + ":\n  exported: " + la.substr(0, 600) + "\n  dumped:   " + lb.substr(0, 600);
    }
  }
}

class GraphDumpTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphDumpTest, EqualsTheGraphExportedFromDiffusers) {
  const models::ModelSpec spec = models::ParseModelSpec(GetParam());
  const std::string name = models::PublishedName(spec);
  const model::GraphReadResult exported = model::ReadGraphFile(kSource + "/graphs/" + name + ".graph.json");
  ASSERT_TRUE(exported.graph.has_value()) << name;
  const std::string config_file = ModelConfigFileFor(spec, kSource);
  ASSERT_FALSE(config_file.empty()) << name;

  model::ModelGraph dumped = DumpModelGraph(spec, config_file);
  // The dumped text must itself read back as a valid graph.
  const model::GraphReadResult reread = model::ReadGraphJson(model::WriteGraphJson(dumped));
  ASSERT_TRUE(reread.graph.has_value()) << model::FormatGraphError("dumped", reread.errors.front());
  model::ModelGraph normalized = *reread.graph;
  EXPECT_EQ(normalized.producer.at(0).second, "weft-run --dump-graph");
  normalized.producer = exported.graph->producer;  // not part of the model

  const std::string want = model::WriteGraphJson(*exported.graph);
  const std::string got = model::WriteGraphJson(normalized);
  EXPECT_EQ(got, want) << FirstDifference(want, got);
  EXPECT_EQ(model::GraphHash(normalized), model::GraphHash(*exported.graph));
  EXPECT_EQ(ModelGraphHash(spec), model::GraphHash(*exported.graph));
}

INSTANTIATE_TEST_SUITE_P(BuiltInConfigs, GraphDumpTest,
                         ::testing::Values("flux:tiny", "flux:small", "flux:dev", "flux:schnell", "wan:tiny",
                                           "wan:tiny-i2v", "wan:1.3b", "wan:14b"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string n = param.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(GraphDump, ModelConfigOfAnotherModelIsRefusedNamingTheKey) {
  const models::ModelSpec spec = models::ParseModelSpec("flux:dev");
  try {
    DumpModelGraph(spec, kSource + "/tools/model_configs/flux1-schnell.json");
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("flux1-schnell.json describes a different model than flux:dev: "
                                         "`guidance_embeds` is false there but true in flux:dev"),
              std::string::npos)
        << e.what();
  }
}

TEST(GraphDump, DifferentConfigsHashDifferently) {
  EXPECT_NE(ModelGraphHash(models::ParseModelSpec("flux:dev")), ModelGraphHash(models::ParseModelSpec("flux:schnell")));
  EXPECT_NE(ModelGraphHash(models::ParseModelSpec("wan:tiny")), ModelGraphHash(models::ParseModelSpec("wan:tiny-i2v")));
}

TEST(GraphDump, UnreadableModelConfigIsAClearError) {
  try {
    DumpModelGraph(models::ParseModelSpec("flux:tiny"), "/nonexistent/x.json");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "cannot read model config `/nonexistent/x.json`");
  }
}

}  // namespace
}  // namespace weft::exec

// Every committed graph in graphs/ reads cleanly, round-trips through the writer, and carries
// what the compiler needs: attention sites with heads, traced workloads, the root's signature.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/model/graph.h"
#include "compiler/model/graph_json.h"

namespace weft::model {
namespace {

std::vector<std::string> GraphFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(WEFT_GRAPHS_DIR)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 11 && name.substr(name.size() - 11) == ".graph.json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CommittedGraphsTest, ThereAreGraphs) { EXPECT_GE(GraphFiles().size(), 4u); }

TEST(CommittedGraphsTest, EveryGraphReadsAndRoundTrips) {
  for (const std::string& file : GraphFiles()) {
    SCOPED_TRACE(file);
    const GraphReadResult r = ReadGraphFile(file);
    ASSERT_TRUE(r.errors.empty()) << FormatGraphError(file, r.errors.front());
    const ModelGraph& g = *r.graph;
    EXPECT_FALSE(g.attention_sites.empty());
    EXPECT_GE(g.workloads.size(), 1u);
    EXPECT_TRUE(g.ConfigValue("num_attention_heads").has_value());
    ASSERT_NE(g.TypeOf(""), nullptr);
    EXPECT_EQ(g.TypeOf("")->args.at(0).name, "hidden_states");
    for (const AttentionSite& s : g.attention_sites) {
      EXPECT_GT(s.heads, 0) << s.path;
      EXPECT_GT(s.head_dim, 0) << s.path;
    }
    for (const Workload& w : g.workloads) {
      ASSERT_NE(w.FindCalls(""), nullptr) << w.name;
      EXPECT_FALSE(w.attention.empty()) << w.name;
    }
    const std::string written = WriteGraphJson(g);
    const GraphReadResult again = ReadGraphJson(written);
    ASSERT_TRUE(again.errors.empty()) << FormatGraphError(file + " (rewritten)", again.errors.front());
    EXPECT_EQ(GraphHash(*again.graph), GraphHash(g));
    EXPECT_EQ(WriteGraphJson(*again.graph), written);
  }
}

// The graphs of published models (issue 4) carry at least two workloads each.
TEST(CommittedGraphsTest, PublishedModelsHaveTwoWorkloads) {
  for (const char* name : {"flux1-dev", "flux2-dev", "qwen-image", "qwen-image-21", "wan2.1-t2v-14b",
                           "wan2.1-t2v-1.3b", "chronoedit-14b", "helios", "ltx-video-2b", "ltx-2", "minimax-h3"}) {
    const GraphReadResult r = ReadGraphFile(std::string(WEFT_GRAPHS_DIR) + "/" + name + ".graph.json");
    ASSERT_TRUE(r.graph.has_value()) << name;
    EXPECT_GE(r.graph->workloads.size(), 2u) << name;
  }
}

// Spot checks against the published configs (shared/reference/model-configs.md).
TEST(CommittedGraphsTest, FluxDevFacts) {
  const GraphReadResult r = ReadGraphFile(std::string(WEFT_GRAPHS_DIR) + "/flux1-dev.graph.json");
  ASSERT_TRUE(r.graph.has_value());
  const ModelGraph& g = *r.graph;
  EXPECT_EQ(g.class_name, "FluxTransformer2DModel");
  EXPECT_EQ(g.FindModule("transformer_blocks")->children.size(), 19u);
  EXPECT_EQ(g.FindModule("single_transformer_blocks")->children.size(), 38u);
  EXPECT_EQ(g.attention_sites.size(), 57u);
  const AttentionSite* joint = g.FindAttentionSite("transformer_blocks.7.attn");
  ASSERT_NE(joint, nullptr);
  EXPECT_EQ(joint->kind, AttentionKind::kJoint);
  EXPECT_EQ(joint->heads, 24);
  EXPECT_EQ(joint->head_dim, 128);
  EXPECT_EQ(g.FindModule("single_transformer_blocks.37.proj_out")->FindAttr("tp_packed_row_blocks")->values,
            (std::vector<int64_t>{3072, 12288}));
  EXPECT_EQ(g.ConfigValue("mlp_hidden_dim"), 12288);
  // Output counts of the forward signatures: the double block returns both streams.
  EXPECT_EQ(g.FindType("FluxTransformerBlock")->num_outputs, 2);
  EXPECT_EQ(g.FindType("Linear")->num_outputs, 1);
  EXPECT_EQ(g.TypeOf("")->num_outputs, 1);
  // About 11.9 B parameters in bf16.
  EXPECT_GT(g.ParamBytes(), 23'000'000'000);
  EXPECT_LT(g.ParamBytes(), 24'500'000'000);
  const Workload* w = g.FindWorkload("1024x1024");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->FindCalls("")->calls.at(0).FindArg("hidden_states")->shape, (std::vector<int64_t>{1, 4096, 64}));
  EXPECT_EQ(w->FindAttention("single_transformer_blocks.0.attn")->calls.at(0).q,
            (std::vector<int64_t>{1, 4608, 24, 128}));
  EXPECT_EQ(g.FindWorkload("1008x1008")->FindCalls("")->calls.at(0).FindArg("hidden_states")->shape,
            (std::vector<int64_t>{1, 3969, 64}));
}

// QwenImage 2.1 (class defaults; its forward reads img_mask's values, see compiler/model/README.md):
// one single-stream sequence of text then image tokens, and the block-causal prefill as two
// attention calls per block, the causal text segment, then the image queries over everything.
TEST(CommittedGraphsTest, QwenImage21Facts) {
  const GraphReadResult r = ReadGraphFile(std::string(WEFT_GRAPHS_DIR) + "/qwen-image-21.graph.json");
  ASSERT_TRUE(r.graph.has_value());
  const ModelGraph& g = *r.graph;
  EXPECT_EQ(g.class_name, "QwenImage21Transformer2DModel");
  EXPECT_EQ(g.FindModule("transformer_blocks")->children.size(), 32u);
  EXPECT_EQ(g.attention_sites.size(), 32u);
  const AttentionSite* attn = g.FindAttentionSite("transformer_blocks.31.attn");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->kind, AttentionKind::kSelf);
  EXPECT_EQ(attn->heads, 32);
  EXPECT_EQ(attn->head_dim, 128);
  EXPECT_EQ(g.ConfigValue("mlp_hidden_dim"), 12288);
  EXPECT_EQ(g.ConfigValue("context_in_dim"), 4096);
  // About 7.1 B parameters in bf16.
  EXPECT_GT(g.ParamBytes(), 14'000'000'000);
  EXPECT_LT(g.ParamBytes(), 14'500'000'000);
  const Workload* w = g.FindWorkload("1024x1024");
  ASSERT_NE(w, nullptr);
  const Call& root = w->FindCalls("")->calls.at(0);
  EXPECT_EQ(root.FindArg("hidden_states")->shape, (std::vector<int64_t>{1, 4096, 64}));
  EXPECT_EQ(root.FindArg("img_mask")->shape, (std::vector<int64_t>{1, 512 + 1024}));
  EXPECT_EQ(w->FindCalls("transformer_blocks.0")->calls.at(0).FindArg("hidden_states")->shape,
            (std::vector<int64_t>{1, 4608, 4096}));
  const SiteCalls* calls = w->FindAttention("transformer_blocks.0.attn");
  ASSERT_NE(calls, nullptr);
  ASSERT_EQ(calls->calls.size(), 2u);
  EXPECT_EQ(calls->calls[0].q, (std::vector<int64_t>{1, 512, 32, 128}));
  EXPECT_EQ(calls->calls[0].k, (std::vector<int64_t>{1, 512, 32, 128}));
  EXPECT_EQ(calls->calls[1].q, (std::vector<int64_t>{1, 4096, 32, 128}));
  EXPECT_EQ(calls->calls[1].k, (std::vector<int64_t>{1, 4608, 32, 128}));
  EXPECT_EQ(g.FindWorkload("992x992")->FindCalls("")->calls.at(0).FindArg("hidden_states")->shape,
            (std::vector<int64_t>{1, 3844, 64}));
}

TEST(CommittedGraphsTest, WanCrossAttentionReadsReplicatedText) {
  const GraphReadResult r = ReadGraphFile(std::string(WEFT_GRAPHS_DIR) + "/wan2.1-t2v-14b.graph.json");
  ASSERT_TRUE(r.graph.has_value());
  const ModelGraph& g = *r.graph;
  const AttentionSite* attn2 = g.FindAttentionSite("blocks.39.attn2");
  ASSERT_NE(attn2, nullptr);
  EXPECT_EQ(attn2->kind, AttentionKind::kCross);
  EXPECT_EQ(attn2->q_inputs, std::vector<std::string>{"hidden_states"});
  EXPECT_EQ(attn2->kv_inputs, std::vector<std::string>{"encoder_hidden_states"});
  EXPECT_EQ(attn2->heads, 40);
  const Workload* w = g.FindWorkload("1280x720x81");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->FindAttention("blocks.0.attn1")->calls.at(0).q, (std::vector<int64_t>{1, 75600, 40, 128}));
  EXPECT_EQ(w->FindAttention("blocks.0.attn2")->calls.at(0).k, (std::vector<int64_t>{1, 512, 40, 128}));
  // The rope module's outputs are what the diffusers plan splits (rank 4, dim 1).
  EXPECT_EQ(w->FindCalls("rope")->calls.at(0).outputs.at(0).shape, (std::vector<int64_t>{1, 75600, 1, 128}));
}

}  // namespace
}  // namespace weft::model

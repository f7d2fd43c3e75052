// The weft.graph/1 view of a program: for the configs whose graphs tools/export_graph.py also
// wrote (graphs/), the module tree, parameters and attention sites are the same; plans check
// against the view like against a graph.
#include <gtest/gtest.h>

#include "compiler/model/graph_json.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"

namespace weft::program {
namespace {

const std::string kPrograms = std::string(WEFT_FIXTURES) + "/programs";
const std::string kGraphs = WEFT_GRAPHS;

void ExpectSameStructure(const std::string& name, const std::string& file = "program.pt2") {
  const model::ModelGraph view = GraphOfProgram(ReadProgramFile(kPrograms + "/" + name + "/" + file));
  model::GraphReadResult read = model::ReadGraphFile(kGraphs + "/" + name + ".graph.json");
  ASSERT_TRUE(read.graph) << name;
  const model::ModelGraph& graph = *read.graph;
  EXPECT_EQ(view.class_name, graph.class_name);
  ASSERT_EQ(view.modules.size(), graph.modules.size()) << name;
  for (size_t i = 0; i < graph.modules.size(); ++i) {
    const model::Module& a = view.modules[i];
    const model::Module& b = graph.modules[i];
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.type, b.type) << a.path;
    EXPECT_EQ(a.container, b.container) << a.path;
    EXPECT_EQ(a.children, b.children) << a.path;
    ASSERT_EQ(a.attrs.size(), b.attrs.size()) << a.path;
    for (size_t k = 0; k < a.attrs.size(); ++k) {
      EXPECT_EQ(a.attrs[k].first, b.attrs[k].first) << a.path;
      EXPECT_EQ(a.attrs[k].second.values, b.attrs[k].second.values) << a.path << " " << a.attrs[k].first;
    }
    // Parameters: names, shapes, buffer-ness. Dtypes differ on purpose: the program is fp32, the
    // graph's trace bf16.
    ASSERT_EQ(a.params.size(), b.params.size()) << a.path;
    for (size_t k = 0; k < a.params.size(); ++k) {
      EXPECT_EQ(a.params[k].name, b.params[k].name) << a.path;
      EXPECT_EQ(a.params[k].shape, b.params[k].shape) << a.path << "." << a.params[k].name;
      EXPECT_EQ(a.params[k].buffer, b.params[k].buffer) << a.path << "." << a.params[k].name;
    }
  }
  ASSERT_EQ(view.attention_sites.size(), graph.attention_sites.size()) << name;
  for (size_t i = 0; i < graph.attention_sites.size(); ++i) {
    const model::AttentionSite& a = view.attention_sites[i];
    const model::AttentionSite& b = graph.attention_sites[i];
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.heads, b.heads) << a.path;
    EXPECT_EQ(a.head_dim, b.head_dim) << a.path;
    EXPECT_EQ(a.kind, b.kind) << a.path;
    EXPECT_EQ(a.q_inputs, b.q_inputs) << a.path;
    EXPECT_EQ(a.kv_inputs, b.kv_inputs) << a.path;
    EXPECT_EQ(a.traced, b.traced) << a.path;
  }
  // The structure hash covers signatures and config too; those the program knows the same way.
  EXPECT_EQ(view.Hash(), graph.Hash()) << name;
}

TEST(GraphViewTest, FluxTinyEqualsItsGraph) { ExpectSameStructure("flux-tiny"); }
TEST(GraphViewTest, WanTinyEqualsItsGraph) { ExpectSameStructure("wan-tiny"); }
TEST(GraphViewTest, WanTinyI2vEqualsItsGraph) { ExpectSameStructure("wan-tiny-i2v"); }
// The published configs: Flux.1-dev's program (bf16, exported at 1024x1024, batch 1) and Wan 2.1
// T2V 1.3B's (bf16, 832x480x81).
TEST(GraphViewTest, FluxDevEqualsItsGraph) { ExpectSameStructure("flux1-dev", "program_bf16.pt2"); }
TEST(GraphViewTest, Wan13bEqualsItsGraph) { ExpectSameStructure("wan2.1-t2v-1.3b", "program_bf16.pt2"); }

TEST(GraphViewTest, FluxDevTracesEqualTheGraphsAtBothWorkloads) {
  // Batch 1 like the graph's traces, so every module call's shapes must agree too.
  const model::ModelGraph view = GraphOfProgram(ReadProgramFile(kPrograms + "/flux1-dev/program_bf16.pt2"));
  model::GraphReadResult read = model::ReadGraphFile(kGraphs + "/flux1-dev.graph.json");
  ASSERT_TRUE(read.graph);
  for (const char* workload : {"1024x1024", "1008x1008"}) {
    const model::Workload* a = view.FindWorkload(workload);
    const model::Workload* b = read.graph->FindWorkload(workload);
    ASSERT_NE(a, nullptr) << workload;
    ASSERT_NE(b, nullptr) << workload;
    size_t compared = 0;
    for (const model::ModuleCalls& mc : b->calls) {
      const model::ModuleCalls* other = a->FindCalls(mc.module);
      if (other == nullptr) continue;  // a module whose call torch could not keep
      ASSERT_EQ(other->calls.size(), mc.calls.size()) << mc.module;
      for (size_t i = 0; i < mc.calls.size(); ++i) {
        ASSERT_EQ(other->calls[i].outputs.size(), mc.calls[i].outputs.size()) << mc.module;
        for (size_t k = 0; k < mc.calls[i].outputs.size(); ++k) {
          EXPECT_EQ(other->calls[i].outputs[k].shape, mc.calls[i].outputs[k].shape) << workload << " " << mc.module;
        }
        for (const auto& [arg, value] : mc.calls[i].args) {
          const model::Value* v = other->calls[i].FindArg(arg);
          if (v == nullptr || !value.IsTensor()) continue;
          EXPECT_EQ(v->shape, value.shape) << workload << " " << mc.module << " " << arg;
        }
      }
      ++compared;
    }
    EXPECT_GT(compared, 1000u) << workload;
    for (const model::SiteCalls& sc : b->attention) {
      const model::SiteCalls* other = a->FindAttention(sc.site);
      ASSERT_NE(other, nullptr) << sc.site;
      ASSERT_EQ(other->calls.size(), sc.calls.size()) << sc.site;
      EXPECT_EQ(other->calls[0].q, sc.calls[0].q) << workload << " " << sc.site;
      EXPECT_EQ(other->calls[0].k, sc.calls[0].k) << workload << " " << sc.site;
    }
  }
}

TEST(GraphViewTest, WorkloadTracesEvaluateTheSymbolicSizes) {
  const model::ModelGraph view = GraphOfProgram(ReadProgramFile(kPrograms + "/flux-tiny/program.pt2"));
  // 64x96 at batch 2: 24 image tokens and 8 text tokens.
  const model::Workload* w = view.FindWorkload("64x96");
  ASSERT_NE(w, nullptr);
  const model::ModuleCalls* proj_out = w->FindCalls("proj_out");
  ASSERT_NE(proj_out, nullptr);
  ASSERT_EQ(proj_out->calls.size(), 1u);
  EXPECT_EQ(proj_out->calls[0].outputs[0].shape, (std::vector<int64_t>{2, 24, 16}));
  const model::SiteCalls* joint = w->FindAttention("transformer_blocks.0.attn");
  ASSERT_NE(joint, nullptr);
  EXPECT_EQ(joint->calls[0].q, (std::vector<int64_t>{2, 32, 4, 16}));  // (B, S, H, D), S = 24 + 8
  const model::ModuleCalls* block = w->FindCalls("transformer_blocks.1");
  ASSERT_NE(block, nullptr);
  const model::Value* rotary = block->calls[0].FindArg("image_rotary_emb");
  ASSERT_NE(rotary, nullptr);
  ASSERT_EQ(rotary->kind, model::Value::Kind::kTuple);
  EXPECT_EQ(rotary->elements[0].shape, (std::vector<int64_t>{32, 16}));
}

TEST(GraphViewTest, SignaturesAroundSymbolicSizesAreKept) {
  // LTX's rope takes num_frames, height and width: the exporter passes them around the call
  // signature, which keeps the tensors (a plan splits rope's outputs).
  const model::ModelGraph view = GraphOfProgram(ReadProgramFile(kPrograms + "/ltx-video-tiny/program.pt2"));
  const model::Workload* w = view.FindWorkload("96x64x9");
  ASSERT_NE(w, nullptr);
  const model::ModuleCalls* rope = w->FindCalls("rope");
  ASSERT_NE(rope, nullptr);
  ASSERT_EQ(rope->calls[0].outputs.size(), 2u);
  EXPECT_EQ(rope->calls[0].outputs[0].shape, (std::vector<int64_t>{2, 12, 64}));  // (B, F*H*W, inner)
}

}  // namespace
}  // namespace weft::program

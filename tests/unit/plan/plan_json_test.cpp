#include "compiler/plan/plan_json.h"

#include <gtest/gtest.h>

#include <string>

#include "compiler/plan/execution_plan.h"

namespace weft::plan {
namespace {

Origin At(int line, int col) { return {"plans/flux.weft", line, col, false}; }

// A Flux-shaped plan on ring=2 x ulysses=2, with one TP-sharded Linear for coverage.
ExecutionPlan SamplePlan() {
  ExecutionPlan p;
  p.plan_name = "flux";
  p.plan_file = "plans/flux.weft";
  p.model_class = "FluxTransformer2DModel";
  p.graph_name = "flux1-dev";
  p.graph_hash = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  p.mesh.axes = {{"ring", 2}, {"tp", 2}, {"ulysses", 2}};
  p.mesh.world_size = 8;
  p.mesh.rotate_method = RotateMethod::kP2p;
  p.workload = {"1024x1024", {{"height", "1024"}, {"width", "1024"}}};

  ModuleStep root;
  root.module = "";
  Split hs;
  hs.argument = "hidden_states";
  hs.dim = 1;
  hs.rank = 3;
  hs.global_size = 4096;
  hs.sizes = SplitSizes(4096, 4);
  hs.origin = At(5, 5);
  Split ids = hs;
  ids.argument = "img_ids";
  ids.dim = 0;
  ids.rank = 2;
  ids.origin = At(7, 5);
  root.splits = {hs, ids};
  p.steps.push_back(root);

  ModuleStep attn;
  attn.module = "transformer_blocks.0.attn";
  Attention a;
  a.mode = AttentionMode::kUsp;
  a.heads = 24;
  a.head_dim = 128;
  a.local_heads = 12;
  a.ulysses = 2;
  a.ring = 2;
  a.rotate_method = RotateMethod::kP2p;
  a.q_len = a.kv_len = 4608;
  a.origin = {"plans/flux.weft", 5, 5, true};
  attn.attention = a;
  attn.cost.collectives = {{CollectiveOp::kAllToAll, "ulysses", 4, 1000}, {CollectiveOp::kSendRecv, "ring", 1, 2000}};
  p.steps.push_back(attn);

  ModuleStep q;
  q.module = "transformer_blocks.0.attn.to_out.0";
  TensorParallel t;
  t.style = ShardStyle::kRowwise;
  t.blocks = {3072};
  t.params = {{"weight", 1, {3072}, {3072, 3072}, {3072, 1536}}, {"bias", -1, {}, {3072}, {3072}}};
  t.all_reduce_output = true;
  t.origin = At(12, 3);
  q.tp = t;
  q.cost.collectives = {{CollectiveOp::kAllReduce, "tp", 1, 3000}};
  q.cost.weight_bytes = (3072 * 1536 + 3072) * 2;
  q.cost.activation_bytes = 2 * 1152 * 3072 * 2;
  p.steps.push_back(q);

  ModuleStep proj;
  proj.module = "proj_out";
  Gather g;
  g.output = 0;
  g.dim = 1;
  g.rank = 3;
  g.global_size = 4099;
  g.sizes = SplitSizes(4099, 4);
  g.uneven = true;
  g.origin = At(9, 3);
  proj.gathers = {g};
  p.steps.push_back(proj);
  SummarizeCost(p, 1000);
  return p;
}

TEST(ExecutionPlanTest, SplitSizesFollowChunkAndTensorSplit) {
  EXPECT_EQ(SplitSizes(4096, 4), (std::vector<int64_t>{1024, 1024, 1024, 1024}));
  EXPECT_EQ(SplitSizes(9, 4), (std::vector<int64_t>{3, 2, 2, 2}));
  EXPECT_EQ(SplitSizes(3969, 8), (std::vector<int64_t>{497, 496, 496, 496, 496, 496, 496, 496}));
  EXPECT_EQ(SplitSizes(2, 3), (std::vector<int64_t>{1, 1, 0}));
}

TEST(ExecutionPlanTest, MeshHelpers) {
  const ExecutionPlan p = SamplePlan();
  EXPECT_EQ(p.mesh.Cp(), 4);
  EXPECT_EQ(p.mesh.Tp(), 2);
  EXPECT_EQ(p.mesh.Size("fsdp"), 1);
  EXPECT_EQ(p.mesh.ToString(), "ring=2,tp=2,ulysses=2");
  EXPECT_TRUE(CheckPlan(p).empty()) << CheckPlan(p).front();
}

TEST(ExecutionPlanTest, SummarizeCostMultipliesCalls) {
  ExecutionPlan p = SamplePlan();
  p.steps[1].calls = 3;
  SummarizeCost(p, 1000);
  ASSERT_EQ(p.cost.per_axis.size(), 3u);
  EXPECT_EQ(p.cost.per_axis[0].axis, "ring");
  EXPECT_EQ(p.cost.per_axis[0].bytes, 6000);
  EXPECT_EQ(p.cost.per_axis[1].axis, "tp");
  EXPECT_EQ(p.cost.per_axis[2].axis, "ulysses");
  EXPECT_EQ(p.cost.per_axis[2].collectives, 12);
  EXPECT_EQ(p.cost.per_axis[2].bytes, 3000);
  EXPECT_EQ(p.cost.collectives, 3 + 1 + 12);
  EXPECT_EQ(p.cost.bytes, 6000 + 3000 + 3000);
  EXPECT_EQ(p.cost.weight_bytes, 1000 + (3072 * 1536 + 3072) * 2);
  EXPECT_EQ(p.cost.activation_bytes, 2 * 1152 * 3072 * 2);
}

TEST(PlanJsonTest, RoundTripIsExact) {
  const ExecutionPlan p = SamplePlan();
  const std::string text = WritePlanJson(p);
  const PlanReadResult r = ReadPlanJson(text);
  ASSERT_TRUE(r.errors.empty()) << FormatPlanError("p.json", r.errors.front());
  EXPECT_EQ(WritePlanJson(*r.plan), text);
  EXPECT_EQ(CanonicalPlanJson(*r.plan), CanonicalPlanJson(p));
  EXPECT_EQ(PlanContentHash(*r.plan), PlanContentHash(p));
  EXPECT_EQ(DumpPlan(*r.plan), DumpPlan(p));
  const ModuleStep* attn = r.plan->FindStep("transformer_blocks.0.attn");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->attention->mode, AttentionMode::kUsp);
  EXPECT_TRUE(attn->attention->origin.derived);
  EXPECT_EQ(r.plan->FindStep("proj_out")->gathers[0].sizes, (std::vector<int64_t>{1025, 1025, 1025, 1024}));
  EXPECT_EQ(r.plan->steps[0].splits[1].origin.ToString(), "plans/flux.weft:7:5");
}

// SamplePlan() compiled against a program ("model.pt2") with `edits`.
ExecutionPlan WithProgramEdits(std::vector<ProgramEdit> edits) {
  ExecutionPlan p = SamplePlan();
  ProgramEdits program;
  program.program = "model.pt2";
  program.program_hash = "sha256:" + std::string(64, '0');
  program.edits = std::move(edits);
  p.program = std::move(program);
  return p;
}

// Program edits keep every field through JSON: an attention whose mask over (query, key) pairs
// lays out a joint sequence keeps the streams' lengths it is reordered by (without them a runner
// would apply the mask in its own order, not the ranks').
TEST(PlanJsonTest, ProgramEditsRoundTripWithAnAttentionsMaskParts) {
  ProgramEdit split;
  split.kind = ProgramEdit::Kind::kSplit;
  split.value = "mask";
  split.dim = 1;
  split.rank = 2;
  split.parts = {"sym_size_int_3", "sym_size_int_4"};
  ProgramEdit attention;
  attention.kind = ProgramEdit::Kind::kAttention;
  attention.node = "scaled_dot_product_attention";
  attention.attention = Attention{};
  attention.attention->pair_mask = true;
  attention.parts = {"sym_size_int_15", "sym_size_int_12"};
  const ExecutionPlan p = WithProgramEdits({split, attention});
  const PlanReadResult r = ReadPlanJson(WritePlanJson(p));
  ASSERT_TRUE(r.errors.empty()) << FormatPlanError("p.json", r.errors.front());
  ASSERT_TRUE(r.plan->program.has_value());
  ASSERT_EQ(r.plan->program->edits.size(), 2u);
  EXPECT_EQ(r.plan->program->edits[0].parts, split.parts);
  EXPECT_EQ(r.plan->program->edits[1].parts, attention.parts);
  EXPECT_TRUE(r.plan->program->edits[1].attention->pair_mask);
  EXPECT_EQ(PlanContentHash(*r.plan), PlanContentHash(p));
}

// A whole value sliced over tp where it meets tp-sharded heads (Mochi's per-head RoPE tables)
// keeps its group through JSON; a gather over tp does not exist and is refused by name.
TEST(PlanJsonTest, ProgramEditsKeepATpSlice) {
  ProgramEdit slice;
  slice.kind = ProgramEdit::Kind::kSplit;
  slice.group = std::string(kTpAxis);
  slice.value = "cos_1";
  slice.node = "mul_21";
  slice.scope = "transformer_blocks.0.attn1";
  slice.dim = 1;
  slice.rank = 3;
  const ExecutionPlan p = WithProgramEdits({slice});
  const std::string json = WritePlanJson(p);
  const PlanReadResult r = ReadPlanJson(json);
  ASSERT_TRUE(r.errors.empty()) << FormatPlanError("p.json", r.errors.front());
  EXPECT_EQ(r.plan->program->edits.at(0).group, "tp");
  EXPECT_EQ(PlanContentHash(*r.plan), PlanContentHash(p));
  ProgramEdit gather = slice;
  gather.kind = ProgramEdit::Kind::kGather;
  const PlanReadResult refused = ReadPlanJson(WritePlanJson(WithProgramEdits({gather})));
  ASSERT_FALSE(refused.errors.empty());
  EXPECT_NE(FormatPlanError("p.json", refused.errors.front()).find("group `tp` is for splits and all-reduces only"),
            std::string::npos) << FormatPlanError("p.json", refused.errors.front());
}

// An attention over a joint sequence with streams every rank holds whole keeps them (without them
// a runner would attend the whole keys once per rank); a place other than the four is refused.
TEST(PlanJsonTest, ProgramEditsRoundTripWithAnAttentionsWholeStreams) {
  ProgramEdit attention;
  attention.kind = ProgramEdit::Kind::kAttention;
  attention.node = "scaled_dot_product_attention_1";
  attention.attention = Attention{};
  attention.whole_parts = {{"index", 2, "q_after"}, {"index_1", 2, "kv_after"}};
  const ExecutionPlan p = WithProgramEdits({attention});
  const std::string json = WritePlanJson(p);
  const PlanReadResult r = ReadPlanJson(json);
  ASSERT_TRUE(r.errors.empty()) << FormatPlanError("p.json", r.errors.front());
  ASSERT_TRUE(r.plan->program.has_value());
  EXPECT_EQ(r.plan->program->edits.at(0).whole_parts, attention.whole_parts);
  EXPECT_EQ(PlanContentHash(*r.plan), PlanContentHash(p));
  std::string bad = json;
  const size_t at = bad.find("\"q_after\"");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 9, "\"q_middle\"");
  const PlanReadResult refused = ReadPlanJson(bad);
  ASSERT_FALSE(refused.errors.empty());
  EXPECT_NE(FormatPlanError("p.json", refused.errors.front()).find("`q_middle` is not one of q_before, q_after, kv_before, kv_after"),
            std::string::npos) << FormatPlanError("p.json", refused.errors.front());
}

TEST(PlanJsonTest, HashCoversContentButNotLayout) {
  const ExecutionPlan p = SamplePlan();
  ExecutionPlan q = SamplePlan();
  EXPECT_EQ(PlanContentHash(p), PlanContentHash(q));
  q.steps[0].splits[0].origin.line = 6;  // origins are content: runtime errors point at them
  EXPECT_NE(PlanContentHash(p), PlanContentHash(q));
  ExecutionPlan m = SamplePlan();
  m.mesh.rotate_method = RotateMethod::kAllGather;
  EXPECT_NE(PlanContentHash(p), PlanContentHash(m));
  EXPECT_EQ(PlanContentHash(p).size(), 7u + 64u);
  // Whitespace does not matter: the hash is of the content, not the text.
  std::string text = WritePlanJson(p);
  std::string spaced;
  for (char c : text) spaced += (c == ',' ? std::string(", ") : std::string(1, c));
  EXPECT_TRUE(ReadPlanJson(spaced).errors.empty());
}

TEST(PlanJsonTest, EditedPlanIsRefused) {
  std::string text = WritePlanJson(SamplePlan());
  const size_t at = text.find("\"global_size\":4096");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "\"global_size\":4097");
  // The sizes no longer sum up: a structural error, located.
  PlanReadResult r = ReadPlanJson(text);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors[0].message.find("sum to 4096, not 4097"), std::string::npos) << r.errors[0].message;

  text = WritePlanJson(SamplePlan());
  const size_t line = text.find("\"line\":12");
  ASSERT_NE(line, std::string::npos);
  text.replace(line, 9, "\"line\":13");
  r = ReadPlanJson(text);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].pointer, "/content_hash");
  EXPECT_EQ(r.errors[0].line, 4);
  EXPECT_NE(r.errors[0].message.find("compile it again"), std::string::npos);
}

TEST(PlanJsonTest, UnknownFieldsAndEnumsArePointedAt) {
  std::string text = WritePlanJson(SamplePlan());
  text.replace(text.find("\"mode\":\"usp\""), 12, "\"mode\":\"zigzag\"");
  text.replace(text.find("\"world_size\":8"), 14, "\"world_size\":8,\"colour\":1");
  const PlanReadResult r = ReadPlanJson(text);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].pointer, "/mesh/colour");
  EXPECT_EQ(r.errors[1].pointer, "/steps/1/attention/mode");
  EXPECT_NE(r.errors[1].message.find("unknown mode `zigzag`; expected `local`, `ulysses`, `ring` or `usp`"),
            std::string::npos);
  EXPECT_GT(r.errors[1].line, 4);
  EXPECT_EQ(FormatPlanError("p.json", r.errors[0]).rfind("p.json:", 0), 0u);
}

TEST(PlanJsonTest, StructuralProblemsAreReported) {
  ExecutionPlan p = SamplePlan();
  p.mesh.world_size = 6;
  p.steps[0].splits[0].dim = 3;
  p.steps[1].attention->local_heads = 11;
  p.steps.push_back(p.steps[0]);
  const auto problems = CheckPlan(p);
  ASSERT_EQ(problems.size(), 5u) << ::testing::PrintToString(problems);  // the copy repeats the dim problem
  EXPECT_EQ(problems[0], "mesh ring=2,tp=2,ulysses=2 has 8 ranks; world size is 6");
  EXPECT_NE(problems[1].find("dim 3 is outside rank 3"), std::string::npos);
  EXPECT_NE(problems[2].find("11 local heads + 0 padding is not divisible by ulysses 2"), std::string::npos);
  EXPECT_NE(problems[3].find("appears twice"), std::string::npos);
  // The reader refuses such a plan even with a matching hash.
  EXPECT_FALSE(ReadPlanJson(WritePlanJson(p)).errors.empty());
}

TEST(PlanJsonTest, MalformedAndVersion) {
  PlanReadResult r = ReadPlanJson("{\"format\": \"weft.plan/1\",\n \"version\": }");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 2);
  std::string text = WritePlanJson(SamplePlan());
  text.replace(text.find("weft.plan/1"), 11, "weft.plan/2");
  r = ReadPlanJson(text);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors[0].pointer, "/format");
}

TEST(PlanJsonTest, DumpIsReadable) {
  const std::string dump = DumpPlan(SamplePlan());
  EXPECT_NE(dump.find("mesh ring=2,tp=2,ulysses=2 world=8 rotate=p2p fp32-merge\n"), std::string::npos) << dump;
  EXPECT_NE(dump.find("  split argument hidden_states dim 1 rank 3: 4096 -> [1024 x4]  @ plans/flux.weft:5:5\n"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("  gather output 0 dim 1 rank 3: [1025,1025,1025,1024] -> 4099 uneven  @ plans/flux.weft:9:3\n"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("  tp rowwise blocks=[3072] all_reduce  @ plans/flux.weft:12:3\n    weight [3072,3072] -> "
                      "[3072,1536] dim 1\n    bias [3072] -> [3072]\n"),
            std::string::npos)
      << dump;
}

TEST(PlanJsonTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1210318848), "1.21 GB");
  EXPECT_EQ(FormatBytes(28311552), "28.3 MB");
  EXPECT_EQ(FormatBytes(163000000000), "163 GB");
}

TEST(ExecutionPlanTest, SummarizeCostSaturates) {
  ExecutionPlan p = SamplePlan();
  p.steps[1].calls = int64_t{1} << 62;
  SummarizeCost(p, 1000);
  EXPECT_EQ(p.cost.bytes, INT64_MAX);  // not a wrapped (or zero) count
}

TEST(ExecutionPlanTest, CheckPlanReportsSizesThatOverflow) {
  ExecutionPlan p = SamplePlan();
  Split& s = p.steps[0].splits[0];
  s.sizes.assign(s.sizes.size(), int64_t{1} << 62);
  const std::vector<std::string> problems = CheckPlan(p);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find(": per-rank sizes sum past 9223372036854775807 (2^63 - 1), not to "), std::string::npos)
      << problems[0];
}

}  // namespace
}  // namespace weft::plan

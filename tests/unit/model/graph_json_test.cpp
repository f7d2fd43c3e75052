#include "compiler/model/graph_json.h"

#include <gtest/gtest.h>

#include <string>

#include "compiler/model/graph.h"

namespace weft::model {
namespace {

// A two-block toy DiT: root -> blocks (list) -> {attn (to_q, to_k, to_v, to_out), ff}.
ModelGraph TinyGraph() {
  ModelGraph g;
  g.name = "tiny";
  g.class_name = "TinyDiT";
  g.source = "unit test";
  g.model_config_json = R"({"heads":4,"num_layers":2})";
  g.producer = {{"tool", "graph_json_test"}};
  g.config = {{"num_attention_heads", 4}, {"attention_head_dim", 8}, {"inner_dim", 32}, {"mlp_hidden_dim", 128}};
  g.types = {{"TinyDiT", "tests", {{"hidden_states", false, false}, {"encoder_hidden_states", true, false}}, false},
             {"ModuleList", "torch.nn", {}, true},
             {"Block", "tests", {{"hidden_states", false, false}, {"temb", false, false}}, false},
             {"Attention", "tests", {{"hidden_states", false, false}, {"encoder_hidden_states", true, false}}, false},
             {"Linear", "torch.nn", {{"input", false, false}}, false}};
  auto linear = [](std::string path, int64_t in, int64_t out) {
    Module m;
    m.path = std::move(path);
    m.type = "Linear";
    m.params = {{"weight", {out, in}, "bf16", false}, {"bias", {out}, "bf16", false}};
    m.attrs = {{"bias", Attr::Bool(true)}, {"in_features", Attr::Int(in)}, {"out_features", Attr::Int(out)}};
    return m;
  };
  Module root{"", "TinyDiT", Container::kNone, {"blocks", "proj_out"}, {}, {}};
  Module blocks{"blocks", "ModuleList", Container::kList, {"0", "1"}, {}, {}};
  g.modules = {root, blocks};
  for (int b = 0; b < 2; ++b) {
    const std::string p = "blocks." + std::to_string(b);
    g.modules.push_back({p, "Block", Container::kNone, {"attn", "ff"}, {}, {}});
    Module attn{p + ".attn", "Attention", Container::kNone, {"to_q", "to_k", "to_v"}, {}, {{"heads", Attr::Int(4)}}};
    g.modules.push_back(attn);
    g.modules.push_back(linear(p + ".attn.to_q", 32, 32));
    g.modules.push_back(linear(p + ".attn.to_k", 32, 32));
    g.modules.push_back(linear(p + ".attn.to_v", 32, 32));
    g.modules.push_back(linear(p + ".ff", 32, 128));
  }
  Module proj = linear("proj_out", 32, 16);
  proj.attrs.emplace_back("tp_packed_row_blocks", Attr::IntList({16, 16}));
  g.modules.push_back(proj);
  g.attention_sites = {{"blocks.0.attn", 4, 8, AttentionKind::kSelf, {"hidden_states"}, {"hidden_states"}, true},
                       {"blocks.1.attn", 4, 8, AttentionKind::kCross, {"hidden_states"}, {"encoder_hidden_states"}, true}};
  Workload w;
  w.name = "64tok";
  w.params = {{"tokens", "64"}, {"shape", "[1,2]"}};
  Call root_call;
  root_call.args = {{"hidden_states", Value::Tensor({1, 64, 32}, "bf16")},
                    {"encoder_hidden_states", Value::None()},
                    {"rope", Value::Tuple({Value::Tensor({64, 8}, "f32"), Value::Tensor({64, 8}, "f32")})},
                    {"img_shapes", Value::Scalar("[[1,8,8]]")}};
  root_call.positional = 1;
  root_call.outputs = {Value::Tensor({1, 64, 16}, "bf16")};
  w.calls.push_back({"", {root_call}});
  for (int b = 0; b < 2; ++b) {
    Call c;
    c.args = {{"hidden_states", Value::Tensor({1, 64, 32}, "bf16")}, {"temb", Value::Tensor({1, 32}, "bf16")}};
    c.outputs = {Value::Tensor({1, 64, 32}, "bf16")};
    w.calls.push_back({"blocks." + std::to_string(b), {c}});
    w.attention.push_back({"blocks." + std::to_string(b) + ".attn", {{{1, 64, 4, 8}, {1, 64, 4, 8}, {1, 64, 4, 8}}}});
  }
  g.workloads.push_back(w);
  g.Reindex();
  return g;
}

TEST(GraphJsonTest, TinyGraphIsConsistent) {
  const ModelGraph g = TinyGraph();
  EXPECT_TRUE(CheckGraph(g).empty());
  EXPECT_EQ(g.ParamBytes(), 2 * 2 * (3 * (32 * 32 + 32) + (32 * 128 + 128)) + 2 * (32 * 16 + 16));
  ASSERT_NE(g.FindModule("blocks.1.attn.to_v"), nullptr);
  EXPECT_EQ(g.FindModule("blocks.1.attn.to_v")->IntAttr("out_features"), 32);
  EXPECT_EQ(g.TypeOf("blocks.0")->ArgIndex("temb"), 1u);
  EXPECT_EQ(g.ConfigValue("mlp_hidden_dim"), 128);
  EXPECT_EQ(g.FindWorkload("64tok")->IntParam("tokens"), 64);
  EXPECT_EQ(g.FindWorkload("64tok")->IntParam("shape"), std::nullopt);
}

// The Python-free round trip: write, read back, write again; both texts and hashes agree.
TEST(GraphJsonTest, WriteReadRoundTrip) {
  const ModelGraph g = TinyGraph();
  const std::string text = WriteGraphJson(g);
  // Equal blocks collapse into one pattern line.
  EXPECT_NE(text.find("\"path\":\"blocks.{0,1}.attn.to_q\""), std::string::npos) << text;
  const GraphReadResult r = ReadGraphJson(text);
  ASSERT_TRUE(r.errors.empty()) << FormatGraphError("tiny", r.errors.front());
  ASSERT_TRUE(r.graph.has_value());
  EXPECT_EQ(WriteGraphJson(*r.graph), text);
  EXPECT_EQ(CanonicalGraphJson(*r.graph), CanonicalGraphJson(g));
  EXPECT_EQ(GraphHash(*r.graph), GraphHash(g));
  EXPECT_EQ(r.graph->modules.size(), g.modules.size());
  for (size_t i = 0; i < g.modules.size(); ++i) EXPECT_EQ(r.graph->modules[i].path, g.modules[i].path);
  const Workload& w = r.graph->workloads.at(0);
  const Call& root = w.FindCalls("")->calls.at(0);
  ASSERT_EQ(root.args.size(), 4u);
  EXPECT_EQ(root.args[0].first, "hidden_states");  // argument order is kept
  EXPECT_EQ(root.args[1].second.kind, Value::Kind::kNone);
  EXPECT_EQ(root.args[2].second.elements.at(1).shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(root.args[3].second.scalar_json, "[[1,8,8]]");
  EXPECT_EQ(w.FindAttention("blocks.1.attn")->calls.at(0).q, (std::vector<int64_t>{1, 64, 4, 8}));
  EXPECT_EQ(r.graph->FindModule("proj_out")->FindAttr("tp_packed_row_blocks")->values,
            (std::vector<int64_t>{16, 16}));
}

TEST(GraphJsonTest, HashIgnoresNamesProvenanceAndTraces) {
  ModelGraph a = TinyGraph();
  ModelGraph b = TinyGraph();
  b.name = "renamed";
  b.source = "elsewhere";
  b.producer.clear();
  b.workloads.clear();
  b.types[0].python_module = "runtime.models";
  b.types[4].num_outputs = 1;
  for (Module& m : b.modules) {
    for (Param& p : m.params) p.dtype = "f32";  // the same model loaded in fp32
  }
  EXPECT_EQ(GraphHash(a), GraphHash(b));
  EXPECT_EQ(GraphHash(a).rfind("sha256:", 0), 0u);
  EXPECT_EQ(GraphHash(a).size(), 7u + 64u);
  // Structure changes the hash.
  b.modules.back().params[0].shape = {16, 31};
  EXPECT_NE(GraphHash(a), GraphHash(b));
  ModelGraph c = TinyGraph();
  c.attention_sites[1].heads = 2;
  EXPECT_NE(GraphHash(a), GraphHash(c));
  ModelGraph d = TinyGraph();
  d.config[0].second = 8;
  EXPECT_NE(GraphHash(a), GraphHash(d));
}

// The errors name the JSON pointer of the offending value, and its line:col.
std::vector<GraphError> Errors(const std::string& text) {
  const GraphReadResult r = ReadGraphJson(text);
  EXPECT_FALSE(r.graph.has_value());
  return r.errors;
}

std::string Minimal(const std::string& modules, const std::string& extra = "") {
  return R"({"format": "weft.graph/1", "model": {"name": "m", "class_name": "M"}, "config": {},
"types": {"M": {"forward": {"args": []}}, "Linear": {"forward": {"args": [{"name": "input"}]}}},
"modules": )" + modules + R"(, "attention_sites": [], "workloads": [])" + extra + "}";
}

TEST(GraphJsonTest, MinimalDocumentReads) {
  const GraphReadResult r = ReadGraphJson(Minimal(R"([{"path": "", "type": "M"}])"));
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].message;
  EXPECT_EQ(r.graph->modules.size(), 1u);
}

TEST(GraphJsonTest, MalformedJsonHasLineAndColumn) {
  const auto errors = Errors("{\n  \"format\": \"weft.graph/1\",\n  \"model\": [1, 2,]\n}");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].line, 3);
  EXPECT_NE(errors[0].message.find("malformed JSON"), std::string::npos);
}

TEST(GraphJsonTest, WrongFormatVersion) {
  std::string text = Minimal(R"([{"path": "", "type": "M"}])");
  text.replace(text.find("weft.graph/1"), 12, "weft.graph/9");
  const auto errors = Errors(text);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].pointer, "/format");
  EXPECT_EQ(errors[0].line, 1);
  EXPECT_EQ(errors[0].col, 12);
}

TEST(GraphJsonTest, UnknownFieldAndBadTypesAreAllReported) {
  const auto errors = Errors(Minimal(
      R"([{"path": "", "type": "M", "children": ["a"]},
          {"path": "a", "type": "Linear", "params": [{"name": "weight", "shape": [3, "x"], "dtype": "bf16"},
                                                    {"name": "bias", "shape": [3], "dtype": "float99"}],
           "colour": "red"}])"));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].pointer, "/modules/1/colour");
  EXPECT_NE(errors[0].message.find("unknown field `colour`"), std::string::npos);
  EXPECT_EQ(errors[1].pointer, "/modules/1/params/0/shape/1");
  EXPECT_EQ(errors[1].message, "expected an integer, found a string");
  EXPECT_EQ(errors[2].pointer, "/modules/1/params/1/dtype");
  EXPECT_EQ(errors[2].line, 5);
  EXPECT_EQ(FormatGraphError("g.json", errors[1]).rfind("g.json:4:", 0), 0u) << FormatGraphError("g.json", errors[1]);
}

TEST(GraphJsonTest, StructuralProblems) {
  auto errors = Errors(Minimal(R"([{"path": "", "type": "M", "children": ["a", "b"]},
                                   {"path": "a", "type": "Nope"}, {"path": "c", "type": "M"}])"));
  std::vector<std::string> messages;
  for (const auto& e : errors) messages.push_back(e.pointer + " " + e.message);
  ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(messages);
  EXPECT_EQ(errors[0].pointer, "/modules/2");
  EXPECT_NE(errors[0].message.find("`c` is not reachable"), std::string::npos);

  errors = Errors(Minimal(R"([{"path": "", "type": "M", "children": ["a", "b"]}, {"path": "a", "type": "Nope"}])"));
  messages.clear();
  for (const auto& e : errors) messages.push_back(e.message);
  ASSERT_EQ(errors.size(), 2u) << ::testing::PrintToString(messages);
  EXPECT_NE(messages[1].find("type `Nope`"), std::string::npos);
  EXPECT_NE(messages[0].find("no module `b`"), std::string::npos);
}

TEST(GraphJsonTest, BadPatternAndDuplicates) {
  auto errors = Errors(Minimal(R"([{"path": "", "type": "M", "children": ["l"]},
                                   {"path": "l", "type": "M", "container": "list", "children": ["0", "1"]},
                                   {"path": "l.{0..1}", "type": "Linear"}, {"path": "l.1", "type": "Linear"},
                                   {"path": "l.{1..0}", "type": "Linear"}])"));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].pointer, "/modules/3/path");
  EXPECT_NE(errors[0].message.find("also described at /modules/2"), std::string::npos);
  EXPECT_EQ(errors[1].pointer, "/modules/4/path");
  EXPECT_NE(errors[1].message.find("descending"), std::string::npos);
}

TEST(GraphJsonTest, AttentionSiteAndTraceErrors) {
  const auto errors = Errors(Minimal(R"([{"path": "", "type": "M"}])", "").replace(
      Minimal(R"([{"path": "", "type": "M"}])").find("\"attention_sites\": []"), 21,
      R"("attention_sites": [{"path": "", "heads": 4, "head_dim": 8, "kind": "sideways", "q": [], "kv": []}])"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].pointer, "/attention_sites/0/kind");
  EXPECT_NE(errors[0].message.find("expected `self`, `cross` or `joint`"), std::string::npos);
}

TEST(GraphJsonTest, ErrorCapIsHonoured) {
  std::string modules = R"([{"path": "", "type": "M"})";
  for (int i = 0; i < 100; ++i) modules += R"(, {"path": "x)" + std::to_string(i) + R"(", "type": 1})";
  modules += "]";
  const GraphReadResult r = ReadGraphJson(Minimal(modules), 10);
  EXPECT_EQ(r.errors.size(), 10u);
}

// One error's "pointer message" for exact comparisons.
std::string Only(const std::string& text) {
  const auto errors = Errors(text);
  if (errors.size() != 1) return std::to_string(errors.size()) + " errors";
  return errors[0].pointer + " " + errors[0].message;
}

TEST(GraphJsonTest, RootListingItselfIsRefused) {
  EXPECT_EQ(Only(Minimal(R"([{"path": "", "type": "M", "children": [""]}])")),
            "/modules/0/children/0 the root module lists itself as a child (an empty name in its `children`); "
            "children are named relative to their parent");
  EXPECT_EQ(Only(Minimal(R"([{"path": "", "type": "M", "children": ["a"]}, {"path": "a", "type": "M", "children": [""]}])")),
            "/modules/1/children/0 module `a` lists an empty child name, which would be itself");
  EXPECT_EQ(Only(Minimal(R"([{"path": "", "type": "M", "children": ["a", "a"]}, {"path": "a", "type": "M"}])")),
            "/modules/0/children/1 the root module lists child `a` twice");
  EXPECT_EQ(Only(Minimal(R"([{"path": "", "type": "M", "children": ["a.b"]}])")),
            "/modules/0/children/0 the root module lists child `a.b`; a child name is one path component, without `.`");
  // CheckGraph says the same for graphs built in memory.
  ModelGraph g = *ReadGraphJson(Minimal(R"([{"path": "", "type": "M"}])")).graph;
  g.modules[0].children = {""};
  g.Reindex();
  const std::vector<std::string> problems = CheckGraph(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "the root module lists itself as a child (an empty name in its `children`); children are named relative "
            "to their parent");
}

TEST(GraphJsonTest, HeadsOfZeroAreRefusedAtTheSite) {
  std::string text = Minimal(R"([{"path": "", "type": "M", "attrs": {"heads": -4}}])");
  text.replace(text.find("\"attention_sites\": []"), 21,
               R"("attention_sites": [{"path": "", "heads": 0, "head_dim": 0, "kind": "self", "q": [], "kv": []}])");
  text.replace(text.find("\"config\": {}"), 12, R"("config": {"num_attention_heads": 0, "attention_head_dim": -1})");
  const auto errors = Errors(text);
  std::vector<std::string> messages;
  for (const auto& e : errors) messages.push_back(e.pointer + " " + e.message);
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "/config/num_attention_heads config value `num_attention_heads` is 0; a model has at least "
                          "one attention head",
                          "/config/attention_head_dim config value `attention_head_dim` is -1; an attention head has at "
                          "least one dimension",
                          "/modules/0/attrs/heads attribute `heads` is -4; an attention module has at least one head",
                          "/attention_sites/0/heads attention site `` has 0 heads; an attention site has at least one "
                          "head",
                          "/attention_sites/0/head_dim attention site `` has head_dim 0; an attention head has at least "
                          "one dimension"}));
}

TEST(GraphJsonTest, SizesPastInt64AreRefused) {
  EXPECT_EQ(Only(Minimal(R"([{"path": "", "type": "M", "children": ["a"]},
                             {"path": "a", "type": "Linear", "params": [{"name": "weight", "shape": [2147483648, 2147483648], "dtype": "f32"}]}])")),
            "/modules/1/params/0/shape parameter `weight`: a `f32` tensor of shape [2147483648, 2147483648] needs "
            "18446744073709551616 bytes, more than the 9223372036854775807 (2^63 - 1) a size may count");
  // One element short of 2^63 bytes is fine; the sum of two such parameters is not.
  const std::string half = R"({"name": "w", "shape": [4611686018427387904], "dtype": "u8"})";
  EXPECT_EQ(Only(Minimal(R"([{"path": "", "type": "M", "params": [)" + half + ", " + half + "]}]")),
            " the parameters need more than the 9223372036854775807 (2^63 - 1) bytes a size may count");
  std::string traced = Minimal(R"([{"path": "", "type": "M"}])");
  traced.replace(traced.find("\"workloads\": []"), 15,
                 R"("workloads": [{"name": "w", "calls": [{"module": "", "calls": [{"args": {},
                     "outputs": [{"shape": [1, 4611686018427387904, 64], "dtype": "bf16"}]}]}]}])");
  EXPECT_EQ(Only(traced),
            "/workloads/0/calls/0/calls/0/outputs/0/shape a `bf16` tensor of shape [1, 4611686018427387904, 64] needs "
            "590295810358705651712 bytes, more than the 9223372036854775807 (2^63 - 1) a size may count");
}

TEST(GraphTest, SizesSaturateInsteadOfWrapping) {
  Param p{"w", {2147483648, 2147483648}, "f32", false};
  EXPECT_EQ(p.Numel(), int64_t{1} << 62);
  EXPECT_EQ(p.Bytes(), INT64_MAX);  // was 0: 2^64 wrapped
  Value v;
  v.kind = Value::Kind::kTensor;
  v.shape = {int64_t{1} << 62, 4};
  v.dtype = "bf16";
  EXPECT_EQ(v.Bytes(), INT64_MAX);
  Value t = Value::Tuple({v, v});
  EXPECT_EQ(t.Bytes(), INT64_MAX);
}

}  // namespace
}  // namespace weft::model

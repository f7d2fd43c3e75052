// compile_bench [--repeat N]: wall time of the compiler on
//  1. the corpus: every plans/*.weft against every graph of its class, at every workload, for
//     the meshes of issue 4 (ulysses 2/4/8, ring 2/4, ring2 x ulysses2, ring2 x ulysses4,
//     tp 2/4, tp2 x ulysses2), with uneven splits allowed so that every combination binds;
//  2. a synthetic graph of 10,000 modules (400 blocks x 25 modules, traced) and a CP x TP plan
//     over it: parse + bind + lower, and the graph hash.
// Prints the median of N runs (default 5) of each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace {

using Clock = std::chrono::steady_clock;
using weft::model::Container;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

weft::plan::Mesh MeshOf(std::vector<std::pair<std::string, int64_t>> axes) {
  weft::plan::Mesh m;
  for (auto& [n, s] : axes) m.axes.push_back({n, s});
  m.ulysses_anything = true;  // the corpus has uneven workloads (1008x1008, 832x480 Helios)
  return m;
}

struct CorpusResult {
  int combinations = 0;
  int clean = 0;
  double ms = 0;
  double load_ms = 0;  // reading the graphs
};

CorpusResult RunCorpus() {
  const auto start = Clock::now();
  CorpusResult r;
  const std::string root = WEFT_SOURCE_DIR;
  std::vector<weft::model::ModelGraph> graphs;
  for (const auto& e : std::filesystem::directory_iterator(root + "/graphs")) {
    auto g = weft::model::ReadGraphFile(e.path().string());
    if (g.graph) graphs.push_back(std::move(*g.graph));
  }
  r.load_ms = Ms(start, Clock::now());
  const std::vector<weft::plan::Mesh> meshes = {
      MeshOf({{"ulysses", 2}}), MeshOf({{"ulysses", 4}}), MeshOf({{"ulysses", 8}}), MeshOf({{"ring", 2}}),
      MeshOf({{"ring", 4}}), MeshOf({{"ring", 2}, {"ulysses", 2}}), MeshOf({{"ring", 2}, {"ulysses", 4}}),
      MeshOf({{"tp", 2}}), MeshOf({{"tp", 4}}), MeshOf({{"tp", 2}, {"ulysses", 2}})};
  weft::source::SourceManager sources;
  for (const auto& e : std::filesystem::directory_iterator(root + "/plans")) {
    if (e.path().extension() != ".weft") continue;
    std::string error;
    auto buffer = weft::source::SourceBuffer::FromFile(e.path().string(), &error);
    if (!buffer) continue;
    const auto& src = sources.Get(sources.Add(std::move(*buffer)));
    weft::diag::CollectingConsumer sink;
    weft::diag::Emitter diags(sources, sink, 20);
    auto ast = weft::syntax::ParsePlan(src, diags);
    if (!ast || ast->has_error) continue;
    const bool has_tp = ast->tensor_parallel.has_value();
    for (const auto& g : graphs) {
      if (g.class_name != ast->model.text) continue;
      for (const auto& w : g.workloads) {
        for (const auto& mesh : meshes) {
          if (mesh.Tp() > 1 && !has_tp) continue;
          weft::bind::BindOptions options;
          options.mesh = mesh;
          options.workload = w.name;
          options.plan_file = e.path().string();
          weft::diag::CollectingConsumer out;
          weft::diag::Emitter d(sources, out, 20);
          ++r.combinations;
          if (weft::CompileAst(*ast, g, options, d)) ++r.clean;
        }
      }
    }
  }
  r.ms = Ms(start, Clock::now());
  return r;
}

weft::model::ModelGraph SyntheticGraph(int blocks) {
  using namespace weft::model;
  ModelGraph g;
  g.name = "synthetic";
  g.class_name = "SynthDiT";
  g.model_config_json = "{}";
  g.config = {{"num_attention_heads", 16}, {"attention_head_dim", 64}, {"inner_dim", 1024}, {"mlp_hidden_dim", 4096}};
  g.types = {{"SynthDiT", "", {{"hidden_states", false, false}, {"temb", false, false}}, false},
             {"ModuleList", "", {}, true},
             {"Block", "", {{"hidden_states", false, false}, {"temb", false, false}}, false},
             {"Attention", "", {{"hidden_states", false, false}, {"encoder_hidden_states", true, false}}, false},
             {"Linear", "", {{"input", false, false}}, false},
             {"LayerNorm", "", {{"input", false, false}}, false},
             {"GELU", "", {{"input", false, false}}, false},
             {"Dropout", "", {{"input", false, false}}, false},
             {"FeedForward", "", {{"hidden_states", false, false}}, false},
             {"AdaNorm", "", {{"x", false, false}, {"emb", false, false}}, false}};
  const int64_t S = 4096, D = 1024, F = 4096;
  auto linear = [&](std::string path, int64_t in, int64_t out) {
    Module m{std::move(path), "Linear", Container::kNone, {}, {}, {}};
    m.params = {{"weight", {out, in}, "bf16", false}, {"bias", {out}, "bf16", false}};
    m.attrs = {{"bias", Attr::Bool(true)}, {"in_features", Attr::Int(in)}, {"out_features", Attr::Int(out)}};
    return m;
  };
  std::vector<std::string> items;
  for (int b = 0; b < blocks; ++b) items.push_back(std::to_string(b));
  g.modules.push_back({"", "SynthDiT", Container::kNone, {"blocks", "proj_out"}, {}, {}});
  g.modules.push_back({"blocks", "ModuleList", Container::kList, items, {}, {}});
  Workload w;
  w.name = "4096tok";
  w.params = {{"tokens", "4096"}};
  const Value x = Value::Tensor({1, S, D}, "bf16");
  const Value h = Value::Tensor({1, S, F}, "bf16");
  const Value t = Value::Tensor({1, D}, "bf16");
  auto call = [&](const std::string& path, std::vector<std::pair<std::string, Value>> args, Value out) {
    Call c;
    c.args = std::move(args);
    c.positional = 1;
    c.outputs = {std::move(out)};
    w.calls.push_back({path, {c}});
  };
  call("", {{"hidden_states", x}, {"temb", t}}, x);
  for (int b = 0; b < blocks; ++b) {
    const std::string p = "blocks." + std::to_string(b);
    // 25 modules per block.
    g.modules.push_back({p, "Block", Container::kNone, {"norm1", "attn", "norm2", "ff", "norm3", "mod"}, {}, {}});
    g.modules.push_back({p + ".norm1", "AdaNorm", Container::kNone, {"linear", "norm"}, {}, {}});
    g.modules.push_back(linear(p + ".norm1.linear", D, 6 * D));
    g.modules.push_back({p + ".norm1.norm", "LayerNorm", Container::kNone, {}, {}, {}});
    g.modules.push_back({p + ".attn", "Attention", Container::kNone,
                         {"norm_q", "norm_k", "to_q", "to_k", "to_v", "to_out"}, {}, {{"heads", Attr::Int(16)}}});
    g.modules.push_back({p + ".attn.norm_q", "LayerNorm", Container::kNone, {}, {{"weight", {64}, "bf16", false}}, {}});
    g.modules.push_back({p + ".attn.norm_k", "LayerNorm", Container::kNone, {}, {{"weight", {64}, "bf16", false}}, {}});
    g.modules.push_back(linear(p + ".attn.to_q", D, D));
    g.modules.push_back(linear(p + ".attn.to_k", D, D));
    g.modules.push_back(linear(p + ".attn.to_v", D, D));
    g.modules.push_back({p + ".attn.to_out", "ModuleList", Container::kList, {"0", "1"}, {}, {}});
    g.modules.push_back(linear(p + ".attn.to_out.0", D, D));
    g.modules.push_back({p + ".attn.to_out.1", "Dropout", Container::kNone, {}, {}, {}});
    g.modules.push_back({p + ".norm2", "LayerNorm", Container::kNone, {}, {}, {}});
    g.modules.push_back({p + ".ff", "FeedForward", Container::kNone, {"net"}, {}, {}});
    g.modules.push_back({p + ".ff.net", "ModuleList", Container::kList, {"0", "1", "2"}, {}, {}});
    g.modules.push_back({p + ".ff.net.0", "GELU", Container::kNone, {"proj"}, {}, {}});
    g.modules.push_back(linear(p + ".ff.net.0.proj", D, F));
    g.modules.push_back({p + ".ff.net.1", "Dropout", Container::kNone, {}, {}, {}});
    g.modules.push_back(linear(p + ".ff.net.2", F, D));
    g.modules.push_back({p + ".norm3", "LayerNorm", Container::kNone, {}, {}, {}});
    g.modules.push_back({p + ".mod", "AdaNorm", Container::kNone, {"linear", "norm", "act"}, {}, {}});
    g.modules.push_back(linear(p + ".mod.linear", D, 2 * D));
    g.modules.push_back({p + ".mod.norm", "LayerNorm", Container::kNone, {}, {}, {}});
    g.modules.push_back({p + ".mod.act", "GELU", Container::kNone, {}, {}, {}});
    call(p, {{"hidden_states", x}, {"temb", t}}, x);
    for (const char* m : {".attn.to_q", ".attn.to_k", ".attn.to_v", ".attn.to_out.0", ".attn.to_out.1", ".norm1.norm",
                          ".norm2", ".norm3", ".ff.net.2", ".ff.net.1", ".mod.norm"}) {
      call(p + m, {{"input", m == std::string(".ff.net.2") ? h : x}}, x);
    }
    call(p + ".ff.net.0.proj", {{"input", x}}, h);
    call(p + ".ff.net.0", {{"input", x}}, h);
    call(p + ".ff", {{"hidden_states", x}}, x);
    call(p + ".attn", {{"hidden_states", x}}, x);
    call(p + ".norm1", {{"x", x}, {"emb", t}}, x);
    call(p + ".mod", {{"x", x}, {"emb", t}}, x);
    g.attention_sites.push_back({p + ".attn", 16, 64, AttentionKind::kSelf, {"hidden_states"}, {"hidden_states"}, true});
    w.attention.push_back({p + ".attn", {{{1, S, 16, 64}, {1, S, 16, 64}, {1, S, 16, 64}}}});
  }
  g.modules.push_back(linear("proj_out", D, 64));
  call("proj_out", {{"input", x}}, Value::Tensor({1, S, 64}, "bf16"));
  g.workloads.push_back(std::move(w));
  g.Reindex();
  return g;
}

constexpr const char* kSyntheticPlan = R"(plan synth for SynthDiT

context_parallel {
  split "" hidden_states dim 1 rank 3
  gather "proj_out" output 0 dim 1 rank 3
}

tensor_parallel {
  colwise "blocks.*.attn.{to_q,to_k,to_v}"
  rowwise "blocks.*.attn.to_out.0"
  colwise "blocks.*.ff.net.0.proj"
  rowwise "blocks.*.ff.net.2"
}
)";

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeat") repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  std::vector<double> corpus_ms;
  CorpusResult corpus;
  for (int i = 0; i < repeat; ++i) {
    corpus = RunCorpus();
    corpus_ms.push_back(corpus.ms);
  }
  std::printf("corpus: %d combinations (%d clean) checked in %.1f ms, of which %.1f ms reading %s (median of %d; "
              "target < 2000 ms)\n",
              corpus.combinations, corpus.clean, Median(corpus_ms), corpus.load_ms, "graphs", repeat);

  weft::model::ModelGraph graph = SyntheticGraph(400);
  std::vector<double> compile_ms, hash_ms;
  size_t steps = 0;
  for (int i = 0; i < repeat; ++i) {
    graph.Reindex();  // forget the graph hash: hash it every time, as a fresh `weft compile` does
    const auto t0 = Clock::now();
    weft::source::SourceManager sources;
    const auto& src = sources.Get(sources.Add(weft::source::SourceBuffer("synth.weft", kSyntheticPlan)));
    weft::diag::CollectingConsumer sink;
    weft::diag::Emitter diags(sources, sink, 20);
    auto ast = weft::syntax::ParsePlan(src, diags);
    weft::bind::BindOptions options;
    options.mesh.axes = {{"tp", 2}, {"ulysses", 2}};
    options.workload = "4096tok";
    options.plan_file = "synth.weft";
    auto plan = ast ? weft::CompileAst(*ast, graph, options, diags) : std::nullopt;
    const auto t1 = Clock::now();
    if (!plan) {
      for (const auto& d : sink.diagnostics()) std::fputs(weft::diag::RenderText(d).c_str(), stderr);
      return 1;
    }
    steps = plan->steps.size();
    compile_ms.push_back(Ms(t0, t1));
    const auto t2 = Clock::now();
    (void)weft::plan::WritePlanJson(*plan);
    hash_ms.push_back(Ms(t1, t2) + Ms(t2, Clock::now()));
  }
  std::printf("synthetic: %zu modules, %zu steps: parse+bind+lower %.1f ms (median of %d; target < 200 ms), "
              "write+hash %.1f ms\n",
              graph.modules.size(), steps, Median(compile_ms), repeat, Median(hash_ms));
  return 0;
}

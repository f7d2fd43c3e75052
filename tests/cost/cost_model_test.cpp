// The cost model (compiler/cost): what each program node costs, the predicted time and memory of
// a compiled plan, and the mesh search behind --mesh auto, on the committed tiny Flux program and
// a synthetic machine whose round rates let every number be recomputed here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "compiler/compile.h"
#include "compiler/cost/graph_predict.h"
#include "compiler/cost/machine_profile.h"
#include "compiler/cost/mesh_search.h"
#include "compiler/cost/node_cost.h"
#include "compiler/cost/predict.h"
#include "compiler/cost/predict_parts.h"
#include "compiler/model/graph_json.h"
#include "compiler/program/bindings.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/lowering.h"
#include "compiler/program/program_reader.h"

namespace weft::cost {
namespace {

const std::string kRoot = WEFT_SOURCE_DIR;
const std::string kProgram = kRoot + "/tests/fixtures/programs/flux-tiny/program.pt2";
const std::string kPlan = kRoot + "/plans/flux.weft";

const program::Program& Flux() {
  static const program::Program p = program::ReadProgramFile(kProgram);
  return p;
}

MachineProfile Synthetic() { return ReadMachineProfile(kRoot + "/tests/cost/machine_synthetic.json", "", nullptr); }

struct Compiled {
  source::SourceManager sources;
  std::optional<syntax::PlanAst> ast;
  model::ModelGraph graph;
};

Compiled& FluxPlan() {
  static Compiled c = [] {
    Compiled out;
    std::string error;
    auto buffer = source::SourceBuffer::FromFile(kPlan, &error);
    const source::SourceBuffer& src = out.sources.Get(out.sources.Add(std::move(*buffer)));
    diag::CollectingConsumer sink;
    diag::Emitter diags(out.sources, sink);
    out.ast = syntax::ParsePlan(src, diags);
    out.graph = program::GraphOfProgram(Flux());
    return out;
  }();
  return c;
}

// plans/flux.weft compiled at `mesh` against `graph` with activations of `activation_bytes`, and
// lowered into `program` when given.
plan::ExecutionPlan CompileFluxOn(const model::ModelGraph& graph, const std::string& mesh_text,
                                  const program::Program* program, const std::string& program_file,
                                  int64_t activation_bytes, plan::RotateMethod rotate = plan::RotateMethod::kAllGather) {
  Compiled& c = FluxPlan();
  std::string error;
  const auto spec = plan::ParseMeshSpec(mesh_text, &error);
  EXPECT_TRUE(spec) << error;
  bind::BindOptions b;
  b.mesh.axes = spec->Axes(false);
  b.mesh.rotate_method = rotate;
  b.workload = graph.workloads.front().name;
  b.plan_file = kPlan;
  b.activation_bytes = activation_bytes;
  b.checked_by_dataflow = program != nullptr;
  diag::CollectingConsumer sink;
  diag::Emitter diags(c.sources, sink);
  std::optional<plan::ExecutionPlan> p = CompileAst(*c.ast, graph, b, diags);
  EXPECT_TRUE(p) << (sink.diagnostics().empty() ? "" : sink.diagnostics()[0].messages[0].text);
  if (program != nullptr) program::LowerToProgramWithCost(*p, *program, program_file, graph);
  return *p;
}

// plans/flux.weft compiled and lowered at `mesh` on the tiny Flux program.
plan::ExecutionPlan CompileAt(const std::string& mesh_text, plan::RotateMethod rotate = plan::RotateMethod::kAllGather) {
  return CompileFluxOn(FluxPlan().graph, mesh_text, &Flux(), kProgram, 4, rotate);
}

TEST(NodeCost, LinearIsTwiceTokensTimesTheWeight) {
  const program::Program& p = Flux();
  const program::Bindings b = program::Bindings::Bind(p, p.manifest->workloads.front().inputs);
  int linears = 0;
  for (const program::Node& n : p.nodes) {
    if (n.target != "torch.ops.aten.linear.default") continue;
    const program::TensorMeta* x = p.FindTensor(n.inputs[0].arg.name);
    const program::TensorMeta* w = p.FindTensor(n.inputs[1].arg.name);
    ASSERT_TRUE(x && w);
    const std::vector<int64_t> xs = b.Sizes(*x), ws = b.Sizes(*w);
    double rows = 1;
    for (size_t i = 0; i + 1 < xs.size(); ++i) rows *= static_cast<double>(xs[i]);
    const NodeCost c = CostOfNode(p, n, b);
    EXPECT_EQ(c.op_class, OpClass::kMatmul) << n.name;
    EXPECT_DOUBLE_EQ(c.flops, 2 * rows * static_cast<double>(ws[0] * ws[1])) << n.name;
    ++linears;
  }
  EXPECT_GT(linears, 10);
}

TEST(NodeCost, AttentionIsFourBHSqSkvD) {
  const program::Program& p = Flux();
  const program::Bindings b = program::Bindings::Bind(p, p.manifest->workloads.front().inputs);
  int sites = 0;
  for (const program::Node& n : p.nodes) {
    if (n.target != program::kSdpaTarget) continue;
    const std::vector<int64_t> q = b.Sizes(*p.FindTensor(n.inputs[0].arg.name));
    const std::vector<int64_t> k = b.Sizes(*p.FindTensor(n.inputs[1].arg.name));
    const NodeCost c = CostOfNode(p, n, b);
    EXPECT_EQ(c.op_class, OpClass::kAttention);
    EXPECT_DOUBLE_EQ(c.flops, 4.0 * q[0] * q[1] * q[2] * k[2] * q[3]);
    EXPECT_DOUBLE_EQ(c.size, static_cast<double>(k[2]));
    ++sites;
  }
  EXPECT_GT(sites, 0);
}

TEST(NodeCost, ViewsAreFreeAndAliasTheirInput) {
  const program::Program& p = Flux();
  const program::Bindings b = program::Bindings::Bind(p, p.manifest->workloads.front().inputs);
  for (const program::Node& n : p.nodes) {
    if (n.target != "torch.ops.aten.permute.default") continue;
    const NodeCost c = CostOfNode(p, n, b);
    EXPECT_EQ(c.op_class, OpClass::kFree);
    EXPECT_EQ(c.out_bytes, 0);
    ASSERT_EQ(c.aliases.size(), 1u);
    EXPECT_EQ(c.aliases[0], n.inputs[0].arg.name);
    return;
  }
  FAIL() << "no permute node";
}

TEST(Predict, UnshardedTimeIsTheSumOfItsTerms) {
  const MachineProfile m = Synthetic();
  const Prediction p = Predict(Flux(), nullptr, m, {});
  EXPECT_EQ(p.threads, 2);  // one rank on 2 cores
  EXPECT_GT(p.matmul_s, 0);
  EXPECT_GT(p.attention_s, 0);
  EXPECT_GT(p.memory_s, 0);
  EXPECT_EQ(p.comm_s, 0);
  EXPECT_NEAR(p.overhead_s, 1e-6 * static_cast<double>(Flux().nodes.size()), 1e-12);
  EXPECT_NEAR(p.latency_s, p.matmul_s + p.attention_s + p.memory_s + p.overhead_s, 1e-12);
  EXPECT_EQ(p.peak_bytes, p.base_bytes + p.group_bytes + p.param_bytes + p.weight_buffer_bytes + p.activation_bytes);
  EXPECT_EQ(p.base_bytes, 100000000);
  EXPECT_EQ(p.group_bytes, 0);
  int64_t params = 0;
  for (const auto& [fqn, sizes] : Flux().ParameterShapes()) {
    int64_t n = 4;
    for (int64_t s : sizes) n *= s;
    params += n;
  }
  EXPECT_EQ(p.param_bytes, params);
}

TEST(Predict, UlyssesHalvesTheBlocksArithmeticAndChargesEveryCollective) {
  const MachineProfile m = Synthetic();
  const Prediction one = Predict(Flux(), nullptr, m, {});
  const plan::ExecutionPlan u2 = CompileAt("ulysses=2");
  const Prediction two = Predict(Flux(), &u2, m, {});
  EXPECT_EQ(two.threads, 1);
  // Every node of the blocks runs on half the tokens; the embedders of the timestep do not.
  EXPECT_LT(two.flops, 0.6 * one.flops);
  EXPECT_GT(two.flops, 0.5 * one.flops);
  // Collectives: count x alpha + bytes / beta, every op and group priced alike in the synthetic
  // profile, so the totals of the plan's cost section give the time.
  double expect = 0;
  for (const plan::AxisTraffic& t : u2.cost.per_axis) expect += 1e-4 * t.collectives + t.bytes / 1e9;
  EXPECT_NEAR(two.comm_s, expect, 1e-9);
  EXPECT_EQ(two.hidden_comm_s, 0);
  EXPECT_EQ(two.group_bytes, 4000000);  // one group of 2 (ulysses)
  EXPECT_NEAR(two.latency_s, two.matmul_s + two.attention_s + two.memory_s + two.overhead_s + two.comm_s, 1e-12);
}

TEST(Predict, P2pRingHidesItsExchangeBehindAttention) {
  MachineProfile m = Synthetic();
  m.cores = 4;
  const plan::ExecutionPlan ag = CompileAt("ring=2", plan::RotateMethod::kAllGather);
  const plan::ExecutionPlan p2p = CompileAt("ring=2", plan::RotateMethod::kP2p);
  // Two ranks of 1 thread on a host of 4 cores: half the cores are free to run the exchange.
  PredictOptions spread;
  spread.ranks_per_host = 2;
  spread.threads = 1;
  const Prediction a = Predict(Flux(), &ag, m, spread);
  const Prediction b = Predict(Flux(), &p2p, m, spread);
  EXPECT_EQ(a.hidden_comm_s, 0);
  double all = 0, sendrecv = 0;
  for (const auto& [axis, t] : b.comm_per_axis) all += t;
  for (const plan::ModuleStep& step : p2p.steps) {
    for (const plan::Collective& c : step.cost.collectives) {
      if (c.op == plan::CollectiveOp::kSendRecv) sendrecv += step.calls * (1e-4 * c.count + c.bytes / 1e9);
    }
  }
  EXPECT_GT(sendrecv, 0);
  EXPECT_GT(b.hidden_comm_s, 0);
  EXPECT_NEAR(b.hidden_comm_s, std::min(sendrecv, 0.5 * b.attention_s), 1e-12);
  EXPECT_NEAR(b.comm_s + b.hidden_comm_s, all, 1e-12);
  // Two ranks of two threads (cores / ranks, the default) on the 4 cores leave none free: nothing
  // is hidden.
  EXPECT_EQ(Predict(Flux(), &p2p, m, {}).hidden_comm_s, 0);
}

TEST(Predict, P2pRingAttentionRunsAtItsBlockLength) {
  // Attention twice as fast at 64 keys as at 32: the p2p ring's kernel sees blocks of half the
  // keys (the tiny Flux has 80 of them at 128x128: 40 per block), the allgather ring all of them.
  MachineProfile m = Synthetic();
  m.attention = {{"f32", 1, 32, 5e9}, {"f32", 1, 64, 1e10}, {"f32", 2, 32, 1e10}, {"f32", 2, 64, 2e10}};
  const plan::ExecutionPlan ag_plan = CompileAt("ring=2");
  const plan::ExecutionPlan p2p_plan = CompileAt("ring=2", plan::RotateMethod::kP2p);
  const Prediction ag = Predict(Flux(), &ag_plan, m, {});
  const Prediction p2p = Predict(Flux(), &p2p_plan, m, {});
  EXPECT_GT(p2p.attention_s, 1.2 * ag.attention_s);
  EXPECT_DOUBLE_EQ(p2p.matmul_s, ag.matmul_s);
}

TEST(Predict, RanksBeyondTheCoresShareThem) {
  const MachineProfile m = Synthetic();
  const plan::ExecutionPlan u2 = CompileAt("ulysses=2");
  PredictOptions crowded;
  crowded.ranks_per_host = 4;  // 4 ranks of 1 thread on 2 cores: half the 1-thread rate each
  const Prediction alone = Predict(Flux(), &u2, m, {});
  const Prediction shared = Predict(Flux(), &u2, m, crowded);
  EXPECT_NEAR(shared.matmul_s, 2 * alone.matmul_s, 1e-12);
  EXPECT_NEAR(shared.memory_s, 2 * alone.memory_s, 1e-12);
  EXPECT_NEAR(shared.overhead_s, 2 * alone.overhead_s, 1e-12);  // dispatch takes turns on the cores too
}

TEST(Predict, TensorParallelShardsTheParametersAndAddsAllReduces) {
  const MachineProfile m = Synthetic();
  const Prediction one = Predict(Flux(), nullptr, m, {});
  const plan::ExecutionPlan tp2 = CompileAt("tp=2");
  const Prediction p = Predict(Flux(), &tp2, m, {});
  EXPECT_EQ(p.param_bytes, tp2.cost.weight_bytes);
  EXPECT_LT(p.param_bytes, one.param_bytes);
  EXPECT_LT(p.flops, one.flops);
  bool tp_axis = false;
  for (const auto& [axis, t] : p.comm_per_axis) tp_axis |= axis == "tp" && t > 0;
  EXPECT_TRUE(tp_axis);
}

// Which groups cross hosts follows from the axis order and the ranks per host (ranks on hosts in
// contiguous blocks): 4 ranks on 2 hosts at ring=2 x ulysses=2.
TEST(HostSpan, TheAxisOrderDecidesWhichGroupsCrossHosts) {
  plan::Mesh ring_outer;
  ring_outer.axes = {{"ring", 2}, {"ulysses", 2}};  // the default order: ulysses groups {0,1} {2,3}
  ring_outer.world_size = 4;
  EXPECT_FALSE(parts::GroupSpansHosts(ring_outer, "ulysses", 2));
  EXPECT_TRUE(parts::GroupSpansHosts(ring_outer, "ring", 2));  // {0,2} {1,3}
  EXPECT_TRUE(parts::GroupSpansHosts(ring_outer, "cp", 2));
  EXPECT_FALSE(parts::GroupSpansHosts(ring_outer, "ring", 4));  // one host
  EXPECT_FALSE(parts::GroupSpansHosts(ring_outer, "ring", 0));  // 0: every rank on one host
  plan::Mesh ulysses_outer = ring_outer;
  ulysses_outer.axes = {{"ulysses", 2}, {"ring", 2}};
  EXPECT_TRUE(parts::GroupSpansHosts(ulysses_outer, "ulysses", 2));
  EXPECT_FALSE(parts::GroupSpansHosts(ulysses_outer, "ring", 2));
  // Weights sliced over cfg, whose groups are {0,2} {1,3} of cfg=2 x ulysses=2 (cfg outermost).
  plan::Mesh cfg_mesh;
  cfg_mesh.axes = {{"cfg", 2}, {"ulysses", 2}};
  cfg_mesh.world_size = 4;
  cfg_mesh.weight_axes = {"cfg"};
  EXPECT_TRUE(parts::GroupSpansHosts(cfg_mesh, "weights", 2));
  cfg_mesh.weight_axes = {"cp"};
  EXPECT_FALSE(parts::GroupSpansHosts(cfg_mesh, "weights", 2));
  // Hosts that do not align with the groups: ulysses=3 groups {0,1,2} {3,4,5} on hosts of 2 ranks.
  plan::Mesh uneven;
  uneven.axes = {{"ring", 2}, {"ulysses", 3}};
  uneven.world_size = 6;
  EXPECT_TRUE(parts::GroupSpansHosts(uneven, "ulysses", 2));
  EXPECT_FALSE(parts::GroupSpansHosts(uneven, "ulysses", 3));
}

// A profile whose Gloo collectives take ten times shared memory's latency and bandwidth.
MachineProfile WithSlowGloo() {
  MachineProfile m = Synthetic();
  for (const char* op : {"all_to_all", "all_gather", "all_reduce"}) {
    for (int n : {2, 4}) m.collectives.push_back({"gloo", op, n, 1e-3, 1e8});
  }
  return m;
}

// Each axis's collectives priced from the plan's cost section at `alpha` and `beta`.
double AxisTime(const plan::ExecutionPlan& p, const std::string& axis, double alpha, double beta) {
  double t = 0;
  for (const plan::ModuleStep& step : p.steps) {
    for (const plan::Collective& c : step.cost.collectives) {
      if (c.axis == axis) t += step.calls * (alpha * c.count + c.bytes / beta);
    }
  }
  return t;
}

double PricedOn(const Prediction& p, const std::string& axis) {
  for (const auto& [a, t] : p.comm_per_axis) {
    if (a == axis) return t;
  }
  return -1;
}

TEST(Predict, AGroupAcrossHostsIsPricedOnGlooAndSaysSo) {
  const MachineProfile m = WithSlowGloo();
  PredictOptions two_hosts;
  two_hosts.ranks_per_host = 2;
  const plan::ExecutionPlan ring_outer = CompileAt("ring=2,ulysses=2");
  const plan::ExecutionPlan ulysses_outer = CompileAt("ring=2,ulysses=2,order=cfg:tp:ulysses:ring");
  ASSERT_EQ(ulysses_outer.mesh.axes.front().name, "ulysses");
  const Prediction a = Predict(Flux(), &ring_outer, m, two_hosts);
  EXPECT_NEAR(PricedOn(a, "ulysses"), AxisTime(ring_outer, "ulysses", 1e-4, 1e9), 1e-12);  // shm, within a host
  EXPECT_NEAR(PricedOn(a, "ring"), AxisTime(ring_outer, "ring", 1e-3, 1e8), 1e-12);        // gloo, across
  EXPECT_NE(std::find(a.notes.begin(), a.notes.end(), "the ring groups span hosts (2 ranks per host): priced on gloo"),
            a.notes.end());
  const Prediction b = Predict(Flux(), &ulysses_outer, m, two_hosts);
  EXPECT_NEAR(PricedOn(b, "ulysses"), AxisTime(ulysses_outer, "ulysses", 1e-3, 1e8), 1e-12);
  EXPECT_NEAR(PricedOn(b, "ring"), AxisTime(ulysses_outer, "ring", 1e-4, 1e9), 1e-12);
  // On one host of 4 ranks both orders are priced alike, all on shared memory.
  PredictOptions one_host;
  one_host.ranks_per_host = 4;
  EXPECT_NEAR(Predict(Flux(), &ring_outer, m, one_host).comm_s, Predict(Flux(), &ulysses_outer, m, one_host).comm_s,
              1e-12);
}

TEST(Predict, AProfileWithoutTheCollectiveSaysWhichAndHow) {
  MachineProfile m = Synthetic();
  m.collectives.clear();
  const plan::ExecutionPlan u2 = CompileAt("ulysses=2");
  try {
    Predict(Flux(), &u2, m, {});
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no `all_to_all` line for transport shm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("weft-run --calibrate"), std::string::npos) << e.what();
  }
}

TEST(MeshSearch, MeshesOfNAreEveryFactorization) {
  EXPECT_EQ(MeshesOf(1).size(), 1u);
  EXPECT_EQ(MeshesOf(4).size(), 10u);  // 2^2 over 4 axes: C(5, 3)
  EXPECT_EQ(MeshesOf(7).size(), 4u);   // a prime: all on one axis
  EXPECT_EQ(MeshesOf(8).size(), 20u);  // 2^3: C(6, 3)
  std::set<std::string> seen;
  for (const plan::MeshSpec& s : MeshesOf(8)) {
    EXPECT_EQ(s.WorldSize(), 8);
    seen.insert(std::to_string(s.cfg) + std::to_string(s.tp) + std::to_string(s.ring) + std::to_string(s.ulysses));
  }
  EXPECT_EQ(seen.size(), 20u);
}

SearchRequest FluxSearch(int nproc) {
  Compiled& c = FluxPlan();
  SearchRequest r;
  r.ast = &*c.ast;
  r.sources = &c.sources;
  r.plan_file = kPlan;
  r.graph = &c.graph;
  r.program = &Flux();
  r.program_file = kProgram;
  r.nproc = nproc;
  r.activation_bytes = 4;
  r.machine = Synthetic();
  return r;
}

TEST(MeshSearch, RanksEveryLegalMeshAndSaysWhyTheOthersAreRefused) {
  const std::vector<Candidate> all = SearchMeshes(FluxSearch(4));
  ASSERT_FALSE(all.empty());
  ASSERT_TRUE(all[0].prediction);
  ASSERT_TRUE(all[0].plan);  // the pick keeps its plan
  double last = 0;
  bool refused_seen = false;
  for (const Candidate& c : all) {
    if (!c.prediction) {
      refused_seen = true;
      EXPECT_FALSE(c.refusal.empty()) << c.text;
      continue;
    }
    EXPECT_FALSE(refused_seen) << "a predicted mesh after a refused one: " << c.text;
    EXPECT_GE(c.prediction->latency_s, last) << c.text;
    last = c.prediction->latency_s;
    EXPECT_EQ(c.mesh.world_size, 4);
  }
  // The tiny Flux's batch of 2 makes cfg=4 impossible; its plan says so.
  bool cfg4 = false;
  for (const Candidate& c : all) cfg4 |= c.mesh.Cfg() == 4 && !c.prediction;
  EXPECT_TRUE(cfg4);
}

// Across hosts the search weighs every order of a mesh's axes, each as a --mesh text that parses
// back to that order; on one host only the default order.
TEST(MeshSearch, AcrossHostsEveryAxisOrderIsWeighed) {
  SearchRequest r = FluxSearch(4);
  r.machine = WithSlowGloo();
  r.weight_sharding = false;
  for (const Candidate& c : SearchMeshes(r)) EXPECT_EQ(c.mesh_arg.find("order="), std::string::npos) << c.mesh_arg;
  r.predict.ranks_per_host = 2;
  const std::vector<Candidate> all = SearchMeshes(r);
  std::map<std::string, double> usp;  // ring=2 x ulysses=2 allgather, by the order's outer axis
  for (const Candidate& c : all) {
    std::string error;
    const auto spec = plan::ParseMeshSpec(c.mesh_arg, &error);
    ASSERT_TRUE(spec) << c.mesh_arg << ": " << error;
    std::vector<plan::MeshAxis> axes = spec->Axes(false);
    ASSERT_EQ(axes.size(), c.mesh.axes.size()) << c.mesh_arg;
    for (size_t i = 0; i < axes.size(); ++i) EXPECT_EQ(axes[i].name, c.mesh.axes[i].name) << c.mesh_arg;
    if (c.mesh.Ring() == 2 && c.mesh.Ulysses() == 2 && c.mesh.rotate_method == plan::RotateMethod::kAllGather &&
        c.prediction) {
      usp[c.mesh.axes.front().name] = c.prediction->comm_s;
    }
  }
  ASSERT_EQ(usp.size(), 2u);
  // The tiny Flux's ring and ulysses axes move the same bytes, ulysses in twice the collectives
  // (8 all-to-alls against 4 all-gathers a forward): across hosts, where each costs 10x the latency,
  // the order that keeps ulysses within a host (ring outermost) is the cheaper.
  EXPECT_LT(usp["ring"], usp["ulysses"]);
}

TEST(MeshSearch, AMemoryLimitPutsTheMeshesOverItLast) {
  SearchRequest r = FluxSearch(2);
  r.memory_per_rank = 1;
  const std::vector<Candidate> all = SearchMeshes(r);
  for (const Candidate& c : all) {
    if (c.prediction) {
      EXPECT_TRUE(c.over_memory) << c.text;
    }
  }
}

// The estimate from Flux.1-dev's graph (graphs/flux1-dev.graph.json, its module calls at 1024^2)
// against the prediction from the program of the same published config (bf16, exported on the
// fake device): the arithmetic of the Linear and attention calls is the program's to within 2 %,
// unsharded and at ulysses=4, and the collectives are the same plan's, so equal; what a graph
// cannot see (operators outside modules, per-operator overhead) makes it a lower bound.
TEST(PredictFromGraph, MatchesTheProgramsArithmeticAndCollectivesAndIsALowerBound) {
  model::GraphReadResult read = model::ReadGraphFile(kRoot + "/graphs/flux1-dev.graph.json");
  ASSERT_TRUE(read.graph);
  const std::string program_file = kRoot + "/tests/fixtures/programs/flux1-dev/program_bf16.pt2";
  const program::Program program = program::ReadProgramFile(program_file);
  const model::ModelGraph program_graph = program::GraphOfProgram(program);
  const MachineProfile m = ReadMachineProfile(kRoot + "/tools/machine_profiles/h100-sxm.json", "", nullptr);
  for (const std::string mesh : {"ulysses=1", "ulysses=4"}) {
    const plan::ExecutionPlan on_graph = CompileFluxOn(*read.graph, mesh, nullptr, "", 2);
    const plan::ExecutionPlan on_program = CompileFluxOn(program_graph, mesh, &program, program_file, 2);
    const Prediction g = PredictFromGraph(*read.graph, &on_graph, m, {});
    const Prediction p = Predict(program, &on_program, m, {});
    EXPECT_TRUE(g.from_graph);
    EXPECT_FALSE(p.from_graph);
    EXPECT_NEAR(g.matmul_s / p.matmul_s, 1.0, 0.05) << mesh;
    EXPECT_NEAR(g.attention_s / p.attention_s, 1.0, 0.02) << mesh;
    EXPECT_NEAR(g.flops / p.flops, 1.0, 0.05) << mesh;
    EXPECT_NEAR(g.comm_s, p.comm_s, 1e-9) << mesh;
    EXPECT_EQ(g.collectives, p.collectives) << mesh;
    EXPECT_EQ(g.param_bytes, p.param_bytes) << mesh;
    EXPECT_LT(g.latency_s, p.latency_s) << mesh;
    EXPECT_NEAR(g.latency_s, g.matmul_s + g.attention_s + g.memory_s + g.comm_s, 1e-12) << mesh;
  }
}

// The mesh search for plans/flux.weft on Flux.1-dev's graph (1024^2, bf16) over `nproc` ranks of
// the published H100 profile.
SearchRequest FluxDevSearchOnH100(int nproc) {
  static const model::ModelGraph graph = [] {
    model::GraphReadResult read = model::ReadGraphFile(kRoot + "/graphs/flux1-dev.graph.json");
    EXPECT_TRUE(read.graph);
    return read.graph ? *read.graph : model::ModelGraph{};
  }();
  Compiled& c = FluxPlan();
  SearchRequest r;
  r.ast = &*c.ast;
  r.sources = &c.sources;
  r.plan_file = kPlan;
  r.graph = &graph;
  r.nproc = nproc;
  r.activation_bytes = 2;
  r.machine = ReadMachineProfile(kRoot + "/tools/machine_profiles/h100-sxm.json", "", nullptr);
  return r;
}

// --mesh auto on a graph: every mesh estimated from its module calls, ranked; Flux.1-dev at
// 1024^2 on 8 H100s picks pure Ulysses, as the program-based search does (README).
TEST(PredictFromGraph, MeshSearchOnAGraphRanksTheMeshes) {
  const std::vector<Candidate> all = SearchMeshes(FluxDevSearchOnH100(8));
  ASSERT_FALSE(all.empty());
  ASSERT_TRUE(all[0].prediction);
  EXPECT_TRUE(all[0].prediction->from_graph);
  EXPECT_EQ(all[0].mesh_arg, "ulysses=8");
}

// On two 8-GPU H100 nodes (the published profile's nccl-net lines: 400 Gb/s InfiniBand per GPU
// against NVLink's 370 GB/s), Flux.1-dev 1024^2 keeps Ulysses inside a node and runs the ring
// across the two -- the layout peers run on 2 x 8 GPUs (U8 x R2, demand-and-numbers.md); the same
// mesh with Ulysses across the nodes is priced on the network and ranks below it.
TEST(PredictFromGraph, TwoNodesKeepUlyssesInsideANodeAndTheRingAcross) {
  SearchRequest r = FluxDevSearchOnH100(16);
  r.predict.ranks_per_host = 8;
  const std::vector<Candidate> all = SearchMeshes(r);
  ASSERT_FALSE(all.empty());
  ASSERT_TRUE(all[0].prediction);
  EXPECT_EQ(all[0].mesh_arg, "ring=2,ulysses=8");
  EXPECT_NE(std::find(all[0].prediction->notes.begin(), all[0].prediction->notes.end(),
                      "the ring groups span hosts (8 ranks per host): priced on nccl-net"),
            all[0].prediction->notes.end());
  double ulysses_across = -1;
  for (const Candidate& x : all) {
    if (x.mesh_arg.rfind("ulysses=8,ring=2,", 0) == 0 && x.prediction && x.mesh.rotate_method == all[0].mesh.rotate_method) {
      ulysses_across = x.prediction->comm_s;
    }
  }
  ASSERT_GT(ulysses_across, 0);
  EXPECT_GT(ulysses_across, 1.5 * all[0].prediction->comm_s);
}

}  // namespace
}  // namespace weft::cost

#include "compiler/cost/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

#include "compiler/cost/node_cost.h"
#include "compiler/cost/predict_parts.h"
#include "compiler/program/bindings.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/shard_flow.h"

namespace weft::cost {
namespace {

const program::ManifestWorkload& WorkloadOf(const program::Program& p, const std::string& name) {
  if (!p.manifest || p.manifest->workloads.empty()) {
    throw std::runtime_error(p.Where() + ": the program has no workloads to predict at (export it with "
                                         "tools/export_program.py, which records them)");
  }
  for (const program::ManifestWorkload& w : p.manifest->workloads) {
    if (w.name == name) return w;
  }
  if (!name.empty()) {
    std::string names;
    for (const program::ManifestWorkload& w : p.manifest->workloads) names += (names.empty() ? "`" : ", `") + w.name + "`";
    throw std::runtime_error(p.Where() + ": no workload `" + name + "`; it has " + names);
  }
  return p.manifest->workloads.front();
}

}  // namespace

std::string FormatSeconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  }
  return buf;
}

Prediction Predict(const program::Program& p, const plan::ExecutionPlan* plan, const MachineProfile& m,
                   const PredictOptions& o) {
  Prediction r;
  const parts::Setting set = parts::SettingFor(plan, m, o, r);
  const int ranks = set.ranks;
  const std::string& workload = set.workload;
  const program::Bindings b = program::Bindings::Bind(p, o.inputs.empty() ? WorkloadOf(p, workload).inputs : o.inputs);

  std::unordered_map<std::string, uint8_t> sharded;
  if (plan != nullptr && plan->program) sharded = program::ShardedNodes(*plan, p, *plan->program);
  auto degree = [&](const std::string& node) -> double {
    auto it = sharded.find(node);
    if (it == sharded.end() || plan == nullptr) return 1;
    double d = 1;
    if (it->second & program::kShardTp) d *= static_cast<double>(plan->mesh.Tp());
    if (it->second & program::kShardCp) d *= static_cast<double>(plan->mesh.Cp());
    if (it->second & program::kShardCfg) d *= static_cast<double>(plan->mesh.Cfg());
    return d;
  };

  // How many blocks of keys a context-parallel attention node's kernel runs over: R under the p2p
  // ring (its site's step), else 1.
  auto RingBlocks = [&](const program::Node& node) -> double {
    if (plan == nullptr) return 1;
    const plan::ModuleStep* step = plan->FindStep(program::AttentionOwner(p, node));
    if (step == nullptr || !step->attention || step->attention->ring <= 1 ||
        step->attention->rotate_method != plan::RotateMethod::kP2p) {
      return 1;
    }
    return static_cast<double>(step->attention->ring);
  };
  const double overhead = set.overhead_s;
  const double crowding = set.crowding;
  const double scale = set.scale;

  // Liveness: storages by id; every tensor value names one.
  struct Storage {
    double bytes = 0;
    size_t last = 0;
  };
  std::vector<Storage> storages;
  std::unordered_map<std::string, size_t> storage_of;
  std::vector<std::vector<size_t>> born(p.nodes.size());  // storages made at node i
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (i < p.input_specs.size() && p.input_specs[i].kind != program::InputSpec::Kind::kUserInput) continue;
    for (const std::string& v : p.inputs[i].TensorNames()) {
      if (p.FindTensor(v) == nullptr) continue;
      storage_of[v] = storages.size();
      storages.push_back({TensorBytes(p, b, v), 0});
    }
  }
  const size_t input_storages = storages.size();

  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const program::Node& n = p.nodes[i];
    const NodeCost c = CostOfNode(p, n, b);
    const double d = degree(n.name);
    ++r.nodes;
    double t = 0;
    switch (c.op_class) {
      case OpClass::kFree:
        break;
      case OpClass::kMatmul:
      case OpClass::kAttention: {
        const std::vector<RatePoint>& points = c.op_class == OpClass::kMatmul ? m.matmul : m.attention;
        // The rate at the problem one kernel call sees: a matmul's share of the rows; an attention
        // its keys -- all of them, except that the p2p ring calls the kernel once per block of
        // Skv / R keys (short blocks run slower; allgather makes one call over all keys).
        double size = c.size / d;
        if (c.op_class == OpClass::kAttention) size = c.size / RingBlocks(n);
        double rate = RateAt(m, points.empty() ? m.matmul : points, c.dtype, size, r.threads, ranks);
        const double bw = RateAt(m, m.elementwise, c.dtype, c.bytes / d, r.threads, ranks);
        t = std::max(rate > 0 ? c.flops / d / rate : 0.0, bw > 0 ? c.bytes / d / bw : 0.0) * scale;
        r.flops += c.flops / d;
        (c.op_class == OpClass::kMatmul ? r.matmul_s : r.attention_s) += t;
        break;
      }
      case OpClass::kMemory: {
        const double bw = RateAt(m, m.elementwise, c.dtype, c.bytes / d, r.threads, ranks);
        t = bw > 0 ? c.bytes / d / bw * scale : 0.0;
        r.memory_s += t;
        break;
      }
    }
    // A CPU rank runs each node's dispatch and its arithmetic one after the other; a GPU's host
    // launches ahead of the device, so a node costs the longer of its launch and its kernel.
    r.overhead_s += m.kind == "cuda" ? std::max(0.0, overhead - t) : overhead * crowding;
    // Reads extend the lives of the storages they read.
    for (const program::NamedArgument& a : n.inputs) {
      for (const std::string& v : a.arg.TensorNames()) {
        auto it = storage_of.find(v);
        if (it != storage_of.end()) storages[it->second].last = std::max(storages[it->second].last, i + 1);
      }
    }
    std::vector<std::string> outs;
    for (const program::Argument& a : n.outputs) {
      for (const std::string& v : a.TensorNames()) outs.push_back(v);
    }
    if (c.op_class == OpClass::kFree) {
      // A view lives in its input's storage.
      for (const std::string& v : outs) {
        for (const std::string& src : c.aliases) {
          auto it = storage_of.find(src);
          if (it != storage_of.end()) {
            storage_of[v] = it->second;
            break;
          }
        }
      }
      continue;
    }
    for (const std::string& v : outs) {
      if (p.FindTensor(v) == nullptr) continue;
      storage_of[v] = storages.size();
      storages.push_back({TensorBytes(p, b, v) / d, i + 1});
      born[i].push_back(storages.size() - 1);
    }
  }
  // Outputs live to the end.
  for (const program::Argument& a : p.outputs) {
    for (const std::string& v : a.TensorNames()) {
      auto it = storage_of.find(v);
      if (it != storage_of.end()) storages[it->second].last = p.nodes.size() + 1;
    }
  }
  // Sweep: node i allocates its outputs while its inputs are live, then frees what it read last.
  std::vector<std::vector<size_t>> dies(p.nodes.size() + 2);
  double live = 0;
  for (size_t s = 0; s < storages.size(); ++s) {
    dies[std::min(storages[s].last, p.nodes.size() + 1)].push_back(s);
  }
  for (size_t s = 0; s < input_storages; ++s) live += storages[s].bytes;
  double peak = live;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (size_t s : born[i]) live += storages[s].bytes;
    peak = std::max(peak, live);
    for (size_t s : dies[i + 1]) live -= storages[s].bytes;
  }

  parts::Hideable hide;
  if (plan != nullptr) hide = parts::PriceCollectives(*plan, m, set, r);
  int64_t params = 0;
  if (plan == nullptr) {
    for (const auto& [fqn, sizes] : p.ParameterShapes()) {
      (void)fqn;
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      params += n * p.ActivationBytes();
    }
  }
  parts::Finish(plan, m, set, hide, params, peak, r);
  return r;
}

}  // namespace weft::cost

#include "compiler/cost/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "compiler/cost/node_cost.h"
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

// The ranks of the group a collective on `axis` runs over.
int64_t GroupSize(const plan::ExecutionPlan& plan, const std::string& axis) {
  if (axis == "weights") return plan.weights ? plan.weights->ranks : 1;
  if (axis == plan::kCpGroup) return plan.mesh.Cp();
  return plan.mesh.Size(axis);
}

// The groups of more than one rank each rank belongs to (runtime/dist makes one per axis, and one
// for cp when both ring and ulysses split).
std::vector<int64_t> GroupsOfRank(const plan::Mesh& mesh) {
  std::vector<int64_t> groups;
  int axes = 0;
  for (const plan::MeshAxis& a : mesh.axes) {
    if (a.size > 1) {
      groups.push_back(a.size);
      ++axes;
    }
  }
  if (mesh.Ring() > 1 && mesh.Ulysses() > 1) groups.push_back(mesh.Cp());
  if (axes > 1) groups.push_back(mesh.world_size);
  return groups;
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
  const int world = plan != nullptr ? static_cast<int>(std::max<int64_t>(1, plan->mesh.world_size)) : 1;
  const int ranks = o.ranks_per_host > 0 ? o.ranks_per_host : world;
  r.threads = o.threads > 0 ? o.threads : std::max(1, m.cores / std::max(1, ranks));
  if (m.kind == "cuda") r.threads = 1;
  const std::string transport = !o.transport.empty() ? o.transport : m.kind == "cuda" ? "nccl" : "shm";
  const std::string workload = !o.workload.empty() ? o.workload : plan != nullptr ? plan->workload.name : "";
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
  const double overhead = m.fitted ? m.fitted->node_overhead_s : m.op_overhead_s;
  // Ranks whose threads outnumber the cores take turns on them: their dispatch stretches too.
  const double crowding = std::max(1.0, static_cast<double>(ranks) * r.threads / std::max(1, m.cores));
  const double scale = !m.fitted ? 1.0 : ranks > 1 ? m.fitted->shared_compute_scale : m.fitted->compute_scale;

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

  // Collectives.
  double weights_comm = 0, ring_p2p_comm = 0;
  if (plan != nullptr) {
    std::map<std::string, double> per_axis;
    for (const plan::ModuleStep& s : plan->steps) {
      for (const plan::Collective& c : s.cost.collectives) {
        const int64_t n = GroupSize(*plan, c.axis);
        if (n <= 1 || c.count <= 0) continue;
        const std::string op(plan::CollectiveOpName(c.op));
        // Point-to-point exchanges go over Gloo on CPUs whatever the transport of the collectives.
        const std::string via = op == "send_recv" && m.kind == "cpu" ? "gloo" : transport;
        std::optional<CollectiveTime> fit = CollectiveAt(m, via, op, static_cast<int>(n));
        if (!fit) {
          throw std::runtime_error("the machine profile has no `" + op + "` line for transport " + via +
                                   " (calibrate with `weft-run --calibrate -o FILE`, which measures it)");
        }
        if (!fit->exact) {
          const std::string note = op + " over " + std::to_string(n) + " ranks (" + via +
                                   ") priced from the nearest group size the profile measured";
          if (std::find(r.notes.begin(), r.notes.end(), note) == r.notes.end()) r.notes.push_back(note);
        }
        const double wait = !m.fitted ? 0.0
                            : (op == "send_recv" ? m.fitted->p2p_wait_s : m.fitted->collective_wait_s) +
                                  m.fitted->crowded_wait_s * (crowding - 1);
        if (op == "send_recv") r.p2p_exchanges += s.calls * c.count;
        const double t = static_cast<double>(s.calls) * (static_cast<double>(c.count) * (fit->alpha_s + wait) +
                                                         static_cast<double>(c.bytes) / fit->beta_bytes_per_s);
        r.collectives += s.calls * c.count;
        per_axis[c.axis] += t;
        if (c.axis == "weights") {
          weights_comm += t;
        } else if (op == "send_recv" && plan->mesh.rotate_method == plan::RotateMethod::kP2p) {
          ring_p2p_comm += t;
        } else {
          r.comm_s += t;
        }
      }
    }
    for (const auto& [axis, t] : per_axis) r.comm_per_axis.emplace_back(axis, t);
  }
  // The p2p ring overlaps each K/V step with the attention of the block it holds; sliced weights
  // are gathered on a thread of their own while the block before runs.
  // On a CPU both run on threads that need a core of their own: only the cores the ranks'
  // compute threads leave free can hide them.
  const double compute = r.matmul_s + r.attention_s + r.memory_s + r.overhead_s;
  const double spare = m.kind == "cuda" ? 1.0
                                        : std::max(0.0, 1.0 - static_cast<double>(ranks) * r.threads /
                                                                  static_cast<double>(std::max(1, m.cores)));
  const double ring_hidden = std::min(ring_p2p_comm, r.attention_s * spare);
  const double weights_hidden = std::min(weights_comm, compute * spare);
  r.hidden_comm_s = ring_hidden + weights_hidden;
  r.comm_s += ring_p2p_comm - ring_hidden + weights_comm - weights_hidden;
  r.latency_s = compute + r.comm_s;

  // Memory.
  const double param_factor = m.fitted ? m.fitted->param_memory_factor : 1.0;
  const double act_factor = m.fitted ? m.fitted->activation_memory_factor : 1.0;
  int64_t params = 0;
  if (plan != nullptr) {
    params = plan->cost.weight_bytes;
    r.weight_buffer_bytes = plan->cost.weight_buffer_bytes;
    for (int64_t g : GroupsOfRank(plan->mesh)) {
      if (m.group_bytes.empty()) break;
      r.group_bytes += m.group_bytes[static_cast<size_t>(std::min<int64_t>(g - 2, static_cast<int64_t>(m.group_bytes.size()) - 1))];
    }
  } else {
    for (const auto& [fqn, sizes] : p.ParameterShapes()) {
      (void)fqn;
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      params += n * (p.manifest && p.manifest->dtype == "bf16" ? 2 : 4);
    }
  }
  r.param_bytes = static_cast<int64_t>(std::llround(static_cast<double>(params) * param_factor));
  r.activation_bytes = static_cast<int64_t>(std::llround(peak * act_factor));
  r.base_bytes = m.rank_base_bytes + (m.fitted ? static_cast<int64_t>(std::llround(m.fitted->memory_offset_bytes)) : 0);
  r.peak_bytes = r.base_bytes + r.group_bytes + r.param_bytes + r.weight_buffer_bytes + r.activation_bytes;
  return r;
}

}  // namespace weft::cost

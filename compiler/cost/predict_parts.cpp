#include "compiler/cost/predict_parts.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

namespace weft::cost::parts {
namespace {

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

// The mesh axes a collective group varies over: an axis itself, cp's ring and ulysses, or the
// weights' slicing axes.
std::vector<std::string> AxesOfGroup(const plan::Mesh& mesh, const std::string& group) {
  auto cp = [] { return std::vector<std::string>{std::string(plan::kRingAxis), std::string(plan::kUlyssesAxis)}; };
  if (group == plan::kCpGroup) return cp();
  if (group == "weights") {
    std::vector<std::string> axes;
    for (const std::string& w : mesh.weight_axes) {
      if (w == plan::kCpGroup) {
        for (const std::string& a : cp()) axes.push_back(a);
      } else {
        axes.push_back(w);
      }
    }
    return axes;
  }
  return {group};
}

}  // namespace

bool GroupSpansHosts(const plan::Mesh& mesh, const std::string& group, int ranks_per_host) {
  const int64_t world = std::max<int64_t>(1, mesh.world_size);
  if (ranks_per_host <= 0 || ranks_per_host >= world) return false;
  const std::vector<std::string> axes = AxesOfGroup(mesh, group);
  // Rank r's coordinate on axis i is (r / stride_i) % size_i, the innermost axis of stride 1. Two
  // ranks share a group when they agree on every other axis: the key below drops the group's axes.
  std::map<int64_t, int64_t> host_of_group;
  for (int64_t r = 0; r < world; ++r) {
    int64_t key = r, stride = world;
    for (const plan::MeshAxis& a : mesh.axes) {
      stride /= std::max<int64_t>(1, a.size);
      if (std::find(axes.begin(), axes.end(), a.name) != axes.end()) key -= ((r / stride) % a.size) * stride;
    }
    const int64_t host = r / ranks_per_host;
    auto [it, fresh] = host_of_group.emplace(key, host);
    if (!fresh && it->second != host) return true;
  }
  return false;
}

Setting SettingFor(const plan::ExecutionPlan* plan, const MachineProfile& m, const PredictOptions& o, Prediction& r) {
  Setting s;
  const int world = plan != nullptr ? static_cast<int>(std::max<int64_t>(1, plan->mesh.world_size)) : 1;
  s.ranks = o.ranks_per_host > 0 ? o.ranks_per_host : world;
  r.threads = o.threads > 0 ? o.threads : std::max(1, m.cores / std::max(1, s.ranks));
  if (m.kind == "cuda") r.threads = 1;
  s.transport = !o.transport.empty() ? o.transport : m.kind == "cuda" ? "nccl" : "shm";
  s.workload = !o.workload.empty() ? o.workload : plan != nullptr ? plan->workload.name : "";
  s.overhead_s = m.fitted ? m.fitted->node_overhead_s : m.op_overhead_s;
  s.crowding = std::max(1.0, static_cast<double>(s.ranks) * r.threads / std::max(1, m.cores));
  s.scale = !m.fitted ? 1.0 : s.ranks > 1 ? m.fitted->shared_compute_scale : m.fitted->compute_scale;
  return s;
}

Hideable PriceCollectives(const plan::ExecutionPlan& plan, const MachineProfile& m, const Setting& set, Prediction& r) {
  Hideable h;
  std::map<std::string, double> per_axis;
  std::map<std::string, bool> spans;  // by group: whether its ranks sit on two hosts (computed once)
  for (const plan::ModuleStep& s : plan.steps) {
    for (const plan::Collective& c : s.cost.collectives) {
      const int64_t n = GroupSize(plan, c.axis);
      if (n <= 1 || c.count <= 0) continue;
      const std::string op(plan::CollectiveOpName(c.op));
      // Point-to-point exchanges go over Gloo on CPUs whatever the transport of the collectives.
      std::string via = op == "send_recv" && m.kind == "cpu" ? "gloo" : set.transport;
      std::optional<CollectiveTime> fit;
      auto span = spans.find(c.axis);
      if (span == spans.end()) span = spans.emplace(c.axis, GroupSpansHosts(plan.mesh, c.axis, set.ranks)).first;
      if (span->second) {
        // Shared memory cannot join ranks on two hosts (runtime/dist decides per group): Gloo on
        // CPUs; on GPUs NCCL over the network, where the profile has it.
        const std::string across = m.kind == "cpu" ? "gloo" : via + "-net";
        fit = CollectiveAt(m, across, op, static_cast<int>(n));
        std::string note = "the " + c.axis + " groups span hosts (" + std::to_string(set.ranks) + " ranks per host): ";
        if (fit || m.kind == "cpu") {
          via = across;
          note += "priced on " + across;
        } else {
          note += "priced on " + via + " within a node, the profile has no " + across + " lines";
        }
        if (std::find(r.notes.begin(), r.notes.end(), note) == r.notes.end()) r.notes.push_back(note);
      }
      if (!fit) fit = CollectiveAt(m, via, op, static_cast<int>(n));
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
                                m.fitted->crowded_wait_s * (set.crowding - 1);
      if (op == "send_recv") r.p2p_exchanges += s.calls * c.count;
      const double t = static_cast<double>(s.calls) * (static_cast<double>(c.count) * (fit->alpha_s + wait) +
                                                       static_cast<double>(c.bytes) / fit->beta_bytes_per_s);
      r.collectives += s.calls * c.count;
      per_axis[c.axis] += t;
      if (c.axis == "weights") {
        h.weights_s += t;
      } else if (op == "send_recv" && c.axis == plan::kRingAxis && plan.mesh.rotate_method == plan::RotateMethod::kP2p) {
        // The ring's K/V rotation, under the attention; a halo exchange (axis cp) blocks its convolution.
        h.ring_p2p_s += t;
      } else {
        r.comm_s += t;
      }
    }
  }
  for (const auto& [axis, t] : per_axis) r.comm_per_axis.emplace_back(axis, t);
  return h;
}

void Finish(const plan::ExecutionPlan* plan, const MachineProfile& m, const Setting& set, const Hideable& h,
            int64_t params, double activation_peak, Prediction& r) {
  // The p2p ring overlaps each K/V step with the attention of the block it holds; sliced weights
  // are gathered on a thread of their own while the block before runs.
  // On a CPU both run on threads that need a core of their own: only the cores the ranks'
  // compute threads leave free can hide them.
  const double compute = r.matmul_s + r.attention_s + r.memory_s + r.overhead_s;
  const double spare = m.kind == "cuda" ? 1.0
                                        : std::max(0.0, 1.0 - static_cast<double>(set.ranks) * r.threads /
                                                                  static_cast<double>(std::max(1, m.cores)));
  const double ring_hidden = std::min(h.ring_p2p_s, r.attention_s * spare);
  const double weights_hidden = std::min(h.weights_s, compute * spare);
  r.hidden_comm_s = ring_hidden + weights_hidden;
  r.comm_s += h.ring_p2p_s - ring_hidden + h.weights_s - weights_hidden;
  r.latency_s = compute + r.comm_s;

  // Memory.
  const double param_factor = m.fitted ? m.fitted->param_memory_factor : 1.0;
  const double act_factor = m.fitted ? m.fitted->activation_memory_factor : 1.0;
  if (plan != nullptr) {
    params = plan->cost.weight_bytes;
    r.weight_buffer_bytes = plan->cost.weight_buffer_bytes;
    for (int64_t g : GroupsOfRank(plan->mesh)) {
      if (m.group_bytes.empty()) break;
      r.group_bytes += m.group_bytes[static_cast<size_t>(std::min<int64_t>(g - 2, static_cast<int64_t>(m.group_bytes.size()) - 1))];
    }
  }
  r.param_bytes = static_cast<int64_t>(std::llround(static_cast<double>(params) * param_factor));
  r.activation_bytes = static_cast<int64_t>(std::llround(activation_peak * act_factor));
  r.base_bytes = m.rank_base_bytes + (m.fitted ? static_cast<int64_t>(std::llround(m.fitted->memory_offset_bytes)) : 0);
  r.peak_bytes = r.base_bytes + r.group_bytes + r.param_bytes + r.weight_buffer_bytes + r.activation_bytes;
}

}  // namespace weft::cost::parts

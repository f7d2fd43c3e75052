#include "compiler/cost/graph_predict.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "compiler/cost/predict_parts.h"

namespace weft::cost {
namespace {

std::string ParentOf(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

// `path` is `root` or inside it ("" holds everything).
bool Within(const std::string& path, const std::string& root) {
  return root.empty() || path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                                          path[root.size()] == '.');
}

double Numel(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t s : shape) n *= static_cast<double>(s);
  return n;
}

double TensorBytesOf(const model::Value& v) { return static_cast<double>(std::max<int64_t>(0, v.Bytes())); }

// The first tensor among a call's arguments.
const model::Value* FirstTensor(const model::Call& c) {
  for (const auto& [name, v] : c.args) {
    (void)name;
    if (v.IsTensor()) return &v;
  }
  return nullptr;
}

}  // namespace

Prediction PredictFromGraph(const model::ModelGraph& g, const plan::ExecutionPlan* plan, const MachineProfile& m,
                            const PredictOptions& o) {
  Prediction r;
  r.from_graph = true;
  const parts::Setting set = parts::SettingFor(plan, m, o, r);
  const model::Workload* wl = set.workload.empty() ? (g.workloads.empty() ? nullptr : &g.workloads.front())
                                                   : g.FindWorkload(set.workload);
  if (wl == nullptr) {
    throw std::runtime_error("graph `" + g.name + "` has " +
                             (g.workloads.empty() ? std::string("no workloads to estimate at")
                                                  : "no workload `" + set.workload + "`"));
  }
  const double cp = plan != nullptr ? static_cast<double>(plan->mesh.Cp()) : 1;
  const double tp = plan != nullptr ? static_cast<double>(plan->mesh.Tp()) : 1;
  double cfg = 1;
  std::set<std::string> cp_sites, tp_modules;
  std::set<std::string> cp_regions;  // module subtrees computing on split tokens
  bool islands = true, cp_splits = false;
  if (plan != nullptr) {
    for (const plan::ModuleStep& s : plan->steps) {
      if (s.tp && s.tp->style != plan::ShardStyle::kReplicate) tp_modules.insert(s.module);
      if (s.attention && s.attention->mode != plan::AttentionMode::kLocal) cp_sites.insert(s.module);
      for (const plan::Split& split : s.splits) {
        if (split.group == plan::kCfgAxis && s.module.empty()) cfg = static_cast<double>(plan->mesh.Cfg());
        if (split.group == plan::kCpGroup) cp_splits = true;
      }
    }
    for (const plan::ModuleStep& s : plan->steps) {
      for (const plan::Split& split : s.splits) {
        if (split.group == plan::kCpGroup && !cp_sites.count(s.module)) islands = false;
      }
    }
    if (cp > 1 && cp_splits) {
      for (const std::string& site : cp_sites) cp_regions.insert(islands ? site : ParentOf(site));
    }
  }
  auto cp_degree = [&](const std::string& path) {
    for (const std::string& root : cp_regions) {
      if (Within(path, root)) return cp;
    }
    return 1.0;
  };
  auto rate_time = [&](const std::vector<RatePoint>& points, const std::string& dtype, double flops, double bytes,
                       double size) {
    const double rate = RateAt(m, points.empty() ? m.matmul : points, dtype, size, r.threads, set.ranks);
    const double bw = RateAt(m, m.elementwise, dtype, bytes, r.threads, set.ranks);
    return std::max(rate > 0 ? flops / rate : 0.0, bw > 0 ? bytes / bw : 0.0) * set.scale;
  };

  // Activations: the compiled plan's largest module call per rank (lower.cpp); unsharded, the
  // largest call's arguments and outputs.
  double peak = plan != nullptr ? static_cast<double>(plan->cost.activation_bytes) : 0;
  std::map<std::string, std::string> dtype_of;  // module -> its first tensor argument's dtype
  for (const model::ModuleCalls& mc : wl->calls) {
    if (!mc.calls.empty()) {
      if (const model::Value* x = FirstTensor(mc.calls.front())) dtype_of.emplace(mc.module, x->dtype);
    }
    const model::Module* mod = g.FindModule(mc.module);
    if (mod == nullptr) continue;
    const bool linear = mod->type == "Linear";
    if (!linear && !mod->children.empty()) continue;  // its children carry its work
    const double tp_d = linear && tp_modules.count(mc.module) ? tp : 1.0;
    const double d = cfg * cp_degree(mc.module) * tp_d;
    for (const model::Call& c : mc.calls) {
      double in_bytes = 0, out_bytes = 0;
      for (const auto& [name, v] : c.args) {
        (void)name;
        in_bytes += TensorBytesOf(v);
      }
      for (const model::Value& v : c.outputs) out_bytes += TensorBytesOf(v);
      if (plan == nullptr) peak = std::max(peak, in_bytes + out_bytes);
      const model::Value* x = FirstTensor(c);
      if (x == nullptr) continue;
      if (linear) {
        const model::Param* w = mod->FindParam("weight");
        if (w == nullptr || w->shape.size() != 2 || w->shape[1] <= 0) continue;
        const double in = static_cast<double>(w->shape[1]), out = static_cast<double>(w->shape[0]);
        const double tokens = Numel(x->shape) / in;
        const double flops = 2 * tokens * in * out / d;
        const double bytes = (in_bytes + out_bytes) / d + static_cast<double>(w->Bytes()) / tp_d;
        const double t = rate_time(m.matmul, x->dtype, flops, bytes, tokens * in * out / d);
        r.matmul_s += t;
        r.flops += flops;
        ++r.nodes;
      } else {
        const double bytes = (in_bytes + out_bytes) / d;
        if (bytes <= 0) continue;
        r.memory_s += rate_time(m.elementwise, x->dtype, 0, bytes, bytes);
        ++r.nodes;
      }
    }
  }
  for (const model::SiteCalls& sc : wl->attention) {
    const plan::ModuleStep* step = plan != nullptr ? plan->FindStep(sc.site) : nullptr;
    const bool context_parallel = cp_sites.count(sc.site) > 0;
    const bool heads_sharded = step != nullptr && step->attention && step->attention->local_heads > 0 &&
                               step->attention->local_heads < step->attention->heads;
    const double d = cfg * (context_parallel ? cp : 1.0) * (heads_sharded ? tp : 1.0);
    const double blocks = context_parallel && step->attention->ring > 1 &&
                                  step->attention->rotate_method == plan::RotateMethod::kP2p
                              ? static_cast<double>(step->attention->ring)
                              : 1.0;
    // The kernel's dtype: the attention module's first tensor argument's.
    const auto known = dtype_of.find(sc.site);
    const std::string dtype = known != dtype_of.end() ? known->second : "f32";
    const double elem = static_cast<double>(std::max<int64_t>(1, model::DTypeBytes(dtype)));
    for (const model::AttentionCall& a : sc.calls) {
      if (a.q.size() != 4 || a.k.size() != 4) continue;
      // (B, S, H, D) as the graph records them.
      const double B = static_cast<double>(a.q[0]), Sq = static_cast<double>(a.q[1]), H = static_cast<double>(a.q[2]);
      const double D = static_cast<double>(a.q[3]), Skv = static_cast<double>(a.k[1]);
      const double flops = 4 * B * H * Sq * Skv * D / d;
      const double bytes = (2 * B * Sq * H * D + 2 * B * Skv * H * D) * elem / d;
      r.attention_s += rate_time(m.attention, dtype, flops, bytes, Skv / blocks);
      r.flops += flops;
      ++r.nodes;
    }
  }
  r.notes.push_back("estimated from the graph's module calls (Linear and attention arithmetic, leaf modules' memory "
                    "traffic): operators outside any module and the per-operator overhead are not in it; export a "
                    "program for a prediction of every node");

  parts::Hideable hide;
  if (plan != nullptr) hide = parts::PriceCollectives(*plan, m, set, r);
  parts::Finish(plan, m, set, hide, g.ParamBytes(), peak, r);
  return r;
}

}  // namespace weft::cost

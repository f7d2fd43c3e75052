#include "compiler/cost/mesh_search.h"

#include <algorithm>
#include <numeric>
#include <string_view>

#include "compiler/compile.h"
#include "compiler/cost/graph_predict.h"
#include "compiler/program/lowering.h"
#include "compiler/program/plan_edit_error.h"

namespace weft::cost {
namespace {

// The first error a compile reported, as one line.
std::string FirstError(const diag::CollectingConsumer& c) {
  for (const diag::Diagnostic& d : c.diagnostics()) {
    if (d.level == diag::Level::kError && !d.messages.empty()) return d.messages[0].text;
  }
  return "the plan does not compile at this mesh";
}

// The world orders worth weighing for `spec`: its axes of more than one rank in the default order
// and, when the ranks span hosts, every other order of them (which axes stay within a host is what
// an order changes; axes of one rank go anywhere).
std::vector<std::vector<std::string_view>> OrdersOf(const plan::MeshSpec& spec, bool several_hosts) {
  std::vector<std::string_view> axes;
  for (std::string_view axis : spec.order) {
    if (spec.Size(axis) > 1) axes.push_back(axis);
  }
  std::vector<std::vector<std::string_view>> orders = {axes};
  if (!several_hosts) return orders;
  std::vector<size_t> at(axes.size());
  std::iota(at.begin(), at.end(), size_t{0});
  while (std::next_permutation(at.begin(), at.end())) {
    std::vector<std::string_view> order;
    for (size_t i : at) order.push_back(axes[i]);
    orders.push_back(std::move(order));
  }
  return orders;
}

// `order=...` for --mesh: the axes of one rank outermost (where they are does not matter), then
// `order`.
std::string OrderArgument(const plan::MeshSpec& spec, const std::vector<std::string_view>& order) {
  std::string out;
  for (std::string_view axis : spec.order) {
    if (spec.Size(axis) == 1) out += (out.empty() ? "" : ":") + std::string(axis);
  }
  for (std::string_view axis : order) out += (out.empty() ? "" : ":") + std::string(axis);
  return "order=" + out;
}

}  // namespace

std::vector<plan::MeshSpec> MeshesOf(int64_t n) {
  std::vector<plan::MeshSpec> out;
  for (int64_t cfg = 1; cfg <= n; ++cfg) {
    if (n % cfg) continue;
    for (int64_t tp = 1; tp <= n / cfg; ++tp) {
      if ((n / cfg) % tp) continue;
      for (int64_t ring = 1; ring <= n / cfg / tp; ++ring) {
        if ((n / cfg / tp) % ring) continue;
        plan::MeshSpec s;
        s.cfg = cfg;
        s.tp = tp;
        s.ring = ring;
        s.ulysses = n / cfg / tp / ring;
        out.push_back(s);
      }
    }
  }
  return out;
}

std::vector<Candidate> SearchMeshes(const SearchRequest& r, size_t keep_plans) {
  std::vector<Candidate> all;
  const bool several_hosts = r.predict.ranks_per_host > 0 && r.predict.ranks_per_host < r.nproc;
  for (const plan::MeshSpec& spec : MeshesOf(r.nproc)) {
    const std::vector<std::vector<std::string_view>> orders = OrdersOf(spec, several_hosts);
    std::vector<plan::RotateMethod> rotations = {r.flags.rotate_method};
    if (spec.ring > 1) rotations = {plan::RotateMethod::kAllGather, plan::RotateMethod::kP2p};
    std::vector<std::vector<std::string>> weights = {{}};
    if (r.weight_sharding) {
      const bool cp = spec.ring * spec.ulysses > 1, cfg = spec.cfg > 1;
      if (cp) weights.push_back({std::string(plan::kCpGroup)});
      if (cfg) weights.push_back({std::string(plan::kCfgAxis)});
      if (cp && cfg) weights.push_back({std::string(plan::kCpGroup), std::string(plan::kCfgAxis)});
    }
    for (size_t o = 0; o < orders.size(); ++o) {
      const std::vector<std::string_view>& order = orders[o];
      for (plan::RotateMethod rotate : rotations) {
        for (const std::vector<std::string>& w : weights) {
          Candidate c;
          c.mesh = r.flags;
          c.mesh.axes.clear();
          for (std::string_view axis : order) c.mesh.axes.push_back({std::string(axis), spec.Size(axis)});
          if (c.mesh.axes.empty()) c.mesh.axes.push_back({std::string(plan::kUlyssesAxis), 1});
          c.mesh.world_size = r.nproc;
          c.mesh.rotate_method = rotate;
          c.mesh.weight_axes = w;
          c.mesh_arg = c.mesh.ToString();  // its axes of more than one rank, in world order
          if (o > 0) c.mesh_arg += "," + OrderArgument(spec, order);  // the default order says nothing
          c.text = c.mesh_arg;
          if (spec.ring > 1) c.text += " rotate=" + std::string(plan::RotateMethodName(rotate));
          if (!w.empty()) {
            std::string axes;
            for (const std::string& a : w) axes += (axes.empty() ? "" : ",") + a;
            c.text += " shard-weights=" + axes;
          }
          all.push_back(std::move(c));
        }
      }
    }
  }
  for (Candidate& c : all) {
    bind::BindOptions b;
    b.mesh = c.mesh;
    b.world_size = r.nproc;
    b.workload = r.workload.empty() && !r.graph->workloads.empty() ? r.graph->workloads.front().name : r.workload;
    b.plan_file = r.plan_file;
    b.activation_bytes = r.activation_bytes;
    b.checked_by_dataflow = true;
    diag::CollectingConsumer collected;
    diag::Emitter diags(*r.sources, collected, 1);
    std::optional<plan::ExecutionPlan> plan = CompileAst(*r.ast, *r.graph, b, diags);
    if (!plan) {
      c.refusal = FirstError(collected);
      continue;
    }
    try {
      PredictOptions po = r.predict;
      po.workload = b.workload;
      if (r.program != nullptr) {
        program::LowerToProgramWithCost(*plan, *r.program, r.program_file, *r.graph);
        c.prediction = Predict(*r.program, &*plan, r.machine, po);
      } else {
        c.prediction = PredictFromGraph(*r.graph, &*plan, r.machine, po);
      }
      c.over_memory = r.memory_per_rank > 0 && c.prediction->peak_bytes > r.memory_per_rank;
      c.plan = std::move(plan);
    } catch (const std::exception& e) {
      c.refusal = e.what();
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    const int ra = a.prediction ? (a.over_memory ? 1 : 0) : 2, rb = b.prediction ? (b.over_memory ? 1 : 0) : 2;
    if (ra != rb) return ra < rb;
    if (ra == 2) return false;
    return a.prediction->latency_s < b.prediction->latency_s;
  });
  for (size_t i = keep_plans; i < all.size(); ++i) all[i].plan.reset();
  return all;
}

}  // namespace weft::cost

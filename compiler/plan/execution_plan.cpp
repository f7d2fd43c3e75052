#include "compiler/plan/execution_plan.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "compiler/source/checked_math.h"

namespace weft::plan {

std::string Origin::ToString() const {
  if (!Known()) return derived ? "<derived>" : "<unknown>";
  return file + ":" + std::to_string(line) + ":" + std::to_string(col) + (derived ? " (derived)" : "");
}

std::string_view RotateMethodName(RotateMethod m) {
  return m == RotateMethod::kP2p ? "p2p" : "allgather";
}

std::optional<RotateMethod> ParseRotateMethod(std::string_view name) {
  if (name == "allgather") return RotateMethod::kAllGather;
  if (name == "p2p" || name == "alltoall") return RotateMethod::kP2p;
  return std::nullopt;
}

int64_t Mesh::Size(std::string_view axis) const {
  for (const MeshAxis& a : axes) {
    if (a.name == axis) return a.size;
  }
  return 1;
}

int64_t Mesh::WeightRanks() const {
  int64_t ranks = 1;
  for (const std::string& axis : weight_axes) ranks *= axis == kCpGroup ? Cp() : Size(axis);
  return ranks;
}

std::string Mesh::ToString() const {
  std::string out;
  for (const MeshAxis& a : axes) {
    if (!out.empty()) out += ',';
    out += a.name + "=" + std::to_string(a.size);
  }
  return out;
}

std::string_view SplitTargetName(Split::Target t) {
  return t == Split::Target::kOutput ? "output" : "argument";
}

std::string_view AttentionModeName(AttentionMode m) {
  switch (m) {
    case AttentionMode::kLocal:
      return "local";
    case AttentionMode::kUlysses:
      return "ulysses";
    case AttentionMode::kRing:
      return "ring";
    case AttentionMode::kUsp:
      return "usp";
  }
  return "local";
}

std::optional<AttentionMode> ParseAttentionMode(std::string_view name) {
  for (AttentionMode m : {AttentionMode::kLocal, AttentionMode::kUlysses, AttentionMode::kRing,
                          AttentionMode::kUsp}) {
    if (AttentionModeName(m) == name) return m;
  }
  return std::nullopt;
}

std::string_view ShardStyleName(ShardStyle s) {
  switch (s) {
    case ShardStyle::kColwise:
      return "colwise";
    case ShardStyle::kRowwise:
      return "rowwise";
    case ShardStyle::kReplicate:
      return "replicate";
    case ShardStyle::kPackedColwise:
      return "packed_colwise";
    case ShardStyle::kPackedRowwise:
      return "packed_rowwise";
  }
  return "replicate";
}

std::optional<ShardStyle> ParseShardStyle(std::string_view name) {
  for (ShardStyle s : {ShardStyle::kColwise, ShardStyle::kRowwise, ShardStyle::kReplicate,
                       ShardStyle::kPackedColwise, ShardStyle::kPackedRowwise}) {
    if (ShardStyleName(s) == name) return s;
  }
  return std::nullopt;
}

std::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllToAll:
      return "all_to_all";
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kSendRecv:
      return "send_recv";
  }
  return "all_gather";
}

std::optional<CollectiveOp> ParseCollectiveOp(std::string_view name) {
  for (CollectiveOp op : {CollectiveOp::kAllToAll, CollectiveOp::kAllGather, CollectiveOp::kAllReduce,
                          CollectiveOp::kSendRecv}) {
    if (CollectiveOpName(op) == name) return op;
  }
  return std::nullopt;
}

const ModuleStep* ExecutionPlan::FindStep(std::string_view module) const {
  for (const ModuleStep& s : steps) {
    if (s.module == module) return &s;
  }
  return nullptr;
}

std::vector<std::string> ParseWeightAxes(std::string_view text) {
  std::vector<std::string> axes;
  if (text.find(kCpGroup) != std::string_view::npos) axes.emplace_back(kCpGroup);
  if (text.find(kCfgAxis) != std::string_view::npos) axes.emplace_back(kCfgAxis);
  return axes;
}

int64_t FirstCfgRankBatch(const ExecutionPlan& plan, int64_t batch) {
  if (plan.mesh.Cfg() <= 1) return batch;
  for (const ModuleStep& step : plan.steps) {
    for (const Split& s : step.splits) {
      if (s.group == kCfgAxis && s.global_size == batch && !s.sizes.empty()) return s.sizes.front();
    }
  }
  return batch;
}

std::vector<int64_t> SplitSizes(int64_t length, int64_t parts) {
  if (parts <= 0) return {};
  std::vector<int64_t> sizes(static_cast<size_t>(parts), length / parts);
  const int64_t extra = length % parts;
  for (int64_t r = 0; r < extra; ++r) ++sizes[static_cast<size_t>(r)];
  return sizes;
}

std::vector<Collective> GuidanceCallsCollectives(const GuidanceCalls& g) {
  std::vector<Collective> out;
  const int64_t cfg = static_cast<int64_t>(g.per_group.size());
  if (cfg <= 1) return out;
  // The first group's calls' outputs go to every other group (an all-gather); uneven groups
  // exchange their counts first (one int64 from every rank).
  out.push_back({CollectiveOp::kAllGather, std::string(kCfgAxis), 1,
                 source::SaturatingMul(source::SaturatingMul(g.output_bytes, g.per_group.front()), cfg - 1)});
  const bool uneven = std::any_of(g.per_group.begin(), g.per_group.end(),
                                  [&](int64_t n) { return n != g.per_group.front(); });
  if (uneven) out.push_back({CollectiveOp::kAllGather, std::string(kCfgAxis), 1, 8 * (cfg - 1)});
  return out;
}

void SummarizeCost(ExecutionPlan& plan, int64_t extra_weight_bytes) {
  std::map<std::string, AxisTraffic> by_axis;
  PlanCost total;
  total.weight_bytes = extra_weight_bytes;
  for (const ModuleStep& step : plan.steps) {
    for (const Collective& c : step.cost.collectives) {
      AxisTraffic& t = by_axis[c.axis];
      t.axis = c.axis;
      t.collectives = source::SaturatingAdd(t.collectives, source::SaturatingMul(c.count, step.calls));
      t.bytes = source::SaturatingAdd(t.bytes, source::SaturatingMul(c.bytes, step.calls));
    }
    total.weight_bytes = source::SaturatingAdd(total.weight_bytes, step.cost.weight_bytes);
    total.activation_bytes = std::max(total.activation_bytes, step.cost.activation_bytes);
  }
  if (plan.guidance_calls && !plan.guidance_calls->per_group.empty()) {
    // Every step runs once per call, and the first cfg group makes the most calls; then the
    // outputs of all of them are gathered over cfg.
    const GuidanceCalls& g = *plan.guidance_calls;
    for (auto& [axis, t] : by_axis) {
      t.collectives = source::SaturatingMul(t.collectives, g.per_group.front());
      t.bytes = source::SaturatingMul(t.bytes, g.per_group.front());
    }
    for (const Collective& c : GuidanceCallsCollectives(g)) {
      AxisTraffic& t = by_axis[c.axis];
      t.axis = c.axis;
      t.collectives = source::SaturatingAdd(t.collectives, c.count);
      t.bytes = source::SaturatingAdd(t.bytes, c.bytes);
    }
  }
  for (auto& [axis, t] : by_axis) {
    if (t.collectives == 0 && t.bytes == 0) continue;
    total.collectives = source::SaturatingAdd(total.collectives, t.collectives);
    total.bytes = source::SaturatingAdd(total.bytes, t.bytes);
    total.per_axis.push_back(t);
  }
  plan.cost = std::move(total);
}

namespace {

void CheckSizes(const std::string& where, int64_t global, const std::vector<int64_t>& sizes, bool uneven,
                int64_t cp, std::vector<std::string>& problems) {
  if (static_cast<int64_t>(sizes.size()) != cp) {
    problems.push_back(where + ": " + std::to_string(sizes.size()) + " per-rank sizes for a CP group of " +
                       std::to_string(cp));
  }
  std::optional<int64_t> sum = 0;
  bool negative = false;
  for (int64_t size : sizes) {
    negative |= size < 0;
    if (sum) sum = source::CheckedAdd(*sum, size);
  }
  if (negative) {
    problems.push_back(where + ": a per-rank size is negative");
  } else if (!sum) {
    problems.push_back(where + ": per-rank sizes sum past 9223372036854775807 (2^63 - 1), not to " +
                       std::to_string(global));
  } else if (*sum != global) {
    problems.push_back(where + ": per-rank sizes sum to " + std::to_string(*sum) + ", not " +
                       std::to_string(global));
  }
  const bool differ = std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) != sizes.end();
  if (differ && !uneven) problems.push_back(where + ": sizes differ but `uneven` is false");
}

}  // namespace

std::vector<std::string> CheckPlan(const ExecutionPlan& plan) {
  std::vector<std::string> problems;
  if (plan.version != kPlanVersion) {
    problems.push_back("plan version " + std::to_string(plan.version) + " is not " +
                       std::to_string(kPlanVersion));
  }
  int64_t product = 1;
  std::unordered_set<std::string> axis_names;
  for (const MeshAxis& a : plan.mesh.axes) {
    if (a.size < 1) problems.push_back("mesh axis `" + a.name + "` has size " + std::to_string(a.size));
    if (a.name.empty() || a.name == kCpGroup) problems.push_back("mesh axis name `" + a.name + "` is reserved or empty");
    if (!axis_names.insert(a.name).second) problems.push_back("mesh axis `" + a.name + "` appears twice");
    product = source::SaturatingMul(product, std::max<int64_t>(a.size, 1));
  }
  if (product == source::kSaturated) {
    problems.push_back("mesh " + plan.mesh.ToString() + " has more than 9223372036854775807 (2^63 - 1) ranks");
  } else if (product != plan.mesh.world_size) {
    problems.push_back("mesh " + plan.mesh.ToString() + " has " + std::to_string(product) +
                       " ranks; world size is " + std::to_string(plan.mesh.world_size));
  }
  const int64_t cp = plan.mesh.Cp();
  std::unordered_set<std::string> modules;
  for (const ModuleStep& step : plan.steps) {
    const std::string m = "step `" + step.module + "`";
    if (!modules.insert(step.module).second) problems.push_back(m + " appears twice");
    if (step.calls < 1) problems.push_back(m + ": calls must be >= 1");
    for (const Split& s : step.splits) {
      const std::string w = m + " split " +
                            (s.target == Split::Target::kArgument ? "`" + s.argument + "`"
                                                                  : "output " + std::to_string(s.output));
      if (s.dim < 0 || s.dim >= s.rank) {
        problems.push_back(w + ": dim " + std::to_string(s.dim) + " is outside rank " + std::to_string(s.rank));
      }
      if (s.target == Split::Target::kArgument && s.argument.empty()) problems.push_back(w + ": no argument name");
      if (s.target == Split::Target::kOutput && s.output < 0) problems.push_back(w + ": no output index");
      CheckSizes(w, s.global_size, s.sizes, s.uneven, s.group == kCfgAxis ? plan.mesh.Cfg() : cp, problems);
    }
    for (const Gather& g : step.gathers) {
      const std::string w = m + " gather output " + std::to_string(g.output);
      if (g.dim < 0 || g.dim >= g.rank) {
        problems.push_back(w + ": dim " + std::to_string(g.dim) + " is outside rank " + std::to_string(g.rank));
      }
      CheckSizes(w, g.global_size, g.sizes, g.uneven, g.group == kCfgAxis ? plan.mesh.Cfg() : cp, problems);
    }
    if (step.attention) {
      const Attention& a = *step.attention;
      if (a.heads <= 0 || a.head_dim <= 0 || a.local_heads <= 0) {
        problems.push_back(m + ": attention needs positive heads, head_dim and local_heads");
      } else if (a.ulysses > 0 && (a.local_heads + a.head_pad) % a.ulysses != 0) {
        problems.push_back(m + ": " + std::to_string(a.local_heads) + " local heads + " +
                           std::to_string(a.head_pad) + " padding is not divisible by ulysses " +
                           std::to_string(a.ulysses));
      }
    }
    if (step.tp) {
      for (const ParamShard& p : step.tp->params) {
        if (p.full_shape.size() != p.local_shape.size()) {
          problems.push_back(m + ": parameter `" + p.name + "` full and local shapes differ in rank");
        }
        if (p.dim >= static_cast<int64_t>(p.full_shape.size())) {
          problems.push_back(m + ": parameter `" + p.name + "` is sharded on dim " + std::to_string(p.dim) +
                             " of a rank-" + std::to_string(p.full_shape.size()) + " tensor");
        }
      }
    }
  }
  return problems;
}

namespace {
constexpr std::pair<ProgramEdit::Kind, std::string_view> kEditKinds[] = {
    {ProgramEdit::Kind::kSplit, "split"},         {ProgramEdit::Kind::kGather, "gather"},
    {ProgramEdit::Kind::kAttention, "attention"}, {ProgramEdit::Kind::kAllReduce, "all_reduce"},
    {ProgramEdit::Kind::kArgument, "argument"},   {ProgramEdit::Kind::kNormStats, "norm_stats"},
    {ProgramEdit::Kind::kHalo, "halo"},
};
}  // namespace

std::string_view ProgramEditKindName(ProgramEdit::Kind k) {
  for (const auto& [kind, name] : kEditKinds) {
    if (kind == k) return name;
  }
  return "?";
}

std::optional<ProgramEdit::Kind> ParseProgramEditKind(std::string_view name) {
  for (const auto& [kind, n] : kEditKinds) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

}  // namespace weft::plan

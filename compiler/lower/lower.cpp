#include "compiler/lower/lower.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "compiler/model/graph_json.h"
#include "compiler/plan/cost.h"
#include "compiler/source/checked_math.h"

namespace weft::lower {
namespace {

WEFT_DIAGNOSTIC(CostOverflow, Error,
                "{0} at workload `{1}` count past 9223372036854775807 (2^63 - 1); the graph's sizes are too large "
                "for 64-bit byte counts, so this plan's cost cannot be computed",
                std::string, std::string);

// The guidance branches the plan splits over cfg (the batch), and how many of them the first cfg
// rank holds -- the most of any rank (uneven splits give the first ranks one more), so costs are
// that rank's. {0, 0} without a cfg split.
std::pair<int64_t, int64_t> Branches(const bind::BoundPlan& b) {
  if (b.mesh.Cfg() <= 1 || b.cfg_splits.empty()) return {0, 0};
  const plan::Split& s = b.cfg_splits.front().split;
  return {s.global_size, s.sizes.front()};
}

// `bytes` of a tensor whose dim 0 is `dim0`, as the first cfg rank holds it: its branches only
// when dim 0 is the branches' batch.
int64_t OnBranches(int64_t bytes, int64_t dim0, const bind::BoundPlan& b) {
  const auto [batch, local] = Branches(b);
  if (batch <= 0 || dim0 != batch || bytes == source::kSaturated) return bytes;
  return source::SaturatingMul(bytes / batch, local);
}

// Bytes of `v` held by one rank: tensors with a dim of a split length are divided by the CP
// degree (they run inside the split region), tensors over the guidance branches hold this rank's
// (OnBranches), others are whole.
int64_t LocalBytes(const model::Value& v, const bind::BoundPlan& b) {
  if (v.kind == model::Value::Kind::kTuple) {
    int64_t total = 0;
    for (const model::Value& e : v.elements) total = source::SaturatingAdd(total, LocalBytes(e, b));
    return total;
  }
  if (!v.IsTensor()) return 0;
  const int64_t bytes = v.shape.empty() ? v.Bytes() : OnBranches(v.Bytes(), v.shape.front(), b);
  const int64_t cp = b.mesh.Cp();
  for (int64_t d : v.shape) {
    if (cp > 1 && bytes != source::kSaturated &&
        std::binary_search(b.sharded_lengths.begin(), b.sharded_lengths.end(), d)) {
      return bytes / cp;
    }
  }
  return bytes;
}

int64_t CallBytes(const model::Call& call, const bind::BoundPlan& b) {
  int64_t total = 0;
  for (const auto& [name, v] : call.args) total = source::SaturatingAdd(total, LocalBytes(v, b));
  for (const model::Value& v : call.outputs) total = source::SaturatingAdd(total, LocalBytes(v, b));
  return total;
}

// Elements one rank holds of `module`'s first traced output (first call), and that output's
// last dim (>= 1); nullopt when the trace has no output for it. Elements saturate like bytes.
std::optional<std::pair<int64_t, int64_t>> FirstOutputLocalElements(const model::Workload& w,
                                                                    const std::string& module,
                                                                    const bind::BoundPlan& b) {
  const model::ModuleCalls* calls = w.FindCalls(module);
  if (calls == nullptr || calls->calls.empty() || calls->calls.front().outputs.empty()) return std::nullopt;
  const model::Value& out = calls->calls.front().outputs.front();
  const int64_t bytes = LocalBytes(out, b);
  const int64_t elems =
      bytes == source::kSaturated ? source::kSaturated : bytes / std::max<int64_t>(1, model::DTypeBytes(out.dtype));
  return std::make_pair(elems, out.shape.empty() ? int64_t{1} : std::max<int64_t>(1, out.shape.back()));
}

// The traced output a gather moves (its module's first call), or nullptr when the trace lacks it.
const model::Value* GatheredOutput(const model::Workload& w, const std::string& module, const plan::Gather& g) {
  const model::ModuleCalls* calls = w.FindCalls(module);
  if (calls == nullptr || calls->calls.empty() || g.output >= static_cast<int64_t>(calls->calls.front().outputs.size())) {
    return nullptr;
  }
  return &calls->calls.front().outputs[static_cast<size_t>(g.output)];
}

// Bytes of `v` as the run holds it: floating tensors in the run's activation dtype, not
// necessarily the trace's.
int64_t RunBytes(const model::Value& v, int64_t elem_bytes) {
  const int64_t traced = model::DTypeBytes(v.dtype);
  const bool floating = v.dtype == "bf16" || (!v.dtype.empty() && v.dtype[0] == 'f');
  return floating && traced > 0 && v.Bytes() != source::kSaturated ? source::SaturatingMul(v.Bytes() / traced, elem_bytes)
                                                                     : v.Bytes();
}

// What a gather of `full` bytes over `ranks` sends from the group's first rank (its counters are
// the ones reported): its rows of the gathered dim (the most, when the length does not divide:
// SplitSizes) to every other rank.
int64_t GatherSentBytes(int64_t full, const plan::Gather& g, int64_t ranks) {
  if (full == source::kSaturated || g.global_size <= 0 || g.sizes.empty()) return plan::AllGatherBytes(full, ranks);
  return source::SaturatingMul(source::SaturatingMul(full / g.global_size, g.sizes.front()), ranks - 1);
}

// The first cost of `p` that saturated (a byte or call count past int64), described.
std::optional<std::string> SaturatedCost(const plan::ExecutionPlan& p) {
  auto at = [](const plan::ModuleStep& s, const std::string& what) {
    return what + " of `" + (s.module.empty() ? std::string("<root>") : s.module) + "`";
  };
  for (const plan::ModuleStep& s : p.steps) {
    for (const plan::Collective& c : s.cost.collectives) {
      if (c.bytes == source::kSaturated || c.count == source::kSaturated) {
        return at(s, "the " + std::string(plan::CollectiveOpName(c.op)) + " bytes");
      }
    }
    if (s.cost.weight_bytes == source::kSaturated) return at(s, "the weight bytes");
    if (s.cost.activation_bytes == source::kSaturated) return at(s, "the activation bytes");
  }
  if (p.cost.bytes == source::kSaturated || p.cost.collectives == source::kSaturated) {
    return std::string("the bytes sent per forward");
  }
  for (const plan::AxisTraffic& t : p.cost.per_axis) {
    if (t.bytes == source::kSaturated || t.collectives == source::kSaturated) {
      return "the bytes sent on axis `" + t.axis + "`";
    }
  }
  if (p.cost.weight_bytes == source::kSaturated) return std::string("the weight bytes per rank");
  if (p.cost.activation_bytes == source::kSaturated) return std::string("the activation bytes per rank");
  return std::nullopt;
}

}  // namespace

std::optional<plan::ExecutionPlan> Lower(const bind::BoundPlan& b, const model::ModelGraph& graph,
                                         diag::Emitter& diags) {
  plan::ExecutionPlan p;
  p.plan_name = b.plan_name;
  p.plan_file = b.plan_file;
  p.model_class = b.model_class;
  p.graph_name = graph.name;
  p.graph_hash = graph.Hash();
  p.mesh = b.mesh;
  const model::Workload* w = graph.FindWorkload(b.workload);
  if (w == nullptr) return std::nullopt;
  p.workload.name = w->name;
  p.workload.params = w->params;
  const int64_t cp = b.mesh.Cp();
  const int64_t T = b.mesh.Tp();
  const int64_t elem_bytes = b.activation_bytes;  // 2 = the graphs' bf16; 4 for fp32 jobs
  // The element size is part of what the plan predicts, so it is recorded (and hashed).
  if (elem_bytes != 2) p.workload.params.emplace_back("activation_bytes", std::to_string(elem_bytes));

  std::map<model::ModuleId, plan::ModuleStep> steps;
  auto step_of = [&](model::ModuleId id) -> plan::ModuleStep& {
    auto it = steps.find(id);
    if (it != steps.end()) return it->second;
    plan::ModuleStep& s = steps[id];
    s.module = graph.modules[id].path;
    const model::ModuleCalls* calls = w->FindCalls(s.module);
    s.calls = calls != nullptr && !calls->calls.empty() ? static_cast<int64_t>(calls->calls.size()) : 1;
    if (calls != nullptr && !calls->calls.empty()) s.cost.activation_bytes = CallBytes(calls->calls.front(), b);
    return s;
  };

  // Without a CP group (ring x ulysses = 1) splits and gathers are no-ops: no steps.
  const std::vector<bind::BoundSplit> no_splits;
  const std::vector<bind::BoundGather> no_gathers;
  for (const bind::BoundSplit& s : cp > 1 ? b.splits : no_splits) step_of(s.module).splits.push_back(s.split);

  for (const bind::BoundGather& g : cp > 1 ? b.gathers : no_gathers) {
    plan::ModuleStep& s = step_of(g.module);
    s.gathers.push_back(g.gather);
    const model::Value* v = GatheredOutput(*w, s.module, g.gather);
    int64_t bytes = v != nullptr ? RunBytes(*v, elem_bytes) : 0;
    if (v != nullptr && !v->shape.empty()) bytes = OnBranches(bytes, v->shape.front(), b);
    s.cost.collectives.push_back(
        {plan::CollectiveOp::kAllGather, std::string(plan::kCpGroup), 1, GatherSentBytes(bytes, g.gather, cp)});
    if (g.gather.uneven || b.mesh.Uneven()) {
      // Per-rank lengths are exchanged first: one int64 from every rank. Under an uneven mode the
      // runner always does (ProgramEdit::uneven: another call's lengths may not divide), also
      // where this workload's do.
      s.cost.collectives.push_back({plan::CollectiveOp::kAllGather, std::string(plan::kCpGroup), 1, 8 * (cp - 1)});
    }
  }

  // The guidance branches: split over cfg before forward, gathered after; each rank sends its
  // branches of the output to every other cfg rank.
  const int64_t cfg = b.mesh.Cfg();
  for (const bind::BoundSplit& s : cfg > 1 ? b.cfg_splits : no_splits) step_of(s.module).splits.push_back(s.split);
  for (const bind::BoundGather& g : cfg > 1 ? b.cfg_gathers : no_gathers) {
    plan::ModuleStep& s = step_of(g.module);
    s.gathers.push_back(g.gather);
    const model::Value* v = GatheredOutput(*w, s.module, g.gather);
    // This rank's rows of the gathered dim (a CP split of another dim has been gathered first).
    const int64_t full = v != nullptr ? RunBytes(*v, elem_bytes) : 0;
    s.cost.collectives.push_back(
        {plan::CollectiveOp::kAllGather, std::string(plan::kCfgAxis), 1, GatherSentBytes(full, g.gather, cfg)});
    if (g.gather.uneven) {
      s.cost.collectives.push_back({plan::CollectiveOp::kAllGather, std::string(plan::kCfgAxis), 1, 8 * (cfg - 1)});
    }
  }

  for (const bind::BoundAttention& a : b.attention) {
    plan::ModuleStep& s = step_of(a.module);
    plan::Attention at;
    at.mode = a.context_parallel ? plan::ModeFor(b.mesh.Ulysses(), b.mesh.Ring()) : plan::AttentionMode::kLocal;
    at.heads = a.heads;
    at.head_dim = a.head_dim;
    at.local_heads = a.local_heads > 0 ? a.local_heads : a.heads;
    at.head_pad = a.head_pad;
    const bool cpmode = at.mode != plan::AttentionMode::kLocal;
    at.ulysses = cpmode ? b.mesh.Ulysses() : 1;
    at.ring = cpmode ? b.mesh.Ring() : 1;
    at.uneven_sequence = cpmode && (a.q_len % cp != 0 || a.kv_len % cp != 0);
    at.rotate_method = b.mesh.rotate_method;
    at.convert_to_fp32 = b.mesh.convert_to_fp32;
    at.q_len = a.q_len;
    at.kv_len = a.kv_len;
    at.origin = a.origin;
    s.attention = at;
    if (!cpmode) continue;
    const model::SiteCalls* calls = w->FindAttention(s.module);
    if (calls == nullptr) continue;
    // Sum the site's attention calls into one module call.
    std::vector<plan::Collective> merged;
    int64_t kv_buffer = 0;
    for (const model::AttentionCall& c : calls->calls) {
      const auto [branches, local_branches] = Branches(b);
      plan::AttentionCommInput in = plan::CommInputOf(
          at, branches > 0 && c.q.at(0) == branches ? local_branches : c.q.at(0), c.q.at(1), c.k.at(1), elem_bytes);
      in.q_replicated = !a.q_sharded;
      for (const plan::Collective& col : plan::AttentionCollectives(in)) plan::AddCollective(merged, col);
      kv_buffer = std::max(kv_buffer, plan::RingKvBufferBytes(in));
    }
    for (const plan::Collective& col : merged) s.cost.collectives.push_back(plan::PerCall(col, s.calls));
    s.cost.activation_bytes = source::SaturatingAdd(s.cost.activation_bytes, kv_buffer);
  }

  int64_t tp_full_bytes = 0;
  // Without a tp axis the TP rules have nothing to do: no steps (weights stay whole).
  for (const bind::BoundTp& t : T > 1 ? b.tp : std::vector<bind::BoundTp>{}) {
    plan::ModuleStep& s = step_of(t.module);
    const model::Module& m = graph.modules[t.module];
    plan::TensorParallel tp;
    tp.style = t.style;
    tp.origin = t.origin;
    const model::Param* weight = m.FindParam("weight");
    const bool col = t.style == plan::ShardStyle::kColwise || t.style == plan::ShardStyle::kPackedColwise;
    if (!t.blocks.empty()) {
      tp.blocks = t.blocks;
    } else if (weight != nullptr && weight->shape.size() == 2 && t.style != plan::ShardStyle::kReplicate) {
      tp.blocks = {col ? weight->shape[0] : weight->shape[1]};
    }
    for (const model::Param& param : m.params) {
      if (param.buffer) continue;
      plan::ParamShard ps = plan::ShardParam(param.name, param.shape, t.style, t.blocks, T);
      s.cost.weight_bytes = source::SaturatingAdd(
          s.cost.weight_bytes, source::SaturatingMul(plan::Numel(ps.local_shape), model::DTypeBytes(param.dtype)));
      tp_full_bytes = source::SaturatingAdd(tp_full_bytes, param.Bytes());
      tp.params.push_back(std::move(ps));
    }
    tp.all_reduce_output =
        T > 1 && (t.style == plan::ShardStyle::kRowwise || t.style == plan::ShardStyle::kPackedRowwise);
    // Elements of the module's first traced output on one rank, and that output's last dim.
    const std::optional<std::pair<int64_t, int64_t>> out = FirstOutputLocalElements(*w, s.module, b);
    if (tp.all_reduce_output && out) {
      // 2*N*b*(T-1)/T with N the elements this rank all-reduces (B*S_local*d).
      s.cost.collectives.push_back({plan::CollectiveOp::kAllReduce, std::string(plan::kTpAxis), 1,
                                    plan::TpAllReduceBytes(1, out->first, 1, elem_bytes, T)});
    }
    // A colwise RMSNorm (Wan's norm_q over all heads) sums its fp32 statistics, one per row,
    // over the tp group: the executor's all-reduce of (B, S_local, 1).
    if (T > 1 && col && m.type == "RMSNorm" && out) {
      const int64_t rows = out->first == source::kSaturated ? source::kSaturated : out->first / out->second;
      s.cost.collectives.push_back({plan::CollectiveOp::kAllReduce, std::string(plan::kTpAxis), 1,
                                    plan::TpAllReduceBytes(1, rows, 1, 4, T)});
    }
    s.tp = std::move(tp);
  }

  // Weights sliced over the weight ranks: each element of a module list (a block) keeps 1/P of
  // its parameters (as its tp shards hold them) and gathers them whole before it runs; the rest
  // stays whole. One all-gather per block per forward: this rank's slice to every other.
  const int64_t P = b.mesh.WeightRanks();
  std::optional<plan::WeightPlacement> placement;
  int64_t sliced_whole_bytes = 0;
  if (P > 1) {
    placement.emplace();
    placement->ranks = P;
    std::map<std::string, const plan::TensorParallel*> tp_of;
    for (const auto& [id, st] : steps) {
      if (st.tp) tp_of[st.module] = &*st.tp;
    }
    std::string inside;  // the block being laid out: list elements inside it (to_out.0) are its own
    for (model::ModuleId id = 0; id < graph.modules.size(); ++id) {
      const model::Module& m = graph.modules[id];
      if (!inside.empty() && m.path.rfind(inside + ".", 0) == 0) continue;
      const size_t dot = m.path.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : m.path.substr(0, dot);
      const std::optional<model::ModuleId> pid = graph.FindModuleId(parent);
      if (m.path.empty() || !pid || graph.modules[*pid].container != model::Container::kList) continue;
      const model::ModuleCalls* calls = w->FindCalls(m.path);
      if (calls != nullptr && calls->calls.size() > 1) continue;  // gathered once per forward: blocks run once
      inside = m.path;
      plan::WeightBlock block;
      block.module = m.path;
      int64_t whole = 0;  // the parameters' bytes as the rank holds them unsliced
      for (model::ModuleId k = id; k < graph.modules.size(); ++k) {
        const model::Module& sub = graph.modules[k];
        if (k != id && sub.path.rfind(m.path + ".", 0) != 0) break;
        const auto tp = tp_of.find(sub.path);
        for (const model::Param& param : sub.params) {
          if (param.buffer) continue;
          std::vector<int64_t> shape = param.shape;
          if (tp != tp_of.end()) {
            for (const plan::ParamShard& ps : tp->second->params) {
              if (ps.name == param.name) shape = ps.local_shape;
            }
          }
          const int64_t bytes = source::SaturatingMul(plan::Numel(shape), model::DTypeBytes(param.dtype));
          block.offsets.push_back(block.bytes);
          block.bytes = source::SaturatingAdd(block.bytes, (bytes + 63) / 64 * 64);
          whole = source::SaturatingAdd(whole, bytes);
          block.params.push_back(sub.path + "." + param.name);
          block.dtypes.push_back(param.dtype);
          block.shapes.push_back(std::move(shape));
        }
      }
      if (block.params.empty()) continue;
      block.slice_bytes = (block.bytes + P - 1) / P;
      plan::ModuleStep& s = step_of(id);
      s.cost.collectives.push_back({plan::CollectiveOp::kAllGather, "weights", 1, source::SaturatingMul(block.slice_bytes, P - 1)});
      sliced_whole_bytes = source::SaturatingAdd(sliced_whole_bytes, whole);
      placement->blocks.push_back(std::move(block));
    }
    if (placement->blocks.empty()) placement.reset();
  }

  for (auto& [id, s] : steps) p.steps.push_back(std::move(s));
  if (b.guidance_calls) {
    // One branch's outputs, the unit the cfg gather moves (SummarizeCost counts it).
    p.guidance_calls = b.guidance_calls;
    if (const model::ModuleCalls* root = w->FindCalls(""); root != nullptr && !root->calls.empty()) {
      for (const model::Value& out : root->calls.front().outputs) {
        p.guidance_calls->output_bytes = source::SaturatingAdd(p.guidance_calls->output_bytes, RunBytes(out, elem_bytes));
      }
    }
  }
  const int64_t param_bytes = graph.ParamBytes();
  plan::SummarizeCost(p, param_bytes == source::kSaturated || tp_full_bytes == source::kSaturated
                             ? source::kSaturated
                             : param_bytes - tp_full_bytes);
  // Activation peak over every traced call, not only the modules with a step.
  int64_t peak = p.cost.activation_bytes;
  for (const model::ModuleCalls& mc : w->calls) {
    if (mc.module.empty()) continue;  // the root's inputs/outputs are the whole model's
    for (const model::Call& c : mc.calls) peak = std::max(peak, CallBytes(c, b));
  }
  p.cost.activation_bytes = peak;
  if (placement) {
    // Each rank holds its slices instead of the blocks' parameters, and two gather buffers
    // (the block running and the next one, gathered while it runs).
    int64_t largest = 0;
    p.cost.weight_bytes -= std::min(p.cost.weight_bytes, sliced_whole_bytes);
    for (const plan::WeightBlock& block : placement->blocks) {
      p.cost.weight_bytes = source::SaturatingAdd(p.cost.weight_bytes, block.slice_bytes);
      largest = std::max(largest, source::SaturatingMul(block.slice_bytes, P));
    }
    p.cost.weight_buffer_bytes = source::SaturatingMul(2, largest);
    p.weights = std::move(placement);
  }
  if (std::optional<std::string> what = SaturatedCost(p)) {
    diags.Emit(b.header_range, CostOverflow, *what, w->name);
    return std::nullopt;
  }
  return p;
}

}  // namespace weft::lower

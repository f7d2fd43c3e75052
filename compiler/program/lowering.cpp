#include "compiler/program/lowering.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/plan/cost.h"
#include "compiler/program/archive.h"
#include "compiler/program/bindings.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/local_sizes.h"
#include "compiler/program/plan_edit_error.h"
#include "compiler/program/shard_flow.h"
#include "compiler/source/checked_math.h"

namespace weft::program {
namespace {

const model::ModuleType* TypeOf(const Program& p, const std::string& module) {
  if (!p.manifest) return nullptr;
  std::string type;
  for (const model::Module& m : p.manifest->modules) {
    if (m.path == module) type = m.type;
  }
  for (const model::ModuleType& t : p.manifest->types) {
    if (t.name == type) return &t;
  }
  return nullptr;
}

std::string LeafName(const Argument* a) {
  if (a == nullptr || a->kind != Argument::Kind::kTensor) return "";
  return a->name;
}

void TakeLeaves(const TreeSpec& spec, const std::vector<const Argument*>& leaves, size_t& next, std::vector<std::string>& out) {
  if (spec.IsLeaf()) {
    out.push_back(next < leaves.size() ? LeafName(leaves[next]) : "");
    ++next;
    return;
  }
  for (const TreeSpec& c : spec.children) TakeLeaves(c, leaves, next, out);
}

// Operators that keep every element where it is (a dtype change, a copy): splitting their
// input along a dim equals splitting their output along it.
bool KeepsLayout(const std::string& target) {
  static const char* const kOps[] = {
      "torch.ops.aten.to.dtype",       "torch.ops.aten.to.dtype_layout", "torch.ops.aten._to_copy.default",
      "torch.ops.aten.type_as.default", "torch.ops.aten.contiguous.default", "torch.ops.aten.clone.default",
      "torch.ops.aten.alias.default",   "torch.ops.aten.detach.default",
  };
  for (const char* op : kOps) {
    if (target == op) return true;
  }
  return false;
}

// torch.export hoists computations of a module's argument out of the module when it can (a
// dtype cast of QwenImage's text mask runs once, at the root, for every block): the module's
// uses then read the cast, not the argument the plan splits. A split of a module argument
// therefore also covers, for the uses inside that module, every copy of the argument made
// outside it by an operator that keeps the layout.
void SplitHoistedCopies(const Program& p, plan::ProgramEdits& edits) {
  std::map<std::string, std::vector<const Node*>> readers;
  for (const Node& n : p.nodes) {
    for (const NamedArgument& in : n.inputs) {
      for (const std::string& t : in.arg.TensorNames()) readers[t].push_back(&n);
    }
  }
  const size_t count = edits.edits.size();
  for (size_t i = 0; i < count; ++i) {
    std::vector<std::string> work = {edits.edits[i].value};
    const plan::ProgramEdit split = edits.edits[i];
    if (split.kind != plan::ProgramEdit::Kind::kSplit || split.after_producer || split.scope.empty()) continue;
    std::set<std::string> done;
    while (!work.empty()) {
      const std::string v = work.back();
      work.pop_back();
      for (const Node* n : readers[v]) {
        if (NodeInModule(p, *n, split.scope) || !KeepsLayout(n->target) || n->outputs.size() != 1 ||
            n->outputs[0].kind != Argument::Kind::kTensor) {
          continue;
        }
        const std::string out = n->outputs[0].name;
        bool used_inside = false;
        for (const Node* r : readers[out]) used_inside = used_inside || NodeInModule(p, *r, split.scope);
        if (!done.insert(out).second) continue;
        work.push_back(out);
        if (!used_inside) continue;
        plan::ProgramEdit copy = split;
        copy.value = out;
        edits.edits.push_back(std::move(copy));
      }
    }
  }
}

// The bytes of value `v` on one rank, its batch (dim 0) this cfg rank's branches when guidance runs
// apart; without dim `skip` (-1: every dim), for one row along it.
int64_t RankBytes(const plan::ExecutionPlan& plan, const Program& p, const std::string& v, int64_t skip = -1) {
  const TensorMeta* meta = p.FindTensor(v);
  if (meta == nullptr) return 0;
  int64_t bytes = ScalarTypeBytes(meta->dtype);
  for (size_t d = 0; d < meta->sizes.size(); ++d) {
    if (static_cast<int64_t>(d) == skip) continue;
    bytes = source::SaturatingMul(bytes, d == 0 ? plan::FirstCfgRankBatch(plan, meta->sizes[0].value) : meta->sizes[d].value);
  }
  return bytes;
}

}  // namespace

std::vector<CallValues> ModuleCallValues(const Program& p, const std::string& module) {
  std::vector<CallValues> out;
  if (module.empty()) {
    CallValues root;
    std::map<std::string, size_t> at;
    for (const FlatInput& f : FlattenInputs(p)) {
      auto it = at.find(f.arg);
      if (it == at.end()) {
        it = at.emplace(f.arg, root.arguments.size()).first;
        root.arguments.push_back({f.arg, {}});
      }
      if (!f.index.empty()) root.lists.insert(f.arg);
      const Argument& a = p.inputs[f.graph_input];
      root.arguments[it->second].second.push_back(
          p.input_specs[f.graph_input].kind == InputSpec::Kind::kUserInput ? LeafName(&a) : "");
    }
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      if (i < p.output_specs.size() && p.output_specs[i].kind != OutputSpec::Kind::kUserOutput) continue;
      root.outputs.push_back(LeafName(&p.outputs[i]));
    }
    out.push_back(std::move(root));
    return out;
  }
  const model::ModuleType* type = TypeOf(p, module);
  for (const ModuleCall& call : p.module_calls) {
    if (!call.has_signature || call.fqn.substr(0, call.fqn.find('@')) != module) continue;
    CallValues values;
    const std::vector<const Argument*> leaves = p.LeafInputs(call);
    size_t next = 0;
    const TreeSpec& spec = call.in_spec;
    if (spec.type == "builtins.tuple" && spec.children.size() == 2) {
      for (size_t i = 0; i < spec.children[0].children.size(); ++i) {
        std::vector<std::string> names;
        TakeLeaves(spec.children[0].children[i], leaves, next, names);
        if (!spec.children[0].children[i].IsLeaf()) values.lists.insert(type != nullptr && i < type->args.size() ? type->args[i].name : "arg" + std::to_string(i));
        values.arguments.push_back(
            {type != nullptr && i < type->args.size() ? type->args[i].name : "arg" + std::to_string(i), names});
      }
      for (size_t i = 0; i < spec.children[1].children.size(); ++i) {
        std::vector<std::string> names;
        TakeLeaves(spec.children[1].children[i], leaves, next, names);
        if (!spec.children[1].children[i].IsLeaf() && i < spec.children[1].keys.size()) values.lists.insert(spec.children[1].keys[i]);
        values.arguments.push_back({i < spec.children[1].keys.size() ? spec.children[1].keys[i] : "", names});
      }
    }
    for (const Argument& o : call.outputs) values.outputs.push_back(LeafName(&o));
    out.push_back(std::move(values));
  }
  return out;
}

void MatchCostToEdits(plan::ExecutionPlan& plan, const Program& p, const model::ModelGraph& graph) {
  if (!plan.program) return;
  std::set<std::string> sites, masked, additive;  // additive: a floating attn_mask
  std::set<std::string> paired;                   // a whole mask over (query, key) pairs: nothing moves
  std::map<std::string, const Node*> nodes;
  for (const Node& n : p.nodes) nodes[n.name] = &n;
  // Sums over split keys (linear attention), all-reduced over the CP group: by module, what each
  // all-reduce moves (the counters' 2 (n - 1) / n of the tensor, as for any all-reduce).
  std::map<std::string, std::vector<plan::Collective>> key_sums;
  std::map<std::string, std::vector<plan::Collective>> tp_sums;
  const int64_t cp = plan.mesh.Cp();
  // Sums and means over the tp-sharded dim (a hand-written RMS norm over all heads), all-reduced
  // over tp the same way; the rowwise Linears' sums the graph view priced already.
  const int64_t tp = plan.mesh.Tp();
  // What an all-reduce over `n` ranks sends of value `v` (the counters' 2 (n - 1) / n of it).
  auto all_reduce = [&](const std::string& v, const std::string& axis, int64_t n) {
    return plan::Collective{plan::CollectiveOp::kAllReduce, axis, 1,
                            source::SaturatingMul(RankBytes(plan, p, v), 2 * (n - 1)) / n};
  };
  // Halo exchanges of convolutions over a split grid (ProgramBackend::Halo): each rank sends its
  // first and last `new_value` rows to the ranks before and after it, one send_recv; priced for a
  // rank with both neighbours (the ends send one side: on 2 ranks, each sends one).
  std::map<std::string, std::vector<plan::Collective>> halos;
  // Streams every rank holds whole (runtime::AttentionWithWholeRows): per attention node, by module
  // in program order, the query and key rows they hold (q_before + q_after, kv_before + kv_after).
  // A count known only at run time (Mochi's valid text) is its hint: a nonzero's count at its
  // input's size (program_reader).
  struct WholeRowsOfCall {
    int64_t q = 0, kv = 0;
    int64_t elem_bytes = 4;  // of the attention's query
  };
  std::map<std::string, std::vector<WholeRowsOfCall>> whole_rows;
  // One walk over the edits gathers, by module, what the steps' costs change by.
  for (const plan::ProgramEdit& e : plan.program->edits) {
    if (e.kind == plan::ProgramEdit::Kind::kAllReduce) {
      if (e.group == plan::kTpAxis && e.new_value > 0 && tp > 1) {
        plan::AddCollective(tp_sums[e.module], all_reduce(e.value, std::string(plan::kTpAxis), tp));
      } else if (e.group == plan::kCpGroup && cp > 1) {
        plan::AddCollective(key_sums[e.module], all_reduce(e.value, std::string(plan::kCpGroup), cp));
      }
    } else if (e.kind == plan::ProgramEdit::Kind::kHalo) {
      const TensorMeta* meta = p.FindTensor(e.value);
      if (cp <= 1 || meta == nullptr || e.dim < 0 || e.dim >= static_cast<int64_t>(meta->sizes.size())) continue;
      const int64_t rows = source::SaturatingMul(e.new_value, cp > 2 ? 2 : 1);
      plan::AddCollective(halos[e.module], {plan::CollectiveOp::kSendRecv, std::string(plan::kCpGroup), 1,
                                            source::SaturatingMul(RankBytes(plan, p, e.value, e.dim), rows)});
    } else if (e.kind == plan::ProgramEdit::Kind::kAttention) {
      sites.insert(e.module);
      auto n = nodes.find(e.node);
      if (!e.whole_parts.empty()) {
        WholeRowsOfCall rows;
        if (n != nodes.end() && !n->second->inputs.empty() && n->second->inputs[0].arg.kind == Argument::Kind::kTensor) {
          if (const TensorMeta* query = p.FindTensor(n->second->inputs[0].arg.name)) rows.elem_bytes = ScalarTypeBytes(query->dtype);
        }
        for (const plan::WholePart& part : e.whole_parts) {
          const TensorMeta* meta = p.FindTensor(part.value);
          if (meta == nullptr || part.dim < 0 || part.dim >= static_cast<int64_t>(meta->sizes.size())) continue;
          (part.at == "q_before" || part.at == "q_after" ? rows.q : rows.kv) += meta->sizes[static_cast<size_t>(part.dim)].value;
        }
        whole_rows[e.module].push_back(rows);
      }
      if (e.attention && e.attention->pair_mask) {
        paired.insert(e.module);
        continue;
      }
      if (n == nodes.end()) continue;
      for (const NamedArgument& in : n->second->inputs) {
        if (in.name != "attn_mask" || in.arg.kind != Argument::Kind::kTensor) continue;
        masked.insert(e.module);
        const TensorMeta* meta = p.FindTensor(in.arg.name);
        if (meta != nullptr && meta->dtype != ScalarType::kBool) additive.insert(e.module);
      }
    }
  }
  int64_t step_weights = 0;
  for (const plan::ModuleStep& s : plan.steps) step_weights += s.cost.weight_bytes;
  const model::Workload* w = graph.FindWorkload(plan.workload.name);
  bool changed = false;
  // The tp sums and the halos add to what the step moves, per call.
  for (plan::ModuleStep& s : plan.steps) {
    for (const auto* by_module : {&tp_sums, &halos}) {
      auto found = by_module->find(s.module);
      if (found == by_module->end()) continue;
      for (const plan::Collective& x : found->second) plan::AddCollective(s.cost.collectives, plan::PerCall(x, s.calls));
      changed = true;
    }
  }
  // The Q/K/V exchanges of attention on the ring and ulysses axes, which the graph view priced.
  auto drop_exchanges = [](std::vector<plan::Collective>& c) {
    c.erase(std::remove_if(c.begin(), c.end(),
                           [](const plan::Collective& x) { return x.axis == plan::kRingAxis || x.axis == plan::kUlyssesAxis; }),
            c.end());
  };
  for (plan::ModuleStep& s : plan.steps) {
    auto sums = key_sums.find(s.module);
    if (sums == key_sums.end()) continue;
    // A linear attention moves none of the axes' Q/K/V exchanges the graph view priced, only its sums.
    std::vector<plan::Collective>& c = s.cost.collectives;
    drop_exchanges(c);
    for (const plan::Collective& x : sums->second) plan::AddCollective(c, plan::PerCall(x, s.calls));
    if (!s.attention) {
      // No attention site of the graph view (it traces SDPA): the step's attention is this one,
      // sized from the sums ((B, H, D', D)) and the split of its tokens.
      plan::Attention a;
      a.ulysses = plan.mesh.Ulysses();
      a.ring = plan.mesh.Ring();
      a.mode = plan::ModeFor(a.ulysses, a.ring);
      for (const plan::ProgramEdit& e : plan.program->edits) {
        const TensorMeta* meta = p.FindTensor(e.value);
        if (meta == nullptr || e.module != s.module) continue;
        if (e.kind == plan::ProgramEdit::Kind::kAllReduce && meta->sizes.size() == 4) {
          a.heads = a.local_heads = meta->sizes[1].value;
          a.head_dim = meta->sizes[3].value;
        }
        if (e.kind == plan::ProgramEdit::Kind::kSplit && e.group == plan::kCpGroup && e.dim < static_cast<int64_t>(meta->sizes.size())) {
          a.q_len = a.kv_len = meta->sizes[static_cast<size_t>(e.dim)].value;
          a.origin = e.origin;
        }
      }
      s.attention = a;
    }
    if (!sites.count(s.module)) s.attention->linear = true;
    changed = true;
  }
  // Attention over streams every rank holds whole runs its exchanges on the split rows alone, the
  // Ulysses one bringing back each split row's LSE too, and all-gathers the whole queries'
  // partial (out, lse) over the CP group: B x rows x H x (D + 1) fp32 per rank. Priced again from
  // the site's calls with the whole rows taken out (the graph view priced the joint length).
  for (plan::ModuleStep& s : plan.steps) {
    auto whole = whole_rows.find(s.module);
    const model::SiteCalls* calls = w != nullptr ? w->FindAttention(s.module) : nullptr;
    if (whole == whole_rows.end() || !s.attention || s.attention->mode == plan::AttentionMode::kLocal || cp <= 1 ||
        calls == nullptr || calls->calls.size() != whole->second.size()) {
      continue;
    }
    std::vector<plan::Collective> merged;
    for (size_t i = 0; i < calls->calls.size(); ++i) {
      const model::AttentionCall& call = calls->calls[i];
      const WholeRowsOfCall& rows = whole->second[i];
      if (call.q.size() < 2 || call.k.size() < 2) continue;
      plan::AttentionCommInput in =
          plan::CommInputOf(*s.attention, plan::FirstCfgRankBatch(plan, call.q[0]), std::max<int64_t>(0, call.q[1] - rows.q),
                            std::max<int64_t>(0, call.k[1] - rows.kv), rows.elem_bytes);
      in.return_lse = true;
      for (const plan::Collective& x : plan::AttentionCollectives(in)) plan::AddCollective(merged, x);
      int64_t bytes = 4;  // the whole queries' (out, lse) rows, fp32
      for (int64_t x : {in.batch, rows.q, in.heads, in.head_dim + 1, cp - 1}) bytes = source::SaturatingMul(bytes, x);
      if (rows.q > 0) plan::AddCollective(merged, {plan::CollectiveOp::kAllGather, std::string(plan::kCpGroup), 1, bytes});
    }
    drop_exchanges(s.cost.collectives);
    for (const plan::Collective& x : merged) plan::AddCollective(s.cost.collectives, plan::PerCall(x, s.calls));
    changed = true;
  }
  for (plan::ModuleStep& s : plan.steps) {
    if (!s.attention || s.attention->mode == plan::AttentionMode::kLocal || s.attention->linear) continue;
    std::vector<plan::Collective>& c = s.cost.collectives;
    if (!sites.count(s.module)) {
      s.attention->mode = plan::AttentionMode::kLocal;
      drop_exchanges(c);
      changed = true;
      continue;
    }
    if (paired.count(s.module) && !s.attention->pair_mask) {
      s.attention->pair_mask = true;
      changed = true;
    }
    const model::SiteCalls* calls = w != nullptr ? w->FindAttention(s.module) : nullptr;
    if (!masked.count(s.module) || calls == nullptr) continue;
    // The mask's collectives of every call of the site, summed, then per module call.
    std::vector<plan::Collective> mask;
    for (const model::AttentionCall& call : calls->calls) {
      if (call.q.empty() || call.k.size() < 2) continue;
      for (const plan::Collective& m : plan::KeyMaskCollectives(plan::FirstCfgRankBatch(plan, call.q[0]), call.k[1], s.attention->ulysses,
                                                                 s.attention->ring, s.attention->rotate_method,
                                                                 additive.count(s.module) > 0)) {
        plan::AddCollective(mask, m);
      }
    }
    for (const plan::Collective& m : mask) plan::AddCollective(c, plan::PerCall(m, s.calls));
    changed = true;
  }
  if (!changed) return;
  const int64_t activation = plan.cost.activation_bytes;  // the peak over every call, not only steps
  plan::SummarizeCost(plan, plan.cost.weight_bytes - step_weights);
  plan.cost.activation_bytes = activation;
}

plan::ProgramEdits LowerToProgram(const plan::ExecutionPlan& plan, const Program& p, const std::string& file) {
  const std::string where = p.Where();
  plan::ProgramEdits out;
  out.program = file;
  out.program_hash = p.hash;
  // The attention nodes of each site.
  std::map<std::string, std::vector<const Node*>> sdpa;
  for (const Node& n : p.nodes) {
    if (n.target == kSdpaTarget) sdpa[AttentionOwner(p, n)].push_back(&n);
  }
  for (const plan::ModuleStep& step : plan.steps) {
    const std::vector<CallValues> calls = ModuleCallValues(p, step.module);
    auto no_call = [&](const plan::Origin& origin, const std::string& what) {
      std::string why = "the program has no call signature for it";
      if (p.manifest) {
        for (const auto& [path, reason] : p.manifest->unpreserved) {
          if (path == step.module) why = "torch.export could not preserve its call (" + reason + ")";
        }
      }
      return PlanEditError(EditCheck::kProgramLacksValue, origin,
                           where + ": the plan " + what + " of module `" + step.module + "`" + RuleAt(origin) + ", but " +
                               why);
    };
    for (const plan::Split& split : step.splits) {
      if (calls.empty()) throw no_call(split.origin, "splits");
      for (const CallValues& call : calls) {
        plan::ProgramEdit e;
        e.kind = plan::ProgramEdit::Kind::kSplit;
        e.group = split.group;
        e.dim = split.dim;
        e.rank = split.rank;
        // Branches over cfg split unevenly whenever the axis does not divide them (no flag needed).
        e.uneven = split.group == plan::kCfgAxis ? split.uneven : plan.mesh.Uneven();
        e.module = step.module;
        e.origin = split.origin;
        if (split.target == plan::Split::Target::kArgument) {
          auto arg = std::find_if(call.arguments.begin(), call.arguments.end(),
                                  [&](const auto& a) { return a.first == split.argument; });
          if (arg == call.arguments.end() || arg->second.empty()) {
            if (split.optional) continue;
            throw PlanEditError(EditCheck::kProgramLacksValue, split.origin, where + ": the plan splits argument `" + split.argument + "` of module `" + step.module +
                               "`" + RuleAt(split.origin) + ", but the program's call does not pass it");
          }
          const size_t element = split.element < 0 ? 0 : static_cast<size_t>(split.element);
          if (element >= arg->second.size() || arg->second[element].empty()) {
            if (split.optional) continue;
            throw PlanEditError(EditCheck::kProgramLacksValue, split.origin, where + ": the plan splits " +
                               (split.element < 0 ? "argument" : "element " + std::to_string(split.element) + " of argument") +
                               " `" + split.argument + "` of module `" + step.module + "`" + RuleAt(split.origin) +
                               ", which is no tensor in the program");
          }
          e.value = arg->second[element];
          const TensorMeta* meta = p.FindTensor(e.value);
          if (split.optional && meta != nullptr && static_cast<int64_t>(meta->sizes.size()) != split.rank) continue;
          e.scope = step.module;
        } else {
          if (split.output < 0 || static_cast<size_t>(split.output) >= call.outputs.size() ||
              call.outputs[static_cast<size_t>(split.output)].empty()) {
            throw PlanEditError(EditCheck::kProgramLacksValue, split.origin, where + ": the plan splits output " + std::to_string(split.output) + " of module `" +
                               step.module + "`" + RuleAt(split.origin) + ", which is no tensor in the program");
          }
          e.value = call.outputs[static_cast<size_t>(split.output)];
          e.after_producer = true;
        }
        out.edits.push_back(std::move(e));
      }
    }
    for (const plan::Gather& gather : step.gathers) {
      if (calls.empty()) throw no_call(gather.origin, "gathers output " + std::to_string(gather.output));
      for (const CallValues& call : calls) {
        if (gather.output < 0 || static_cast<size_t>(gather.output) >= call.outputs.size() ||
            call.outputs[static_cast<size_t>(gather.output)].empty()) {
          throw PlanEditError(EditCheck::kProgramLacksValue, gather.origin, where + ": the plan gathers output " + std::to_string(gather.output) + " of module `" +
                             step.module + "`" + RuleAt(gather.origin) + ", which is no tensor in the program");
        }
        plan::ProgramEdit e;
        e.kind = plan::ProgramEdit::Kind::kGather;
        e.group = gather.group;
        e.value = call.outputs[static_cast<size_t>(gather.output)];
        e.dim = gather.dim;
        e.rank = gather.rank;
        e.uneven = gather.group == plan::kCfgAxis ? gather.uneven : plan.mesh.Uneven();
        e.module = step.module;
        e.origin = gather.origin;
        out.edits.push_back(std::move(e));
      }
    }
    if (step.attention && step.attention->mode != plan::AttentionMode::kLocal) {
      auto it = sdpa.find(step.module);
      if (it == sdpa.end()) {
        throw PlanEditError(EditCheck::kProgramLacksValue, step.attention->origin, where + ": the plan runs attention `" + step.module + "` as " +
                           std::string(plan::AttentionModeName(step.attention->mode)) + RuleAt(step.attention->origin) +
                           ", but no scaled_dot_product_attention of the program belongs to it");
      }
      for (const Node* n : it->second) {
        plan::ProgramEdit e;
        e.kind = plan::ProgramEdit::Kind::kAttention;
        e.node = n->name;
        e.attention = *step.attention;
        e.module = step.module;
        e.origin = step.attention->origin;
        // Uneven lengths: every call exchanges the ranks' shapes (the kernel cannot keep the first
        // call's; without it a second forward all-gathered as if the pieces were equal).
        e.uneven = plan.mesh.Uneven();
        out.edits.push_back(std::move(e));
      }
    }
  }
  SplitHoistedCopies(p, out);
  AddLocalSizeEdits(p, out);
  AddTensorParallelEdits(plan, p, out);
  AddSplitDataflowEdits(plan, p, out);
  return out;
}

void CheckWeightsUntied(const plan::ExecutionPlan& plan, const Program& p) {
  if (!plan.weights) return;
  std::map<std::string, std::string> value_of;  // parameter fqn -> graph input
  for (size_t i = 0; i < p.inputs.size() && i < p.input_specs.size(); ++i) {
    if (p.inputs[i].kind == Argument::Kind::kTensor) value_of[p.input_specs[i].target] = p.inputs[i].name;
  }
  std::map<std::string, std::string> block_of;  // graph input -> the block slicing it
  for (const plan::WeightBlock& b : plan.weights->blocks) {
    for (const std::string& fqn : b.params) {
      if (auto it = value_of.find(fqn); it != value_of.end()) block_of[it->second] = b.module;
    }
  }
  for (const Node& n : p.nodes) {
    for (const NamedArgument& in : n.inputs) {
      for (const std::string& v : in.arg.TensorNames()) {
        auto it = block_of.find(v);
        if (it == block_of.end() || NodeInModule(p, n, it->second)) continue;
        throw ProgramError(p.Where() + ": --shard-weights slices `" + v + "` with block `" + it->second +
                           "`, but node `" + n.name + "` of module `" + ModuleOf(p, n) +
                           "` reads it too (tied weights); weft slices only parameters one block reads");
      }
    }
  }
}

void LowerToProgramWithCost(plan::ExecutionPlan& plan, const Program& program, const std::string& file,
                            const model::ModelGraph& graph) {
  plan.program = LowerToProgram(plan, program, file);
  CheckWeightsUntied(plan, program);
  MatchCostToEdits(plan, program, graph);
}

}  // namespace weft::program

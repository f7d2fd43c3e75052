#include "compiler/rederive.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "compiler/compile.h"
#include "compiler/program/archive.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/lowering.h"

namespace weft {
namespace {

std::string Sizes(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string ItemText(const plan::Split& s) {
  std::string target = s.target == plan::Split::Target::kOutput ? "output " + std::to_string(s.output)
                       : s.element >= 0                          ? s.argument + "[" + std::to_string(s.element) + "]"
                                                                  : s.argument;
  return target + " dim " + std::to_string(s.dim) + " rank " + std::to_string(s.rank) + (s.optional ? " optional" : "");
}

std::string ItemText(const plan::Gather& g) {
  return "output " + std::to_string(g.output) + " dim " + std::to_string(g.dim) + " rank " + std::to_string(g.rank);
}

// What a split / gather / attention / tp step does, every field the executor acts on, for
// comparison (origins and costs left out).
std::string Describe(const plan::Split& s) {
  return "split " + ItemText(s) + " of " + std::to_string(s.global_size) + " into " + Sizes(s.sizes) +
         (s.uneven ? " (uneven)" : "") + " over " + s.group;
}

std::string Describe(const plan::Gather& g) {
  return "gather " + ItemText(g) + " of " + std::to_string(g.global_size) + " from " + Sizes(g.sizes) +
         (g.uneven ? " (uneven)" : "") + " over " + g.group;
}

std::string Describe(const plan::Attention& a) {
  std::ostringstream os;
  os << "attention " << plan::AttentionModeName(a.mode) << " (heads " << a.heads << " x " << a.head_dim << ", "
     << a.local_heads << " local + " << a.head_pad << " pad, ulysses " << a.ulysses << ", ring " << a.ring
     << ", rotate " << plan::RotateMethodName(a.rotate_method) << (a.convert_to_fp32 ? ", fp32 merge" : "")
     << (a.uneven_sequence ? ", uneven" : "") << (a.pair_mask ? ", mask over (query, key) pairs" : "") << (a.linear ? ", linear (key sums all-reduced)" : "") << ", q "
     << a.q_len << ", kv " << a.kv_len << ")";
  return os.str();
}

std::string Describe(const plan::TensorParallel& t) {
  std::string s = std::string(plan::ShardStyleName(t.style)) + " blocks " + Sizes(t.blocks) +
                  (t.all_reduce_output ? " all-reduced" : "");
  for (const plan::ParamShard& p : t.params) {
    s += "; " + p.name + " dim " + std::to_string(p.dim) + " " + Sizes(p.full_shape) + " -> " + Sizes(p.local_shape);
  }
  return s;
}

std::string Quote(const std::string& module) { return "\"" + module + "\""; }

// The differences between the plan's step and the re-derived one, one line each.
void CompareSteps(const plan::ModuleStep* given, const plan::ModuleStep* derived, const std::string& module,
                  std::vector<std::string>& out) {
  const std::string where = "module `" + module + "`: ";
  auto list = [](const auto& items) {
    std::vector<std::string> texts;
    for (const auto& item : items) texts.push_back(Describe(item));
    return texts;
  };
  const std::vector<std::string> given_splits = given ? list(given->splits) : std::vector<std::string>{};
  const std::vector<std::string> derived_splits = derived ? list(derived->splits) : std::vector<std::string>{};
  const std::vector<std::string> given_gathers = given ? list(given->gathers) : std::vector<std::string>{};
  const std::vector<std::string> derived_gathers = derived ? list(derived->gathers) : std::vector<std::string>{};
  for (size_t i = 0; i < std::max(given_splits.size(), derived_splits.size()); ++i) {
    const std::string a = i < given_splits.size() ? given_splits[i] : "no such split";
    const std::string b = i < derived_splits.size() ? derived_splits[i] : "no such split";
    if (a != b) out.push_back(where + "the plan has `" + a + "`, the model gives `" + b + "`");
  }
  for (size_t i = 0; i < std::max(given_gathers.size(), derived_gathers.size()); ++i) {
    const std::string a = i < given_gathers.size() ? given_gathers[i] : "no such gather";
    const std::string b = i < derived_gathers.size() ? derived_gathers[i] : "no such gather";
    if (a != b) out.push_back(where + "the plan has `" + a + "`, the model gives `" + b + "`");
  }
  const plan::Attention* ga = given && given->attention ? &*given->attention : nullptr;
  const plan::Attention* da = derived && derived->attention ? &*derived->attention : nullptr;
  if (ga != nullptr && da != nullptr && ga->mode != da->mode) {
    const bool cp = da->mode != plan::AttentionMode::kLocal;
    out.push_back(where + "attention runs `" + std::string(plan::AttentionModeName(ga->mode)) + "` in the plan, but " +
                  (cp ? "its K/V are split over the cp group here, so on this mesh it must run `"
                      : "its K/V are not split here, so it must run `") +
                  std::string(plan::AttentionModeName(da->mode)) + "`");
  } else if ((ga == nullptr) != (da == nullptr) || (ga != nullptr && Describe(*ga) != Describe(*da))) {
    out.push_back(where + "the plan has `" + (ga ? Describe(*ga) : "no attention step") + "`, the model gives `" +
                  (da ? Describe(*da) : "no attention step") + "`");
  }
  const plan::TensorParallel* gt = given && given->tp ? &*given->tp : nullptr;
  const plan::TensorParallel* dt = derived && derived->tp ? &*derived->tp : nullptr;
  if ((gt == nullptr) != (dt == nullptr) || (gt != nullptr && Describe(*gt) != Describe(*dt))) {
    out.push_back(where + "the plan has `" + (gt ? Describe(*gt) : "no tensor-parallel step") + "`, the model gives `" +
                  (dt ? Describe(*dt) : "no tensor-parallel step") + "`");
  }
  if (given != nullptr && derived != nullptr && given->calls != derived->calls) {
    out.push_back(where + "the plan expects " + std::to_string(given->calls) + " call(s) per forward, the model makes " +
                  std::to_string(derived->calls));
  }
}

std::string Describe(const plan::ProgramEdit& e) {
  std::ostringstream os;
  os << plan::ProgramEditKindName(e.kind);
  if (!e.node.empty()) os << " at node `" << e.node << "`";
  if (!e.value.empty()) os << " of `" << e.value << "`";
  switch (e.kind) {
    case plan::ProgramEdit::Kind::kSplit:
      os << " dim " << e.dim << " rank " << e.rank << (e.scope.empty() ? "" : " in `" + e.scope + "`")
         << (e.after_producer ? " after its producer" : "") << (e.uneven ? " (uneven)" : "") << " over " << e.group;
      if (!e.parts.empty()) {
        os << " in parts";
        for (const std::string& part : e.parts) os << " " << part;
      }
      if (!e.unit.empty()) {
        os << " in whole rows of";
        for (const std::string& u : e.unit) os << " " << u;
        os << " (at least " << e.min_rows << " per rank)";
      }
      if (!e.rows.empty()) os << " in " << e.rows << " whole rows (at least " << e.min_rows << " per rank)";
      break;
    case plan::ProgramEdit::Kind::kGather:
      os << " dim " << e.dim << " rank " << e.rank << (e.uneven ? " (uneven)" : "") << " over " << e.group;
      break;
    case plan::ProgramEdit::Kind::kAttention:
      os << ": " << (e.attention ? Describe(*e.attention) : "no attention");
      // A pair mask over a joint sequence, reordered into the ranks' layout by these lengths.
      if (!e.parts.empty()) {
        os << ", its mask reordered by parts";
        for (const std::string& part : e.parts) os << " " << part;
      }
      // Streams every rank holds whole around the split rows: where, and whose length.
      for (const plan::WholePart& w : e.whole_parts) os << ", whole `" << w.value << "` dim " << w.dim << " at " << w.at;
      break;
    case plan::ProgramEdit::Kind::kAllReduce:
      os << (e.group == plan::kCpGroup ? ", over the CP group" : "") << (e.bias.empty() ? "" : ", bias `" + e.bias + "` after the sum")
         << (e.new_value > 0 ? ", a reduction's parts, divided by " + std::to_string(e.new_value) + " after the sum" : "");
      break;
    case plan::ProgramEdit::Kind::kArgument:
      os << ": `" << e.argument << "`" << (e.element >= 0 ? "[" + std::to_string(e.element) + "]" : "") << " = " << e.new_value;
      break;
    case plan::ProgramEdit::Kind::kNormStats: os << " over a full width of " << e.new_value; break;
    case plan::ProgramEdit::Kind::kHalo: os << ": " << e.new_value << " row(s) of each neighbour along dim " << e.dim; break;
  }
  return os.str();
}

// The plan's `activation_bytes` workload parameter (the cost model's element size), else 2.
int64_t ActivationBytes(const plan::ExecutionPlan& plan) {
  for (const auto& [name, value] : plan.workload.params) {
    if (name == "activation_bytes") return std::stoll(value);
  }
  return 2;
}

}  // namespace

std::string ListDifferences(const std::string& context, const std::vector<std::string>& differences) {
  std::string message = context + ": " + std::to_string(differences.size()) + " difference(s) from what the compiler gives";
  const size_t shown = std::min<size_t>(differences.size(), 8);
  for (size_t i = 0; i < shown; ++i) message += "\n  " + differences[i];
  if (shown < differences.size()) message += "\n  ... and " + std::to_string(differences.size() - shown) + " more";
  return message;
}

std::string PlanAsRules(const plan::ExecutionPlan& plan) {
  std::ostringstream cp, tp, cfg;
  for (const plan::ModuleStep& step : plan.steps) {
    // Splits and gathers over cfg become guidance_parallel rules, the others context_parallel.
    for (const bool branches : {false, true}) {
      std::ostringstream& out = branches ? cfg : cp;
      std::vector<std::string> splits, gathers;
      for (const plan::Split& s : step.splits) {
        if ((s.group == plan::kCfgAxis) == branches) splits.push_back(ItemText(s));
      }
      for (const plan::Gather& g : step.gathers) {
        if ((g.group == plan::kCfgAxis) == branches) gathers.push_back(ItemText(g));
      }
      for (const auto& [keyword, items] : {std::pair{"split", &splits}, std::pair{"gather", &gathers}}) {
        if (items->size() == 1) {
          out << "  " << keyword << " " << Quote(step.module) << " " << items->front() << "\n";
        } else if (!items->empty()) {
          out << "  " << keyword << " " << Quote(step.module) << " {\n";
          for (const std::string& item : *items) out << "    " << item << "\n";
          out << "  }\n";
        }
      }
    }
    // An attention mode the compiler derived (no rule named the site) is derived again.
    if (step.attention && !step.attention->origin.derived) {
      cp << "  attention " << Quote(step.module) << " "
         << (step.attention->mode == plan::AttentionMode::kLocal ? "local" : "context_parallel") << "\n";
    }
    if (step.tp) {
      const plan::ShardStyle style = step.tp->style;
      const bool packed = style == plan::ShardStyle::kPackedColwise || style == plan::ShardStyle::kPackedRowwise;
      const char* name = style == plan::ShardStyle::kColwise || style == plan::ShardStyle::kPackedColwise ? "colwise"
                         : style == plan::ShardStyle::kReplicate                                     ? "replicate"
                                                                                                      : "rowwise";
      tp << "  " << name << " " << Quote(step.module);
      if (packed) {
        tp << " packed [";
        for (size_t i = 0; i < step.tp->blocks.size(); ++i) tp << (i ? ", " : "") << step.tp->blocks[i];
        tp << "]";
      }
      tp << "\n";
    }
  }
  std::string text = "plan " + (plan.plan_name.empty() ? std::string("compiled") : plan.plan_name) + " for " +
                     plan.model_class + "\n";
  if (!cp.str().empty()) text += "context_parallel {\n" + cp.str() + "}\n";
  if (!tp.str().empty()) text += "tensor_parallel {\n" + tp.str() + "}\n";
  if (plan.guidance_calls) {
    cfg << "  calls \"\" {\n";
    for (const std::string& a : plan.guidance_calls->arguments) cfg << "    " << a << "\n";
    cfg << "  }\n";
  }
  if (!cfg.str().empty()) text += "guidance_parallel {\n" + cfg.str() + "}\n";
  return text;
}

plan::ExecutionPlan CompileRules(const plan::ExecutionPlan& plan, const model::ModelGraph& graph, const std::string& name,
                                 const std::string& context) {
  source::SourceManager sources;
  std::ostringstream rendered;
  diag::TextRenderer renderer(rendered);
  diag::ErrorTrackingConsumer tracker(renderer);
  diag::Emitter diags(sources, tracker, 20);
  const source::SourceBuffer& src = sources.Get(sources.Add(source::SourceBuffer(name, PlanAsRules(plan))));
  std::optional<syntax::PlanAst> ast = syntax::ParsePlan(src, diags);
  std::optional<plan::ExecutionPlan> derived;
  if (ast && !ast->has_error && !tracker.seen_error()) {
    bind::BindOptions options;
    options.mesh = plan.mesh;
    options.world_size = plan.mesh.world_size;
    options.workload = plan.workload.name;
    options.plan_file = name;
    options.activation_bytes = ActivationBytes(plan);
    options.checked_by_dataflow = true;
    if (plan.guidance_calls) options.branches = plan.guidance_calls->branches;
    derived = CompileAst(*ast, graph, options, diags);
  }
  tracker.Flush();
  if (!derived || tracker.seen_error()) {
    throw std::runtime_error(context + ": its steps, written as plan rules, do not compile:\n" + rendered.str() +
                             "  (the plan was edited after it was compiled, or compiled for another model; recompile it)");
  }
  return std::move(*derived);
}

std::vector<std::string> StepDifferences(const plan::ExecutionPlan& given, const plan::ExecutionPlan& derived) {
  std::vector<std::string> differences;
  std::map<std::string, const plan::ModuleStep*> in_given, in_derived;
  std::vector<std::string> order;
  for (const plan::ModuleStep& s : given.steps) {
    if (in_given.emplace(s.module, &s).second) order.push_back(s.module);
  }
  for (const plan::ModuleStep& s : derived.steps) {
    if (in_derived.emplace(s.module, &s).second && !in_given.count(s.module)) order.push_back(s.module);
  }
  for (const std::string& module : order) {
    auto g = in_given.find(module);
    auto d = in_derived.find(module);
    CompareSteps(g == in_given.end() ? nullptr : g->second, d == in_derived.end() ? nullptr : d->second, module,
                 differences);
  }
  // Weight slices: the layout every rank gathers by must be the compiler's.
  auto layout = [](const std::optional<plan::WeightPlacement>& w) {
    std::vector<std::string> out;
    if (!w) return out;
    for (const plan::WeightBlock& b : w->blocks) {
      std::string text = "block `" + b.module + "` sliced " + std::to_string(w->ranks) + " ways, " +
                         std::to_string(b.bytes) + " bytes in slices of " + std::to_string(b.slice_bytes) + ":";
      for (size_t k = 0; k < b.params.size(); ++k) {
        text += " " + b.params[k] + (k < b.dtypes.size() ? " " + b.dtypes[k] : "") +
                (k < b.offsets.size() ? "@" + std::to_string(b.offsets[k]) : "") +
                (k < b.shapes.size() ? Sizes(b.shapes[k]) : "");
      }
      out.push_back(text);
    }
    return out;
  };
  auto calls = [](const std::optional<plan::GuidanceCalls>& g) -> std::string {
    if (!g) return "no guidance calls";
    std::string text = "guidance calls: " + std::to_string(g->branches) + " branches, per group " + Sizes(g->per_group) + ", per branch";
    for (const std::string& a : g->arguments) text += " " + a;
    return text + ", " + std::to_string(g->output_bytes) + " B of output each";
  };
  if (calls(given.guidance_calls) != calls(derived.guidance_calls)) {
    differences.push_back("the plan has `" + calls(given.guidance_calls) + "`, the model gives `" +
                          calls(derived.guidance_calls) + "`");
  }
  const std::vector<std::string> a = layout(given.weights), b = layout(derived.weights);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "no such block", y = i < b.size() ? b[i] : "no such block";
    if (x != y) differences.push_back("weights: the plan has `" + x + "`, the model gives `" + y + "`");
  }
  return differences;
}

std::vector<std::string> EditDifferences(const plan::ProgramEdits& given, const plan::ProgramEdits& derived) {
  std::multiset<std::string> want;
  for (const plan::ProgramEdit& e : derived.edits) want.insert(Describe(e));
  std::vector<std::string> out;
  for (const plan::ProgramEdit& e : given.edits) {
    const std::string text = Describe(e);
    auto it = want.find(text);
    if (it != want.end()) {
      want.erase(it);
    } else {
      out.push_back("the plan has the edit " + text + " (module `" + e.module + "`), which the compiler does not give");
    }
  }
  for (const plan::ProgramEdit& e : derived.edits) {
    const std::string text = Describe(e);
    auto it = want.find(text);
    if (it == want.end()) continue;
    want.erase(it);
    out.push_back("the plan lacks the edit " + text + " (module `" + e.module + "`), which the compiler gives");
  }
  return out;
}

void CheckPlanAgainstProgram(const plan::ExecutionPlan& plan, const program::Program& p, const std::string& program_file,
                             const program::ManifestWorkload& run, const std::string& what) {
  if (!plan.program) throw std::runtime_error(what + " has no edits of a program");
  // The program's graph view at the plan's workload: one of the manifest's, or the job's own.
  program::Program view = p;
  if (!view.manifest) view.manifest.emplace();
  auto& workloads = view.manifest->workloads;
  auto recorded = std::find_if(workloads.begin(), workloads.end(),
                               [&](const program::ManifestWorkload& w) { return w.name == plan.workload.name; });
  if (recorded == workloads.end()) {
    if (plan.workload.name != run.name) {
      throw std::runtime_error(what + " was compiled for workload `" + plan.workload.name + "`, which program " +
                               program_file + " does not record (it cannot be derived again); compile it for one of "
                               "the program's workloads, or pass the plan with --plan");
    }
    workloads = {run};
  } else {
    workloads = {*recorded};
  }
  const model::ModelGraph graph = program::GraphOfProgram(view);
  const std::string context = what + " does not hold for program " + program_file + " (derived again at workload `" +
                              plan.workload.name + "`, mesh " + plan.mesh.ToString() + ")";
  plan::ExecutionPlan derived = CompileRules(plan, graph, "<" + what + ", as rules>", context);
  try {
    program::LowerToProgramWithCost(derived, p, program_file, graph);
  } catch (const program::ProgramError& e) {
    throw std::runtime_error(context + ": its steps do not lower into the program: " + e.what());
  }
  std::vector<std::string> differences = StepDifferences(plan, derived);
  for (std::string& d : EditDifferences(*plan.program, *derived.program)) differences.push_back(std::move(d));
  if (differences.empty()) return;
  throw std::runtime_error(ListDifferences(context, differences) +
                           "\n  (the plan was edited after it was compiled, or compiled for another program; recompile it)");
}

}  // namespace weft

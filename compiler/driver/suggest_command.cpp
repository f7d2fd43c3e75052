// `weft suggest --program M.pt2 [--mesh M]... [-o PLAN.weft]`: proposes a plan from the program's
// dataflow (compiler/program/suggest.h) and checks it as `weft check` checks a written one, at
// every workload of the program and at each mesh (default ulysses=2 and ring=2, plus tp=2 and
// cfg=2 when the plan has tensor-parallel or guidance rules, and cfg=2 with the first mesh when it
// has both guidance and context-parallel rules). A rule the checks refuse is moved
// to its next place (a split to the next module boundary its tokens reach) or dropped, and the
// plan is checked again; what moved and why is written at the top of the plan. Exit status 0
// with a clean plan, 1 when no rule survives (the diagnostics that blocked them are printed),
// 2 on usage or I/O errors.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/driver/program_lowering.h"
#include "compiler/program/edits.h"
#include "compiler/program/lowering.h"
#include "compiler/program/suggest.h"
#include "compiler/syntax/parse.h"

namespace weft::driver {
namespace {

struct SuggestOptions {
  std::string program;
  std::vector<std::string> meshes;
  std::string output;
  std::string name;
  bool unchecked = false;
};

// Each round moves one rule a step later in the dataflow or drops it, so the repair ends; the bound
// only guards against a bug. A deep model needs many rounds: every block's split may step past
// several nodes (Latte-1's 28 spatial and 28 temporal blocks take more than 200).
constexpr int kMaxRounds = 5000;

// A diagnostic's message, short enough for a comment: without the program's path (the plan's
// header names it), the rule locations (they point into a plan that no longer exists) and the
// "its split comes from" tail (the comment sits by that rule).
std::string Reason(const diag::Diagnostic& d, const std::string& program) {
  std::string text = d.messages[0].text;
  if (text.compare(0, program.size() + 2, program + ": ") == 0) text = text.substr(program.size() + 2);
  for (size_t at; (at = text.find(" (rule at ")) != std::string::npos;) {
    // Up to its closing parenthesis: a location may hold parentheses of its own.
    size_t end = at + 1;
    for (int depth = 0; end < text.size(); ++end) {
      depth += text[end] == '(' ? 1 : text[end] == ')' ? -1 : 0;
      if (depth == 0) break;
    }
    text.erase(at, end == text.size() ? std::string::npos : end - at + 1);
  }
  for (const char* tail : {"; its split comes from", "; its sharding comes from"}) {
    const size_t at = text.find(tail);
    if (at != std::string::npos) text.erase(at);
  }
  return text;
}

struct CheckResult {
  std::vector<diag::Diagnostic> errors;
  // Lengths a mesh does not divide at some workload (Flux.1-dev's 1008x1008: 3969 image tokens):
  // a mode of the run (--ulysses-anything, --ring-anything), not a fault of the plan.
  std::vector<std::string> uneven;
  std::vector<std::string> combination;  // parallel: mesh x workload of each error
  size_t combinations = 0;
  // The first error as the lowering threw it, when it did: the whole value it met, if any.
  std::string whole_value;
  int64_t whole_dim = -1;
  // The fewest attention steps that run context-parallel at any clean combination of a mesh with
  // a ring or ulysses axis (-1: no such combination). Zero means the splits the checks kept reach
  // no attention: a split and its gather that only move tokens around cost collectives and shard
  // nothing that matters (SanaWM's split and gather of one Linear's output).
  int64_t cp_attention = -1;
  // The most convolutions over a split grid that read their neighbours' rows (kHalo edits) at any
  // clean combination.
  int64_t halos = 0;
};

CheckResult Check(const std::string& plan_name, const std::string& text, const program::Program& program,
                  const model::ModelGraph& graph, const std::vector<std::string>& meshes) {
  CheckResult result;
  CompileOptions o;

  Inputs in;
  diag::CollectingConsumer parse_out;
  diag::Emitter parse_diags(in.sources, parse_out, 0);
  const source::SourceBuffer& src = in.sources.Get(in.sources.Add(source::SourceBuffer(plan_name, text)));
  in.plan_files.push_back(plan_name);
  in.plans.push_back(syntax::ParsePlan(src, parse_diags));
  for (diag::Diagnostic& d : parse_out.Take()) {
    if (d.level == diag::Level::kError) {
      result.errors.push_back(std::move(d));
      result.combination.push_back("parse");
    }
  }
  if (!in.plans[0] || in.plans[0]->has_error) return result;
  in.graphs.push_back(graph);
  in.graph_files.push_back(program.Where());
  in.programs.push_back(std::shared_ptr<const program::Program>(&program, [](const program::Program*) {}));
  // The checks run with uneven shards allowed, so that a length a mesh does not divide (a mode
  // of the run) does not stop them before the dataflow is proven; it is noted on its own below.
  CompileOptions uneven = o;
  uneven.ulysses_anything = uneven.ring_anything = true;
  std::vector<plan::Mesh> even;
  for (const std::string& spec : meshes) {
    std::string error;
    std::optional<plan::Mesh> mesh = ParseMesh(spec, uneven, error);
    if (mesh) in.meshes.push_back(*mesh);
    if (std::optional<plan::Mesh> strict = ParseMesh(spec, o, error)) even.push_back(*strict);
  }
  for (size_t m = 0; m < in.meshes.size(); ++m) {
    for (const model::Workload& w : graph.workloads) in.combinations.push_back({0, 0, m, w.name});
  }
  for (const Combination& c : in.combinations) {
    // Which lengths the mesh does not divide: the binder alone, without uneven shards.
    if (c.mesh < even.size()) {
      diag::CollectingConsumer strict_out;
      diag::Emitter strict(in.sources, strict_out, 0);
      bind::BindOptions b = BindOptionsFor(in, c);
      b.mesh = even[c.mesh];
      CompileAst(*in.plans[0], in.graphs[0], b, strict);
      for (const diag::Diagnostic& d : strict_out.Take()) {
        if (d.level != diag::Level::kError || d.messages[0].kind != diag::Kind::kSplitNotDivisible) continue;
        const std::string at = in.meshes[c.mesh].ToString() + " x " + c.workload;
        if (std::find(result.uneven.begin(), result.uneven.end(), at) == result.uneven.end()) result.uneven.push_back(at);
      }
    }
    ++result.combinations;
    diag::CollectingConsumer collected;
    diag::Emitter diags(in.sources, collected, 0);
    std::optional<plan::ExecutionPlan> compiled = CompileAst(*in.plans[0], in.graphs[0], BindOptionsFor(in, c), diags);
    if (compiled && !diags.has_errors()) {
      // As LowerIntoProgram, keeping the refusal itself: a whole value it names is split next.
      try {
        program::LowerToProgramWithCost(*compiled, program, in.graph_files[0], in.graphs[0]);
        program::Program edited = program;
        program::ApplyEdits(edited, *compiled->program);
        // Counted on the program's edits: an attention whose keys no split reaches runs local there.
        if (compiled->mesh.Cp() > 1) {
          const int64_t n = std::count_if(compiled->steps.begin(), compiled->steps.end(), [](const plan::ModuleStep& st) {
            return st.attention && st.attention->mode != plan::AttentionMode::kLocal;
          });
          result.cp_attention = result.cp_attention < 0 ? n : std::min(result.cp_attention, n);
        }
        const int64_t halos = std::count_if(compiled->program->edits.begin(), compiled->program->edits.end(),
                                            [](const plan::ProgramEdit& e) { return e.kind == plan::ProgramEdit::Kind::kHalo; });
        result.halos = std::max(result.halos, halos);
      } catch (const program::PlanEditError& e) {
        ReportPlanEditError(e, src, diags);
        result.whole_value = e.whole_value();
        result.whole_dim = e.whole_dim();
      } catch (const program::ProgramError& e) {
        diags.EmitAt(diag::Location{}, PlanDoesNotLowerToProgram, e.what());
      }
    }
    for (diag::Diagnostic& d : collected.Take()) {
      if (d.level != diag::Level::kError) continue;
      result.errors.push_back(std::move(d));
      result.combination.push_back(in.meshes[c.mesh].ToString() + " x " + c.workload);
    }
    if (!result.errors.empty()) return result;  // one refusal at a time: the next round re-checks
  }
  return result;
}

bool AnyRule(const program::Suggestion& s) {
  for (const program::TokenSource& t : s.sources) {
    if (!t.dropped) return true;
  }
  return !s.tp.empty() || !s.cfg_splits.empty();
}

std::string Describe(const program::SuggestedSplit& x) {
  return (x.output >= 0 ? "output " + std::to_string(x.output) : "`" + x.argument + "`") + " of `" +
         (x.module.empty() ? std::string("the root") : x.module) + "`";
}

// No guidance_parallel section: the splits tried for it leave the header, one note says why.
void DropGuidance(program::Suggestion& s, const std::string& why) {
  s.cfg_splits.clear();
  s.cfg_gathers.clear();
  s.cfg_dropped = why;
  s.notes.erase(std::remove_if(s.notes.begin(), s.notes.end(),
                               [](const std::string& n) { return n.find("[at cfg=") != std::string::npos; }),
                s.notes.end());
  s.notes.push_back("no guidance_parallel section: " + why);
}

// No context_parallel section: every token split and gather leaves, one note says why.
void DropContextParallel(program::Suggestion& s, const std::string& why) {
  for (program::TokenSource& t : s.sources) t.dropped = true;
  s.gathers.clear();
  s.attention.clear();
  s.notes.push_back("no context-parallel rule kept: " + why);
}

// Moves or drops the rule `error` is about; false when it points at none.
bool Repair(program::Suggestion& s, const std::vector<program::RenderedRule>& rules, const program::Program& p,
            const CheckResult& result) {
  using K = program::RenderedRule::Kind;
  const diag::Diagnostic& error = result.errors[0];
  const std::string& combination = result.combination[0];
  const std::string why = Reason(error, p.Where()) + " [at " + combination + "]";
  // Refused only with the guidance branches and the tokens split on one mesh (each axis alone is
  // clean by then): a split may move to where both pass, but the context-parallel rules are not
  // dropped for it -- the guidance section is.
  const bool blame_guidance = !s.cfg_splits.empty() && combination.find("cfg=") != std::string::npos &&
                              (combination.find("ulysses=") != std::string::npos || combination.find("ring=") != std::string::npos);
  if (blame_guidance && !result.whole_value.empty()) {
    DropGuidance(s, why);
    return true;
  }
  // A split met a whole value along its dim (RoPE tables, a mask built from the image shapes):
  // split that value too, where it is made -- the farthest boundary back along its dim that the
  // checks have not refused (the stream's own source: HunyuanVideo's text after the token
  // refiner, not inside the first block) -- unless it is split already.
  if (!result.whole_value.empty() && combination.find("tp=") == std::string::npos) {
    std::vector<program::SuggestedSplit> path = program::SplitsWhereMade(p, result.whole_value, result.whole_dim);
    std::reverse(path.begin(), path.end());
    const bool cfg = combination.find("cfg=") != std::string::npos;
    auto same = [](const program::SuggestedSplit& x, const program::SuggestedSplit& y) {
      return x.module == y.module && x.argument == y.argument && x.output == y.output;
    };
    auto on_path = [&](const program::SuggestedSplit& x) {
      return std::any_of(path.begin(), path.end(), [&](const program::SuggestedSplit& m) { return same(x, m); });
    };
    bool known = false;
    if (cfg) {
      for (const program::SuggestedSplit& x : s.cfg_splits) known = known || on_path(x);
    } else {
      for (const program::TokenSource& t : s.sources) {
        if (!t.dropped && on_path(t.at[t.current])) known = true;
      }
      // A later place of another value's split (its tokens reach there): move that split there.
      for (const program::SuggestedSplit& m : path) {
        for (program::TokenSource& t : s.sources) {
          if (known || t.dropped) continue;
          for (size_t i = t.current + 1; i < t.at.size(); ++i) {
            if (!same(t.at[i], m) || s.Refused(t.at[i])) continue;
            s.Refuse(t.at[t.current]);
            s.notes.push_back("split " + Describe(t.at[i]) + " instead of " + Describe(t.at[t.current]) + ": " + why);
            t.current = i;
            return true;
          }
        }
      }
    }
    auto more = std::find_if(path.begin(), path.end(), [&](const program::SuggestedSplit& m) { return !s.Refused(m); });
    if (more != path.end() && !known) {
      s.notes.push_back("split " + Describe(*more) + " too: " + why);
      if (cfg) {
        s.cfg_splits.push_back(*more);
      } else {
        program::TokenSource t;
        t.at.push_back(*more);
        s.sources.push_back(std::move(t));
      }
      return true;
    }
  }
  const uint32_t line = error.messages[0].loc.line;
  const program::RenderedRule* hit = nullptr;
  for (const program::RenderedRule& r : rules) {
    if (r.line == line) hit = &r;
  }
  if (hit == nullptr) {
    // Not located at a rule: blame the axis the failing mesh adds.
    if (combination.find("tp=") != std::string::npos && !s.tp.empty()) {
      s.tp.clear();
      s.tp_dropped = why;
      return true;
    }
    if (combination.find("cfg=") != std::string::npos && !s.cfg_splits.empty()) {
      DropGuidance(s, why);
      return true;
    }
    bool any = false;
    for (program::TokenSource& t : s.sources) {
      if (t.dropped) continue;
      t.dropped = any = true;
    }
    if (any) s.notes.push_back("no context-parallel rule kept: " + why);
    return any;
  }
  if (blame_guidance && hit->kind != K::kSplit && hit->kind != K::kCfg && hit->kind != K::kTp) {
    DropGuidance(s, why);
    return true;
  }
  switch (hit->kind) {
    case K::kSplit: {
      program::TokenSource& t = s.sources[hit->index];
      if (blame_guidance && std::none_of(t.at.begin() + static_cast<std::ptrdiff_t>(t.current) + 1, t.at.end(),
                       [&](const program::SuggestedSplit& m) { return !s.Refused(m); })) {
        DropGuidance(s, why);
        return true;
      }
      const std::string from = Describe(t.at[t.current]);
      s.Refuse(t.at[t.current]);
      while (t.current + 1 < t.at.size() && s.Refused(t.at[t.current + 1])) ++t.current;
      if (t.current + 1 < t.at.size()) {
        ++t.current;
        s.notes.push_back("not split at " + from + ": " + why + "; split at " + Describe(t.at[t.current]) + " instead.");
      } else {
        t.dropped = true;
        s.notes.push_back("no split of " + from + " or after it is kept: " + why);
      }
      return true;
    }
    case K::kGather:
      s.notes.push_back("gather of output " + std::to_string(s.gathers[hit->index].output) + " of `" +
                        s.gathers[hit->index].module + "` left out: " + why);
      s.gathers.erase(s.gathers.begin() + static_cast<std::ptrdiff_t>(hit->index));
      return true;
    case K::kAttention:
      // Often a consequence of another rule not yet in place (a mask over streams not yet split):
      // the attention's mode is left to the binder and the rule retried once the rest is clean.
      s.attention_deferred.push_back(s.attention[hit->index]);
      s.attention_deferred.back().why += "; refused first: " + why;
      s.attention.erase(s.attention.begin() + static_cast<std::ptrdiff_t>(hit->index));
      return true;
    case K::kTp: {
      // The rules of one attention or feed-forward stand or fall together.
      const std::string owner = s.tp[hit->index].owner;
      s.tp.erase(std::remove_if(s.tp.begin(), s.tp.end(), [&](const program::SuggestedTp& t) { return t.owner == owner; }),
                 s.tp.end());
      s.notes.push_back("no tensor-parallel rules for `" + owner + "`: " + why);
      if (s.tp.empty()) s.tp_dropped = why;
      return true;
    }
    case K::kCfg:
      DropGuidance(s, why);
      return true;
  }
  return false;
}

int RunSuggest(const SuggestOptions& o) {
  std::shared_ptr<const program::Program> p;
  model::ModelGraph graph;
  try {
    p = std::make_shared<const program::Program>(program::ReadProgramFile(o.program));
  } catch (const program::ProgramError& e) {
    std::cerr << "weft suggest: " << e.what() << "\n";
    return 2;
  }
  // What the program cannot be split by at all comes first: it is why, whatever else is missing.
  program::Suggestion s;
  try {
    s = program::SuggestPlan(*p);
  } catch (const program::SuggestError& e) {
    std::cerr << "weft suggest: " << e.what() << "\n";
    return 1;
  }
  try {
    graph = program::GraphOfProgram(*p);
  } catch (const program::ProgramError& e) {
    // Without a sequence to split, that comes first: it is why, whatever else is missing.
    if (!s.cp_dropped.empty()) {
      std::cerr << "weft suggest: " << p->Where() << ": " << s.cp_dropped << "; nor can the rest be checked: " << e.what()
                << "\n";
      return 1;
    }
    std::cerr << "weft suggest: " << e.what() << "\n";
    return 2;
  }
  if (!o.name.empty()) s.plan_name = o.name;
  if (graph.workloads.empty()) {
    std::cerr << "weft suggest: " << p->Where() << " records no workload to check a plan at; export it with "
              << "tools/export_program.py, which records the example's shapes\n";
    return 2;
  }
  std::vector<std::string> meshes = o.meshes.empty() ? std::vector<std::string>{"ulysses=2", "ring=2"} : o.meshes;
  for (const std::string& spec : meshes) {
    std::string error;
    if (!plan::ParseMeshSpec(spec, &error)) {
      std::cerr << "weft suggest: --mesh " << spec << ": " << error << "\n";
      return 2;
    }
  }
  auto has_axis = [&](const char* axis) {
    for (const std::string& m : meshes) {
      if (m.find(axis) != std::string::npos) return true;
    }
    return false;
  };
  if (o.unchecked) {
    std::cout << program::RenderSuggestion(s, nullptr);
    return 0;
  }
  const std::string plan_name = o.output.empty() ? "<suggested>" : o.output;
  std::string text;
  CheckResult last;
  std::vector<std::string> checked;
  auto flowing = [](const program::Suggestion& x) {
    return std::any_of(x.sources.begin(), x.sources.end(), [](const auto& t) { return !t.dropped; });
  };
  // Repairs `x` until its plan checks clean (or nothing is left to repair).
  auto converge = [&](program::Suggestion& x) {
    for (int round = 0; round < kMaxRounds; ++round) {
      std::vector<std::string> now = meshes;
      if (!x.tp.empty() && !has_axis("tp=")) now.push_back("tp=2");
      if (!x.cfg_splits.empty() && !has_axis("cfg=")) {
        now.push_back("cfg=2");
        // And with the first context-parallel mesh: a value both split over the branches and met
        // by the tokens' split (HunyuanVideo's text mask where the text is split at the root)
        // checks clean on each axis alone but not on both, the mesh users of both run.
        if (flowing(x) && meshes.front().find("tp=") == std::string::npos) now.push_back("cfg=2," + meshes.front());
      }
      std::vector<program::RenderedRule> rules;
      text = program::RenderSuggestion(x, &rules);
      last = Check(plan_name, text, *p, graph, now);
      checked = now;
      if (last.errors.empty()) break;
      if (!Repair(x, rules, *p, last)) break;
    }
  };
  const program::Suggestion initial = s;
  converge(s);
  // Two streams of tokens that fold into each other (Latte's spatial tokens and its frames, each
  // the batch of the other's attention) refuse each other's splits, and the repair can end with
  // neither: each source is then tried alone, and the first that flows and runs some attention
  // context-parallel is the suggestion.
  if (last.errors.empty() && !flowing(s) && initial.sources.size() > 1) {
    for (size_t i = 0; i < initial.sources.size(); ++i) {
      program::Suggestion alone = initial;
      if (i < initial.gathers_of_source.size()) alone.gathers = initial.gathers_of_source[i];
      std::string others;
      for (size_t j = 0; j < alone.sources.size(); ++j) {
        if (j == i) continue;
        alone.sources[j].dropped = true;
        others += (others.empty() ? "" : ", ") + Describe(alone.sources[j].at.front());
      }
      converge(alone);
      if (!last.errors.empty() || !flowing(alone)) continue;
      if (Check(plan_name, text, *p, graph, checked).cp_attention <= 0) continue;
      alone.notes.insert(alone.notes.begin(),
                         "split at " + Describe(alone.sources[i].at.front()) + " alone: with the splits at " + others +
                             " the checks refused each in turn (their tokens fold into each other's rows), and no split "
                             "flowed; this one does");
      s = std::move(alone);
      break;
    }
    text = program::RenderSuggestion(s, nullptr);
    last = Check(plan_name, text, *p, graph, checked);
  }
  if (!last.uneven.empty()) {
    std::string at;
    for (const std::string& u : last.uneven) at += (at.empty() ? "" : ", ") + u;
    s.notes.push_back("lengths the mesh does not divide at " + at +
                      ": run those with --ulysses-anything or --ring-anything (uneven shards)");
  }
  // The attention rules set aside: each back in, kept if the plan stays clean.
  if (last.errors.empty()) {
    std::vector<program::SuggestedAttention> deferred;
    deferred.swap(s.attention_deferred);
    for (program::SuggestedAttention& a : deferred) {
      s.attention.push_back(a);
      std::vector<std::string> now = checked;
      CheckResult again = Check(plan_name, program::RenderSuggestion(s, nullptr), *p, graph, now);
      if (again.errors.empty()) continue;
      s.attention.pop_back();
      s.notes.push_back("attention rule `" + a.module + "` left to the binder: " + Reason(again.errors[0], p->Where()) +
                        " [at " + again.combination[0] + "]");
    }
    text = program::RenderSuggestion(s, nullptr);
  }
  // Splits that reach no attention shard nothing worth their collectives: the context-parallel
  // rules go, and the attention islands are tried as when no split flows at all.
  bool flows = std::any_of(s.sources.begin(), s.sources.end(), [](const auto& t) { return !t.dropped; });
  if (last.errors.empty() && flows) {
    CheckResult again = Check(plan_name, text, *p, graph, checked);
    if (again.errors.empty() && again.cp_attention == 0) {
      DropContextParallel(s, "the splits the checks kept reach no attention: every attention runs local under them");
      text = program::RenderSuggestion(s, nullptr);
      flows = false;
    }
  }
  // No split flows through the model: the attention islands, kept if they check clean.
  if (last.errors.empty() && !flows && s.cp_dropped.empty() && !s.island_sources.empty()) {
    program::Suggestion islands = s;
    islands.sources = s.island_sources;
    islands.gathers = s.island_gathers;
    islands.attention = s.island_attention;  // no other site sees a split
    CheckResult again;
    for (int round = 0; round < kMaxRounds; ++round) {
      std::vector<program::RenderedRule> rules;
      std::vector<std::string> now = checked;
      again = Check(plan_name, program::RenderSuggestion(islands, &rules), *p, graph, now);
      if (again.errors.empty() || !Repair(islands, rules, *p, again)) break;
    }
    bool kept = std::any_of(islands.sources.begin(), islands.sources.end(), [](const auto& t) { return !t.dropped; });
    if (again.errors.empty() && kept && again.cp_attention == 0) {
      kept = false;
      s.notes.push_back("no split around each self-attention either: the splits the checks kept reach no attention");
    }
    if (again.errors.empty() && kept) {
      islands.notes.push_back("context parallelism around each self-attention only (split where it is called, "
                              "gathered where it returns, one all-gather per call): no split flows through the model");
      s = std::move(islands);
      text = program::RenderSuggestion(s, nullptr);
    } else if (again.errors.empty() && again.cp_attention == 0) {
      // Every island split was refused on the way: the last refusal says why.
      if (islands.notes.size() > s.notes.size()) {
        s.notes.push_back("no split around each self-attention either: " + islands.notes.back());
      }
      text = program::RenderSuggestion(s, nullptr);
    } else {
      s.notes.push_back(again.errors.empty()
                            ? "no split around each self-attention either: the checks refused every one"
                            : "no split around each self-attention either: " + Reason(again.errors[0], p->Where()) +
                                  " [at " + again.combination[0] + "]");
      text = program::RenderSuggestion(s, nullptr);
    }
  }
  if (!last.errors.empty() || !AnyRule(s)) {
    std::cerr << "weft suggest: " << p->Where() << ": no plan whose rules all pass the checks";
    if (!last.errors.empty()) std::cerr << "; what blocks it, at " << last.combination[0] << ":\n  " << Reason(last.errors[0], p->Where());
    for (const std::string& n : s.notes) std::cerr << "\n  " << n;
    if (!s.tp_dropped.empty()) std::cerr << "\n  tensor parallel left out: " << s.tp_dropped;
    std::cerr << "\n";
    return 1;
  }
  // Convolutions the split passes by exchanging edge rows: said, since nothing in the rules shows it.
  if (const CheckResult final_check = Check(plan_name, text, *p, graph, checked); final_check.halos > 0) {
    s.notes.push_back(std::to_string(final_check.halos) + " convolution(s) over the split grid read one or more rows of " +
                      "each neighbouring rank's part (a halo exchange before each, which the compiler inserts; `weft " +
                      "explain` lists them); the split is made in whole rows of the grid");
    text = program::RenderSuggestion(s, nullptr);
  }
  // Sibling modules split alike (one text stream per projection) read as one rule: kept when
  // the merged plan checks clean too.
  if (program::Suggestion merged = s; program::MergeSiblingSplits(merged)) {
    const std::string merged_text = program::RenderSuggestion(merged, nullptr);
    if (Check(plan_name, merged_text, *p, graph, checked).errors.empty()) {
      s = std::move(merged);
      text = merged_text;
    }
  }
  if (o.output.empty()) {
    std::cout << text;
  } else {
    std::ofstream out(o.output, std::ios::binary);
    out << text;
    if (!out) {
      std::cerr << "weft suggest: cannot write " << o.output << "\n";
      return 2;
    }
  }
  std::string meshes_text;
  for (const std::string& m : checked) meshes_text += (meshes_text.empty() ? "" : ", ") + m;
  std::cerr << "weft suggest: " << p->Where() << ": plan `" << s.plan_name << "` checked clean at " << meshes_text
            << " x " << graph.workloads.size() << " workload(s)";
  if (!s.cp_dropped.empty()) std::cerr << "; no context_parallel: " << s.cp_dropped;
  if (!s.tp_dropped.empty()) std::cerr << "; no tensor_parallel: " << s.tp_dropped;
  if (!s.cfg_dropped.empty()) std::cerr << "; no guidance_parallel: " << s.cfg_dropped;
  std::cerr << "\n";
  return 0;
}

}  // namespace

Command MakeSuggestCommand(CLI::App& weft) {
  auto o = std::make_shared<SuggestOptions>();
  CLI::App* app = weft.add_subcommand("suggest", "Propose a plan for a torch.export program from its dataflow, checked");
  app->add_option("--program", o->program, "The program (.pt2, tools/export_program.py)")->required();
  app->add_option("--mesh", o->meshes, "Meshes to check the plan at (repeatable; default ulysses=2 and ring=2; "
                                       "tp=2 and cfg=2 are added when the plan has those rules, cfg=2 with the first "
                                       "mesh when it has guidance and context-parallel rules)");
  app->add_option("-o,--output", o->output, "Write the plan here (default: stdout)");
  app->add_option("--name", o->name, "The plan's name (default: from the model class)");
  app->add_flag("--unchecked", o->unchecked, "Print the proposal before any check (nothing moved or dropped)");
  return Command{app, [o] { return RunSuggest(*o); }};
}

}  // namespace weft::driver

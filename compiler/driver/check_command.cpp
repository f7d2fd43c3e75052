// `weft check PLAN... [--graph G]... [--mesh M]... [--workload W]...`: binds every plan
// against every matching graph, mesh and workload and reports every diagnostic. Exit status
// 0 when all combinations are clean, 1 when any has diagnostics, 2 on usage or I/O errors.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "compiler/compile.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/program/edits.h"
#include "compiler/program/lowering.h"
#include "compiler/program/plan_edit_error.h"

namespace weft::driver {
namespace {

const diag::DiagnosticDef<std::string>& DiagnosticOf(program::EditCheck check) {
  using C = program::EditCheck;
  switch (check) {
    case C::kProgramLacksValue: return ProgramLacksPlanValue;
    case C::kFullLengthWithoutShard: return FullLengthWithoutShard;
    case C::kCpAttentionOverWholeKeys: return ContextParallelOverWholeKeys;
    case C::kMaskNotLaidOutWithKeys: return MaskNotLaidOutWithKeys;
    case C::kTpReducesShardedDim: return TpShardedDimReduced;
    case C::kTpColwiseEscapes: return ColwiseOutputEscapes;
    case C::kTpRowwiseInputNotSharded: return RowwiseInputNotSharded;
    case C::kTpAttentionHeadsMismatch: return TpAttentionHeadsMismatch;
    case C::kTpUnsupportedOperator: return TpUnsupportedOperator;
    case C::kTpShardReachesOutput: return TpShardReachesOutput;
    case C::kCpReducesSplitDim: return SplitDimReduced;
    case C::kCpSplitMixedWithWhole: return SplitMixedWithWhole;
    case C::kLocalAttentionOverSplitKeys: return LocalAttentionOverSplitKeys;
    case C::kCpUnsupportedOperator: return SplitThroughUnsupportedOperator;
    case C::kSplitNeverGathered: return SplitNeverGathered;
    case C::kGatherOfUnsplitValue: return GatherOfUnsplitValue;
  }
  return PlanDoesNotLowerToProgram;
}

// The source range of the plan rule at `origin` in `plan` (to the end of its line), or an
// invalid range when the origin is unknown or in another file.
source::SourceRange RuleRange(const source::SourceBuffer& plan, const plan::Origin& origin) {
  if (!origin.Known() || origin.file != plan.filename() || origin.line < 1 ||
      static_cast<uint32_t>(origin.line) > plan.line_count()) {
    return {};
  }
  const std::string_view line = plan.LineText(static_cast<uint32_t>(origin.line));
  const size_t col = static_cast<size_t>(std::max(1, origin.col)) - 1;
  if (col >= line.size()) return {};
  size_t end = line.size();
  while (end > col && (line[end - 1] == ' ' || line[end - 1] == '\r' || line[end - 1] == '\n')) --end;
  const uint32_t offset = static_cast<uint32_t>(line.data() - plan.text().data() + col);
  return plan.RangeAt(plan.id(), offset, static_cast<uint32_t>(end - col));
}

// Sends every diagnostic of one batch to `next`, sorted, without repeating one already sent
// (the same plan line is often wrong for several meshes or workloads).
void Forward(std::vector<diag::Diagnostic> batch, diag::Consumer& next, std::set<std::string>& seen) {
  diag::CollectingConsumer sorted_out;
  diag::SortingConsumer sorter(sorted_out);
  for (diag::Diagnostic& d : batch) sorter.Handle(std::move(d));
  sorter.Flush();
  for (diag::Diagnostic d : sorted_out.Take()) {
    if (seen.insert(diag::RenderText(d)).second) next.Handle(std::move(d));
  }
}

int RunCheck(const CompileOptions& o) {
  const bool text = o.format == "text";
  std::unique_ptr<diag::Consumer> renderer = MakeRenderer(o.format);
  std::set<std::string> seen;
  Inputs in;
  diag::CollectingConsumer parse_diags;
  diag::Emitter parse_emitter(in.sources, parse_diags, o.max_errors);
  const int rc = LoadInputs(o, in, parse_emitter, "check");
  bool failed = parse_emitter.has_errors();
  Forward(parse_diags.Take(), *renderer, seen);
  if (rc != 0) {
    renderer->Flush();  // input problems are diagnostics too: JSON and SARIF carry them
    return rc;
  }
  size_t clean = 0;
  for (const Combination& c : in.combinations) {
    diag::CollectingConsumer collected;
    diag::Emitter diags(in.sources, collected, o.max_errors);
    std::optional<plan::ExecutionPlan> compiled = CompileAst(*in.plans[c.plan], in.graphs[c.graph], BindOptionsFor(in, c), diags);
    bool ok = compiled.has_value();
    if (ok && !diags.has_errors() && in.programs[c.graph] != nullptr) {
      // Into the program itself: every edit decided, and applied to a copy, as weft-run will.
      try {
        const program::Program& p = *in.programs[c.graph];
        const plan::ProgramEdits edits = program::LowerToProgram(*compiled, p, in.graph_files[c.graph]);
        program::Program edited = p;
        program::ApplyEdits(edited, edits);
      } catch (const program::PlanEditError& e) {
        // At the rule, with the node in a note.
        const source::SourceRange at = RuleRange(in.sources.Get(in.plans[c.plan]->file), e.origin());
        auto built = diags.Build(at, DiagnosticOf(e.check()), e.what());
        if (!e.node().empty()) built.NoteAt(diag::Location{}, AtProgramNode, e.node(), e.module());
        built.Emit();
        ok = false;
      } catch (const program::ProgramError& e) {
        diags.EmitAt(diag::Location{}, PlanDoesNotLowerToProgram, e.what());
        ok = false;
      }
    }
    if (ok && !diags.has_errors()) {
      ++clean;
      continue;
    }
    failed = true;
    if (text) std::cerr << "weft check: " << CombinationName(in, c) << ":\n";
    Forward(collected.Take(), *renderer, seen);
  }
  renderer->Flush();
  if (text) {
    std::cerr << "weft check: " << in.combinations.size() << " combination(s), " << clean << " clean, "
              << in.combinations.size() - clean << " with errors\n";
  }
  if (in.plans_without_graph > 0) return 2;
  return failed ? 1 : 0;
}

}  // namespace

Command MakeCheckCommand(CLI::App& weft) {
  auto options = std::make_shared<CompileOptions>();
  CLI::App* app = weft.add_subcommand("check", "Check plans against model graphs, meshes and workloads");
  AddCompileOptions(app, *options, /*many=*/true);
  app->add_option("--format", options->format, "Diagnostics format: text, json or sarif")
      ->check(CLI::IsMember({"text", "json", "sarif"}));
  return Command{app, [options] { return RunCheck(*options); }};
}

}  // namespace weft::driver

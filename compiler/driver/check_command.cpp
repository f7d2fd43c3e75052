// `weft check PLAN... [--graph G]... [--mesh M]... [--workload W]...`: binds every plan
// against every matching graph, mesh and workload and reports every diagnostic. Exit status
// 0 when all combinations are clean, 1 when any has diagnostics, 2 on usage or I/O errors.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "compiler/compile.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/driver/program_lowering.h"

namespace weft::driver {
namespace {

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
    // Into the program itself: every edit decided, and applied to a copy, as weft-run will.
    if (ok && !diags.has_errors() && in.programs[c.graph] != nullptr) ok = LowerIntoProgram(in, c, *compiled, diags);
    std::vector<diag::Diagnostic> found = collected.Take();
    if (ok && !diags.has_errors()) {
      ++clean;
      if (found.empty()) continue;  // a clean combination shows its warnings
    } else {
      failed = true;
    }
    if (text) std::cerr << "weft check: " << CombinationName(in, c) << ":\n";
    Forward(std::move(found), *renderer, seen);
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

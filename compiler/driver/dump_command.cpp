// `weft dump --phase=parse|bind|plan FILE`: the output of a compiler phase in its canonical
// text form (what golden tests compare): the PlanAst; the BoundPlan for a graph, mesh and
// workload; the ExecutionPlan's dump.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"
#include "compiler/driver/compile_inputs.h"

namespace weft::driver {
namespace {

struct DumpOptions {
  std::string phase = "parse";
  bool no_locations = false;
  CompileOptions compile;  // plan file, and for bind/plan: graphs, mesh, workload
};

// Bind (and lower) every combination of the plan with its graphs, meshes and workloads and
// print each phase output.
int RunLaterPhase(const DumpOptions& options) {
  Inputs in;
  diag::TextRenderer renderer(std::cerr);
  diag::SortingConsumer sorted(renderer);
  diag::Emitter diags(in.sources, sorted, options.compile.max_errors);
  if (int status = LoadInputs(options.compile, in, diags, "dump"); status != 0) {
    sorted.Flush();
    return status;
  }
  bool failed = diags.has_errors();
  for (const Combination& c : in.combinations) {
    const bind::BindOptions bind_options = BindOptionsFor(in, c);
    std::optional<bind::BoundPlan> bound = bind::Bind(*in.plans[c.plan], in.graphs[c.graph], bind_options, diags);
    if (!bound) {
      failed = true;
      continue;
    }
    if (options.phase == "bind") {
      std::cout << bind::DumpBound(*bound, in.graphs[c.graph]);
      continue;
    }
    std::optional<plan::ExecutionPlan> lowered = CompileAst(*in.plans[c.plan], in.graphs[c.graph], bind_options, diags);
    if (!lowered) {
      failed = true;
      continue;
    }
    std::cout << plan::DumpPlan(*lowered);
  }
  sorted.Flush();
  return failed || diags.has_errors() ? 1 : 0;
}

int RunDump(const DumpOptions& options) {
  if (options.phase != "parse") return RunLaterPhase(options);
  source::SourceManager sources;
  std::string error;
  std::optional<source::SourceBuffer> buffer = source::SourceBuffer::FromFile(options.compile.plans.at(0), &error);
  if (!buffer) {
    std::cerr << "weft dump: " << error << "\n";
    return 2;
  }
  const source::SourceBuffer& src = sources.Get(sources.Add(std::move(*buffer)));
  diag::TextRenderer renderer(std::cerr);
  diag::SortingConsumer sorted(renderer);
  diag::Emitter diags(sources, sorted, options.compile.max_errors);
  std::optional<syntax::PlanAst> plan = syntax::ParsePlan(src, diags);
  sorted.Flush();
  if (plan) {
    syntax::DumpOptions dump;
    dump.locations = !options.no_locations;
    std::cout << syntax::Dump(*plan, dump);
  }
  return diags.has_errors() ? 1 : 0;
}

}  // namespace

Command MakeDumpCommand(CLI::App& weft) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* app = weft.add_subcommand("dump", "Print the output of a compiler phase");
  AddCompileOptions(app, options->compile, /*many=*/false);
  app->add_option("--phase", options->phase, "Phase whose output to print: parse (the AST), bind (needs a graph, "
                                              "mesh and workload like `weft compile`), plan")
      ->check(CLI::IsMember({"parse", "bind", "plan"}));
  app->add_flag("--no-locations", options->no_locations, "Omit @line:col from the parse dump");
  return Command{app, [options] { return RunDump(*options); }};
}

}  // namespace weft::driver

// `weft compile PLAN --mesh M [--workload W] [--graph G | --program P] [-o plan.json]`: the
// ExecutionPlan (weft.plan/1 JSON) for one graph, mesh and workload; against a program, with its
// edits of the program (what `weft-run --program P --compiled plan.json` runs). Exit status as
// for `weft check`.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "compiler/source/output_file.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/driver/program_lowering.h"

namespace weft::driver {
namespace {

struct CompileCommandOptions {
  CompileOptions compile;
  std::string output;
  bool dump = false;
};

int RunCompile(const CompileCommandOptions& options) {
  const CompileOptions& o = options.compile;
  diag::TextRenderer renderer(std::cerr);
  diag::SortingConsumer sorted(renderer);
  Inputs in;
  diag::Emitter diags(in.sources, sorted, o.max_errors);
  if (int rc = LoadInputs(o, in, diags, "compile")) {
    sorted.Flush();
    return rc;
  }
  if (in.plans_without_graph > 0) {
    sorted.Flush();
    return 2;
  }
  if (diags.has_errors()) {
    sorted.Flush();
    return 1;
  }
  if (in.combinations.size() != 1) {
    std::cerr << "weft compile: " << in.combinations.size()
              << " graph x mesh x workload combinations; choose one with --graph, --mesh and --workload\n";
    return 2;
  }
  const Combination& c = in.combinations.front();
  std::optional<plan::ExecutionPlan> plan =
      CompileAst(*in.plans[c.plan], in.graphs[c.graph], BindOptionsFor(in, c), diags);
  // A plan compiled against a program carries its edits of that program (weft-run --compiled).
  const bool lowered = plan && in.programs[c.graph] != nullptr ? LowerIntoProgram(in, c, *plan, diags) : true;
  sorted.Flush();
  if (!plan || !lowered) return 1;
  const std::string text = options.dump ? plan::DumpPlan(*plan) : plan::WritePlanJson(*plan);
  if (options.output.empty() || options.output == "-") {
    std::cout << text;
  } else {
    try {
      source::WriteFileOrThrow(options.output, text);
    } catch (const std::runtime_error& e) {
      std::cerr << "weft compile: " << e.what() << "\n";
      return 2;
    }
    std::cerr << "weft compile: wrote " << options.output << " (" << plan->steps.size() << " steps, "
              << plan::PlanContentHash(*plan) << ")\n";
  }
  return 0;
}

}  // namespace

Command MakeCompileCommand(CLI::App& weft) {
  auto options = std::make_shared<CompileCommandOptions>();
  CLI::App* app = weft.add_subcommand("compile", "Compile a plan to an ExecutionPlan (weft.plan/1 JSON)");
  AddCompileOptions(app, options->compile, /*many=*/false);
  app->add_option("-o,--output", options->output, "Output file (default: standard output)");
  app->add_flag("--dump", options->dump, "Print the canonical text dump instead of JSON");
  return Command{app, [options] { return RunCompile(*options); }};
}

}  // namespace weft::driver

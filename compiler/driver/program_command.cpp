// `weft program M.pt2`: what weft reads from a torch.export program -- its class, dtype,
// forward arguments, dynamic sizes with their ranges, operators, the modules whose call
// signature torch could not keep -- and, with --graph-json, the weft.graph/1 view that
// `weft check --program` binds plans against (compiler/program/graph_view.h).
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "compiler/driver/commands.h"
#include "compiler/model/graph_json.h"
#include "compiler/program/archive.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"

namespace weft::driver {
namespace {

struct ProgramOptions {
  std::string file;
  bool graph_json = false;
  bool ops = false;
};

int RunProgram(const ProgramOptions& o) {
  try {
    program::Program p = program::ReadProgramFile(o.file);
    model::ModelGraph g = program::GraphOfProgram(p);
    if (o.graph_json) {
      std::cout << model::WriteGraphJson(g);
      return 0;
    }
    std::cout << o.file << ": " << (p.manifest ? p.manifest->class_name : g.class_name) << ", export schema "
              << p.schema_major << "." << p.schema_minor << ", torch " << p.torch_version << "\n";
    if (p.manifest) std::cout << "  model " << p.manifest->name << ", dtype " << p.manifest->dtype << "\n";
    std::cout << "  " << p.nodes.size() << " nodes, " << p.weights.size() << " parameters and buffers by name, "
              << p.constants.size() << " constants, " << g.modules.size() << " modules, " << g.attention_sites.size()
              << " attention sites\n  forward:";
    for (const std::string& n : p.ForwardArgNames()) std::cout << " " << n;
    std::cout << "\n  dynamic sizes:";
    for (const program::RangeConstraint& r : p.range_constraints) {
      std::cout << " " << r.expr << " in [" << (r.min ? std::to_string(*r.min) : "-inf") << ", "
                << (r.max ? std::to_string(*r.max) : "inf") << "]";
    }
    std::cout << "\n  guards: " << p.guards.size() << "\n";
    if (p.manifest) {
      for (const auto& [path, why] : p.manifest->unpreserved) std::cout << "  no call signature: " << path << " (" << why << ")\n";
      for (const program::ManifestWorkload& w : p.manifest->workloads) std::cout << "  workload " << w.name << "\n";
    }
    if (o.ops) {
      std::map<std::string, int> ops;
      for (const program::Node& n : p.nodes) ++ops[n.target];
      for (const auto& [op, count] : ops) std::cout << "  " << count << "\t" << op << "\n";
    }
    return 0;
  } catch (const program::ProgramError& e) {
    std::cerr << "weft program: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

Command MakeProgramCommand(CLI::App& weft) {
  auto options = std::make_shared<ProgramOptions>();
  CLI::App* app = weft.add_subcommand("program", "Describe a torch.export program (.pt2) as weft reads it");
  app->add_option("program", options->file, "The program (tools/export_program.py writes one)")->required();
  app->add_flag("--graph-json", options->graph_json, "Print the program's weft.graph/1 view instead");
  app->add_flag("--ops", options->ops, "List the operators and how often each occurs");
  return Command{app, [options] { return RunProgram(*options); }};
}

}  // namespace weft::driver

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
#include "compiler/program/expr.h"
#include "compiler/program/program_reader.h"

namespace weft::driver {
namespace {

struct ProgramOptions {
  std::string file;
  bool graph_json = false;
  bool ops = false;
  bool nodes = false;
  std::string scope;  // --nodes: only nodes inside this module ("" = all)
};

std::string SymbolicText(const std::string& expr) {
  try {
    return program::Expr::Parse(expr).Infix();
  } catch (const program::ExprError&) {
    return expr;  // shown as the program has it
  }
}

std::string SizesText(const program::TensorMeta& m) {
  std::string out = "[";
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    if (i) out += ", ";
    out += m.sizes[i].symbolic ? SymbolicText(m.sizes[i].expr) + "=" + std::to_string(m.sizes[i].value)
                              : std::to_string(m.sizes[i].value);
  }
  return out + "]";
}

std::string ArgumentText(const program::Argument& a) {
  using K = program::Argument::Kind;
  auto join = [](const auto& v, auto f) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + f(v[i]);
    return out + "]";
  };
  switch (a.kind) {
    case K::kNone: return "None";
    case K::kTensor: return "%" + a.name;
    case K::kTensors:
    case K::kOptionalTensors: return join(a.names, [](const std::string& n) { return n.empty() ? std::string("None") : "%" + n; });
    case K::kInt: return std::to_string(a.i);
    case K::kInts: return join(a.ints, [](int64_t i) { return std::to_string(i); });
    case K::kFloat: return std::to_string(a.f);
    case K::kBool: return a.b ? "True" : "False";
    case K::kString: return "\"" + a.s + "\"";
    case K::kSymInt:
    case K::kSymInts: {
      std::string t = join(a.sym_ints, [](const program::SymIntRef& r) { return r.is_name ? r.name : std::to_string(r.value); });
      return a.kind == K::kSymInt ? t.substr(1, t.size() - 2) : t;
    }
    default: return program::ArgumentKindName(a.kind);
  }
}

// One line per node: `name = op(args) -> sizes  [module]` (a symbolic size as `expr=hint`).
// Returns how many nodes it printed.
size_t PrintNodes(const program::Program& p, const std::string& scope) {
  size_t printed = 0;
  for (const program::Node& n : p.nodes) {
    std::string module;
    bool inside = scope.empty();
    if (n.stack >= 0) {
      const auto& frames = p.module_stacks[static_cast<size_t>(n.stack)];
      if (!frames.empty()) module = frames.back().path;
      for (const program::ModuleFrame& f : frames) inside = inside || f.path == scope;
    }
    if (!inside) continue;
    std::string args;
    for (const program::NamedArgument& in : n.inputs) args += (args.empty() ? "" : ", ") + ArgumentText(in.arg);
    std::string outs;
    for (const program::Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) {
        const program::TensorMeta* m = p.FindTensor(v);
        outs += (outs.empty() ? "" : ", ") + (m ? SizesText(*m) : std::string("?"));
      }
    }
    std::string target = n.target;
    for (const char* prefix : {"torch.ops.aten.", "torch.ops."}) {
      if (target.rfind(prefix, 0) == 0) {
        target = target.substr(std::string(prefix).size());
        break;
      }
    }
    std::cout << "  " << n.name << " = " << target << "(" << args << ")" << (outs.empty() ? "" : " -> " + outs) << "  ["
              << module << "]\n";
    ++printed;
  }
  return printed;
}

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
      for (const program::FixedSize& f : p.manifest->fixed_sizes) {
        std::cout << "  fixed by the forward: " << f.size << " = " << f.value << " at " << f.at
                  << (f.code.empty() ? "" : ": " + f.code) << "\n";
      }
      for (const program::ManifestWorkload& w : p.manifest->workloads) std::cout << "  workload " << w.name << "\n";
    }
    if (o.ops) {
      std::map<std::string, int> ops;
      for (const program::Node& n : p.nodes) ++ops[n.target];
      for (const auto& [op, count] : ops) std::cout << "  " << count << "\t" << op << "\n";
    }
    if (o.nodes && PrintNodes(p, o.scope) == 0 && !o.scope.empty()) {
      std::cerr << "weft program: " << o.file << ": no node runs inside module `" << o.scope
                << "` (its module paths are diffusers' names, e.g. `transformer_blocks.0.attn`)\n";
      return 2;
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
  app->add_option("--nodes", options->scope,
                  "List the nodes (name = op(arguments) -> sizes [module]), all of them or those inside MODULE")
      ->expected(0, 1)
      ->default_str("")
      ->each([options](const std::string&) { options->nodes = true; });
  app->callback([options, app] { options->nodes = options->nodes || app->count("--nodes") > 0; });
  return Command{app, [options] { return RunProgram(*options); }};
}

}  // namespace weft::driver

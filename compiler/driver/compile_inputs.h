#pragma once

// Shared by `weft check`, `weft compile` and `weft explain`: the mesh / workload / graph
// options, loading plans and graphs, and running the pipeline over every combination.
// Header-only because the driver builds every *_command.cpp and nothing else.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/diag/consumer.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"

namespace weft::driver {

// Options every compiling subcommand takes.
struct CompileOptions {
  std::vector<std::string> plans;
  std::vector<std::string> graphs;    // graph files; default: every graphs/*.graph.json of the plan's class
  std::vector<std::string> programs;  // torch.export programs (.pt2), checked through their graph view
  std::string graphs_dir = "graphs";
  std::vector<std::string> meshes = {"ulysses=2"};
  std::vector<std::string> workloads;  // default: every workload of the graph
  bool ulysses_anything = false;
  bool ring_anything = false;
  std::string rotate = "allgather";
  bool no_fp32_merge = false;
  std::string dtype = "bf16";  // activation dtype the cost model assumes
  std::string attention_kernel = "auto";
  int64_t world_size = 0;
  std::string format = "text";
  uint32_t max_errors = 20;
};

inline void AddCompileOptions(CLI::App* app, CompileOptions& o, bool many) {
  if (many) {
    app->add_option("plans", o.plans, "Plan files (.weft or .json)")->required()->check(CLI::ExistingFile);
  } else {
    app->add_option("plan", o.plans, "Plan file (.weft or .json)")->required()->expected(1)->check(CLI::ExistingFile);
  }
  app->add_option("--graph", o.graphs, "Model graph files (weft.graph/1); default: the graphs in --graphs-dir "
                                        "whose model class matches the plan")
      ->check(CLI::ExistingFile);
  app->add_option("--program", o.programs, "torch.export programs (.pt2, tools/export_program.py) to check against, "
                                          "through their weft.graph/1 view (see `weft program --graph-json`)")
      ->check(CLI::ExistingFile);
  app->add_option("--graphs-dir", o.graphs_dir, "Where to look for graphs (default: graphs)");
  app->add_option("--mesh", o.meshes, "Mesh axes, e.g. ring=2,ulysses=2,tp=1 (repeatable)");
  app->add_option("--workload", o.workloads, "Graph workloads (repeatable; default: all)");
  app->add_flag("--ulysses-anything", o.ulysses_anything, "Allow uneven sequence lengths and head counts");
  app->add_flag("--ring-anything", o.ring_anything, "Allow uneven sequence lengths");
  app->add_option("--rotate", o.rotate, "Ring K/V exchange: allgather or p2p")
      ->check(CLI::IsMember({"allgather", "p2p", "alltoall"}));
  app->add_flag("--no-fp32-merge", o.no_fp32_merge, "Merge ring partial results in the input dtype");
  app->add_option("--world-size", o.world_size, "Check the mesh against this world size");
  app->add_option("--dtype", o.dtype, "Activation dtype of the run, for the bytes in the cost (default bf16, as "
                                      "the graphs' traces)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app->add_option("--attention-kernel", o.attention_kernel, "Local attention kernel of the run: auto, fused, math "
                                                            "(these return the LSE ring needs) or sdpa (no LSE)")
      ->check(CLI::IsMember({"auto", "fused", "math", "sdpa"}));
  app->add_option("--max-errors", o.max_errors, "Stop after this many errors per combination (0: no limit)");
}

// "ring=2,ulysses=4,tp=1" -> a mesh with the flags of `o`. Axis order in the world: unknown
// axes first (as given), then tp, ring, ulysses (tp outermost, ulysses innermost: contiguous ranks), the order runtime/dist lays over ranks by default.
inline std::optional<plan::Mesh> ParseMesh(const std::string& spec, const CompileOptions& o, std::string& error) {
  plan::Mesh mesh;
  std::vector<plan::MeshAxis> axes;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (item.empty() || eq == std::string::npos || eq == 0) {
      error = "mesh `" + spec + "`: expected axis=size items separated by commas";
      return std::nullopt;
    }
    plan::MeshAxis a;
    a.name = item.substr(0, eq);
    try {
      size_t used = 0;
      a.size = std::stoll(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (...) {
      error = "mesh `" + spec + "`: size of `" + a.name + "` is not an integer";
      return std::nullopt;
    }
    for (const plan::MeshAxis& b : axes) {
      if (b.name == a.name) {
        error = "mesh `" + spec + "`: axis `" + a.name + "` appears twice";
        return std::nullopt;
      }
    }
    if (a.name == "cp") {
      error = "mesh `" + spec + "`: `cp` is the ring x ulysses group, not an axis";
      return std::nullopt;
    }
    axes.push_back(std::move(a));
  }
  auto rank = [](const std::string& name) { return name == "tp" ? 1 : name == "ring" ? 2 : name == "ulysses" ? 3 : 0; };
  std::stable_sort(axes.begin(), axes.end(),
                   [&](const plan::MeshAxis& a, const plan::MeshAxis& b) { return rank(a.name) < rank(b.name); });
  mesh.axes = std::move(axes);
  mesh.world_size = o.world_size;
  mesh.ulysses_anything = o.ulysses_anything;
  mesh.ring_anything = o.ring_anything;
  mesh.convert_to_fp32 = !o.no_fp32_merge;
  mesh.rotate_method = *plan::ParseRotateMethod(o.rotate);
  return mesh;
}

// One plan x graph x mesh x workload to compile.
struct Combination {
  size_t plan = 0;
  size_t graph = 0;
  size_t mesh = 0;
  std::string workload;
};

// Everything loaded for a run: parsed plans, graphs, meshes, and the combinations to run.
struct Inputs {
  source::SourceManager sources;
  std::vector<std::string> plan_files;
  std::vector<std::optional<syntax::PlanAst>> plans;
  std::vector<std::string> graph_files;
  std::vector<model::ModelGraph> graphs;
  std::vector<plan::Mesh> meshes;
  std::vector<Combination> combinations;
  size_t plans_without_graph = 0;  // reported on stderr; the run ends with status 2
  int64_t activation_bytes = 2;    // from --dtype
  std::string attention_kernel = "auto";
};

inline std::vector<std::string> DefaultGraphs(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().string();
    if (name.size() > 11 && name.compare(name.size() - 11, 11, ".graph.json") == 0) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Loads plans (parse diagnostics go to `diags`), graphs and meshes, and lists combinations.
// Returns 0, or 2 after printing a usage / I/O error to stderr.
inline int LoadInputs(const CompileOptions& o, Inputs& in, diag::Emitter& diags, const char* command) {
  in.activation_bytes = o.dtype == "fp32" ? 4 : 2;
  in.attention_kernel = o.attention_kernel;
  for (const std::string& spec : o.meshes) {
    std::string error;
    auto mesh = ParseMesh(spec, o, error);
    if (!mesh) {
      std::cerr << "weft " << command << ": " << error << "\n";
      return 2;
    }
    in.meshes.push_back(std::move(*mesh));
  }
  for (const std::string& file : o.plans) {
    std::string error;
    auto buffer = source::SourceBuffer::FromFile(file, &error);
    if (!buffer) {
      std::cerr << "weft " << command << ": " << error << "\n";
      return 2;
    }
    const source::SourceBuffer& src = in.sources.Get(in.sources.Add(std::move(*buffer)));
    in.plan_files.push_back(file);
    in.plans.push_back(syntax::ParsePlan(src, diags));
  }
  const bool explicit_models = !o.graphs.empty() || !o.programs.empty();
  const std::vector<std::string> graph_files = explicit_models ? o.graphs : DefaultGraphs(o.graphs_dir);
  for (const std::string& file : o.programs) {
    try {
      in.graphs.push_back(program::GraphOfProgram(program::ReadProgramFile(file)));
      in.graph_files.push_back(file);
    } catch (const program::ProgramError& e) {
      std::cerr << "weft " << command << ": " << e.what() << "\n";
      return 2;
    }
  }
  for (const std::string& file : graph_files) {
    model::GraphReadResult r = model::ReadGraphFile(file);
    if (!r.graph) {
      for (const model::GraphError& e : r.errors) std::cerr << model::FormatGraphError(file, e) << "\n";
      std::cerr << "weft " << command << ": cannot use graph `" << file << "`\n";
      return 2;
    }
    in.graph_files.push_back(file);
    in.graphs.push_back(std::move(*r.graph));
  }
  for (size_t p = 0; p < in.plans.size(); ++p) {
    if (!in.plans[p] || in.plans[p]->has_error) continue;
    bool any_graph = false;
    for (size_t g = 0; g < in.graphs.size(); ++g) {
      if (in.graphs[g].class_name != in.plans[p]->model.text) continue;
      any_graph = true;
      std::vector<std::string> workloads = o.workloads;
      if (workloads.empty()) {
        for (const model::Workload& w : in.graphs[g].workloads) workloads.push_back(w.name);
      }
      for (const std::string& w : workloads) {
        if (in.graphs[g].FindWorkload(w) == nullptr) {
          std::string names;
          for (const model::Workload& x : in.graphs[g].workloads) names += (names.empty() ? "`" : ", `") + x.name + "`";
          std::cerr << "weft " << command << ": graph `" << in.graph_files[g] << "` has no workload `" << w
                    << "`; it has " << names << "\n";
          return 2;
        }
        for (size_t m = 0; m < in.meshes.size(); ++m) in.combinations.push_back({p, g, m, w});
      }
    }
    if (!any_graph) {
      // Other plans are still checked; the caller ends with status 2.
      std::cerr << "weft " << command << ": no graph of class `" << in.plans[p]->model.text << "` for plan `"
                << in.plan_files[p] << "`" << (explicit_models ? std::string() : " in `" + o.graphs_dir + "`")
                << "; pass one with --graph\n";
      ++in.plans_without_graph;
    }
  }
  return 0;
}

inline std::string CombinationName(const Inputs& in, const Combination& c) {
  return in.plan_files[c.plan] + " x " + in.graphs[c.graph].name + " x mesh " + in.meshes[c.mesh].ToString() +
         " x workload " + c.workload;
}

inline bind::BindOptions BindOptionsFor(const Inputs& in, const Combination& c) {
  bind::BindOptions b;
  b.mesh = in.meshes[c.mesh];
  b.world_size = in.meshes[c.mesh].world_size;
  b.workload = c.workload;
  b.plan_file = in.plan_files[c.plan];
  b.activation_bytes = in.activation_bytes;
  b.attention_kernel = in.attention_kernel;
  return b;
}

// The renderer for --format (diagnostics go to stderr as text, to stdout as JSON/SARIF).
inline std::unique_ptr<diag::Consumer> MakeRenderer(const std::string& format) {
  if (format == "json") return std::make_unique<diag::JsonRenderer>(std::cout);
  if (format == "sarif") return std::make_unique<diag::SarifRenderer>(std::cout, std::string(weft::VersionLine()));
  return std::make_unique<diag::TextRenderer>(std::cerr);
}

}  // namespace weft::driver

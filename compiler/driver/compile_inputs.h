#pragma once

// Shared by `weft check`, `weft compile` and `weft explain`: the mesh / workload / graph
// options, loading plans and graphs, and running the pipeline over every combination.
// Header-only because the driver builds every *_command.cpp and nothing else.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
#include "compiler/diag/emitter.h"
#include "compiler/plan/mesh_spec.h"
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
  std::string shard_weights;  // "", "cp", "cfg" or "cp,cfg"
  std::string dtype;  // activation dtype the cost model assumes ("": a program's own, else bf16)
  std::string attention_kernel = "auto";
  int64_t world_size = 0;
  int64_t branches = 0;  // guidance branches as calls of their own (a plan's `calls`); 0 = one per cfg group
  std::string format = "text";
  uint32_t max_errors = 20;
};

// Files are not checked here: LoadInputs reports a missing or unreadable one as a diagnostic,
// so that --format=json|sarif carries it.
inline void AddCompileOptions(CLI::App* app, CompileOptions& o, bool many) {
  if (many) {
    app->add_option("plans", o.plans, "Plan files (.weft or .json)")->required();
  } else {
    app->add_option("plan", o.plans, "Plan file (.weft or .json)")->required()->expected(1);
  }
  app->add_option("--graph", o.graphs, "Model graph files (weft.graph/1); default: the graphs in --graphs-dir "
                                        "whose model class matches the plan");
  app->add_option("--program", o.programs, "torch.export programs (.pt2, tools/export_program.py) to check against, "
                                          "through their weft.graph/1 view (see `weft program --graph-json`)");
  app->add_option("--graphs-dir", o.graphs_dir, "Where to look for graphs (default: graphs)");
  app->add_option("--mesh", o.meshes, "Mesh axes, e.g. ring=2,ulysses=2,tp=1 (repeatable)");
  app->add_option("--workload", o.workloads, "Graph workloads (repeatable; default: all)");
  app->add_flag("--ulysses-anything", o.ulysses_anything, "Allow uneven sequence lengths and head counts");
  app->add_flag("--ring-anything", o.ring_anything, "Allow uneven sequence lengths");
  app->add_option("--rotate", o.rotate, "Ring K/V exchange: allgather or p2p")
      ->check(CLI::IsMember({"allgather", "p2p", "alltoall"}));
  app->add_flag("--no-fp32-merge", o.no_fp32_merge, "Merge ring partial results in the input dtype");
  app->add_option("--shard-weights", o.shard_weights, "Slice each block's parameters over these ranks and gather "
                                                      "them just before the block runs: cp, cfg or cp,cfg")
      ->check(CLI::IsMember({"cp", "cfg", "cp,cfg", "cfg,cp"}));
  app->add_option("--world-size", o.world_size, "Check the mesh against this world size");
  app->add_option("--branches", o.branches, "Guidance branches the job runs as forward calls of their own, for a "
                                            "plan whose guidance_parallel says `calls` (default: one per cfg group)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app->add_option("--dtype", o.dtype, "Activation dtype of the run, for the bytes in the cost (default: a "
                                      "--program's own dtype; bf16 for a graph, as the graphs' traces)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app->add_option("--attention-kernel", o.attention_kernel, "Local attention kernel of the run: auto, fused, math "
                                                            "(these return the LSE ring needs) or sdpa (no LSE)")
      ->check(CLI::IsMember({"auto", "fused", "math", "sdpa"}));
  app->add_option("--max-errors", o.max_errors, "Stop after this many errors per combination (0: no limit)");
}

// "ring=2,ulysses=4,tp=1" -> a mesh with the flags of `o`, through the one mesh parser weft
// and weft-run share (compiler/plan/mesh_spec.h: closed vocabulary ring, ulysses, tp, order).
// The mesh lists the axes given, in world order (default tp, ring, ulysses: tp outermost,
// ulysses innermost with contiguous ranks, the order runtime/dist lays over ranks by default).
inline std::optional<plan::Mesh> ParseMesh(const std::string& spec, const CompileOptions& o, std::string& error) {
  std::optional<plan::MeshSpec> parsed = plan::ParseMeshSpec(spec, &error);
  if (!parsed) return std::nullopt;
  plan::Mesh mesh;
  mesh.axes = parsed->Axes(/*all_axes=*/false);
  mesh.world_size = o.world_size;
  mesh.ulysses_anything = o.ulysses_anything;
  mesh.ring_anything = o.ring_anything;
  mesh.convert_to_fp32 = !o.no_fp32_merge;
  mesh.rotate_method = *plan::ParseRotateMethod(o.rotate);
  mesh.weight_axes = plan::ParseWeightAxes(o.shard_weights);
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
  // Parallel to `graphs`: the program a graph is the view of (--program), else null. A plan
  // checked against a program is also lowered into it (compiler/program/lowering.h).
  std::vector<std::shared_ptr<const program::Program>> programs;
  std::vector<plan::Mesh> meshes;
  std::vector<Combination> combinations;
  size_t plans_without_graph = 0;  // plans with no graph or workload to check against (diagnosed); status 2
  int64_t activation_bytes = 2;    // from --dtype
  bool dtype_given = false;        // --dtype was given: it overrides a program's own
  std::string attention_kernel = "auto";
  int64_t branches = 0;            // --branches
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

// ---- Input diagnostics ------------------------------------------------------------------------
// Problems with the inputs themselves (files, graphs, programs, meshes, workloads) are
// diagnostics like any other, so `--format=json|sarif` carries them too. They have no plan
// location (a graph error points into the graph file instead), except NoGraphForPlan, which
// points at the plan's `for` clause.
WEFT_DIAGNOSTIC(InputNotReadable, Error, "cannot read {0} `{1}`: {2}", std::string, std::string, std::string);
WEFT_DIAGNOSTIC(GraphInvalid, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(ProgramInvalid, Error, "{0}", std::string);
// A plan that compiles against a program's graph view but cannot be made edits of the program
// (compiler/program/lowering.h: a full length no shard stands for, a mask laid out otherwise
// than its keys, context-parallel attention over whole keys ...).
WEFT_DIAGNOSTIC(PlanDoesNotLowerToProgram, Error, "{0}", std::string);
// The checks of lowering a plan into a program and of its dataflow (compiler/program/
// plan_edit_error.h), one kind each, located at the plan rule the failing edit comes from.
WEFT_DIAGNOSTIC(ProgramLacksPlanValue, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(FullLengthWithoutShard, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(ContextParallelOverWholeKeys, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(MaskNotLaidOutWithKeys, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(TpShardedDimReduced, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(ColwiseOutputEscapes, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(RowwiseInputNotSharded, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(TpAttentionHeadsMismatch, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(TpUnsupportedOperator, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(TpShardReachesOutput, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(SplitDimReduced, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(SplitMixedWithWhole, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(LocalAttentionOverSplitKeys, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(SplitThroughUnsupportedOperator, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(SplitNeverGathered, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(GatherOfUnsplitValue, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(GatherOnOtherDim, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(SplitOfSplitValue, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(SplitOfJointSequence, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(AtProgramNode, Note, "at node `{0}` of module `{1}` in the program", std::string, std::string);
WEFT_DIAGNOSTIC(MeshSpecInvalid, Error, "{0}", std::string);
WEFT_DIAGNOSTIC(UnknownWorkload, Error, "graph `{0}` has no workload `{1}`; it has {2}", std::string, std::string,
                std::string);
WEFT_DIAGNOSTIC(NoWorkloads, Error,
                "graph `{0}` has no workloads (`\"workloads\": []`), so there is nothing to check plan `{1}` "
                "against; export the graph with at least one workload",
                std::string, std::string);
WEFT_DIAGNOSTIC(NoGraphForPlan, Error, "plan `{0}` is written for `{1}`, but {2}", std::string, std::string,
                std::string);

// Why `path` cannot be read as an input file, or "" when it can be opened.
inline std::string UnreadableReason(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return "no such file";
  if (std::filesystem::is_directory(status)) return "it is a directory";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "it cannot be opened (permission denied?)";
  return "";
}

// The location of a graph reader error: the graph file, its line and column, the source line
// (left out for a line too long to show, e.g. a minified graph; the message then says where).
inline diag::Location GraphErrorLocation(const std::string& file, const model::GraphError& e, std::string& message) {
  diag::Location loc;
  loc.file = file;
  loc.json_pointer = e.pointer.empty() ? "/" : e.pointer;
  if (e.line <= 0) {
    message += " (at " + loc.json_pointer + ")";
    return loc;
  }
  std::ifstream in(file, std::ios::binary);
  std::string line;
  for (int n = 0; n < e.line && std::getline(in, line); ++n) {
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > 240) {
    message += " (at " + loc.json_pointer + ", line " + std::to_string(e.line) + ", column " + std::to_string(e.col) + ")";
    return loc;
  }
  loc.line = static_cast<uint32_t>(e.line);
  loc.col = static_cast<uint32_t>(e.col);
  loc.line_text = line;
  return loc;
}

// Loads plans (parse diagnostics go to `diags`), graphs and meshes, and lists combinations.
// Every problem with an input is a diagnostic on `diags` (see above); returns 0, or 2 when
// any input could not be used (then nothing is combined). `command` is kept for callers.
inline int LoadInputs(const CompileOptions& o, Inputs& in, diag::Emitter& diags, const char* command) {
  (void)command;
  bool unusable = false;
  in.activation_bytes = o.dtype == "fp32" ? 4 : 2;
  in.dtype_given = !o.dtype.empty();
  in.attention_kernel = o.attention_kernel;
  in.branches = o.branches;
  if (o.world_size < 0 || o.world_size > plan::kMaxMeshWorldSize) {
    diags.EmitAt(diag::Location{}, MeshSpecInvalid,
                 "--world-size is " + std::to_string(o.world_size) +
                     (o.world_size < 0 ? "; a world has at least 1 rank"
                                       : ", more than the " + std::to_string(plan::kMaxMeshWorldSize) +
                                             " ranks a mesh may have"));
    unusable = true;
  }
  for (const std::string& spec : o.meshes) {
    std::string error;
    auto mesh = ParseMesh(spec, o, error);
    if (!mesh) {
      diags.EmitAt(diag::Location{}, MeshSpecInvalid, error);
      unusable = true;
      continue;
    }
    in.meshes.push_back(std::move(*mesh));
  }
  for (const std::string& file : o.plans) {
    if (std::string reason = UnreadableReason(file); !reason.empty()) {
      diags.EmitAt(diag::Location{}, InputNotReadable, "plan", file, reason);
      unusable = true;
      continue;
    }
    std::string error;
    auto buffer = source::SourceBuffer::FromFile(file, &error);
    if (!buffer) {
      diags.EmitAt(diag::Location{}, InputNotReadable, "plan", file, error);
      unusable = true;
      continue;
    }
    const source::SourceBuffer& src = in.sources.Get(in.sources.Add(std::move(*buffer)));
    in.plan_files.push_back(file);
    in.plans.push_back(syntax::ParsePlan(src, diags));
  }
  const bool explicit_models = !o.graphs.empty() || !o.programs.empty();
  const std::vector<std::string> graph_files = explicit_models ? o.graphs : DefaultGraphs(o.graphs_dir);
  for (const std::string& file : o.programs) {
    if (std::string reason = UnreadableReason(file); !reason.empty()) {
      diags.EmitAt(diag::Location{}, InputNotReadable, "program", file, reason);
      unusable = true;
      continue;
    }
    try {
      auto read = std::make_shared<const program::Program>(program::ReadProgramFile(file));
      in.graphs.push_back(program::GraphOfProgram(*read));
      in.graph_files.push_back(file);
      in.programs.push_back(std::move(read));
    } catch (const program::ProgramError& e) {
      diags.EmitAt(diag::Location{}, ProgramInvalid, e.what());  // the message starts with the file
      unusable = true;
    }
  }
  for (const std::string& file : graph_files) {
    if (std::string reason = UnreadableReason(file); !reason.empty()) {
      diags.EmitAt(diag::Location{}, InputNotReadable, "graph", file, reason);
      unusable = true;
      continue;
    }
    model::GraphReadResult r = model::ReadGraphFile(file);
    if (!r.graph) {
      for (const model::GraphError& e : r.errors) {
        std::string message = e.message;
        diag::Location loc = GraphErrorLocation(file, e, message);
        diags.EmitAt(std::move(loc), GraphInvalid, message);
      }
      unusable = true;
      continue;
    }
    in.graph_files.push_back(file);
    in.graphs.push_back(std::move(*r.graph));
    in.programs.push_back(nullptr);
  }
  if (unusable) return 2;
  for (size_t p = 0; p < in.plans.size(); ++p) {
    if (!in.plans[p] || in.plans[p]->has_error) continue;
    const syntax::PlanAst& plan = *in.plans[p];
    bool any_graph = false;
    for (size_t g = 0; g < in.graphs.size(); ++g) {
      if (in.graphs[g].class_name != plan.model.text) continue;
      any_graph = true;
      std::vector<std::string> workloads = o.workloads;
      if (workloads.empty()) {
        for (const model::Workload& w : in.graphs[g].workloads) workloads.push_back(w.name);
      }
      if (workloads.empty()) {
        // Nothing to bind against: a clean exit would claim a check that never ran.
        diags.EmitAt(diag::Location{}, NoWorkloads, in.graph_files[g], in.plan_files[p]);
        ++in.plans_without_graph;
        continue;
      }
      for (const std::string& w : workloads) {
        if (in.graphs[g].FindWorkload(w) == nullptr) {
          std::string names;
          for (const model::Workload& x : in.graphs[g].workloads) names += (names.empty() ? "`" : ", `") + x.name + "`";
          if (names.empty()) names = "none";
          diags.EmitAt(diag::Location{}, UnknownWorkload, in.graph_files[g], w, names);
          unusable = true;
          continue;
        }
        for (size_t m = 0; m < in.meshes.size(); ++m) in.combinations.push_back({p, g, m, w});
      }
    }
    if (!any_graph) {
      // Other plans are still checked; the caller ends with status 2.
      std::string why;
      if (explicit_models) {
        std::string given;
        const size_t shown = std::min<size_t>(in.graphs.size(), 3);
        for (size_t g = 0; g < shown; ++g) {
          given += (g ? ", `" : "`") + in.graph_files[g] + "` is a `" + in.graphs[g].class_name + "`";
        }
        if (in.graphs.size() > shown) given += " and " + std::to_string(in.graphs.size() - shown) + " more";
        why = "no graph given has that class (" + given + "); pass a graph of class `" + plan.model.text +
              "` with --graph, or a program with --program";
      } else {
        why = "no graph in `" + o.graphs_dir + "` has that class; pass one with --graph, or another directory "
              "with --graphs-dir";
      }
      diags.Emit(plan.model.range, NoGraphForPlan, in.plan_files[p], plan.model.text, why);
      ++in.plans_without_graph;
    }
  }
  if (unusable) {
    in.combinations.clear();
    return 2;
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
  const program::Program* program = c.graph < in.programs.size() ? in.programs[c.graph].get() : nullptr;
  // A program's activations are its own dtype (an fp32 export runs in fp32), unless --dtype says.
  b.activation_bytes = program != nullptr && !in.dtype_given ? program->ActivationBytes() : in.activation_bytes;
  b.attention_kernel = in.attention_kernel;
  b.checked_by_dataflow = program != nullptr;
  b.branches = in.branches;
  return b;
}

// The renderer for --format (diagnostics go to stderr as text, to stdout as JSON/SARIF).
inline std::unique_ptr<diag::Consumer> MakeRenderer(const std::string& format) {
  if (format == "json") return std::make_unique<diag::JsonRenderer>(std::cout);
  if (format == "sarif") return std::make_unique<diag::SarifRenderer>(std::cout, std::string(weft::VersionLine()));
  return std::make_unique<diag::TextRenderer>(std::cerr);
}

}  // namespace weft::driver

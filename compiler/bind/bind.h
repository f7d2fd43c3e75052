#pragma once

// The bind phase: PlanAst + ModelGraph + mesh + workload -> BoundPlan, running every check of
// design.md 5.2 (each its own diagnostic kind, messages with every number involved).

#include <optional>
#include <string>
#include <vector>

#include "compiler/bind/bound_plan.h"
#include "compiler/diag/emitter.h"
#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"
#include "compiler/syntax/plan_ast.h"

namespace weft::bind {

struct BindOptions {
  plan::Mesh mesh;            // axes and flags (its world_size is ignored: set from the axes)
  int64_t world_size = 0;     // when > 0, the product of the mesh axes must equal it
  std::string workload;       // a workload of the graph
  std::string plan_file;      // recorded in origins (as the user named the plan file)
  // Bytes per activation element the cost model assumes: 2 for the graphs' bf16 traces, 4
  // when the job runs in fp32 (weft-run --dtype fp32, weft compile --dtype fp32).
  int64_t activation_bytes = 2;
  // The local attention kernel the job will use: "auto", "fused" or "math" return the
  // log-sum-exp that ring attention merges blocks with; "sdpa" (at::scaled_dot_product_attention,
  // diffusers' `native`) does not, so a ring axis is an error with it.
  std::string attention_kernel = "auto";
  // The graph is a program's view, whose dataflow check (compiler/program/shard_flow.cpp) finds
  // the dim each gathered value is split on: the binder's coarser length test of gathers (a graph
  // without dataflow has nothing better) is left to it, and so are the test that the last split
  // runs before a gather (by registration order, which a program's calls need not follow) and the
  // test that a rowwise layer of each colwise width follows (by widths: grouped-query keys and
  // values are narrower than the output projection that reduces them).
  bool checked_by_dataflow = false;
  // Guidance branches the job runs as forward calls of their own (a plan's guidance_parallel
  // `calls`): weft-run's number of --inputs files, weft's --branches; 0 = one per cfg rank group.
  int64_t branches = 0;
};

// Binds `ast` (which must have no parse errors) against `graph`. Diagnoses every problem it
// finds (up to the emitter's limit). Returns the BoundPlan when no error was reported,
// std::nullopt otherwise. The caller checks that the workload exists in the graph.
std::optional<BoundPlan> Bind(const syntax::PlanAst& ast, const model::ModelGraph& graph,
                              const BindOptions& options, diag::Emitter& diags);

// The canonical text of a BoundPlan (`weft dump --phase=bind`): one line per split, gather,
// attention site and tensor-parallel module, with sizes and origins.
std::string DumpBound(const BoundPlan& bound, const model::ModelGraph& graph);

// Expands a plan pattern (`*` = one path segment, `{a,b}` alternation whose items may contain
// dots, `{m..n}` integer ranges, "" = the root) into the modules of `graph` it matches, in
// module order, without duplicates. False with `error` set when the pattern is malformed.
bool MatchPattern(const model::ModelGraph& graph, const std::string& pattern,
                  std::vector<model::ModuleId>& out, std::string& error);

}  // namespace weft::bind

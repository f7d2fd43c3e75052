#pragma once

// `--mesh auto`: every mesh of N ranks a plan admits on a program (or a graph), each compiled and lowered as
// `weft check` would (refusals kept with their first diagnostic), predicted on a machine
// (predict.h), and ranked by predicted time. Meshes over a memory limit are kept but marked, so
// that a caller can say what each needs when none fits.
//
// The candidates are every (cfg, tp, ring, ulysses) whose product is N, each ring one with both
// K/V rotations (allgather, p2p), each with its weights whole and, where an axis has more than one
// rank, sliced over cp, cfg and both. On one host the mesh order is the default one (cfg, tp, ring,
// ulysses: it changes nothing there); when the ranks span hosts (predict.ranks_per_host below
// nproc), every order of the mesh's axes of more than one rank is weighed too, since the order
// decides which groups stay within a host (shared memory, NVLink) and which cross hosts.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/cost/machine_profile.h"
#include "compiler/cost/predict.h"
#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"
#include "compiler/plan/mesh_spec.h"
#include "compiler/program/program.h"
#include "compiler/source/source_buffer.h"
#include "compiler/syntax/plan_ast.h"

namespace weft::cost {

struct Candidate {
  plan::Mesh mesh;
  std::string text;                 // "ring=2,ulysses=2 rotate=p2p shard-weights=cp"
  std::string mesh_arg;             // "ring=2,ulysses=2" as --mesh takes it
  std::string refusal;              // why the plan does not compile or lower there ("" = it does)
  std::optional<Prediction> prediction;
  bool over_memory = false;         // predicted peak above the limit
  std::optional<plan::ExecutionPlan> plan;
};

struct SearchRequest {
  const syntax::PlanAst* ast = nullptr;
  const source::SourceManager* sources = nullptr;  // the plan's (diagnostic text)
  std::string plan_file;
  const model::ModelGraph* graph = nullptr;  // the program's weft.graph/1 view, or the graph itself
  const program::Program* program = nullptr;  // nullptr: estimated from the graph (graph_predict.h)
  std::string program_file;
  std::string workload;       // "" = the graph's first
  int nproc = 1;
  plan::Mesh flags;           // ulysses_anything, ring_anything, convert_to_fp32 taken from here
  bool weight_sharding = true;  // also weigh sliced weights
  int64_t activation_bytes = 4;
  int64_t memory_per_rank = 0;  // 0: no limit
  MachineProfile machine;
  PredictOptions predict;
};

// Every candidate, the predicted ones ranked fastest first (those over the memory limit after the
// ones within it), then the refused ones in enumeration order. Keeps each candidate's plan only for
// the top `keep_plans`.
std::vector<Candidate> SearchMeshes(const SearchRequest& request, size_t keep_plans = 1);

// The meshes of n ranks: every (cfg, tp, ring, ulysses) with cfg * tp * ring * ulysses = n.
std::vector<plan::MeshSpec> MeshesOf(int64_t n);

}  // namespace weft::cost

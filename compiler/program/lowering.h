#pragma once

// A plan on a program: the ExecutionPlan's module steps (compiled against the program's
// weft.graph/1 view) become edits of the program's named values and nodes
// (plan::ProgramEdits), which the executor applies when it loads the program (edits.h).
//
//   split of a module argument   the value that call receives, split for the uses inside the module
//                                (the root's: every use); an argument of a call the export could not
//                                preserve is refused
//   split of a module output     the value it returns, split right after it is produced
//   gather of a module output    the value it returns, gathered right after it is produced
//   context-parallel attention   every scaled_dot_product_attention node the site owns
//   tensor-parallel steps        all-reduces, local head counts, sharded norm statistics
//                                (shard_flow.h)
//
// Then local_sizes.h makes the full-length sizes of shards local and shard_flow.h proves the
// splits reach their gathers through operations that keep them. Every edit keeps its step's
// origin (the plan rule); every refusal is a PlanEditError (plan_edit_error.h).

#include <set>
#include <string>

#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft::program {

// The edits of `plan` on `program` (read from `file`). Throws PlanEditError naming the check, the
// module, node and rule when the plan cannot run on the program as it is.
plan::ProgramEdits LowerToProgram(const plan::ExecutionPlan& plan, const Program& program, const std::string& file);

// The plan's cost as the edits run it on `program` (the plan compiled against `graph`, its
// weft.graph/1 view): an attention step the module-level view derived as context-parallel but
// whose keys no split reaches runs local on the program (local_sizes.h drops its edit), so its
// step says local and its collectives leave the prediction; a context-parallel attention with a
// mask moves the mask with its keys (one byte per key and batch row: an all-gather on the
// ulysses axis, and on the ring axis an all-gather, or bytes on each p2p exchange), which the
// graph view cannot see, so they join it.
void MatchCostToEdits(plan::ExecutionPlan& plan, const Program& program, const model::ModelGraph& graph);

// Weights sliced over ranks (plan.weights): throws ProgramError when a node outside a block reads
// one of the block's parameters (tied weights: gathered by one block, freed under the other),
// naming the parameter, the block, the node and its module.
void CheckWeightsUntied(const plan::ExecutionPlan& plan, const Program& program);

// All of the above: plan.program = LowerToProgram(plan, program, file), CheckWeightsUntied, then
// MatchCostToEdits, so that no caller keeps edits with the graph view's cost. Throws as
// LowerToProgram.
void LowerToProgramWithCost(plan::ExecutionPlan& plan, const Program& program, const std::string& file,
                            const model::ModelGraph& graph);

// The values a module call receives for each forward argument, in leaf order (a tuple argument
// has one per element; "" for a leaf that is None, a constant or a symbolic size), and the
// values it returns. The root's are the program's user inputs and outputs. Empty when `module`
// has no preserved call.
struct CallValues {
  std::vector<std::pair<std::string, std::vector<std::string>>> arguments;
  std::set<std::string> lists;  // the arguments passed as a list, tuple or dict: a plan names their leaves `arg[i]`
  std::vector<std::string> outputs;
};
std::vector<CallValues> ModuleCallValues(const Program& program, const std::string& module);

}  // namespace weft::program

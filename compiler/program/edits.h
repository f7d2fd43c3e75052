#pragma once

// Applying a plan's edits (plan::ProgramEdits, lowering.h) to a program, mechanically: the
// compiler decided every edit; this inserts weft's own nodes into the graph and points the uses
// at their results, so the interpreter runs the plan like any other node.
//
//   split    `weft.split(self, edit)` before the first use the split covers: a module argument's
//            in that module's scope, or right after the producer of a module output (every later
//            use); the covered uses read the split value
//   gather   `weft.gather(self, edit)` right after the producer; every later use, and the
//            program's outputs, read the gathered value
//   attention  the node's target becomes `weft.attention` (same inputs, plus its edit)
//   all-reduce the rowwise Linear loses its bias; `weft.all_reduce(self, edit, bias)` right after
//            it sums the partial outputs over the tp group and adds the bias once; every later
//            use reads the sum
//   norm stats the rms_norm's target becomes `weft.rms_norm` (same inputs, plus its edit): its
//            mean of squares is taken over the tp group
//   argument   a size argument of the node becomes a constant, or a symbolic size of a shard
//   halo     `weft.halo(self, edit)` right before the convolution, on the input it reads: the
//            neighbouring ranks' rows added on either side of the split dim; the convolution
//            pads none along it
//
// New values are named `<value>@<edit index>`. `edit` is an integer input: the index of the
// edit in ProgramEdits::edits, which the runtime reads its parameters from.

#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft::program {

inline constexpr const char* kSplitTarget = "weft.split";
inline constexpr const char* kGatherTarget = "weft.gather";
inline constexpr const char* kAttentionTarget = "weft.attention";
inline constexpr const char* kAllReduceTarget = "weft.all_reduce";
inline constexpr const char* kNormStatsTarget = "weft.rms_norm";
inline constexpr const char* kHaloTarget = "weft.halo";

// Throws ProgramError when `edits` were compiled against another program (its hash) or name a
// value or node the program does not have.
void ApplyEdits(Program& program, const plan::ProgramEdits& edits);

}  // namespace weft::program

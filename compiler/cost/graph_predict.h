#pragma once

// An estimate of one forward on one rank from a model graph (weft.graph/1) instead of a program:
// for CI and for models not exported yet (`weft explain PLAN --graph G --machine M`, and
// `--mesh auto` on a graph). A graph records each module call's argument and output shapes at a
// workload and each attention call's (B, S, H, D), not the operators between them, so the estimate
// prices
//   every Linear call          2 x tokens x in x out flops (roofline with its operands' bytes)
//   every attention call       4 x B x H x Sq x Skv x D flops (the site's kernel rate at Skv)
//   every other leaf module    the bytes of its tensor arguments and outputs (norms, activations)
// divided by the degrees the plan shards them over: cfg when the plan splits the guidance batch
// at the root; cp inside the blocks whose attention runs context-parallel (only inside the
// attention module itself when the plan splits around each attention call only); tp for a Linear
// with a colwise or rowwise rule and for the heads of an attention whose projections are sharded.
// The plan's collectives, the overlap and the memory per rank are priced as for a program
// (predict_parts.h); activations are the compiled plan's largest module call per rank (a lower
// bound: a program walks every value's liveness). What it cannot see -- operators outside any
// module (residual adds, modulation), the interpreter's per-operator overhead -- is left out and
// said so in the notes; on a program `weft explain --machine` prices every node.

#include "compiler/cost/predict.h"
#include "compiler/model/graph.h"

namespace weft::cost {

// Throws std::runtime_error when the workload is not in the graph or the profile cannot price a
// collective the plan runs.
Prediction PredictFromGraph(const model::ModelGraph& graph, const plan::ExecutionPlan* plan, const MachineProfile& machine,
                            const PredictOptions& options);

}  // namespace weft::cost

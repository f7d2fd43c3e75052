#pragma once

// Shardings followed through a program's dataflow: the proof, before anything runs, that a plan
// computes what one device does -- and, for tensor parallelism, the edits that make it run.
//
// A sharding is a dim of a tensor that each rank holds a part of, laid out as blocks (a packed
// layer's [Q | K | V], a joint sequence's [text | image]): each rank holds its part of every
// block, blocks in order. It starts where the plan shards -- a tp-sharded parameter, a
// context-parallel split -- and is followed node by node: a head reshape moves it onto the
// heads, attention and elementwise ops keep it, a `cat` along it packs blocks, a slice or split
// at block bounds takes some of them. What may end it depends on the axis:
//
// Tensor parallelism (AddTensorParallelEdits) -- a colwise Linear shards its output's last dim,
// a rowwise Linear consumes it, and the edits decided on the way are
//   kAllReduce  after each rowwise Linear: its partial sums summed over the tp group, the bias
//               (taken off the Linear) added once, after the sum
//   kArgument   each constant size argument that fills a sharded dim becomes the local size: the
//               head count of a reshape / view / unflatten / expand, found by which output dim it
//               fills (from the tensor metadata, never by its value: adaLN's chunk(6) is not 6
//               heads), the sizes of a split and the bounds of a slice along a packed dim
//   kNormStats  each rms_norm whose normalized width is sharded (Wan's norm_q over all heads)
//               takes its mean of squares over the tp group
//
// Context parallelism (AddSplitDataflowEdits) -- a split shards a sequence dim, a gather ends it;
// symbolic sizes are made local by compiler/program/local_sizes.h. A constant the export fixed
// that a node gives the split dim -- a slice bound, a split size, a view's size at a block bound
// of a joint sequence (CogVideoX's 226 text tokens before the video) -- becomes a kArgument edit
// reading this rank's length off a shard made before the node that holds exactly the blocks the
// constant spans; with no such shard it is refused. Guidance
// branches (splits over cfg, along the batch) are followed the same way in a walk of their own;
// attention passes them when Q, K, V (and a mask that varies along the batch) all carry them.
//
// A joint sequence may also hold streams every rank holds whole (Mochi joins each sample's valid
// text tokens, picked by a nonzero, to the rank's video tokens): a whole tensor joined by a `cat`
// along the split dim is such a block. It rides along through row-wise operators, a pad of the
// whole stream and a split at the streams' bounds (a part holding whole streams only is whole from
// there); an attention over it records each whole stream and where its rows lie (the attention
// edit's whole_parts: the runtime attends whole keys once, not once per rank). Any other operator
// reading it is refused by name.
//
// Under context parallelism a reshape may merge the split dim with the dims before it (Latte
// folds its tokens into the batch of each temporal attention): the merged dim holds one run of the
// split dim per outer index, which is the block layout, the blocks repeated; an attention over
// such batch rows runs local, and a reshape parting the dim into (runs, run length) brings the
// split back to the run length. A whole tensor's rows repeated the split's full length of times,
// the count made local by local_sizes.h, is a shard of that layout where it is made.
//
// Anything else a sharding meets is refused (PlanEditError naming the node, its module and the
// rule the sharding comes from): a reduction, softmax or norm over the sharded dim, a reshape
// that merges it with the dim before it (under tensor parallelism, or not at an input dim's
// bound), a view giving the split dim a size read off no shard, a slice or split inside a block, a sharded tensor mixed
// with a whole one along it (unless local_sizes.h sliced the whole one for that node), attention over split keys that the plan leaves local, Q/K/V sharded
// unalike over heads, a colwise output reaching a Linear whose weight is whole, a rowwise Linear
// whose input is not sharded as its weight is, an operator the rewrite does not know, a sharded
// value reaching the program's output, a gather of a value no split reaches.

#include <cstdint>
#include <string>
#include <unordered_map>

#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft::program {

// Ops that compute each output element from the elements at the same (broadcast) index of their
// tensor inputs: a sharding passes through them unchanged.
bool IsElementwise(const std::string& target);

// Appends to `edits` the tensor-parallel edits of `plan` (a no-op without a tp axis or TP steps).
// Throws PlanEditError as described above.
void AddTensorParallelEdits(const plan::ExecutionPlan& plan, const Program& program, plan::ProgramEdits& edits);

// Follows the context-parallel splits and the splits of guidance branches of `edits` (the plan's,
// with every local-size edit made) to their gathers, appending the edits that make constants
// local. Throws PlanEditError as described above.
void AddSplitDataflowEdits(const plan::ExecutionPlan& plan, const Program& program, plan::ProgramEdits& edits);

// The same walks as a check only (no edits appended).
void CheckSplitDataflow(const plan::ExecutionPlan& plan, const Program& program, const plan::ProgramEdits& edits);

// The nodes that compute on shards, each with the axes it is sharded over (kShardTp | kShardCp |
// kShardCfg): a node reading or writing a shard does 1/degree of the whole node's work there
// (the cost model, compiler/cost/predict.h, divides by it). `edits` are the plan's final edits
// (plan.program, after LowerToProgram); the walks only check and record. Throws as the checks.
inline constexpr uint8_t kShardTp = 1, kShardCp = 2, kShardCfg = 4;
std::unordered_map<std::string, uint8_t> ShardedNodes(const plan::ExecutionPlan& plan, const Program& program,
                                                     const plan::ProgramEdits& edits);

}  // namespace weft::program

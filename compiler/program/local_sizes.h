#pragma once

// Sizes that must become local once a plan splits a tensor.
//
// torch.export computes the symbolic sizes a node needs (a reshape's [B, S, heads, -1]) once, as
// `sym_size.int` of a graph input, often at the top of the graph: QwenImage's attention reshapes
// read `sym_size.int(hidden_states, 1)` of the root's input although the plan splits the value
// block 0 receives. Under the plan that node runs on a shard, so the full length there is wrong.
//
// Which nodes run on a shard follows the dataflow from the plan's splits: a value read through a
// split is a shard along the split dim; a node that reads a shard yields shards; a gather ends
// it. Each shard carries the symbolic expressions of the full lengths it was split from. A
// symbolic-int argument of a node that reads shards, whose expression is one of those full
// lengths (or its negation), is rewritten (a kArgument edit with `value`, `dim` and the sign in
// `new_value`) to the size of a shard along the dim that has that expression -- the local length,
// computed at run time.
//
// A full length that such a node needs but none of its sharded inputs carries is refused, naming
// the node, its module and the split's rule: nothing local can stand in for it. So is a size
// computed from a full length read off a whole tensor (`2 * sym_size(w, 0)` with w whole) that a
// node on shards takes: only the length itself can be made local.
//
// Lengths are compared as text in one spelling: symbols the guards make equal spelled alike and
// spellings of one function of the sizes taken as one (compiler/program/equal_sizes.h). A whole
// tensor's rows repeated a split's full length of times (`repeat_interleave(emb, tokens)`), inside
// the split's reach, is built at the local count: its `repeats` made local, a shard from there.
//
// A whole tensor that an elementwise node combines with a shard, along a dim whose size is the
// shard's full length and a split length (a RoPE table built from every position, a residual of
// a stream split later, a timestep embedding left whole under cfg), is sliced for that node's
// read: a kSplit edit with `node` set, laid out as the split of that length. Every rank of the
// group holds the same whole tensor, so the slice needs no communication and each rank combines
// exactly the rows its shard holds; shard_flow.h proves the layouts line up. `weft explain`
// lists these slices.

#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft::program {

// Appends to `edits` (which hold the plan's splits and gathers) the kArgument edits that make
// full-length sizes local. Throws ProgramError as described above.
void AddLocalSizeEdits(const Program& program, plan::ProgramEdits& edits);

// True when `node` runs inside module `module` ("" = the root: every node).
bool NodeInModule(const Program& program, const Node& node, const std::string& module);

// The innermost module `node` runs in ("" = the root, or no module stack).
std::string ModuleOf(const Program& program, const Node& node);

// Factories whose sizes come from their arguments only (ones([B, S]) ...): built at a split's
// full length and combined with shards, AddLocalSizeEdits builds them at the local one.
bool IsFactory(const std::string& target);

// An edit's part, unit or row count spelled as an integer literal (a stream of constant length)
// rather than as a symbolic int the program computes.
bool IsLengthLiteral(const std::string& length);

}  // namespace weft::program

#pragma once

// The `weft.graph/1` view of a program, so that every check the compiler runs against an
// exported graph runs against a program too (`weft check|compile|explain --program M.pt2`).
//
// What comes from where:
//   module tree      the manifest's tree (containers, children order, attributes), checked
//                    against the modules the program's module call graph and node stacks name;
//                    without a manifest, derived from those alone
//   parameters       the graph signature (parameters and registered buffers by fqn) with shapes
//                    and dtypes from the tensor metadata
//   signatures       the manifest's forward signatures; the root's from the program
//   attention sites  one per module owning `scaled_dot_product_attention` nodes: heads and head
//                    dim from the query's metadata, Q and K/V inputs by dataflow from the
//                    module's preserved call signature (an input feeds Q when a path from it
//                    reaches the query through the input of a Linear, so RoPE tables do not)
//   workloads        the manifest's workloads, with the program's symbolic sizes evaluated at
//                    each one's inputs: every preserved module call and every attention call

#include "compiler/model/graph.h"
#include "compiler/program/program.h"

namespace weft::program {

// Builds the view. Throws ProgramError when the program and its manifest disagree or a
// workload's inputs do not fit the program (naming the workload and the argument).
model::ModelGraph GraphOfProgram(const Program& program);

// The innermost module of `node` that owns an attention call: the innermost frame of its module
// stack whose class is one of the manifest's attention classes, else the innermost frame that
// runs a Linear (the projections: SanaWM's softmax attention takes Q, K and V from its caller),
// else the innermost frame. Empty when the node has no stack.
std::string AttentionOwner(const Program& program, const Node& node);

inline constexpr const char* kSdpaTarget = "torch.ops.aten.scaled_dot_product_attention.default";

}  // namespace weft::program

#pragma once

// Computing only the rows a program keeps: a slice along a dim that row-wise ops preserve (the
// tokens) moves up through the ops that produce its input, so they run on the kept rows only.
// Flux's last single block is the case that pays: it computes every token, then the transformer
// keeps `hidden_states[:, text_len:]` and drops the text rows, so the block's MLP, GELU and
// proj_out spend a fifth of their work (256 of 1,280 tokens at 512x512) on rows nobody reads.
//
//   slice(add(a, b))      -> add(slice(a), slice(b))   (add, sub, mul, div; an operand that
//                                                       broadcasts along the dim stays whole)
//   slice(unary(x))       -> unary(slice(x))           (gelu, silu, neg, to.dtype)
//   slice(linear(x, W))   -> linear(slice(x), W)       (the dim is not the features)
//   slice(cat(xs, other)) -> cat([slice(x) ...])       (cat along another dim)
//
// A slice moves only past a producer whose output it alone reads (the rows it drops are then
// read by nobody); slices whose output nobody reads are removed first (Flux's text half of the
// last block). Each moved slice keeps the original's bounds, which row-wise ops leave meaning the
// same rows, and results equal the unrewritten program's up to float rounding (the matmuls see
// fewer rows). Nodes that are not plain row-wise ATen ops -- weft's collectives and attention
// kernels, reshapes, reductions -- stop a slice where it is, so plans' edits are never crossed.

#include <cstddef>

#include "compiler/program/program.h"

namespace weft::interp {

struct RowSliceRewrite {
  program::Program program;
  size_t dead_slices_removed = 0;
  size_t moves = 0;  // how many times a slice moved above its producer
};

// `program` with its slices moved up as far as the rules above allow.
RowSliceRewrite SinkRowSlices(const program::Program& program);

}  // namespace weft::interp

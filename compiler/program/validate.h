#pragma once

// A program is checked once, as it is read, for being a well-formed graph before anything
// reasons about it: the compiler's checks, the edits and the interpreter all assume it, and a
// file anyone can edit must not turn a malformed graph into a plan error, a crash or a wrong
// answer. Two families of facts:
//  - dataflow: every value is defined exactly once (a graph input or one node's output), before
//    any node reads it; the graph's outputs are defined. A cycle is a read before definition.
//  - metadata: every tensor has its sizes and a known dtype, sizes are not negative and hold at
//    most 2^63 elements, strides (if given) match the rank, and where an operator's result is
//    fixed by its inputs' sizes (elementwise with broadcasting, linear, view/reshape), the
//    recorded sizes agree.
// Each violation is a ProgramError naming the graph (`where`), the node by index and name, and
// the value, and saying the program is malformed.

#include <string>

#include "compiler/program/program.h"

namespace weft::program {

// Checks the program's graph and every subgraph body (each its own scope). Throws ProgramError.
void ValidateProgram(const Program& p, const std::string& where);

}  // namespace weft::program

#pragma once

// Higher-order operators whose bodies run exactly as if written inline in an inference forward,
// replaced by those bodies when a program is read:
//   wrap_with_set_grad_enabled(enabled, body, *operands)   torch.no_grad() / enable_grad() regions:
//                                                          grad mode changes nothing without autograd
//   wrap_with_autocast(device, dtype, enabled=False, ...)   an autocast-off region (Helios's RoPE)
// The body's values are renamed `<operator node>/<value>`, its inputs bound to the operands and the
// operator's outputs to the body's, so every later reference follows. Other higher-order operators
// (control flow, autocast on) stay as nodes, which the interpreter refuses by name when loading.

#include <string>

#include "compiler/program/program.h"

namespace weft::program {

void InlineHigherOrderOps(Program& program, const std::string& where);

}  // namespace weft::program

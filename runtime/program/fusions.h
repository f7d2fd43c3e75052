#pragma once

// Op chains of diffusers' transformers that weft runs as one kernel when a program loads (the
// interpreter's `fast_kernels`):
//   linear -> gelu                      one oneDNN matmul with the GELU as its epilogue
//   cat(parts, last dim) -> linear      one matmul per part against its block of the weight, each
//                                       adding the previous (Flux's proj_out(cat(attn, mlp)))
//   layer_norm -> * (1 + scale) + shift one layer_norm with weight 1 + scale, bias shift (AdaLN, batch 1)
//   apply_rotary_emb (reshape, unbind, neg, stack, flatten, to, mul, mul, add, to)
//                                       one pass (runtime/nn/cpu_kernels.h Rotate), bitwise equal
// A chain fuses only when every intermediate value has no other use, so nothing else observes it;
// each fused kernel checks its inputs at run time (dtype, device, batch) and otherwise computes
// the original ops. Results equal the unfused ops up to float rounding (rotary: exactly).

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include "compiler/program/program.h"
#include "runtime/program/fast_kernels.h"

namespace weft::interp {

struct Fusion {
  std::string name;                  // "linear+gelu", ...
  std::vector<size_t> nodes;         // the program nodes it replaces; it runs at the last one
  std::vector<std::string> inputs;   // the values its kernel reads, in order ("" = None)
  std::string output;                // the value it produces
  std::unique_ptr<FastKernel> kernel;
};

// The fusions of `program` on `device` (CPU only so far), no node in two of them.
std::vector<Fusion> FindFusions(const program::Program& program, c10::Device device);

}  // namespace weft::interp

#pragma once

// What one program node costs on one device, before any sharding: the arithmetic of a matmul
// or an attention call, the bytes an elementwise or data-movement op reads and writes, nothing
// for a view (it moves no data) or a symbolic-size op. The sizes are the node's tensors at a
// workload (program::Bindings); predict.h divides them by the degrees a plan shards the node
// over and turns them into time with a machine profile.
//
//   linear / matmul / mm / addmm / bmm / baddbmm   2 * numel(out) * K            (K the reduced width)
//   convolution                                     2 * numel(out) * numel(w) / C_out
//   scaled_dot_product_attention                    4 * B * H * Sq * Skv * D      (Q K^T and P V)
//   everything else that allocates                  bytes of its tensor inputs + outputs
//
// Allocations are counted too: `out_bytes` is what the node's outputs take (0 for a view of its
// input), for the activation liveness predict.h walks.

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/program/bindings.h"
#include "compiler/program/program.h"

namespace weft::cost {

enum class OpClass : uint8_t { kFree, kMatmul, kAttention, kMemory };
const char* OpClassName(OpClass c);

struct NodeCost {
  OpClass op_class = OpClass::kFree;
  double flops = 0;         // kMatmul, kAttention
  double bytes = 0;         // kMemory: read + written; matmul/attention: their operands (for a roofline)
  double size = 0;          // the rate's problem size: m*n*k (matmul), Skv (attention), bytes (memory)
  std::string dtype;        // "f32", "bf16" ... of the first floating input
  double out_bytes = 0;     // bytes the node's outputs allocate (0: views and scalars)
  // Tensor inputs the output may alias (views): liveness keeps them alive as long as the view.
  std::vector<std::string> aliases;
};

// The cost of `node` at the sizes `b` gives the program's symbols. Tensors without metadata
// count as empty.
NodeCost CostOfNode(const program::Program& p, const program::Node& node, const program::Bindings& b);

// Bytes of tensor `name` at the sizes `b` gives (its export hints where `b` does not determine a
// size); 0 without metadata.
double TensorBytes(const program::Program& p, const program::Bindings& b, const std::string& name);

// True for ops that return a view of (or a size of) an input and move no data.
bool IsViewOp(const std::string& target);

}  // namespace weft::cost

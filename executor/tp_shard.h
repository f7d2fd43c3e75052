#pragma once

// Tensor-parallel sharding of parameters, from the ParamShard entries of an ExecutionPlan.
// A parameter sharded along `dim` with blocks [b0, b1, ...] (one block for plain colwise /
// rowwise; several for packed layers such as Flux's single-block proj_out = [attention,
// mlp]) keeps, on tp rank r of T, the r-th 1/T of every block, blocks in their original
// order. Each block must divide by T (the compiler checks it; this code re-checks).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/plan/execution_plan.h"
#include "runtime/io/safetensors.h"

namespace weft::exec {

struct ShardSpec {
  int64_t dim = 0;
  std::vector<int64_t> blocks;  // sizes along dim, summing to the full size
  int64_t tp_size = 1;
  int64_t tp_rank = 0;

  // This rank's [offset, length) pieces along dim, in order.
  std::vector<std::pair<int64_t, int64_t>> Pieces() const;
  int64_t LocalSize() const;
};

// Every sharded parameter of `plan` by full fqn ("transformer_blocks.0.attn.to_q.weight"),
// for tp rank `tp_rank`. Replicated parameters are absent.
std::map<std::string, ShardSpec> ShardSpecs(const plan::ExecutionPlan& plan, int64_t tp_rank);

// This rank's shard of a full tensor (a contiguous copy). Throws ExecError naming `name` when
// the tensor's extent along dim differs from the blocks' sum or a block does not divide.
at::Tensor ShardTensor(const at::Tensor& full, const ShardSpec& spec, const std::string& name);

// Reads only this rank's shard of `key` from `file` (one slice read per block), converted to
// `dtype`: the streaming load of already-sharded weights.
at::Tensor LoadShard(const io::SafetensorsFile& file, const std::string& key, const ShardSpec& spec,
                     at::ScalarType dtype);

}  // namespace weft::exec

#pragma once

// What the program path takes from weft's own layers: nn::Linear, the owner of a weight's
// packed oneDNN copies (runtime/nn/onednn_linear.h), and the RMS norm over a width that tensor
// parallelism shards, which the program backend (executor/program_backend.cpp) runs in place of
// aten.rms_norm.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/nn/module.h"

namespace weft::nn {

// torch.nn.Linear: y = x W^T + b; parameters `weight` (out, in) and `bias` (out). The program
// path's fast kernels (runtime/program/fast_kernels.cpp, fusions.cpp) keep one per linear node
// only for packed_weights(): the weight comes with every call, so their parameters stay
// unmaterialised.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::vector<std::string> Signature() const override { return {"input"}; }
  // at::linear on the parameters; the packed copies serve onednn::Matmul alone.
  Outputs Forward(Args& args) override;
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  // Copies of (column blocks of) a weight in oneDNN's blocked layout, each with the weight
  // tensor and version it was made from; runtime/nn/onednn_linear.h fills and checks them.
  // `source` is held (not an address) so a freed weight's address cannot pass for a new one;
  // `packed` undefined records that the pack did not fit in memory for this source.
  struct PackedWeight {
    at::Tensor packed;
    at::Tensor source;
    int64_t version = -1;
    int64_t offset = 0, width = 0, bytes = 0;
  };
  std::vector<PackedWeight>& packed_weights() { return packed_weights_; }

 private:
  std::vector<PackedWeight> packed_weights_;
  int64_t in_features_;
  int64_t out_features_;
  bool has_bias_;
};

// RMSNorm over the trailing `dims` dims of x when each rank holds a slice of them: this rank's
// per-row sum of squares (fp32, keepdim) goes through `sum_over_shards` (an all-reduce over the
// shards), then x * rsqrt(sum / full_width + eps) in fp32, cast back to x's dtype, times weight
// (this rank's slice) when given. eps nullopt is aten's rms_norm default, x's dtype's epsilon.
at::Tensor ShardedRmsNorm(const at::Tensor& x, int64_t dims, int64_t full_width, const std::optional<at::Tensor>& weight,
                          std::optional<double> eps, const std::function<void(at::Tensor&)>& sum_over_shards);

}  // namespace weft::nn

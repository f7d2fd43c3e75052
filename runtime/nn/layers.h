#pragma once

// The leaf layers diffusers' DiTs are built from, with torch.nn's parameter names and math,
// all called through nn::Call so plans can hook them.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "runtime/nn/module.h"

namespace weft::nn {

// torch.nn.Linear: y = x W^T + b; parameters `weight` (out, in) and `bias` (out).
// Tensor parallelism replaces `weight`/`bias` by their shards; forward reads whatever is
// there, and `bias_after_reduce` (rowwise TP) is added by the executor's hook instead.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::vector<std::string> Signature() const override { return {"input"}; }
  Outputs Forward(Args& args) override;
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool has_bias() const { return has_bias_; }
  // Stops forward from adding the bias and returns it (a rowwise tensor-parallel layer adds
  // it once, after the all-reduce of the partial products). The parameter stays registered.
  at::Tensor DetachBias();
  // A weight that fuses several blocks along its input dim (Flux's single-block proj_out reads
  // [attention, mlp]), as diffusers declares in `_tp_packed_row_blocks`; recorded for graphs.
  void SetPackedRowBlocks(std::vector<int64_t> blocks) { packed_row_blocks_ = std::move(blocks); }
  const std::vector<int64_t>& packed_row_blocks() const { return packed_row_blocks_; }
  // What forward multiplies an input of `input_width` features by: (weight, bias or nullopt
  // when the bias is not added here), after forward's width check; for runtime/nn/fused.h.
  std::pair<at::Tensor, std::optional<at::Tensor>> Operands(int64_t input_width);

  // Copies of (column blocks of) `weight` in oneDNN's blocked layout, each with the weight
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
  std::vector<int64_t> packed_row_blocks_;
  int64_t in_features_;
  int64_t out_features_;
  bool has_bias_;
  bool bias_in_forward_;
};

// torch.nn.LayerNorm over the last dim; `weight`/`bias` only when elementwise_affine.
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, double eps, bool elementwise_affine);
  std::vector<std::string> Signature() const override { return {"input"}; }
  Outputs Forward(Args& args) override;
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return affine_; }

 private:
  int64_t dim_;
  double eps_;
  bool affine_;
};

// RMSNorm over the trailing `dims` dims of x when each rank holds a slice of them: this rank's
// per-row sum of squares (fp32, keepdim) goes through `sum_over_shards` (an all-reduce over the
// shards), then x * rsqrt(sum / full_width + eps) in fp32, cast back to x's dtype, times weight
// (this rank's slice) when given. eps nullopt is aten's rms_norm default, x's dtype's epsilon.
at::Tensor ShardedRmsNorm(const at::Tensor& x, int64_t dims, int64_t full_width, const std::optional<at::Tensor>& weight,
                          std::optional<double> eps, const std::function<void(at::Tensor&)>& sum_over_shards);

// RMSNorm: x * rsqrt(mean(x^2) + eps), times `weight` when elementwise_affine. Two flavours
// with the same class name: diffusers' own (argument `hidden_states`, variance in fp32) and
// torch.nn.RMSNorm (argument `x`, at::rms_norm), which FluxAttention uses.
class RMSNorm : public Module {
 public:
  enum class Flavour { kDiffusers, kTorch };
  RMSNorm(int64_t dim, double eps, bool elementwise_affine, Flavour flavour = Flavour::kDiffusers);
  std::vector<std::string> Signature() const override {
    return {flavour_ == Flavour::kTorch ? "x" : "hidden_states"};
  }
  Outputs Forward(Args& args) override;

  // Tensor parallelism of a norm over a sharded width (Wan's q/k norms span all heads):
  // each rank holds `full_dim / tp` features and a slice of `weight`; `sum_over_shards` turns
  // this rank's per-row sum of squares (fp32, keepdim) into the sum over every shard (an
  // all-reduce), so the statistics are those of the full width.
  void ShardStatistics(std::function<void(at::Tensor&)> sum_over_shards, int64_t full_dim);

  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return affine_; }
  Flavour flavour() const { return flavour_; }
  bool statistics_sharded() const { return static_cast<bool>(sum_over_shards_); }

 private:
  int64_t dim_;
  double eps_;
  bool affine_;
  Flavour flavour_;
  std::function<void(at::Tensor&)> sum_over_shards_;
  int64_t full_dim_ = 0;
};

// torch.nn.SiLU.
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  std::vector<std::string> Signature() const override { return {"input"}; }
  Outputs Forward(Args& args) override;
};

// torch.nn.GELU (no parameters; tanh approximation when asked). Not diffusers' GELU below.
class GELUActivation : public Module {
 public:
  explicit GELUActivation(bool approximate_tanh) : Module("GELU"), tanh_(approximate_tanh) {}
  std::vector<std::string> Signature() const override { return {"input"}; }
  Outputs Forward(Args& args) override;
  bool approximate_tanh() const { return tanh_; }

 private:
  bool tanh_;
};

// torch.nn.Dropout at inference: the identity. Present so module paths match diffusers
// (`ff.net.1`, `attn.to_out.1`).
class Dropout : public Module {
 public:
  Dropout() : Module("Dropout") {}
  std::vector<std::string> Signature() const override { return {"input"}; }
  Outputs Forward(Args& args) override { return {args.Get("input")}; }
};

// torch.nn.ModuleList: children "0", "1", ...; never called itself.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  std::vector<std::string> Signature() const override { return {}; }
  Outputs Forward(Args& args) override;
  template <typename M>
  M& Append(std::unique_ptr<M> module) {
    return AddChild(std::to_string(children().size()), std::move(module));
  }
  size_t size() const { return children().size(); }
  Module& operator[](size_t index) const { return *children().at(index).second; }
};

// diffusers.models.activations.GELU: a Linear `proj` followed by GELU (tanh approximation
// when `approximate_tanh`).
class GELU : public Module {
 public:
  GELU(int64_t dim_in, int64_t dim_out, bool approximate_tanh, bool bias = true);
  std::vector<std::string> Signature() const override { return {"hidden_states"}; }
  Outputs Forward(Args& args) override;

 private:
  bool tanh_;
};

// diffusers.models.attention.FeedForward with a GELU activation:
// net = [GELU(dim, inner), Dropout, Linear(inner, dim_out)].
class FeedForward : public Module {
 public:
  FeedForward(int64_t dim, int64_t dim_out, int64_t inner_dim, bool approximate_tanh);
  std::vector<std::string> Signature() const override { return {"hidden_states"}; }
  Outputs Forward(Args& args) override;
};

}  // namespace weft::nn

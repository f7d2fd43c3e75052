#pragma once

// An attention call site: the one place in a model where q, k and v meet. Models compute
// q/k/v (B, S, H, D) and hand them to their site's kernel; the executor swaps the kernel
// per site for a context-parallel one (Ulysses, ring, USP) as the plan says. By default a
// site runs local attention on whatever q/k/v it gets.

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>

#include "runtime/nn/module.h"

namespace weft::nn {

// Computes softmax(q k^T / sqrt(D)) v for q (B, Sq, H, D), k/v (B, Skv, H, D) and an
// optional key-padding mask (B, Skv), bool, true = attend. Returns (B, Sq, H, D).
class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;
  virtual at::Tensor Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& key_padding_mask) = 0;
  // A short name for reports: "local", "ulysses", "ring(p2p)" ...
  virtual std::string Name() const = 0;
};

// Single-device attention (at::scaled_dot_product_attention).
class LocalAttentionKernel : public AttentionKernel {
 public:
  at::Tensor Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& key_padding_mask) override;
  std::string Name() const override { return "local"; }
};

// A module that owns an attention call site (diffusers' Attention / FluxAttention ...).
class AttentionModule : public Module {
 public:
  explicit AttentionModule(std::string type, int64_t heads, int64_t head_dim)
      : Module(std::move(type)), heads_(heads), head_dim_(head_dim),
        kernel_(std::make_shared<LocalAttentionKernel>()) {}
  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }
  void SetKernel(std::shared_ptr<AttentionKernel> kernel) { kernel_ = std::move(kernel); }
  AttentionKernel& kernel() const { return *kernel_; }

 protected:
  // Runs the site's kernel. q/k/v (B, S, H_local, D): the local head count comes from the
  // tensors, so tensor parallelism (fewer heads per rank) needs no special case here.
  at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const std::optional<at::Tensor>& key_padding_mask = std::nullopt) const {
    return kernel_->Run(q, k, v, key_padding_mask);
  }

 private:
  int64_t heads_;
  int64_t head_dim_;
  std::shared_ptr<AttentionKernel> kernel_;
};

}  // namespace weft::nn

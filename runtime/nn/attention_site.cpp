#include "runtime/nn/attention_site.h"

#include <ATen/ATen.h>

namespace weft::nn {

at::Tensor LocalAttentionKernel::Run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const std::optional<at::Tensor>& key_padding_mask) {
  std::optional<at::Tensor> mask;
  // (B, Skv) -> (B, 1, 1, Skv), broadcast over heads and queries.
  if (key_padding_mask) mask = key_padding_mask->to(at::kBool).unsqueeze(1).unsqueeze(1);
  at::Tensor out = at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask);
  return out.transpose(1, 2);
}

}  // namespace weft::nn

// weft's fast kernels on arguments the interpreter hands them: the packed linear on a weight the
// forward computes (an inference tensor under the job's InferenceMode, which has no version
// counter to check a packed copy against) runs as at::linear instead of throwing.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "runtime/program/fast_kernels.h"

namespace weft::interp {
namespace {

// The fast kernel of an aten.linear node on CPU (nullptr when this LibTorch has no oneDNN).
std::unique_ptr<FastKernel> LinearKernel() {
  static const program::Program p;
  static const program::Node node = [] {
    program::Node n;
    n.target = "torch.ops.aten.linear.default";
    return n;
  }();
  return MakeFastKernel(FastKernelContext{p, node, c10::Device(c10::kCPU), [](const std::string&) { return 0; }});
}

TEST(FastKernels, LinearOnAComputedWeightUnderInferenceMode) {
  std::unique_ptr<FastKernel> kernel = LinearKernel();
  if (kernel == nullptr) GTEST_SKIP() << "this LibTorch has no oneDNN linear";
  at::manual_seed(3);
  const at::Tensor param = at::randn({16, 8});  // a parameter: loaded outside InferenceMode
  const at::Tensor bias = at::randn({16});
  c10::InferenceMode inference;
  for (int call = 0; call < 2; ++call) {  // a new computed weight each call
    const at::Tensor x = at::randn({4, 8});
    const at::Tensor w = param * 0.25;  // as WanAnimate's motion encoder scales its weights
    ASSERT_TRUE(w.is_inference());
    std::vector<c10::IValue> stack{x, w, bias};
    std::vector<c10::IValue> frame;
    kernel->Run(stack, frame);
    ASSERT_EQ(stack.size(), 1u);
    EXPECT_TRUE(at::allclose(stack[0].toTensor(), at::linear(x, w, bias), 1e-6, 1e-6));
  }
  // A parameter's weight still takes the packed path and agrees.
  const at::Tensor x = at::randn({4, 8});
  std::vector<c10::IValue> stack{x, param, bias};
  std::vector<c10::IValue> frame;
  kernel->Run(stack, frame);
  EXPECT_TRUE(at::allclose(stack[0].toTensor(), at::linear(x, param, bias), 1e-5, 1e-5));
}

// A Linear of no output features (NucleusMoE's tiny config has one), or on no rows: oneDNN has no
// primitive for either; the kernel runs at::linear and gives its empty result.
TEST(FastKernels, LinearOfNoFeaturesOrNoRows) {
  std::unique_ptr<FastKernel> kernel = LinearKernel();
  if (kernel == nullptr) GTEST_SKIP() << "this LibTorch has no oneDNN linear";
  for (const auto& [x_shape, w_shape] : {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{2, 16, 32}, {0, 32}},
                                        {{0, 32}, {8, 32}}}) {
    std::vector<c10::IValue> stack{at::randn(x_shape), at::randn(w_shape), c10::IValue()};
    std::vector<c10::IValue> frame;
    kernel->Run(stack, frame);
    ASSERT_EQ(stack.size(), 1u);
    std::vector<int64_t> expected(x_shape.begin(), x_shape.end() - 1);
    expected.push_back(w_shape[0]);
    EXPECT_EQ(stack[0].toTensor().sizes().vec(), expected);
  }
}

}  // namespace
}  // namespace weft::interp

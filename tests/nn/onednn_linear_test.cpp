// runtime/nn/onednn_linear.h: oneDNN matmuls on packed weights give at::linear's result, for
// column blocks and with a summed addend, and never serve a stale packed copy.
#include "runtime/nn/onednn_linear.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace weft::nn::onednn {
namespace {

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

class OneDnnLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Available()) GTEST_SKIP() << "this LibTorch has no oneDNN linear ops";
    at::manual_seed(0);
    proj_.Parameter("weight") = at::randn({24, 40}) / 6;
    proj_.Parameter("bias") = at::randn({24});
  }
  Linear proj_{40, 24};
};

TEST_F(OneDnnLinearTest, MatchesLinearOnColumnBlocksWithAnAddend) {
  const at::Tensor x = at::randn({2, 7, 40});
  const at::Tensor& w = proj_.Parameter("weight");
  const at::Tensor& b = proj_.Parameter("bias");
  EXPECT_LE(RelativeError(Matmul(proj_, proj_.Parameter("weight"), x, 0, 40, b, Epilogue::kNone), at::linear(x, w, b)), 1e-6);
  const at::Tensor tail = x.narrow(-1, 10, 30);
  const at::Tensor want_tail = at::linear(tail, w.narrow(1, 10, 30));
  EXPECT_LE(RelativeError(Matmul(proj_, proj_.Parameter("weight"), tail, 10, 30, std::nullopt, Epilogue::kNone), want_tail), 1e-6);
  const at::Tensor addend = at::randn({2, 7, 24});
  EXPECT_LE(RelativeError(Matmul(proj_, proj_.Parameter("weight"), tail, 10, 30, std::nullopt, Epilogue::kNone, &addend), want_tail + addend), 1e-6);
  EXPECT_LE(RelativeError(Matmul(proj_, proj_.Parameter("weight"), x, 0, 40, b, Epilogue::kGeluTanh), at::gelu(at::linear(x, w, b), "tanh")), 1e-6);
}

TEST_F(OneDnnLinearTest, RepacksWhenTheWeightIsReplacedOrWrittenInPlace) {
  const at::Tensor x = at::randn({5, 40});
  const int64_t before = PackedBytes();
  Matmul(proj_, proj_.Parameter("weight"), x, 0, 40, std::nullopt, Epilogue::kNone);
  EXPECT_EQ(PackedBytes(), before + 24 * 40 * 4);
  Matmul(proj_, proj_.Parameter("weight"), x, 0, 40, std::nullopt, Epilogue::kNone);
  EXPECT_EQ(PackedBytes(), before + 24 * 40 * 4);  // reused, not packed again
  proj_.Parameter("weight") = at::randn({24, 40});  // e.g. replaced by a tensor-parallel shard
  EXPECT_LE(RelativeError(Matmul(proj_, proj_.Parameter("weight"), x, 0, 40, std::nullopt, Epilogue::kNone), at::linear(x, proj_.Parameter("weight"))),
            1e-6);
  proj_.Parameter("weight").mul_(-3);  // written in place
  EXPECT_LE(RelativeError(Matmul(proj_, proj_.Parameter("weight"), x, 0, 40, std::nullopt, Epilogue::kNone), at::linear(x, proj_.Parameter("weight"))),
            1e-6);
  EXPECT_EQ(PackedBytes(), before + 24 * 40 * 4);  // each repack replaces the old copy
}

}  // namespace
}  // namespace weft::nn::onednn

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/dist/dist_context.h"
#include "tests/support/multi_rank.h"

namespace weft::dist {
namespace {

using testing::RunOnRanks;

TEST(Collectives, AllReduceSumOfRanks) {
  RunOnRanks(4, [](DistContext& ctx) {
    at::Tensor t = at::full({3}, static_cast<double>(ctx.rank()), at::kFloat);
    ctx.AllReduce(Axis::kWorld, t);
    EXPECT_TRUE(at::equal(t, at::full({3}, 6.0, at::kFloat)));
  });
}

}  // namespace
}  // namespace weft::dist

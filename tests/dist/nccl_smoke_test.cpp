// NCCL smoke test: the collectives on CUDA tensors over NCCL, 2 ranks on 2 GPUs. Label `gpu`.
// Skips cleanly (GTEST_SKIP) in builds without CUDA (WEFT_WITH_CUDA unset) and on machines
// with fewer than 2 GPUs.
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/dist/dist_context.h"
#include "tests/support/multi_rank.h"
#ifdef WEFT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace weft::dist {
namespace {

#ifdef WEFT_WITH_CUDA
// CUDA must not be initialised in the parent before the ranks fork, so count GPUs in a child.
int CountGpusInAChild() {
  pid_t pid = ::fork();
  if (pid == 0) std::_Exit(static_cast<int>(std::min<size_t>(at::getNumGPUs(), 100)));
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}
#endif

TEST(Nccl, CollectivesOnCudaTensors) {
#ifndef WEFT_WITH_CUDA
  GTEST_SKIP() << "built without CUDA (configure with -DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)";
#else
  const int gpus = CountGpusInAChild();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  testing::MultiRankOptions o;
  o.dist.enable_nccl = true;
  o.dist.timeout = std::chrono::seconds(60);
  MeshShape mesh;
  mesh.ring = 2;
  testing::RunOnRanks(2, mesh, [](DistContext& ctx) {
    const int r = ctx.rank();
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(r));
    const auto cuda = at::TensorOptions().dtype(at::kFloat).device(at::Device(at::kCUDA, r));
    at::Tensor t = at::full({8}, 1.0 + r, cuda);
    ctx.AllReduce(Axis::kRing, t);
    EXPECT_TRUE(at::equal(t.cpu(), at::full({8}, 3.0f)));
    at::Tensor g = ctx.AllGather(Axis::kRing, at::full({2}, 1.0 * r, cuda), 0);
    EXPECT_TRUE(at::equal(g.cpu(), at::tensor({0.0f, 0.0f, 1.0f, 1.0f})));
    at::Tensor a = ctx.AllToAll(Axis::kRing, at::arange(4, cuda) + 10 * r, 0, 0);
    EXPECT_TRUE(at::equal(a.cpu(), r == 0 ? at::tensor({0.0f, 1.0f, 10.0f, 11.0f}) : at::tensor({2.0f, 3.0f, 12.0f, 13.0f})));
    at::Tensor in = at::empty({4}, cuda);
    ctx.SendRecv(Axis::kRing, {{at::full({4}, 1.0 * r, cuda), 1 - r}}, {{in, 1 - r}}).Wait();
    EXPECT_TRUE(at::equal(in.cpu(), at::full({4}, 1.0f - r)));
  }, o);
#endif
}

}  // namespace
}  // namespace weft::dist

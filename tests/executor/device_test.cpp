// --device selection (executor/device.h). On this project's CI machines there is no GPU, so
// `cuda` must fail with a message that names the flag; on a CUDA build with GPUs it must pick
// the GPU of the local rank.
#include "executor/device.h"

#include <gtest/gtest.h>

#ifdef WEFT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace weft::exec {
namespace {

TEST(Device, CpuIsTheCpu) {
  dist::WorldConfig world;
  const c10::Device d = SelectDevice("cpu", world);
  EXPECT_TRUE(d.is_cpu());
  SynchronizeDevice(d);  // no-op
  EXPECT_EQ(PeakDeviceBytes(d), 0);
}

TEST(Device, CudaIsTheLocalRanksGpuOrANamedError) {
  dist::WorldConfig world;
  world.rank = 3;
  world.world_size = 4;
  world.local_rank = 1;
  world.local_world_size = 2;
  int visible = 0;
#ifdef WEFT_WITH_CUDA
  visible = c10::cuda::device_count();
#endif
  if (visible >= 2) {
    const c10::Device d = SelectDevice("cuda", world);
    EXPECT_TRUE(d.is_cuda());
    EXPECT_EQ(d.index(), 1);
    return;
  }
  try {
    SelectDevice("cuda", world);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
#ifdef WEFT_WITH_CUDA
    const std::string want = visible == 0 ? "rank 3: --device cuda: no CUDA device is visible (check the driver and "
                                            "CUDA_VISIBLE_DEVICES)"
                                          : "rank 3: --device cuda: 2 ranks on this host but 1 visible GPU(s); NCCL "
                                            "needs one GPU per rank";
#else
    const std::string want = "--device cuda needs a build with CUDA (-DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)";
#endif
    EXPECT_EQ(std::string(e.what()), want);
  }
}

TEST(Device, UnknownNameIsRefused) {
  EXPECT_THROW(SelectDevice("tpu", dist::WorldConfig{}), std::runtime_error);
}

}  // namespace
}  // namespace weft::exec

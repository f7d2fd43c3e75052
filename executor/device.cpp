#include "executor/device.h"

#include <stdexcept>
#include <string>

#ifdef WEFT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace weft::exec {

c10::Device SelectDevice(const std::string& name, const dist::WorldConfig& world) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name != "cuda") throw std::runtime_error("--device " + name + ": expected cpu or cuda");
#ifdef WEFT_WITH_CUDA
  const int visible = c10::cuda::device_count();
  const std::string who = "rank " + std::to_string(world.rank) + ": --device cuda: ";
  if (visible == 0) {
    throw std::runtime_error(who + "no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES)");
  }
  if (world.local_world_size > visible) {
    throw std::runtime_error(who + std::to_string(world.local_world_size) + " ranks on this host but " +
                             std::to_string(visible) + " visible GPU(s); NCCL needs one GPU per rank");
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(world.local_rank));
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
#else
  (void)world;
  throw std::runtime_error("--device cuda needs a build with CUDA (-DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)");
#endif
}

void SynchronizeDevice(c10::Device device) {
#ifdef WEFT_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

int64_t PeakDeviceBytes(c10::Device device) {
#ifdef WEFT_WITH_CUDA
  if (device.is_cuda()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).allocated_bytes[0].peak;
  }
#else
  (void)device;
#endif
  return 0;
}

int VisibleGpus() {
#ifdef WEFT_WITH_CUDA
  return c10::cuda::device_count();
#else
  return 0;
#endif
}

#ifdef WEFT_WITH_CUDA
namespace {
// LibTorch's copy of the device's properties (libtorch_cuda, which weft links; the CUDA runtime
// itself is only its dependency). It throws c10::Error for a device that is not there.
const cudaDeviceProp& PropertiesOf(c10::Device device) { return *at::cuda::getDeviceProperties(device.index()); }
}  // namespace
#endif

std::string DeviceName(c10::Device device) {
#ifdef WEFT_WITH_CUDA
  if (device.is_cuda()) return PropertiesOf(device).name;
#else
  (void)device;
#endif
  return "";
}

int64_t DeviceMemoryBytes(c10::Device device) {
#ifdef WEFT_WITH_CUDA
  if (device.is_cuda()) return static_cast<int64_t>(PropertiesOf(device).totalGlobalMem);
#else
  (void)device;
#endif
  return 0;
}

}  // namespace weft::exec

#pragma once

// Where a rank runs its model: `weft-run --device cpu|cuda`. On CUDA, local rank i takes GPU i
// (one GPU per rank, as NCCL requires), its collectives go over NCCL, and wall-clock timings
// wait for the GPU's queued work.

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

#include "runtime/dist/world.h"

namespace weft::exec {

// "cpu", or "cuda": this rank's GPU (world.local_rank), made the current device. Throws
// std::runtime_error naming the flag when weft was built without CUDA, when no GPU is
// visible, or when this host runs more ranks than it has GPUs.
c10::Device SelectDevice(const std::string& name, const dist::WorldConfig& world);

// Blocks until the work queued on `device` has finished (CUDA), so a timed forward includes
// it. No-op on the CPU.
void SynchronizeDevice(c10::Device device);

// The most bytes the CUDA caching allocator had allocated on `device` since the start; 0 on
// the CPU (peak RSS covers it).
int64_t PeakDeviceBytes(c10::Device device);

// GPUs this process sees (0 without CUDA).
int VisibleGpus();

// What `device` is, for a machine profile: the GPU's name ("NVIDIA H100 80GB HBM3"); "" on the CPU.
std::string DeviceName(c10::Device device);

// The memory of `device` in bytes (the GPU's total global memory); 0 on the CPU.
int64_t DeviceMemoryBytes(c10::Device device);

}  // namespace weft::exec

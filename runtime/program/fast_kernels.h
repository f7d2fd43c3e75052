#pragma once

// weft's fast kernels substituted for operator patterns of a program when it loads (the
// interpreter's `fast_kernels` option). Each runs on the operator's own arguments, as the
// dispatcher would receive them, and leaves the same returns: results equal the operator's up to
// float rounding, and anything the kernel does not cover (another dtype or device at run time)
// falls back to the operator itself.
//   aten.linear(x, W, b), fp32 on CPU   a oneDNN matmul on W packed once (runtime/nn/onednn_linear.h)
//   aten.rms_norm over the last dim, fp32 on CPU
//                                       one pass per row (runtime/nn/cpu_kernels.h RmsNorm)

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/program/program.h"

namespace weft::interp {

struct FastKernelContext {
  const program::Program& program;
  const program::Node& node;
  c10::Device device;
  std::function<int32_t(const std::string&)> slot;  // the frame slot of a value
};

class FastKernel {
 public:
  virtual ~FastKernel() = default;
  // `stack` holds the operator's arguments in schema order; leaves its returns there.
  virtual void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>& frame) = 0;
  // Frame slots read beyond the arguments (none so far), so they stay alive until then.
  virtual std::vector<int32_t> Reads() const { return {}; }
};

// The fast kernel for `ctx.node`, or nullptr when none applies.
std::unique_ptr<FastKernel> MakeFastKernel(const FastKernelContext& ctx);

}  // namespace weft::interp

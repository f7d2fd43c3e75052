#pragma once

// Weights sliced over ranks (issue 26, `--shard-weights`): each block of the plan's
// WeightPlacement keeps 1/P of its parameters on every weight rank (the flat concatenation of
// the block's parameters, as this rank's tp shards hold them, padded to P equal slices), and the
// interpreter gathers a block's parameters whole just before the block first reads one
// (runtime/program/interpreter.h WeightSource). The next block's gather runs on a thread of its
// own, on the weights' own process group (dist::Axis::kWeights), while this one computes.
//
// Buffers are reused once nothing refers to them: the parameters handed out are views of a
// buffer, and so may be what a block makes of them (a transposed weight), so a buffer is taken
// again only when its storage has no other owner -- never while a view of it lives. When none is
// free a new one is made; `buffer_bytes()` is what the gathers have held at most.
//
// Loading streams too: `Loader()` is called per parameter in the model's order (by nn::LoadWeights
// or the seeded fill), and a block is sliced -- its whole parameters freed -- as soon as the next
// block starts, so loading holds at most a block whole besides the slices.

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "compiler/plan/execution_plan.h"
#include "runtime/dist/dist_context.h"
#include "runtime/nn/module.h"
#include "runtime/program/interpreter.h"

namespace weft::exec {

class WeightStream final : public interp::WeightSource {
 public:
  WeightStream(const plan::WeightPlacement& placement, dist::DistContext& ctx);
  ~WeightStream() override;
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  // Just before `model`'s parameter `fqn` gets its value (whole, or its tp shard): slices a block
  // once all of its parameters have theirs. Call Finish() after the last.
  void Loaded(nn::Module& model, const std::string& fqn);
  // Slices what is left; every block must be sliced by then. Throws ExecError on a parameter
  // whose shape differs from the plan's.
  void Finish(nn::Module& model);
  // Moves the slices (and later buffers) to `device`, where the model's parameters live.
  void MoveTo(c10::Device device);

  std::vector<std::vector<std::string>> Groups() const override;
  std::vector<at::Tensor> Acquire(size_t g, int64_t next) override;
  void Release(size_t g) override;
  void Prefetch(size_t g) override { Request(g); }

  // Bytes this rank holds of the blocks' parameters (its slices), and the most the gather
  // buffers held at once.
  int64_t slice_bytes() const;
  int64_t buffer_bytes() const { return peak_buffer_bytes_; }
  // Time the gathers took on their thread, and the time the job waited for them (what the
  // overlap did not hide), since construction, in ms.
  double gather_ms() const;
  double wait_ms() const { return wait_ms_; }

 private:
  struct Pending {
    at::Tensor buffer;  // being gathered into, or gathered
    bool done = false;
    std::exception_ptr error;
  };
  void Slice(nn::Module& model, size_t block);
  void Request(size_t g);  // queues group g's gather (once per run)
  void Work();             // the gather thread
  at::Tensor FreeBuffer(int64_t numel);

  const plan::WeightPlacement& placement_;
  dist::DistContext& ctx_;
  std::map<std::string, size_t> block_of_;  // param fqn -> block
  std::map<std::string, at::Tensor*> slots_;  // the model's parameter slots, by fqn
  std::vector<at::Tensor> slices_;          // per block, this rank's slice (undefined until sliced)
  std::string last_loaded_;                 // the parameter Loaded() was told of last
  std::map<size_t, size_t> loaded_;         // per block, how many of its parameters have values
  std::set<std::string> counted_;           // the parameters counted in loaded_
  at::ScalarType dtype_ = at::kFloat;
  c10::Device device_ = c10::Device(c10::kCPU);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  std::map<size_t, Pending> pending_;  // requested this run, not yet released
  std::vector<at::Tensor> pool_;       // gather buffers
  int64_t peak_buffer_bytes_ = 0;
  double gather_ms_ = 0;  // under mu_
  double wait_ms_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace weft::exec

#include "executor/weight_stream.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "executor/exec_error.h"
#include "runtime/dist/counters.h"
#include "runtime/nn/onednn_linear.h"

namespace weft::exec {
namespace {

at::ScalarType DtypeNamed(const std::string& name, const std::string& param) {
  if (name == "f32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "f16") return at::kHalf;
  if (name == "f64") return at::kDouble;
  throw ExecError("parameter `" + param + "` is " + name + ", which --shard-weights does not slice (floating only)");
}

std::string ShapeText(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

WeightStream::WeightStream(const plan::WeightPlacement& placement, dist::DistContext& ctx)
    : placement_(placement), ctx_(ctx) {
  if (ctx.AxisSize(dist::Axis::kWeights) != placement.ranks) {
    throw ExecError("rank " + std::to_string(ctx.rank()) + ": the plan slices weights over " +
                    std::to_string(placement.ranks) + " ranks but this job's weight group has " +
                    std::to_string(ctx.AxisSize(dist::Axis::kWeights)));
  }
  for (size_t b = 0; b < placement.blocks.size(); ++b) {
    for (const std::string& fqn : placement.blocks[b].params) block_of_[fqn] = b;
  }
  slices_.resize(placement.blocks.size());
  worker_ = std::thread([this] { Work(); });
}

WeightStream::~WeightStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void WeightStream::Loaded(nn::Module& model, const std::string& fqn) {
  // The parameter named before this one has its value now: a block is sliced once all of its
  // parameters have theirs, whatever order they come in.
  if (!last_loaded_.empty() && counted_.insert(last_loaded_).second) {
    auto it = block_of_.find(last_loaded_);
    if (it != block_of_.end() && ++loaded_[it->second] == placement_.blocks[it->second].params.size()) {
      Slice(model, it->second);
    }
  }
  last_loaded_ = fqn;
}

void WeightStream::Finish(nn::Module& model) {
  Loaded(model, "");
  for (size_t b = 0; b < slices_.size(); ++b) Slice(model, b);  // a block some parameters of which were not loaded
}

void WeightStream::Slice(nn::Module& model, size_t b) {
  if (slices_[b].defined()) return;
  const plan::WeightBlock& block = placement_.blocks[b];
  const int64_t P = placement_.ranks;
  if (slots_.empty()) {
    for (auto& [fqn, slot] : model.NamedParameters()) slots_[fqn] = slot;
  }
  at::Tensor layout = at::zeros({block.slice_bytes * P}, at::kByte);
  for (size_t k = 0; k < block.params.size(); ++k) {
    auto found = slots_.find(block.params[k]);
    if (found == slots_.end()) {
      throw ExecError("--shard-weights: the plan slices parameter `" + block.params[k] + "`, which the model lacks");
    }
    at::Tensor& slot = *found->second;
    if (!slot.defined() || slot.sizes() != at::IntArrayRef(block.shapes[k])) {
      throw ExecError("rank " + std::to_string(ctx_.rank()) + ": --shard-weights: parameter `" + block.params[k] + "` is " +
                      (slot.defined() ? ShapeText(slot.sizes()) : std::string("not loaded")) + ", the plan slices " +
                      ShapeText(block.shapes[k]));
    }
    const at::Tensor value = slot.to(at::kCPU, DtypeNamed(block.dtypes[k], block.params[k])).contiguous();
    const int64_t bytes = value.numel() * static_cast<int64_t>(value.element_size());
    layout.narrow(0, block.offsets[k], bytes).copy_(at::from_blob(value.data_ptr(), {bytes}, at::kByte));
    device_ = slot.device();
    slot = at::Tensor();  // the whole parameter goes; the block is gathered when it runs
  }
  const int64_t r = ctx_.AxisRank(dist::Axis::kWeights);
  slices_[b] = layout.narrow(0, r * block.slice_bytes, block.slice_bytes).clone().to(device_);
}

void WeightStream::MoveTo(c10::Device device) {
  device_ = device;
  for (at::Tensor& s : slices_) {
    if (s.defined()) s = s.to(device);
  }
}

double WeightStream::gather_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gather_ms_;
}

int64_t WeightStream::slice_bytes() const {
  int64_t total = 0;
  for (const at::Tensor& s : slices_) total += s.defined() ? s.numel() : 0;
  return total;
}

std::vector<std::vector<std::string>> WeightStream::Groups() const {
  std::vector<std::vector<std::string>> groups;
  for (const plan::WeightBlock& block : placement_.blocks) groups.push_back(block.params);
  return groups;
}

at::Tensor WeightStream::FreeBuffer(int64_t bytes) {
  // A buffer whose storage only the pool owns holds nothing anyone reads.
  for (const at::Tensor& buffer : pool_) {
    if (buffer.numel() >= bytes && buffer.storage().use_count() == 1) return buffer.narrow(0, 0, bytes);
  }
  pool_.push_back(at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device_)));
  nn::onednn::MarkTransient(pool_.back().data_ptr(), bytes);
  int64_t held = 0;
  for (const at::Tensor& buffer : pool_) held += buffer.numel();
  peak_buffer_bytes_ = std::max(peak_buffer_bytes_, held);
  return pool_.back().narrow(0, 0, bytes);
}

void WeightStream::Request(size_t g) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.count(g)) return;
  pending_[g];
  queue_.push_back(g);
  cv_.notify_all();
}

void WeightStream::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const size_t g = queue_.front();
    queue_.pop_front();
    const plan::WeightBlock& block = placement_.blocks[g];
    at::Tensor buffer = FreeBuffer(block.slice_bytes * placement_.ranks);
    lock.unlock();
    std::exception_ptr error;
    const auto start = std::chrono::steady_clock::now();
    try {
      ctx_.AllGatherInto(dist::Axis::kWeights, slices_[g], buffer);
    } catch (...) {
      error = std::current_exception();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    gather_ms_ += ms;
    Pending& p = pending_[g];
    p.buffer = std::move(buffer);
    p.error = error;
    p.done = true;
    cv_.notify_all();
  }
}

std::vector<at::Tensor> WeightStream::Acquire(size_t g, int64_t next) {
  Request(g);
  at::Tensor buffer;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto start = std::chrono::steady_clock::now();
    cv_.wait(lock, [&] { return pending_[g].done; });
    wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (pending_[g].error) {
      const std::exception_ptr error = pending_[g].error;
      pending_.erase(g);
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        throw ExecError("gathering the weights of `" + placement_.blocks[g].module + "` failed: " + ErrorText(e));
      }
    }
    buffer = pending_[g].buffer;
  }
  const plan::WeightBlock& block = placement_.blocks[g];
  // What this rank sent for it: its slice to each other weight rank (recorded here, on the job's
  // thread, as the counters are not the gather thread's to touch).
  ctx_.counters().Record(dist::Axis::kWeights, dist::CommOp::kAllGather, block.slice_bytes * (placement_.ranks - 1));
  if (next >= 0) Request(static_cast<size_t>(next));
  std::vector<at::Tensor> params;
  for (size_t k = 0; k < block.params.size(); ++k) {
    const at::ScalarType dtype = DtypeNamed(block.dtypes[k], block.params[k]);
    int64_t numel = 1;
    for (int64_t d : block.shapes[k]) numel *= d;
    const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
    params.push_back(buffer.narrow(0, block.offsets[k], bytes).view(dtype).view(block.shapes[k]));
  }
  return params;
}

void WeightStream::Release(size_t g) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(g);  // the buffer is free again once the views the run made of it are gone
}

}  // namespace weft::exec

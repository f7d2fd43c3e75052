#include "runtime/nn/onednn_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <atomic>
#include <string>
#include <vector>

#include "runtime/nn/cpu_kernels.h"

namespace weft::nn::onednn {
namespace {

std::optional<c10::OperatorHandle> Find(const char* name, const char* overload) {
  if (!at::hasMKLDNN()) return std::nullopt;
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

// mkldnn::_linear_pointwise(X, W, B?, attr, scalars, algorithm)
const std::optional<c10::OperatorHandle>& PointwiseOp() {
  static const auto op = Find("mkldnn::_linear_pointwise", "");
  return op;
}
// mkldnn::_linear_pointwise.binary(X, other, W, B?, attr): attr "add" gives X W^T + B + other.
const std::optional<c10::OperatorHandle>& BinaryOp() {
  static const auto op = Find("mkldnn::_linear_pointwise", "binary");
  return op;
}
// mkldnn::_reorder_linear_weight(W, batch_size?)
const std::optional<c10::OperatorHandle>& ReorderOp() {
  static const auto op = Find("mkldnn::_reorder_linear_weight", "");
  return op;
}

std::atomic<int64_t> g_packed_bytes{0};

// Whether `bytes` more of packed copies fit: the process's copies stay under a quarter of
// physical memory, and a pack never leaves less than a quarter of it free (several ranks on one
// machine each hold their own copies, so the second bound is the one that protects them).
bool PackFits(int64_t held_after) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * page;
  const int64_t free_now = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  const int64_t growth = held_after - g_packed_bytes.load();
  return held_after <= physical / 4 && free_now - growth >= physical / 4;
}

// The weight block to multiply by: its cached packed copy, a new one, or (over budget) the
// plain block. A refused pack is remembered, so the memory check runs once per weight, not on
// every call.
std::mutex g_transient_mu;
std::vector<std::pair<uintptr_t, uintptr_t>> g_transient;  // [begin, end)

bool Transient(const at::Tensor& t) {
  const auto p = reinterpret_cast<uintptr_t>(t.storage().data());
  std::lock_guard<std::mutex> lock(g_transient_mu);
  for (const auto& [begin, end] : g_transient) {
    if (p >= begin && p < end) return true;
  }
  return false;
}

at::Tensor WeightBlock(Linear& proj, const at::Tensor& weight, int64_t offset, int64_t width, int64_t rows) {
  if (Transient(weight)) return weight.narrow(1, offset, width).contiguous();
  std::vector<Linear::PackedWeight>& cache = proj.packed_weights();
  auto entry = std::find_if(cache.begin(), cache.end(), [&](const auto& e) { return e.offset == offset && e.width == width; });
  if (entry == cache.end()) entry = cache.insert(cache.end(), Linear::PackedWeight{{}, {}, -1, offset, width, 0});
  const bool current = entry->source.defined() && entry->source.is_same(weight) && entry->version == weight._version();
  if (current && entry->packed.defined()) return entry->packed;
  const at::Tensor block = weight.narrow(1, offset, width).contiguous();
  if (current) return block;  // known not to fit
  const int64_t bytes = block.numel() * static_cast<int64_t>(sizeof(float));
  g_packed_bytes -= entry->bytes;
  *entry = {at::Tensor(), weight, weight._version(), offset, width, 0};
  if (!PackFits(g_packed_bytes.load() + bytes)) return block;
  std::vector<c10::IValue> stack{block, c10::IValue(rows)};
  ReorderOp()->callBoxed(&stack);
  entry->packed = stack.at(0).toTensor();
  entry->bytes = bytes;
  g_packed_bytes += bytes;
  return entry->packed;
}

}  // namespace

bool Available() { return PointwiseOp() && BinaryOp() && ReorderOp(); }

int64_t PackedBytes() { return g_packed_bytes.load(); }

void MarkTransient(const void* begin, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_transient_mu);
  const auto b = reinterpret_cast<uintptr_t>(begin);
  g_transient.emplace_back(b, b + static_cast<uintptr_t>(bytes));
}

at::Tensor Matmul(Linear& proj, const at::Tensor& weight, const at::Tensor& x, int64_t offset, int64_t width,
                  const std::optional<at::Tensor>& bias, Epilogue epilogue, const at::Tensor* add) {
  TORCH_CHECK(Available(), "oneDNN linear ops are not registered in this LibTorch");
  TORCH_CHECK(add == nullptr || epilogue == Epilogue::kNone, "oneDNN Matmul: `add` needs no other epilogue");
  TORCH_CHECK(x.size(-1) == width, "oneDNN Matmul `", proj.fqn(), "`: input width ", x.size(-1), " but the block has ",
              width, " columns");
  const at::Tensor input = x.reshape({-1, width}).contiguous();
  const at::Tensor w = WeightBlock(proj, weight, offset, width, input.size(0));
  const c10::IValue b = bias ? c10::IValue(*bias) : c10::IValue();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = weight.size(0);
  std::vector<c10::IValue> stack;
  if (add != nullptr) {
    stack = {input, add->reshape({-1, weight.size(0)}).contiguous(), w, b, c10::IValue(std::string("add"))};
    BinaryOp()->callBoxed(&stack);
  } else {
    // The tanh GELU runs as weft's own pass over the result: oneDNN's "gelu"/"tanh" post-op
    // costs 3x as much on AVX2 (10 ms vs 3 ms per million floats, bench in cpu_kernels.h).
    const bool erf = epilogue == Epilogue::kGeluErf;
    stack = {input, w, b, c10::IValue(std::string(erf ? "gelu" : "none")),
             c10::IValue(c10::List<std::optional<at::Scalar>>()), c10::IValue(std::string(erf ? "none" : ""))};
    PointwiseOp()->callBoxed(&stack);
  }
  at::Tensor out = stack.at(0).toTensor();
  if (epilogue == Epilogue::kGeluTanh) {
    TORCH_CHECK(out.is_contiguous() && out.scalar_type() == at::kFloat, "oneDNN Matmul `", proj.fqn(),
                "`: expected a contiguous fp32 result");
    cpu::GeluTanhInPlace(out.data_ptr<float>(), out.numel());
  }
  return out.view(shape);
}

}  // namespace weft::nn::onednn

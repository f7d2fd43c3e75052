#include "compiler/cost/node_cost.h"

#include <string_view>
#include <unordered_set>

namespace weft::cost {
namespace {

constexpr std::string_view kAten = "torch.ops.aten.";

// The op's name without the aten prefix and overload ("linear" of
// "torch.ops.aten.linear.default"); "" for a non-aten target.
std::string_view OpName(const std::string& target) {
  std::string_view t(target);
  if (t.substr(0, kAten.size()) != kAten) return {};
  t.remove_prefix(kAten.size());
  const size_t dot = t.find('.');
  return dot == std::string_view::npos ? t : t.substr(0, dot);
}

struct TensorInfo {
  std::vector<int64_t> sizes;
  int64_t elem = 0;
  std::string dtype;
  double Numel() const {
    double n = 1;
    for (int64_t s : sizes) n *= static_cast<double>(s);
    return n;
  }
  double Bytes() const { return Numel() * static_cast<double>(elem); }
};

TensorInfo Info(const program::Program& p, const program::Bindings& b, const std::string& name) {
  TensorInfo t;
  const program::TensorMeta* meta = p.FindTensor(name);
  if (meta == nullptr) return t;
  try {
    t.sizes = b.Sizes(*meta);
  } catch (const std::exception&) {
    // A size the workload does not determine (an unbacked one): the hint stands in.
    for (const program::SymInt& s : meta->sizes) t.sizes.push_back(s.value);
  }
  t.elem = program::ScalarTypeBytes(meta->dtype);
  t.dtype = program::ScalarTypeName(meta->dtype);
  return t;
}

std::vector<TensorInfo> TensorInputs(const program::Program& p, const program::Node& n, const program::Bindings& b) {
  std::vector<TensorInfo> out;
  for (const program::NamedArgument& a : n.inputs) {
    if (a.arg.kind != program::Argument::Kind::kTensor) continue;
    out.push_back(Info(p, b, a.arg.name));
  }
  return out;
}

bool Floating(const std::string& dtype) { return dtype == "f32" || dtype == "bf16" || dtype == "f16" || dtype == "f64"; }

}  // namespace

double TensorBytes(const program::Program& p, const program::Bindings& b, const std::string& name) {
  return Info(p, b, name).Bytes();
}

const char* OpClassName(OpClass c) {
  switch (c) {
    case OpClass::kFree:
      return "free";
    case OpClass::kMatmul:
      return "matmul";
    case OpClass::kAttention:
      return "attention";
    case OpClass::kMemory:
      return "memory";
  }
  return "memory";
}

bool IsViewOp(const std::string& target) {
  if (target.compare(0, kAten.size(), kAten) != 0) return true;  // _operator.*, sym ops, getitem, higher-order
  static const std::unordered_set<std::string_view> kViews = {
      "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "slice", "select", "unsqueeze",
      "squeeze", "alias", "unflatten", "flatten", "split", "split_with_sizes", "chunk", "unbind", "narrow",
      "as_strided", "detach", "sym_size", "sym_numel", "sym_stride", "lift_fresh_copy", "view_as", "expand_as",
      "movedim", "swapaxes", "diagonal", "unfold", "_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range",
      "sym_constrain_range_for_size", "scalar_tensor", "item", "_local_scalar_dense", "dropout"};
  return kViews.count(OpName(target)) > 0;
}

NodeCost CostOfNode(const program::Program& p, const program::Node& n, const program::Bindings& b) {
  NodeCost c;
  const std::string_view op = OpName(n.target);
  const std::vector<TensorInfo> in = TensorInputs(p, n, b);
  std::vector<TensorInfo> out;
  for (const program::Argument& o : n.outputs) {
    for (const std::string& v : o.TensorNames()) out.push_back(Info(p, b, v));
  }
  for (const TensorInfo& t : in) {
    if (Floating(t.dtype)) {
      c.dtype = t.dtype;
      break;
    }
  }
  if (c.dtype.empty() && !out.empty()) c.dtype = out[0].dtype;
  double in_bytes = 0, out_bytes = 0;
  for (const TensorInfo& t : in) in_bytes += t.Bytes();
  for (const TensorInfo& t : out) out_bytes += t.Bytes();
  if (IsViewOp(n.target)) {
    c.op_class = OpClass::kFree;
    for (const program::NamedArgument& a : n.inputs) {
      if (a.arg.kind == program::Argument::Kind::kTensor) c.aliases.push_back(a.arg.name);
    }
    // reshape / flatten copy a non-contiguous input; the cost model treats them as views, the
    // fitted overhead absorbs the rare copy.
    return c;
  }
  c.out_bytes = out_bytes;
  c.bytes = in_bytes + out_bytes;
  const double out_numel = out.empty() ? 0 : out[0].Numel();
  auto matmul = [&](double k) {
    c.op_class = OpClass::kMatmul;
    c.flops = 2 * out_numel * k;
    const double rows = out.empty() || out[0].sizes.empty() ? 1 : out_numel / static_cast<double>(out[0].sizes.back());
    const double cols = out.empty() || out[0].sizes.empty() ? 1 : static_cast<double>(out[0].sizes.back());
    c.size = rows * cols * k;
  };
  if ((op == "linear" || op == "matmul" || op == "mm" || op == "bmm") && !in.empty() && !in[0].sizes.empty()) {
    matmul(static_cast<double>(in[0].sizes.back()));
  } else if ((op == "addmm" || op == "baddbmm" || op == "addbmm") && in.size() >= 2 && !in[1].sizes.empty()) {
    matmul(static_cast<double>(in[1].sizes.back()));
  } else if ((op == "convolution" || op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "_convolution") &&
             in.size() >= 2 && !in[1].sizes.empty() && in[1].sizes[0] > 0) {
    matmul(in[1].Numel() / static_cast<double>(in[1].sizes[0]));
  } else if ((op == "scaled_dot_product_attention" || op == "_scaled_dot_product_flash_attention_for_cpu" ||
              op == "_scaled_dot_product_flash_attention" || op == "_scaled_dot_product_efficient_attention") &&
             in.size() >= 3 && in[0].sizes.size() == 4 && in[1].sizes.size() == 4) {
    // q [B, H, Sq, D], k [B, H, Skv, D], v [B, H, Skv, Dv].
    const double B = static_cast<double>(in[0].sizes[0]), H = static_cast<double>(in[0].sizes[1]);
    const double Sq = static_cast<double>(in[0].sizes[2]), D = static_cast<double>(in[0].sizes[3]);
    const double Skv = static_cast<double>(in[1].sizes[2]);
    const double Dv = in[2].sizes.size() == 4 ? static_cast<double>(in[2].sizes[3]) : D;
    c.op_class = OpClass::kAttention;
    c.flops = 2 * B * H * Sq * Skv * (D + Dv);
    c.size = Skv;
  } else {
    c.op_class = OpClass::kMemory;
    c.size = c.bytes;
  }
  return c;
}

}  // namespace weft::cost

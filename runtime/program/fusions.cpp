#include "runtime/program/fusions.h"

#include <ATen/ATen.h>

#include <optional>
#include <set>
#include <unordered_map>

#include "runtime/nn/cpu_kernels.h"
#include "runtime/nn/fused.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/onednn_linear.h"
#include "runtime/program/node_uses.h"
#include "runtime/program/schema_types.h"

namespace weft::interp {
namespace {

using program::Argument;
using program::Node;
using AK = program::Argument::Kind;

bool IsOne(const Argument* a) {
  return a != nullptr && ((a->kind == AK::kInt && a->i == 1) || (a->kind == AK::kFloat && a->f == 1.0));
}

int64_t IntInput(const Node& n, const char* name, int64_t missing) {
  const Argument* a = Input(n, name);
  return a != nullptr && a->kind == AK::kInt ? a->i : missing;
}

// ---------------------------------------------------------------------------------------------
// Kernels. Each gets its inputs on the stack, leaves its output there.

bool OneDnn(const at::Tensor& x, const at::Tensor& w) {
  return nn::FusedKernelsEnabled() && nn::onednn::Available() && x.is_cpu() && x.scalar_type() == at::kFloat &&
         w.scalar_type() == at::kFloat && w.dim() == 2;
}

std::optional<at::Tensor> OptionalTensor(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toTensor();
}

class LinearGelu final : public FastKernel {
 public:
  explicit LinearGelu(std::string approximate) : approximate_(std::move(approximate)) {}
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    const at::Tensor x = stack[0].toTensor(), w = stack[1].toTensor();
    const std::optional<at::Tensor> b = OptionalTensor(stack[2]);
    at::Tensor out;
    if (OneDnn(x, w) && (!b || b->scalar_type() == at::kFloat)) {
      Holder(w, b.has_value());
      out = nn::onednn::Matmul(*holder_, w, x, 0, w.size(1), b,
                               approximate_ == "tanh" ? nn::onednn::Epilogue::kGeluTanh : nn::onednn::Epilogue::kGeluErf);
    } else {
      out = at::gelu(at::linear(x, w, b), approximate_);
    }
    stack.clear();
    stack.push_back(std::move(out));
  }

 private:
  void Holder(const at::Tensor& w, bool bias) {
    if (!holder_ || holder_->in_features() != w.size(1) || holder_->out_features() != w.size(0)) {
      holder_ = std::make_unique<nn::Linear>(w.size(1), w.size(0), bias);
    }
  }
  std::string approximate_;
  std::unique_ptr<nn::Linear> holder_;
};

class LinearOfCat final : public FastKernel {
 public:
  explicit LinearOfCat(size_t parts) : parts_(parts) {}
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < parts_; ++i) parts.push_back(stack[i].toTensor());
    const at::Tensor w = stack[parts_].toTensor();
    const std::optional<at::Tensor> b = OptionalTensor(stack[parts_ + 1]);
    bool fusable = OneDnn(parts[0], w) && (!b || b->scalar_type() == at::kFloat);
    int64_t width = 0;
    for (const at::Tensor& p : parts) {
      fusable = fusable && p.scalar_type() == at::kFloat && p.is_cpu() && p.dim() == parts[0].dim() &&
                p.sizes().slice(0, p.dim() - 1) == parts[0].sizes().slice(0, parts[0].dim() - 1);
      width += p.size(-1);
    }
    fusable = fusable && width == w.size(1);
    at::Tensor out;
    if (fusable) {
      if (!holder_ || holder_->in_features() != w.size(1) || holder_->out_features() != w.size(0)) {
        holder_ = std::make_unique<nn::Linear>(w.size(1), w.size(0), b.has_value());
      }
      int64_t offset = 0;
      for (const at::Tensor& p : parts) {
        out = nn::onednn::Matmul(*holder_, w, p, offset, p.size(-1), out.defined() ? std::nullopt : b,
                                 nn::onednn::Epilogue::kNone, out.defined() ? &out : nullptr);
        offset += p.size(-1);
      }
    } else {
      out = at::linear(at::cat(parts, -1), w, b);
    }
    stack.clear();
    stack.push_back(std::move(out));
  }

 private:
  size_t parts_;
  std::unique_ptr<nn::Linear> holder_;
};

class ModulatedLayerNorm final : public FastKernel {
 public:
  ModulatedLayerNorm(std::vector<int64_t> shape, double eps) : shape_(std::move(shape)), eps_(eps) {}
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    const at::Tensor x = stack[0].toTensor(), scale = stack[1].toTensor(), shift = stack[2].toTensor();
    at::Tensor out;
    const bool fusable = nn::FusedKernelsEnabled() && shape_.size() == 1 && scale.dim() == 2 && scale.size(0) == 1 &&
                         shift.sizes() == scale.sizes() && scale.size(1) == shape_[0] &&
                         scale.scalar_type() == x.scalar_type() && shift.scalar_type() == x.scalar_type();
    if (fusable) {
      out = at::layer_norm(x, shape_, (1 + scale).reshape({-1}), shift.reshape({-1}), eps_);
    } else {
      out = at::layer_norm(x, shape_, {}, {}, eps_) * (scale.unsqueeze(1) + 1) + shift.unsqueeze(1);
    }
    stack.clear();
    stack.push_back(std::move(out));
  }

 private:
  std::vector<int64_t> shape_;
  double eps_;
};

class Rotary final : public FastKernel {
 public:
  // dtypes of the chain's casts: x -> first, rotated -> second, the sum -> last (nullopt: none).
  Rotary(std::optional<at::ScalarType> first, std::optional<at::ScalarType> second, std::optional<at::ScalarType> last)
      : first_(first), second_(second), last_(last) {}
  void Run(std::vector<c10::IValue>& stack, std::vector<c10::IValue>&) override {
    const at::Tensor x = stack[0].toTensor(), cos = stack[1].toTensor(), sin = stack[2].toTensor();
    at::Tensor out;
    const bool f32 = [&] {
      for (const auto& t : {first_, second_, last_}) {
        if (t && *t != at::kFloat) return false;
      }
      return true;
    }();
    if (nn::FusedKernelsEnabled() && f32 && x.is_cpu() && x.dim() == 4 && x.scalar_type() == at::kFloat &&
        cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat && x.size(3) % 2 == 0 &&
        cos.numel() == x.size(1) * x.size(3) && sin.numel() == cos.numel()) {
      const at::Tensor xc = x.contiguous();
      const at::Tensor c = cos.reshape({x.size(1), x.size(3)}).contiguous();
      const at::Tensor s = sin.reshape({x.size(1), x.size(3)}).contiguous();
      out = at::empty_like(xc);
      nn::cpu::Rotate(xc.data_ptr<float>(), x.size(0), x.size(1), x.size(2), x.size(3), c.data_ptr<float>(),
                      s.data_ptr<float>(), out.data_ptr<float>());
    } else {
      std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end());
      pairs.back() /= 2;
      pairs.push_back(2);
      std::vector<at::Tensor> halves = x.reshape(pairs).unbind(-1);
      const at::Tensor rotated = at::stack({halves[1].neg(), halves[0]}, -1).flatten(3);
      const at::Tensor a = first_ ? x.to(*first_) : x;
      const at::Tensor b = second_ ? rotated.to(*second_) : rotated;
      out = a * cos + b * sin;
      if (last_) out = out.to(*last_);
    }
    stack.clear();
    stack.push_back(std::move(out));
  }

 private:
  std::optional<at::ScalarType> first_, second_, last_;
};

// ---------------------------------------------------------------------------------------------
// Matchers.

class Matcher {
 public:
  explicit Matcher(const program::Program& p) : p_(p), uses_(p) {}

  std::vector<Fusion> Run() {
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const std::string& t = p_.nodes[i].target;
      if (t == "torch.ops.aten.gelu.default") LinearGelu_(i);
      if (t == "torch.ops.aten.linear.default") CatLinear(i);
      if (t == "torch.ops.aten.add.Tensor") ModulatedLn(i);
      if (t == "torch.ops.aten.to.dtype" || t == "torch.ops.aten.add.Tensor") RotaryEmb(i);
    }
    return std::move(found_);
  }

 private:
  bool Free(const std::vector<size_t>& nodes) const {
    for (size_t n : nodes) {
      if (taken_.count(n) != 0) return false;
    }
    return true;
  }

  void Add(std::string name, std::vector<size_t> nodes, std::vector<std::string> inputs, std::string output,
           std::unique_ptr<FastKernel> kernel) {
    // The checks of the values the chain removes go with it.
    const std::vector<size_t> chain = nodes;
    for (size_t n : chain) {
      for (const Argument& o : N(n).outputs) {
        for (const std::string& v : o.TensorNames()) {
          if (v == output) continue;
          for (size_t c : uses_.Checks(v)) nodes.push_back(c);
        }
      }
    }
    if (!Free(nodes)) return;
    for (size_t n : nodes) taken_.insert(n);
    std::sort(nodes.begin(), nodes.end());
    found_.push_back({std::move(name), std::move(nodes), std::move(inputs), std::move(output), std::move(kernel)});
  }

  const Node& N(size_t i) const { return p_.nodes[i]; }

  void LinearGelu_(size_t g) {
    auto l = uses_.SoleProducer(TensorInput(N(g), "self"), "torch.ops.aten.linear.default");
    if (!l) return;
    const Argument* approximate = Input(N(g), "approximate");
    const std::string mode = approximate != nullptr && approximate->kind == AK::kString ? approximate->s : "none";
    Add("linear+gelu", {*l, g}, {TensorInput(N(*l), "input"), TensorInput(N(*l), "weight"), TensorInput(N(*l), "bias")},
        Output(N(g)), std::make_unique<LinearGelu>(mode));
  }

  void CatLinear(size_t l) {
    const std::string in = TensorInput(N(l), "input");
    auto c = uses_.SoleProducer(in, "torch.ops.aten.cat.default");
    if (!c) return;
    const program::TensorMeta* meta = p_.FindTensor(in);
    const Argument* tensors = Input(N(*c), "tensors");
    if (meta == nullptr || tensors == nullptr || tensors->kind != AK::kTensors || tensors->names.size() < 2) return;
    const int64_t dim = IntInput(N(*c), "dim", 0);
    const int64_t rank = static_cast<int64_t>(meta->sizes.size());
    if (dim != -1 && dim != rank - 1) return;
    std::vector<std::string> inputs = tensors->names;
    inputs.push_back(TensorInput(N(l), "weight"));
    inputs.push_back(TensorInput(N(l), "bias"));
    Add("cat+linear", {*c, l}, inputs, Output(N(l)), std::make_unique<LinearOfCat>(tensors->names.size()));
  }

  // add(mul(layer_norm(x), add(unsqueeze(scale, 1), 1)), unsqueeze(shift, 1)), either operand order.
  void ModulatedLn(size_t a) {
    const std::string lhs = TensorInput(N(a), "self"), rhs = TensorInput(N(a), "other");
    if (lhs.empty() || rhs.empty() || (Input(N(a), "alpha") != nullptr && !IsOne(Input(N(a), "alpha")))) return;
    for (int order = 0; order < 2; ++order) {
      const std::string& mul_v = order == 0 ? lhs : rhs;
      const std::string& shift_v = order == 0 ? rhs : lhs;
      auto m = uses_.SoleProducer(mul_v, "torch.ops.aten.mul.Tensor");
      auto u2 = uses_.SoleProducer(shift_v, "torch.ops.aten.unsqueeze.default");
      if (!m || !u2 || IntInput(N(*u2), "dim", 0) != 1) continue;
      const std::string m1 = TensorInput(N(*m), "self"), m2 = TensorInput(N(*m), "other");
      for (int side = 0; side < 2; ++side) {
        auto ln = uses_.SoleProducer(side == 0 ? m1 : m2, "torch.ops.aten.layer_norm.default");
        auto s = uses_.SoleProducer(side == 0 ? m2 : m1, "torch.ops.aten.add.Tensor");
        if (!ln || !s) continue;
        const Argument* w = Input(N(*ln), "weight");
        const Argument* b = Input(N(*ln), "bias");
        const Argument* shape = Input(N(*ln), "normalized_shape");
        const Argument* eps = Input(N(*ln), "eps");
        if ((w != nullptr && w->kind != AK::kNone) || (b != nullptr && b->kind != AK::kNone) || shape == nullptr ||
            shape->kind != AK::kInts) {
          continue;
        }
        auto u1 = uses_.SoleProducer(TensorInput(N(*s), "self"), "torch.ops.aten.unsqueeze.default");
        if (!u1 || !IsOne(Input(N(*s), "other")) || IntInput(N(*u1), "dim", 0) != 1) continue;
        if (Input(N(*s), "alpha") != nullptr && !IsOne(Input(N(*s), "alpha"))) continue;
        const double e = eps != nullptr && eps->kind == AK::kFloat ? eps->f : 1e-5;
        Add("layer_norm+modulation", {*ln, *u1, *s, *m, *u2, a},
            {TensorInput(N(*ln), "input"), TensorInput(N(*u1), "self"), TensorInput(N(*u2), "self")}, Output(N(a)),
            std::make_unique<ModulatedLayerNorm>(shape->ints, e));
        return;
      }
    }
  }

  std::optional<at::ScalarType> CastDtype(size_t to) const {
    const Argument* d = Input(N(to), "dtype");
    if (d == nullptr || d->kind != AK::kScalarType) return std::nullopt;
    return C10ScalarType(static_cast<program::ScalarType>(d->i));
  }

  // to?(add(mul(to?(x), cos), mul(to?(flatten(stack([neg(unbind(reshape(x))[1]), unbind[0]]), 3)), sin)))
  void RotaryEmb(size_t end) {
    size_t add = end;
    std::optional<size_t> last_cast;
    if (N(end).target == "torch.ops.aten.to.dtype") {
      auto a = uses_.SoleProducer(TensorInput(N(end), "self"), "torch.ops.aten.add.Tensor");
      if (!a) return;
      add = *a;
      last_cast = end;
    } else if (Free({end}) && IsRotaryTail(end)) {
      return;  // the to.dtype after it (when there is one) starts the match
    }
    auto m1 = uses_.SoleProducer(TensorInput(N(add), "self"), "torch.ops.aten.mul.Tensor");
    auto m2 = uses_.SoleProducer(TensorInput(N(add), "other"), "torch.ops.aten.mul.Tensor");
    if (!m1 || !m2) return;
    // m1 = x' * cos, m2 = rotated' * sin, x' and rotated' optionally cast.
    auto unwrap = [&](const std::string& v, std::optional<size_t>& cast) {
      if (auto t = uses_.SoleProducer(v, "torch.ops.aten.to.dtype")) {
        cast = *t;
        return TensorInput(N(*t), "self");
      }
      return v;
    };
    std::optional<size_t> c1, c2;
    const std::string x = unwrap(TensorInput(N(*m1), "self"), c1);
    const std::string cos = TensorInput(N(*m1), "other");
    const std::string rot = unwrap(TensorInput(N(*m2), "self"), c2);
    const std::string sin = TensorInput(N(*m2), "other");
    auto fl = uses_.SoleProducer(rot, "torch.ops.aten.flatten.using_ints");
    if (!fl || IntInput(N(*fl), "start_dim", 0) != 3) return;
    auto st = uses_.SoleProducer(TensorInput(N(*fl), "self"), "torch.ops.aten.stack.default");
    if (!st || IntInput(N(*st), "dim", 0) != -1) return;
    const Argument* pair = Input(N(*st), "tensors");
    if (pair == nullptr || pair->kind != AK::kTensors || pair->names.size() != 2) return;
    auto neg = uses_.SoleProducer(pair->names[0], "torch.ops.aten.neg.default");
    if (!neg) return;
    // unbind(reshape(x), -1) -> (real, imag): stack([-imag, real]).
    auto imag_u = uses_.SoleProducer(TensorInput(N(*neg), "self"), "torch.ops.aten.unbind.int");
    auto real_u = uses_.SoleProducer(pair->names[1], "torch.ops.aten.unbind.int");
    if (!imag_u || !real_u || *imag_u != *real_u || IntInput(N(*imag_u), "dim", 0) != -1) return;
    const Node& unbind = N(*imag_u);
    if (unbind.outputs.size() != 1 || unbind.outputs[0].names.size() != 2 ||
        unbind.outputs[0].names[0] != pair->names[1] || unbind.outputs[0].names[1] != TensorInput(N(*neg), "self")) {
      return;
    }
    auto reshape = uses_.SoleProducer(TensorInput(unbind, "self"), "torch.ops.aten.reshape.default");
    if (!reshape || TensorInput(N(*reshape), "self") != x) return;
    std::vector<size_t> nodes = {*reshape, *imag_u, *neg, *st, *fl, *m1, *m2, add};
    for (const auto& c : {c1, c2, last_cast}) {
      if (c) nodes.push_back(*c);
    }
    Add("rotary", nodes, {x, cos, sin}, Output(N(end)),
        std::make_unique<Rotary>(c1 ? CastDtype(*c1) : std::nullopt, c2 ? CastDtype(*c2) : std::nullopt,
                                 last_cast ? CastDtype(*last_cast) : std::nullopt));
  }

  // Whether `add`'s output feeds a to.dtype (then the match starts there).
  bool IsRotaryTail(size_t add) const {
    const std::string out = Output(N(add));
    for (size_t i = add + 1; i < p_.nodes.size(); ++i) {
      if (N(i).target == "torch.ops.aten.to.dtype" && TensorInput(N(i), "self") == out) return true;
    }
    return false;
  }

  const program::Program& p_;
  Uses uses_;
  std::set<size_t> taken_;
  std::vector<Fusion> found_;
};

}  // namespace

std::vector<Fusion> FindFusions(const program::Program& program, c10::Device device) {
  if (!device.is_cpu()) return {};
  return Matcher(program).Run();
}

}  // namespace weft::interp

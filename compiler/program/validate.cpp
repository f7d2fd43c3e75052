#include "compiler/program/validate.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "compiler/program/archive.h"
#include "compiler/program/expr.h"

namespace weft::program {
namespace {

constexpr const char* kMalformed = ": the program is malformed";

bool KnownScalarType(ScalarType t) {
  const int v = static_cast<int>(t);
  return (v >= 1 && v <= 13) || (v >= 28 && v <= 35);
}

// A symbolic size as infix ("s2*s87"), or as recorded when it does not parse.
std::string SizeText(const SymInt& s) {
  if (!s.symbolic) return std::to_string(s.value);
  try {
    return Expr::Parse(s.expr).Infix();
  } catch (const ExprError&) {
    return s.expr;
  }
}

std::string SizesText(const std::vector<SymInt>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + SizeText(sizes[i]);
  return out + "]";
}

// Equal, different, or unknown (a symbolic size another spelling could equal).
std::optional<bool> SameSize(const SymInt& a, const SymInt& b) {
  if (!a.symbolic && !b.symbolic) return a.value == b.value;
  if (a.symbolic && b.symbolic && a.expr == b.expr) return true;
  return std::nullopt;
}

bool IsAten(const std::string& target, std::initializer_list<const char*> ops) {
  static const std::string kAten = "torch.ops.aten.";
  if (target.compare(0, kAten.size(), kAten) != 0) return false;
  for (const char* op : ops) {
    if (target.compare(kAten.size(), std::string::npos, op) == 0) return true;
  }
  return false;
}

// Elementwise ops whose result has the broadcast shape of all their tensor inputs (in-place
// variants included: a valid in-place op broadcasts to `self`).
bool Broadcasting(const std::string& target) {
  return IsAten(target, {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "div.Tensor_mode",
                         "pow.Tensor_Tensor", "where.self", "masked_fill.Scalar", "masked_fill.Tensor",
                         "maximum.default", "minimum.default", "lerp.Scalar", "addcmul.default", "add_.Tensor",
                         "sub_.Tensor", "mul_.Tensor", "div_.Tensor", "addcmul_.default"});
}

// Ops whose result has the shape of their one tensor input.
bool SameShape(const std::string& target) {
  return IsAten(target, {"add.Scalar", "sub.Scalar", "rsub.Scalar", "mul.Scalar", "div.Scalar", "pow.Tensor_Scalar",
                         "neg.default", "exp.default", "log.default", "silu.default", "gelu.default",
                         "relu.default", "tanh.default", "sigmoid.default", "sin.default", "cos.default",
                         "rsqrt.default", "sqrt.default", "reciprocal.default", "abs.default", "erf.default",
                         "square.default", "clamp.default", "clamp_min.default", "clamp_max.default",
                         "to.dtype", "to.dtype_layout", "to.device", "_to_copy.default", "clone.default",
                         "contiguous.default", "alias.default", "detach.default", "dropout.default",
                         "softplus.default", "leaky_relu.default", "log1p.default", "expm1.default"});
}

class Validator {
 public:
  Validator(const std::vector<Argument>& inputs, const std::vector<Argument>& outputs, const std::vector<Node>& nodes,
            const std::unordered_map<std::string, TensorMeta>& tensor_values, std::string where)
      : inputs_(inputs), outputs_(outputs), nodes_(nodes), tensor_values_(tensor_values), where_(std::move(where)) {}

  void Run() {
    CollectDefinitions();
    for (size_t i = 0; i < nodes_.size(); ++i) CheckReads(i);
    for (size_t k = 0; k < outputs_.size(); ++k) {
      for (const std::string& v : Values(outputs_[k])) {
        if (defined_at_.count(v) == 0) {
          Fail("graph output " + std::to_string(k) + " is `" + v + "`, which no graph input or node defines");
        }
      }
    }
    for (const Argument& a : inputs_) {
      for (const std::string& t : a.TensorNames()) CheckMeta(t, "graph input");
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const Argument& o : nodes_[i].outputs) {
        for (const std::string& t : o.TensorNames()) CheckMeta(t, "output of " + NodeText(i));
      }
      CheckShapes(i);
    }
  }

 private:
  static constexpr size_t kGraphInput = static_cast<size_t>(-1);

  static std::vector<std::string> Values(const Argument& a) {
    std::vector<std::string> v = a.TensorNames();
    for (std::string& s : a.SymbolNames()) v.push_back(std::move(s));
    return v;
  }

  std::string NodeText(size_t i) const {
    const Node& n = nodes_[i];
    return "node " + std::to_string(i) + " (`" + n.name + "`, " + n.target + ")";
  }

  std::string DefinerText(size_t at) const { return at == kGraphInput ? "a graph input" : NodeText(at); }

  [[noreturn]] void Fail(const std::string& what) const { throw ProgramError(where_ + ": " + what + kMalformed); }

  void Define(const std::string& v, size_t at) {
    auto [it, fresh] = defined_at_.emplace(v, at);
    if (!fresh) {
      Fail((at == kGraphInput ? std::string("graph input") : NodeText(at)) + " defines `" + v + "`, which " +
           DefinerText(it->second) + " already defines");
    }
  }

  void CollectDefinitions() {
    for (const Argument& a : inputs_) {
      for (const std::string& v : Values(a)) Define(v, kGraphInput);
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const Argument& o : nodes_[i].outputs) {
        for (const std::string& v : Values(o)) Define(v, i);
      }
    }
  }

  void CheckReads(size_t i) const {
    for (const NamedArgument& in : nodes_[i].inputs) {
      for (const std::string& v : Values(in.arg)) {
        auto it = defined_at_.find(v);
        if (it == defined_at_.end()) {
          Fail(NodeText(i) + " reads `" + v + "` (input `" + in.name + "`), which no graph input or node defines");
        }
        if (it->second != kGraphInput && it->second >= i) {
          Fail(NodeText(i) + " reads `" + v + "` (input `" + in.name + "`) before " + NodeText(it->second) +
               " defines it (a cycle, or nodes out of order)");
        }
      }
    }
  }

  void CheckMeta(const std::string& t, const std::string& what) const {
    auto it = tensor_values_.find(t);
    if (it == tensor_values_.end()) Fail("tensor `" + t + "` (" + what + ") has no recorded sizes and dtype");
    const TensorMeta& m = it->second;
    if (!KnownScalarType(m.dtype)) {
      Fail("tensor `" + t + "` (" + what + ") has dtype " + std::to_string(static_cast<int>(m.dtype)) +
           ", which is no dtype of the export schema");
    }
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      if (!m.sizes[d].symbolic && m.sizes[d].value < 0) {
        Fail("tensor `" + t + "` (" + what + ") has size " + std::to_string(m.sizes[d].value) + " in dim " +
             std::to_string(d));
      }
    }
    int64_t elements = 1;
    for (const SymInt& x : m.sizes) {
      if (x.symbolic || x.value == 0) continue;
      if (elements > INT64_MAX / x.value) {
        Fail("tensor `" + t + "` (" + what + ") has sizes " + SizesText(m.sizes) + ": more than 2^63 elements");
      }
      elements *= x.value;
    }
    if (!m.strides.empty() && m.strides.size() != m.sizes.size()) {
      Fail("tensor `" + t + "` (" + what + ") has " + std::to_string(m.sizes.size()) + " sizes but " +
           std::to_string(m.strides.size()) + " strides");
    }
  }

  const TensorMeta& Meta(const std::string& t) const { return tensor_values_.at(t); }

  const Argument* Input(const Node& n, const char* name) const {
    for (const NamedArgument& in : n.inputs) {
      if (in.name == name) return &in.arg;
    }
    return nullptr;
  }

  std::string TensorInput(const Node& n, const char* name) const {
    const Argument* a = Input(n, name);
    return a != nullptr && a->IsTensor() ? a->name : std::string();
  }

  [[noreturn]] void Disagrees(size_t i, const std::string& out, const std::string& expected,
                              const std::vector<std::string>& from) const {
    std::string inputs;
    for (const std::string& t : from) inputs += (inputs.empty() ? "" : ", ") + ("`" + t + "` " + SizesText(Meta(t).sizes));
    Fail(NodeText(i) + ": its output `" + out + "` is recorded as " + SizesText(Meta(out).sizes) + ", but " + inputs +
         " give " + expected);
  }

  void CheckShapes(size_t i) const {
    const Node& n = nodes_[i];
    if (n.outputs.size() != 1 || !n.outputs[0].IsTensor()) return;
    const std::string& out = n.outputs[0].name;
    const std::vector<SymInt>& os = Meta(out).sizes;
    std::vector<std::string> tensors;
    for (const NamedArgument& in : n.inputs) {
      if (in.arg.IsTensor()) tensors.push_back(in.arg.name);
    }
    if (Broadcasting(n.target) || (SameShape(n.target) && tensors.size() == 1)) {
      CheckBroadcast(i, out, os, tensors);
    } else if (IsAten(n.target, {"linear.default"})) {
      CheckLinear(i, out, os);
    } else if (IsAten(n.target, {"view.default", "reshape.default", "_unsafe_view.default"})) {
      CheckView(i, out, os);
    }
  }

  void CheckBroadcast(size_t i, const std::string& out, const std::vector<SymInt>& os,
                      const std::vector<std::string>& tensors) const {
    if (tensors.empty()) return;
    size_t rank = 0;
    for (const std::string& t : tensors) rank = std::max(rank, Meta(t).sizes.size());
    if (os.size() != rank) Disagrees(i, out, "rank " + std::to_string(rank), tensors);
    for (size_t d = 0; d < rank; ++d) {
      // Aligned from the right; a constant dim of 1 broadcasts.
      std::optional<int64_t> wide;
      bool known = true;
      for (const std::string& t : tensors) {
        const std::vector<SymInt>& s = Meta(t).sizes;
        if (d + s.size() < rank) continue;
        const SymInt& x = s[d + s.size() - rank];
        if (x.symbolic) {
          known = false;
          continue;
        }
        if (x.value == 1) continue;
        if (wide && *wide != x.value) {
          Disagrees(i, out, "no broadcast shape (dim " + std::to_string(d) + " is " + std::to_string(*wide) + " and " +
                                std::to_string(x.value) + ")",
                    tensors);
        }
        wide = x.value;
      }
      if (known && !os[d].symbolic && os[d].value != wide.value_or(1)) {
        Disagrees(i, out, std::to_string(wide.value_or(1)) + " in dim " + std::to_string(d), tensors);
      }
    }
  }

  void CheckLinear(size_t i, const std::string& out, const std::vector<SymInt>& os) const {
    const Node& n = nodes_[i];
    const std::string input = TensorInput(n, "input"), weight = TensorInput(n, "weight");
    if (input.empty() || weight.empty()) return;
    const std::vector<SymInt>& is = Meta(input).sizes;
    const std::vector<SymInt>& ws = Meta(weight).sizes;
    if (ws.size() != 2 || is.empty()) return;
    if (SameSize(is.back(), ws[1]) == false) {
      Fail(NodeText(i) + ": its input `" + input + "` " + SizesText(is) + " does not match weight `" + weight + "` " +
           SizesText(ws) + " (in-features)");
    }
    std::vector<SymInt> expected(is.begin(), is.end() - 1);
    expected.push_back(ws[0]);
    bool differs = os.size() != expected.size();
    for (size_t d = 0; !differs && d < os.size(); ++d) differs = SameSize(os[d], expected[d]) == false;
    if (differs) Disagrees(i, out, SizesText(expected), {input, weight});
  }

  void CheckView(size_t i, const std::string& out, const std::vector<SymInt>& os) const {
    const Node& n = nodes_[i];
    std::string size_name = "size";  // view
    const Argument* size = Input(n, "size");
    if (size == nullptr) size = Input(n, (size_name = "shape").c_str());  // reshape
    const std::string self = TensorInput(n, "self");
    if (size == nullptr || self.empty()) return;
    std::vector<std::optional<int64_t>> asked;
    if (size->kind == Argument::Kind::kInts) {
      for (int64_t v : size->ints) asked.emplace_back(v);
    } else if (size->kind == Argument::Kind::kSymInts) {
      for (const SymIntRef& r : size->sym_ints) asked.push_back(r.is_name ? std::nullopt : std::optional<int64_t>(r.value));
    } else {
      return;
    }
    const auto asked_differs = [&](const std::string& what) {
      Fail(NodeText(i) + ": its output `" + out + "` is recorded as " + SizesText(os) + ", but its `" + size_name +
           "` argument gives " + what);
    };
    if (asked.size() != os.size()) asked_differs("rank " + std::to_string(asked.size()));
    for (size_t d = 0; d < os.size(); ++d) {
      if (asked[d] && *asked[d] >= 0 && !os[d].symbolic && os[d].value != *asked[d]) {
        asked_differs(std::to_string(*asked[d]) + " in dim " + std::to_string(d));
      }
    }
    const auto numel = [](const std::vector<SymInt>& s) -> std::optional<int64_t> {
      int64_t total = 1;
      for (const SymInt& x : s) {
        if (x.symbolic || (x.value != 0 && total > INT64_MAX / x.value)) return std::nullopt;
        total *= x.value;
      }
      return total;
    };
    const std::optional<int64_t> in_numel = numel(Meta(self).sizes), out_numel = numel(os);
    if (in_numel && out_numel && *in_numel != *out_numel) {
      Disagrees(i, out, std::to_string(*in_numel) + " elements, not " + std::to_string(*out_numel), {self});
    }
  }

  const std::vector<Argument>& inputs_;
  const std::vector<Argument>& outputs_;
  const std::vector<Node>& nodes_;
  const std::unordered_map<std::string, TensorMeta>& tensor_values_;
  const std::string where_;
  std::unordered_map<std::string, size_t> defined_at_;
};

}  // namespace

void ValidateProgram(const Program& p, const std::string& where) {
  Validator(p.inputs, p.outputs, p.nodes, p.tensor_values, where).Run();
  for (size_t k = 0; k < p.subgraphs.size(); ++k) {
    const Graph& g = p.subgraphs[k];
    Validator(g.inputs, g.outputs, g.nodes, g.tensor_values, where + " subgraph " + std::to_string(k)).Run();
  }
}

}  // namespace weft::program

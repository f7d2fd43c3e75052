#include "runtime/program/row_slices.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/program/node_uses.h"

namespace weft::interp {
namespace {

using program::Argument;
using program::Node;
using program::TensorMeta;
using AK = program::Argument::Kind;

constexpr const char* kSlice = "torch.ops.aten.slice.Tensor";

bool OneOf(const std::string& target, std::initializer_list<const char*> targets) {
  for (const char* t : targets) {
    if (target == t) return true;
  }
  return false;
}

bool SameSize(const program::SymInt& a, const program::SymInt& b) {
  return a.symbolic == b.symbolic && (a.symbolic ? a.expr == b.expr : a.value == b.value);
}

bool IsConstant(const program::SymInt& s, int64_t v) { return !s.symbolic && s.value == v; }

// The slice's dim, made non-negative by its output's rank; nullopt when it cannot be read.
std::optional<size_t> SliceDim(const program::Program& p, const Node& s) {
  const TensorMeta* out = p.FindTensor(Output(s));
  const Argument* dim = Input(s, "dim");
  if (out == nullptr) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(out->sizes.size());
  if (dim != nullptr && dim->kind != AK::kInt) return std::nullopt;  // a symbolic dim: leave it
  int64_t d = dim == nullptr ? 0 : dim->i;
  if (d < 0) d += rank;
  if (d < 0 || d >= rank) return std::nullopt;
  return static_cast<size_t>(d);
}

class Sinker {
 public:
  explicit Sinker(const program::Program& p) { r_.program = p; }

  RowSliceRewrite Run() {
    while (RemoveDeadSlice()) ++r_.dead_slices_removed;
    while (MoveOne()) ++r_.moves;
    return std::move(r_);
  }

 private:
  program::Program& P() { return r_.program; }

  // Erases nodes `drop` (indices) and inserts `before_p` ahead of node `p`.
  void Rebuild(const std::unordered_set<size_t>& drop, size_t p, std::vector<Node> before_p) {
    std::vector<Node> nodes;
    nodes.reserve(P().nodes.size() + before_p.size());
    for (size_t i = 0; i < P().nodes.size(); ++i) {
      if (i == p) {
        for (Node& n : before_p) nodes.push_back(std::move(n));
      }
      if (drop.count(i) == 0) nodes.push_back(std::move(P().nodes[i]));
    }
    P().nodes = std::move(nodes);
  }

  void DropChecksOf(const Uses& uses, const std::string& v, std::unordered_set<size_t>& drop) {
    const std::vector<size_t>& checks = uses.Checks(v);
    drop.insert(checks.begin(), checks.end());
  }

  bool RemoveDeadSlice() {
    const Uses uses(P());
    for (size_t i = 0; i < P().nodes.size(); ++i) {
      const Node& n = P().nodes[i];
      const std::string out = Output(n);
      if (n.target != kSlice || out.empty() || uses.Reads(out) != 0) continue;
      std::unordered_set<size_t> drop = {i};
      DropChecksOf(uses, out, drop);
      P().tensor_values.erase(out);
      Rebuild(drop, P().nodes.size(), {});
      return true;
    }
    return false;
  }

  std::string FreshName() {
    std::string name;
    do {
      name = "weft_rows_" + std::to_string(next_++);
    } while (P().tensor_values.count(name) != 0);
    return name;
  }

  // Which tensor inputs of `producer` carry the rows (they get the slice); nullopt when the
  // slice cannot move above it. `d` is the sliced dim of the producer's output.
  std::optional<std::vector<std::string>> RowOperands(const Node& producer, size_t d) {
    const TensorMeta* out = P().FindTensor(Output(producer));
    if (out == nullptr) return std::nullopt;
    const size_t rank = out->sizes.size();
    std::vector<std::string> carried;
    // A tensor operand: sliced when it spans the dim, whole when it broadcasts along it.
    auto tensor = [&](const std::string& name) {
      const TensorMeta* m = P().FindTensor(name);
      if (m == nullptr || m->sizes.size() > rank) return false;
      const size_t lead = rank - m->sizes.size();
      if (d < lead) return true;  // broadcast: the dim is not the operand's
      const program::SymInt& s = m->sizes[d - lead];
      if (IsConstant(s, 1) && !IsConstant(out->sizes[d], 1)) return true;
      if (!SameSize(s, out->sizes[d])) return false;
      carried.push_back(name);
      return true;
    };
    // An argument of an elementwise op: absent, a scalar, a dtype ... or a tensor operand.
    auto elementwise = [&](const Argument* a) { return a == nullptr || a->kind != AK::kTensor || tensor(a->name); };
    const std::string& t = producer.target;
    if (OneOf(t, {"torch.ops.aten.add.Tensor", "torch.ops.aten.sub.Tensor", "torch.ops.aten.mul.Tensor",
                  "torch.ops.aten.div.Tensor", "torch.ops.aten.gelu.default", "torch.ops.aten.silu.default",
                  "torch.ops.aten.neg.default", "torch.ops.aten.to.dtype"})) {
      if (!elementwise(Input(producer, "self")) || !elementwise(Input(producer, "other"))) return std::nullopt;
    } else if (t == "torch.ops.aten.linear.default") {
      if (d + 1 == rank) return std::nullopt;  // the features, not rows
      // Only where the kept rows are one block of memory (every dim before them is 1): LibTorch's
      // bf16 matmul of a strided view rounds worse than of the whole tensor (0.18 against 0.07
      // at [2, 64 of 80, 64] x [64, 256]), and a copy would cost what the rows save.
      for (size_t i = 0; i < d; ++i) {
        if (!IsConstant(out->sizes[i], 1)) return std::nullopt;
      }
      if (!elementwise(Input(producer, "input"))) return std::nullopt;
    } else if (t == "torch.ops.aten.cat.default") {
      const Argument* tensors = Input(producer, "tensors");
      const Argument* dim = Input(producer, "dim");
      if (tensors == nullptr || tensors->kind != AK::kTensors || (dim != nullptr && dim->kind != AK::kInt)) {
        return std::nullopt;
      }
      int64_t cd = dim == nullptr ? 0 : dim->i;
      if (cd < 0) cd += static_cast<int64_t>(rank);
      if (cd == static_cast<int64_t>(d)) return std::nullopt;  // cat along the rows: pieces differ
      for (const std::string& piece : tensors->names) {
        const size_t before = carried.size();
        if (!tensor(piece) || carried.size() == before) return std::nullopt;  // every piece spans the dim
      }
    } else {
      return std::nullopt;
    }
    if (carried.empty()) return std::nullopt;
    return carried;
  }

  // Whether every symbol `slice`'s bounds read is defined before node `p`, or by a sym_size
  // of a tensor defined before it (collected in `hoisted`, in program order).
  bool BoundsAvailable(const Node& slice, size_t p, std::vector<size_t>& hoisted) {
    std::unordered_map<std::string, size_t> defined;  // symbol and tensor names -> producing node
    for (size_t i = 0; i < P().nodes.size(); ++i) {
      for (const Argument& o : P().nodes[i].outputs) {
        for (const std::string& v : o.TensorNames()) defined[v] = i;
        for (const std::string& v : o.SymbolNames()) defined[v] = i;
      }
    }
    for (const program::NamedArgument& in : slice.inputs) {
      if (in.name == "self") continue;
      for (const std::string& v : in.arg.SymbolNames()) {
        auto it = defined.find(v);
        if (it == defined.end() || it->second < p) continue;  // a graph input, or above p
        const Node& def = P().nodes[it->second];
        if (def.target != "torch.ops.aten.sym_size.int" || def.inputs.empty()) return false;
        for (const std::string& t : def.inputs[0].arg.TensorNames()) {
          auto d = defined.find(t);
          if (d != defined.end() && d->second >= p) return false;
        }
        hoisted.push_back(it->second);
      }
    }
    std::sort(hoisted.begin(), hoisted.end());
    hoisted.erase(std::unique(hoisted.begin(), hoisted.end()), hoisted.end());
    return true;
  }

  bool MoveOne() {
    const Uses uses(P());
    for (size_t s = 0; s < P().nodes.size(); ++s) {
      const Node& slice = P().nodes[s];
      if (slice.target != kSlice) continue;
      const Argument* self = Input(slice, "self");
      const std::string out = Output(slice);
      const std::optional<size_t> d = SliceDim(P(), slice);
      if (self == nullptr || self->kind != AK::kTensor || out.empty() || !d) continue;
      const std::string x = self->name;
      const std::optional<size_t> producer_of_x = uses.Producer(x);
      if (!producer_of_x || uses.Reads(x) != 1) continue;
      const size_t p = *producer_of_x;
      if (P().nodes[p].outputs.size() != 1 || Output(P().nodes[p]) != x) continue;
      std::optional<std::vector<std::string>> operands = RowOperands(P().nodes[p], *d);
      if (!operands) continue;
      const TensorMeta* out_meta = P().FindTensor(out);
      if (out_meta == nullptr) continue;
      // The slice's bounds must exist above the producer: a size the plan's edits recompute next
      // to the slice (sym_size of a graph input) moves up with it; anything else stays put.
      std::vector<size_t> hoisted;
      if (!BoundsAvailable(slice, p, hoisted)) continue;
      const program::SymInt kept = out_meta->sizes[*d];
      const size_t out_rank = out_meta->sizes.size();
      // One slice per row-carrying operand, with the original's bounds, ahead of the producer.
      std::vector<Node> slices;
      std::unordered_map<std::string, std::string> renamed;
      for (const std::string& operand : *operands) {
        if (renamed.count(operand) != 0) continue;  // add(x, x)
        TensorMeta meta = *P().FindTensor(operand);
        const size_t dim = *d - (out_rank - meta.sizes.size());
        meta.sizes[dim] = kept;
        Node n;
        n.target = kSlice;
        n.stack = P().nodes[p].stack;
        const std::string name = FreshName();
        n.name = name;
        for (const program::NamedArgument& in : slice.inputs) {
          program::NamedArgument a = in;
          if (in.name == "self") a.arg.name = operand;
          if (in.name == "dim") {
            a.arg.kind = AK::kInt;
            a.arg.i = static_cast<int64_t>(dim);
          }
          n.inputs.push_back(std::move(a));
        }
        Argument o;
        o.kind = AK::kTensor;
        o.name = name;
        n.outputs.push_back(o);
        P().tensor_values[name] = std::move(meta);
        renamed[operand] = name;
        slices.push_back(std::move(n));
      }
      // The producer reads the slices and produces the slice's value.
      Node& producer = P().nodes[p];
      for (program::NamedArgument& in : producer.inputs) {
        if (in.arg.kind == AK::kTensor) {
          auto it = renamed.find(in.arg.name);
          if (it != renamed.end()) in.arg.name = it->second;
        } else if (in.arg.kind == AK::kTensors) {
          for (std::string& v : in.arg.names) {
            auto it = renamed.find(v);
            if (it != renamed.end()) v = it->second;
          }
        }
      }
      producer.outputs[0].name = out;
      P().tensor_values.erase(x);
      std::unordered_set<size_t> drop = {s};
      DropChecksOf(uses, x, drop);
      std::vector<Node> before_p;
      for (size_t h : hoisted) {
        before_p.push_back(P().nodes[h]);
        drop.insert(h);
      }
      for (Node& n : slices) before_p.push_back(std::move(n));
      Rebuild(drop, p, std::move(before_p));
      return true;
    }
    return false;
  }

  RowSliceRewrite r_;
  size_t next_ = 0;
};

// Whether every value a node reads is a graph input or the output of an earlier node.
bool DefinedBeforeUse(const program::Program& p) {
  std::unordered_set<std::string> defined;
  for (const Argument& a : p.inputs) {
    for (const std::string& v : a.TensorNames()) defined.insert(v);
    for (const std::string& v : a.SymbolNames()) defined.insert(v);
  }
  for (const Node& n : p.nodes) {
    for (const program::NamedArgument& in : n.inputs) {
      for (const std::string& v : in.arg.TensorNames()) {
        if (defined.count(v) == 0) return false;
      }
      for (const std::string& v : in.arg.SymbolNames()) {
        if (defined.count(v) == 0) return false;
      }
    }
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) defined.insert(v);
      for (const std::string& v : o.SymbolNames()) defined.insert(v);
    }
  }
  return true;
}

}  // namespace

RowSliceRewrite SinkRowSlices(const program::Program& program) {
  RowSliceRewrite r = Sinker(program).Run();
  // The rules keep the order by construction; a program they would leave reading a value before
  // it exists runs as it came rather than wrongly.
  if ((r.moves > 0 || r.dead_slices_removed > 0) && DefinedBeforeUse(program) && !DefinedBeforeUse(r.program)) {
    return {program, 0, 0};
  }
  return r;
}

}  // namespace weft::interp

#include "compiler/program/inline_hops.h"

#include <functional>
#include <unordered_map>

#include "compiler/program/archive.h"

namespace weft::program {
namespace {

using Rename = std::function<std::string(const std::string&)>;

void RenameArgument(Argument& a, const Rename& rename) {
  if (a.kind == Argument::Kind::kTensor) a.name = rename(a.name);
  for (std::string& n : a.names) {
    if (!n.empty()) n = rename(n);
  }
  for (SymIntRef& r : a.sym_ints) {
    if (r.is_name) r.name = rename(r.name);
  }
}

// The body's output values in order, one per outer output value (tensors and symbolic ints).
std::vector<std::string> ValueNames(const std::vector<Argument>& args) {
  std::vector<std::string> out;
  for (const Argument& a : args) {
    if (a.kind == Argument::Kind::kTensor) {
      out.push_back(a.name);
    } else if (a.kind == Argument::Kind::kTensors || a.kind == Argument::Kind::kOptionalTensors) {
      for (const std::string& n : a.names) out.push_back(n);
    } else if (!a.sym_ints.empty() && a.sym_ints[0].is_name) {
      out.push_back(a.sym_ints[0].name);
    } else {
      out.push_back("");
    }
  }
  return out;
}

class Inliner {
 public:
  Inliner(Program& p, std::string where) : p_(p), where_(std::move(where)) {}

  void Run() {
    std::vector<Node> nodes = std::move(p_.nodes);
    p_.nodes.clear();
    const Rename same = [](const std::string& s) { return s; };
    for (Node& n : nodes) Emit(std::move(n), same, nullptr, -1);
    const Rename outer = [this](const std::string& s) { return Outer(s); };
    for (Argument& a : p_.outputs) RenameArgument(a, outer);
    for (ModuleCall& c : p_.module_calls) {
      for (Argument& a : c.inputs) RenameArgument(a, outer);
      for (Argument& a : c.outputs) RenameArgument(a, outer);
    }
  }

 private:
  std::string Outer(const std::string& name) const {
    auto it = alias_.find(name);
    return it == alias_.end() ? name : it->second;
  }

  // Index of the body argument of a higher-order node we inline, or -1 to keep the node.
  int Inlinable(const Node& n) const {
    const bool grad = n.target == "torch.ops.higher_order.wrap_with_set_grad_enabled";
    const bool autocast = n.target == "torch.ops.higher_order.wrap_with_autocast";
    if (!grad && !autocast) return -1;
    int body = -1;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].arg.kind == Argument::Kind::kGraph) body = static_cast<int>(i);
    }
    if (body < 0) return -1;
    if (autocast) {
      // (device_type, dtype, enabled, cache_enabled, body, *operands): only an autocast-off region.
      if (body < 3 || n.inputs[2].arg.kind != Argument::Kind::kBool || n.inputs[2].arg.b) return -1;
    }
    return body;
  }

  // Appends `n` or, for an inlinable operator, its body. `rename_in` maps the names `n` refers
  // to into the program's (a body's own names get its prefix; an inlined operator's outputs are
  // then looked up in alias_); `rename_out`, for a body's nodes, names what `n` produces.
  void Emit(Node n, const Rename& rename_in, const Rename* rename_out, int32_t stack) {
    const Rename in = [&](const std::string& s) { return Outer(rename_in(s)); };
    for (NamedArgument& a : n.inputs) RenameArgument(a.arg, in);
    if (n.stack < 0) n.stack = stack;
    const int body_index = Inlinable(n);
    if (body_index < 0) {
      if (rename_out != nullptr) {
        for (Argument& o : n.outputs) RenameArgument(o, *rename_out);
      }
      p_.nodes.push_back(std::move(n));
      return;
    }
    const size_t index = static_cast<size_t>(n.inputs[static_cast<size_t>(body_index)].arg.i);
    if (index >= p_.subgraphs.size()) throw ProgramError(where_ + ": node `" + n.name + "` names a missing subgraph");
    const Graph body = p_.subgraphs[index];
    const std::string prefix = n.name + "/";
    // Body inputs -> the operands, already in the program's names.
    std::unordered_map<std::string, std::string> bound;
    const std::vector<std::string> inner_inputs = ValueNames(body.inputs);
    std::vector<Argument> operand_args;
    for (size_t i = static_cast<size_t>(body_index) + 1; i < n.inputs.size(); ++i) operand_args.push_back(n.inputs[i].arg);
    const std::vector<std::string> operands = ValueNames(operand_args);
    if (operands.size() != inner_inputs.size()) {
      throw ProgramError(where_ + ": node `" + n.name + "` passes " + std::to_string(operands.size()) +
                         " operands to a body of " + std::to_string(inner_inputs.size()) + " inputs");
    }
    for (size_t i = 0; i < operands.size(); ++i) bound[inner_inputs[i]] = operands[i];
    const Rename inner = [prefix, bound](const std::string& s) {
      auto it = bound.find(s);
      return it != bound.end() ? it->second : prefix + s;
    };
    for (const auto& [name, meta] : body.tensor_values) {
      if (bound.count(name) == 0) p_.tensor_values.emplace(prefix + name, meta);
    }
    for (const auto& [name, value] : body.sym_int_values) {
      if (bound.count(name) == 0) p_.sym_int_values.emplace(prefix + name, value);
    }
    for (Node inner_node : body.nodes) {
      inner_node.name = prefix + inner_node.name;
      Emit(std::move(inner_node), inner, &inner, n.stack);
    }
    // The operator's outputs are the body's outputs.
    std::vector<std::string> inner_outputs = ValueNames(body.outputs);
    for (std::string& o : inner_outputs) o = o.empty() ? o : Outer(inner(o));
    const std::vector<std::string> outer_outputs = ValueNames(n.outputs);
    if (outer_outputs.size() != inner_outputs.size()) {
      throw ProgramError(where_ + ": node `" + n.name + "` has " + std::to_string(outer_outputs.size()) +
                         " outputs but its body returns " + std::to_string(inner_outputs.size()));
    }
    for (size_t i = 0; i < outer_outputs.size(); ++i) {
      if (outer_outputs[i].empty()) continue;
      alias_[rename_out != nullptr ? (*rename_out)(outer_outputs[i]) : outer_outputs[i]] = inner_outputs[i];
    }
  }

  Program& p_;
  std::string where_;
  std::unordered_map<std::string, std::string> alias_;  // an inlined operator's output -> the body's value
};

}  // namespace

void InlineHigherOrderOps(Program& program, const std::string& where) {
  bool any = false;
  for (const Node& n : program.nodes) any = any || n.target.rfind("torch.ops.higher_order.", 0) == 0;
  if (!any) return;
  Inliner(program, where).Run();
}

}  // namespace weft::program

#include "runtime/program/node_uses.h"

namespace weft::interp {

using program::Argument;
using AK = program::Argument::Kind;

Uses::Uses(const program::Program& p) : p_(p) {
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (const Argument& o : p.nodes[i].outputs) {
      for (const std::string& n : o.TensorNames()) producer_[n] = i;
    }
    const bool check = p.nodes[i].target == "torch.ops.aten._assert_tensor_metadata.default";
    for (const program::NamedArgument& in : p.nodes[i].inputs) {
      for (const std::string& n : in.arg.TensorNames()) {
        if (check) {
          checks_[n].push_back(i);
        } else {
          ++reads_[n];
        }
      }
    }
  }
  for (const Argument& o : p.outputs) {
    for (const std::string& n : o.TensorNames()) ++reads_[n];
  }
}

std::optional<size_t> Uses::Producer(const std::string& value) const {
  auto it = producer_.find(value);
  if (it == producer_.end()) return std::nullopt;
  return it->second;
}

size_t Uses::Reads(const std::string& value) const {
  auto it = reads_.find(value);
  return it == reads_.end() ? 0 : it->second;
}

std::optional<size_t> Uses::SoleProducer(const std::string& value, const char* target) const {
  std::optional<size_t> p = Producer(value);
  if (!p || p_.nodes[*p].target != target || Reads(value) != 1) return std::nullopt;
  return p;
}

const std::vector<size_t>& Uses::Checks(const std::string& value) const {
  static const std::vector<size_t> none;
  auto it = checks_.find(value);
  return it == checks_.end() ? none : it->second;
}

const Argument* Input(const program::Node& n, const char* name) {
  for (const program::NamedArgument& in : n.inputs) {
    if (in.name == name) return &in.arg;
  }
  return nullptr;
}

std::string TensorInput(const program::Node& n, const char* name) {
  const Argument* a = Input(n, name);
  return a != nullptr && a->kind == AK::kTensor ? a->name : std::string();
}

std::string Output(const program::Node& n) {
  return n.outputs.size() == 1 && n.outputs[0].kind == AK::kTensor ? n.outputs[0].name : std::string();
}

}  // namespace weft::interp

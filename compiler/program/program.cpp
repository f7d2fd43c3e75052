#include "compiler/program/program.h"

#include <algorithm>

#include "compiler/program/archive.h"

namespace weft::program {

std::string ScalarTypeName(ScalarType type) {
  switch (type) {
    case ScalarType::kByte: return "u8";
    case ScalarType::kChar: return "i8";
    case ScalarType::kShort: return "i16";
    case ScalarType::kInt: return "i32";
    case ScalarType::kLong: return "i64";
    case ScalarType::kHalf: return "f16";
    case ScalarType::kFloat: return "f32";
    case ScalarType::kDouble: return "f64";
    case ScalarType::kComplexFloat: return "c64";
    case ScalarType::kComplexDouble: return "c128";
    case ScalarType::kBool: return "bool";
    case ScalarType::kBFloat16: return "bf16";
    case ScalarType::kFloat8E4M3FN: return "f8e4m3";
    case ScalarType::kFloat8E5M2: return "f8e5m2";
    default: return "";
  }
}

int64_t ScalarTypeBytes(ScalarType type) {
  switch (type) {
    case ScalarType::kByte: case ScalarType::kChar: case ScalarType::kBool: case ScalarType::kFloat8E4M3FN:
    case ScalarType::kFloat8E5M2: case ScalarType::kFloat8E4M3FNUZ: case ScalarType::kFloat8E5M2FNUZ:
    case ScalarType::kFloat8E8M0FNU:
      return 1;
    case ScalarType::kShort: case ScalarType::kHalf: case ScalarType::kBFloat16: case ScalarType::kUInt16:
      return 2;
    case ScalarType::kInt: case ScalarType::kFloat: case ScalarType::kUInt32: case ScalarType::kComplexHalf:
      return 4;
    case ScalarType::kLong: case ScalarType::kDouble: case ScalarType::kComplexFloat: case ScalarType::kUInt64:
      return 8;
    case ScalarType::kComplexDouble:
      return 16;
    default:
      return 0;
  }
}

std::vector<std::string> Argument::TensorNames() const {
  switch (kind) {
    case Kind::kTensor:
      return {name};
    case Kind::kTensors:
    case Kind::kOptionalTensors: {
      std::vector<std::string> out;
      for (const std::string& n : names) {
        if (!n.empty()) out.push_back(n);
      }
      return out;
    }
    default:
      return {};
  }
}

std::vector<std::string> Argument::SymbolNames() const {
  std::vector<std::string> out;
  if (kind == Kind::kSymInt || kind == Kind::kSymInts || kind == Kind::kSymFloat || kind == Kind::kSymFloats ||
      kind == Kind::kSymBool || kind == Kind::kSymBools) {
    for (const SymIntRef& r : sym_ints) {
      if (r.is_name) out.push_back(r.name);
    }
  }
  return out;
}

const char* ArgumentKindName(Argument::Kind kind) {
  using K = Argument::Kind;
  switch (kind) {
    case K::kNone: return "none";
    case K::kTensor: return "tensor";
    case K::kTensors: return "tensor list";
    case K::kOptionalTensors: return "optional tensor list";
    case K::kOptionalTensor: return "optional tensor";
    case K::kInt: return "int";
    case K::kInts: return "int list";
    case K::kIntLists: return "list of int lists";
    case K::kFloat: return "float";
    case K::kFloats: return "float list";
    case K::kBool: return "bool";
    case K::kBools: return "bool list";
    case K::kString: return "string";
    case K::kStrings: return "string list";
    case K::kSymInt: return "symbolic int";
    case K::kSymInts: return "symbolic int list";
    case K::kSymFloat: return "symbolic float";
    case K::kSymFloats: return "symbolic float list";
    case K::kSymBool: return "symbolic bool";
    case K::kSymBools: return "symbolic bool list";
    case K::kScalarType: return "dtype";
    case K::kMemoryFormat: return "memory format";
    case K::kLayout: return "layout";
    case K::kDevice: return "device";
    case K::kComplex: return "complex";
    case K::kGraph: return "subgraph";
    case K::kCustomObj: return "custom object";
    case K::kOperator: return "operator";
    case K::kOther: return "unsupported argument";
  }
  return "?";
}

size_t TreeSpec::LeafCount() const {
  if (IsLeaf()) return 1;
  size_t n = 0;
  for (const TreeSpec& c : children) n += c.LeafCount();
  return n;
}

const TensorMeta* Program::FindTensor(const std::string& name) const {
  auto it = tensor_values.find(name);
  return it == tensor_values.end() ? nullptr : &it->second;
}

const ModuleCall* Program::FindModuleCall(const std::string& fqn) const {
  for (const ModuleCall& c : module_calls) {
    if (c.fqn == fqn) return &c;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Program::ParameterShapes() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const InputSpec& s : input_specs) {
    if (s.kind != InputSpec::Kind::kParameter) continue;
    const TensorMeta* meta = FindTensor(s.arg.name);
    if (meta == nullptr) continue;
    std::vector<int64_t> shape;
    for (const SymInt& d : meta->sizes) shape.push_back(d.value);
    out.emplace_back(s.target, std::move(shape));
  }
  return out;
}

std::vector<std::string> Program::ForwardArgNames() const {
  std::vector<std::string> names;
  const ModuleCall* root = Root();
  if (root == nullptr || !root->has_signature) return names;
  const TreeSpec& spec = root->in_spec;
  // (args, kwargs): positional arguments have no names in the spec; the root's forward_arg_names
  // lists every argument in order, positional first.
  if (spec.type == "builtins.tuple" && spec.children.size() == 2) {
    const size_t positional = spec.children[0].children.size();
    for (size_t i = 0; i < positional && i < root->forward_arg_names.size(); ++i) names.push_back(root->forward_arg_names[i]);
    for (const std::string& k : spec.children[1].keys) names.push_back(k);
  }
  return names;
}

std::vector<const Argument*> Program::LeafInputs(const ModuleCall& call) const {
  const size_t leaves = call.in_spec.LeafCount();
  const std::string path = call.fqn.substr(0, call.fqn.find('@'));
  const std::vector<size_t>* skipped = nullptr;
  if (manifest) {
    for (const auto& [p, positions] : manifest->bypassed) {
      if (p == path) skipped = &positions;
    }
  }
  std::vector<const Argument*> out;
  size_t next = 0;
  for (size_t leaf = 0; leaf < leaves; ++leaf) {
    if (skipped != nullptr && std::binary_search(skipped->begin(), skipped->end(), leaf)) {
      out.push_back(nullptr);
      continue;
    }
    out.push_back(next < call.inputs.size() ? &call.inputs[next] : nullptr);
    ++next;
  }
  if (next != call.inputs.size() && !(call.fqn.empty() && call.inputs.empty())) {
    throw ProgramError(this->path + ": module `" + call.fqn + "` has " + std::to_string(call.inputs.size()) +
                       " signature inputs for " + std::to_string(next) + " input-spec leaves");
  }
  return out;
}

int64_t Program::ActivationBytes() const { return manifest && manifest->dtype == "bf16" ? 2 : 4; }

const std::vector<FixedSize>& Program::FixedSizes() const {
  static const std::vector<FixedSize> kNone;
  return manifest ? manifest->fixed_sizes : kNone;
}

}  // namespace weft::program

#include "runtime/program/program_model.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "compiler/program/archive.h"
#include "runtime/program/argument_leaf.h"
#include "runtime/program/schema_types.h"

namespace weft::interp {
namespace {

using program::ProgramError;

// A module of the program's tree: it holds parameters; only the root runs.
class ProgramSubmodule final : public nn::Module {
 public:
  ProgramSubmodule(std::string type, std::vector<std::string> signature)
      : nn::Module(std::move(type)), signature_(std::move(signature)) {}
  std::vector<std::string> Signature() const override { return signature_; }
  nn::Outputs Forward(nn::Args&) override {
    throw std::logic_error("module `" + fqn() + "` of a program runs only as part of the whole program");
  }

 private:
  std::vector<std::string> signature_;
};

std::string Parent(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

std::string Leaf(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string DtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "f32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "f16";
    case at::kDouble: return "f64";
    case at::kLong: return "i64";
    case at::kInt: return "i32";
    case at::kShort: return "i16";
    case at::kChar: return "i8";
    case at::kByte: return "u8";
    case at::kBool: return "bool";
    case at::kComplexFloat: return "c64";
    case at::kComplexDouble: return "c128";
    default: return "";
  }
}

// The bytes of a payload entry as a tensor of its recorded dtype, sizes and strides.
at::Tensor ReadPayload(const program::Archive& archive, const std::string& dir, const program::Payload& p) {
  const std::string where = archive.path() + ": `" + p.fqn + "`";
  if (p.use_pickle) throw ProgramError(where + " is stored pickled; weft reads raw tensor bytes only");
  std::optional<c10::ScalarType> dtype = C10ScalarType(p.meta.dtype);
  if (!dtype) throw ProgramError(where + ": dtype " + std::to_string(static_cast<int>(p.meta.dtype)) + " is not supported");
  std::vector<int64_t> sizes, strides;
  for (const program::SymInt& s : p.meta.sizes) sizes.push_back(s.value);
  for (const program::SymInt& s : p.meta.strides) strides.push_back(s.value);
  if (strides.size() != sizes.size()) {
    const c10::DimVector contiguous = c10::contiguous_strides(sizes);
    strides.assign(contiguous.begin(), contiguous.end());
  }
  std::string bytes = archive.Read(dir + p.path_name);
  int64_t span = 1;  // elements the strided view reaches
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) {
      span = 0;
      break;
    }
    span += (sizes[d] - 1) * strides[d];
  }
  const int64_t need = span * static_cast<int64_t>(c10::elementSize(*dtype));
  if (static_cast<int64_t>(bytes.size()) < need) {
    throw ProgramError(where + ": holds " + std::to_string(bytes.size()) + " bytes, its shape needs " + std::to_string(need) +
                       (bytes.empty() ? " (a parameter: it comes from the checkpoint, not the archive)" : ""));
  }
  at::Tensor blob = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(blob.data_ptr(), bytes.data(), bytes.size());
  return at::from_blob(blob.data_ptr(), sizes, strides, at::TensorOptions().dtype(*dtype)).clone();
}

}  // namespace

ProgramModel::ProgramModel(std::shared_ptr<const program::Program> program, std::string type)
    : nn::Module(std::move(type)), program_(std::move(program)) {}

std::unique_ptr<ProgramModel> ProgramModel::Create(std::shared_ptr<const program::Program> program, const LoadOptions& options) {
  const program::Program& p = *program;
  std::string root_type = p.manifest ? p.manifest->class_name : "Program";
  auto model = std::unique_ptr<ProgramModel>(new ProgramModel(program, root_type));
  model->interpreter_ = Interpreter::Load(p, options);
  model->flat_ = program::FlattenInputs(p);
  model->input_keys_ = program::InputKeys(model->flat_);

  // The module tree: the manifest's modules in order, then any module a parameter needs.
  std::map<std::string, nn::Module*> modules{{"", model.get()}};
  std::map<std::string, std::vector<std::string>> signatures;
  std::map<std::string, std::string> types;
  if (p.manifest) {
    for (const model::ModuleType& t : p.manifest->types) {
      for (const model::Arg& a : t.args) signatures[t.name].push_back(a.name);
    }
    for (const model::Module& m : p.manifest->modules) types[m.path] = m.type;
  }
  std::function<nn::Module*(const std::string&)> ensure = [&](const std::string& path) -> nn::Module* {
    auto it = modules.find(path);
    if (it != modules.end()) return it->second;
    nn::Module* parent = ensure(Parent(path));
    const std::string type = types.count(path) ? types[path] : "Module";
    auto child = std::make_unique<ProgramSubmodule>(type, signatures[type]);
    nn::Module* raw = &parent->AddChild(Leaf(path), std::move(child));
    modules[path] = raw;
    return raw;
  };
  if (p.manifest) {
    for (const model::Module& m : p.manifest->modules) ensure(m.path);
  }

  // Parameters: slots the interpreter reads at every run. Buffers and constants: the archive's.
  const program::Archive archive = program::Archive::Open(p.path);
  std::map<std::string, int> dtype_votes;
  for (const Interpreter::StateInput& s : model->interpreter_->state_inputs()) {
    const program::Argument& graph_input = p.inputs[s.graph_input];
    const program::TensorMeta* meta = p.FindTensor(graph_input.name);
    if (meta == nullptr) throw ProgramError(p.path + ": `" + s.fqn + "` has no tensor metadata");
    std::optional<c10::ScalarType> dtype = C10ScalarType(meta->dtype);
    if (!dtype) throw ProgramError(p.path + ": `" + s.fqn + "` has an unsupported dtype");
    if (s.kind == program::InputSpec::Kind::kParameter) {
      std::vector<int64_t> shape;
      for (const program::SymInt& d : meta->sizes) shape.push_back(d.value);
      nn::Module* owner = ensure(Parent(s.fqn));
      at::Tensor& slot = owner->AddParameter(Leaf(s.fqn), shape);
      // An integral or boolean parameter is declared with its dtype, which loading keeps.
      if (!at::isFloatingType(*dtype)) slot = at::empty(shape, at::TensorOptions().dtype(*dtype).device(at::kMeta));
      model->param_dtypes_[s.fqn] = *dtype;
      if (at::isFloatingType(*dtype)) ++dtype_votes[DtypeName(*dtype)];
      model->interpreter_->BindState(s.fqn, &slot);
      continue;
    }
    const program::Payload* payload = nullptr;
    for (const auto* list : {&p.constants, &p.weights}) {
      for (const program::Payload& pl : *list) {
        if (pl.fqn == s.fqn) payload = &pl;
      }
      if (payload != nullptr) break;
    }
    if (payload == nullptr) throw ProgramError(p.path + ": no bytes for buffer or constant `" + s.fqn + "` in the archive");
    const bool constant_dir = std::find_if(p.constants.begin(), p.constants.end(),
                                           [&](const program::Payload& x) { return &x == payload; }) != p.constants.end();
    at::Tensor& held = model->state_[s.fqn];
    held = ReadPayload(archive, constant_dir ? "data/constants/" : "data/weights/", *payload);
    const program::InputSpec& spec = p.input_specs[s.graph_input];
    if (s.kind == program::InputSpec::Kind::kBuffer && spec.persistent) model->persistent_buffers_.push_back(s.fqn);
    model->interpreter_->BindState(s.fqn, &held);
  }
  if (p.manifest && p.manifest->dtype == "bf16") {
    model->dtype_ = at::kBFloat16;
  } else if (p.manifest && p.manifest->dtype == "f16") {
    model->dtype_ = at::kHalf;
  } else if (dtype_votes["bf16"] > dtype_votes["f32"]) {
    model->dtype_ = at::kBFloat16;
  }
  return model;
}

std::vector<std::pair<std::string, at::Tensor*>> ProgramModel::CheckpointBuffers() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  for (const std::string& fqn : persistent_buffers_) out.emplace_back(fqn, &state_.at(fqn));
  return out;
}

void ProgramModel::ConformParameters(c10::Device device) {
  for (auto& [fqn, slot] : NamedParameters()) {
    auto it = param_dtypes_.find(fqn);
    if (it == param_dtypes_.end() || !slot->defined()) continue;
    if (slot->scalar_type() != it->second || slot->device() != device) *slot = slot->to(device, it->second);
  }
  for (auto& [fqn, t] : state_) {
    if (t.device() != device) t = t.to(device);
  }
}

std::vector<program::InputDesc> ProgramModel::Describe(const nn::Args& args) const {
  std::vector<program::InputDesc> out;
  for (const std::string& name : input_keys_) {
    program::InputDesc d;
    d.name = name;
    if (args.Has(name)) {
      const nn::Value& v = args.Get(name);
      if (std::holds_alternative<std::monostate>(v)) {
        d.value_json = "null";
      } else if (const auto* t = std::get_if<at::Tensor>(&v)) {
        d.tensor = true;
        d.shape.assign(t->sizes().begin(), t->sizes().end());
        d.dtype = DtypeName(t->scalar_type());
      } else {
        throw ProgramError(program_->path + ": forward argument `" + name + "` is a tuple of tensors; programs take "
                           "tensors or plain values at the root");
      }
      out.push_back(std::move(d));
      continue;
    }
    auto a = arguments_.find(name);
    if (a == arguments_.end()) continue;  // missing: the binder names it
    d.value_json = a->second;
    out.push_back(std::move(d));
  }
  for (const auto& [name, value] : args.entries()) {
    if (std::find(input_keys_.begin(), input_keys_.end(), name) == input_keys_.end()) {
      program::InputDesc d;
      d.name = name;
      d.tensor = std::holds_alternative<at::Tensor>(value);
      out.push_back(std::move(d));  // the binder refuses it by name
    }
  }
  return out;
}

program::Bindings ProgramModel::Check(const std::vector<program::InputDesc>& inputs) const {
  return program::Bindings::Bind(*program_, inputs);
}

nn::Outputs ProgramModel::Forward(nn::Args& args) {
  const std::vector<program::InputDesc> descs = Describe(args);
  std::ostringstream key;
  for (const program::InputDesc& d : descs) {
    key << d.name << ':' << d.dtype << (d.tensor ? "[" : "=") << d.value_json;
    for (int64_t s : d.shape) key << s << ',';
    key << ';';
  }
  if (key.str() != last_shapes_) {
    Check(descs);  // throws naming the argument
    last_shapes_ = key.str();
  }
  std::map<std::string, nlohmann::json> parsed;
  std::vector<c10::IValue> inputs;
  inputs.reserve(flat_.size());
  for (const program::FlatInput& f : flat_) {
    if (args.Has(f.key)) {
      const nn::Value& v = args.Get(f.key);
      if (const auto* t = std::get_if<at::Tensor>(&v)) {
        inputs.emplace_back(*t);
      } else {
        inputs.emplace_back();
      }
      continue;
    }
    auto a = arguments_.find(f.arg);
    if (a == arguments_.end()) {
      inputs.emplace_back();  // a constant input the program recorded
      continue;
    }
    auto& json = parsed[f.arg];
    if (json.is_null()) json = nlohmann::json::parse(a->second);
    const nlohmann::json* leaf = ArgumentLeaf(json, f);
    if (leaf == nullptr) {
      inputs.emplace_back();  // another structure than the program's: Check above named it
    } else if (leaf->is_boolean()) {
      inputs.emplace_back(leaf->get<bool>());
    } else if (leaf->is_number_integer()) {
      inputs.emplace_back(leaf->get<int64_t>());
    } else if (leaf->is_number()) {
      inputs.emplace_back(leaf->get<double>());
    } else {
      inputs.emplace_back();
    }
  }
  std::vector<at::Tensor> outputs = interpreter_->Run(inputs);
  nn::Outputs out;
  for (at::Tensor& t : outputs) out.emplace_back(std::move(t));
  return out;
}

}  // namespace weft::interp

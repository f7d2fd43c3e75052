#include "runtime/nn/module.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

namespace weft::nn {

Args& Args::Set(const std::string& name, Value value) {
  for (auto& entry : entries_) {
    if (entry.first == name) {
      entry.second = std::move(value);
      return *this;
    }
  }
  entries_.emplace_back(name, std::move(value));
  return *this;
}

bool Args::Has(const std::string& name) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == name; });
}

Value& Args::Get(const std::string& name) {
  for (auto& entry : entries_) {
    if (entry.first == name) return entry.second;
  }
  throw std::invalid_argument("missing argument `" + name + "`");
}

const Value& Args::Get(const std::string& name) const { return const_cast<Args*>(this)->Get(name); }

const at::Tensor& Args::Tensor(const std::string& name) const {
  const Value& value = Get(name);
  if (const auto* tensor = std::get_if<at::Tensor>(&value)) return *tensor;
  throw std::invalid_argument("argument `" + name + "` is not a tensor");
}

Module* Module::Child(const std::string& name) const {
  for (const auto& [child_name, child] : children_) {
    if (child_name == name) return child.get();
  }
  return nullptr;
}

Module* Module::Find(const std::string& fqn) {
  if (fqn.empty()) return this;
  size_t dot = fqn.find('.');
  Module* child = Child(fqn.substr(0, dot));
  if (child == nullptr) return nullptr;
  return dot == std::string::npos ? child : child->Find(fqn.substr(dot + 1));
}

void Module::AdoptChild(const std::string& name, std::unique_ptr<Module> child) {
  if (Child(name) != nullptr) throw std::logic_error(fqn_ + ": duplicate child `" + name + "`");
  child->SetFqn(fqn_.empty() ? name : fqn_ + "." + name);
  children_.emplace_back(name, std::move(child));
}

void Module::SetFqn(const std::string& fqn) {
  fqn_ = fqn;
  for (auto& [name, child] : children_) child->SetFqn(fqn + "." + name);
}

at::Tensor& Module::AddParameter(const std::string& name, at::IntArrayRef shape) {
  for (const auto& entry : parameters_) {
    if (entry.first == name) throw std::logic_error(fqn_ + ": duplicate parameter `" + name + "`");
  }
  parameters_.emplace_back(name, at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(at::kMeta)));
  return parameters_.back().second;
}

at::Tensor& Module::Parameter(const std::string& name) {
  for (auto& entry : parameters_) {
    if (entry.first == name) return entry.second;
  }
  throw std::invalid_argument("module `" + fqn_ + "` (" + type_ + ") has no parameter `" + name + "`");
}

std::vector<std::pair<std::string, at::Tensor*>> Module::NamedParameters() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  Walk([&](Module& module) {
    for (auto& [name, tensor] : module.parameters_) {
      out.emplace_back(module.fqn_.empty() ? name : module.fqn_ + "." + name, &tensor);
    }
  });
  return out;
}

void Module::Walk(const std::function<void(Module&)>& visit) {
  visit(*this);
  for (auto& entry : children_) entry.second->Walk(visit);
}

Outputs Call(Module& module, Args args) {
  const std::vector<std::string> signature = module.Signature();
  for (const auto& entry : args.entries()) {
    if (std::find(signature.begin(), signature.end(), entry.first) == signature.end()) {
      throw std::invalid_argument("module `" + module.fqn() + "` (" + module.type() +
                                  ") has no forward argument `" + entry.first + "`");
    }
  }
  // Copy the hook list: a hook may not add hooks, but iterating a copy keeps that harmless.
  const std::vector<std::shared_ptr<Hook>> hooks = module.hooks();
  for (const auto& hook : hooks) hook->PreForward(module, args);
  Outputs outputs = module.Forward(args);
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)->PostForward(module, args, outputs);
  return outputs;
}

const at::Tensor& OutputTensor(const Outputs& outputs, size_t index, const Module& module) {
  if (index >= outputs.size()) {
    throw std::out_of_range("module `" + module.fqn() + "` returned " + std::to_string(outputs.size()) +
                            " outputs; output " + std::to_string(index) + " requested");
  }
  if (const auto* tensor = std::get_if<at::Tensor>(&outputs[index])) return *tensor;
  throw std::invalid_argument("output " + std::to_string(index) + " of module `" + module.fqn() + "` is not a tensor");
}

}  // namespace weft::nn

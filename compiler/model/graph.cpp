#include "compiler/model/graph.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "compiler/source/checked_math.h"

namespace weft::model {

int64_t DTypeBytes(std::string_view dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "bf16" || dtype == "f16" || dtype == "i16") return 2;
  if (dtype == "f64" || dtype == "i64" || dtype == "c64") return 8;
  if (dtype == "i8" || dtype == "u8" || dtype == "bool" || dtype == "f8e4m3" || dtype == "f8e5m2")
    return 1;
  if (dtype == "c128") return 16;
  return 0;
}

int64_t Param::Numel() const { return source::SaturatingProduct(shape); }

int64_t Param::Bytes() const { return source::SaturatingMul(Numel(), DTypeBytes(dtype)); }

const Param* Module::FindParam(std::string_view name) const {
  for (const Param& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Attr* Module::FindAttr(std::string_view name) const {
  for (const auto& [key, attr] : attrs) {
    if (key == name) return &attr;
  }
  return nullptr;
}

std::optional<int64_t> Module::IntAttr(std::string_view name) const {
  const Attr* a = FindAttr(name);
  if (a == nullptr || a->kind == Attr::Kind::kIntList || a->values.size() != 1) return std::nullopt;
  return a->values[0];
}

std::optional<size_t> ModuleType::ArgIndex(std::string_view name) const {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name == name) return i;
  }
  return std::nullopt;
}

std::string_view AttentionKindName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kSelf:
      return "self";
    case AttentionKind::kCross:
      return "cross";
    case AttentionKind::kJoint:
      return "joint";
  }
  return "self";
}

std::optional<AttentionKind> ParseAttentionKind(std::string_view name) {
  if (name == "self") return AttentionKind::kSelf;
  if (name == "cross") return AttentionKind::kCross;
  if (name == "joint") return AttentionKind::kJoint;
  return std::nullopt;
}

int64_t Value::Bytes() const {
  if (kind == Kind::kTensor) return source::SaturatingMul(source::SaturatingProduct(shape), DTypeBytes(dtype));
  int64_t total = 0;
  for (const Value& e : elements) total = source::SaturatingAdd(total, e.Bytes());
  return total;
}

const Value* Call::FindArg(std::string_view name) const {
  for (const auto& [key, value] : args) {
    if (key == name) return &value;
  }
  return nullptr;
}

void Workload::Reindex() {
  call_index_.clear();
  site_index_.clear();
  call_index_.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) call_index_.emplace(calls[i].module, i);
  for (size_t i = 0; i < attention.size(); ++i) site_index_.emplace(attention[i].site, i);
}

const ModuleCalls* Workload::FindCalls(std::string_view module) const {
  if (call_index_.size() == calls.size() && !calls.empty()) {
    auto it = call_index_.find(std::string(module));
    return it == call_index_.end() ? nullptr : &calls[it->second];
  }
  for (const ModuleCalls& c : calls) {
    if (c.module == module) return &c;
  }
  return nullptr;
}

const SiteCalls* Workload::FindAttention(std::string_view site) const {
  if (site_index_.size() == attention.size() && !attention.empty()) {
    auto it = site_index_.find(std::string(site));
    return it == site_index_.end() ? nullptr : &attention[it->second];
  }
  for (const SiteCalls& c : attention) {
    if (c.site == site) return &c;
  }
  return nullptr;
}

std::optional<int64_t> Workload::IntParam(std::string_view name) const {
  for (const auto& [key, json] : params) {
    if (key != name) continue;
    if (json.empty() || json.find_first_not_of("-0123456789") != std::string::npos) return std::nullopt;
    try {
      return std::stoll(json);
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void ModelGraph::Reindex() {
  module_index_.clear();
  type_index_.clear();
  site_index_.clear();
  module_index_.reserve(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) module_index_.emplace(modules[i].path, i);
  for (size_t i = 0; i < types.size(); ++i) type_index_.emplace(types[i].name, i);
  for (size_t i = 0; i < attention_sites.size(); ++i) site_index_.emplace(attention_sites[i].path, i);
  for (Workload& w : workloads) w.Reindex();
  hash_cache_.clear();
}

std::optional<ModuleId> ModelGraph::FindModuleId(std::string_view path) const {
  auto it = module_index_.find(std::string(path));
  if (it == module_index_.end()) return std::nullopt;
  return it->second;
}

const Module* ModelGraph::FindModule(std::string_view path) const {
  auto id = FindModuleId(path);
  return id ? &modules[*id] : nullptr;
}

const ModuleType* ModelGraph::FindType(std::string_view name) const {
  auto it = type_index_.find(std::string(name));
  return it == type_index_.end() ? nullptr : &types[it->second];
}

const ModuleType* ModelGraph::TypeOf(std::string_view path) const {
  const Module* m = FindModule(path);
  return m ? FindType(m->type) : nullptr;
}

const AttentionSite* ModelGraph::FindAttentionSite(std::string_view path) const {
  auto it = site_index_.find(std::string(path));
  return it == site_index_.end() ? nullptr : &attention_sites[it->second];
}

const Workload* ModelGraph::FindWorkload(std::string_view workload_name) const {
  for (const Workload& w : workloads) {
    if (w.name == workload_name) return &w;
  }
  return nullptr;
}

std::optional<int64_t> ModelGraph::ConfigValue(std::string_view key) const {
  for (const auto& [k, v] : config) {
    if (k == key) return v;
  }
  return std::nullopt;
}

int64_t ModelGraph::ParamBytes() const {
  int64_t total = 0;
  for (const Module& m : modules) {
    for (const Param& p : m.params) {
      if (!p.buffer) total = source::SaturatingAdd(total, p.Bytes());
    }
  }
  return total;
}

namespace {
std::string Quote(std::string_view path) { return "`" + std::string(path) + "`"; }
std::string ChildPath(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "." + child;
}
}  // namespace

std::string ChildNameProblem(const std::string& parent, const std::vector<std::string>& children, size_t index) {
  const std::string& c = children[index];
  const std::string module = parent.empty() ? std::string("the root module") : "module " + Quote(parent);
  if (c.empty()) {
    return parent.empty() ? "the root module lists itself as a child (an empty name in its `children`); children "
                            "are named relative to their parent"
                          : "module " + Quote(parent) + " lists an empty child name, which would be itself";
  }
  if (c.find('.') != std::string::npos) {
    return module + " lists child " + Quote(c) + "; a child name is one path component, without `.`";
  }
  for (size_t k = 0; k < index; ++k) {
    if (children[k] == c) return module + " lists child " + Quote(c) + " twice";
  }
  return "";
}

std::vector<std::string> CheckGraph(const ModelGraph& graph) {
  std::vector<std::string> problems;
  std::unordered_set<std::string> seen;
  for (const Module& m : graph.modules) {
    if (!seen.insert(m.path).second) problems.push_back("module " + Quote(m.path) + " appears twice");
  }
  if (!graph.modules.empty() && !graph.modules.front().path.empty()) {
    problems.push_back("the first module must be the root (path \"\")");
  }
  std::unordered_set<std::string> children_of_someone;
  for (const Module& m : graph.modules) {
    if (graph.FindType(m.type) == nullptr) {
      problems.push_back("module " + Quote(m.path) + " has type " + Quote(m.type) +
                         ", which is not in `types`");
    }
    for (size_t k = 0; k < m.children.size(); ++k) {
      const std::string& c = m.children[k];
      if (std::string problem = ChildNameProblem(m.path, m.children, k); !problem.empty()) {
        problems.push_back(std::move(problem));
        continue;
      }
      const std::string path = ChildPath(m.path, c);
      if (graph.FindModule(path) == nullptr) {
        problems.push_back("module " + Quote(m.path) + " lists child " + Quote(c) +
                           " but there is no module " + Quote(path));
      }
      children_of_someone.insert(path);
      if (m.container == Container::kList &&
          c.find_first_not_of("0123456789") != std::string::npos) {
        problems.push_back("list module " + Quote(m.path) + " has a non-index child " + Quote(c));
      }
    }
  }
  for (const Module& m : graph.modules) {
    if (!m.path.empty() && children_of_someone.count(m.path) == 0) {
      problems.push_back("module " + Quote(m.path) + " is not a child of its parent");
    }
  }
  for (const AttentionSite& s : graph.attention_sites) {
    if (graph.FindModule(s.path) == nullptr) {
      problems.push_back("attention site " + Quote(s.path) + " is not a module");
    }
    if (s.heads < 1) {
      problems.push_back("attention site " + Quote(s.path) + " has " + std::to_string(s.heads) +
                         " heads; an attention site has at least one head");
    }
    if (s.head_dim < 1) {
      problems.push_back("attention site " + Quote(s.path) + " has head_dim " + std::to_string(s.head_dim) +
                         "; an attention head has at least one dimension");
    }
  }
  if (graph.ParamBytes() == source::kSaturated) {
    problems.push_back("the parameters need more than the 9223372036854775807 (2^63 - 1) bytes a size may count");
  }
  for (const Workload& w : graph.workloads) {
    for (const ModuleCalls& c : w.calls) {
      if (graph.FindModule(c.module) == nullptr) {
        problems.push_back("workload " + Quote(w.name) + " traces " + Quote(c.module) +
                           ", which is not a module");
      }
    }
  }
  return problems;
}

}  // namespace weft::model

#include "compiler/program/graph_view.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>

#include "compiler/program/archive.h"
#include "compiler/program/bindings.h"
#include "compiler/program/expr.h"

namespace weft::program {
namespace {

std::string Parent(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

// "blocks.0.attn@1" (a second call) -> "blocks.0.attn".
std::string ModulePathOf(const std::string& fqn) {
  const size_t at = fqn.find('@');
  return at == std::string::npos ? fqn : fqn.substr(0, at);
}

std::string Leaf(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// The module tree without a manifest: every module the call graph or a node's stack names.
std::vector<model::Module> DeriveModules(const Program& p) {
  std::vector<std::string> order;
  std::map<std::string, std::string> types;
  auto add = [&](const std::string& path) {
    if (types.emplace(path, "").second) order.push_back(path);
  };
  add("");
  for (const ModuleCall& c : p.module_calls) add(ModulePathOf(c.fqn));
  for (const auto& stack : p.module_stacks) {
    for (const ModuleFrame& f : stack) {
      // Every ancestor exists too (a container is never on a stack).
      std::string path = f.path;
      std::vector<std::string> chain;
      while (!path.empty()) {
        chain.push_back(path);
        path = Parent(path);
      }
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) add(*it);
      types[f.path] = f.type;
    }
  }
  std::vector<model::Module> modules;
  std::map<std::string, size_t> index;
  for (const std::string& path : order) {
    model::Module m;
    m.path = path;
    m.type = types[path].empty() ? "Module" : types[path];
    index[path] = modules.size();
    modules.push_back(std::move(m));
  }
  for (const std::string& path : order) {
    if (path.empty()) continue;
    modules[index[Parent(path)]].children.push_back(Leaf(path));
  }
  for (model::Module& m : modules) {
    if (!m.children.empty() && std::all_of(m.children.begin(), m.children.end(), AllDigits) && types[m.path].empty()) {
      m.container = model::Container::kList;
      m.type = "ModuleList";
    }
  }
  return modules;
}

model::Value ValueOf(const Program& p, const Bindings& b, const Argument& a) {
  switch (a.kind) {
    case Argument::Kind::kTensor: {
      const TensorMeta* meta = p.FindTensor(a.name);
      if (meta == nullptr) return model::Value::None();
      return model::Value::Tensor(b.Sizes(*meta), ScalarTypeName(meta->dtype));
    }
    case Argument::Kind::kTensors:
    case Argument::Kind::kOptionalTensors: {
      std::vector<model::Value> items;
      for (const std::string& n : a.names) {
        Argument t;
        t.kind = n.empty() ? Argument::Kind::kNone : Argument::Kind::kTensor;
        t.name = n;
        items.push_back(ValueOf(p, b, t));
      }
      return model::Value::Tuple(std::move(items));
    }
    case Argument::Kind::kNone:
      return model::Value::None();
    case Argument::Kind::kInt:
      return model::Value::Scalar(std::to_string(a.i));
    case Argument::Kind::kBool:
      return model::Value::Scalar(a.b ? "true" : "false");
    case Argument::Kind::kFloat:
      return model::Value::Scalar(nlohmann::json(a.f).dump());
    case Argument::Kind::kSymInt:
      if (!a.sym_ints.empty() && a.sym_ints[0].is_name) {
        auto it = p.sym_int_values.find(a.sym_ints[0].name);
        if (it != p.sym_int_values.end()) return model::Value::Scalar(std::to_string(b.Eval(it->second)));
      }
      return model::Value::Scalar(std::to_string(a.sym_ints.empty() ? 0 : a.sym_ints[0].value));
    default:
      return model::Value::Scalar("\"" + std::string(ArgumentKindName(a.kind)) + "\"");
  }
}

// Values of a spec's leaves, grouped as the spec groups them: a container of leaves is a tuple.
// `leaves` holds each leaf's input (nullptr: a symbolic size passed around the signature).
model::Value GroupLeaves(const Program& p, const Bindings& b, const TreeSpec& spec,
                         const std::vector<const Argument*>& leaves, size_t& next) {
  if (spec.IsLeaf()) {
    if (next >= leaves.size()) return model::Value::None();
    const Argument* a = leaves[next++];
    return a == nullptr ? model::Value::Scalar("\"symbolic\"") : ValueOf(p, b, *a);
  }
  std::vector<model::Value> items;
  for (const TreeSpec& c : spec.children) items.push_back(GroupLeaves(p, b, c, leaves, next));
  return model::Value::Tuple(std::move(items));
}

std::vector<const Argument*> Pointers(const std::vector<Argument>& args) {
  std::vector<const Argument*> out;
  for (const Argument& a : args) out.push_back(&a);
  return out;
}

// A preserved module call as a traced call: arguments named by the forward signature
// (positional ones) and the spec's keys (keyword ones), in signature order.
model::Call CallOf(const Program& p, const Bindings& b, const ModuleCall& call, const model::ModuleType* type) {
  model::Call out;
  const TreeSpec& spec = call.in_spec;
  const std::vector<const Argument*> leaves = p.LeafInputs(call);
  size_t next = 0;
  std::vector<std::pair<std::string, model::Value>> args;
  if (spec.type == "builtins.tuple" && spec.children.size() == 2) {
    const TreeSpec& positional = spec.children[0];
    for (size_t i = 0; i < positional.children.size(); ++i) {
      std::string name = type != nullptr && i < type->args.size() ? type->args[i].name : "arg" + std::to_string(i);
      args.emplace_back(name, GroupLeaves(p, b, positional.children[i], leaves, next));
    }
    out.positional = static_cast<int64_t>(positional.children.size());
    const TreeSpec& keywords = spec.children[1];
    for (size_t i = 0; i < keywords.children.size(); ++i) {
      std::string name = i < keywords.keys.size() ? keywords.keys[i] : "kwarg" + std::to_string(i);
      args.emplace_back(name, GroupLeaves(p, b, keywords.children[i], leaves, next));
    }
  }
  if (type != nullptr) {
    std::stable_sort(args.begin(), args.end(), [&](const auto& x, const auto& y) {
      auto pos = [&](const std::string& n) { return type->ArgIndex(n).value_or(type->args.size()); };
      return pos(x.first) < pos(y.first);
    });
  }
  out.args = std::move(args);
  next = 0;
  const std::vector<const Argument*> outputs = Pointers(call.outputs);
  if (call.out_spec.IsLeaf()) {
    out.outputs.push_back(GroupLeaves(p, b, call.out_spec, outputs, next));
  } else {
    for (const TreeSpec& c : call.out_spec.children) out.outputs.push_back(GroupLeaves(p, b, c, outputs, next));
  }
  return out;
}

class Dataflow {
 public:
  explicit Dataflow(const Program& p) : p_(p) {
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      for (const Argument& o : p.nodes[i].outputs) {
        for (const std::string& n : o.TensorNames()) producer_[n] = i;
      }
    }
  }

  // The arguments of `call` (names from `names`, parallel to call.inputs' leaves) from which a
  // path reaches `target` through the input operand of a Linear.
  std::set<std::string> FeedingInputs(const std::string& target, const std::map<std::string, std::string>& leaf_arg) const {
    std::set<std::string> found;
    std::set<std::pair<std::string, bool>> seen;
    std::vector<std::pair<std::string, bool>> stack{{target, false}};
    while (!stack.empty()) {
      auto [name, through_linear] = stack.back();
      stack.pop_back();
      if (!seen.insert({name, through_linear}).second) continue;
      auto arg = leaf_arg.find(name);
      if (arg != leaf_arg.end()) {
        if (through_linear) found.insert(arg->second);
        continue;  // the module boundary
      }
      auto it = producer_.find(name);
      if (it == producer_.end()) continue;
      const Node& n = p_.nodes[it->second];
      if (n.target == "torch.ops.aten.linear.default") {
        if (!n.inputs.empty() && n.inputs[0].arg.kind == Argument::Kind::kTensor) stack.push_back({n.inputs[0].arg.name, true});
        continue;
      }
      for (const NamedArgument& in : n.inputs) {
        for (const std::string& t : in.arg.TensorNames()) stack.push_back({t, through_linear});
      }
    }
    return found;
  }

 private:
  const Program& p_;
  std::unordered_map<std::string, size_t> producer_;
};

// Leaf tensor name -> forward argument name, for a preserved call.
std::map<std::string, std::string> LeafArguments(const Program& p, const ModuleCall& call, const model::ModuleType* type) {
  std::map<std::string, std::string> out;
  const TreeSpec& spec = call.in_spec;
  if (spec.type != "builtins.tuple" || spec.children.size() != 2) return out;
  const std::vector<const Argument*> leaves = p.LeafInputs(call);
  size_t next = 0;
  auto take = [&](const TreeSpec& sub, const std::string& name) {
    const size_t n = sub.LeafCount();
    for (size_t i = 0; i < n && next < leaves.size(); ++i, ++next) {
      if (leaves[next] == nullptr) continue;
      for (const std::string& t : leaves[next]->TensorNames()) out[t] = name;
    }
  };
  for (size_t i = 0; i < spec.children[0].children.size(); ++i) {
    take(spec.children[0].children[i], type != nullptr && i < type->args.size() ? type->args[i].name : "arg" + std::to_string(i));
  }
  for (size_t i = 0; i < spec.children[1].children.size(); ++i) {
    take(spec.children[1].children[i], i < spec.children[1].keys.size() ? spec.children[1].keys[i] : "kwarg");
  }
  return out;
}

std::vector<std::string> InSignatureOrder(const std::set<std::string>& names, const model::ModuleType* type) {
  std::vector<std::string> out(names.begin(), names.end());
  if (type != nullptr) {
    std::stable_sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) {
      return type->ArgIndex(a).value_or(1000) < type->ArgIndex(b).value_or(1000);
    });
  }
  return out;
}

std::vector<InputDesc> WorkloadInputs(const ManifestWorkload& w) { return w.inputs; }

const model::AttentionSite* StructuralSite(const Program& p, const std::string& path) {
  if (!p.manifest) return nullptr;
  for (const model::AttentionSite& s : p.manifest->attention) {
    if (s.path == path) return &s;
  }
  return nullptr;
}

model::Workload TraceWorkload(const Program& p, const model::ModelGraph& g, const ManifestWorkload& w,
                              const std::vector<std::string>& site_order,
                              const std::map<std::string, std::vector<size_t>>& site_nodes);

}  // namespace

std::string AttentionOwner(const Program& program, const Node& node) {
  if (node.stack < 0) return "";
  const std::vector<ModuleFrame>& frames = program.module_stacks[static_cast<size_t>(node.stack)];
  if (frames.empty()) return "";
  if (program.manifest) {
    const auto& types = program.manifest->attention_types;
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      if (std::find(types.begin(), types.end(), it->type) != types.end()) return it->path;
    }
  }
  std::set<std::string> with_linear;
  for (const Node& n : program.nodes) {
    if (n.target != "torch.ops.aten.linear.default" || n.stack < 0) continue;
    for (const ModuleFrame& f : program.module_stacks[static_cast<size_t>(n.stack)]) with_linear.insert(f.path);
  }
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!it->path.empty() && with_linear.count(it->path)) return it->path;
  }
  return frames.back().path;
}

model::ModelGraph GraphOfProgram(const Program& p) {
  const std::string where = p.Where();
  model::ModelGraph g;
  const ModuleCall* root_call = p.Root();
  if (p.manifest) {
    const Manifest& m = *p.manifest;
    g.name = m.name;
    g.class_name = m.class_name;
    g.source = m.source;
    g.model_config_json = m.model_config_json;
    g.producer = m.producer;
    g.producer.emplace_back("program", p.path);
    g.config = m.config;
    g.types = m.types;
    g.modules = m.modules;
  } else {
    g.modules = DeriveModules(p);
    g.class_name = g.modules.empty() ? "" : g.modules[0].type;
    g.name = g.class_name;
    g.source = p.path;
    for (const model::Module& mod : g.modules) {
      if (g.FindType(mod.type) == nullptr) {
        model::ModuleType t;
        t.name = mod.type;
        t.variadic = true;
        g.types.push_back(t);
        g.Reindex();
      }
    }
  }
  g.Reindex();
  if (g.FindModule("") == nullptr) throw ProgramError(where + ": the manifest has no root module");
  // The root's signature is the program's own.
  if (root_call != nullptr && root_call->has_signature) {
    const std::vector<std::string> names = p.ForwardArgNames();
    model::ModuleType* root_type = nullptr;
    for (model::ModuleType& t : g.types) {
      if (t.name == g.FindModule("")->type) root_type = &t;
    }
    if (root_type != nullptr && root_type->args.empty()) {
      for (const std::string& n : names) root_type->args.push_back({n, false, false});
    }
  }

  // Every module the program names must be in the tree (`fqn@1` is the second call of `fqn`).
  for (const ModuleCall& c : p.module_calls) {
    if (g.FindModule(ModulePathOf(c.fqn)) == nullptr) {
      throw ProgramError(where + ": the program calls module `" + c.fqn + "`, which its manifest does not list");
    }
  }

  // Parameters and registered buffers, by fqn.
  for (const InputSpec& s : p.input_specs) {
    if (s.kind != InputSpec::Kind::kParameter && s.kind != InputSpec::Kind::kBuffer) continue;
    const std::string module_path = Parent(s.target);
    auto id = g.FindModuleId(module_path);
    if (!id) throw ProgramError(where + ": parameter `" + s.target + "` belongs to no module of the tree");
    const TensorMeta* meta = p.FindTensor(s.arg.name);
    if (meta == nullptr) throw ProgramError(where + ": parameter `" + s.target + "` has no tensor metadata");
    model::Param param;
    param.name = Leaf(s.target);
    for (const SymInt& d : meta->sizes) {
      if (d.symbolic) throw ProgramError(where + ": parameter `" + s.target + "` has a symbolic size " + d.expr);
      param.shape.push_back(d.value);
    }
    param.dtype = ScalarTypeName(meta->dtype);
    param.buffer = s.kind == InputSpec::Kind::kBuffer;
    g.modules[*id].params.push_back(std::move(param));
  }

  // Output counts of each class, where every preserved call agrees.
  std::map<std::string, std::set<size_t>> outputs;
  for (const ModuleCall& c : p.module_calls) {
    if (!c.has_signature) continue;
    const model::Module* mod = g.FindModule(ModulePathOf(c.fqn));
    const size_t n = c.out_spec.IsLeaf() ? 1 : c.out_spec.children.size();
    outputs[mod->type].insert(n);
  }
  for (model::ModuleType& t : g.types) {
    auto it = outputs.find(t.name);
    if (it != outputs.end() && it->second.size() == 1) t.num_outputs = static_cast<int64_t>(*it->second.begin());
  }

  // Attention sites.
  Dataflow flow(p);
  std::vector<std::string> site_order;
  std::map<std::string, std::vector<size_t>> site_nodes;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].target != kSdpaTarget) continue;
    const std::string owner = AttentionOwner(p, p.nodes[i]);
    if (site_nodes.find(owner) == site_nodes.end()) site_order.push_back(owner);
    site_nodes[owner].push_back(i);
  }
  for (const std::string& path : site_order) {
    const Node& first = p.nodes[site_nodes[path][0]];
    model::AttentionSite site;
    site.path = path;
    const TensorMeta* q = first.inputs.empty() ? nullptr : p.FindTensor(first.inputs[0].arg.name);
    if (q != nullptr && q->sizes.size() == 4) {
      site.heads = q->sizes[1].value;
      site.head_dim = q->sizes[3].value;
    }
    const ModuleCall* call = p.FindModuleCall(path);
    const model::ModuleType* type = g.TypeOf(path);
    std::set<std::string> q_args, kv_args;
    if (call != nullptr && call->has_signature) {
      const auto leaves = LeafArguments(p, *call, type);
      for (size_t n : site_nodes[path]) {
        const Node& node = p.nodes[n];
        if (node.inputs.size() < 2) continue;
        for (const std::string& a : flow.FeedingInputs(node.inputs[0].arg.name, leaves)) q_args.insert(a);
        for (const std::string& a : flow.FeedingInputs(node.inputs[1].arg.name, leaves)) kv_args.insert(a);
      }
    }
    if (!q_args.empty() && !kv_args.empty()) {
      site.q_inputs = InSignatureOrder(q_args, type);
      site.kv_inputs = InSignatureOrder(kv_args, type);
      site.kind = site.q_inputs.size() > 1 ? model::AttentionKind::kJoint
                  : site.q_inputs == site.kv_inputs ? model::AttentionKind::kSelf : model::AttentionKind::kCross;
    } else if (const model::AttentionSite* s = StructuralSite(p, path)) {
      site.kind = s->kind;
      site.q_inputs = s->q_inputs;
      site.kv_inputs = s->kv_inputs;
    } else {
      throw ProgramError(where + ": attention in `" + path + "`: no preserved call signature tells which inputs feed "
                         "Q and K/V (export with tools/export_program.py)");
    }
    g.attention_sites.push_back(std::move(site));
  }
  // An attention module whose forward no SDPA node came from (a branch the export did not take,
  // Sana's linear attention) is no site: nothing in the program runs there as attention, and the
  // program records no head size for it.
  // Sites in module order, as the exporter writes them.
  std::map<std::string, size_t> module_rank;
  for (size_t i = 0; i < g.modules.size(); ++i) module_rank[g.modules[i].path] = i;
  std::stable_sort(g.attention_sites.begin(), g.attention_sites.end(),
                   [&](const model::AttentionSite& a, const model::AttentionSite& b) {
                     return module_rank[a.path] < module_rank[b.path];
                   });

  // Workloads: every preserved call and every attention call at each manifest workload.
  if (p.manifest) {
    for (const ManifestWorkload& w : p.manifest->workloads) {
      try {
        g.workloads.push_back(TraceWorkload(p, g, w, site_order, site_nodes));
      } catch (const ExprError& e) {
        throw ProgramError(where + ": at the manifest's workload `" + w.name + "`: " + e.what());
      }
    }
  }
  g.Reindex();
  std::vector<std::string> problems = model::CheckGraph(g);
  if (!problems.empty()) throw ProgramError(where + ": the program's graph is inconsistent: " + problems[0]);
  return g;
}

namespace {

model::Workload TraceWorkload(const Program& p, const model::ModelGraph& g, const ManifestWorkload& w,
                              const std::vector<std::string>& site_order,
                              const std::map<std::string, std::vector<size_t>>& site_nodes) {
  Bindings b;
  try {
    b = Bindings::Bind(p, WorkloadInputs(w));
  } catch (const ProgramError& e) {
    throw ProgramError(std::string(e.what()) + " (at the manifest's workload `" + w.name + "`)");
  }
  model::Workload wl;
  wl.name = w.name;
  wl.params = w.params;
  // The root's call: the user inputs and outputs. A list or tuple argument whose tensors the
  // caller gives one by one (`x[0]`, `x[1]`) is one tuple of them in leaf order, so that a plan
  // names an element as `x[0]`, which lowering splits by the same order.
  model::Call root;
  std::map<std::string, std::pair<std::string, size_t>> element_of;  // key -> (argument, leaf position)
  std::map<std::string, size_t> leaves_of;
  for (const FlatInput& f : FlattenInputs(p)) {
    if (f.index.empty()) continue;
    const size_t at = leaves_of[f.arg]++;
    if (f.key != f.arg) element_of[f.key] = {f.arg, at};
  }
  for (const InputDesc& in : w.inputs) {
    model::Value v = in.tensor ? model::Value::Tensor(in.shape, in.dtype) : model::Value::Scalar(in.value_json);
    auto e = element_of.find(in.name);
    if (e == element_of.end()) {
      root.args.emplace_back(in.name, std::move(v));
      continue;
    }
    auto a = std::find_if(root.args.begin(), root.args.end(), [&](const auto& x) { return x.first == e->second.first; });
    if (a == root.args.end()) {
      root.args.emplace_back(e->second.first,
                             model::Value::Tuple(std::vector<model::Value>(leaves_of[e->second.first], model::Value::None())));
      a = root.args.end() - 1;
    }
    a->second.elements[e->second.second] = std::move(v);
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (i < p.output_specs.size() && p.output_specs[i].kind != OutputSpec::Kind::kUserOutput) continue;
    root.outputs.push_back(ValueOf(p, b, p.outputs[i]));
  }
  wl.calls.push_back({"", {root}});
  std::map<std::string, std::vector<const ModuleCall*>> calls_of;
  for (const ModuleCall& c : p.module_calls) {
    if (c.has_signature && !c.fqn.empty()) calls_of[ModulePathOf(c.fqn)].push_back(&c);
  }
  for (const model::Module& mod : g.modules) {
    auto it = calls_of.find(mod.path);
    if (it == calls_of.end()) continue;
    model::ModuleCalls mc{mod.path, {}};
    for (const ModuleCall* c : it->second) mc.calls.push_back(CallOf(p, b, *c, g.TypeOf(mod.path)));
    wl.calls.push_back(std::move(mc));
  }
  for (const std::string& path : site_order) {
    model::SiteCalls sc;
    sc.site = path;
    for (size_t n : site_nodes.at(path)) {
      const Node& node = p.nodes[n];
      model::AttentionCall ac;
      for (size_t k = 0; k < 3 && k < node.inputs.size(); ++k) {
        const TensorMeta* meta = p.FindTensor(node.inputs[k].arg.name);
        if (meta == nullptr) continue;
        std::vector<int64_t> bhsd = b.Sizes(*meta);
        std::vector<int64_t> bshd = bhsd.size() == 4 ? std::vector<int64_t>{bhsd[0], bhsd[2], bhsd[1], bhsd[3]} : bhsd;
        (k == 0 ? ac.q : k == 1 ? ac.k : ac.v) = bshd;
      }
      sc.calls.push_back(std::move(ac));
    }
    wl.attention.push_back(std::move(sc));
  }
  return wl;
}

}  // namespace

}  // namespace weft::program

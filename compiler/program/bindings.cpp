#include "compiler/program/bindings.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "compiler/program/archive.h"
#include "compiler/program/expr.h"

namespace weft::program {
namespace {

using Json = nlohmann::json;

void CollectLeaves(const TreeSpec& spec, const std::string& arg, const std::string& path, std::vector<size_t>& index,
                   std::vector<FlatInput>& out) {
  if (spec.IsLeaf()) {
    FlatInput f;
    f.arg = arg;
    f.path = path;
    f.index = index;
    out.push_back(std::move(f));
    return;
  }
  for (size_t i = 0; i < spec.children.size(); ++i) {
    index.push_back(i);
    const std::string key = spec.keys.size() == spec.children.size() ? "['" + spec.keys[i] + "']" : "[" + std::to_string(i) + "]";
    CollectLeaves(spec.children[i], arg, path + key, index, out);
    index.pop_back();
  }
}

// The caller's value at `index` inside a JSON argument, or nullopt when the structure differs.
std::optional<Json> At(const Json& value, const std::vector<size_t>& index) {
  const Json* v = &value;
  for (size_t i : index) {
    if (v->is_array()) {
      if (i >= v->size()) return std::nullopt;
      v = &(*v)[i];
    } else if (v->is_object()) {
      if (i >= v->size()) return std::nullopt;
      auto it = v->begin();
      std::advance(it, static_cast<long>(i));
      v = &*it;
    } else {
      return std::nullopt;
    }
  }
  return *v;
}

ExprValue FromJson(const Json& v) {
  if (v.is_boolean()) return ExprValue::Bool(v.get<bool>());
  if (v.is_number_integer()) return ExprValue::Int(v.get<int64_t>());
  if (v.is_array()) {
    std::vector<ExprValue> items;
    for (const Json& x : v) items.push_back(FromJson(x));
    return ExprValue::List(std::move(items));
  }
  ExprValue none;
  none.kind = ExprValue::Kind::kNone;
  return none;
}

// Where the model's own code fixed `key`'s dim (Manifest::fixed_sizes: ZImage's `len(tensor)`,
// Flux's loop over its position ids' axes), said after a refusal of another size; "" when the
// export recorded none.
std::string FixedByTheForward(const Program& program, const std::string& key, size_t dim) {
  const std::string size = key + ".shape[" + std::to_string(dim) + "]";
  for (const FixedSize& f : program.FixedSizes()) {
    if (f.size == size) return " by the forward, at " + f.at + (f.code.empty() ? "" : " (`" + f.code + "`)");
  }
  return "";
}

std::string DimName(const std::string& arg, size_t dim) { return arg + ".size(" + std::to_string(dim) + ")"; }

// A list or tuple argument whose tensors were given one by one (`x[0]`, `x[1]`), rebuilt as the
// guards read it (`L['x'][0].size()[1]`); nullopt when none of them was given.
std::optional<ExprValue> TensorsGivenApart(const std::vector<FlatInput>& flat,
                                           const std::map<std::string, const InputDesc*>& given, const std::string& arg) {
  ExprValue root = ExprValue::List({});
  bool any = false;
  for (const FlatInput& f : flat) {
    if (f.arg != arg || f.key == f.arg || f.index.empty()) continue;
    auto g = given.find(f.key);
    if (g == given.end() || !g->second->tensor) continue;
    ExprValue* at = &root;
    for (size_t i = 0; i < f.index.size(); ++i) {
      if (at->kind != ExprValue::Kind::kList) *at = ExprValue::List({});
      if (at->list.size() <= f.index[i]) at->list.resize(f.index[i] + 1, ExprValue::List({}));
      at = &at->list[f.index[i]];
    }
    *at = ExprValue::Tensor(g->second->shape);
    any = true;
  }
  if (!any) return std::nullopt;
  return root;
}

void SetKeys(const Program& program, std::vector<FlatInput>& leaves) {
  for (FlatInput& f : leaves) {
    f.tensor = program.inputs[f.graph_input].kind == Argument::Kind::kTensor &&
               program.input_specs[f.graph_input].kind == InputSpec::Kind::kUserInput;
    f.key = f.tensor && !f.index.empty() ? f.path : f.arg;
  }
}

}  // namespace

std::vector<FlatInput> FlattenInputs(const Program& program) {
  std::vector<size_t> user;
  for (size_t i = 0; i < program.input_specs.size(); ++i) {
    const InputSpec::Kind k = program.input_specs[i].kind;
    if (k == InputSpec::Kind::kUserInput || k == InputSpec::Kind::kConstantInput) user.push_back(i);
  }
  std::vector<FlatInput> leaves;
  const ModuleCall* root = program.Root();
  if (root == nullptr || !root->has_signature) {
    // No spec: each user input is a whole argument named after its graph value.
    for (size_t i : user) {
      FlatInput f;
      f.graph_input = i;
      const InputSpec& s = program.input_specs[i];
      f.arg = s.kind == InputSpec::Kind::kConstantInput ? s.target : s.arg.name;
      if (f.arg.empty() && !s.arg.sym_ints.empty()) f.arg = s.arg.sym_ints[0].name;
      f.path = f.arg;
      leaves.push_back(std::move(f));
    }
    SetKeys(program, leaves);
    return leaves;
  }
  const TreeSpec& spec = root->in_spec;
  if (spec.type != "builtins.tuple" || spec.children.size() != 2) {
    throw ProgramError(program.Where() + ": the root's input spec is not (args, kwargs)");
  }
  std::vector<std::string> names = program.ForwardArgNames();
  std::vector<const TreeSpec*> args;
  for (const TreeSpec& c : spec.children[0].children) args.push_back(&c);
  for (const TreeSpec& c : spec.children[1].children) args.push_back(&c);
  if (names.size() != args.size()) {
    throw ProgramError(program.Where() + ": the root's input spec has " + std::to_string(args.size()) +
                       " arguments but names " + std::to_string(names.size()));
  }
  for (size_t a = 0; a < args.size(); ++a) {
    std::vector<size_t> index;
    CollectLeaves(*args[a], names[a], names[a], index, leaves);
  }
  if (leaves.size() != user.size()) {
    throw ProgramError(program.Where() + ": the root's input spec has " + std::to_string(leaves.size()) +
                       " leaves but the graph " + std::to_string(user.size()) + " user inputs");
  }
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i].graph_input = user[i];
  SetKeys(program, leaves);
  return leaves;
}

std::vector<std::string> InputKeys(const std::vector<FlatInput>& flat) {
  std::vector<std::string> keys;
  for (const FlatInput& f : flat) {
    if (std::find(keys.begin(), keys.end(), f.key) == keys.end()) keys.push_back(f.key);
  }
  return keys;
}

std::optional<int64_t> Bindings::Symbol(const std::string& name) const {
  auto it = symbols_.find(name);
  if (it == symbols_.end()) return std::nullopt;
  return it->second;
}

std::string Bindings::Origin(const std::string& symbol) const {
  auto it = origins_.find(symbol);
  return it == origins_.end() ? symbol : it->second;
}

int64_t Bindings::Eval(const SymInt& size) const {
  if (!size.symbolic) return size.value;
  auto cached = cache_.find(size.expr);
  if (cached != cache_.end()) return cached->second;
  ExprEnv env;
  env.symbol = [this](const std::string& s) { return Symbol(s); };
  const Expr e = Expr::Parse(size.expr);
  // A size the data decides (Mochi's text tokens kept by a nonzero: `s_img + u0`) has no value
  // before the program runs; the shapes a workload is traced at take the export's (the hint).
  const std::vector<std::string> symbols = e.Symbols();
  if (std::any_of(symbols.begin(), symbols.end(), IsUnbackedSymbol)) return size.value;
  const int64_t v = e.Evaluate(env);
  cache_.emplace(size.expr, v);
  return v;
}

std::vector<int64_t> Bindings::Sizes(const TensorMeta& meta) const {
  std::vector<int64_t> out;
  out.reserve(meta.sizes.size());
  for (const SymInt& s : meta.sizes) out.push_back(Eval(s));
  return out;
}

Bindings Bindings::Bind(const Program& program, const std::vector<InputDesc>& inputs) {
  const std::string where = program.Where();
  std::map<std::string, const InputDesc*> given;
  for (const InputDesc& d : inputs) given[d.name] = &d;
  const std::vector<FlatInput> flat = FlattenInputs(program);
  const std::vector<std::string> keys = InputKeys(flat);
  auto list = [&]() {
    std::string s;
    for (const std::string& n : keys) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  for (const InputDesc& d : inputs) {
    if (std::find(keys.begin(), keys.end(), d.name) != keys.end()) continue;
    // An empty list or dict holds nothing the program could take: torch.export keeps no input for
    // it (OmniGen's `input_img_latents=[]` of a text-to-image call).
    if (!d.tensor && (d.value_json == "[]" || d.value_json == "{}")) continue;
    std::string elements;
    for (const FlatInput& f : flat) {
      if (f.arg == d.name && f.key != f.arg) elements += (elements.empty() ? "" : ", ") + f.key;
    }
    if (!elements.empty()) {
      throw ProgramError(where + ": forward argument `" + d.name + "` holds tensors, each given on its own: " + elements);
    }
    throw ProgramError(where + ": the program has no forward argument `" + d.name + "` (it takes " + list() + ")");
  }

  Bindings b;
  struct Deferred {
    std::string what;  // "hidden_states.size(1)"
    SymInt size;
    int64_t actual;
  };
  std::vector<Deferred> deferred;
  std::map<std::string, Json> parsed;  // non-tensor arguments
  auto bind = [&](const std::string& expr_text, int64_t actual, const std::string& what) {
    Expr e = Expr::Parse(expr_text);
    const std::string sym = e.AsSymbol();
    if (sym.empty()) {
      deferred.push_back({what, SymInt{true, 0, expr_text}, actual});
      return;
    }
    auto it = b.symbols_.find(sym);
    if (it == b.symbols_.end()) {
      b.symbols_.emplace(sym, actual);
      b.origins_.emplace(sym, what);
    } else if (it->second != actual) {
      throw ProgramError(where + ": " + what + " is " + std::to_string(actual) + " but " + b.origins_[sym] + " is " +
                         std::to_string(it->second) + "; the program requires them equal (both are its size " + sym + ")");
    }
  };

  for (const FlatInput& f : flat) {
    const InputSpec& spec = program.input_specs[f.graph_input];
    const Argument& graph_arg = program.inputs[f.graph_input];
    auto it = given.find(f.key);
    if (it == given.end()) {
      if (spec.kind == InputSpec::Kind::kConstantInput) continue;  // a default the export recorded
      throw ProgramError(where + ": missing forward argument `" + f.key + "` (the program takes " + list() + ")");
    }
    const InputDesc& d = *it->second;
    if (f.tensor) {
      if (!d.tensor) throw ProgramError(where + ": forward argument `" + f.key + "` must be a tensor");
      const TensorMeta* meta = program.FindTensor(graph_arg.name);
      if (meta == nullptr) throw ProgramError(where + ": graph input `" + graph_arg.name + "` has no tensor metadata");
      if (d.shape.size() != meta->sizes.size()) {
        throw ProgramError(where + ": forward argument `" + f.key + "` has " + std::to_string(d.shape.size()) +
                           " dimensions; the program takes " + std::to_string(meta->sizes.size()));
      }
      const std::string want = ScalarTypeName(meta->dtype);
      if (!d.dtype.empty() && !want.empty() && d.dtype != want) {
        throw ProgramError(where + ": forward argument `" + f.key + "` is " + d.dtype + "; the program was exported with " +
                           want);
      }
      for (size_t dim = 0; dim < d.shape.size(); ++dim) {
        const SymInt& s = meta->sizes[dim];
        if (!s.symbolic) {
          if (s.value != d.shape[dim]) {
            throw ProgramError(where + ": " + DimName(f.key, dim) + " is " + std::to_string(d.shape[dim]) +
                               "; the program was exported with it fixed at " + std::to_string(s.value) +
                               FixedByTheForward(program, f.key, dim));
          }
          continue;
        }
        bind(s.expr, d.shape[dim], DimName(f.key, dim));
      }
      continue;
    }
    // A non-tensor leaf: an integer argument, or a constant the export recorded.
    if (d.tensor) throw ProgramError(where + ": forward argument `" + f.path + "` must not be a tensor");
    auto p = parsed.find(f.arg);
    if (p == parsed.end()) {
      Json v = Json::parse(d.value_json.empty() ? "null" : d.value_json, nullptr, false);
      if (v.is_discarded()) throw ProgramError(where + ": forward argument `" + f.arg + "` is not valid JSON");
      p = parsed.emplace(f.arg, std::move(v)).first;
    }
    std::optional<Json> leaf = At(p->second, f.index);
    if (!leaf) throw ProgramError(where + ": forward argument `" + f.arg + "` has no element " + f.path);
    const Argument& recorded = spec.kind == InputSpec::Kind::kConstantInput ? spec.value : graph_arg;
    switch (recorded.kind) {
      case Argument::Kind::kSymInt: {
        if (!leaf->is_number_integer()) throw ProgramError(where + ": `" + f.path + "` must be an integer");
        const SymIntRef& ref = recorded.sym_ints[0];
        if (!ref.is_name) {
          if (ref.value != leaf->get<int64_t>()) {
            throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with it fixed at " +
                               std::to_string(ref.value));
          }
          break;
        }
        auto sv = program.sym_int_values.find(ref.name);
        if (sv == program.sym_int_values.end()) {
          throw ProgramError(where + ": symbolic input `" + ref.name + "` has no value in the program");
        }
        if (!sv->second.symbolic) {  // specialised by the export (a 0 or 1, or forced by the model)
          if (sv->second.value != leaf->get<int64_t>()) {
            throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with it fixed at " +
                               std::to_string(sv->second.value));
          }
          break;
        }
        bind(sv->second.expr, leaf->get<int64_t>(), f.path);
        break;
      }
      case Argument::Kind::kInt:
        if (!leaf->is_number_integer() || leaf->get<int64_t>() != recorded.i) {
          throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with it fixed at " +
                             std::to_string(recorded.i) + " (export again with it dynamic, or pass that value)");
        }
        break;
      case Argument::Kind::kBool:
        if (!leaf->is_boolean() || leaf->get<bool>() != recorded.b) {
          throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with " +
                             (recorded.b ? "true" : "false"));
        }
        break;
      case Argument::Kind::kFloat:
        if (!leaf->is_number() || leaf->get<double>() != recorded.f) {
          throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with " +
                             Json(recorded.f).dump());
        }
        break;
      case Argument::Kind::kNone:
        if (!leaf->is_null()) {
          throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with it None");
        }
        break;
      case Argument::Kind::kString:
        if (!leaf->is_string() || leaf->get<std::string>() != recorded.s) {
          throw ProgramError(where + ": `" + f.path + "` is " + leaf->dump() + "; the program was exported with \"" +
                             recorded.s + "\"");
        }
        break;
      default:
        throw ProgramError(where + ": forward argument `" + f.path + "` is a " + ArgumentKindName(recorded.kind) +
                           ", which weft cannot bind");
    }
  }

  for (const Deferred& d : deferred) {
    int64_t want = 0;
    try {
      want = b.Eval(d.size);
    } catch (const ExprError& e) {
      throw ProgramError(where + ": " + d.what + ": " + e.what());
    }
    if (want != d.actual) {
      throw ProgramError(where + ": " + d.what + " is " + std::to_string(d.actual) + "; the program requires " +
                         std::to_string(want) + " (" + d.size.expr + ")");
    }
  }

  ExprEnv env;
  env.symbol = [&b](const std::string& s) { return b.Symbol(s); };
  env.input = [&](const std::string& name) -> std::optional<ExprValue> {
    auto it = given.find(name);
    if (it == given.end()) return TensorsGivenApart(flat, given, name);
    if (it->second->tensor) return ExprValue::Tensor(it->second->shape);
    auto p = parsed.find(name);
    if (p != parsed.end()) return FromJson(p->second);
    Json v = Json::parse(it->second->value_json.empty() ? "null" : it->second->value_json, nullptr, false);
    return FromJson(v);
  };
  for (const RangeConstraint& r : program.range_constraints) {
    // A range on unbacked symbols only (u0: the row count of a nonzero, a .item()) holds a value no
    // input determines; the graph checks it where it appears (torch.export writes the
    // _assert_scalar / sym_constrain_range_for_size nodes), so it is not checked here.
    const std::vector<std::string> symbols = Expr::Parse(r.expr).Symbols();
    if (!symbols.empty() && std::all_of(symbols.begin(), symbols.end(), IsUnbackedSymbol)) continue;
    int64_t v = 0;
    try {
      v = Expr::Parse(r.expr).Evaluate(env);
    } catch (const ExprError& e) {
      throw ProgramError(where + ": range constraint on " + r.expr + ": " + e.what());
    }
    const std::string sym = Expr::Parse(r.expr).AsSymbol();
    const std::string what = sym.empty() ? r.expr : b.Origin(sym) + " (size " + sym + ")";
    if (r.min && v < *r.min) {
      throw ProgramError(where + ": " + what + " is " + std::to_string(v) + ", below the program's minimum " +
                         std::to_string(*r.min));
    }
    if (r.max && v > *r.max) {
      throw ProgramError(where + ": " + what + " is " + std::to_string(v) + ", above the program's maximum " +
                         std::to_string(*r.max));
    }
  }
  for (const std::string& guard : program.guards) {
    int64_t ok = 0;
    try {
      ok = Expr::Parse(guard).Evaluate(env);
    } catch (const ExprError& e) {
      throw ProgramError(where + ": cannot check the program's guard: " + e.what());
    }
    if (!ok) throw ProgramError(where + ": the inputs break the program's guard `" + guard + "`");
  }
  return b;
}

}  // namespace weft::program

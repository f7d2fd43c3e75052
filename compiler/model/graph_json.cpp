#include "compiler/model/graph_json.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "compiler/model/path_pattern.h"
#include "compiler/source/checked_math.h"
#include "compiler/source/json_locator.h"
#include "compiler/source/sha256.h"

namespace weft::model {
namespace {

using OJson = nlohmann::ordered_json;  // keeps argument order as written
using Json = nlohmann::json;           // sorted keys: the canonical form

using source::JsonLineCol;
using source::JsonLocator;

std::string Child(const std::string& ptr, std::string_view key) { return source::JsonPointerChild(ptr, key); }
std::string Child(const std::string& ptr, size_t index) { return source::JsonPointerChild(ptr, index); }

// ---------------------------------------------------------------------------------------------
// Reading

std::string ShapeList(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// A byte count past int64 in decimal: exact below 2^127, else approximate.
std::string BigCount(const std::vector<int64_t>& shape, int64_t elem_bytes) {
  __extension__ typedef unsigned __int128 U128;
  U128 n = static_cast<U128>(std::max<int64_t>(elem_bytes, 1));
  long double approx = static_cast<long double>(n);
  bool exact = true;
  for (int64_t d : shape) {
    approx *= static_cast<long double>(d);
    if (exact && __builtin_mul_overflow(n, static_cast<U128>(d), &n)) exact = false;
  }
  if (!exact || n >> 127) {
    std::ostringstream out;
    out.precision(3);
    out << "about " << static_cast<double>(approx);
    return out.str();
  }
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(n % 10)));
    n /= 10;
  } while (n != 0);
  return digits;
}

// A tensor whose byte count would not fit int64 (every size product downstream would wrap):
// the message, or "" when it fits. `elem_bytes` 0 checks the element count alone.
std::string TensorTooLarge(const std::vector<int64_t>& shape, const std::string& dtype, int64_t elem_bytes) {
  std::optional<int64_t> n = source::CheckedProduct(shape);
  if (n && source::CheckedMul(*n, std::max<int64_t>(elem_bytes, 1))) return "";
  const std::string what = dtype.empty() ? "a tensor" : "a `" + dtype + "` tensor";
  return what + " of shape " + ShapeList(shape) + " needs " + BigCount(shape, elem_bytes) + " bytes" +
         (dtype.empty() ? " at " + std::to_string(elem_bytes) + " bytes per element" : "") +
         ", more than the 9223372036854775807 (2^63 - 1) a size may count";
}

class Reader {
 public:
  Reader(std::vector<GraphError>& errors, size_t max_errors)
      : errors_(errors), max_errors_(max_errors) {}

  bool Full() const { return errors_.size() >= max_errors_; }

  void Error(const std::string& ptr, std::string message) {
    if (Full()) return;
    errors_.push_back({ptr, std::move(message), 0, 0});
  }

  static std::string TypeName(const OJson& j) {
    switch (j.type()) {
      case OJson::value_t::null:
        return "null";
      case OJson::value_t::object:
        return "an object";
      case OJson::value_t::array:
        return "an array";
      case OJson::value_t::string:
        return "a string";
      case OJson::value_t::boolean:
        return "a boolean";
      case OJson::value_t::number_integer:
      case OJson::value_t::number_unsigned:
        return "an integer";
      case OJson::value_t::number_float:
        return "a number";
      default:
        return "an unsupported value";
    }
  }

  bool ExpectObject(const OJson& j, const std::string& ptr) {
    if (j.is_object()) return true;
    Error(ptr, "expected an object, found " + TypeName(j));
    return false;
  }
  bool ExpectArray(const OJson& j, const std::string& ptr) {
    if (j.is_array()) return true;
    Error(ptr, "expected an array, found " + TypeName(j));
    return false;
  }

  // Reports every key of `obj` that is not in `allowed`.
  void CheckKeys(const OJson& obj, const std::string& ptr, std::initializer_list<std::string_view> allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
      std::string list;
      for (std::string_view a : allowed) {
        if (!list.empty()) list += ", ";
        list += "`" + std::string(a) + "`";
      }
      Error(Child(ptr, it.key()), "unknown field `" + it.key() + "`; expected one of " + list);
    }
  }

  const OJson* Field(const OJson& obj, std::string_view key, const std::string& ptr, bool required) {
    auto it = obj.find(std::string(key));
    if (it == obj.end()) {
      if (required) Error(ptr, "missing required field `" + std::string(key) + "`");
      return nullptr;
    }
    return &*it;
  }

  bool String(const OJson& obj, std::string_view key, const std::string& ptr, std::string& out,
              bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (j == nullptr) return !required;
    if (!j->is_string()) {
      Error(Child(ptr, key), "expected a string, found " + TypeName(*j));
      return false;
    }
    out = j->get<std::string>();
    return true;
  }

  bool Int(const OJson& j, const std::string& ptr, int64_t& out) {
    if (!j.is_number_integer()) {
      Error(ptr, "expected an integer, found " + TypeName(j));
      return false;
    }
    out = j.get<int64_t>();
    return true;
  }

  bool Int(const OJson& obj, std::string_view key, const std::string& ptr, int64_t& out,
           bool required = true) {
    const OJson* j = Field(obj, key, ptr, required);
    if (j == nullptr) return !required;
    return Int(*j, Child(ptr, key), out);
  }

  bool Bool(const OJson& obj, std::string_view key, const std::string& ptr, bool& out) {
    const OJson* j = Field(obj, key, ptr, false);
    if (j == nullptr) return true;
    if (!j->is_boolean()) {
      Error(Child(ptr, key), "expected true or false, found " + TypeName(*j));
      return false;
    }
    out = j->get<bool>();
    return true;
  }

  bool IntList(const OJson& j, const std::string& ptr, std::vector<int64_t>& out, bool non_negative) {
    if (!ExpectArray(j, ptr)) return false;
    out.clear();
    bool ok = true;
    for (size_t i = 0; i < j.size(); ++i) {
      int64_t v = 0;
      if (!Int(j[i], Child(ptr, i), v)) {
        ok = false;
        continue;
      }
      if (non_negative && v < 0) {
        Error(Child(ptr, i), "expected a non-negative size, found " + std::to_string(v));
        ok = false;
      }
      out.push_back(v);
    }
    return ok;
  }

  bool StringList(const OJson& j, const std::string& ptr, std::vector<std::string>& out) {
    if (!ExpectArray(j, ptr)) return false;
    out.clear();
    bool ok = true;
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_string()) {
        Error(Child(ptr, i), "expected a string, found " + TypeName(j[i]));
        ok = false;
        continue;
      }
      out.push_back(j[i].get<std::string>());
    }
    return ok;
  }

  bool Dtype(const OJson& obj, const std::string& ptr, std::string& out) {
    if (!String(obj, "dtype", ptr, out)) return false;
    if (DTypeBytes(out) == 0) {
      Error(Child(ptr, "dtype"), "unknown dtype `" + out +
                                     "`; expected one of f64, f32, f16, bf16, f8e4m3, f8e5m2, "
                                     "c64, c128, i64, i32, i16, i8, u8, bool");
      return false;
    }
    return true;
  }

  bool ReadValue(const OJson& j, const std::string& ptr, Value& out) {
    if (j.is_null()) {
      out = Value::None();
      return true;
    }
    if (!ExpectObject(j, ptr)) return false;
    if (j.contains("shape")) {
      CheckKeys(j, ptr, {"shape", "dtype"});
      out.kind = Value::Kind::kTensor;
      bool ok = IntList(j["shape"], Child(ptr, "shape"), out.shape, true);
      ok = Dtype(j, ptr, out.dtype) && ok;
      if (ok) {
        const std::string too_large = TensorTooLarge(out.shape, out.dtype, DTypeBytes(out.dtype));
        if (!too_large.empty()) {
          Error(Child(ptr, "shape"), too_large);
          ok = false;
        }
      }
      return ok;
    }
    if (j.contains("tuple")) {
      CheckKeys(j, ptr, {"tuple"});
      const OJson& items = j["tuple"];
      const std::string p = Child(ptr, "tuple");
      if (!ExpectArray(items, p)) return false;
      out.kind = Value::Kind::kTuple;
      out.elements.resize(items.size());
      bool ok = true;
      for (size_t i = 0; i < items.size(); ++i) ok &= ReadValue(items[i], Child(p, i), out.elements[i]);
      return ok;
    }
    if (j.contains("value")) {
      CheckKeys(j, ptr, {"value"});
      out = Value::Scalar(Json(j["value"]).dump());
      return true;
    }
    Error(ptr, "a traced value needs `shape` (tensor), `tuple` or `value` (scalar), or null");
    return false;
  }

 private:
  std::vector<GraphError>& errors_;
  size_t max_errors_;
};

// Expands a possibly compressed path, reporting a bad pattern at `ptr`.
bool Expand(Reader& r, const std::string& pattern, const std::string& ptr, std::vector<std::string>& out) {
  std::string error;
  out.clear();
  if (!ExpandPathPattern(pattern, out, error)) {
    r.Error(ptr, error);
    return false;
  }
  return true;
}

void ReadTypes(Reader& r, const OJson& j, const std::string& ptr, ModelGraph& g) {
  if (!r.ExpectObject(j, ptr)) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string p = Child(ptr, it.key());
    const OJson& t = it.value();
    if (!r.ExpectObject(t, p)) continue;
    r.CheckKeys(t, p, {"module", "forward"});
    ModuleType type;
    type.name = it.key();
    r.String(t, "module", p, type.python_module, false);
    if (const OJson* fwd = r.Field(t, "forward", p, true)) {
      const std::string fp = Child(p, "forward");
      if (r.ExpectObject(*fwd, fp)) {
        r.CheckKeys(*fwd, fp, {"args", "variadic", "outputs"});
        r.Bool(*fwd, "variadic", fp, type.variadic);
        r.Int(*fwd, "outputs", fp, type.num_outputs, false);
        if (const OJson* args = r.Field(*fwd, "args", fp, true)) {
          const std::string ap = Child(fp, "args");
          if (r.ExpectArray(*args, ap)) {
            for (size_t i = 0; i < args->size(); ++i) {
              const OJson& a = (*args)[i];
              const std::string p2 = Child(ap, i);
              if (!r.ExpectObject(a, p2)) continue;
              r.CheckKeys(a, p2, {"name", "optional", "keyword_only"});
              Arg arg;
              r.String(a, "name", p2, arg.name);
              r.Bool(a, "optional", p2, arg.optional);
              r.Bool(a, "keyword_only", p2, arg.keyword_only);
              type.args.push_back(std::move(arg));
            }
          }
        }
      }
    }
    g.types.push_back(std::move(type));
  }
}

bool ReadAttrs(Reader& r, const OJson& j, const std::string& ptr, Module& m) {
  if (!r.ExpectObject(j, ptr)) return false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const OJson& v = it.value();
    const std::string p = Child(ptr, it.key());
    Attr a;
    if (v.is_boolean()) {
      a = Attr::Bool(v.get<bool>());
    } else if (v.is_number_integer()) {
      a = Attr::Int(v.get<int64_t>());
      if (it.key() == "heads" && a.values[0] < 1) {
        r.Error(p, "attribute `heads` is " + std::to_string(a.values[0]) +
                       "; an attention module has at least one head");
      }
    } else if (v.is_array()) {
      std::vector<int64_t> list;
      if (!r.IntList(v, p, list, false)) continue;
      a = Attr::IntList(std::move(list));
    } else {
      r.Error(p, "an attribute is an integer, a boolean or an array of integers, found " +
                     Reader::TypeName(v));
      continue;
    }
    m.attrs.emplace_back(it.key(), std::move(a));
  }
  std::sort(m.attrs.begin(), m.attrs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return true;
}

void ReadModules(Reader& r, const OJson& j, const std::string& ptr, ModelGraph& g) {
  if (!r.ExpectArray(j, ptr)) return;
  std::unordered_map<std::string, Module> by_path;
  std::unordered_map<std::string, std::string> where;  // path -> pointer of its entry
  for (size_t i = 0; i < j.size(); ++i) {
    const OJson& e = j[i];
    const std::string p = Child(ptr, i);
    if (!r.ExpectObject(e, p)) continue;
    r.CheckKeys(e, p, {"path", "type", "container", "children", "params", "attrs"});
    std::string pattern;
    Module m;
    if (!r.String(e, "path", p, pattern)) continue;
    r.String(e, "type", p, m.type);
    std::string container;
    r.String(e, "container", p, container, false);
    if (container == "list") {
      m.container = Container::kList;
    } else if (container == "dict") {
      m.container = Container::kDict;
    } else if (container == "sequential") {
      m.container = Container::kSequential;
    } else if (!container.empty()) {
      r.Error(Child(p, "container"), "unknown container `" + container +
                                         "`; expected `list`, `dict` or `sequential`");
    }
    if (const OJson* c = r.Field(e, "children", p, false)) {
      if (r.StringList(*c, Child(p, "children"), m.children)) {
        const std::string* path = e.contains("path") && e["path"].is_string() ? &e["path"].get_ref<const std::string&>()
                                                                            : nullptr;
        for (size_t k = 0; path != nullptr && k < m.children.size(); ++k) {
          std::string problem = ChildNameProblem(*path, m.children, k);
          if (!problem.empty()) r.Error(Child(Child(p, "children"), k), std::move(problem));
        }
      }
    }
    if (const OJson* ps = r.Field(e, "params", p, false)) {
      const std::string pp = Child(p, "params");
      if (r.ExpectArray(*ps, pp)) {
        for (size_t k = 0; k < ps->size(); ++k) {
          const OJson& pj = (*ps)[k];
          const std::string p2 = Child(pp, k);
          if (!r.ExpectObject(pj, p2)) continue;
          r.CheckKeys(pj, p2, {"name", "shape", "dtype", "buffer"});
          Param param;
          r.String(pj, "name", p2, param.name);
          bool shape_ok = false;
          if (const OJson* s = r.Field(pj, "shape", p2, true)) {
            shape_ok = r.IntList(*s, Child(p2, "shape"), param.shape, true);
          }
          if (r.Dtype(pj, p2, param.dtype) && shape_ok) {
            const std::string too_large = TensorTooLarge(param.shape, param.dtype, DTypeBytes(param.dtype));
            if (!too_large.empty()) r.Error(Child(p2, "shape"), "parameter `" + param.name + "`: " + too_large);
          }
          r.Bool(pj, "buffer", p2, param.buffer);
          m.params.push_back(std::move(param));
        }
      }
    }
    if (const OJson* a = r.Field(e, "attrs", p, false)) ReadAttrs(r, *a, Child(p, "attrs"), m);
    std::vector<std::string> paths;
    if (!Expand(r, pattern, Child(p, "path"), paths)) continue;
    for (std::string& path : paths) {
      if (by_path.count(path)) {
        r.Error(Child(p, "path"), "module `" + path + "` is also described at " + where[path]);
        continue;
      }
      Module copy = m;
      copy.path = path;
      where.emplace(path, p);
      by_path.emplace(std::move(path), std::move(copy));
    }
  }
  // Pre-order from the root through the children lists.
  if (by_path.empty()) return;
  if (!by_path.count("")) {
    r.Error(ptr, "no root module (an entry with path \"\")");
    return;
  }
  std::vector<std::string> stack = {""};
  std::unordered_set<std::string> visited;
  while (!stack.empty()) {
    std::string path = std::move(stack.back());
    stack.pop_back();
    auto it = by_path.find(path);
    if (it == by_path.end() || !visited.insert(path).second) continue;
    const Module& m = it->second;
    for (auto c = m.children.rbegin(); c != m.children.rend(); ++c) {
      stack.push_back(path.empty() ? *c : path + "." + *c);
    }
    g.modules.push_back(m);
  }
  if (visited.size() != by_path.size()) {
    std::vector<std::string> orphans;
    for (const auto& [path, m] : by_path) {
      if (!visited.count(path)) orphans.push_back(path);
    }
    std::sort(orphans.begin(), orphans.end());
    for (const std::string& o : orphans) {
      r.Error(where[o], "module `" + o + "` is not reachable from the root through `children`");
    }
  }
}

void ReadSites(Reader& r, const OJson& j, const std::string& ptr, ModelGraph& g) {
  if (!r.ExpectArray(j, ptr)) return;
  for (size_t i = 0; i < j.size(); ++i) {
    const OJson& e = j[i];
    const std::string p = Child(ptr, i);
    if (!r.ExpectObject(e, p)) continue;
    r.CheckKeys(e, p, {"path", "heads", "head_dim", "kind", "q", "kv", "traced"});
    AttentionSite s;
    std::string pattern, kind;
    if (!r.String(e, "path", p, pattern)) continue;
    if (r.Int(e, "heads", p, s.heads) && s.heads < 1 && e.contains("heads")) {
      r.Error(Child(p, "heads"), "attention site `" + pattern + "` has " + std::to_string(s.heads) +
                                     " heads; an attention site has at least one head");
    }
    if (r.Int(e, "head_dim", p, s.head_dim) && s.head_dim < 1 && e.contains("head_dim")) {
      r.Error(Child(p, "head_dim"), "attention site `" + pattern + "` has head_dim " + std::to_string(s.head_dim) +
                                        "; an attention head has at least one dimension");
    }
    if (r.String(e, "kind", p, kind)) {
      if (auto k = ParseAttentionKind(kind)) {
        s.kind = *k;
      } else {
        r.Error(Child(p, "kind"), "unknown attention kind `" + kind + "`; expected `self`, `cross` or `joint`");
      }
    }
    if (const OJson* q = r.Field(e, "q", p, true)) r.StringList(*q, Child(p, "q"), s.q_inputs);
    if (const OJson* kv = r.Field(e, "kv", p, true)) r.StringList(*kv, Child(p, "kv"), s.kv_inputs);
    r.Bool(e, "traced", p, s.traced);
    std::vector<std::string> paths;
    if (!Expand(r, pattern, Child(p, "path"), paths)) continue;
    for (std::string& path : paths) {
      AttentionSite copy = s;
      copy.path = std::move(path);
      g.attention_sites.push_back(std::move(copy));
    }
  }
}

bool ReadCall(Reader& r, const OJson& e, const std::string& p, Call& call) {
  if (!r.ExpectObject(e, p)) return false;
  r.CheckKeys(e, p, {"args", "positional", "outputs"});
  bool ok = true;
  if (const OJson* args = r.Field(e, "args", p, true)) {
    const std::string ap = Child(p, "args");
    if (r.ExpectObject(*args, ap)) {
      for (auto it = args->begin(); it != args->end(); ++it) {
        Value v;
        ok &= r.ReadValue(it.value(), Child(ap, it.key()), v);
        call.args.emplace_back(it.key(), std::move(v));
      }
    }
  }
  r.Int(e, "positional", p, call.positional, false);
  if (const OJson* outs = r.Field(e, "outputs", p, true)) {
    const std::string op = Child(p, "outputs");
    if (r.ExpectArray(*outs, op)) {
      call.outputs.resize(outs->size());
      for (size_t k = 0; k < outs->size(); ++k) ok &= r.ReadValue((*outs)[k], Child(op, k), call.outputs[k]);
    }
  }
  return ok;
}

void ReadWorkloads(Reader& r, const OJson& j, const std::string& ptr, ModelGraph& g) {
  if (!r.ExpectArray(j, ptr)) return;
  for (size_t i = 0; i < j.size(); ++i) {
    const OJson& e = j[i];
    const std::string p = Child(ptr, i);
    if (!r.ExpectObject(e, p)) continue;
    r.CheckKeys(e, p, {"name", "params", "calls", "attention"});
    Workload w;
    r.String(e, "name", p, w.name);
    for (const Workload& other : g.workloads) {
      if (other.name == w.name) r.Error(Child(p, "name"), "workload `" + w.name + "` appears twice");
    }
    if (const OJson* params = r.Field(e, "params", p, false)) {
      if (r.ExpectObject(*params, Child(p, "params"))) {
        for (auto it = params->begin(); it != params->end(); ++it) {
          w.params.emplace_back(it.key(), Json(it.value()).dump());
        }
      }
    }
    if (const OJson* calls = r.Field(e, "calls", p, true)) {
      const std::string cp = Child(p, "calls");
      if (r.ExpectArray(*calls, cp)) {
        for (size_t k = 0; k < calls->size(); ++k) {
          const OJson& c = (*calls)[k];
          const std::string p2 = Child(cp, k);
          if (!r.ExpectObject(c, p2)) continue;
          r.CheckKeys(c, p2, {"module", "calls"});
          std::string pattern;
          if (!r.String(c, "module", p2, pattern)) continue;
          ModuleCalls mc;
          if (const OJson* list = r.Field(c, "calls", p2, true)) {
            const std::string lp = Child(p2, "calls");
            if (r.ExpectArray(*list, lp)) {
              mc.calls.resize(list->size());
              for (size_t n = 0; n < list->size(); ++n) ReadCall(r, (*list)[n], Child(lp, n), mc.calls[n]);
            }
          }
          std::vector<std::string> paths;
          if (!Expand(r, pattern, Child(p2, "module"), paths)) continue;
          for (std::string& path : paths) {
            ModuleCalls copy = mc;
            copy.module = std::move(path);
            w.calls.push_back(std::move(copy));
          }
        }
      }
    }
    if (const OJson* att = r.Field(e, "attention", p, false)) {
      const std::string ap = Child(p, "attention");
      if (r.ExpectArray(*att, ap)) {
        for (size_t k = 0; k < att->size(); ++k) {
          const OJson& a = (*att)[k];
          const std::string p2 = Child(ap, k);
          if (!r.ExpectObject(a, p2)) continue;
          r.CheckKeys(a, p2, {"site", "calls"});
          std::string pattern;
          if (!r.String(a, "site", p2, pattern)) continue;
          SiteCalls sc;
          if (const OJson* list = r.Field(a, "calls", p2, true)) {
            const std::string lp = Child(p2, "calls");
            if (r.ExpectArray(*list, lp)) {
              for (size_t n = 0; n < list->size(); ++n) {
                const OJson& qkv = (*list)[n];
                const std::string p3 = Child(lp, n);
                if (!r.ExpectObject(qkv, p3)) continue;
                r.CheckKeys(qkv, p3, {"q", "k", "v"});
                AttentionCall ac;
                for (auto [key, dst] : {std::pair<const char*, std::vector<int64_t>*>{"q", &ac.q},
                                        {"k", &ac.k},
                                        {"v", &ac.v}}) {
                  if (const OJson* s = r.Field(qkv, key, p3, true)) {
                    const bool ok = r.IntList(*s, Child(p3, key), *dst, true);
                    if (dst->size() != 4) {
                      r.Error(Child(p3, key), "attention shapes are (B, S, H, D); found rank " +
                                                  std::to_string(dst->size()));
                    } else if (ok) {
                      // The cost model multiplies these by up to 16 bytes per element.
                      const std::string too_large = TensorTooLarge(*dst, "", 16);
                      if (!too_large.empty()) r.Error(Child(p3, key), too_large);
                    }
                  }
                }
                sc.calls.push_back(std::move(ac));
              }
            }
          }
          std::vector<std::string> paths;
          if (!Expand(r, pattern, Child(p2, "site"), paths)) continue;
          for (std::string& path : paths) {
            SiteCalls copy = sc;
            copy.site = std::move(path);
            w.attention.push_back(std::move(copy));
          }
        }
      }
    }
    g.workloads.push_back(std::move(w));
  }
}

// ---------------------------------------------------------------------------------------------
// Writing

Json ValueJson(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone:
      return nullptr;
    case Value::Kind::kTensor:
      return Json{{"shape", v.shape}, {"dtype", v.dtype}};
    case Value::Kind::kTuple: {
      Json items = Json::array();
      for (const Value& e : v.elements) items.push_back(ValueJson(e));
      return Json{{"tuple", items}};
    }
    case Value::Kind::kScalar:
      return Json{{"value", Json::parse(v.scalar_json, nullptr, false)}};
  }
  return nullptr;
}

template <typename J = OJson>
J ModuleBody(const Module& m) {
  J e;
  e["type"] = m.type;
  switch (m.container) {
    case Container::kList:
      e["container"] = "list";
      break;
    case Container::kDict:
      e["container"] = "dict";
      break;
    case Container::kSequential:
      e["container"] = "sequential";
      break;
    case Container::kNone:
      break;
  }
  if (!m.children.empty()) e["children"] = m.children;
  if (!m.params.empty()) {
    J ps = J::array();
    for (const Param& p : m.params) {
      J pj;
      pj["name"] = p.name;
      pj["shape"] = p.shape;
      pj["dtype"] = p.dtype;
      if (p.buffer) pj["buffer"] = true;
      ps.push_back(std::move(pj));
    }
    e["params"] = std::move(ps);
  }
  if (!m.attrs.empty()) {
    J a = J::object();
    for (const auto& [name, attr] : m.attrs) {
      switch (attr.kind) {
        case Attr::Kind::kInt:
          a[name] = attr.values.empty() ? 0 : attr.values[0];
          break;
        case Attr::Kind::kBool:
          a[name] = !attr.values.empty() && attr.values[0] != 0;
          break;
        case Attr::Kind::kIntList:
          a[name] = attr.values;
          break;
      }
    }
    e["attrs"] = std::move(a);
  }
  return e;
}

template <typename J = OJson>
J SiteBody(const AttentionSite& s) {
  J e;
  e["heads"] = s.heads;
  e["head_dim"] = s.head_dim;
  e["kind"] = std::string(AttentionKindName(s.kind));
  e["q"] = s.q_inputs;
  e["kv"] = s.kv_inputs;
  if (!s.traced) e["traced"] = false;
  return e;
}

OJson CallJson(const Call& c) {
  OJson e;
  OJson args = OJson::object();
  for (const auto& [name, v] : c.args) args[name] = OJson(ValueJson(v));
  e["args"] = std::move(args);
  e["positional"] = c.positional;
  OJson outs = OJson::array();
  for (const Value& v : c.outputs) outs.push_back(OJson(ValueJson(v)));
  e["outputs"] = std::move(outs);
  return e;
}

template <typename J = OJson>
J TypeBody(const ModuleType& t, bool with_module) {
  J fwd;
  J args = J::array();
  for (const Arg& a : t.args) {
    J aj;
    aj["name"] = a.name;
    if (a.optional) aj["optional"] = true;
    if (a.keyword_only) aj["keyword_only"] = true;
    args.push_back(std::move(aj));
  }
  fwd["args"] = std::move(args);
  if (t.variadic) fwd["variadic"] = true;
  if (t.num_outputs >= 0) fwd["outputs"] = t.num_outputs;
  J e;
  if (with_module) e["module"] = t.python_module;
  e["forward"] = std::move(fwd);
  return e;
}

std::string Compact(const OJson& j) { return j.dump(); }

// Writes `"key": [ entries one per line ]` where each entry is {first_key: pattern, ...body}.
template <typename Body>
void WriteCompressedList(std::ostringstream& out, const char* indent,
                         const std::vector<std::pair<std::string, OJson>>& entries, const char* path_key,
                         const std::unordered_set<std::string>& lists, Body&&) {
  std::vector<std::pair<std::string, std::string>> keyed;
  keyed.reserve(entries.size());
  for (const auto& [path, body] : entries) keyed.emplace_back(path, Compact(body));
  const auto groups =
      CompressPaths(keyed, [&](std::string_view prefix) { return lists.count(std::string(prefix)) > 0; });
  for (size_t i = 0; i < groups.size(); ++i) {
    OJson e;
    e[path_key] = groups[i].first;
    for (auto it = entries[groups[i].second].second.begin(); it != entries[groups[i].second].second.end(); ++it) {
      e[it.key()] = it.value();
    }
    out << indent << e.dump() << (i + 1 < groups.size() ? ",\n" : "\n");
  }
}

}  // namespace

GraphReadResult ReadGraphJson(std::string_view text, size_t max_errors) {
  GraphReadResult result;
  OJson doc;
  try {
    doc = OJson::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    GraphError err;
    err.pointer = "";
    std::string what = e.what();
    const size_t colon = what.find("]: ");
    err.message = "malformed JSON: " + (colon == std::string::npos ? what : what.substr(colon + 3));
    JsonLineCol(text, e.byte > 0 ? e.byte - 1 : 0, err.line, err.col);
    result.errors.push_back(std::move(err));
    return result;
  }
  Reader r(result.errors, max_errors);
  ModelGraph g;
  if (r.ExpectObject(doc, "")) {
    r.CheckKeys(doc, "", {"format", "model", "producer", "config", "types", "modules", "attention_sites", "workloads"});
    std::string format;
    if (r.String(doc, "format", "", format) && format != kGraphFormat) {
      r.Error("/format", "unsupported graph format `" + format + "`; this reader reads `" +
                             std::string(kGraphFormat) + "`");
    }
    if (const OJson* m = r.Field(doc, "model", "", true)) {
      if (r.ExpectObject(*m, "/model")) {
        r.CheckKeys(*m, "/model", {"name", "class_name", "source", "config"});
        r.String(*m, "name", "/model", g.name);
        r.String(*m, "class_name", "/model", g.class_name);
        r.String(*m, "source", "/model", g.source, false);
        const OJson* c = r.Field(*m, "config", "/model", false);
        g.model_config_json = c ? Json(*c).dump() : "{}";
      }
    }
    if (const OJson* p = r.Field(doc, "producer", "", false)) {
      if (r.ExpectObject(*p, "/producer")) {
        for (auto it = p->begin(); it != p->end(); ++it) {
          g.producer.emplace_back(it.key(), it.value().is_string() ? it.value().get<std::string>()
                                                                   : it.value().dump());
        }
      }
    }
    if (const OJson* c = r.Field(doc, "config", "", true)) {
      if (r.ExpectObject(*c, "/config")) {
        for (auto it = c->begin(); it != c->end(); ++it) {
          int64_t v = 0;
          if (!r.Int(it.value(), Child("/config", it.key()), v)) continue;
          const std::string& key = it.key();
          if (v < 1 && (key == "num_attention_heads" || key == "audio_num_attention_heads")) {
            r.Error(Child("/config", key), "config value `" + key + "` is " + std::to_string(v) +
                                               "; a model has at least one attention head");
          } else if (v < 1 && (key == "attention_head_dim" || key == "audio_attention_head_dim")) {
            r.Error(Child("/config", key), "config value `" + key + "` is " + std::to_string(v) +
                                               "; an attention head has at least one dimension");
          }
          g.config.emplace_back(key, v);
        }
      }
    }
    if (const OJson* t = r.Field(doc, "types", "", true)) ReadTypes(r, *t, "/types", g);
    if (const OJson* m = r.Field(doc, "modules", "", true)) ReadModules(r, *m, "/modules", g);
    if (const OJson* s = r.Field(doc, "attention_sites", "", true)) ReadSites(r, *s, "/attention_sites", g);
    if (const OJson* w = r.Field(doc, "workloads", "", true)) ReadWorkloads(r, *w, "/workloads", g);
  }
  if (result.errors.empty()) {
    // Sites in module order, whatever order the file lists them in.
    std::unordered_map<std::string, size_t> order;
    for (size_t i = 0; i < g.modules.size(); ++i) order.emplace(g.modules[i].path, i);
    std::stable_sort(g.attention_sites.begin(), g.attention_sites.end(),
                     [&](const AttentionSite& a, const AttentionSite& b) {
                       auto ia = order.find(a.path), ib = order.find(b.path);
                       const size_t na = ia == order.end() ? order.size() : ia->second;
                       const size_t nb = ib == order.end() ? order.size() : ib->second;
                       return na < nb;
                     });
    g.Reindex();
    for (std::string& problem : CheckGraph(g)) r.Error("", std::move(problem));
  }
  if (!result.errors.empty()) {
    const JsonLocator locator(text);
    for (GraphError& e : result.errors) {
      if (e.line == 0) locator.LineCol(e.pointer, e.line, e.col);
    }
    return result;
  }
  result.graph = std::move(g);
  return result;
}

GraphReadResult ReadGraphFile(const std::string& path, size_t max_errors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    GraphReadResult r;
    r.errors.push_back({"", "cannot open graph file `" + path + "`", 0, 0});
    return r;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return ReadGraphJson(buffer.str(), max_errors);
}

std::string FormatGraphError(std::string_view file, const GraphError& error) {
  std::string out(file);
  if (error.line > 0) out += ":" + std::to_string(error.line) + ":" + std::to_string(error.col);
  out += ": error: " + error.message;
  out += " (at " + (error.pointer.empty() ? std::string("/") : error.pointer) + ")";
  return out;
}

std::string WriteGraphJson(const ModelGraph& g) {
  std::unordered_set<std::string> lists;
  for (const Module& m : g.modules) {
    if (m.container == Container::kList) lists.insert(m.path);
  }
  std::ostringstream out;
  out << "{\n";
  out << "  \"format\": " << OJson(std::string(kGraphFormat)).dump() << ",\n";
  OJson model;
  model["name"] = g.name;
  model["class_name"] = g.class_name;
  model["source"] = g.source;
  model["config"] = OJson::parse(g.model_config_json.empty() ? "{}" : g.model_config_json, nullptr, false);
  out << "  \"model\": " << model.dump() << ",\n";
  OJson producer = OJson::object();
  for (const auto& [k, v] : g.producer) producer[k] = v;
  out << "  \"producer\": " << producer.dump() << ",\n";
  OJson config = OJson::object();
  for (const auto& [k, v] : g.config) config[k] = v;
  out << "  \"config\": " << config.dump() << ",\n";
  out << "  \"types\": {\n";
  for (size_t i = 0; i < g.types.size(); ++i) {
    out << "    " << OJson(g.types[i].name).dump() << ": " << TypeBody(g.types[i], true).dump()
        << (i + 1 < g.types.size() ? ",\n" : "\n");
  }
  out << "  },\n";
  std::vector<std::pair<std::string, OJson>> entries;
  for (const Module& m : g.modules) entries.emplace_back(m.path, ModuleBody(m));
  out << "  \"modules\": [\n";
  WriteCompressedList(out, "    ", entries, "path", lists, 0);
  out << "  ],\n";
  entries.clear();
  for (const AttentionSite& s : g.attention_sites) entries.emplace_back(s.path, SiteBody(s));
  out << "  \"attention_sites\": [\n";
  WriteCompressedList(out, "    ", entries, "path", lists, 0);
  out << "  ],\n";
  out << "  \"workloads\": [\n";
  for (size_t i = 0; i < g.workloads.size(); ++i) {
    const Workload& w = g.workloads[i];
    OJson params = OJson::object();
    for (const auto& [k, v] : w.params) params[k] = OJson::parse(v, nullptr, false);
    out << "    {\"name\": " << OJson(w.name).dump() << ", \"params\": " << params.dump() << ",\n";
    out << "     \"calls\": [\n";
    entries.clear();
    for (const ModuleCalls& c : w.calls) {
      OJson body;
      OJson calls = OJson::array();
      for (const Call& call : c.calls) calls.push_back(CallJson(call));
      body["calls"] = std::move(calls);
      entries.emplace_back(c.module, std::move(body));
    }
    WriteCompressedList(out, "      ", entries, "module", lists, 0);
    out << "     ],\n";
    out << "     \"attention\": [\n";
    entries.clear();
    for (const SiteCalls& s : w.attention) {
      OJson body;
      OJson calls = OJson::array();
      for (const AttentionCall& a : s.calls) {
        OJson aj;
        aj["q"] = a.q;
        aj["k"] = a.k;
        aj["v"] = a.v;
        calls.push_back(std::move(aj));
      }
      body["calls"] = std::move(calls);
      entries.emplace_back(s.site, std::move(body));
    }
    WriteCompressedList(out, "      ", entries, "site", lists, 0);
    out << "     ]}" << (i + 1 < g.workloads.size() ? ",\n" : "\n");
  }
  out << "  ]\n}\n";
  return out.str();
}

std::string CanonicalGraphJson(const ModelGraph& g) {
  // Written piecewise, keys in sorted order, so that it equals the compact dump of one sorted
  // document without building that document (graphs reach 10^4 modules).
  std::string out = "{\"attention_sites\":[";
  for (size_t i = 0; i < g.attention_sites.size(); ++i) {
    Json e = SiteBody<Json>(g.attention_sites[i]);
    e["path"] = g.attention_sites[i].path;
    e.erase("traced");  // depends on the workloads, which are not hashed
    out += (i ? "," : "") + e.dump();
  }
  out += "],\"class_name\":" + Json(g.class_name).dump() + ",\"config\":";
  Json config = Json::object();
  for (const auto& [k, v] : g.config) config[k] = v;
  out += config.dump() + ",\"format\":" + Json(std::string(kGraphFormat)).dump() + ",\"modules\":[";
  for (size_t i = 0; i < g.modules.size(); ++i) {
    Json e = ModuleBody<Json>(g.modules[i]);
    e["path"] = g.modules[i].path;
    // The dtype a model is loaded in does not change how a plan shards it.
    if (e.contains("params")) {
      for (Json& param : e["params"]) param.erase("dtype");
    }
    out += (i ? "," : "") + e.dump();
  }
  out += "],\"types\":";
  Json types = Json::object();
  for (const ModuleType& t : g.types) {
    types[t.name] = TypeBody<Json>(t, false);
    types[t.name]["forward"].erase("outputs");  // observed in the trace, like the workloads
  }
  out += types.dump() + "}";
  return out;
}

std::string GraphHash(const ModelGraph& graph) {
  return "sha256:" + source::Sha256Hex(CanonicalGraphJson(graph));
}

const std::string& ModelGraph::Hash() const {
  if (hash_cache_.empty()) hash_cache_ = GraphHash(*this);
  return hash_cache_;
}

}  // namespace weft::model

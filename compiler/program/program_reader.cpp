#include "compiler/program/program_reader.h"

#include "compiler/program/expr.h"
#include "compiler/program/inline_hops.h"
#include "compiler/program/validate.h"
#include "compiler/source/checked_math.h"
#include "compiler/source/sha256.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

namespace weft::program {
namespace {

using Json = nlohmann::json;

[[noreturn]] void Fail(const std::string& where, const std::string& what) { throw ProgramError(where + ": " + what); }

// How deep a program's JSON documents may nest (objects and arrays). Real exports nest 11 deep, 25
// with a higher-order operator's body; reading (and nlohmann's printing) recurses per level, so a
// document nested thousands deep would overflow the stack instead of being refused.
constexpr int kMaxJsonNesting = 256;

// The deepest nesting of `text`'s objects and arrays, outside strings (a cheap scan before
// parsing; the parse itself still rejects malformed text).
int JsonNesting(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// `text` parsed; ProgramError naming `where` when it is not JSON or nests deeper than weft reads.
Json ParseJson(const std::string& text, const std::string& where, const char* not_json = "not JSON") {
  const int nesting = JsonNesting(text);
  if (nesting > kMaxJsonNesting) {
    Fail(where, "nests " + std::to_string(nesting) + " levels deep; weft reads JSON nested at most " +
                    std::to_string(kMaxJsonNesting) + " deep");
  }
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) Fail(where, not_json);
  return j;
}

const Json& Field(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object()) Fail(where, "expected an object");
  auto it = j.find(key);
  if (it == j.end()) Fail(where, std::string("missing field `") + key + "`");
  return *it;
}

const Json* OptField(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t Int(const Json& j, const std::string& where) {
  if (!j.is_number_integer()) Fail(where, "expected an integer, found " + std::string(j.type_name()));
  return j.get<int64_t>();
}

double Number(const Json& j, const std::string& where) {
  if (!j.is_number()) Fail(where, "expected a number, found " + std::string(j.type_name()));
  return j.get<double>();
}

const std::string& String(const Json& j, const std::string& where) {
  if (!j.is_string()) Fail(where, "expected a string, found " + std::string(j.type_name()));
  return j.get_ref<const std::string&>();
}

bool Bool(const Json& j, const std::string& where) {
  if (!j.is_boolean()) Fail(where, "expected a boolean, found " + std::string(j.type_name()));
  return j.get<bool>();
}

const Json& Array(const Json& j, const std::string& where) {
  if (!j.is_array()) Fail(where, "expected an array, found " + std::string(j.type_name()));
  return j;
}

// A union of the schema: an object with exactly one field.
std::pair<std::string, const Json*> UnionOf(const Json& j, const std::string& where) {
  if (!j.is_object() || j.size() != 1) Fail(where, "expected a one-field union object");
  return {j.begin().key(), &j.begin().value()};
}

// A concrete shape's sizes are not negative and its element count fits in int64 (LibTorch's
// limit), so nothing downstream allocates from an overflowed or negative size.
void CheckShape(const std::vector<int64_t>& sizes, const std::string& where) {
  int64_t elements = 1;
  bool overflow = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) Fail(where, "size " + std::to_string(sizes[d]) + " in dim " + std::to_string(d) + " is negative");
    if (sizes[d] != 0 && elements > std::numeric_limits<int64_t>::max() / sizes[d]) overflow = true;
    else elements *= sizes[d];
  }
  if (overflow && std::find(sizes.begin(), sizes.end(), 0) == sizes.end()) {
    std::string text;
    for (int64_t x : sizes) text += (text.empty() ? "" : ", ") + std::to_string(x);
    Fail(where, "[" + text + "] holds more than 2^63 elements");
  }
}

Device ParseDevice(const Json& j, const std::string& where) {
  Device d;
  d.type = String(Field(j, "type", where), where + ".type");
  if (const Json* index = OptField(j, "index")) d.index = Int(*index, where + ".index");
  return d;
}

SymInt ParseSymInt(const Json& j, const std::string& where) {
  auto [kind, value] = UnionOf(j, where);
  SymInt s;
  if (kind == "as_int") {
    s.value = Int(*value, where);
  } else if (kind == "as_expr") {
    s.symbolic = true;
    s.expr = String(Field(*value, "expr_str", where), where + ".expr_str");
    if (const Json* hint = OptField(*value, "hint")) {
      auto [hint_kind, hint_value] = UnionOf(*hint, where + ".hint");
      if (hint_kind == "as_int") s.value = Int(*hint_value, where + ".hint");
    }
  } else {
    Fail(where, "unknown SymInt kind `" + kind + "`");
  }
  return s;
}

TensorMeta ParseTensorMeta(const Json& j, const std::string& where) {
  TensorMeta m;
  m.dtype = static_cast<ScalarType>(Int(Field(j, "dtype", where), where + ".dtype"));
  const Json& sizes = Array(Field(j, "sizes", where), where + ".sizes");
  for (size_t i = 0; i < sizes.size(); ++i) m.sizes.push_back(ParseSymInt(sizes[i], where + ".sizes"));
  if (const Json* strides = OptField(j, "strides")) {
    for (const Json& s : Array(*strides, where + ".strides")) m.strides.push_back(ParseSymInt(s, where + ".strides"));
  }
  if (const Json* device = OptField(j, "device")) m.device = ParseDevice(*device, where + ".device");
  if (const Json* layout = OptField(j, "layout")) m.layout = static_cast<int>(Int(*layout, where + ".layout"));
  return m;
}

SymIntRef ParseSymIntRef(const Json& j, const std::string& where) {
  auto [kind, value] = UnionOf(j, where);
  SymIntRef r;
  if (kind == "as_name") {
    r.is_name = true;
    r.name = String(*value, where);
  } else if (kind == "as_int") {
    r.value = Int(*value, where);
  } else if (kind == "as_float" || kind == "as_bool") {
    // SymFloatArgument / SymBoolArgument constants: kept as an int reference is wrong, so the
    // caller handles those kinds itself.
    Fail(where, "unexpected constant `" + kind + "`");
  } else {
    Fail(where, "unknown symbolic argument kind `" + kind + "`");
  }
  return r;
}

void ParseGraphInto(const Json& g, const std::string& where, Program& p, Graph& out, std::map<std::string, int32_t>& stacks);
std::map<std::string, int32_t>& StackTable();
std::vector<ModuleFrame> ParseModuleStack(const std::string& text);

Argument ParseArgument(const Json& j, const std::string& where, Program& p) {
  auto [kind, v] = UnionOf(j, where);
  Argument a;
  using K = Argument::Kind;
  if (kind == "as_none") {
    a.kind = K::kNone;
  } else if (kind == "as_tensor") {
    a.kind = K::kTensor;
    a.name = String(Field(*v, "name", where), where);
  } else if (kind == "as_tensors") {
    a.kind = K::kTensors;
    for (const Json& t : Array(*v, where)) a.names.push_back(String(Field(t, "name", where), where));
  } else if (kind == "as_optional_tensors") {
    a.kind = K::kOptionalTensors;
    for (const Json& t : Array(*v, where)) {
      auto [k2, v2] = UnionOf(t, where);
      a.names.push_back(k2 == "as_tensor" ? String(Field(*v2, "name", where), where) : std::string());
    }
  } else if (kind == "as_optional_tensor") {
    auto [k2, v2] = UnionOf(*v, where);
    if (k2 == "as_tensor") {
      a.kind = K::kTensor;
      a.name = String(Field(*v2, "name", where), where);
    } else {
      a.kind = K::kNone;
    }
  } else if (kind == "as_int") {
    a.kind = K::kInt;
    a.i = Int(*v, where);
  } else if (kind == "as_ints") {
    a.kind = K::kInts;
    for (const Json& x : Array(*v, where)) a.ints.push_back(Int(x, where));
  } else if (kind == "as_int_lists") {
    a.kind = K::kIntLists;
    for (const Json& row : Array(*v, where)) {
      a.int_lists.emplace_back();
      for (const Json& x : Array(row, where)) a.int_lists.back().push_back(Int(x, where));
    }
  } else if (kind == "as_float") {
    a.kind = K::kFloat;
    a.f = v->is_string() ? std::stod(v->get<std::string>()) : Number(*v, where);  // "inf"/"nan" as strings
  } else if (kind == "as_floats") {
    a.kind = K::kFloats;
    for (const Json& x : Array(*v, where)) a.floats.push_back(x.is_string() ? std::stod(x.get<std::string>()) : Number(x, where));
  } else if (kind == "as_bool") {
    a.kind = K::kBool;
    a.b = Bool(*v, where);
  } else if (kind == "as_bools") {
    a.kind = K::kBools;
    for (const Json& x : Array(*v, where)) a.bools.push_back(Bool(x, where));
  } else if (kind == "as_string") {
    a.kind = K::kString;
    a.s = String(*v, where);
  } else if (kind == "as_strings") {
    a.kind = K::kStrings;
    for (const Json& x : Array(*v, where)) a.strings.push_back(String(x, where));
  } else if (kind == "as_sym_int") {
    a.kind = K::kSymInt;
    a.sym_ints.push_back(ParseSymIntRef(*v, where));
  } else if (kind == "as_sym_ints") {
    a.kind = K::kSymInts;
    for (const Json& x : Array(*v, where)) a.sym_ints.push_back(ParseSymIntRef(x, where));
  } else if (kind == "as_sym_float" || kind == "as_sym_bool") {
    a.kind = kind == "as_sym_float" ? K::kSymFloat : K::kSymBool;
    auto [k2, v2] = UnionOf(*v, where);
    if (k2 == "as_name") {
      a.sym_ints.push_back({true, String(*v2, where), 0});
    } else if (k2 == "as_float") {
      a.f = Number(*v2, where);
    } else if (k2 == "as_bool") {
      a.b = Bool(*v2, where);
    } else {
      Fail(where, "unknown symbolic argument kind `" + k2 + "`");
    }
  } else if (kind == "as_sym_floats" || kind == "as_sym_bools") {
    a.kind = kind == "as_sym_floats" ? K::kSymFloats : K::kSymBools;
    for (const Json& x : Array(*v, where)) {
      auto [k2, v2] = UnionOf(x, where);
      if (k2 == "as_name") {
        a.sym_ints.push_back({true, String(*v2, where), 0});
      } else {
        a.sym_ints.push_back({});
        if (k2 == "as_float") a.floats.push_back(Number(*v2, where));
        if (k2 == "as_bool") a.bools.push_back(Bool(*v2, where));
      }
    }
  } else if (kind == "as_scalar_type") {
    a.kind = K::kScalarType;
    a.i = Int(*v, where);
  } else if (kind == "as_memory_format") {
    a.kind = K::kMemoryFormat;
    a.i = Int(*v, where);
  } else if (kind == "as_layout") {
    a.kind = K::kLayout;
    a.i = Int(*v, where);
  } else if (kind == "as_device") {
    a.kind = K::kDevice;
    a.device = ParseDevice(*v, where);
  } else if (kind == "as_complex") {
    a.kind = K::kComplex;
    a.f = Number(Field(*v, "real", where), where);
    a.imag = Number(Field(*v, "imag", where), where);
  } else if (kind == "as_graph") {
    // A higher-order operator's body: parsed into the program's subgraphs, inlined after reading
    // (inline_hops.h) where its semantics allow.
    a.kind = K::kGraph;
    a.name = String(Field(*v, "name", where), where);
    Graph body;
    ParseGraphInto(Field(*v, "graph", where), where + " subgraph `" + a.name + "`", p, body, StackTable());
    a.i = static_cast<int64_t>(p.subgraphs.size());
    p.subgraphs.push_back(std::move(body));
  } else if (kind == "as_custom_obj") {
    a.kind = K::kCustomObj;
    a.name = String(Field(*v, "name", where), where);
  } else if (kind == "as_operator") {
    a.kind = K::kOperator;
    a.name = String(*v, where);
  } else {
    // Kinds weft does not run (nested tensors, string maps ...) are kept by name, so the
    // interpreter can refuse the node that uses one when the program loads.
    a.kind = K::kOther;
    a.s = kind;
  }
  return a;
}

TreeSpec ParseTreeSpecNode(const Json& j, const std::string& where) {
  TreeSpec t;
  const Json& type = Field(j, "type", where);
  if (!type.is_null()) t.type = String(type, where + ".type");
  const Json& context = Field(j, "context", where);
  t.context = context.is_string() ? context.get<std::string>() : context.dump();
  if (t.type == "builtins.dict" && context.is_string()) {
    Json keys = JsonNesting(t.context) <= kMaxJsonNesting ? Json::parse(t.context, nullptr, false) : Json();
    if (keys.is_array()) {
      for (const Json& k : keys) t.keys.push_back(k.is_string() ? k.get<std::string>() : k.dump());
    }
  }
  for (const Json& c : Array(Field(j, "children_spec", where), where + ".children_spec")) {
    t.children.push_back(ParseTreeSpecNode(c, where));
  }
  return t;
}

TreeSpec ParseTreeSpec(const std::string& text, const std::string& where) {
  Json j = ParseJson(text, where);
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer()) Fail(where, "expected [version, spec]");
  if (j[0].get<int>() != 1) Fail(where, "pytree spec version " + j[0].dump() + "; weft reads version 1");
  return ParseTreeSpecNode(j[1], where);
}

// "key,path,module.Class;key,path,module.Class" (outermost first).
std::vector<ModuleFrame> ParseModuleStack(const std::string& text) {
  std::vector<ModuleFrame> frames;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t c1 = item.find(',');
    const size_t c2 = c1 == std::string::npos ? std::string::npos : item.find(',', c1 + 1);
    if (c2 != std::string::npos) {
      ModuleFrame f;
      f.path = item.substr(c1 + 1, c2 - c1 - 1);
      f.qualified_type = item.substr(c2 + 1);
      const size_t dot = f.qualified_type.rfind('.');
      f.type = dot == std::string::npos ? f.qualified_type : f.qualified_type.substr(dot + 1);
      frames.push_back(std::move(f));
    }
    start = end + 1;
  }
  return frames;
}

// The nodes, values and metadata of a graph (the program's, or a higher-order operator's body)
// into `out`; module stacks are interned in `p`.
void ParseGraphInto(const Json& g, const std::string& where, Program& p, Graph& out, std::map<std::string, int32_t>& stacks) {
  for (const Json& a : Array(Field(g, "inputs", where), where + ".inputs")) out.inputs.push_back(ParseArgument(a, where + ".inputs", p));
  for (const Json& a : Array(Field(g, "outputs", where), where + ".outputs")) out.outputs.push_back(ParseArgument(a, where + ".outputs", p));
  const Json& nodes = Array(Field(g, "nodes", where), where + ".nodes");
  out.nodes.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Json& n = nodes[i];
    Node node;
    if (const Json* name = OptField(n, "name")) node.name = String(*name, where);
    const std::string at = where + ": node " + std::to_string(i) + (node.name.empty() ? "" : " (`" + node.name + "`)");
    node.target = String(Field(n, "target", at), at + ".target");
    for (const Json& in : Array(Field(n, "inputs", at), at + ".inputs")) {
      NamedArgument na;
      na.name = String(Field(in, "name", at), at + ".inputs.name");
      na.arg = ParseArgument(Field(in, "arg", at), at + " input `" + na.name + "`", p);
      if (const Json* kind = OptField(in, "kind")) na.keyword = kind->is_number_integer() && kind->get<int>() == 2;
      node.inputs.push_back(std::move(na));
    }
    for (const Json& o : Array(Field(n, "outputs", at), at + ".outputs")) node.outputs.push_back(ParseArgument(o, at + ".outputs", p));
    if (node.name.empty() && !node.outputs.empty()) {
      std::vector<std::string> names = node.outputs[0].TensorNames();
      if (!names.empty()) node.name = names[0];
    }
    if (const Json* meta = OptField(n, "metadata")) {
      if (const Json* stack = OptField(*meta, "nn_module_stack")) {
        const std::string& text = String(*stack, at + ".metadata.nn_module_stack");
        auto it = stacks.find(text);
        if (it == stacks.end()) {
          it = stacks.emplace(text, static_cast<int32_t>(p.module_stacks.size())).first;
          p.module_stacks.push_back(ParseModuleStack(text));
        }
        node.stack = it->second;
      }
    }
    out.nodes.push_back(std::move(node));
  }
  for (auto& [name, meta] : Field(g, "tensor_values", where).items()) {
    out.tensor_values.emplace(name, ParseTensorMeta(meta, where + ": tensor `" + name + "`"));
  }
  if (const Json* syms = OptField(g, "sym_int_values")) {
    for (auto& [name, value] : syms->items()) out.sym_int_values.emplace(name, ParseSymInt(value, where + ": sym int `" + name + "`"));
  }
}

// Module stacks are interned across the program and its subgraphs.
std::map<std::string, int32_t>& StackTable() {
  static thread_local std::map<std::string, int32_t> table;
  return table;
}

void ParseGraph(const Json& g, const std::string& where, Program& p) {
  Graph graph;
  ParseGraphInto(g, where, p, graph, StackTable());
  p.inputs = std::move(graph.inputs);
  p.outputs = std::move(graph.outputs);
  p.nodes = std::move(graph.nodes);
  p.tensor_values = std::move(graph.tensor_values);
  p.sym_int_values = std::move(graph.sym_int_values);
}

Argument ParseConstantValue(const Json& j, const std::string& where) {
  auto [kind, v] = UnionOf(j, where);
  Argument a;
  if (kind == "as_none") {
    a.kind = Argument::Kind::kNone;
  } else if (kind == "as_int") {
    a.kind = Argument::Kind::kInt;
    a.i = Int(*v, where);
  } else if (kind == "as_float") {
    a.kind = Argument::Kind::kFloat;
    a.f = Number(*v, where);
  } else if (kind == "as_string") {
    a.kind = Argument::Kind::kString;
    a.s = String(*v, where);
  } else if (kind == "as_bool") {
    a.kind = Argument::Kind::kBool;
    a.b = Bool(*v, where);
  } else {
    Fail(where, "unknown constant kind `" + kind + "`");
  }
  return a;
}

void ParseSignature(const Json& s, const std::string& where, Program& p) {
  for (const Json& spec : Array(Field(s, "input_specs", where), where + ".input_specs")) {
    auto [kind, v] = UnionOf(spec, where + ".input_specs");
    InputSpec in;
    const std::string at = where + ": input spec " + std::to_string(p.input_specs.size());
    if (kind == "user_input") {
      in.kind = InputSpec::Kind::kUserInput;
      in.arg = ParseArgument(Field(*v, "arg", at), at, p);
    } else if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
      in.kind = kind == "parameter" ? InputSpec::Kind::kParameter
                                    : kind == "buffer" ? InputSpec::Kind::kBuffer : InputSpec::Kind::kTensorConstant;
      in.arg.kind = Argument::Kind::kTensor;
      in.arg.name = String(Field(Field(*v, "arg", at), "name", at), at);
      const char* target = kind == "parameter" ? "parameter_name" : kind == "buffer" ? "buffer_name" : "tensor_constant_name";
      in.target = String(Field(*v, target, at), at);
      if (const Json* persistent = OptField(*v, "persistent")) in.persistent = Bool(*persistent, at);
    } else if (kind == "constant_input") {
      in.kind = InputSpec::Kind::kConstantInput;
      in.target = String(Field(*v, "name", at), at);
      in.value = ParseConstantValue(Field(*v, "value", at), at);
    } else if (kind == "custom_obj") {
      in.kind = InputSpec::Kind::kCustomObj;
      in.target = String(Field(*v, "custom_obj_name", at), at);
    } else if (kind == "token") {
      in.kind = InputSpec::Kind::kToken;
    } else {
      Fail(at, "unknown input spec kind `" + kind + "`");
    }
    p.input_specs.push_back(std::move(in));
  }
  for (const Json& spec : Array(Field(s, "output_specs", where), where + ".output_specs")) {
    auto [kind, v] = UnionOf(spec, where + ".output_specs");
    OutputSpec out;
    const std::string at = where + ": output spec " + std::to_string(p.output_specs.size());
    static const std::map<std::string, OutputSpec::Kind> kinds = {
        {"user_output", OutputSpec::Kind::kUserOutput}, {"loss_output", OutputSpec::Kind::kLossOutput},
        {"buffer_mutation", OutputSpec::Kind::kBufferMutation}, {"parameter_mutation", OutputSpec::Kind::kParameterMutation},
        {"gradient_to_parameter", OutputSpec::Kind::kGradient}, {"gradient_to_user_input", OutputSpec::Kind::kGradient},
        {"user_input_mutation", OutputSpec::Kind::kUserInputMutation}, {"token", OutputSpec::Kind::kToken}};
    auto it = kinds.find(kind);
    if (it == kinds.end()) Fail(at, "unknown output spec kind `" + kind + "`");
    out.kind = it->second;
    const Json& arg = Field(*v, "arg", at);
    if (out.kind == OutputSpec::Kind::kUserOutput) {
      out.arg = ParseArgument(arg, at, p);
    } else if (arg.contains("name")) {
      out.arg.kind = Argument::Kind::kTensor;
      out.arg.name = String(arg["name"], at);
    }
    for (const char* key : {"buffer_name", "parameter_name", "user_input_name"}) {
      if (const Json* t = OptField(*v, key)) out.target = String(*t, at);
    }
    p.output_specs.push_back(std::move(out));
  }
}

void ParseModuleCallGraph(const Json& mcg, const std::string& where, Program& p) {
  for (const Json& e : Array(mcg, where)) {
    ModuleCall call;
    call.fqn = String(Field(e, "fqn", where), where + ".fqn");
    const std::string at = where + ": module `" + call.fqn + "`";
    if (const Json* sig = OptField(e, "signature")) {
      call.has_signature = true;
      for (const Json& a : Array(Field(*sig, "inputs", at), at + ".inputs")) call.inputs.push_back(ParseArgument(a, at + ".inputs", p));
      for (const Json& a : Array(Field(*sig, "outputs", at), at + ".outputs")) call.outputs.push_back(ParseArgument(a, at + ".outputs", p));
      call.in_spec = ParseTreeSpec(String(Field(*sig, "in_spec", at), at), at + ".in_spec");
      call.out_spec = ParseTreeSpec(String(Field(*sig, "out_spec", at), at), at + ".out_spec");
      if (const Json* names = OptField(*sig, "forward_arg_names")) {
        for (const Json& n : Array(*names, at)) call.forward_arg_names.push_back(String(n, at));
      }
    }
    p.module_calls.push_back(std::move(call));
  }
}

void ParsePayloads(const std::string& text, const std::string& where, std::vector<Payload>& out) {
  Json j = ParseJson(text, where);
  for (auto& [fqn, meta] : Field(j, "config", where).items()) {
    Payload pl;
    pl.fqn = fqn;
    const std::string at = where + ": `" + fqn + "`";
    pl.path_name = String(Field(meta, "path_name", at), at);
    if (const Json* v = OptField(meta, "is_param")) pl.is_param = Bool(*v, at);
    if (const Json* v = OptField(meta, "use_pickle")) pl.use_pickle = Bool(*v, at);
    if (const Json* v = OptField(meta, "tensor_meta")) {
      pl.meta = ParseTensorMeta(*v, at);
      std::vector<int64_t> sizes;
      for (const SymInt& x : pl.meta.sizes) sizes.push_back(x.value);
      CheckShape(sizes, at + " sizes");
    }
    out.push_back(std::move(pl));
  }
}

model::Attr ParseAttr(const Json& j, const std::string& where) {
  if (j.is_boolean()) return model::Attr::Bool(j.get<bool>());
  if (j.is_number_integer()) return model::Attr::Int(j.get<int64_t>());
  if (j.is_array()) {
    std::vector<int64_t> values;
    for (const Json& x : j) values.push_back(Int(x, where));
    return model::Attr::IntList(std::move(values));
  }
  Fail(where, "an attribute is an integer, a boolean or an integer array");
}

Manifest ParseManifest(const std::string& text, const std::string& where) {
  Json j = ParseJson(text, where);
  const std::string& format = String(Field(j, "format", where), where + ".format");
  if (format != "weft.program/1") Fail(where, "format `" + format + "`; weft reads weft.program/1");
  Manifest m;
  const Json& model = Field(j, "model", where);
  m.name = String(Field(model, "name", where), where + ".model.name");
  m.class_name = String(Field(model, "class_name", where), where + ".model.class_name");
  if (const Json* s = OptField(model, "source")) m.source = String(*s, where);
  if (const Json* c = OptField(model, "config")) m.model_config_json = c->dump();
  m.dtype = String(Field(j, "dtype", where), where + ".dtype");
  if (const Json* producer = OptField(j, "producer")) {
    for (auto& [k, v] : producer->items()) m.producer.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  }
  for (auto& [k, v] : Field(j, "config", where).items()) {
    if (v.is_number_integer()) m.config.emplace_back(k, v.get<int64_t>());
  }
  for (auto& [name, t] : Field(j, "types", where).items()) {
    const std::string at = where + ": type `" + name + "`";
    model::ModuleType type;
    type.name = name;
    if (const Json* mod = OptField(t, "module")) type.python_module = String(*mod, at);
    const Json& fwd = Field(t, "forward", at);
    for (const Json& a : Array(Field(fwd, "args", at), at)) {
      model::Arg arg;
      arg.name = String(Field(a, "name", at), at);
      if (const Json* o = OptField(a, "optional")) arg.optional = Bool(*o, at);
      if (const Json* k = OptField(a, "keyword_only")) arg.keyword_only = Bool(*k, at);
      type.args.push_back(std::move(arg));
    }
    if (const Json* v = OptField(fwd, "variadic")) type.variadic = Bool(*v, at);
    m.types.push_back(std::move(type));
  }
  if (const Json* at = OptField(j, "attention_types")) {
    for (const Json& t : Array(*at, where)) m.attention_types.push_back(String(t, where));
  }
  for (const Json& e : Array(Field(j, "modules", where), where + ".modules")) {
    model::Module mod;
    mod.path = String(Field(e, "path", where), where + ".modules.path");
    const std::string at = where + ": module `" + mod.path + "`";
    mod.type = String(Field(e, "type", at), at);
    if (const Json* c = OptField(e, "container")) {
      const std::string& kind = String(*c, at);
      mod.container = kind == "list" ? model::Container::kList
                      : kind == "dict" ? model::Container::kDict
                      : kind == "sequential" ? model::Container::kSequential : model::Container::kNone;
    }
    if (const Json* ch = OptField(e, "children")) {
      for (const Json& c : Array(*ch, at)) mod.children.push_back(String(c, at));
    }
    if (const Json* attrs = OptField(e, "attrs")) {
      for (auto& [k, v] : attrs->items()) mod.attrs.emplace_back(k, ParseAttr(v, at + " attr `" + k + "`"));
      std::sort(mod.attrs.begin(), mod.attrs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    m.modules.push_back(std::move(mod));
  }
  if (const Json* wls = OptField(j, "workloads")) {
    for (const Json& w : Array(*wls, where)) {
      ManifestWorkload wl;
      wl.name = String(Field(w, "name", where), where + ".workloads.name");
      const std::string at = where + ": workload `" + wl.name + "`";
      if (const Json* params = OptField(w, "params")) {
        for (auto& [k, v] : params->items()) wl.params.emplace_back(k, v.dump());
      }
      for (auto& [k, v] : Field(w, "inputs", at).items()) {
        InputDesc in;
        in.name = k;
        if (const Json* shape = OptField(v, "shape")) {
          in.tensor = true;
          for (const Json& d : Array(*shape, at)) in.shape.push_back(Int(d, at + " input `" + k + "`"));
          CheckShape(in.shape, at + " input `" + k + "` shape");
          in.dtype = String(Field(v, "dtype", at), at);
        } else {
          in.value_json = Field(v, "value", at).dump();
        }
        wl.inputs.push_back(std::move(in));
      }
      m.workloads.push_back(std::move(wl));
    }
  }
  if (const Json* att = OptField(j, "attention")) {
    for (auto& [path, a] : att->items()) {
      const std::string at = where + ": attention `" + path + "`";
      model::AttentionSite site;
      site.path = path;
      auto kind = model::ParseAttentionKind(String(Field(a, "kind", at), at));
      if (!kind) Fail(at, "unknown attention kind");
      site.kind = *kind;
      for (const Json& q : Array(Field(a, "q", at), at)) site.q_inputs.push_back(String(q, at));
      for (const Json& kv : Array(Field(a, "kv", at), at)) site.kv_inputs.push_back(String(kv, at));
      m.attention.push_back(std::move(site));
    }
  }
  if (const Json* by = OptField(j, "bypassed")) {
    for (auto& [path, leaves] : by->items()) {
      std::vector<size_t> positions;
      for (const Json& x : Array(leaves, where + ".bypassed")) positions.push_back(static_cast<size_t>(Int(x, where + ".bypassed")));
      std::sort(positions.begin(), positions.end());
      m.bypassed.emplace_back(path, std::move(positions));
    }
  }
  if (const Json* un = OptField(j, "unpreserved")) {
    for (auto& [path, why] : un->items()) m.unpreserved.emplace_back(path, String(why, where + ".unpreserved"));
  }
  if (const Json* fixed = OptField(j, "fixed_sizes")) {
    const std::string at = where + ".fixed_sizes";
    for (const Json& f : Array(*fixed, at)) {
      FixedSize x;
      x.size = String(Field(f, "size", at), at + ".size");
      x.value = Int(Field(f, "value", at), at + ".value");
      x.at = String(Field(f, "at", at), at + ".at");
      if (const Json* code = OptField(f, "code")) x.code = String(*code, at + ".code");
      m.fixed_sizes.push_back(std::move(x));
    }
  }
  return m;
}

}  // namespace

namespace {

// Symbolic sizes the export left without a hint (read as 0: Mochi's `s31 + s33*(s20//2)*(s66//2)`
// next to its nonzero), evaluated at the hints of their symbols -- those a size holding just that
// symbol carries -- with an unbacked symbol, which torch.export gives no hint, at its bound where
// it is a nonzero's count (the nonzero's input size) and at 0 otherwise: Mochi's joint length
// `s33*(s20//2)*(s66//2) + u0` reads as its video and text tokens. One that names a symbol without
// a hint stays 0; one whose hint was 0 evaluates to 0 again.
void FillMissingHints(Program& p) {
  std::unordered_map<std::string, std::optional<Expr>> parsed;  // by text: sizes share expressions
  auto parse = [&](const std::string& text) -> const std::optional<Expr>& {
    auto [it, added] = parsed.try_emplace(text);
    if (added) {
      try {
        it->second = Expr::Parse(text);
      } catch (const ExprError&) {
      }
    }
    return it->second;
  };
  std::map<std::string, int64_t> hints;
  auto learn = [&](const SymInt& s) {
    if (!s.symbolic || s.value == 0) return;
    if (const std::optional<Expr>& e = parse(s.expr); e && !e->AsSymbol().empty()) hints.emplace(e->AsSymbol(), s.value);
  };
  for (const auto& [name, meta] : p.tensor_values) {
    for (const SymInt& s : meta.sizes) learn(s);
  }
  for (const auto& [name, s] : p.sym_int_values) learn(s);
  // A nonzero's count is at most its input's size, reached when every element is non-zero: Mochi's
  // valid text tokens, all of the text when no token is padded. That bound is the hint, so that a
  // joint length reads as both streams and the cost of the rows it adds is not priced at nothing.
  for (const Node& n : p.nodes) {
    if (n.target != "torch.ops.aten.nonzero.default" || n.inputs.empty() || n.outputs.empty()) continue;
    const auto in = p.tensor_values.find(n.inputs[0].arg.name);
    const auto out = p.tensor_values.find(n.outputs[0].name);
    if (in == p.tensor_values.end() || out == p.tensor_values.end() || out->second.sizes.empty()) continue;
    const std::optional<Expr>& count = parse(out->second.sizes[0].expr);
    if (!count || count->AsSymbol().empty()) continue;
    int64_t elements = 1;
    for (const SymInt& s : in->second.sizes) elements = s.value > 0 ? source::SaturatingMul(elements, s.value) : 0;
    if (elements > 0) hints.emplace(count->AsSymbol(), elements);
  }
  ExprEnv env;
  env.symbol = [&](const std::string& name) -> std::optional<int64_t> {
    if (auto it = hints.find(name); it != hints.end()) return it->second;
    return IsUnbackedSymbol(name) ? std::optional<int64_t>(0) : std::nullopt;
  };
  auto fill = [&](SymInt& s) {
    if (!s.symbolic || s.value != 0) return;
    try {
      if (const std::optional<Expr>& e = parse(s.expr)) s.value = e->Evaluate(env);
    } catch (const ExprError&) {
    }
  };
  for (auto& [name, meta] : p.tensor_values) {
    for (SymInt& s : meta.sizes) fill(s);
  }
  for (auto& [name, s] : p.sym_int_values) fill(s);
}

}  // namespace

Program ParseProgramJson(const std::string& model_json, const std::string& where) {
  Json j = ParseJson(model_json, where, "not valid JSON");
  Program p;
  p.hash = "sha256:" + source::Sha256Hex(model_json);
  StackTable().clear();
  const Json& version = Field(j, "schema_version", where);
  p.schema_major = static_cast<int>(Int(Field(version, "major", where), where + ".schema_version.major"));
  p.schema_minor = static_cast<int>(Int(Field(version, "minor", where), where + ".schema_version.minor"));
  if (p.schema_major != kSchemaMajor || p.schema_minor < kMinSchemaMinor) {
    Fail(where, "export schema version " + std::to_string(p.schema_major) + "." + std::to_string(p.schema_minor) +
                    "; weft reads version " + std::to_string(kSchemaMajor) + ".x (torch 2.5 to 2.13 write 8.x)");
  }
  if (const Json* tv = OptField(j, "torch_version")) p.torch_version = String(*tv, where);
  if (const Json* vs = OptField(j, "verifiers")) {
    for (const Json& v : Array(*vs, where)) p.verifiers.push_back(String(v, where));
  }
  const Json& gm = Field(j, "graph_module", where);
  ParseGraph(Field(gm, "graph", where), where, p);
  ParseSignature(Field(gm, "signature", where), where, p);
  if (p.input_specs.size() != p.inputs.size()) {
    Fail(where, std::to_string(p.inputs.size()) + " graph inputs but " + std::to_string(p.input_specs.size()) +
                    " input specs");
  }
  if (const Json* mcg = OptField(gm, "module_call_graph")) ParseModuleCallGraph(*mcg, where + ": module_call_graph", p);
  if (const Json* rc = OptField(j, "range_constraints")) {
    for (auto& [expr, r] : rc->items()) {
      RangeConstraint c;
      c.expr = expr;
      if (const Json* lo = OptField(r, "min_val")) c.min = Int(*lo, where + ": range of " + expr);
      if (const Json* hi = OptField(r, "max_val")) c.max = Int(*hi, where + ": range of " + expr);
      p.range_constraints.push_back(std::move(c));
    }
  }
  if (const Json* guards = OptField(j, "guards_code")) {
    for (const Json& g : Array(*guards, where)) p.guards.push_back(String(g, where));
  }
  FillMissingHints(p);
  ValidateProgram(p, where);
  InlineHigherOrderOps(p, where);
  return p;
}

Program ReadProgram(const Archive& archive) {
  const std::string model_entry = "models/model.json";
  if (!archive.Has(model_entry)) {
    std::string models;
    for (const std::string& e : archive.entries()) {
      if (e.rfind("models/", 0) == 0) models += (models.empty() ? "" : ", ") + e;
    }
    throw ProgramError(archive.path() + ": no `" + archive.root() + model_entry +
                       "` (not a torch.export program" + (models.empty() ? "" : "; models found: " + models) + ")");
  }
  if (archive.Has("archive_format")) {
    const std::string format = archive.Read("archive_format");
    if (format != "pt2") throw ProgramError(archive.path() + ": archive_format `" + format + "`; weft reads pt2");
  }
  Program p = ParseProgramJson(archive.Read(model_entry), archive.path() + ": " + archive.root() + model_entry);
  p.path = archive.path();
  for (const auto& [entry, out] : {std::pair<std::string, std::vector<Payload>*>{"data/weights/model_weights_config.json", &p.weights},
                                   {"data/constants/model_constants_config.json", &p.constants}}) {
    if (archive.Has(entry)) ParsePayloads(archive.Read(entry), archive.path() + ": " + archive.root() + entry, *out);
  }
  if (archive.Has("extra/weft.json")) {
    p.manifest = ParseManifest(archive.Read("extra/weft.json"), archive.path() + ": " + archive.root() + "extra/weft.json");
  }
  return p;
}

Program ReadProgramFile(const std::string& path) { return ReadProgram(Archive::Open(path)); }

}  // namespace weft::program

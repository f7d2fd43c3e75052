#pragma once

// The model graph (`weft.graph/1`): what the compiler knows about a model without running it.
// Module tree, parameter shapes, forward signatures, attention sites, named config values and
// traced tensor shapes per module call at named workloads. Plain value types; produced by
// ReadGraphJson (compiler/model/graph_json.h) or built in code (tests, `weft-run --dump-graph`).
// The format is documented in compiler/model/README.md.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace weft::model {

inline constexpr std::string_view kGraphFormat = "weft.graph/1";

// Bytes per element of a dtype name as written in graphs ("bf16", "f32", "i64", ...); 0 when
// the name is unknown.
int64_t DTypeBytes(std::string_view dtype);

// A parameter or buffer of one module (not of its children).
struct Param {
  std::string name;             // "weight", "bias", ...
  std::vector<int64_t> shape;   // [out_features, in_features] for a Linear weight
  std::string dtype;            // "bf16", "f32", ...
  bool buffer = false;          // a registered buffer rather than a parameter

  // Elements and bytes; never wrap: a product past int64 is source::kSaturated (INT64_MAX).
  // The graph reader refuses such shapes, so only graphs built in memory can hit it.
  int64_t Numel() const;
  int64_t Bytes() const;
};

// A small typed attribute of a module: Linear widths, attention heads, packed block sizes.
struct Attr {
  enum class Kind : uint8_t { kInt, kBool, kIntList };
  Kind kind = Kind::kInt;
  std::vector<int64_t> values;  // one value for kInt/kBool (0 or 1), any number for kIntList

  static Attr Int(int64_t v) { return {Kind::kInt, {v}}; }
  static Attr Bool(bool v) { return {Kind::kBool, {v ? 1 : 0}}; }
  static Attr IntList(std::vector<int64_t> v) { return {Kind::kIntList, std::move(v)}; }
};

enum class Container : uint8_t { kNone, kList, kDict, kSequential };

// One module of the tree. `children` are relative names in registration order; for a kList
// container they are "0", "1", ... and plan patterns may expand `*` and `{a..b}` over them.
struct Module {
  std::string path;  // fqn; "" is the root
  std::string type;  // class name; its forward signature is in ModelGraph::types
  Container container = Container::kNone;
  std::vector<std::string> children;
  std::vector<Param> params;
  std::vector<std::pair<std::string, Attr>> attrs;  // sorted by name

  const Param* FindParam(std::string_view name) const;
  const Attr* FindAttr(std::string_view name) const;
  std::optional<int64_t> IntAttr(std::string_view name) const;
};

// One forward argument, in positional order.
struct Arg {
  std::string name;
  bool optional = false;      // has a default value
  bool keyword_only = false;  // after `*` in the Python signature
};

// A module class and its forward signature (shared by every module of that class).
struct ModuleType {
  std::string name;           // class name, e.g. "FluxAttention"
  std::string python_module;  // where it is defined, e.g. "diffusers.models.transformers.transformer_flux"
  std::vector<Arg> args;
  bool variadic = false;      // *args / **kwargs present
  int64_t num_outputs = -1;   // outputs every traced call returned (a tensor is 1); -1 unknown

  // Position of argument `name`, or nullopt.
  std::optional<size_t> ArgIndex(std::string_view name) const;
};

enum class AttentionKind : uint8_t {
  kSelf,   // Q and K/V from the same stream (hidden_states)
  kCross,  // Q from hidden_states, K/V from another input (encoder_hidden_states)
  kJoint,  // Q and K/V from the concatenation of several streams (Flux double blocks)
};
std::string_view AttentionKindName(AttentionKind kind);
std::optional<AttentionKind> ParseAttentionKind(std::string_view name);

// An attention call site: the attention module and which of its forward arguments feed Q and
// which feed K/V. The compiler uses this to decide whether K/V are sharded (then the site must
// run context-parallel) or replicated (then it may run local).
struct AttentionSite {
  std::string path;
  int64_t heads = 0;
  int64_t head_dim = 0;
  AttentionKind kind = AttentionKind::kSelf;
  std::vector<std::string> q_inputs;
  std::vector<std::string> kv_inputs;
  bool traced = true;  // false when no workload ran this site
};

// A traced value: a tensor (shape, dtype), a tuple/list of values, a plain scalar (kept as its
// canonical JSON text), or None.
struct Value {
  enum class Kind : uint8_t { kNone, kTensor, kTuple, kScalar };
  Kind kind = Kind::kNone;
  std::vector<int64_t> shape;  // kTensor
  std::string dtype;           // kTensor
  std::vector<Value> elements; // kTuple
  std::string scalar_json;     // kScalar, e.g. "16", "[[1,64,64]]", "\"Linear\""

  static Value None() { return {}; }
  static Value Tensor(std::vector<int64_t> shape, std::string dtype) {
    Value v;
    v.kind = Kind::kTensor;
    v.shape = std::move(shape);
    v.dtype = std::move(dtype);
    return v;
  }
  static Value Tuple(std::vector<Value> elements) {
    Value v;
    v.kind = Kind::kTuple;
    v.elements = std::move(elements);
    return v;
  }
  static Value Scalar(std::string json) {
    Value v;
    v.kind = Kind::kScalar;
    v.scalar_json = std::move(json);
    return v;
  }
  bool IsTensor() const { return kind == Kind::kTensor; }
  int64_t Rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t Bytes() const;  // tensor bytes (sum over a tuple), 0 otherwise; saturates like Param::Bytes
};

// One forward call of a module: its arguments (bound to the signature by name, in the order of
// the signature; only those the caller passed), how many were passed positionally, its outputs.
struct Call {
  std::vector<std::pair<std::string, Value>> args;
  int64_t positional = 0;
  std::vector<Value> outputs;

  const Value* FindArg(std::string_view name) const;
};

// Every call of one module during one forward, in call order.
struct ModuleCalls {
  std::string module;
  std::vector<Call> calls;
};

// q/k/v shapes (B, S, H, D) of one attention call.
struct AttentionCall {
  std::vector<int64_t> q, k, v;
};

struct SiteCalls {
  std::string site;
  std::vector<AttentionCall> calls;
};

// A named workload (resolution, frames, text length ...) and the trace recorded at it.
struct Workload {
  std::string name;                                        // e.g. "1024x1024"
  std::vector<std::pair<std::string, std::string>> params; // name -> canonical JSON value
  std::vector<ModuleCalls> calls;                          // in first-call order
  std::vector<SiteCalls> attention;

  const ModuleCalls* FindCalls(std::string_view module) const;
  const SiteCalls* FindAttention(std::string_view site) const;
  std::optional<int64_t> IntParam(std::string_view name) const;
  // Rebuilds the lookup indexes of FindCalls/FindAttention (ModelGraph::Reindex calls it).
  void Reindex();

 private:
  std::unordered_map<std::string, size_t> call_index_;
  std::unordered_map<std::string, size_t> site_index_;
};

using ModuleId = size_t;

// The whole graph. `modules` are in pre-order (parents before children, children in
// registration order). Call Reindex() after editing `modules`, `types`, `attention_sites` or
// `workloads` by hand; the reader does it.
struct ModelGraph {
  std::string name;          // e.g. "flux1-dev"
  std::string class_name;    // e.g. "FluxTransformer2DModel"
  std::string source;        // where the config comes from
  std::string model_config_json;  // the model's full config as canonical JSON ("{}" if none)
  std::vector<std::pair<std::string, std::string>> producer;  // tool, versions (not hashed)
  std::vector<std::pair<std::string, int64_t>> config;        // named values plans may use
  std::vector<ModuleType> types;
  std::vector<Module> modules;
  std::vector<AttentionSite> attention_sites;
  std::vector<Workload> workloads;

  void Reindex();
  std::optional<ModuleId> FindModuleId(std::string_view path) const;
  const Module* FindModule(std::string_view path) const;
  const ModuleType* FindType(std::string_view name) const;
  // The type of module `path` (nullptr if either is unknown).
  const ModuleType* TypeOf(std::string_view path) const;
  const AttentionSite* FindAttentionSite(std::string_view path) const;
  const Workload* FindWorkload(std::string_view name) const;
  std::optional<int64_t> ConfigValue(std::string_view name) const;
  // Parameter bytes of the whole model (buffers excluded); saturates like Param::Bytes.
  int64_t ParamBytes() const;

  // GraphHash(*this) (compiler/model/graph_json.h), computed once; Reindex() forgets it, so
  // call Reindex() after editing a graph.
  const std::string& Hash() const;


 private:
  std::unordered_map<std::string, size_t> module_index_;
  std::unordered_map<std::string, size_t> type_index_;
  std::unordered_map<std::string, size_t> site_index_;
  mutable std::string hash_cache_;
};

// Checks the structure a reader cannot see field by field: unique paths, every child exists
// and names its parent, child names are single, non-empty path components listed once (so no
// module, the root included, is its own child), every module's type is in `types`, sites
// point at modules and have at least one head of at least one dimension, and the parameter
// bytes fit int64. Returns one message per problem (empty when consistent). Graphs built in
// memory (not read from a file) should pass it before they are bound.
std::vector<std::string> CheckGraph(const ModelGraph& graph);

// What is wrong with child `index` of `children`, the child list of module `parent` (""
// is the root): an empty name (the module itself: the root listing itself), a name with a
// `.`, or a name listed before. "" when the name is fine.
std::string ChildNameProblem(const std::string& parent, const std::vector<std::string>& children, size_t index);

}  // namespace weft::model

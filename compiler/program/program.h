#pragma once

// A torch.export program as weft reads it: the graph of `models/model.json` (the export schema's
// JSON, schema 8.x), its signature (which graph inputs are parameters, buffers, constants or user
// inputs), the module call graph, the symbolic sizes with their ranges and guards, the weights and
// constants indexes, and weft's own manifest (`extra/weft.json`, written by
// tools/export_program.py). Plain value types; ReadProgram (program_reader.h) fills them.
// Torch-free: the compiler reads programs as it reads graphs; runtime/program runs them.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/model/graph.h"

namespace weft::program {

// The export schema versions this reader understands (major must match; any minor).
inline constexpr int kSchemaMajor = 8;
inline constexpr int kMinSchemaMinor = 0;

// The export schema's enums (torch/_export/serde/schema.py), not c10's numbering.
enum class ScalarType : int {
  kUnknown = 0, kByte = 1, kChar = 2, kShort = 3, kInt = 4, kLong = 5, kHalf = 6, kFloat = 7,
  kDouble = 8, kComplexHalf = 9, kComplexFloat = 10, kComplexDouble = 11, kBool = 12,
  kBFloat16 = 13, kUInt16 = 28, kFloat8E4M3FN = 29, kFloat8E5M2 = 30, kFloat8E4M3FNUZ = 31,
  kFloat8E5M2FNUZ = 32, kFloat8E8M0FNU = 33, kUInt32 = 34, kUInt64 = 35,
};
// The dtype name weft's graphs use ("f32", "bf16", ...), or "" when the graph format has none.
std::string ScalarTypeName(ScalarType type);
// Bytes per element, 0 when unknown.
int64_t ScalarTypeBytes(ScalarType type);

struct Device {
  std::string type = "cpu";
  int64_t index = -1;  // -1: none given
};

// A size or stride: a constant, or a symbolic expression (sympy's srepr form, see sym_expr.h)
// with the value it had in the export's example (the hint).
struct SymInt {
  bool symbolic = false;
  int64_t value = 0;      // the constant, or the hint of a symbolic size
  std::string expr;       // symbolic only
};

struct TensorMeta {
  ScalarType dtype = ScalarType::kUnknown;
  std::vector<SymInt> sizes;
  std::vector<SymInt> strides;
  Device device;
  int layout = 7;  // strided
};

// A reference to a symbolic int: a value produced by a node (name) or a constant.
struct SymIntRef {
  bool is_name = false;
  std::string name;
  int64_t value = 0;
};

// One argument of a node, graph input or output (the schema's `Argument` union).
struct Argument {
  enum class Kind : uint8_t {
    kNone, kTensor, kTensors, kOptionalTensors, kOptionalTensor, kInt, kInts, kIntLists, kFloat,
    kFloats, kBool, kBools, kString, kStrings, kSymInt, kSymInts, kSymFloat, kSymFloats, kSymBool,
    kSymBools, kScalarType, kMemoryFormat, kLayout, kDevice, kComplex, kGraph, kCustomObj,
    kOperator, kOther,
  };
  Kind kind = Kind::kNone;
  std::string name;                 // kTensor, kSymFloat / kSymBool by name, kGraph, kCustomObj, kOperator
                                    // (kGraph: `i` is its index in Program::subgraphs)
  std::vector<std::string> names;   // kTensors, kOptionalTensors ("" = None)
  int64_t i = 0;                    // kInt, kScalarType, kMemoryFormat, kLayout; kSymInt constant
  double f = 0;                     // kFloat; kComplex real part
  double imag = 0;                  // kComplex
  bool b = false;                   // kBool; kSymBool constant
  std::string s;                    // kString; the schema's field name for kOther
  std::vector<int64_t> ints;        // kInts
  std::vector<std::vector<int64_t>> int_lists;
  std::vector<double> floats;       // kFloats (kSymFloats constants)
  std::vector<bool> bools;          // kBools
  std::vector<std::string> strings; // kStrings
  std::vector<SymIntRef> sym_ints;  // kSymInt (one), kSymInts; kSymFloat(s)/kSymBool(s) by name too
  Device device;                    // kDevice

  bool IsTensor() const { return kind == Kind::kTensor; }
  // Every tensor name this argument refers to (for dataflow).
  std::vector<std::string> TensorNames() const;
  // Every symbolic value name it refers to (sym ints, floats, bools given by name).
  std::vector<std::string> SymbolNames() const;
};
const char* ArgumentKindName(Argument::Kind kind);

struct NamedArgument {
  std::string name;
  Argument arg;
  bool keyword = false;  // passed as a keyword-only argument
};

// One frame of a node's `nn_module_stack`: the module path and its class (last dotted name).
struct ModuleFrame {
  std::string path;
  std::string type;  // "FluxAttention"
  std::string qualified_type;  // "diffusers.models.transformers.transformer_flux.FluxAttention"
};

struct Node {
  std::string name;
  std::string target;  // "torch.ops.aten.linear.default", "_operator.add", ...
  std::vector<NamedArgument> inputs;
  std::vector<Argument> outputs;
  int32_t stack = -1;  // index into Program::module_stacks, -1 when the node has none
  // What a plan's edit requires of the node at run time (compiler/program/edits.h), said when it
  // fails there; "" for the program's own nodes.
  std::string edit_requires;
};

// The graph signature's view of one graph input.
struct InputSpec {
  enum class Kind : uint8_t { kUserInput, kParameter, kBuffer, kTensorConstant, kCustomObj, kToken, kConstantInput };
  Kind kind = Kind::kUserInput;
  Argument arg;        // the graph input (kTensor for parameters, buffers, constants)
  std::string target;  // parameter / buffer / constant fqn; the argument name of a constant input
  bool persistent = true;  // buffers
  Argument value;      // kConstantInput: its value (kNone, kInt, kFloat, kString, kBool)
};

struct OutputSpec {
  enum class Kind : uint8_t { kUserOutput, kLossOutput, kBufferMutation, kParameterMutation, kGradient,
                              kUserInputMutation, kToken };
  Kind kind = Kind::kUserOutput;
  Argument arg;
  std::string target;
};

// A pytree spec (torch.utils._pytree, serialized version 1): a leaf (type "") or a container of
// `children`; `context` is the container's context as JSON text (dict keys: a JSON list).
struct TreeSpec {
  std::string type;      // "" leaf, "builtins.tuple", "builtins.list", "builtins.dict", ...
  std::string context;   // JSON text ("null" when none)
  std::vector<TreeSpec> children;
  std::vector<std::string> keys;  // builtins.dict: the keys, parsed from context

  bool IsLeaf() const { return type.empty(); }
  size_t LeafCount() const;
};

struct ModuleCall {
  std::string fqn;
  bool has_signature = false;
  std::vector<Argument> inputs;   // flattened leaves of in_spec that are graph values
  std::vector<Argument> outputs;
  TreeSpec in_spec;
  TreeSpec out_spec;
  std::vector<std::string> forward_arg_names;  // root only
};

struct RangeConstraint {
  std::string expr;  // a symbol ("s31") or an expression of symbols
  std::optional<int64_t> min;
  std::optional<int64_t> max;  // nullopt: unbounded
};

// An entry of the weights or constants index (`data/*/model_*_config.json`).
struct Payload {
  std::string fqn;
  std::string path_name;  // file under data/weights/ or data/constants/
  bool is_param = false;
  bool use_pickle = false;
  TensorMeta meta;
};

// One forward argument as a caller gives it: a tensor (shape, dtype name) or a non-tensor value
// as JSON ("3", "[[1, 6, 8]]", "null").
struct InputDesc {
  std::string name;
  bool tensor = false;
  std::vector<int64_t> shape;
  std::string dtype;       // "f32", "bf16", ... ("" = unchecked)
  std::string value_json;  // non-tensor
};

// One workload of the manifest: concrete inputs at which the compiler evaluates the program's
// symbolic sizes.
struct ManifestWorkload {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;  // name -> JSON value
  std::vector<InputDesc> inputs;
};

// A size of the inputs that the model's own code fixed while torch traced it (a guard equating
// an expression of input dims with a constant, raised in the model's code): ZImage reads
// `len(tensor)`, a Python int, so its token counts are constants in the program.
struct FixedSize {
  std::string size;  // an expression of input dims: `cap_feats[0].shape[0]`, `(x[0].shape[2]//2)*...`
  int64_t value = 0;
  std::string at;    // `diffusers/models/transformers/transformer_z_image.py:601 in patchify_and_embed`
  std::string code;  // that line
};

// What tools/export_program.py records that the graph does not: the model class and config,
// named config values, each class's forward signature, the module tree, workloads.
struct Manifest {
  std::string name;
  std::string class_name;
  std::string source;
  std::string model_config_json = "{}";
  std::string dtype;
  std::vector<std::pair<std::string, std::string>> producer;
  std::vector<std::pair<std::string, int64_t>> config;
  std::vector<model::ModuleType> types;
  std::vector<std::string> attention_types;
  std::vector<model::Module> modules;  // path, type, container, children, attrs (no params)
  std::vector<ManifestWorkload> workloads;
  // Which inputs feed Q and K/V of each attention module, by structure (the exporter's rule: an
  // added Q projection makes it joint, an encoder_hidden_states argument cross, else self); used
  // where the module's call signature could not be preserved for dataflow.
  std::vector<model::AttentionSite> attention;
  // Preserved calls whose input spec has leaves without an input (symbolic sizes, devices, which a
  // signature cannot hold): module path -> those leaf positions, ascending.
  std::vector<std::pair<std::string, std::vector<size_t>>> bypassed;
  // Modules whose call signature torch.export could not keep, with the reason.
  std::vector<std::pair<std::string, std::string>> unpreserved;
  // The sizes the forward fixed at export, in the order torch met them (at most 16).
  std::vector<FixedSize> fixed_sizes;
};

// A graph of nodes: the body of a higher-order operator (the program's own graph is Program's).
struct Graph {
  std::vector<Argument> inputs;
  std::vector<Argument> outputs;
  std::vector<Node> nodes;
  std::unordered_map<std::string, TensorMeta> tensor_values;
  std::unordered_map<std::string, SymInt> sym_int_values;
};

struct Program {
  std::string path;            // the archive, for messages
  std::string hash;            // "sha256:" of models/model.json: the program's identity
  int schema_major = 0;
  int schema_minor = 0;
  std::string torch_version;
  std::vector<std::string> verifiers;
  std::vector<Argument> inputs;    // graph placeholders, in order
  std::vector<Argument> outputs;
  std::vector<Node> nodes;
  std::unordered_map<std::string, TensorMeta> tensor_values;
  std::unordered_map<std::string, SymInt> sym_int_values;
  std::vector<std::vector<ModuleFrame>> module_stacks;  // distinct stacks, outermost first
  std::vector<InputSpec> input_specs;   // parallel to `inputs`
  std::vector<OutputSpec> output_specs; // parallel to `outputs`
  std::vector<ModuleCall> module_calls;
  std::vector<RangeConstraint> range_constraints;
  std::vector<std::string> guards;      // Python guard expressions over L['arg'] (guard_expr.h)
  std::vector<Payload> weights;
  std::vector<Payload> constants;
  std::optional<Manifest> manifest;
  // Bodies of higher-order operators (Argument::kGraph's `i`), as read; the reader inlines those
  // whose semantics are plain for inference (compiler/program/inline_hops.h).
  std::vector<Graph> subgraphs;

  const TensorMeta* FindTensor(const std::string& name) const;
  const ModuleCall* FindModuleCall(const std::string& fqn) const;
  // The root's call entry ("" fqn); nullptr when the program has none.
  const ModuleCall* Root() const { return FindModuleCall(""); }
  // How messages name the program: its path, or "program" when it has none.
  std::string Where() const { return path.empty() ? std::string("program") : path; }
  // The user inputs' forward-argument names, in the order the root's in_spec lists them.
  std::vector<std::string> ForwardArgNames() const;
  // The parameters of the graph signature, in its order: fqn and sizes (a parameter's sizes are
  // static; a symbolic one would count its hint). Parameters without tensor metadata are left out
  // (the reader refuses such programs).
  std::vector<std::pair<std::string, std::vector<int64_t>>> ParameterShapes() const;
  // The input of each leaf of `call`'s input spec, in spec order; nullptr for a leaf the
  // exporter passed around the signature (Manifest::bypassed). Throws ProgramError when the
  // counts disagree.
  std::vector<const Argument*> LeafInputs(const ModuleCall& call) const;
  // Bytes of one activation element of a run of this program: 2 for a bf16 export, else 4 (fp32,
  // as weft-run runs a program whose manifest says nothing).
  int64_t ActivationBytes() const;
  // The sizes the forward fixed at export (Manifest::fixed_sizes); none without a manifest.
  const std::vector<FixedSize>& FixedSizes() const;
};

}  // namespace weft::program

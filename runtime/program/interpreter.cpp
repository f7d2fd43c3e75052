#include "runtime/program/interpreter.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

#include "compiler/program/archive.h"
#include "compiler/program/edits.h"
#include "compiler/program/graph_view.h"
#include "runtime/program/fast_kernels.h"
#include "runtime/program/edit_backend.h"
#include "runtime/program/fusions.h"
#include "runtime/program/row_slices.h"
#include "runtime/program/schema_types.h"

namespace weft::interp {

using program::Argument;
using program::ProgramError;
using AK = program::Argument::Kind;

namespace {

// One value pushed for an operator argument.
struct Source {
  enum class Kind : uint8_t { kConst, kSlot, kTensorList, kOptionalTensorList, kIntList, kFloatFromSlot, kWrappedFromSlot };
  Kind kind = Kind::kConst;
  c10::IValue constant;
  int32_t slot = -1;
  std::vector<int32_t> slots;  // lists: -1 = None (optional tensors) or the constant ints[i] (int lists)
  std::vector<int64_t> ints;
};

// Python-level operators on symbolic values (`_operator.mul`, `torch.sym_max` ...).
enum class PyOp : uint8_t {
  kAdd, kSub, kMul, kFloorDiv, kTrueDiv, kMod, kPow, kNeg, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr, kNot,
  kMax, kMin, kFloat, kInt, kFloor, kCeil, kSqrt, kIte,
};

}  // namespace

struct Interpreter::Impl {
  const program::Program* program = nullptr;
  // The program with its row slices moved up (runtime/program/row_slices.h) when fast kernels
  // are on; `program` then points here.
  std::optional<program::Program> rewritten;
  size_t slice_moves = 0;
  LoadOptions options;
  struct Instr {
    enum class Kind : uint8_t { kDispatch, kSymSize, kPyOp, kFast, kEdit };
    Kind kind = Kind::kDispatch;
    std::optional<c10::OperatorHandle> op;
    PyOp py = PyOp::kAdd;
    std::unique_ptr<FastKernel> fast;
    const plan::ProgramEdit* edit = nullptr;  // kEdit
    std::vector<Source> args;
    // Per return: the slot it goes to (-1 unused), or the slots a returned list unpacks into.
    std::vector<int32_t> out_slots;
    std::vector<std::vector<int32_t>> out_lists;
    std::vector<int32_t> free_after;
    size_t node = 0;
    // The profiler event (--profile-ops) of a fast kernel or an edit; dispatched operators record
    // themselves.
    std::string record_name;
  };
  std::vector<Instr> instrs;
  // Gathered parameters (LoadOptions::weights): per instruction, the groups to acquire before it
  // (with the group asked for next) and to release after it; per group, its params' slots.
  std::vector<std::vector<std::pair<size_t, int64_t>>> acquire_before;
  std::vector<std::vector<size_t>> release_after;
  std::vector<std::vector<int32_t>> group_slots;
  std::vector<bool> streamed;  // per state input: gathered, not bound
  int64_t first_group = -1;    // the group a run acquires first
  std::unordered_map<std::string, int32_t> slot_of;
  size_t num_slots = 0;
  std::vector<c10::IValue> frame;
  // Graph inputs: their slots; state inputs bound by the caller.
  std::vector<int32_t> input_slots;
  std::vector<StateInput> state;
  std::vector<const at::Tensor*> state_tensor;  // parallel to state
  std::vector<size_t> user_inputs;              // graph input indices of user / constant inputs
  std::vector<int32_t> output_slots;
  std::vector<int32_t> never_free;
  size_t fast_count = 0;
  std::vector<std::string> fused;  // the name of each fusion made, for reports
  // Module spans for an observer: per instruction, its frames down to the observed depth.
  ModuleObserver observer;
  std::vector<std::pair<std::string, std::string>> frames;       // (path, type) of each frame id
  std::vector<std::vector<int32_t>> instr_frames;                 // frame ids, outermost first
  std::vector<std::string> capture_of;                            // slot -> name to capture, "" none
  std::map<std::string, at::Tensor> captured;

  int32_t Slot(const std::string& name) {
    auto it = slot_of.find(name);
    if (it != slot_of.end()) return it->second;
    const int32_t s = static_cast<int32_t>(num_slots++);
    slot_of.emplace(name, s);
    return s;
  }

  std::string NodeWhere(size_t n) const {
    const program::Node& node = program->nodes[n];
    std::string where = program->path + ": node `" + node.name + "` (" + node.target;
    const std::string owner = program::AttentionOwner(*program, node);
    if (!owner.empty()) where += ", module `" + owner + "`";
    return where + ")";
  }
};

namespace {

using Impl = Interpreter::Impl;
using Instr = Interpreter::Impl::Instr;

std::optional<PyOp> PyOpOf(const std::string& target) {
  static const std::map<std::string, PyOp> ops = {
      {"_operator.add", PyOp::kAdd}, {"_operator.sub", PyOp::kSub}, {"_operator.mul", PyOp::kMul},
      {"_operator.floordiv", PyOp::kFloorDiv}, {"_operator.truediv", PyOp::kTrueDiv}, {"_operator.mod", PyOp::kMod},
      {"_operator.pow", PyOp::kPow}, {"_operator.neg", PyOp::kNeg}, {"_operator.eq", PyOp::kEq},
      {"_operator.ne", PyOp::kNe}, {"_operator.lt", PyOp::kLt}, {"_operator.le", PyOp::kLe},
      {"_operator.gt", PyOp::kGt}, {"_operator.ge", PyOp::kGe}, {"_operator.and_", PyOp::kAnd},
      {"_operator.or_", PyOp::kOr}, {"torch.sym_not", PyOp::kNot}, {"torch.sym_max", PyOp::kMax},
      {"torch.sym_min", PyOp::kMin}, {"torch.sym_float", PyOp::kFloat}, {"torch.sym_int", PyOp::kInt},
      {"torch._sym_sqrt", PyOp::kSqrt}, {"math.sqrt", PyOp::kSqrt}, {"torch.sym_ite", PyOp::kIte},
      {"math.floor", PyOp::kFloor}, {"math.ceil", PyOp::kCeil}, {"math.trunc", PyOp::kInt},
  };
  auto it = ops.find(target);
  if (it == ops.end()) return std::nullopt;
  return it->second;
}

// "torch.ops.aten.linear.default" -> ("aten::linear", ""), "...add.Tensor" -> ("aten::add", "Tensor").
std::optional<c10::OperatorName> OperatorNameOf(const std::string& target) {
  const std::string prefix = "torch.ops.";
  if (target.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = target.substr(prefix.size());
  const size_t d1 = rest.find('.');
  if (d1 == std::string::npos) return std::nullopt;
  const std::string ns = rest.substr(0, d1);
  const std::string tail = rest.substr(d1 + 1);
  const size_t d2 = tail.rfind('.');
  const std::string name = d2 == std::string::npos ? tail : tail.substr(0, d2);
  std::string overload = d2 == std::string::npos ? "" : tail.substr(d2 + 1);
  if (overload == "default") overload.clear();
  return c10::OperatorName(ns + "::" + name, overload);
}

// A Python number as a 0-dim tensor that type promotion treats like the number (a "wrapped
// number"), as torch does for `x * 1000` against a Tensor parameter.
at::Tensor WrappedNumber(const c10::Scalar& s, c10::Device device) {
  at::Tensor t = c10::scalar_to_tensor(s, device);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

[[noreturn]] void Refuse(const Impl& impl, size_t node, const std::string& what) {
  throw ProgramError(impl.NodeWhere(node) + ": " + what);
}

int32_t SymSlot(Impl& impl, const program::SymIntRef& r) { return r.is_name ? impl.Slot(r.name) : -1; }

// The Source for one serialized argument given the schema argument it fills.
Source Convert(Impl& impl, size_t node, const Argument& a, const c10::Argument& schema) {
  const SchemaType t = Classify(schema);
  Source s;
  auto fail = [&](const std::string& why) -> Source {
    Refuse(impl, node, "argument `" + schema.name() + "` (" + schema.type()->str() + ") given a " +
                           program::ArgumentKindName(a.kind) + (why.empty() ? "" : ": " + why));
  };
  if (a.kind == AK::kNone) {
    if (!t.optional && t.base != SchemaType::Base::kNone) return fail("the argument is not optional");
    s.constant = c10::IValue();
    return s;
  }
  switch (t.base) {
    case SchemaType::Base::kTensor:
      if (a.kind == AK::kTensor) {
        s.kind = Source::Kind::kSlot;
        s.slot = impl.Slot(a.name);
        return s;
      }
      if (a.kind == AK::kInt) return s.constant = WrappedNumber(a.i, impl.options.device), s;
      if (a.kind == AK::kFloat) return s.constant = WrappedNumber(a.f, impl.options.device), s;
      if (a.kind == AK::kBool) return s.constant = WrappedNumber(a.b, impl.options.device), s;
      if ((a.kind == AK::kSymInt || a.kind == AK::kSymFloat || a.kind == AK::kSymBool) && !a.sym_ints.empty()) {
        if (!a.sym_ints[0].is_name) return s.constant = WrappedNumber(a.sym_ints[0].value, impl.options.device), s;
        s.kind = Source::Kind::kWrappedFromSlot;  // a symbolic size used as a number: `x * n`
        s.slot = impl.Slot(a.sym_ints[0].name);
        return s;
      }
      return fail("");
    case SchemaType::Base::kTensorList:
      if (a.kind != AK::kTensors && a.kind != AK::kOptionalTensors) return fail("");
      s.kind = t.optional_elements ? Source::Kind::kOptionalTensorList : Source::Kind::kTensorList;
      for (const std::string& n : a.names) s.slots.push_back(n.empty() ? -1 : impl.Slot(n));
      return s;
    case SchemaType::Base::kInt:
      if (a.kind == AK::kInt) return s.constant = a.i, s;
      if (a.kind == AK::kBool) return s.constant = static_cast<int64_t>(a.b), s;
      if (a.kind == AK::kSymInt) {
        if (!a.sym_ints[0].is_name) return s.constant = a.sym_ints[0].value, s;
        s.kind = Source::Kind::kSlot;
        s.slot = impl.Slot(a.sym_ints[0].name);
        return s;
      }
      return fail("");
    case SchemaType::Base::kIntList:
      if (a.kind == AK::kInts) return s.constant = c10::List<int64_t>(a.ints), s;
      if (a.kind == AK::kInt) return s.constant = c10::List<int64_t>({a.i}), s;
      if (a.kind == AK::kSymInts || a.kind == AK::kSymInt) {
        s.kind = Source::Kind::kIntList;
        for (const program::SymIntRef& r : a.sym_ints) {
          s.slots.push_back(SymSlot(impl, r));
          s.ints.push_back(r.value);
        }
        return s;
      }
      return fail("");
    case SchemaType::Base::kFloat:
      if (a.kind == AK::kFloat) return s.constant = a.f, s;
      if (a.kind == AK::kInt) return s.constant = static_cast<double>(a.i), s;
      if (a.kind == AK::kSymFloat || a.kind == AK::kSymInt) {
        if (a.sym_ints.empty() || !a.sym_ints[0].is_name) return s.constant = a.kind == AK::kSymFloat ? a.f : static_cast<double>(a.sym_ints.empty() ? 0 : a.sym_ints[0].value), s;
        s.kind = Source::Kind::kFloatFromSlot;
        s.slot = impl.Slot(a.sym_ints[0].name);
        return s;
      }
      return fail("");
    case SchemaType::Base::kScalar:
      if (a.kind == AK::kInt) return s.constant = c10::Scalar(a.i), s;
      if (a.kind == AK::kFloat) return s.constant = c10::Scalar(a.f), s;
      if (a.kind == AK::kBool) return s.constant = c10::Scalar(a.b), s;
      if (a.kind == AK::kComplex) return s.constant = c10::Scalar(c10::complex<double>(a.f, a.imag)), s;
      if ((a.kind == AK::kSymInt || a.kind == AK::kSymFloat || a.kind == AK::kSymBool) && !a.sym_ints.empty() &&
          a.sym_ints[0].is_name) {
        s.kind = Source::Kind::kSlot;
        s.slot = impl.Slot(a.sym_ints[0].name);
        return s;
      }
      return fail("");
    case SchemaType::Base::kBool:
      if (a.kind == AK::kBool) return s.constant = a.b, s;
      if (a.kind == AK::kSymBool && !a.sym_ints.empty() && a.sym_ints[0].is_name) {
        s.kind = Source::Kind::kSlot;
        s.slot = impl.Slot(a.sym_ints[0].name);
        return s;
      }
      if (a.kind == AK::kSymBool) return s.constant = a.b, s;
      return fail("");
    case SchemaType::Base::kString:
      if (a.kind == AK::kString) return s.constant = a.s, s;
      return fail("");
    case SchemaType::Base::kScalarType:
      if (a.kind != AK::kScalarType) return fail("");
      if (auto st = C10ScalarType(static_cast<program::ScalarType>(a.i))) return s.constant = static_cast<int64_t>(*st), s;
      return fail("dtype " + std::to_string(a.i) + " has no LibTorch equivalent");
    case SchemaType::Base::kLayout:
      if (a.kind != AK::kLayout) return fail("");
      if (auto l = C10Layout(static_cast<int>(a.i))) return s.constant = static_cast<int64_t>(*l), s;
      return fail("layout " + std::to_string(a.i) + " is not supported");
    case SchemaType::Base::kMemoryFormat:
      if (a.kind != AK::kMemoryFormat) return fail("");
      if (auto m = C10MemoryFormat(static_cast<int>(a.i))) return s.constant = static_cast<int64_t>(*m), s;
      return fail("memory format " + std::to_string(a.i) + " is not supported");
    case SchemaType::Base::kDevice:
      if (a.kind != AK::kDevice) return fail("");
      return s.constant = impl.options.device, s;  // every device is the run's device
    case SchemaType::Base::kFloatList:
      if (a.kind == AK::kFloats) return s.constant = c10::List<double>(a.floats), s;
      return fail("");
    case SchemaType::Base::kBoolList:
      if (a.kind == AK::kBools) {
        c10::List<bool> l;
        for (bool b : a.bools) l.push_back(b);
        return s.constant = l, s;
      }
      return fail("");
    case SchemaType::Base::kNone:
    case SchemaType::Base::kOther:
      break;
  }
  return fail("weft cannot bind this argument type");
}

void PrepareDispatch(Impl& impl, size_t n, Instr& instr) {
  const program::Node& node = impl.program->nodes[n];
  std::optional<c10::OperatorName> name = OperatorNameOf(node.target);
  if (!name) Refuse(impl, n, "not an operator weft can run");
  if (name->name.rfind("higher_order::", 0) == 0) {
    Refuse(impl, n, "this higher-order operator is not supported (weft runs grad-mode and autocast-off regions, "
                    "inlined when the program is read; not control flow or autocast on)");
  }
  std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findSchema(*name);
  if (!op) {
    Refuse(impl, n, std::string("this LibTorch (") + TORCH_VERSION + ") has no operator " + name->name +
                        (name->overload_name.empty() ? "" : "." + name->overload_name));
  }
  instr.kind = Instr::Kind::kDispatch;
  instr.op = op;
  const c10::FunctionSchema& schema = op->schema();
  std::vector<bool> used(node.inputs.size(), false);
  for (const c10::Argument& arg : schema.arguments()) {
    const program::NamedArgument* given = nullptr;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].name == arg.name()) {
        given = &node.inputs[i];
        used[i] = true;
        break;
      }
    }
    if (given != nullptr) {
      instr.args.push_back(Convert(impl, n, given->arg, arg));
    } else if (arg.default_value()) {
      Source s;
      s.constant = *arg.default_value();
      if (Classify(arg).base == SchemaType::Base::kDevice && !s.constant.isNone()) s.constant = impl.options.device;
      instr.args.push_back(std::move(s));
    } else {
      Refuse(impl, n, "no value for the operator's argument `" + arg.name() + "`");
    }
  }
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) Refuse(impl, n, "the operator " + schema.name() + " has no argument `" + node.inputs[i].name + "`");
  }
  // Returns.
  const auto& returns = schema.returns();
  std::vector<Argument> outs = node.outputs;
  if (returns.size() > 1 && outs.size() == 1 && outs[0].kind == AK::kTensors && outs[0].names.size() == returns.size()) {
    std::vector<Argument> split;
    for (const std::string& nm : outs[0].names) {
      Argument a;
      a.kind = nm.empty() ? AK::kNone : AK::kTensor;
      a.name = nm;
      split.push_back(a);
    }
    outs = split;
  }
  if (outs.size() > returns.size()) {
    Refuse(impl, n, std::to_string(outs.size()) + " outputs but the operator returns " + std::to_string(returns.size()));
  }
  instr.out_slots.assign(returns.size(), -1);
  instr.out_lists.resize(returns.size());
  for (size_t r = 0; r < outs.size(); ++r) {
    const Argument& o = outs[r];
    switch (o.kind) {
      case AK::kTensor:
        instr.out_slots[r] = impl.Slot(o.name);
        break;
      case AK::kTensors:
      case AK::kOptionalTensors:
        for (const std::string& nm : o.names) instr.out_lists[r].push_back(nm.empty() ? -1 : impl.Slot(nm));
        break;
      case AK::kSymInt:
      case AK::kSymFloat:
      case AK::kSymBool:
        if (!o.sym_ints.empty() && o.sym_ints[0].is_name) instr.out_slots[r] = impl.Slot(o.sym_ints[0].name);
        break;
      case AK::kNone:
        break;
      default:
        Refuse(impl, n, std::string("an output of kind ") + program::ArgumentKindName(o.kind) + " is not supported");
    }
  }
}

void PreparePyOp(Impl& impl, size_t n, Instr& instr, PyOp op) {
  const program::Node& node = impl.program->nodes[n];
  instr.kind = Instr::Kind::kPyOp;
  instr.py = op;
  for (const program::NamedArgument& in : node.inputs) {
    const Argument& a = in.arg;
    Source s;
    if ((a.kind == AK::kSymInt || a.kind == AK::kSymFloat || a.kind == AK::kSymBool) && !a.sym_ints.empty() &&
        a.sym_ints[0].is_name) {
      s.kind = Source::Kind::kSlot;
      s.slot = impl.Slot(a.sym_ints[0].name);
    } else if (a.kind == AK::kInt || a.kind == AK::kSymInt) {
      s.constant = a.kind == AK::kInt ? a.i : a.sym_ints[0].value;
    } else if (a.kind == AK::kFloat || a.kind == AK::kSymFloat) {
      s.constant = a.f;
    } else if (a.kind == AK::kBool || a.kind == AK::kSymBool) {
      s.constant = a.b;
    } else {
      Refuse(impl, n, std::string("operand `") + in.name + "` is a " + program::ArgumentKindName(a.kind));
    }
    instr.args.push_back(std::move(s));
  }
  if (node.outputs.size() != 1 || node.outputs[0].sym_ints.empty() || !node.outputs[0].sym_ints[0].is_name) {
    Refuse(impl, n, "a symbolic operator must produce one named value");
  }
  instr.out_slots = {impl.Slot(node.outputs[0].sym_ints[0].name)};
  instr.out_lists.resize(1);
}

c10::IValue PyApply(PyOp op, const std::vector<c10::IValue>& v) {
  auto is_float = [](const c10::IValue& x) { return x.isDouble(); };
  auto as_double = [](const c10::IValue& x) { return x.isDouble() ? x.toDouble() : x.isBool() ? (x.toBool() ? 1.0 : 0.0) : static_cast<double>(x.toInt()); };
  auto as_int = [](const c10::IValue& x) { return x.isBool() ? static_cast<int64_t>(x.toBool()) : x.toInt(); };
  const bool any_float = std::any_of(v.begin(), v.end(), is_float);
  auto arith = [&](auto int_op, auto float_op) -> c10::IValue {
    if (any_float) return float_op(as_double(v[0]), as_double(v[1]));
    return int_op(as_int(v[0]), as_int(v[1]));
  };
  auto floordiv = [](int64_t a, int64_t b) {
    TORCH_CHECK(b != 0, "integer division by zero in a symbolic size");
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  auto mod = [](int64_t a, int64_t b) {
    TORCH_CHECK(b != 0, "integer modulo by zero in a symbolic size");
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  };
  switch (op) {
    case PyOp::kAdd: return arith([](int64_t a, int64_t b) { return a + b; }, [](double a, double b) { return a + b; });
    case PyOp::kSub: return arith([](int64_t a, int64_t b) { return a - b; }, [](double a, double b) { return a - b; });
    case PyOp::kMul: return arith([](int64_t a, int64_t b) { return a * b; }, [](double a, double b) { return a * b; });
    case PyOp::kFloorDiv:
      return arith(floordiv, [](double a, double b) { return std::floor(a / b); });
    case PyOp::kTrueDiv: return as_double(v[0]) / as_double(v[1]);
    case PyOp::kMod: return arith(mod, [](double a, double b) { return a - std::floor(a / b) * b; });
    case PyOp::kPow:
      if (!any_float && as_int(v[1]) >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < as_int(v[1]); ++i) r *= as_int(v[0]);
        return r;
      }
      return std::pow(as_double(v[0]), as_double(v[1]));
    case PyOp::kNeg: return any_float ? c10::IValue(-as_double(v[0])) : c10::IValue(-as_int(v[0]));
    case PyOp::kEq: return as_double(v[0]) == as_double(v[1]);
    case PyOp::kNe: return as_double(v[0]) != as_double(v[1]);
    case PyOp::kLt: return as_double(v[0]) < as_double(v[1]);
    case PyOp::kLe: return as_double(v[0]) <= as_double(v[1]);
    case PyOp::kGt: return as_double(v[0]) > as_double(v[1]);
    case PyOp::kGe: return as_double(v[0]) >= as_double(v[1]);
    case PyOp::kAnd: return as_int(v[0]) != 0 && as_int(v[1]) != 0;
    case PyOp::kOr: return as_int(v[0]) != 0 || as_int(v[1]) != 0;
    case PyOp::kNot: return as_int(v[0]) == 0;
    case PyOp::kMax: return arith([](int64_t a, int64_t b) { return std::max(a, b); }, [](double a, double b) { return std::max(a, b); });
    case PyOp::kMin: return arith([](int64_t a, int64_t b) { return std::min(a, b); }, [](double a, double b) { return std::min(a, b); });
    case PyOp::kFloat: return as_double(v[0]);
    case PyOp::kInt: return static_cast<int64_t>(any_float ? std::trunc(as_double(v[0])) : as_int(v[0]));
    case PyOp::kFloor: return static_cast<int64_t>(any_float ? std::floor(as_double(v[0])) : as_int(v[0]));
    case PyOp::kCeil: return static_cast<int64_t>(any_float ? std::ceil(as_double(v[0])) : as_int(v[0]));
    case PyOp::kSqrt: return std::sqrt(as_double(v[0]));
    case PyOp::kIte: return as_int(v[0]) != 0 ? v[1] : v[2];
  }
  return c10::IValue();
}

// weft's own nodes (compiler/program/edits.h): a split, a gather, an attention the plan runs.
void PrepareEdit(Impl& impl, size_t n, Instr& instr) {
  const program::Node& node = impl.program->nodes[n];
  if (impl.options.edits == nullptr || impl.options.backend == nullptr) {
    Refuse(impl, n, "a plan's node, but the program was loaded without the plan's edits");
  }
  const program::NamedArgument* index = nullptr;
  for (const program::NamedArgument& in : node.inputs) {
    if (in.name == "edit") index = &in;
  }
  if (index == nullptr || index->arg.kind != AK::kInt || index->arg.i < 0 ||
      static_cast<size_t>(index->arg.i) >= impl.options.edits->edits.size()) {
    Refuse(impl, n, "names no edit of the plan");
  }
  instr.kind = Instr::Kind::kEdit;
  instr.edit = &impl.options.edits->edits[static_cast<size_t>(index->arg.i)];
  instr.record_name = node.target;
  auto tensor = [&](const char* name, bool optional) {
    Source s;
    for (const program::NamedArgument& in : node.inputs) {
      if (in.name != name) continue;
      if (in.arg.kind == AK::kTensor) {
        s.kind = Source::Kind::kSlot;
        s.slot = impl.Slot(in.arg.name);
        return s;
      }
      if (in.arg.kind == AK::kNone && optional) return s;
      Refuse(impl, n, std::string("argument `") + name + "` must be a tensor");
    }
    if (!optional) Refuse(impl, n, std::string("has no argument `") + name + "`");
    return s;
  };
  auto parts_of = [&](const char* name = "parts") {
    Source parts;  // the full lengths of the parts of a split dim, by symbolic-int slot
    parts.kind = Source::Kind::kIntList;
    for (const program::NamedArgument& in : node.inputs) {
      if (in.name != name) continue;
      if (in.arg.kind != AK::kSymInts) Refuse(impl, n, std::string("argument `") + name + "` must be symbolic ints");
      for (const program::SymIntRef& r : in.arg.sym_ints) {
        parts.slots.push_back(r.is_name ? impl.Slot(r.name) : -1);
        parts.ints.push_back(r.value);
      }
    }
    return parts;
  };
  if (node.target == program::kAttentionTarget) {
    Source gqa;  // grouped-query attention: fewer key/value heads than query heads
    gqa.constant = false;
    for (const program::NamedArgument& in : node.inputs) {
      const bool dropout = in.name == "dropout_p" && in.arg.kind == AK::kFloat && in.arg.f != 0.0;
      const bool causal = in.name == "is_causal" && in.arg.kind == AK::kBool && in.arg.b;
      if (dropout || causal) {
        Refuse(impl, n, "context-parallel attention takes no " + in.name + " (the site would run it locally)");
      }
      if (in.name == "enable_gqa" && in.arg.kind == AK::kBool && in.arg.b) gqa.constant = true;
    }
    instr.args = {tensor("query", false), tensor("key", false), tensor("value", false), tensor("attn_mask", true)};
    Source scale;  // None, or the float the node passes
    for (const program::NamedArgument& in : node.inputs) {
      if (in.name == "scale" && in.arg.kind == AK::kFloat) scale.constant = in.arg.f;
    }
    instr.args.push_back(scale);
    instr.args.push_back(parts_of());  // the streams a mask over (query, key) pairs lays out
    instr.args.push_back(parts_of("whole_parts"));  // the lengths of streams every rank holds whole
    instr.args.push_back(gqa);
  } else if (node.target == program::kSplitTarget || node.target == program::kGatherTarget) {
    instr.args = {tensor("self", false)};
    instr.args.push_back(parts_of());
    instr.args.push_back(parts_of("unit"));  // a split in whole rows: the row's length, as factors
    instr.args.push_back(parts_of("rows"));  // or their count (none or one)
  } else if (node.target == program::kAllReduceTarget) {
    instr.args = {tensor("self", false), tensor("bias", true)};
  } else if (node.target == program::kHaloTarget) {
    instr.args = {tensor("self", false)};
  } else if (node.target == program::kNormStatsTarget) {
    instr.args = {tensor("input", false), tensor("weight", true)};
    Source dims;  // how many trailing dims it normalizes
    Source eps;   // None, or the float the node passes
    for (const program::NamedArgument& in : node.inputs) {
      if (in.name == "normalized_shape") {
        dims.constant = static_cast<int64_t>(in.arg.kind == AK::kInts ? in.arg.ints.size() : in.arg.sym_ints.size());
      }
      if (in.name == "eps" && in.arg.kind == AK::kFloat) eps.constant = in.arg.f;
    }
    if (dims.constant.isNone()) Refuse(impl, n, "has no argument `normalized_shape`");
    instr.args.push_back(dims);
    instr.args.push_back(eps);
  } else {
    Refuse(impl, n, "not an operator weft can run");
  }
  if (node.outputs.size() != 1 || node.outputs[0].kind != AK::kTensor) Refuse(impl, n, "must produce one tensor");
  instr.out_slots = {impl.Slot(node.outputs[0].name)};
  instr.out_lists.resize(1);
}

void ComputeLastUses(Impl& impl) {
  std::vector<int64_t> last(impl.num_slots, -1);
  for (size_t i = 0; i < impl.instrs.size(); ++i) {
    for (const Source& s : impl.instrs[i].args) {
      if (s.slot >= 0) last[static_cast<size_t>(s.slot)] = static_cast<int64_t>(i);
      for (int32_t x : s.slots) {
        if (x >= 0) last[static_cast<size_t>(x)] = static_cast<int64_t>(i);
      }
    }
    for (int32_t x : impl.instrs[i].fast ? impl.instrs[i].fast->Reads() : std::vector<int32_t>{}) {
      if (x >= 0) last[static_cast<size_t>(x)] = static_cast<int64_t>(i);
    }
  }
  for (int32_t s : impl.never_free) last[static_cast<size_t>(s)] = -1;
  // A value produced but never read is freed right after its instruction.
  for (size_t i = 0; i < impl.instrs.size(); ++i) {
    auto produced = [&](int32_t s) {
      if (s >= 0 && last[static_cast<size_t>(s)] < static_cast<int64_t>(i) &&
          std::find(impl.never_free.begin(), impl.never_free.end(), s) == impl.never_free.end()) {
        last[static_cast<size_t>(s)] = static_cast<int64_t>(i);
      }
    };
    for (int32_t s : impl.instrs[i].out_slots) produced(s);
    for (const auto& l : impl.instrs[i].out_lists) {
      for (int32_t s : l) produced(s);
    }
  }
  for (size_t s = 0; s < last.size(); ++s) {
    if (last[s] >= 0) impl.instrs[static_cast<size_t>(last[s])].free_after.push_back(static_cast<int32_t>(s));
  }
}

// Where each group of gathered parameters is acquired (before the first instruction reading one)
// and released (after the last), groups in the order they are first read; their state inputs
// are not bound at the start of a run.
void PlanGathers(Impl& impl, const std::vector<std::vector<std::string>>& groups) {
  impl.acquire_before.assign(impl.instrs.size(), {});
  impl.release_after.assign(impl.instrs.size(), {});
  impl.streamed.assign(impl.state.size(), false);
  impl.group_slots.assign(groups.size(), {});
  std::vector<int64_t> first(groups.size(), -1), last(groups.size(), -1);
  std::map<int32_t, size_t> group_of_slot;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const std::string& fqn : groups[g]) {
      auto state = std::find_if(impl.state.begin(), impl.state.end(), [&](const Interpreter::StateInput& s) { return s.fqn == fqn; });
      if (state == impl.state.end()) {
        throw ProgramError(impl.program->path + ": gathered parameter `" + fqn + "` is not an input of the program");
      }
      impl.streamed[static_cast<size_t>(state - impl.state.begin())] = true;
      const int32_t slot = impl.input_slots[state->graph_input];
      impl.group_slots[g].push_back(slot);
      if (slot >= 0) group_of_slot[slot] = g;
    }
  }
  for (size_t i = 0; i < impl.instrs.size(); ++i) {
    auto read = [&](int32_t slot) {
      auto it = group_of_slot.find(slot);
      if (it == group_of_slot.end()) return;
      if (first[it->second] < 0) first[it->second] = static_cast<int64_t>(i);
      last[it->second] = static_cast<int64_t>(i);
    };
    for (const Source& s : impl.instrs[i].args) {
      if (s.slot >= 0) read(s.slot);
      for (int32_t x : s.slots) read(x);
    }
  }
  std::vector<size_t> order;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (first[g] >= 0) order.push_back(g);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
  if (!order.empty()) impl.first_group = static_cast<int64_t>(order.front());
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t g = order[k];
    const int64_t next = k + 1 < order.size() ? static_cast<int64_t>(order[k + 1]) : -1;
    impl.acquire_before[static_cast<size_t>(first[g])].push_back({g, next});
    impl.release_after[static_cast<size_t>(last[g])].push_back(g);
  }
}

}  // namespace

Interpreter::Interpreter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Interpreter::~Interpreter() = default;

std::unique_ptr<Interpreter> Interpreter::Load(const program::Program& original, const LoadOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->program = &original;
  if (options.fast_kernels) {
    RowSliceRewrite r = SinkRowSlices(original);
    if (r.moves > 0 || r.dead_slices_removed > 0) {
      impl->rewritten = std::move(r.program);
      impl->program = &*impl->rewritten;
      impl->slice_moves = r.moves;
    }
  }
  const program::Program& program = *impl->program;
  impl->options = options;
  for (const program::OutputSpec& o : program.output_specs) {
    if (o.kind != program::OutputSpec::Kind::kUserOutput) {
      throw ProgramError(program.path + ": the program mutates or returns `" + o.target +
                         "` besides its outputs; weft runs inference programs without mutations");
    }
  }
  // Graph inputs.
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const Argument& a = program.inputs[i];
    const program::InputSpec& spec = program.input_specs[i];
    int32_t slot = -1;
    if (a.kind == AK::kTensor) {
      slot = impl->Slot(a.name);
    } else if ((a.kind == AK::kSymInt || a.kind == AK::kSymFloat || a.kind == AK::kSymBool) && !a.sym_ints.empty() &&
               a.sym_ints[0].is_name) {
      slot = impl->Slot(a.sym_ints[0].name);
    }
    impl->input_slots.push_back(slot);
    using IK = program::InputSpec::Kind;
    if (spec.kind == IK::kParameter || spec.kind == IK::kBuffer || spec.kind == IK::kTensorConstant) {
      impl->state.push_back({spec.target, spec.kind, i});
      impl->state_tensor.push_back(nullptr);
    } else if (spec.kind == IK::kUserInput || spec.kind == IK::kConstantInput) {
      impl->user_inputs.push_back(i);
    } else {
      throw ProgramError(program.path + ": graph input " + std::to_string(i) + " is a " +
                         (spec.kind == IK::kCustomObj ? "custom object" : "token") + ", which weft does not run");
    }
  }
  for (const Argument& o : program.outputs) {
    if (o.kind != AK::kTensor) {
      throw ProgramError(program.path + ": a program output is a " + std::string(program::ArgumentKindName(o.kind)) +
                         "; weft runs programs whose outputs are tensors");
    }
    impl->output_slots.push_back(impl->Slot(o.name));
  }
  impl->never_free = impl->output_slots;
  // Fusions: each replaces its nodes by one instruction at the last of them.
  std::vector<Fusion> fusions;
  if (options.fast_kernels) fusions = FindFusions(program, options.device);

  std::vector<int32_t> fusion_of(program.nodes.size(), -1);
  for (size_t f = 0; f < fusions.size(); ++f) {
    for (size_t n : fusions[f].nodes) fusion_of[n] = static_cast<int32_t>(f);
  }
  // Nodes.
  for (size_t n = 0; n < program.nodes.size(); ++n) {
    const program::Node& node = program.nodes[n];
    Instr instr;
    instr.node = n;
    if (fusion_of[n] >= 0) {
      Fusion& f = fusions[static_cast<size_t>(fusion_of[n])];
      if (std::optional<PyOp> py = PyOpOf(node.target); !py) {
        Instr check;  // a fused node is still refused by name when it cannot run alone
        check.node = n;
        PrepareDispatch(*impl, n, check);
      }
      if (n != f.nodes.back()) continue;  // emitted with the last node of its chain
      instr.kind = Instr::Kind::kFast;
      instr.record_name = "weft::" + f.name;
      for (const std::string& input : f.inputs) {
        Source src;
        if (!input.empty()) {
          src.kind = Source::Kind::kSlot;
          src.slot = impl->Slot(input);
        }
        instr.args.push_back(std::move(src));
      }
      instr.out_slots = {impl->Slot(f.output)};
      instr.out_lists.resize(1);
      instr.fast = std::move(f.kernel);
      ++impl->fast_count;
      impl->fused.push_back(f.name);
      impl->instrs.push_back(std::move(instr));
      continue;
    }
    for (const program::NamedArgument& in : node.inputs) {
      if (in.arg.kind == AK::kGraph || in.arg.kind == AK::kCustomObj || in.arg.kind == AK::kOperator ||
          in.arg.kind == AK::kOther) {
        Refuse(*impl, n, std::string("argument `") + in.name + "` is a " + program::ArgumentKindName(in.arg.kind) +
                             (in.arg.kind == AK::kOther ? " (" + in.arg.s + ")" : "") + ", which weft cannot bind");
      }
    }
    if (std::optional<PyOp> py = PyOpOf(node.target)) {
      PreparePyOp(*impl, n, instr, *py);
    } else if (node.target.rfind("weft.", 0) == 0) {
      PrepareEdit(*impl, n, instr);
    } else if (node.target == "torch.ops.aten.sym_size.int") {
      instr.kind = Instr::Kind::kSymSize;
      if (node.inputs.size() != 2 || node.inputs[0].arg.kind != AK::kTensor || node.inputs[1].arg.kind != AK::kInt ||
          node.outputs.size() != 1 || node.outputs[0].sym_ints.empty()) {
        Refuse(*impl, n, "sym_size takes a tensor and a constant dim");
      }
      Source t;
      t.kind = Source::Kind::kSlot;
      t.slot = impl->Slot(node.inputs[0].arg.name);
      Source d;
      d.constant = node.inputs[1].arg.i;
      instr.args = {t, d};
      instr.out_slots = {node.outputs[0].sym_ints[0].is_name ? impl->Slot(node.outputs[0].sym_ints[0].name) : -1};
      instr.out_lists.resize(1);
    } else {
      PrepareDispatch(*impl, n, instr);
      if (options.fast_kernels) {
        FastKernelContext ctx{program, node, options.device, [&impl](const std::string& name) { return impl->Slot(name); }};
        instr.fast = MakeFastKernel(ctx);
        if (instr.fast) {
          instr.kind = Instr::Kind::kFast;
          instr.record_name = "weft::fast " + node.target;
          ++impl->fast_count;
        }
      }
    }
    impl->instrs.push_back(std::move(instr));
  }
  ComputeLastUses(*impl);
  // Gathered parameters (fast kernels multiply them as they are, never packing a copy:
  // runtime/nn/onednn_linear.h MarkTransient).
  if (options.weights != nullptr) PlanGathers(*impl, options.weights->Groups());
  impl->frame.resize(impl->num_slots);
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(impl)));
}

const std::vector<Interpreter::StateInput>& Interpreter::state_inputs() const { return impl_->state; }

void Interpreter::BindState(const std::string& fqn, const at::Tensor* tensor) {
  for (size_t i = 0; i < impl_->state.size(); ++i) {
    if (impl_->state[i].fqn == fqn) {
      impl_->state_tensor[i] = tensor;
      return;
    }
  }
  throw ProgramError(impl_->program->path + ": the program has no parameter, buffer or constant `" + fqn + "`");
}

void Interpreter::SetModuleObserver(ModuleObserver observer, int depth) {
  Impl& impl = *impl_;
  impl.observer = std::move(observer);
  impl.frames.clear();
  impl.instr_frames.clear();
  if (!impl.observer) return;
  std::map<std::string, int32_t> ids;
  for (const Impl::Instr& instr : impl.instrs) {
    std::vector<int32_t> chain;
    const program::Node& node = impl.program->nodes[instr.node];
    if (node.stack >= 0) {
      for (const program::ModuleFrame& f : impl.program->module_stacks[static_cast<size_t>(node.stack)]) {
        if (f.path.empty()) continue;
        const int d = static_cast<int>(std::count(f.path.begin(), f.path.end(), '.')) + 1;
        if (d > depth) continue;
        auto it = ids.find(f.path);
        if (it == ids.end()) {
          it = ids.emplace(f.path, static_cast<int32_t>(impl.frames.size())).first;
          impl.frames.emplace_back(f.path, f.type);
        }
        chain.push_back(it->second);
      }
    }
    impl.instr_frames.push_back(std::move(chain));
  }
}

void Interpreter::Capture(const std::vector<std::string>& names) {
  impl_->capture_of.assign(impl_->num_slots, "");
  for (const std::string& n : names) {
    auto it = impl_->slot_of.find(n);
    if (it != impl_->slot_of.end()) impl_->capture_of[static_cast<size_t>(it->second)] = n;
  }
}

const std::map<std::string, at::Tensor>& Interpreter::captured() const { return impl_->captured; }

size_t Interpreter::num_nodes() const { return impl_->instrs.size(); }
size_t Interpreter::fast_nodes() const { return impl_->fast_count; }

size_t Interpreter::row_slice_moves() const { return impl_->slice_moves; }

std::map<std::string, int> Interpreter::fusions() const {
  std::map<std::string, int> out;
  for (const std::string& f : impl_->fused) ++out[f];
  return out;
}

std::vector<at::Tensor> Interpreter::Run(const std::vector<c10::IValue>& user_inputs) {
  Impl& impl = *impl_;
  if (user_inputs.size() != impl.user_inputs.size()) {
    throw ProgramError(impl.program->path + ": " + std::to_string(user_inputs.size()) + " inputs given, the program takes " +
                       std::to_string(impl.user_inputs.size()));
  }
  std::vector<c10::IValue>& frame = impl.frame;
  for (size_t i = 0; i < impl.state.size(); ++i) {
    if (!impl.streamed.empty() && impl.streamed[i]) continue;  // gathered when first read
    const at::Tensor* t = impl.state_tensor[i];
    if (t == nullptr || !t->defined()) {
      throw ProgramError(impl.program->path + ": `" + impl.state[i].fqn + "` has no value (not loaded)");
    }
    const int32_t slot = impl.input_slots[impl.state[i].graph_input];
    if (slot >= 0) frame[static_cast<size_t>(slot)] = *t;
  }
  for (size_t i = 0; i < user_inputs.size(); ++i) {
    const int32_t slot = impl.input_slots[impl.user_inputs[i]];
    if (slot >= 0) frame[static_cast<size_t>(slot)] = user_inputs[i];
  }
  if (impl.first_group >= 0) impl.options.weights->Prefetch(static_cast<size_t>(impl.first_group));
  std::vector<c10::IValue> stack;
  stack.reserve(16);
  std::vector<int32_t> open;  // module spans the observer sees open, outermost first
  auto move_to = [&](const std::vector<int32_t>& chain) {
    size_t common = 0;
    while (common < open.size() && common < chain.size() && open[common] == chain[common]) ++common;
    while (open.size() > common) {
      const auto& f = impl.frames[static_cast<size_t>(open.back())];
      impl.observer(f.first, f.second, false);
      open.pop_back();
    }
    for (size_t k = common; k < chain.size(); ++k) {
      const auto& f = impl.frames[static_cast<size_t>(chain[k])];
      impl.observer(f.first, f.second, true);
      open.push_back(chain[k]);
    }
  };
  for (size_t index = 0; index < impl.instrs.size(); ++index) {
    Instr& instr = impl.instrs[index];
    if (impl.observer) move_to(impl.instr_frames[index]);
    if (!impl.acquire_before.empty()) {
      for (const auto& [g, next] : impl.acquire_before[index]) {
        std::vector<at::Tensor> tensors = impl.options.weights->Acquire(g, next);
        const std::vector<int32_t>& slots = impl.group_slots[g];
        for (size_t k = 0; k < slots.size() && k < tensors.size(); ++k) {
          if (slots[k] >= 0) frame[static_cast<size_t>(slots[k])] = std::move(tensors[k]);
        }
      }
    }
    stack.clear();
    for (const Source& s : instr.args) {
      switch (s.kind) {
        case Source::Kind::kConst:
          stack.push_back(s.constant);
          break;
        case Source::Kind::kSlot:
          stack.push_back(frame[static_cast<size_t>(s.slot)]);
          break;
        case Source::Kind::kFloatFromSlot: {
          const c10::IValue& v = frame[static_cast<size_t>(s.slot)];
          stack.push_back(v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt()));
          break;
        }
        case Source::Kind::kWrappedFromSlot: {
          const c10::IValue& v = frame[static_cast<size_t>(s.slot)];
          const c10::Scalar number = v.isDouble() ? c10::Scalar(v.toDouble()) : v.isBool() ? c10::Scalar(v.toBool())
                                                                                         : c10::Scalar(v.toInt());
          stack.push_back(WrappedNumber(number, impl.options.device));
          break;
        }
        case Source::Kind::kTensorList: {
          c10::List<at::Tensor> list;
          list.reserve(s.slots.size());
          for (int32_t x : s.slots) list.push_back(frame[static_cast<size_t>(x)].toTensor());
          stack.push_back(std::move(list));
          break;
        }
        case Source::Kind::kOptionalTensorList: {
          c10::List<std::optional<at::Tensor>> list;
          for (int32_t x : s.slots) {
            list.push_back(x < 0 ? std::optional<at::Tensor>() : std::optional<at::Tensor>(frame[static_cast<size_t>(x)].toTensor()));
          }
          stack.push_back(std::move(list));
          break;
        }
        case Source::Kind::kIntList: {
          c10::List<int64_t> list;
          list.reserve(s.slots.size());
          for (size_t k = 0; k < s.slots.size(); ++k) {
            list.push_back(s.slots[k] < 0 ? s.ints[k] : frame[static_cast<size_t>(s.slots[k])].toInt());
          }
          stack.push_back(std::move(list));
          break;
        }
      }
    }
    try {
      switch (instr.kind) {
        case Instr::Kind::kDispatch:
          instr.op->callBoxed(&stack);
          break;
        case Instr::Kind::kFast: {
          RECORD_FUNCTION(instr.record_name.c_str(), std::vector<c10::IValue>());
          instr.fast->Run(stack, frame);
          break;
        }
        case Instr::Kind::kEdit: {
          RECORD_FUNCTION(instr.record_name.c_str(), std::vector<c10::IValue>());
          at::Tensor out;
          const plan::ProgramEdit& e = *instr.edit;
          if (e.kind == plan::ProgramEdit::Kind::kSplit) {
            const std::vector<int64_t> rows = stack[3].toIntVector();
            out = impl.options.backend->Split(stack[0].toTensor(), e, stack[1].toIntVector(), stack[2].toIntVector(),
                                              rows.empty() ? 0 : rows[0]);
          } else if (e.kind == plan::ProgramEdit::Kind::kGather) {
            out = impl.options.backend->Gather(stack[0].toTensor(), e);
          } else if (e.kind == plan::ProgramEdit::Kind::kAllReduce) {
            std::optional<at::Tensor> bias;
            if (!stack[1].isNone()) bias = stack[1].toTensor();
            out = impl.options.backend->AllReduce(stack[0].toTensor(), bias, e);
          } else if (e.kind == plan::ProgramEdit::Kind::kHalo) {
            out = impl.options.backend->Halo(stack[0].toTensor(), e);
          } else if (e.kind == plan::ProgramEdit::Kind::kNormStats) {
            std::optional<at::Tensor> weight;
            if (!stack[1].isNone()) weight = stack[1].toTensor();
            std::optional<double> eps;
            if (!stack[3].isNone()) eps = stack[3].toDouble();
            out = impl.options.backend->RmsNorm(stack[0].toTensor(), stack[2].toInt(), weight, eps, e);
          } else {
            std::optional<at::Tensor> mask;
            if (!stack[3].isNone()) mask = stack[3].toTensor();
            std::optional<double> scale;
            if (!stack[4].isNone()) scale = stack[4].toDouble();
            at::Tensor key = stack[1].toTensor();
            at::Tensor value = stack[2].toTensor();
            if (stack[7].toBool()) {
              // Grouped-query attention: each key/value head serves heads / kv_heads query heads in a
              // row (SDPA's enable_gqa). The context-parallel kernels take as many heads in all three,
              // so the key/value heads are repeated first -- the same pairs of query and key heads on
              // every rank, Ulysses' head exchange included, at the bytes of full heads.
              const at::Tensor& query = stack[0].toTensor();
              TORCH_CHECK(key.dim() == 4 && query.dim() == 4 && key.size(1) > 0 && query.size(1) % key.size(1) == 0,
                          "grouped-query attention needs (batch, heads, tokens, head_dim) queries whose heads are a "
                          "multiple of the keys' (queries ", query.sizes(), ", keys ", key.sizes(), ")");
              const int64_t group = query.size(1) / key.size(1);
              if (group > 1) {
                key = key.repeat_interleave(group, 1);
                value = value.repeat_interleave(group, 1);
              }
            }
            out = impl.options.backend->Attention(stack[0].toTensor(), key, value, mask, scale, e,
                                                  stack[5].toIntVector(), stack[6].toIntVector());
          }
          stack.clear();
          stack.push_back(std::move(out));
          break;
        }
        case Instr::Kind::kSymSize: {
          const at::Tensor& t = stack[0].toTensor();
          const int64_t v = t.size(stack[1].toInt());
          stack.clear();
          stack.push_back(v);
          break;
        }
        case Instr::Kind::kPyOp: {
          c10::IValue r = PyApply(instr.py, stack);
          stack.clear();
          stack.push_back(std::move(r));
          break;
        }
      }
    } catch (const c10::Error& e) {
      const std::string& needs = impl.program->nodes[instr.node].edit_requires;
      throw ProgramError(impl.NodeWhere(instr.node) + ": " + e.what_without_backtrace() +
                         (needs.empty() ? "" : " (" + needs + ")"));
    }
    for (size_t r = 0; r < instr.out_slots.size() && r < stack.size(); ++r) {
      c10::IValue& v = stack[r];
      if (instr.out_slots[r] >= 0) {
        if (v.isSymInt()) v = v.toSymInt().guard_int(__FILE__, __LINE__);
        if (!impl.capture_of.empty() && !impl.capture_of[static_cast<size_t>(instr.out_slots[r])].empty() && v.isTensor()) {
          impl.captured[impl.capture_of[static_cast<size_t>(instr.out_slots[r])]] = v.toTensor().clone();
        }
        frame[static_cast<size_t>(instr.out_slots[r])] = std::move(v);
      } else if (!instr.out_lists[r].empty()) {
        c10::List<at::Tensor> list = v.toTensorList();
        const auto& slots = instr.out_lists[r];
        for (size_t k = 0; k < slots.size() && k < list.size(); ++k) {
          if (slots[k] >= 0) frame[static_cast<size_t>(slots[k])] = list.get(k);
        }
      }
    }
    for (int32_t s : instr.free_after) frame[static_cast<size_t>(s)] = c10::IValue();
    if (!impl.release_after.empty()) {
      for (size_t g : impl.release_after[index]) impl.options.weights->Release(g);
    }
  }
  if (impl.observer) move_to({});
  std::vector<at::Tensor> outputs;
  for (int32_t s : impl.output_slots) {
    outputs.push_back(frame[static_cast<size_t>(s)].toTensor());
    frame[static_cast<size_t>(s)] = c10::IValue();
  }
  return outputs;
}

}  // namespace weft::interp

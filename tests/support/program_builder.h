#pragma once

// Hand-made torch.export programs for tests of the passes over them (compiler/program's
// shard_flow, runtime/program's row slices): constant-size tensors, nodes added in order.
//
//   weft::testing::ProgramBuilder b;
//   b.Input("x", {1, 8, 4}, InputSpec::Kind::kUserInput, "");
//   b.Add("g", "gelu.default", {In("self", Tensor("x"))}, {1, 8, 4});
//   b.Output("g");

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/program/program.h"

namespace weft::testing {

using program::Argument;
using program::InputSpec;
using program::NamedArgument;
using program::Node;
using program::OutputSpec;
using program::Program;
using program::ScalarType;
using program::SymInt;
using program::TensorMeta;

inline Argument Tensor(const std::string& name) {
  Argument a;
  a.kind = Argument::Kind::kTensor;
  a.name = name;
  return a;
}

inline Argument Int(int64_t v) {
  Argument a;
  a.kind = Argument::Kind::kInt;
  a.i = v;
  return a;
}

inline Argument Bool(bool v) {
  Argument a;
  a.kind = Argument::Kind::kBool;
  a.b = v;
  return a;
}

inline Argument Float(double v) {
  Argument a;
  a.kind = Argument::Kind::kFloat;
  a.f = v;
  return a;
}

inline Argument Ints(std::vector<int64_t> v) {
  Argument a;
  a.kind = Argument::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

inline Argument String(std::string v) {
  Argument a;
  a.kind = Argument::Kind::kString;
  a.s = std::move(v);
  return a;
}

inline Argument Tensors(std::vector<std::string> names) {
  Argument a;
  a.kind = Argument::Kind::kTensors;
  a.names = std::move(names);
  return a;
}

inline NamedArgument In(const std::string& name, Argument a) {
  NamedArgument n;
  n.name = name;
  n.arg = std::move(a);
  return n;
}

class ProgramBuilder {
 public:
  void Input(const std::string& name, std::vector<int64_t> sizes, InputSpec::Kind kind, const std::string& target) {
    p.inputs.push_back(Tensor(name));
    InputSpec spec;
    spec.kind = kind;
    spec.arg = Tensor(name);
    spec.target = target;
    p.input_specs.push_back(spec);
    Meta(name, std::move(sizes));
  }
  void Meta(const std::string& name, std::vector<int64_t> sizes) {
    TensorMeta m;
    m.dtype = ScalarType::kFloat;
    for (int64_t s : sizes) m.sizes.push_back(SymInt{false, s, ""});
    p.tensor_values[name] = m;
  }
  // out = torch.ops.aten.<target>(inputs), of `sizes`.
  void Add(const std::string& out, const std::string& target, std::vector<NamedArgument> inputs,
           std::vector<int64_t> sizes) {
    Node n;
    n.name = out;
    n.target = "torch.ops.aten." + target;
    n.inputs = std::move(inputs);
    n.outputs = {Tensor(out)};
    p.nodes.push_back(std::move(n));
    Meta(out, std::move(sizes));
  }
  void Output(const std::string& name) {
    p.outputs.push_back(Tensor(name));
    OutputSpec o;
    o.arg = Tensor(name);
    p.output_specs.push_back(o);
  }
  Program p;
};

}  // namespace weft::testing

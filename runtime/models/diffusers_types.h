#pragma once

// What the Python side knows about each module class weft's built-in models mirror: the module
// that defines it and its full forward signature (with the arguments weft does not implement,
// such as `joint_attention_kwargs`), and how diffusers' code calls it. `weft-run --dump-graph`
// writes these into the graph's `types` so a graph dumped from a C++ model equals the one
// tools/export_graph.py exports from diffusers. Facts from diffusers 0.42.1 and torch.nn.

#include <string>
#include <vector>

#include "runtime/nn/module.h"

namespace weft::models {

struct PythonArg {
  std::string name;
  bool optional = false;      // has a default
  bool keyword_only = false;  // after `*`
};

struct PythonType {
  std::string name;           // class name, e.g. "FluxAttention"
  std::string python_module;  // e.g. "diffusers.models.transformers.transformer_flux"
  std::vector<PythonArg> args;
  bool variadic = false;      // *args / **kwargs
  // diffusers' call sites pass the first `positional` arguments by position and the rest by
  // keyword (the same at every call site of the class in Flux and Wan).
  int positional = 0;
};

// The Python class `module` mirrors, told apart by its type name and its first C++ forward
// argument (two classes share a name: torch.nn.GELU(input) and diffusers' GELU(hidden_states)).
// Throws std::invalid_argument naming the module when weft has no entry for it.
const PythonType& PythonTypeOf(const nn::Module& module);

}  // namespace weft::models

#pragma once

// Binding a program's symbolic sizes to concrete inputs. A program exported with dynamic token
// counts names each varying size by a symbol (s31 ...); given the inputs of one run (tensor
// shapes, integer arguments), the symbols get values, and every size, range and guard the program
// recorded is checked before anything runs. The compiler binds at a manifest workload to trace
// shapes; the interpreter binds at the caller's inputs to refuse a bad input by name.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/program/program.h"

namespace weft::program {

// One leaf of the program's flattened inputs: which graph input it feeds and where it comes from
// in the caller's arguments ("img_shapes[0][0][1]").
//
// A tensor inside a list, tuple or dict argument (ZImage's `x`, a list of latents; a (cos, sin)
// RoPE tuple) is given on its own, named by its path: `x[0]`, `video_rotary_emb[1]`,
// `added_cond_kwargs['resolution']` -- an inputs file's entry of that name. `key` says under
// which name the caller gives the leaf: its path for such a tensor, else the argument.
struct FlatInput {
  size_t graph_input = 0;   // index into Program::inputs / input_specs
  std::string arg;          // the forward argument
  std::string path;         // "img_shapes[0][0][1]", or the argument name for a whole tensor
  std::vector<size_t> index;  // element path inside the argument (empty for the argument itself)
  bool tensor = false;      // a tensor user input
  std::string key;          // the name the caller gives it under
};

// The names the caller gives the program's inputs under (FlatInput::key), each once, in order.
std::vector<std::string> InputKeys(const std::vector<FlatInput>& flat);

// The user inputs of `program` in graph order, each tied to its forward argument. Throws
// ProgramError when the root's input spec does not match the graph's user inputs.
std::vector<FlatInput> FlattenInputs(const Program& program);

class Bindings {
 public:
  // Binds every symbol from `inputs` and checks them against `program`: tensor ranks, static
  // sizes, dtypes (when given), integer arguments, the sizes that are expressions of symbols,
  // the range constraints and the guards. Throws ProgramError naming the argument, dimension,
  // symbol or guard (and the program file).
  static Bindings Bind(const Program& program, const std::vector<InputDesc>& inputs);

  std::optional<int64_t> Symbol(const std::string& name) const;
  // The value of a recorded size (constant or expression); one over an unbacked symbol (a size
  // the data decides, u0) is the export's hint.
  int64_t Eval(const SymInt& size) const;
  std::vector<int64_t> Sizes(const TensorMeta& meta) const;
  const std::unordered_map<std::string, int64_t>& symbols() const { return symbols_; }
  // Where a symbol was bound from ("hidden_states.size(1)"), for messages.
  std::string Origin(const std::string& symbol) const;

 private:
  std::unordered_map<std::string, int64_t> symbols_;
  std::unordered_map<std::string, std::string> origins_;
  mutable std::unordered_map<std::string, int64_t> cache_;  // expression text -> value
};

}  // namespace weft::program

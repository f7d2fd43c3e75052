#pragma once

// A program as a weft module tree, so everything built for weft's models works on it: the root
// has the program's class name and children mirroring the program's modules, so its parameters
// carry diffusers' names (loading from safetensors, seeded random weights, tensor-parallel
// shards all address them by fqn); its forward checks the inputs against the program's sizes
// and guards and runs the interpreter. Buffers and lifted constants come from the archive (a
// checkpoint that carries a persistent buffer replaces it: CheckpointBuffers).

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/program/bindings.h"
#include "compiler/program/program.h"
#include "runtime/nn/module.h"
#include "runtime/program/interpreter.h"

namespace weft::interp {

class ProgramModel : public nn::Module {
 public:
  // Builds the tree and the interpreter for `program`, reads its buffers and constants from the
  // archive at `program->path`, and leaves the parameters unmaterialised (load or randomise them,
  // then call ConformParameters). Throws program::ProgramError.
  static std::unique_ptr<ProgramModel> Create(std::shared_ptr<const program::Program> program, const LoadOptions& options);

  std::vector<std::string> Signature() const override { return input_keys_; }
  // `args` holds the tensor arguments by name; non-tensor ones come from SetArguments. Throws
  // program::ProgramError naming the argument when the inputs do not fit the program.
  nn::Outputs Forward(nn::Args& args) override;

  // Non-tensor forward arguments (ints, lists: an inputs file's `weft.args`), name -> JSON.
  void SetArguments(std::map<std::string, std::string> json) { arguments_ = std::move(json); }
  const std::map<std::string, std::string>& arguments() const { return arguments_; }

  // Casts every parameter to the dtype the program records for it (a bf16 program keeps
  // diffusers' _keep_in_fp32_modules in fp32) and moves buffers and constants to `device`.
  void ConformParameters(c10::Device device);
  // The dtype the program's floating parameters mostly have (the export's dtype).
  at::ScalarType dtype() const { return dtype_; }

  // Checks `inputs` against the program without running it (also what Forward does first).
  program::Bindings Check(const std::vector<program::InputDesc>& inputs) const;
  // The inputs of `args` + arguments() as the program's binder sees them.
  std::vector<program::InputDesc> Describe(const nn::Args& args) const;

  // The program's persistent buffers (a checkpoint may carry them; nn::LoadWeights loads them).
  std::vector<std::pair<std::string, at::Tensor*>> CheckpointBuffers() override;

  const program::Program& program() const { return *program_; }
  Interpreter& interpreter() { return *interpreter_; }

 private:
  ProgramModel(std::shared_ptr<const program::Program> program, std::string type);

  std::shared_ptr<const program::Program> program_;
  std::unique_ptr<Interpreter> interpreter_;
  std::vector<std::string> input_keys_;  // program::InputKeys: arguments, and tensors inside lists by path
  std::vector<program::FlatInput> flat_;
  std::map<std::string, std::string> arguments_;
  std::map<std::string, at::Tensor> state_;  // buffers and constants, by fqn
  std::vector<std::string> persistent_buffers_;  // of state_, the buffers a state dict holds
  std::map<std::string, at::ScalarType> param_dtypes_;
  at::ScalarType dtype_ = at::kFloat;
  std::string last_shapes_;  // the input shapes last checked, to check once per shape
};

}  // namespace weft::interp

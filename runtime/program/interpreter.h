#pragma once

// weft's interpreter for torch.export programs (compiler/program): every node's operator is
// resolved once through the ATen dispatcher when the program loads, every argument converted to
// what the operator's schema takes, and every value given a slot in a frame; a run then walks
// the nodes, pushing arguments and calling each operator boxed, and frees every intermediate
// after its last use. Symbolic sizes are computed by the program's own nodes (sym_size, Python
// operators on them), so any input that satisfies the program's guards runs.
//
// What is refused when loading, never mid-run, with the node named: an operator this LibTorch
// lacks, an argument kind the interpreter cannot bind (subgraphs, custom objects), a program that
// mutates its buffers or inputs. Device arguments are rewritten to the run's device.

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft::interp {

class EditBackend;

// Parameters held as slices and gathered block by block (executor/weight_stream.h): the
// interpreter asks for a group's tensors just before the first instruction that reads one of them,
// and says when the last has run; between runs it holds none of them.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The groups, each a list of parameter fqns (state inputs of the program).
  virtual std::vector<std::vector<std::string>> Groups() const = 0;
  // Group `g`'s tensors in Groups()[g] order; `next` is the group the run asks for after it (-1:
  // none), which the source may start gathering now.
  virtual std::vector<at::Tensor> Acquire(size_t g, int64_t next) = 0;
  virtual void Release(size_t g) = 0;
  // Group `g` is the first a run will ask for: called as the run starts (what runs before the
  // first block -- embeddings -- hides its gather).
  virtual void Prefetch(size_t g) = 0;
};

struct LoadOptions {
  c10::Device device = c10::Device(c10::kCPU);
  // A plan's edits, applied to the program already (compiler/program/edits.h), and what runs
  // weft's nodes; both outlive the interpreter. Without them, a `weft.*` node is refused.
  const plan::ProgramEdits* edits = nullptr;
  EditBackend* backend = nullptr;
  // Substitute weft's fast kernels for the op patterns it knows (fp32 CPU Linear as a oneDNN
  // matmul on a weight packed once -- a gathered weight is multiplied as it is); results equal up
  // to float rounding.
  bool fast_kernels = true;
  // Gathered parameters (outlives the interpreter), or none.
  WeightSource* weights = nullptr;
};

class Interpreter {
 public:
  // Prepares `program` (which must outlive the interpreter). Throws program::ProgramError
  // naming the node (and its module) for anything it cannot run.
  static std::unique_ptr<Interpreter> Load(const program::Program& program, const LoadOptions& options);
  ~Interpreter();

  // The graph inputs that are parameters, buffers or lifted constants, by fqn, in program order.
  struct StateInput {
    std::string fqn;
    program::InputSpec::Kind kind;
    size_t graph_input;
  };
  const std::vector<StateInput>& state_inputs() const;
  // Binds state input `fqn` to a tensor the caller owns (a parameter slot that loading or tensor
  // parallelism may replace: the interpreter reads it at every run).
  void BindState(const std::string& fqn, const at::Tensor* tensor);

  // Runs the program on the user inputs, one value per graph user input (FlattenInputs order;
  // tensors, ints, None ...). Returns the user outputs. Inputs must fit the program (the caller
  // checks them with program::Bindings first; a mismatch otherwise surfaces as the failing node).
  std::vector<at::Tensor> Run(const std::vector<c10::IValue>& user_inputs);

  // Called as a run enters and leaves the modules of the program's node stacks, down to `depth`
  // levels below the root (1: the root's children), in call order; nullptr stops it. For traces.
  using ModuleObserver = std::function<void(const std::string& path, const std::string& type, bool enter)>;
  void SetModuleObserver(ModuleObserver observer, int depth);

  // Keeps a copy of each named value (node outputs) as runs produce it: for debugging a program
  // against its eager model module by module (preserved calls name their outputs).
  void Capture(const std::vector<std::string>& names);
  const std::map<std::string, at::Tensor>& captured() const;

  size_t num_nodes() const;
  // How many instructions run a substituted fast kernel or a fusion (for reports and tests).
  size_t fast_nodes() const;
  // How many of each fusion (runtime/program/fusions.h) the program got.
  std::map<std::string, int> fusions() const;
  // How often a slice moved above its producer when loading (runtime/program/row_slices.h).
  size_t row_slice_moves() const;

  struct Impl;

 private:
  explicit Interpreter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::interp

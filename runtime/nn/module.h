#pragma once

// weft's small module tree, what a loaded program is (runtime/program/program_model.h): named
// children mirroring diffusers' modules, so parameters carry diffusers' fqns, which loading,
// seeded randomisation and tensor-parallel sharding address them by (plain tensor slots, which a
// shard can replace); and a forward over *named* arguments, run through `Call`, which checks the
// names against the signature and runs the hooks installed on the module (LibTorch's C++ modules
// have none; weft-run --trace records calls with one, executor/trace.h).
//
//   nn::Outputs out = nn::Call(model, nn::Args().Set("hidden_states", x).Set("timestep", t));
//
// Hooks run in installation order before forward and in reverse order after it, so the first
// installed hook is the outermost. All of this is single-threaded per rank.

#include <ATen/core/Tensor.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace weft::nn {

// What flows through a module call: nothing (an omitted optional argument), a tensor, or a
// tuple of tensors (e.g. Flux's `image_rotary_emb` = (cos, sin)).
using Value = std::variant<std::monostate, at::Tensor, std::vector<at::Tensor>>;

// Named arguments of one call, in the order they were set.
class Args {
 public:
  Args& Set(const std::string& name, Value value);
  bool Has(const std::string& name) const;
  // The value of `name`; throws std::invalid_argument naming the argument if absent.
  Value& Get(const std::string& name);
  const Value& Get(const std::string& name) const;
  // The tensor `name`; throws if absent or not a tensor.
  const at::Tensor& Tensor(const std::string& name) const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// Positional outputs of a module call (diffusers' modules return a tensor or a tuple).
using Outputs = std::vector<Value>;

class Module;

// A forward hook. `PreForward` may rewrite the arguments; `PostForward` may rewrite the
// outputs. Exceptions propagate out of `Call`.
class Hook {
 public:
  virtual ~Hook() = default;
  virtual void PreForward(Module& module, Args& args) { (void)module, (void)args; }
  virtual void PostForward(Module& module, const Args& args, Outputs& outputs) {
    (void)module, (void)args, (void)outputs;
  }
};

// A node of the model tree: a type name (diffusers' class name), named children, named
// parameters, and a forward over named arguments.
class Module {
 public:
  explicit Module(std::string type) : type_(std::move(type)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // diffusers' class name, e.g. "FluxAttention".
  const std::string& type() const { return type_; }
  // The dotted path from the root ("" for the root), fixed when the tree is built.
  const std::string& fqn() const { return fqn_; }

  // Argument names of forward in positional order, as in diffusers' signature.
  virtual std::vector<std::string> Signature() const = 0;
  // Runs the module on `args`. Call it through nn::Call so hooks run.
  virtual Outputs Forward(Args& args) = 0;

  // Adds a child under `name` and returns it; its fqn (and its subtree's) is set here.
  template <typename M>
  M& AddChild(const std::string& name, std::unique_ptr<M> child) {
    M& ref = *child;
    AdoptChild(name, std::move(child));
    return ref;
  }
  // The child called `name`, or nullptr.
  Module* Child(const std::string& name) const;
  // The module at `fqn` relative to this one ("" is this one), or nullptr.
  Module* Find(const std::string& fqn);

  // Registers a parameter and returns a reference to its tensor slot. The slot starts as an
  // fp32 tensor on the meta device (shape only, no memory): weights are materialised by
  // loading or randomizing them, so a rank never holds the full tensor of a parameter it
  // will only keep a shard of.
  at::Tensor& AddParameter(const std::string& name, at::IntArrayRef shape);
  // The parameter slot `name`; throws if absent.
  at::Tensor& Parameter(const std::string& name);
  // Every parameter of the subtree with its full fqn ("blocks.0.attn.to_q.weight"), in
  // registration order, depth first.
  std::vector<std::pair<std::string, at::Tensor*>> NamedParameters();
  // Buffers a checkpoint may carry besides the parameters (diffusers saves persistent buffers in
  // its state dict: SD3's `pos_embed.pos_embed`), with their slots: LoadWeights loads each one a
  // checkpoint has and leaves the others as they are. None by default.
  virtual std::vector<std::pair<std::string, at::Tensor*>> CheckpointBuffers() { return {}; }

  void AddHook(std::shared_ptr<Hook> hook) { hooks_.push_back(std::move(hook)); }
  const std::vector<std::shared_ptr<Hook>>& hooks() const { return hooks_; }

  // Visits every module of the subtree, this one first.
  void Walk(const std::function<void(Module&)>& visit);

 private:
  void AdoptChild(const std::string& name, std::unique_ptr<Module> child);
  void SetFqn(const std::string& fqn);

  std::string type_;
  std::string fqn_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  // A deque, so the slots that AddParameter returns stay valid as more are added.
  std::deque<std::pair<std::string, at::Tensor>> parameters_;
  std::vector<std::shared_ptr<Hook>> hooks_;
};

// Calls `module` with `args`: pre hooks, forward, post hooks. Checks that every argument
// name is in the module's signature (a misspelt argument is refused, not ignored).
Outputs Call(Module& module, Args args);

// Output `index` of `outputs` as a tensor; throws naming the module if it is not one.
const at::Tensor& OutputTensor(const Outputs& outputs, size_t index, const Module& module);

}  // namespace weft::nn

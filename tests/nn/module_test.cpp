// The hook seam on a two-layer toy model: hooks see named arguments, may rewrite them and the
// outputs, run outermost-first, and a call with an argument the module does not declare fails.
#include "runtime/nn/module.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/nn/layers.h"

namespace weft::nn {
namespace {

// Output 0 of `module` called with its one argument set to `x`.
at::Tensor Apply(Module& module, const at::Tensor& x) {
  return OutputTensor(Call(module, Args().Set(module.Signature().at(0), x)), 0, module);
}

// y = second(first(x) * scale): two Linear children called through the seam.
class Toy : public Module {
 public:
  Toy() : Module("Toy") {
    AddChild("first", std::make_unique<Linear>(4, 4, /*bias=*/false));
    AddChild("second", std::make_unique<Linear>(4, 2, /*bias=*/true));
    Child("first")->Parameter("weight") = at::eye(4);
    Child("second")->Parameter("weight") = at::ones({2, 4});
    Child("second")->Parameter("bias") = at::ones({2});
  }
  std::vector<std::string> Signature() const override { return {"x", "scale"}; }
  Outputs Forward(Args& args) override {
    at::Tensor h = Apply(*Child("first"), args.Tensor("x")) * args.Tensor("scale");
    return {Apply(*Child("second"), h)};
  }
};

// Records every call it sees in `log`.
class Recorder : public Hook {
 public:
  Recorder(std::string tag, std::vector<std::string>* log) : tag_(std::move(tag)), log_(log) {}
  void PreForward(Module& module, Args& args) override {
    log_->push_back(tag_ + " pre " + module.fqn() + " args=" + std::to_string(args.entries().size()));
  }
  void PostForward(Module& module, const Args&, Outputs& outputs) override {
    log_->push_back(tag_ + " post " + module.fqn() + " outputs=" + std::to_string(outputs.size()));
  }

 private:
  std::string tag_;
  std::vector<std::string>* log_;
};

// Keeps rows [0, keep) of argument `name` along dim 0: a stand-in for a context-parallel split.
class TakeRows : public Hook {
 public:
  TakeRows(std::string name, int64_t keep) : name_(std::move(name)), keep_(keep) {}
  void PreForward(Module&, Args& args) override { args.Set(name_, args.Tensor(name_).narrow(0, 0, keep_)); }

 private:
  std::string name_;
  int64_t keep_;
};

// Concatenates output 0 with itself along dim 0: a stand-in for a gather.
class Duplicate : public Hook {
 public:
  void PostForward(Module& module, const Args&, Outputs& outputs) override {
    const at::Tensor& out = OutputTensor(outputs, 0, module);
    outputs[0] = at::cat({out, out}, 0);
  }
};

TEST(ModuleTest, TreeHasDiffusersStyleFqnsAndParameters) {
  Toy toy;
  EXPECT_EQ(toy.fqn(), "");
  EXPECT_EQ(toy.Find("second")->fqn(), "second");
  EXPECT_EQ(toy.Find("nope"), nullptr);
  std::vector<std::string> names;
  for (auto& [name, tensor] : toy.NamedParameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"first.weight", "second.weight", "second.bias"}));
}

TEST(ModuleTest, CallRunsForwardThroughChildren) {
  Toy toy;
  at::Tensor x = at::arange(8, at::kFloat).reshape({2, 4});
  Outputs out = Call(toy, Args().Set("x", x).Set("scale", at::scalar_tensor(2.0)));
  // Row sums of x times 2, plus 1.
  EXPECT_TRUE(at::equal(OutputTensor(out, 0, toy), at::tensor({13.0f, 45.0f}).unsqueeze(1).expand({2, 2})));
}

TEST(ModuleTest, HooksRunOutermostFirstOnEveryCalledModule) {
  Toy toy;
  std::vector<std::string> log;
  toy.AddHook(std::make_shared<Recorder>("A", &log));
  toy.AddHook(std::make_shared<Recorder>("B", &log));
  toy.Find("first")->AddHook(std::make_shared<Recorder>("C", &log));
  Call(toy, Args().Set("x", at::zeros({1, 4})).Set("scale", at::scalar_tensor(1.0)));
  EXPECT_EQ(log, (std::vector<std::string>{"A pre  args=2", "B pre  args=2", "C pre first args=1",
                                           "C post first outputs=1", "B post  outputs=1", "A post  outputs=1"}));
}

TEST(ModuleTest, HooksRewriteArgumentsAndOutputs) {
  Toy toy;
  toy.AddHook(std::make_shared<TakeRows>("x", 1));
  toy.Find("second")->AddHook(std::make_shared<Duplicate>());
  at::Tensor x = at::arange(8, at::kFloat).reshape({2, 4});
  at::Tensor y = OutputTensor(Call(toy, Args().Set("x", x).Set("scale", at::scalar_tensor(1.0))), 0, toy);
  // Only row 0 (sum 6) went in; `second`'s output was duplicated along dim 0.
  EXPECT_TRUE(at::equal(y, at::full({2, 2}, 7.0f)));
}

TEST(ModuleTest, UnknownArgumentIsAnError) {
  Toy toy;
  try {
    Call(toy, Args().Set("x", at::zeros({1, 4})).Set("sclae", at::scalar_tensor(1.0)));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "module `` (Toy) has no forward argument `sclae`");
  }
}

TEST(ModuleTest, ParametersStartUnmaterialised) {
  Linear linear(4, 3);
  EXPECT_TRUE(linear.Parameter("weight").is_meta());
  EXPECT_EQ(linear.Parameter("weight").sizes(), (std::vector<int64_t>{3, 4}));
}

}  // namespace
}  // namespace weft::nn

#include "runtime/nn/load_weights.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "runtime/io/safetensors.h"
#include "runtime/nn/layers.h"

namespace weft::nn {
namespace {

// Output 0 of `module` called with its one argument set to `x`.
at::Tensor Apply(Module& module, const at::Tensor& x) {
  return OutputTensor(Call(module, Args().Set(module.Signature().at(0), x)), 0, module);
}

class Pair : public Module {
 public:
  Pair() : Module("Pair") {
    AddChild("a", std::make_unique<Linear>(2, 3));
    AddChild("b", std::make_unique<Linear>(3, 1, /*bias=*/false));
  }
  std::vector<std::string> Signature() const override { return {"x"}; }
  Outputs Forward(Args& args) override { return {Apply(*Child("b"), Apply(*Child("a"), args.Tensor("x")))}; }
};

std::string Write(const std::string& name, const std::map<std::string, at::Tensor>& tensors) {
  std::string path = ::testing::TempDir() + "/weft_lw_" + std::to_string(getpid()) + "_" + name;
  io::WriteSafetensors(path, tensors);
  return path;
}

TEST(LoadWeightsTest, LoadsAcrossShardsAndConvertsDtype) {
  std::string p1 = Write("s1.safetensors", {{"a.weight", at::ones({3, 2}, at::kDouble)}, {"a.bias", at::zeros({3})}});
  std::string p2 = Write("s2.safetensors", {{"b.weight", at::full({1, 3}, 2.0)}});
  io::SafetensorsFile f1 = io::SafetensorsFile::Open(p1), f2 = io::SafetensorsFile::Open(p2);
  Pair pair;
  LoadWeights(pair, {&f1, &f2}, at::kFloat);
  EXPECT_EQ(pair.Find("a")->Parameter("weight").scalar_type(), at::kFloat);
  at::Tensor y = Apply(pair, at::ones({1, 2}));
  EXPECT_FLOAT_EQ(y.item<float>(), 12.0f);
  std::remove(p1.c_str());
  std::remove(p2.c_str());
}

// A module with a persistent buffer (SD3's `pos_embed.pos_embed`): a checkpoint that carries it
// replaces the model's own, one that lacks it keeps it, one of another shape is refused by name.
class WithBuffer : public Pair {
 public:
  WithBuffer() { table_ = at::zeros({4}, at::kDouble); }
  std::vector<std::pair<std::string, at::Tensor*>> CheckpointBuffers() override { return {{"table", &table_}}; }
  at::Tensor table_;
};

TEST(LoadWeightsTest, PersistentBuffersLoadWhenTheCheckpointHasThem) {
  const std::map<std::string, at::Tensor> params = {
      {"a.weight", at::ones({3, 2})}, {"a.bias", at::zeros({3})}, {"b.weight", at::ones({1, 3})}};
  std::map<std::string, at::Tensor> with = params;
  with["table"] = at::arange(4, at::kFloat);
  std::string p = Write("buf.safetensors", with), q = Write("nobuf.safetensors", params);
  std::map<std::string, at::Tensor> wrong = params;
  wrong["table"] = at::ones({5});
  std::string r = Write("wrongbuf.safetensors", wrong);
  io::SafetensorsFile fp = io::SafetensorsFile::Open(p), fq = io::SafetensorsFile::Open(q), fr = io::SafetensorsFile::Open(r);
  WithBuffer loaded, kept, refused;
  LoadWeights(loaded, {&fp}, at::kFloat);
  EXPECT_EQ(loaded.table_.scalar_type(), at::kDouble);  // the buffer's own dtype
  EXPECT_TRUE(at::equal(loaded.table_, at::arange(4, at::kDouble)));
  LoadWeights(kept, {&fq}, at::kFloat);
  EXPECT_TRUE(at::equal(kept.table_, at::zeros({4}, at::kDouble)));
  try {
    LoadWeights(refused, {&fr}, at::kFloat);
    FAIL() << "expected WeightsError";
  } catch (const WeightsError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint does not match Pair:\n  1 shape mismatch(es):\n    table (a buffer): checkpoint [5] (" +
                                         r + "), model [4]");
  }
  for (const std::string& f : {p, q, r}) std::remove(f.c_str());
}

TEST(LoadWeightsTest, NamesMissingUnexpectedAndMismatchedKeys) {
  std::string p = Write("bad.safetensors",
                        {{"a.weight", at::ones({2, 2})}, {"a.bias", at::zeros({3})}, {"c.weight", at::ones({1})}});
  io::SafetensorsFile f = io::SafetensorsFile::Open(p);
  Pair pair;
  try {
    LoadWeights(pair, {&f}, at::kFloat);
    FAIL() << "expected WeightsError";
  } catch (const WeightsError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint does not match Pair:\n"
              "  1 missing parameter(s):\n    b.weight [1, 3]\n"
              "  1 shape mismatch(es):\n    a.weight: checkpoint [2, 2] (" + p + "), model [3, 2]\n"
              "  1 unexpected key(s):\n    c.weight (in " + p + ")");
  }
  std::remove(p.c_str());
}

// Float bits relabelled as integers are no weights: an int tensor is not cast into a float
// parameter (which would run on garbage silently); the key, both dtypes and the file are named.
TEST(LoadWeightsTest, IntegerTensorForAFloatParameterIsNamed) {
  std::string p = Write("int.safetensors", {{"a.weight", at::ones({3, 2}, at::kInt)}, {"a.bias", at::zeros({3})},
                                            {"b.weight", at::zeros({1, 3}, at::kLong)}});
  io::SafetensorsFile f = io::SafetensorsFile::Open(p);
  Pair pair;
  try {
    LoadWeights(pair, {&f}, at::kFloat);
    FAIL() << "expected WeightsError";
  } catch (const WeightsError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint does not match Pair:\n"
              "  2 non-floating dtype(s) for floating parameters:\n"
              "    a.weight: checkpoint I32 (" + p + "), model Float\n"
              "    b.weight: checkpoint I64 (" + p + "), model Float");
  }
  std::remove(p.c_str());
}

// A parameter declared Long (a program's integer table) loads from an I64 checkpoint as Long,
// not "model Float" (issue 28 defect 18); float bits for it are named with its own dtype.
class WithTable : public Module {
 public:
  WithTable() : Module("WithTable") {
    AddParameter("table", {4}) = at::empty({4}, at::TensorOptions().dtype(at::kLong).device(at::kMeta));
    AddParameter("scale", {1});
  }
  std::vector<std::string> Signature() const override { return {}; }
  Outputs Forward(Args&) override { return {}; }
};

TEST(LoadWeightsTest, ParameterDeclaredLongKeepsItsDtype) {
  std::string p = Write("long.safetensors", {{"table", at::arange(4, at::kLong)}, {"scale", at::ones({1}, at::kDouble)}});
  io::SafetensorsFile f = io::SafetensorsFile::Open(p);
  WithTable m;
  LoadWeights(m, {&f}, at::kBFloat16);
  EXPECT_EQ(m.Parameter("table").scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(m.Parameter("table"), at::arange(4, at::kLong)));
  EXPECT_EQ(m.Parameter("scale").scalar_type(), at::kBFloat16);
  std::remove(p.c_str());

  p = Write("float_table.safetensors", {{"table", at::zeros({4})}, {"scale", at::ones({1})}});
  io::SafetensorsFile g = io::SafetensorsFile::Open(p);
  WithTable n;
  try {
    LoadWeights(n, {&g}, at::kFloat);
    FAIL() << "expected WeightsError";
  } catch (const WeightsError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint does not match WithTable:\n"
                                     "  1 floating dtype(s) for integer or boolean parameters:\n"
                                     "    table: checkpoint F32 (" + p + "), model Long");
  }
  std::remove(p.c_str());
}

TEST(LoadWeightsTest, RandomizeIsSeeded) {
  Pair a, b, c;
  RandomizeParameters(a, 7);
  RandomizeParameters(b, 7);
  RandomizeParameters(c, 8);
  EXPECT_TRUE(at::equal(a.Find("a")->Parameter("weight"), b.Find("a")->Parameter("weight")));
  EXPECT_FALSE(at::equal(a.Find("a")->Parameter("weight"), c.Find("a")->Parameter("weight")));
}

}  // namespace
}  // namespace weft::nn

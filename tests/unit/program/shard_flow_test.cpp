// compiler/program/shard_flow.h (and local_sizes.h) on hand-made programs: the refusals no fixture
// program and plan reach past the graph-level checks (a sharding reaching an operator weft does not
// follow, the program's output, attention left local over split keys, a full length no shard
// carries), each with its check and message.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/plan/plan_json.h"
#include "compiler/program/edits.h"
#include "compiler/program/local_sizes.h"
#include "compiler/program/lowering.h"
#include "compiler/program/plan_edit_error.h"
#include "compiler/program/shard_flow.h"
#include "tests/support/program_builder.h"

namespace weft::program {
namespace {

using AK = Argument::Kind;

using testing::Bool;
using testing::Float;
using testing::In;
using testing::Int;
using testing::Ints;
using testing::String;
using testing::Tensor;
using testing::Tensors;

// A symbolic size as torch.export records it (sympy srepr) with its hint.
SymInt Sym(const std::string& symbol, int64_t hint) {
  return SymInt{true, hint, "Symbol('" + symbol + "', positive=True, integer=True)"};
}

// A program with graph inputs `x` (user) and `w` (parameter `layer.weight`), or none with
// `bare`, and the nodes given.
class Builder : public testing::ProgramBuilder {
 public:
  explicit Builder(bool bare = false) {
    if (bare) return;
    Input("x", {2, 8}, InputSpec::Kind::kUserInput, "");
    Input("w", {8, 8}, InputSpec::Kind::kParameter, "layer.weight");
  }
  // out = linear(x, w): the (2, 8) output of the layer Colwise() shards.
  void Linear(const std::string& out) {
    Add(out, "linear.default", {In("input", Tensor("x")), In("weight", Tensor("w"))}, {2, 8});
  }
};

plan::ExecutionPlan Mesh(std::string_view axis) {
  plan::ExecutionPlan plan;
  plan.mesh.axes = {{std::string(axis), 2}};
  plan.mesh.world_size = 2;
  return plan;
}

// tp=2 with `layer` colwise (its weight's rows sharded), the rule at plan.weft:3:3.
plan::ExecutionPlan Colwise(const std::string& module = "layer") {
  plan::ExecutionPlan plan = Mesh(plan::kTpAxis);
  plan::ModuleStep step;
  step.module = module;
  plan::TensorParallel tp;
  tp.style = plan::ShardStyle::kColwise;
  tp.origin = plan::Origin{"plan.weft", 3, 3, false};
  plan::ParamShard w;
  w.name = "weight";
  w.dim = 0;
  w.blocks = {8};
  w.full_shape = {8, 8};
  w.local_shape = {4, 8};
  tp.params = {w};
  step.tp = tp;
  plan.steps.push_back(step);
  return plan;
}

// A split of the root's input `x` along `dim` (plan.weft:5:5).
plan::ProgramEdits SplitX(int64_t dim, int64_t rank = 2) {
  plan::ProgramEdits edits;
  plan::ProgramEdit e;
  e.kind = plan::ProgramEdit::Kind::kSplit;
  e.value = "x";
  e.dim = dim;
  e.rank = rank;
  e.origin = plan::Origin{"plan.weft", 5, 5, false};
  edits.edits.push_back(e);
  return edits;
}

// A gather of `value` along `dim` of its `rank` dims (the rule at plan.weft:`line`:3).
plan::ProgramEdit GatherOf(const std::string& value, int64_t dim, int64_t rank, int line) {
  plan::ProgramEdit gather;
  gather.kind = plan::ProgramEdit::Kind::kGather;
  gather.value = value;
  gather.dim = dim;
  gather.rank = rank;
  gather.origin = plan::Origin{"plan.weft", line, 3, false};
  return gather;
}

template <typename F>
void ExpectRefused(F&& f, EditCheck check, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "not refused; expected: " << message;
  } catch (const PlanEditError& e) {
    EXPECT_EQ(e.check(), check) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
    EXPECT_EQ(e.origin().file, "plan.weft");
  }
}

// AddTensorParallelEdits of `plan` refuses `p` with `check` and `message`.
void ExpectTpRefused(const plan::ExecutionPlan& plan, const Program& p, EditCheck check, const std::string& message) {
  plan::ProgramEdits edits;
  ExpectRefused([&] { AddTensorParallelEdits(plan, p, edits); }, check, message);
}

// CheckSplitDataflow of SplitX(0) on ulysses=2 refuses `p` with `check` and `message`.
void ExpectSplitRefused(const Program& p, EditCheck check, const std::string& message) {
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), p, SplitX(0)); }, check, message);
}

TEST(ShardFlow, TensorParallelRefusesAnOperatorItDoesNotFollow) {
  Builder b;
  b.Linear("y");
  b.Add("z", "nonzero.default", {In("self", Tensor("y"))}, {2, 8});
  b.Output("z");
  ExpectTpRefused(Colwise(), b.p, EditCheck::kTpUnsupportedOperator,
      "program: tensor parallelism cannot shard node `z` (nonzero.default) at the root: weft does not follow a "
      "sharding through this operator; it reads `y`, tp-sharded along dim 1 in blocks [8]; its sharding "
      "comes from the TP rule for `layer` (rule at plan.weft:3:3)");
}

TEST(ShardFlow, TensorParallelRefusesAShardReachingTheOutput) {
  Builder b;
  b.Linear("y");
  b.Add("z", "gelu.default", {In("self", Tensor("y"))}, {2, 8});
  b.Output("z");
  ExpectTpRefused(Colwise(), b.p, EditCheck::kTpShardReachesOutput,
      "program: `z` reaches the program's output tp-sharded along dim 1 (no rowwise layer reduces it); its "
      "sharding comes from the TP rule for `layer` (rule at plan.weft:3:3)");
}

TEST(ShardFlow, TensorParallelRefusesAParameterTheProgramLacks) {
  Builder b;
  b.Linear("y");
  b.Output("y");
  ExpectTpRefused(Colwise("other"), b.p, EditCheck::kProgramLacksValue,
      "program: the plan shards parameter `other.weight` (rule at plan.weft:3:3), which the program has no "
      "parameter for");
}

TEST(ShardFlow, TensorParallelHeadReshapeBecomesLocal) {
  // y (2, 8) colwise -> view (2, 2, 4): the 2 of the heads dim becomes 1 on each of 2 ranks, by
  // the dim it fills; the 4 (head_dim) stays.
  Builder b;
  b.Linear("y");
  b.Add("v", "view.default", {In("self", Tensor("y")), In("size", Ints({2, 2, 4}))}, {2, 2, 4});
  b.Add("s", "amax.default", {In("self", Tensor("v")), In("dim", Ints({1}))}, {2, 4});
  b.Output("s");
  plan::ProgramEdits edits;
  ExpectRefused([&] { AddTensorParallelEdits(Colwise(), b.p, edits); }, EditCheck::kTpReducesShardedDim,
                "program: tensor parallelism cannot shard node `s` (amax.default) at the root: it reduces over the "
                "sharded dim; it reads `v`, tp-sharded along dim 1 in blocks [2]; its sharding comes from the TP rule "
                "for `layer` (rule at plan.weft:3:3)");
  ASSERT_EQ(edits.edits.size(), 1u);
  EXPECT_EQ(edits.edits[0].kind, plan::ProgramEdit::Kind::kArgument);
  EXPECT_EQ(edits.edits[0].node, "v");
  EXPECT_EQ(edits.edits[0].argument, "size");
  EXPECT_EQ(edits.edits[0].element, 1);
  EXPECT_EQ(edits.edits[0].new_value, 1);
}

// A sum or mean over the tp-sharded features (diffusers' RMSNorm across heads: the mean of squares
// over the colwise projection's width) gives each rank its part's: all-reduced over tp right after
// the node, a mean divided by tp (new_value), and whole from there -- it may reach the output.
TEST(ShardFlow, TensorParallelSumsAndMeansOverTheShardedDimAreAllReduced) {
  for (const char* op : {"sum.dim_IntList", "mean.dim"}) {
    SCOPED_TRACE(op);
    Builder b;
    b.Linear("y");
    b.Add("sq", "pow.Tensor_Scalar", {In("self", Tensor("y")), In("exponent", Int(2))}, {2, 8});
    b.Add("m", op, {In("self", Tensor("sq")), In("dim", Ints({-1})), In("keepdim", Int(1))}, {2, 1});
    b.p.nodes.back().inputs[2].arg.kind = AK::kBool;
    b.p.nodes.back().inputs[2].arg.b = true;
    b.Output("m");
    plan::ProgramEdits edits;
    AddTensorParallelEdits(Colwise(), b.p, edits);
    ASSERT_EQ(edits.edits.size(), 1u);
    const plan::ProgramEdit& e = edits.edits[0];
    EXPECT_EQ(e.kind, plan::ProgramEdit::Kind::kAllReduce);
    EXPECT_EQ(e.group, plan::kTpAxis);
    EXPECT_EQ(e.node, "m");
    EXPECT_EQ(e.value, "m");
    EXPECT_TRUE(e.bias.empty());
    EXPECT_EQ(e.new_value, std::string(op) == "mean.dim" ? 2 : 1);
    EXPECT_EQ(e.origin.line, 3u);  // the colwise rule
  }
}

// A whole operand holding all of the tp-sharded dim (a per-head table, here `t` (8,) against y's
// 8 sharded features) is sliced for that node's read over tp: each rank takes the block its colwise
// weight gave the other operand. One of another size along that dim cannot be, and is refused.
TEST(ShardFlow, TensorParallelSlicesAWholeOperandHoldingTheShardedDim) {
  Builder b;
  b.Input("t", {8}, InputSpec::Kind::kUserInput, "");
  b.Linear("y");
  b.Add("m", "mul.Tensor", {In("self", Tensor("y")), In("other", Tensor("t"))}, {2, 8});
  b.Add("g", "gelu.default", {In("self", Tensor("m"))}, {2, 8});
  b.Output("g");
  plan::ProgramEdits edits;
  ExpectRefused([&] { AddTensorParallelEdits(Colwise(), b.p, edits); }, EditCheck::kTpShardReachesOutput,
                "program: `g` reaches the program's output tp-sharded along dim 1 (no rowwise layer reduces it); its "
                "sharding comes from the TP rule for `layer` (rule at plan.weft:3:3)");
  ASSERT_EQ(edits.edits.size(), 1u);
  const plan::ProgramEdit& slice = edits.edits[0];
  EXPECT_EQ(slice.kind, plan::ProgramEdit::Kind::kSplit);
  EXPECT_EQ(slice.group, "tp");
  EXPECT_EQ(slice.value, "t");
  EXPECT_EQ(slice.node, "m");
  EXPECT_EQ(slice.dim, 0);
  EXPECT_EQ(slice.rank, 1);
  EXPECT_EQ(slice.module, "layer");

  Builder other;
  other.Input("t", {4}, InputSpec::Kind::kUserInput, "");
  other.Linear("y");
  other.Add("m", "mul.Tensor", {In("self", Tensor("y")), In("other", Tensor("t"))}, {2, 8});
  other.Output("m");
  ExpectTpRefused(Colwise(), other.p, EditCheck::kTpColwiseEscapes,
      "program: tensor parallelism cannot shard node `m` (mul.Tensor) at the root: it combines the sharded tensor "
      "with `t`, which is whole along the sharded dim; it reads `y`, tp-sharded along dim 1 in blocks [8]; its "
      "sharding comes from the TP rule for `layer` (rule at plan.weft:3:3)");
}

TEST(ShardFlow, SplitRefusesAnOperatorItDoesNotFollow) {
  Builder b;
  b.Add("z", "nonzero.default", {In("self", Tensor("x"))}, {2, 8});
  b.Output("z");
  ExpectSplitRefused(b.p, EditCheck::kCpUnsupportedOperator,
      "program: a context-parallel split cannot pass node `z` (nonzero.default) at the root: weft does not "
      "follow a sharding through this operator; it reads `x`, split along dim 0 in blocks [2]; its split "
      "comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

TEST(ShardFlow, SplitNeverGathered) {
  Builder b;
  b.Linear("y");
  b.Output("y");
  ExpectSplitRefused(b.p, EditCheck::kSplitNeverGathered,
      "program: `y` reaches the program's output split along dim 0 (no gather of the plan joins it); its "
      "split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

TEST(ShardFlow, LocalAttentionOverSplitKeys) {
  // q, k, v = x viewed as (1, 1, -1, 8): split keys, no context-parallel attention edit.
  Builder b;
  b.Add("q", "view.default", {In("self", Tensor("x")), In("size", Ints({1, 1, -1, 8}))}, {1, 1, 2, 8});
  b.Add("o", "scaled_dot_product_attention.default",
        {In("query", Tensor("q")), In("key", Tensor("q")), In("value", Tensor("q"))}, {1, 1, 2, 8});
  b.Output("o");
  ExpectSplitRefused(b.p,
      EditCheck::kLocalAttentionOverSplitKeys,
      "program: a context-parallel split cannot pass node `o` (scaled_dot_product_attention.default) at the "
      "root: the plan leaves this attention local, so each query would see only this rank's keys; make "
      "it context_parallel; it reads `q`, split along dim 2 in blocks [2]; its split comes from the plan's "
      "rule for the root (rule at plan.weft:5:5)");
}

// A linear attention's key sums (Sana: V^T K summed over the tokens): `x` (2 tokens, 8 features)
// split along its tokens, s = t(x) @ x contracts them on both sides alike, so each rank holds a
// partial sum; the walk appends an all-reduce over the CP group right after the matmul, and the
// sum is whole (it may reach the output ungathered). o = x @ s keeps x's split rows.
TEST(ShardFlow, SumOverSplitTokensIsAllReducedOverTheCpGroup) {
  Builder b;
  b.Add("xt", "t.default", {In("self", Tensor("x"))}, {8, 2});
  b.Add("s", "matmul.default", {In("self", Tensor("xt")), In("other", Tensor("x"))}, {8, 8});
  b.Add("o", "matmul.default", {In("self", Tensor("x")), In("other", Tensor("s"))}, {2, 8});
  b.Output("s");
  b.Output("o");
  plan::ProgramEdits edits = SplitX(0);
  edits.edits.push_back(GatherOf("o", 0, 2, 7));
  const size_t before = edits.edits.size();
  AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), b.p, edits);
  ASSERT_EQ(edits.edits.size(), before + 1);
  const plan::ProgramEdit& sum = edits.edits.back();
  EXPECT_EQ(sum.kind, plan::ProgramEdit::Kind::kAllReduce);
  EXPECT_EQ(sum.group, plan::kCpGroup);
  EXPECT_EQ(sum.node, "s");
  EXPECT_EQ(sum.value, "s");
  EXPECT_EQ(sum.bias, "");
  EXPECT_EQ(sum.origin.line, 5);  // the split's rule
}

// The same contraction against an operand that is whole along it: each rank would multiply its
// part of the tokens with all of them.
TEST(ShardFlow, ContractingASplitDimAgainstAWholeOperandIsRefused) {
  Builder b;
  b.Input("u", {2, 8}, InputSpec::Kind::kUserInput, "");
  b.Add("xt", "t.default", {In("self", Tensor("x"))}, {8, 2});
  b.Add("s", "matmul.default", {In("self", Tensor("xt")), In("other", Tensor("u"))}, {8, 8});
  b.Output("s");
  ExpectSplitRefused(b.p, EditCheck::kCpReducesSplitDim,
      "program: a context-parallel split cannot pass node `s` (matmul.default) at the root: it contracts the "
      "sharded dim against an operand not sharded alike along it; it reads `xt`, split along dim 1 in blocks "
      "[2]; its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

// einsum follows the split by its letter: an unpatchify's permutation (SD3, CogView3: "nhwpqc->
// nchpwq") carries the split batch to wherever `n` lands, here dim 1 of "ab->ba"; a batched
// product carries a batch letter both operands share alike.
TEST(ShardFlow, EinsumCarriesTheSplitByItsLetter) {
  Builder b;
  b.Add("y", "einsum.default", {In("equation", String("ab->ba")), In("tensors", Tensors({"x"}))}, {8, 2});
  b.Add("z", "einsum.default", {In("equation", String("ij, ik -> ijk")), In("tensors", Tensors({"x", "x"}))}, {2, 8, 8});
  b.Output("y");
  b.Output("z");
  plan::ProgramEdits edits = SplitX(0);
  edits.edits.push_back(GatherOf("y", 1, 2, 7));
  edits.edits.push_back(GatherOf("z", 0, 3, 8));
  EXPECT_NO_THROW(CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits));
}

// A sum over the split letter, or a second operand read whole along it, would mix ranks' parts.
TEST(ShardFlow, EinsumSummingOrBroadcastingTheSplitLetterIsRefused) {
  Builder sum;
  sum.Add("y", "einsum.default", {In("equation", String("ab->b")), In("tensors", Tensors({"x"}))}, {8});
  sum.Output("y");
  ExpectSplitRefused(sum.p, EditCheck::kCpReducesSplitDim,
      "program: a context-parallel split cannot pass node `y` (einsum.default) at the root: it sums over the "
      "sharded letter `a` (`ab->b`); it reads `x`, split along dim 0 in blocks [2]; its split comes from the "
      "plan's rule for the root (rule at plan.weft:5:5)");
  Builder whole;
  whole.Input("u", {2, 8}, InputSpec::Kind::kUserInput, "");
  whole.Add("y", "einsum.default", {In("equation", String("ab,ab->ab")), In("tensors", Tensors({"x", "u"}))}, {2, 8});
  whole.Output("y");
  ExpectSplitRefused(whole.p, EditCheck::kCpSplitMixedWithWhole,
      "program: a context-parallel split cannot pass node `y` (einsum.default) at the root: it reads operand "
      "`u` whole along the sharded letter `a`; it reads `x`, split along dim 0 in blocks [2]; its split comes "
      "from the plan's rule for the root (rule at plan.weft:5:5)");
  Builder implicit;
  implicit.Add("y", "einsum.default", {In("equation", String("ab")), In("tensors", Tensors({"x"}))}, {2, 8});
  implicit.Output("y");
  ExpectSplitRefused(implicit.p, EditCheck::kCpUnsupportedOperator,
      "program: a context-parallel split cannot pass node `y` (einsum.default) at the root: an einsum without "
      "explicit output subscripts or with an ellipsis (`ab`); it reads `x`, split along dim 0 in blocks [2]; "
      "its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

// Padding keeps a split unless it pads the split dim itself (Sana pads its values with a row of
// ones along the features).
TEST(ShardFlow, PaddingTheSplitDimIsRefused) {
  Builder b;
  b.Add("z", "pad.default", {In("self", Tensor("x")), In("pad", Ints({0, 0, 0, 1}))}, {3, 8});
  b.Output("z");
  ExpectSplitRefused(b.p, EditCheck::kCpReducesSplitDim,
      "program: a context-parallel split cannot pass node `z` (pad.default) at the root: it pads the sharded "
      "dim; it reads `x`, split along dim 0 in blocks [2]; its split comes from the plan's rule for the root "
      "(rule at plan.weft:5:5)");
}

TEST(LocalSizes, RefusesAFullLengthNoShardCarries) {
  // x (2, s0) is split along s0 for the uses inside module `blk`; y = x.sum(1) there is a shard
  // without an s0 dim; at the root, view(y, [z]) with z = s0 runs on that shard, but the only
  // shard with an s0 dim (x's split) is visible inside `blk` alone.
  Builder b(/*bare=*/true);
  b.Input("x", {2, 8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
  b.p.module_stacks = {{ModuleFrame{"blk", "Block", "Block"}}};
  b.Add("y", "sum.dim_IntList", {In("self", Tensor("x")), In("dim", Int(1))}, {2});
  b.p.nodes.back().stack = 0;
  b.p.sym_int_values["z"] = Sym("s0", 8);
  Argument shape;
  shape.kind = AK::kSymInts;
  shape.sym_ints = {SymIntRef{true, "z", 0}};
  b.Add("v", "view.default", {In("self", Tensor("y")), In("size", shape)}, {8});
  b.Output("v");
  plan::ProgramEdits edits = SplitX(1);
  edits.edits[0].scope = "blk";
  edits.edits[0].module = "blk";
  ExpectRefused([&] { AddLocalSizeEdits(b.p, edits); }, EditCheck::kFullLengthWithoutShard,
                "program: node `v` (torch.ops.aten.view.default, module ``) runs on a shard of the split of `blk` "
                "(rule at plan.weft:5:5) but its argument `size` is the full length s0, and no shard before it has "
                "a dim of that length to take the local one from");
}

// The context-parallel attention edit of node `o` (module `attn`, rule at plan.weft:7:3).
plan::ProgramEdit AttentionEditOfO(plan::AttentionMode mode) {
  plan::ProgramEdit attention;
  attention.kind = plan::ProgramEdit::Kind::kAttention;
  attention.node = "o";
  attention.module = "attn";
  attention.attention = plan::Attention{};
  attention.attention->mode = mode;
  attention.origin = plan::Origin{"plan.weft", 7, 3, false};
  return attention;
}

// Self-attention over split x (2 tokens, 8 features) viewed as (1, 1, -1, 8), run context-parallel
// (the edit of `o`), with SDPA's `extra` argument: the kernels take no causal mask and no dropout,
// and `weft check` says so by name before anything runs.
TEST(ShardFlow, ContextParallelAttentionTakesNoCausalMaskNorDropout) {
  for (const auto& [extra, what] : {std::pair{In("is_causal", Bool(true)), std::string("is_causal")},
                                    std::pair{In("dropout_p", Float(0.1)), std::string("dropout")}}) {
    SCOPED_TRACE(what);
    Builder b;
    b.Add("q", "view.default", {In("self", Tensor("x")), In("size", Ints({1, 1, -1, 8}))}, {1, 1, 2, 8});
    b.Add("o", "scaled_dot_product_attention.default",
          {In("query", Tensor("q")), In("key", Tensor("q")), In("value", Tensor("q")), extra}, {1, 1, 2, 8});
    b.Output("o");
    plan::ProgramEdits edits = SplitX(0);
    edits.edits.push_back(AttentionEditOfO(plan::AttentionMode::kRing));
    edits.edits.push_back(GatherOf("o", 2, 4, 9));
    ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kRingAxis), b.p, edits); }, EditCheck::kCpUnsupportedOperator,
        "program: a context-parallel split cannot pass node `o` (scaled_dot_product_attention.default) at the root: "
        "the context-parallel attention kernels take no " + what + "; it reads `q`, split along dim 2 in blocks [2]; "
        "its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
  }
}

// Split queries over whole keys (cross-attention on whole text) run as a local attention on each
// rank's queries -- exact, unless the attention is causal: SDPA pairs query i with keys 0..i by
// position within the tensors it is given, so each rank's first query would see key 0 only.
TEST(ShardFlow, LocalAttentionOfSplitQueriesIsRefusedWhenCausal) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    Builder b;
    b.Input("c", {3, 8}, InputSpec::Kind::kUserInput, "");
    b.Add("q", "view.default", {In("self", Tensor("x")), In("size", Ints({1, 1, -1, 8}))}, {1, 1, 2, 8});
    b.Add("k", "view.default", {In("self", Tensor("c")), In("size", Ints({1, 1, -1, 8}))}, {1, 1, 3, 8});
    b.Add("o", "scaled_dot_product_attention.default",
          {In("query", Tensor("q")), In("key", Tensor("k")), In("value", Tensor("k")), In("is_causal", Bool(causal))},
          {1, 1, 2, 8});
    b.Output("o");
    plan::ProgramEdits edits = SplitX(0);
    edits.edits.push_back(GatherOf("o", 2, 4, 9));
    if (!causal) {
      CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits);
      continue;
    }
    ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits); }, EditCheck::kCpUnsupportedOperator,
        "program: a context-parallel split cannot pass node `o` (scaled_dot_product_attention.default) at the root: "
        "it is causal (is_causal: query i sees keys 0..i by position), and with its queries split each rank's first "
        "query would see key 0 only; leave its queries whole; it reads `q`, split along dim 2 in blocks [2]; its "
        "split comes from the plan's rule for the root (rule at plan.weft:5:5)");
  }
}

// Context-parallel attention (ulysses) over split keys x (1, 1, s0, 8) with a whole mask input
// `m` (1, s5) of `mask_length` at the export's example: the program and the edits.
struct KeyMaskCase {
  Builder b{/*bare=*/true};
  plan::ProgramEdits edits;
  explicit KeyMaskCase(int64_t mask_length) {
    b.Input("x", {1, 8, 8}, InputSpec::Kind::kUserInput, "");
    b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
    b.Input("m", {1, mask_length}, InputSpec::Kind::kUserInput, "");
    b.p.tensor_values["m"].sizes[1] = Sym("s5", mask_length);
    b.Add("q", "view.default", {In("self", Tensor("x")), In("size", Ints({1, 1, 8, 8}))}, {1, 1, 8, 8});
    b.p.tensor_values["q"].sizes[2] = Sym("s0", 8);
    b.Add("o", "scaled_dot_product_attention.default",
          {In("query", Tensor("q")), In("key", Tensor("q")), In("value", Tensor("q")), In("attn_mask", Tensor("m"))},
          {1, 1, 8, 8});
    b.Output("o");
    edits = SplitX(1, 3);
    edits.edits.push_back(AttentionEditOfO(plan::AttentionMode::kUlysses));
  }
};

TEST(LocalSizes, RefusesAMaskNotLaidOutWithItsKeys) {
  // A mask over keys of another length (6 at the example): neither one split stream nor a
  // concatenation of split streams.
  KeyMaskCase c(6);
  ExpectRefused([&] { AddLocalSizeEdits(c.b.p, c.edits); }, EditCheck::kMaskNotLaidOutWithKeys,
                "program: the mask `m` of context-parallel attention `o` (module `` (rule at plan.weft:7:3)) spans s5 "
                "keys, which is neither one split stream nor a concatenation of split streams in this module: split "
                "it in the plan, or leave the attention local");
}

// The same mask input as long as the keys at the example (8), its length a symbol of its own (the
// export ties no guard to it: MotifVideo's text mask beside its text): scaled_dot_product_attention
// needs the two equal, so the mask is split with the keys, as one stream of their length.
TEST(LocalSizes, AMaskInputAsLongAsItsKeysIsSplitWithThem) {
  KeyMaskCase c(8);
  AddLocalSizeEdits(c.b.p, c.edits);
  int splits_of_m = 0;
  for (const plan::ProgramEdit& e : c.edits.edits) {
    if (e.kind != plan::ProgramEdit::Kind::kSplit || e.value != "m") continue;
    ++splits_of_m;
    EXPECT_EQ(e.dim, 1);
    EXPECT_TRUE(e.parts.empty());  // one stream: the keys' own
  }
  EXPECT_EQ(splits_of_m, 1);
}

// Context-parallel attention over split x (1, 1, s0, 8) with mask `m` of `mask_sizes` (whole,
// a graph input): the program and the edits (split of x, the attention at `o`).
struct PairMaskCase {
  Builder b{/*bare=*/true};
  plan::ProgramEdits edits;
  explicit PairMaskCase(std::vector<SymInt> mask_sizes) {
    b.Input("x", {1, 8, 8}, InputSpec::Kind::kUserInput, "");
    b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
    std::vector<int64_t> plain;
    for (const SymInt& s : mask_sizes) plain.push_back(s.value);
    b.Input("m", plain, InputSpec::Kind::kUserInput, "");
    b.p.tensor_values["m"].dtype = ScalarType::kBool;
    b.p.tensor_values["m"].sizes = mask_sizes;
    b.Add("q", "view.default", {In("self", Tensor("x")), In("size", Ints({1, 1, 8, 8}))}, {1, 1, 8, 8});
    b.p.tensor_values["q"].sizes[2] = Sym("s0", 8);
    const std::string key = "q";
    b.Add("o", "scaled_dot_product_attention.default",
          {In("query", Tensor("q")), In("key", Tensor(key)), In("value", Tensor(key)), In("attn_mask", Tensor("m"))},
          {1, 1, 8, 8});
    b.p.tensor_values["o"].sizes[2] = Sym("s0", 8);
    b.Output("o");
    edits = SplitX(1, 3);
    edits.edits.push_back(AttentionEditOfO(plan::AttentionMode::kRing));
  }
};

// A whole mask over (query, key) pairs of one split stream (a sliding window, packed segments)
// stays whole: no split of it, and the attention applies each rank's rows and columns.
TEST(LocalSizes, AWholeMaskOverQueryKeyPairsIsAppliedByTheAttention) {
  PairMaskCase c({SymInt{false, 1, ""}, SymInt{false, 1, ""}, Sym("s0", 8), Sym("s0", 8)});
  AddLocalSizeEdits(c.b.p, c.edits);
  int splits_of_m = 0;
  const plan::ProgramEdit* attention = nullptr;
  for (const plan::ProgramEdit& e : c.edits.edits) {
    if (e.kind == plan::ProgramEdit::Kind::kSplit && e.value == "m") ++splits_of_m;
    if (e.kind == plan::ProgramEdit::Kind::kAttention) attention = &e;
  }
  EXPECT_EQ(splits_of_m, 0);
  ASSERT_NE(attention, nullptr);
  EXPECT_TRUE(attention->attention->pair_mask);
}

// Expanded along the heads (HunyuanVideo's refiner repeats its mask per head): accepted here,
// the runtime checks by value that the heads agree.
TEST(LocalSizes, AMaskOverQueryKeyPairsPerHeadIsAppliedByTheAttention) {
  PairMaskCase c({SymInt{false, 1, ""}, SymInt{false, 2, ""}, Sym("s0", 8), Sym("s0", 8)});
  AddLocalSizeEdits(c.b.p, c.edits);
  for (const plan::ProgramEdit& e : c.edits.edits) {
    EXPECT_FALSE(e.kind == plan::ProgramEdit::Kind::kSplit && e.value == "m");
    if (e.kind == plan::ProgramEdit::Kind::kAttention) {
      EXPECT_TRUE(e.attention->pair_mask);
    }
  }
}

// A whole tensor combined with a shard along the shard's length (a RoPE table): sliced for that
// node's read only -- one kSplit edit naming the node -- and the dataflow then passes.
TEST(LocalSizes, SlicesAWholeOperandWhereItMeetsAShard) {
  Builder b(/*bare=*/true);
  b.Input("x", {2, 8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
  b.Input("t", {8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["t"].sizes[0] = Sym("s0", 8);
  b.Add("y", "mul.Tensor", {In("self", Tensor("x")), In("other", Tensor("t"))}, {2, 8});
  b.p.tensor_values["y"].sizes[1] = Sym("s0", 8);
  b.Add("z", "add.Tensor", {In("self", Tensor("t")), In("other", Tensor("t"))}, {8});  // t whole here
  b.Output("y");
  b.Output("z");
  plan::ProgramEdits edits = SplitX(1);
  edits.edits.push_back(GatherOf("y", 1, 2, 6));
  AddLocalSizeEdits(b.p, edits);
  ASSERT_EQ(edits.edits.size(), 3u);
  const plan::ProgramEdit& slice = edits.edits[2];
  EXPECT_EQ(slice.kind, plan::ProgramEdit::Kind::kSplit);
  EXPECT_EQ(slice.value, "t");
  EXPECT_EQ(slice.node, "y");
  EXPECT_EQ(slice.dim, 0);
  EXPECT_EQ(slice.origin.line, 5u);  // the split whose shard it meets
  CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits);  // passes: `z` still reads t whole
}

// The shard's length on two dims of the whole operand (a (s0, s0) table): which one lines up
// cannot be read off the sizes, so it is not sliced and the dataflow refuses it as before.
TEST(LocalSizes, LeavesAnOperandWithTheLengthOnTwoDimsWhole) {
  Builder b(/*bare=*/true);
  b.Input("x", {8, 8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
  b.Input("t", {8, 8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["t"].sizes = {Sym("s0", 8), Sym("s0", 8)};
  b.Add("y", "mul.Tensor", {In("self", Tensor("x")), In("other", Tensor("t"))}, {8, 8});
  b.Output("y");
  plan::ProgramEdits edits = SplitX(1);
  AddLocalSizeEdits(b.p, edits);
  EXPECT_EQ(edits.edits.size(), 1u);
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits); }, EditCheck::kCpSplitMixedWithWhole,
                "program: a context-parallel split cannot pass node `y` (mul.Tensor) at the root: it combines the "
                "sharded tensor with `t`, which is whole along the sharded dim; it reads `x`, split along dim 1 in "
                "blocks [8]; its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

// A size computed from the full length read off a whole tensor (`2 * sym_size(w, 0)`), given to
// a node on shards of that length: refused, naming the whole tensor (HunyuanVideo's
// repeat_interleave of the branches' mask when pooled_projections is left whole).
TEST(LocalSizes, RefusesASizeDerivedFromAWholeTensorsFullLength) {
  Builder b(/*bare=*/true);
  b.Input("x", {8, 4}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[0] = Sym("s0", 8);
  b.Input("w", {8, 2}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["w"].sizes[0] = Sym("s0", 8);
  Argument size_of_w;
  size_of_w.kind = AK::kSymInt;
  size_of_w.name = "n";
  b.Add("n_node", "sym_size.int", {In("self", Tensor("w")), In("dim", Int(0))}, {});
  b.p.nodes.back().target = "torch.ops.aten.sym_size.int";
  b.p.nodes.back().outputs = {size_of_w};
  b.p.sym_int_values["n"] = Sym("s0", 8);
  Node twice;
  twice.name = "m_node";
  twice.target = "_operator.mul";
  Argument n_ref;
  n_ref.kind = AK::kSymInt;
  n_ref.sym_ints = {SymIntRef{true, "n", 0}};
  twice.inputs = {In("a", n_ref), In("b", Int(2))};
  Argument m_out;
  m_out.kind = AK::kSymInt;
  m_out.name = "m";
  twice.outputs = {m_out};
  b.p.nodes.push_back(twice);
  b.p.sym_int_values["m"] = SymInt{true, 16, "Mul(Integer(2), Symbol('s0', positive=True, integer=True))"};
  Argument m_ref;
  m_ref.kind = AK::kSymInt;
  m_ref.sym_ints = {SymIntRef{true, "m", 0}};
  b.Add("r", "repeat_interleave.self_int",
        {In("self", Tensor("x")), In("repeats", Int(2)), In("dim", Int(0)), In("output_size", m_ref)}, {16, 4});
  b.Output("r");
  plan::ProgramEdits edits = SplitX(0);
  ExpectRefused([&] { AddLocalSizeEdits(b.p, edits); }, EditCheck::kFullLengthWithoutShard,
                "program: node `r` (torch.ops.aten.repeat_interleave.self_int, module ``) runs on a shard of the "
                "split of the root (rule at plan.weft:5:5) but its argument `output_size` is computed from the full "
                "length s0 of `w`, which is whole there: split `w` too");
}

// A whole table indexed at sharded positions (Kandinsky's RoPE at a split's arange): the result
// is sharded as the positions are, along the dim the index lands on.
TEST(ShardFlow, IndexAtShardedPositionsIsSharded) {
  Builder b(/*bare=*/true);
  b.Input("x", {8}, InputSpec::Kind::kUserInput, "");
  b.Input("table", {16, 4}, InputSpec::Kind::kUserInput, "");
  Argument indices;
  indices.kind = AK::kOptionalTensors;
  indices.names = {"x"};
  b.Add("rows", "index.Tensor", {In("self", Tensor("table")), In("indices", indices)}, {8, 4});
  b.Add("s", "mean.dim", {In("self", Tensor("rows")), In("dim", Ints({0}))}, {4});
  b.Output("s");
  ExpectSplitRefused(b.p, EditCheck::kCpReducesSplitDim,
      "program: a context-parallel split cannot pass node `s` (mean.dim) at the root: it reduces over "
      "the sharded dim; it reads `rows`, split along dim 0 in blocks [8]; its split comes from the plan's rule "
      "for the root (rule at plan.weft:5:5)");
}

// An embedding table looked up at sharded indices (DiT's class labels split with the guidance
// branches, token ids split with the sequence) is sharded as the indices are; the table's width
// comes last, so reducing over it is fine and reducing over the indices' dim is not.
TEST(ShardFlow, EmbeddingAtShardedIndicesIsSharded) {
  Builder b(/*bare=*/true);
  b.Input("x", {8}, InputSpec::Kind::kUserInput, "");
  b.Input("table", {16, 4}, InputSpec::Kind::kUserInput, "");
  b.Add("rows", "embedding.default", {In("weight", Tensor("table")), In("indices", Tensor("x"))}, {8, 4});
  b.Add("w", "mean.dim", {In("self", Tensor("rows")), In("dim", Ints({1}))}, {8});
  b.Add("s", "mean.dim", {In("self", Tensor("rows")), In("dim", Ints({0}))}, {4});
  b.Output("w");
  b.Output("s");
  ExpectSplitRefused(b.p, EditCheck::kCpReducesSplitDim,
      "program: a context-parallel split cannot pass node `s` (mean.dim) at the root: it reduces over "
      "the sharded dim; it reads `rows`, split along dim 0 in blocks [8]; its split comes from the plan's rule "
      "for the root (rule at plan.weft:5:5)");
}

// Per-sample operators pass a split of the batch (guidance branches) and refuse one of the dims
// they mix: group norm (the legacy Transformer2DModel's input norm) over channels and positions,
// a transposed convolution (AceStep's output) over positions, topk (NucleusMoE's routing) along
// the dim it ranks -- topk elsewhere keeps the split in both its outputs.
TEST(ShardFlow, GroupNormTransposedConvAndTopkPassTheBatchOnly) {
  Builder b(/*bare=*/true);
  b.Input("x", {2, 4, 6}, InputSpec::Kind::kUserInput, "");
  b.Input("w", {4, 4, 3}, InputSpec::Kind::kUserInput, "");
  b.Add("g", "group_norm.default", {In("input", Tensor("x")), In("num_groups", Int(2))}, {2, 4, 6});
  b.Add("c", "conv_transpose1d.default", {In("input", Tensor("g")), In("weight", Tensor("w"))}, {2, 4, 8});
  Node topk;
  topk.name = "topk";
  topk.target = "torch.ops.aten.topk.default";
  topk.inputs = {In("self", Tensor("c")), In("k", Int(2)), In("dim", Int(-1))};
  Argument values, indices;
  values.kind = indices.kind = AK::kTensor;
  values.name = "top_values";
  indices.name = "top_indices";
  topk.outputs = {values, indices};
  b.p.nodes.push_back(topk);
  b.p.tensor_values["top_values"] = b.p.tensor_values["c"];
  b.p.tensor_values["top_indices"] = b.p.tensor_values["c"];
  b.Output("top_values");
  b.Output("top_indices");
  plan::ProgramEdits batch = SplitX(0, 3);
  batch.edits.push_back(GatherOf("top_values", 0, 3, 7));
  batch.edits.push_back(GatherOf("top_indices", 0, 3, 8));
  EXPECT_NO_THROW(CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, batch));

  plan::ProgramEdits positions = SplitX(2, 3);
  positions.edits.push_back(GatherOf("top_values", 2, 3, 7));
  try {
    CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, positions);
    FAIL() << "a group norm over split positions accepted";
  } catch (const PlanEditError& e) {
    EXPECT_NE(std::string(e.what()).find("node `g` (group_norm.default) at the root: a group norm takes its statistics "
                                         "over the sharded dim"),
              std::string::npos)
        << e.what();
  }
}

// gather(self, dim, index) pairs self and index element for element along every other dim: a
// split passes when both carry it alike (NucleusMoE's chosen experts per token); an index left
// whole, or a gather along the split dim, is refused.
TEST(ShardFlow, GatherPassesASplitThatSelfAndIndexCarryAlike) {
  Builder b(/*bare=*/true);
  b.Input("x", {4, 6}, InputSpec::Kind::kUserInput, "");
  b.Input("i", {4, 2}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["i"].dtype = ScalarType::kLong;
  b.Add("g", "gather.default", {In("self", Tensor("x")), In("dim", Int(1)), In("index", Tensor("i"))}, {4, 2});
  b.Output("g");
  plan::ProgramEdits both = SplitX(0);
  plan::ProgramEdit index = both.edits[0];
  index.value = "i";
  both.edits.push_back(index);
  both.edits.push_back(GatherOf("g", 0, 2, 7));
  EXPECT_NO_THROW(CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, both));
  plan::ProgramEdits self_only = SplitX(0);
  self_only.edits.push_back(GatherOf("g", 0, 2, 7));
  try {
    CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, self_only);
    FAIL() << "a gather at whole indices accepted";
  } catch (const PlanEditError& e) {
    EXPECT_NE(std::string(e.what()).find("node `g` (gather.default) at the root: it gathers from a tensor and at indices "
                                         "not sharded alike"),
              std::string::npos)
        << e.what();
  }
}

// A joint sequence of constant-length streams, each split by its own rule (CogVideoX: 226 text
// tokens the export fixed, then the video): c = cat(x (8 tokens), y (12)) along dim 1.
Builder JointSequence() {
  Builder b(/*bare=*/true);
  b.Input("x", {2, 8, 4}, InputSpec::Kind::kUserInput, "");
  b.Input("y", {2, 12, 4}, InputSpec::Kind::kUserInput, "");
  Argument both;
  both.kind = AK::kTensors;
  both.names = {"x", "y"};
  b.Add("c", "cat.default", {In("tensors", both), In("dim", Int(1))}, {2, 20, 4});
  return b;
}

// Both streams split, and gathers of `outs` (plan.weft:7:3).
plan::ProgramEdits SplitXAndY(const std::vector<std::string>& outs) {
  plan::ProgramEdits edits = SplitX(1, 3);
  plan::ProgramEdit y = edits.edits[0];
  y.value = "y";
  y.origin.line = 6;
  edits.edits.push_back(y);
  for (const std::string& o : outs) {
    edits.edits.push_back(GatherOf(o, 1, 3, 7));
  }
  return edits;
}

// The argument edits AddSplitDataflowEdits appended after the plan's `before` edits.
std::vector<plan::ProgramEdit> Added(const plan::ProgramEdits& edits, size_t before) {
  return {edits.edits.begin() + static_cast<std::ptrdiff_t>(before), edits.edits.end()};
}

// split_with_sizes(c, [8, 12]) and slices at the text/video bound: each constant is the full
// length of the blocks it spans, made local off the shard that holds exactly those blocks (`x`
// for the 8 text tokens, `y` for the 12 after them, negated where the bound counts from the end).
TEST(ShardFlow, ConstantsAtBlockBoundsBecomeLocalLengths) {
  Builder b = JointSequence();
  Node split;
  split.name = "parts";
  split.target = "torch.ops.aten.split_with_sizes.default";
  split.inputs = {In("self", Tensor("c")), In("split_sizes", Ints({8, 12})), In("dim", Int(1))};
  Argument outs;
  outs.kind = AK::kTensors;
  outs.names = {"text", "video"};
  split.outputs = {outs};
  b.p.nodes.push_back(split);
  b.Meta("text", {2, 8, 4});
  b.Meta("video", {2, 12, 4});
  b.Add("tail", "slice.Tensor", {In("self", Tensor("c")), In("dim", Int(1)), In("start", Int(8)),
                                 In("end", Int(9223372036854775807))}, {2, 12, 4});
  b.Add("head", "slice.Tensor", {In("self", Tensor("c")), In("dim", Int(1)), In("start", Int(0)),
                                 In("end", Int(-12))}, {2, 8, 4});
  for (const char* o : {"text", "video", "tail", "head"}) b.Output(o);
  plan::ProgramEdits edits = SplitXAndY({"text", "video", "tail", "head"});
  const size_t before = edits.edits.size();
  AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), b.p, edits);
  const std::vector<plan::ProgramEdit> added = Added(edits, before);
  ASSERT_EQ(added.size(), 4u);
  struct Want {
    const char* node;
    const char* argument;
    int64_t element;
    const char* value;
    int64_t sign;
    uint32_t line;
  };
  const Want want[] = {{"parts", "split_sizes", 0, "x", 1, 5},
                       {"parts", "split_sizes", 1, "y", 1, 5},
                       {"tail", "start", -1, "x", 1, 5},
                       {"head", "end", -1, "y", -1, 5}};
  for (size_t i = 0; i < added.size(); ++i) {
    SCOPED_TRACE(want[i].node);
    EXPECT_EQ(added[i].kind, plan::ProgramEdit::Kind::kArgument);
    EXPECT_EQ(added[i].group, plan::kCpGroup);
    EXPECT_EQ(added[i].node, want[i].node);
    EXPECT_EQ(added[i].argument, want[i].argument);
    EXPECT_EQ(added[i].element, want[i].element);
    EXPECT_EQ(added[i].value, want[i].value);
    EXPECT_EQ(added[i].dim, 1);
    EXPECT_EQ(added[i].new_value, want[i].sign);
    EXPECT_EQ(added[i].origin.line, want[i].line);  // the rule of the split the node reads
  }
  // The check alone agrees, and appends nothing.
  CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits);
}

// A constant the full length of blocks no shard holds on its own (the 8 + 12 tokens before a
// third stream of 4): no local length to read it off, so it is refused at the rule of the split
// it meets, naming the blocks.
TEST(ShardFlow, RefusesAConstantNoShardHoldsTheBlocksOf) {
  Builder b(/*bare=*/true);
  Argument streams;
  streams.kind = AK::kTensors;
  for (auto [name, length] : {std::pair{"x", 8}, {"y", 12}, {"z", 4}}) {
    b.Input(name, {2, length, 4}, InputSpec::Kind::kUserInput, "");
    streams.names.push_back(name);
  }
  b.Add("c", "cat.default", {In("tensors", streams), In("dim", Int(1))}, {2, 24, 4});
  Node split;
  split.name = "parts";
  split.target = "torch.ops.aten.split_with_sizes.default";
  split.inputs = {In("self", Tensor("c")), In("split_sizes", Ints({20, 4})), In("dim", Int(1))};
  Argument outs;
  outs.kind = AK::kTensors;
  outs.names = {"front", "back"};
  split.outputs = {outs};
  b.p.nodes.push_back(split);
  b.Meta("front", {2, 20, 4});
  b.Meta("back", {2, 4, 4});
  b.Output("front");
  b.Output("back");
  plan::ProgramEdits edits = SplitXAndY({"front", "back"});
  plan::ProgramEdit z = edits.edits[0];
  z.value = "z";
  edits.edits.insert(edits.edits.begin() + 2, z);
  ExpectRefused([&] { AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), b.p, edits); }, EditCheck::kCpUnsupportedOperator,
                "program: a context-parallel split cannot pass node `parts` (split_with_sizes.default) at the root: it "
                "splits the split dim at the constant size 20, the full length of the split blocks [8, 12] (each rank "
                "holds only its part), and no shard before it holds exactly those blocks to take the local length "
                "from; export that length dynamic, or split after this node; it reads `c`, split along dim 1 in "
                "blocks [8, 12, 4]; its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

// Weights sliced over ranks: a parameter of block `blocks.0` that a node of `blocks.1` reads too
// (tied) would be freed under it; refused naming the parameter, both modules and the node.
TEST(WeightSlices, TiedParameterIsRefusedNamingBothModules) {
  Builder b;
  b.Linear("y");  // reads `w` (blocks.0.layer.weight)
  b.Add("z", "linear.default", {In("input", Tensor("y")), In("weight", Tensor("w"))}, {2, 8});
  b.p.module_stacks = {{{"blocks.0", "Block", ""}}, {{"blocks.1", "Block", ""}}};
  b.p.nodes[0].stack = 0;
  b.p.nodes[1].stack = 1;
  b.p.input_specs[1].target = "blocks.0.layer.weight";
  plan::ExecutionPlan plan = Mesh(plan::kUlyssesAxis);
  plan.mesh.weight_axes = {std::string(plan::kCpGroup)};
  plan::WeightBlock block;
  block.module = "blocks.0";
  block.params = {"blocks.0.layer.weight"};
  plan.weights = plan::WeightPlacement{2, {block}};
  try {
    CheckWeightsUntied(plan, b.p);
    FAIL() << "tied weights accepted";
  } catch (const ProgramError& e) {
    EXPECT_NE(std::string(e.what()).find("--shard-weights slices `w` with block `blocks.0`, but node `z` of module "
                                         "`blocks.1` reads it too (tied weights)"),
              std::string::npos)
        << e.what();
  }
  b.p.nodes[1].stack = 0;  // both reads inside blocks.0: fine
  EXPECT_NO_THROW(CheckWeightsUntied(plan, b.p));
}

// Attention `o` over keys cat(q, r) of two split streams x (s0 tokens) and y (s1), joined along
// dim 2, with a whole mask `m` over (query, key) pairs; its queries are x's alone or, `joint`,
// the keys themselves (self-attention over the joint sequence). `sizes`: sym_size nodes `nx`, `ny`
// reading each stream's length before the cat.
Builder JointSequenceAttention(bool joint, bool sizes) {
  const SymInt both_lengths{true, 12, "Add(Symbol('s0', positive=True, integer=True), Symbol('s1', positive=True, integer=True))"};
  Builder b(/*bare=*/true);
  b.Input("x", {1, 8, 8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
  b.Input("y", {1, 4, 8}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["y"].sizes[1] = Sym("s1", 4);
  b.Input("m", {1, 1, joint ? 12 : 8, 12}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["m"].dtype = ScalarType::kBool;
  b.p.tensor_values["m"].sizes[2] = joint ? both_lengths : Sym("s0", 8);
  b.p.tensor_values["m"].sizes[3] = both_lengths;
  if (sizes) {
    for (const auto& [size, of, sym, example] : {std::tuple{"nx", "x", "s0", 8}, std::tuple{"ny", "y", "s1", 4}}) {
      Argument out;
      out.kind = AK::kSymInt;
      out.sym_ints = {SymIntRef{true, size, 0}};
      b.Add(std::string(size) + "_node", "sym_size.int", {In("self", Tensor(of)), In("dim", Int(1))}, {});
      b.p.nodes.back().target = "torch.ops.aten.sym_size.int";
      b.p.nodes.back().outputs = {out};
      b.p.sym_int_values[size] = Sym(sym, example);
    }
  }
  b.Add("q", "unsqueeze.default", {In("self", Tensor("x")), In("dim", Int(1))}, {1, 1, 8, 8});
  b.p.tensor_values["q"].sizes[2] = Sym("s0", 8);
  b.Add("r", "unsqueeze.default", {In("self", Tensor("y")), In("dim", Int(1))}, {1, 1, 4, 8});
  b.p.tensor_values["r"].sizes[2] = Sym("s1", 4);
  Argument both;
  both.kind = AK::kTensors;
  both.names = {"q", "r"};
  b.Add("k", "cat.default", {In("tensors", both), In("dim", Int(2))}, {1, 1, 12, 8});
  b.p.tensor_values["k"].sizes[2] = both_lengths;
  const std::string query = joint ? "k" : "q";
  b.Add("o", "scaled_dot_product_attention.default",
        {In("query", Tensor(query)), In("key", Tensor("k")), In("value", Tensor("k")), In("attn_mask", Tensor("m"))},
        {1, 1, joint ? 12 : 8, 8});
  b.p.tensor_values["o"].sizes[2] = joint ? both_lengths : Sym("s0", 8);
  b.Output("o");
  return b;
}

// A whole table over the joint sequence cat(x, y) of two split streams (HiDream's RoPE table over
// image and text positions, built whole from one tensor of ids), multiplied into the joint
// tokens: sliced for that read as the cat lays out its streams -- this rank's part of x's s0 rows,
// then of y's s1 -- its parts the values that hold each stream's full length, and the dataflow
// proves the two operands line up ([8, 4] blocks each). `t`: the table, (1, 1, s0 + s1, 8); with
// `local_rows`, it is zeros of nx + ny rows, sizes read off the split x and y: this rank's lengths
// at run time, so neither whole nor a shard -- refused, naming the split to move.
Builder JointTable(bool local_rows) {
  Builder b = JointSequenceAttention(/*joint=*/true, /*sizes=*/true);
  b.p.nodes.pop_back();  // the attention: the table meets the joint keys `k` instead
  b.p.outputs.clear();
  const SymInt both_lengths = b.p.tensor_values["k"].sizes[2];
  if (local_rows) {
    Argument total;
    total.kind = AK::kSymInt;
    total.sym_ints = {SymIntRef{true, "total", 0}};
    Argument nx, ny;
    nx.kind = ny.kind = AK::kSymInt;
    nx.sym_ints = {SymIntRef{true, "nx", 0}};
    ny.sym_ints = {SymIntRef{true, "ny", 0}};
    b.Add("total_node", "add", {In("a", nx), In("b", ny)}, {});
    b.p.nodes.back().target = "_operator.add";
    b.p.nodes.back().outputs = {total};
    b.p.sym_int_values["total"] = both_lengths;
    Argument size;
    size.kind = AK::kSymInts;
    size.sym_ints = {SymIntRef{false, "", 1}, SymIntRef{false, "", 1}, SymIntRef{true, "total", 0}, SymIntRef{false, "", 8}};
    b.Add("t", "zeros.default", {In("size", size)}, {1, 1, 12, 8});
  } else {
    b.Input("t", {1, 1, 12, 8}, InputSpec::Kind::kUserInput, "");
  }
  b.p.tensor_values["t"].sizes[2] = both_lengths;
  b.Add("p", "mul.Tensor", {In("self", Tensor("k")), In("other", Tensor("t"))}, {1, 1, 12, 8});
  b.p.tensor_values["p"].sizes[2] = both_lengths;
  b.Output("p");
  return b;
}

TEST(LocalSizes, AWholeTableOverAJointSequenceIsSlicedByItsStreams) {
  Builder b = JointTable(/*local_rows=*/false);
  plan::ProgramEdits edits = SplitXAndY({});
  edits.edits.push_back(GatherOf("p", 2, 4, 9));
  AddLocalSizeEdits(b.p, edits);
  const plan::ProgramEdit* slice = nullptr;
  for (const plan::ProgramEdit& e : edits.edits) {
    if (e.kind == plan::ProgramEdit::Kind::kSplit && e.value == "t") slice = &e;
  }
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->node, "p");
  EXPECT_EQ(slice->dim, 2);
  EXPECT_EQ(slice->parts, (std::vector<std::string>{"nx", "ny"}));
  // The product passes (the table meets the tokens laid out alike); its gather does not: an
  // all-gather of a value laid out as two split streams joins the ranks' parts rank by rank (x 0,
  // y 0, x 1, y 1), not stream by stream -- rows out of order, exit 0 (ErnieImage's joint output).
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits); }, EditCheck::kGatherOnOtherDim,
                "program: the plan gathers `p`, output of `` (rule at plan.weft:9:3), which is laid out as the split "
                "streams [8, 4] along dim 2; its split comes from the plan's rule for the root (rule at plan.weft:5:5): "
                "an all-gather joins the ranks' parts rank by rank, not stream by stream; gather where one stream is "
                "left alone (after the forward parts the streams, as a slice at their bound does)");
}

TEST(LocalSizes, RefusesATableSizedByLengthsReadOffTheSplit) {
  Builder b = JointTable(/*local_rows=*/true);
  plan::ProgramEdits edits = SplitXAndY({});
  edits.edits.push_back(GatherOf("p", 2, 4, 9));
  ExpectRefused([&] { AddLocalSizeEdits(b.p, edits); }, EditCheck::kFullLengthWithoutShard,
                "program: node `p` (torch.ops.aten.mul.Tensor, module ``) combines a shard with `t`, whose length along dim 2 is built "
                "from sizes read off the split `y` (rule at plan.weft:6:5): it holds neither every position nor this "
                "rank's; split `y` later, after those sizes are read off it");
}

// Keys of two split streams joined (x: s0, y: s1) under a mask whose queries are x's alone: the
// rows and columns are laid out unalike, so no one reordering serves both.
TEST(LocalSizes, RefusesAMaskOverQueryKeyPairsOfAJointSequence) {
  Builder b = JointSequenceAttention(/*joint=*/false, /*sizes=*/false);
  plan::ProgramEdits edits = SplitXAndY({});
  edits.edits.push_back(AttentionEditOfO(plan::AttentionMode::kRing));
  ExpectRefused([&] { AddLocalSizeEdits(b.p, edits); }, EditCheck::kMaskNotLaidOutWithKeys,
                "program: the mask `m` of context-parallel attention `o` (module `` (rule at plan.weft:7:3)) varies "
                "along the queries as well as the keys, and its s0 queries or s0 + s1 keys are neither one split "
                "stream each nor one concatenation of split streams as both; leave this attention local");
}

// Self-attention over cat(x, y) of two split streams (Chroma's text and image) with a whole mask
// over its (query, key) pairs: the mask stays whole, and the attention edit names the symbolic
// ints of each stream's full length in the cat's order, which the edited program reads off x and
// y before their splits (the export's sym_size reads the split x by then: a twin reads the whole).
TEST(LocalSizes, AMaskOverPairsOfAJointSequenceIsReorderedByItsStreams) {
  Builder b = JointSequenceAttention(/*joint=*/true, /*sizes=*/true);
  plan::ProgramEdits edits = SplitXAndY({});
  edits.edits.push_back(AttentionEditOfO(plan::AttentionMode::kRing));
  AddLocalSizeEdits(b.p, edits);
  const plan::ProgramEdit* attention = nullptr;
  for (const plan::ProgramEdit& e : edits.edits) {
    EXPECT_FALSE(e.kind == plan::ProgramEdit::Kind::kSplit && e.value == "m");
    if (e.kind == plan::ProgramEdit::Kind::kAttention) attention = &e;
  }
  ASSERT_NE(attention, nullptr);
  EXPECT_TRUE(attention->attention->pair_mask);
  EXPECT_EQ(attention->parts, (std::vector<std::string>{"nx", "ny"}));

  // Applied: the attention reads the lengths off the whole x and y.
  ApplyEdits(b.p, edits);
  std::map<std::string, std::string> reads;  // sym_size output -> the tensor it reads
  std::vector<std::string> parts;
  for (const Node& n : b.p.nodes) {
    if (n.target == "torch.ops.aten.sym_size.int") reads[n.outputs[0].sym_ints[0].name] = n.inputs[0].arg.name;
    if (n.target != kAttentionTarget) continue;
    for (const NamedArgument& in : n.inputs) {
      if (in.name != "parts") continue;
      for (const SymIntRef& r : in.arg.sym_ints) parts.push_back(r.name);
    }
  }
  ASSERT_EQ(parts, (std::vector<std::string>{"nx@whole", "ny@whole"}));
  EXPECT_EQ(reads["nx@whole"], "x");
  EXPECT_EQ(reads["ny@whole"], "y");
  EXPECT_NE(reads["nx"], "x");  // the export's own reads the split
}

}  // namespace
}  // namespace weft::program

namespace weft::program {
namespace {

// Mochi's joint sequence: split tokens x (1, s0, 8) viewed as (1, 1, s0, 8), joined along the tokens
// to `t` (1, 1, `t_length`, 8), which every rank holds whole, then attended context-parallel.
struct WholeStreamCase {
  Builder b{/*bare=*/true};
  plan::ProgramEdits edits;
  explicit WholeStreamCase(SymInt t_length) {
    b.Input("x", {1, 8, 8}, InputSpec::Kind::kUserInput, "");
    b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
    b.Input("t", {1, 1, t_length.value, 8}, InputSpec::Kind::kUserInput, "");
    b.p.tensor_values["t"].sizes[2] = t_length;
    b.Add("q", "view.default", {In("self", Tensor("x")), In("size", Ints({1, 1, -1, 8}))}, {1, 1, 8, 8});
    b.p.tensor_values["q"].sizes[2] = Sym("s0", 8);
    b.Add("j", "cat.default", {In("tensors", Tensors({"q", "t"})), In("dim", Int(2))}, {1, 1, 8 + t_length.value, 8});
    edits = SplitX(1, 3);
    edits.edits.push_back(AttentionEditOfO(plan::AttentionMode::kRing));
  }
};

// The length a nonzero gives (an unbacked symbol), here with a hint of 3.
SymInt DataDependent() { return SymInt{true, 3, "Symbol('u0', integer=True)"}; }

// The whole stream rides through the attention and a split at the streams' bounds: the attention
// edit records where its rows lie and whose dim holds its length, the video part stays split (its
// gather passes) and the text part is whole (it reaches the output ungathered).
TEST(ShardFlow, AWholeStreamOfDataDependentLengthIsRecordedOnTheAttention) {
  WholeStreamCase c(DataDependent());
  c.b.Add("o", "scaled_dot_product_attention.default",
          {In("query", Tensor("j")), In("key", Tensor("j")), In("value", Tensor("j"))}, {1, 1, 11, 8});
  NamedArgument sizes;
  sizes.name = "split_sizes";
  sizes.arg.kind = AK::kSymInts;
  sizes.arg.sym_ints = {SymIntRef{true, "video_length", 0}, SymIntRef{true, "text_length", 0}};
  c.b.p.sym_int_values["video_length"] = Sym("s0", 8);
  c.b.p.sym_int_values["text_length"] = DataDependent();
  Node split;
  split.name = "parts";
  split.target = "torch.ops.aten.split_with_sizes.default";
  split.inputs = {In("self", Tensor("o")), sizes, In("dim", Int(2))};
  Argument outs;
  outs.kind = AK::kTensors;
  outs.names = {"video", "text"};
  split.outputs = {outs};
  c.b.p.nodes.push_back(split);
  c.b.Meta("video", {1, 1, 8, 8});
  c.b.Meta("text", {1, 1, 3, 8});
  c.b.Output("video");
  c.b.Output("text");
  c.edits.edits.push_back(GatherOf("video", 2, 4, 9));
  AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), c.b.p, c.edits);
  const plan::ProgramEdit* attention = nullptr;
  for (const plan::ProgramEdit& e : c.edits.edits) {
    if (e.kind == plan::ProgramEdit::Kind::kAttention) attention = &e;
  }
  ASSERT_NE(attention, nullptr);
  const std::vector<plan::WholePart> want = {{"t", 2, "q_after"}, {"t", 2, "kv_after"}};
  EXPECT_EQ(attention->whole_parts, want);
}

// Any operator weft does not follow a whole stream through is refused, naming the stream.
// (Here a flatten of the tokens with the features: each rank's rows would interleave its own.)
TEST(ShardFlow, AWholeStreamMeetingAFlattenOfTheTokensIsRefused) {
  WholeStreamCase c(DataDependent());
  c.b.Add("s", "flatten.using_ints", {In("self", Tensor("j")), In("start_dim", Int(2)), In("end_dim", Int(3))},
          {1, 1, 88});
  c.b.Output("s");
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), c.b.p, c.edits); }, EditCheck::kCpSplitMixedWithWhole,
      "program: a context-parallel split cannot pass node `s` (flatten.using_ints) at the root: it reads a joint sequence "
      "that holds `t` whole on every rank (a cat joined it to split streams), which weft follows through row-wise "
      "operators, attention, a pad of the whole stream and a split at the streams' bounds only; split it with the "
      "others; it reads `j`, split along dim 2 in blocks [8, 3]; its split comes from the plan's rule for the root "
      "(rule at plan.weft:5:5)");
}

// A whole stream of a length the plan could split (a symbol of the inputs, not of a nonzero) is
// still refused at the cat: most often a stream the plan forgot to split.
TEST(ShardFlow, AWholeStreamOfSplittableLengthIsRefusedAtTheCat) {
  WholeStreamCase c(Sym("s1", 3));
  c.b.Output("j");
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), c.b.p, c.edits); }, EditCheck::kCpSplitMixedWithWhole,
      "program: a context-parallel split cannot pass node `j` (cat.default) at the root: it joins the sharded "
      "tensor with `t`, which is whole; it reads `q`, split along dim 2 in blocks [8]; its split comes from the "
      "plan's rule for the root (rule at plan.weft:5:5)");
}

// A split dim merged into the batch (Latte's (batch, tokens, C) viewed as (batch x tokens, C) for
// its temporal attention): the merged dim holds each batch row's run of tokens, each rank its part
// of every run -- blocks [8, 8] -- so an attention over those rows runs local, and a reshape back
// to (batch, tokens, C) brings the split back to the tokens, where the plan gathers it.
TEST(ShardFlow, ASplitMergedIntoTheBatchRunsAttentionLocalAndPartsBack) {
  auto build = [](bool whole_keys) {
    Builder b(/*bare=*/true);
    b.Input("x", {2, 8, 4}, InputSpec::Kind::kUserInput, "");
    b.Input("k", {16, 1, 1, 4}, InputSpec::Kind::kUserInput, "");
    b.Add("m", "reshape.default", {In("self", Tensor("x")), In("shape", Ints({-1, 4}))}, {16, 4});
    b.Add("q", "view.default", {In("self", Tensor("m")), In("size", Ints({16, 1, 1, 4}))}, {16, 1, 1, 4});
    b.Add("o", "scaled_dot_product_attention.default",
          {In("query", Tensor("q")), In("key", Tensor(whole_keys ? "k" : "q")), In("value", Tensor(whole_keys ? "k" : "q"))},
          {16, 1, 1, 4});
    b.Add("r", "reshape.default", {In("self", Tensor("o")), In("shape", Ints({2, -1, 4}))}, {2, 8, 4});
    b.Output("r");
    return b;
  };
  plan::ProgramEdits edits = SplitX(1, 3);
  edits.edits.push_back(GatherOf("r", 1, 3, 6));
  Builder merged = build(false);
  CheckSplitDataflow(Mesh(plan::kUlyssesAxis), merged.p, edits);  // passes: local attention, split back on dim 1

  // Run context-parallel, it would exchange rows that attend apart: refused at the attention's rule.
  plan::ProgramEdits cp = edits;
  cp.edits.push_back(AttentionEditOfO(plan::AttentionMode::kUlysses));
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), merged.p, cp); }, EditCheck::kCpAttentionOverWholeKeys,
                "program: the plan runs attention node `o` (module ``) context-parallel, but its split runs along the "
                "batch: `q` is split along dim 0 in blocks [8, 8]; its split comes from the plan's rule for the root "
                "(rule at plan.weft:5:5), each row attending its own keys; leave this attention local");

  // Keys whole while the query rows are split: each rank's rows would meet every row's keys.
  Builder whole = build(true);
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), whole.p, edits); }, EditCheck::kCpSplitMixedWithWhole,
                "program: a context-parallel split cannot pass node `o` (scaled_dot_product_attention.default) at the "
                "root: its queries are split along the batch, and `k` is whole there; it reads `q`, split along dim 0 in "
                "blocks [8, 8]; its split comes from the plan's rule for the root (rule at plan.weft:5:5)");

  // A merge that splits the split dim itself (tokens 8 -> 2 x 4 folded into the batch) is refused.
  Builder folded(/*bare=*/true);
  folded.Input("x", {2, 8, 4}, InputSpec::Kind::kUserInput, "");
  folded.Add("m", "reshape.default", {In("self", Tensor("x")), In("shape", Ints({4, 4, 4}))}, {4, 4, 4});
  folded.Output("m");
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), folded.p, SplitX(1, 3)); }, EditCheck::kCpReducesSplitDim,
                "program: a context-parallel split cannot pass node `m` (reshape.default) at the root: it merges the "
                "sharded dim with the dim before it; it reads `x`, split along dim 1 in blocks [8]; its split comes from "
                "the plan's rule for the root (rule at plan.weft:5:5)");
}

// A whole tensor's rows repeated a split's full length of times (Latte's timestep embedding per
// token) after the split: built at the local count (its `repeats` read off the shard), a shard laid
// out as the merged split is, so it combines with the merged tokens row for row; the edit drops
// the op's `output_size` hint, which would name the full total.
TEST(LocalSizes, RowsRepeatedTheSplitsLengthAreBuiltAtTheLocalCount) {
  Builder b(/*bare=*/true);
  b.Input("x", {2, 8, 4}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = Sym("s0", 8);
  b.Input("t", {2, 4}, InputSpec::Kind::kUserInput, "");
  b.p.sym_int_values["n"] = Sym("s0", 8);
  b.p.sym_int_values["total"] = SymInt{true, 16, "Mul(Integer(2), Symbol('s0', positive=True, integer=True))"};
  Argument n_ref, total_ref;
  n_ref.kind = total_ref.kind = AK::kSymInt;
  n_ref.sym_ints = {SymIntRef{true, "n", 0}};
  total_ref.sym_ints = {SymIntRef{true, "total", 0}};
  b.Add("m", "reshape.default", {In("self", Tensor("x")), In("shape", Ints({-1, 4}))}, {16, 4});
  b.p.tensor_values["m"].sizes[0] = SymInt{true, 16, "Mul(Integer(2), Symbol('s0', positive=True, integer=True))"};
  b.Add("e", "repeat_interleave.self_int",
        {In("self", Tensor("t")), In("repeats", n_ref), In("dim", Int(0)), In("output_size", total_ref)}, {16, 4});
  b.p.tensor_values["e"].sizes[0] = b.p.tensor_values["m"].sizes[0];
  b.Add("y", "mul.Tensor", {In("self", Tensor("m")), In("other", Tensor("e"))}, {16, 4});
  b.p.tensor_values["y"].sizes[0] = b.p.tensor_values["m"].sizes[0];
  b.Add("r", "reshape.default", {In("self", Tensor("y")), In("shape", Ints({2, -1, 4}))}, {2, 8, 4});
  b.Output("r");
  plan::ProgramEdits edits = SplitX(1, 3);
  edits.edits.push_back(GatherOf("r", 1, 3, 6));
  AddLocalSizeEdits(b.p, edits);
  ASSERT_EQ(edits.edits.size(), 3u);
  const plan::ProgramEdit& count = edits.edits[2];
  EXPECT_EQ(count.kind, plan::ProgramEdit::Kind::kArgument);
  EXPECT_EQ(count.node, "e");
  EXPECT_EQ(count.argument, "repeats");
  EXPECT_EQ(count.value, "x");
  EXPECT_EQ(count.dim, 1);
  CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits);  // passes: `e` is a shard laid out as `m`

  Program edited = b.p;
  ApplyEdits(edited, edits);
  const Node* e = nullptr;
  for (const Node& n : edited.nodes) e = n.name == "e" ? &n : e;
  ASSERT_NE(e, nullptr);
  for (const NamedArgument& in : e->inputs) {
    if (in.name == "output_size") {
      EXPECT_EQ(in.arg.kind, AK::kNone);
    }
    if (in.name == "repeats") {
      EXPECT_NE(in.arg.sym_ints.at(0).name, "n");  // read off the shard now
    }
  }

  // Without the count made local the repeated rows are whole, and the merged tokens refuse them.
  plan::ProgramEdits plain = SplitX(1, 3);
  plain.edits.push_back(GatherOf("r", 1, 3, 6));
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, plain); }, EditCheck::kCpSplitMixedWithWhole,
                "program: a context-parallel split cannot pass node `y` (mul.Tensor) at the root: it combines the "
                "sharded tensor with `e`, which is whole along the sharded dim; it reads `m`, split along dim 0 in "
                "blocks [8, 8]; its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

// Sana's Mix-FFN on a split sequence: the tokens (2, h x w, 4) viewed as the latent grid (2, h, w, 4)
// with the row count `h` read off a whole input, moved to (2, 4, h, w), a 3x3 depthwise convolution
// padded by 1, and back. The view's row count becomes -1 (this rank's rows, from its tokens), the
// convolution reads 1 row of each neighbour (a halo edit, its input and dim), and the split is made
// in whole rows of `w` with at least 1 per rank. A stride, a padding that changes the length, or a
// transposed convolution along the split rows is refused by name.
Builder GridConvolution(const std::vector<NamedArgument>& conv_arguments, const std::string& target = "conv2d.default") {
  Builder b(/*bare=*/true);
  b.Input("x", {2, 16, 4}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = SymInt{true, 16, "Mul(Symbol('s0', positive=True, integer=True), "
                                                     "Symbol('s1', positive=True, integer=True))"};
  b.Input("grid", {1, 1, 4, 4}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["grid"].sizes[2] = Sym("s0", 4);
  b.p.tensor_values["grid"].sizes[3] = Sym("s1", 4);
  b.Input("k", {4, 1, 3, 3}, InputSpec::Kind::kParameter, "conv.weight");
  for (const auto& [name, dim] : {std::pair<const char*, int64_t>{"h", 2}, {"w", 3}}) {
    b.Add(std::string(name) + "_node", "sym_size.int", {In("self", Tensor("grid")), In("dim", Int(dim))}, {});
    Argument out;
    out.kind = AK::kSymInt;
    out.sym_ints = {SymIntRef{true, name, 0}};
    b.p.nodes.back().outputs = {out};
    b.p.sym_int_values[name] = Sym(dim == 2 ? "s0" : "s1", 4);
  }
  b.Add("x2", "clone.default", {In("self", Tensor("x"))}, {2, 16, 4});
  b.p.tensor_values["x2"].sizes[1] = b.p.tensor_values["x"].sizes[1];
  Argument grid;
  grid.kind = AK::kSymInts;
  grid.sym_ints = {SymIntRef{false, "", 2}, SymIntRef{true, "h", 0}, SymIntRef{true, "w", 0}, SymIntRef{false, "", 4}};
  b.Add("v", "view.default", {In("self", Tensor("x2")), In("size", grid)}, {2, 4, 4, 4});
  b.Add("pm", "permute.default", {In("self", Tensor("v")), In("dims", Ints({0, 3, 1, 2}))}, {2, 4, 4, 4});
  std::vector<NamedArgument> conv = {In("input", Tensor("pm")), In("weight", Tensor("k"))};
  conv.insert(conv.end(), conv_arguments.begin(), conv_arguments.end());
  b.Add("c", target, conv, {2, 4, 4, 4});
  b.Add("f", "flatten.using_ints", {In("self", Tensor("c")), In("start_dim", Int(2)), In("end_dim", Int(3))}, {2, 4, 16});
  b.Add("t", "permute.default", {In("self", Tensor("f")), In("dims", Ints({0, 2, 1}))}, {2, 16, 4});
  b.p.tensor_values["t"].sizes[1] = b.p.tensor_values["x"].sizes[1];
  b.Output("t");
  return b;
}

TEST(ShardFlow, AConvolutionOverSplitRowsReadsItsNeighboursRows) {
  const std::vector<NamedArgument> same = {In("stride", Ints({1, 1})), In("padding", Ints({1, 1})),
                                           In("dilation", Ints({1, 1})), In("groups", Int(4))};
  Builder b = GridConvolution(same);
  // Split where `x2` is made, after the program computes the row's length `w`.
  plan::ProgramEdits edits = SplitX(1, 3);
  edits.edits[0].value = "x2";
  edits.edits[0].after_producer = true;
  edits.edits.push_back(GatherOf("t", 1, 3, 6));
  plan::ProgramEdits at_input = SplitX(1, 3);
  at_input.edits.push_back(GatherOf("t", 1, 3, 6));
  AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), b.p, edits);
  AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), b.p, at_input);
  ASSERT_EQ(edits.edits.size(), 4u);
  EXPECT_EQ(edits.edits[0].unit, (std::vector<std::string>{"w"}));  // the split, in whole rows of w
  EXPECT_EQ(edits.edits[0].min_rows, 1);
  const plan::ProgramEdit& rows = edits.edits[2];
  EXPECT_EQ(rows.kind, plan::ProgramEdit::Kind::kArgument);
  EXPECT_EQ(rows.node, "v");
  EXPECT_EQ(rows.argument, "size");
  EXPECT_EQ(rows.element, 1);
  EXPECT_EQ(rows.new_value, -1);
  EXPECT_TRUE(rows.value.empty());
  const plan::ProgramEdit& halo = edits.edits[3];
  EXPECT_EQ(halo.kind, plan::ProgramEdit::Kind::kHalo);
  EXPECT_EQ(halo.node, "c");
  EXPECT_EQ(halo.value, "pm");
  EXPECT_EQ(halo.dim, 2);
  EXPECT_EQ(halo.new_value, 1);
  EXPECT_EQ(halo.origin.line, 5u);  // the split's rule
  CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits);

  // Applied: weft.halo reads the convolution's input, which pads none along the split rows.
  Program applied = b.p;
  ApplyEdits(applied, edits);
  const Node* conv = nullptr;
  const Node* exchange = nullptr;
  for (const Node& n : applied.nodes) {
    if (n.name == "c") conv = &n;
    if (n.target == kHaloTarget) exchange = &n;
  }
  ASSERT_NE(conv, nullptr);
  ASSERT_NE(exchange, nullptr);
  EXPECT_EQ(conv->inputs[0].arg.name, exchange->outputs[0].name);
  EXPECT_EQ(conv->inputs[3].arg.ints, (std::vector<int64_t>{0, 1}));
  // Split at the forward's input, before the program computes `w`: `w` is read off a forward input,
  // so the node computing it moves to before the split, which reads it.
  Program early = b.p;
  ApplyEdits(early, at_input);
  size_t w_at = early.nodes.size(), split_at = early.nodes.size();
  for (size_t i = 0; i < early.nodes.size(); ++i) {
    if (early.nodes[i].name == "w_node") w_at = i;
    if (early.nodes[i].target == kSplitTarget && split_at == early.nodes.size()) split_at = i;
  }
  EXPECT_LT(w_at, split_at);
  // A row length read off a value the program computes after the split cannot move: refused.
  Program late = b.p;
  for (Node& n : late.nodes) {
    if (n.name == "w_node") n.inputs[0] = In("self", Tensor("x2"));
  }
  try {
    ApplyEdits(late, at_input);
    ADD_FAILURE() << "a split in rows of a length computed after it was applied";
  } catch (const ProgramError& e) {
    EXPECT_EQ(std::string(e.what()), "program: the plan's split of `x` (rule at plan.weft:5:5) is made in whole rows of "
                                     "`w`, which the program computes only after it; split the stream later (after `w` "
                                     "is computed)");
  }

  auto refused = [&](const std::vector<NamedArgument>& arguments, const std::string& why, const std::string& target = "conv2d.default") {
    Builder r = GridConvolution(arguments, target);
    plan::ProgramEdits e = SplitX(1, 3);
    e.edits.push_back(GatherOf("t", 1, 3, 6));
    ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), r.p, e); }, EditCheck::kCpReducesSplitDim,
                  "program: a context-parallel split cannot pass node `c` (" + target + ") at the root: " + why +
                      "; it reads `pm`, split along dim 2 in blocks [4]; its split comes from the plan's rule for the "
                      "root (rule at plan.weft:5:5)");
  };
  refused({In("stride", Ints({2, 1})), In("padding", Ints({1, 1}))},
          "it strides 2 along the split dim (each rank's part would start off the grid)");
  refused({In("stride", Ints({1, 1})), In("padding", Ints({0, 0}))},
          "its kernel of 3 (dilation 1) pads 0 along the split dim, which changes its length; weft exchanges the rows "
          "of a convolution that keeps it");
  Argument yes;
  yes.kind = AK::kBool;
  yes.b = true;
  refused({In("bias", Argument()), In("stride", Ints({1, 1})), In("padding", Ints({1, 1})), In("dilation", Ints({1, 1})),
           In("transposed", yes)},
          "a transposed convolution spreads each input row over several output rows", "convolution.default");
}

// Wan Animate's face adapter: the tokens (2, 3 x s0, 4) viewed per latent frame as (2, 3, -1, 4),
// the frame count 3 fixed at export, each frame's rows meeting that frame's face features (2, 3, 4),
// split along their frames. The count becomes local off the face features' shard, and the tokens
// are split in 3 equal rows (edit.rows), not in any 3 pieces: over 2 ranks, 2 frames' tokens and 1's.
TEST(ShardFlow, ATokenStreamViewedAsAConstantCountOfRowsIsSplitInThoseRows) {
  Builder b(/*bare=*/true);
  b.Input("x", {2, 12, 4}, InputSpec::Kind::kUserInput, "");
  b.p.tensor_values["x"].sizes[1] = SymInt{true, 12, "Mul(Integer(3), Symbol('s0', positive=True, integer=True))"};
  b.Input("f", {2, 3, 4}, InputSpec::Kind::kUserInput, "");
  b.Add("u", "unflatten.int", {In("self", Tensor("x")), In("dim", Int(1)), In("sizes", Ints({3, -1}))}, {2, 3, 4, 4});
  b.p.tensor_values["u"].sizes[2] = Sym("s0", 4);
  b.Add("fu", "unsqueeze.default", {In("self", Tensor("f")), In("dim", Int(2))}, {2, 3, 1, 4});
  b.Add("y", "mul.Tensor", {In("self", Tensor("u")), In("other", Tensor("fu"))}, {2, 3, 4, 4});
  b.p.tensor_values["y"].sizes[2] = Sym("s0", 4);
  b.Add("t", "flatten.using_ints", {In("self", Tensor("y")), In("start_dim", Int(1)), In("end_dim", Int(2))}, {2, 12, 4});
  b.p.tensor_values["t"].sizes[1] = b.p.tensor_values["x"].sizes[1];
  b.Output("t");
  plan::ProgramEdits edits = SplitX(1, 3);
  plan::ProgramEdit face = edits.edits[0];
  face.value = "f";
  face.origin.line = 6;
  edits.edits.push_back(face);
  edits.edits.push_back(GatherOf("t", 1, 3, 7));
  AddSplitDataflowEdits(Mesh(plan::kUlyssesAxis), b.p, edits);
  ASSERT_EQ(edits.edits.size(), 4u);
  EXPECT_EQ(edits.edits[0].rows, "3");  // the tokens: 3 equal rows, each rank whole ones
  EXPECT_TRUE(edits.edits[0].unit.empty());
  EXPECT_EQ(edits.edits[0].min_rows, 1);
  EXPECT_TRUE(edits.edits[1].rows.empty());  // the face features' frames: a constant length, split as it is
  const plan::ProgramEdit& count = edits.edits[3];
  EXPECT_EQ(count.kind, plan::ProgramEdit::Kind::kArgument);
  EXPECT_EQ(count.node, "u");
  EXPECT_EQ(count.argument, "sizes");
  EXPECT_EQ(count.element, 0);
  EXPECT_EQ(count.value, "f");  // this rank's frames, read off the face features' shard
  EXPECT_EQ(count.dim, 1);
  CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, edits);
  // The count survives the ExecutionPlan's JSON.
  plan::ExecutionPlan plan = Mesh(plan::kUlyssesAxis);
  plan.program = edits;
  const plan::PlanReadResult back = plan::ReadPlanJson(plan::WritePlanJson(plan));
  ASSERT_TRUE(back.plan.has_value()) << (back.errors.empty() ? std::string() : back.errors[0].message);
  ASSERT_TRUE(back.plan->program.has_value());
  EXPECT_EQ(back.plan->program->edits[0].rows, "3");

  // Without the face features split, the count stays the full 3 frames: refused by name.
  plan::ProgramEdits tokens_only = SplitX(1, 3);
  tokens_only.edits.push_back(GatherOf("t", 1, 3, 7));
  ExpectRefused([&] { CheckSplitDataflow(Mesh(plan::kUlyssesAxis), b.p, tokens_only); }, EditCheck::kCpReducesSplitDim,
                "program: a context-parallel split cannot pass node `u` (unflatten.int) at the root: it gives the split "
                "dim the constant 3, the full length (each rank holds only its part); it reads `x`, split along dim 1 "
                "in blocks [12]; its split comes from the plan's rule for the root (rule at plan.weft:5:5)");
}

}  // namespace
}  // namespace weft::program

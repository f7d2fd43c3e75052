// runtime/program/row_slices.h on a hand-built program shaped like the tail of Flux's last
// single block: out = (cat([gelu(linear(x)), x], -1) * scale)[:, 3:], with the other rows'
// slice [:, :3] read by nobody.
#include "runtime/program/row_slices.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "runtime/nn/fused.h"
#include "runtime/program/interpreter.h"
#include "tests/support/program_builder.h"

namespace weft::interp {
namespace {

using program::Argument;
using program::Node;
using AK = program::Argument::Kind;
using testing::In;
using testing::Int;
using testing::Tensor;

// batch: the leading dim (1: the kept rows are one block of memory, so the slice may pass the
// linear too).
program::Program FluxLikeTail(int64_t batch) {
  using IK = program::InputSpec::Kind;
  testing::ProgramBuilder b;
  b.Input("x", {batch, 8, 4}, IK::kUserInput, "");
  b.Input("scale", {batch, 1, 10}, IK::kUserInput, "");
  b.Input("w", {6, 4}, IK::kParameter, "w");
  b.Input("b", {6}, IK::kParameter, "b");
  Argument tanh;
  tanh.kind = AK::kString;
  tanh.s = "tanh";
  Argument pieces;
  pieces.kind = AK::kTensors;
  pieces.names = {"g", "x"};
  const int64_t kEnd = std::numeric_limits<int64_t>::max();
  b.Add("l", "linear.default", {In("input", Tensor("x")), In("weight", Tensor("w")), In("bias", Tensor("b"))},
        {batch, 8, 6});
  b.Add("g", "gelu.default", {In("self", Tensor("l")), In("approximate", tanh)}, {batch, 8, 6});
  b.Add("c", "cat.default", {In("tensors", pieces), In("dim", Int(2))}, {batch, 8, 10});
  b.Add("m", "mul.Tensor", {In("self", Tensor("c")), In("other", Tensor("scale"))}, {batch, 8, 10});
  b.Add("dropped", "slice.Tensor", {In("self", Tensor("m")), In("dim", Int(1)), In("start", Int(0)), In("end", Int(3))},
        {batch, 3, 10});
  b.Add("kept", "slice.Tensor", {In("self", Tensor("m")), In("dim", Int(1)), In("start", Int(3)), In("end", Int(kEnd))},
        {batch, 5, 10});
  b.Output("kept");
  b.p.path = "row_slices_test";
  return b.p;
}

at::Tensor RunTail(const program::Program& p, bool fast, int64_t batch) {
  LoadOptions options;
  options.fast_kernels = fast;
  std::unique_ptr<Interpreter> interp = Interpreter::Load(p, options);
  at::manual_seed(7);
  static at::Tensor w, b;
  w = at::randn({6, 4});
  b = at::randn({6});
  interp->BindState("w", &w);
  interp->BindState("b", &b);
  std::vector<c10::IValue> inputs = {at::randn({batch, 8, 4}), at::randn({batch, 1, 10})};
  return interp->Run(inputs).at(0);
}

TEST(RowSlices, MoveAboveRowWiseOpsAndDropTheUnreadSlice) {
  const RowSliceRewrite r = SinkRowSlices(FluxLikeTail(1));
  EXPECT_EQ(r.dead_slices_removed, 1u);
  // mul (scale broadcasts over the rows and stays whole), cat (x is a graph input: its slice
  // stays), gelu, linear.
  EXPECT_EQ(r.moves, 4u);
  ASSERT_EQ(r.program.nodes.size(), 6u);
  EXPECT_EQ(r.program.nodes[0].target, "torch.ops.aten.slice.Tensor");
  EXPECT_EQ(r.program.nodes[0].inputs[0].arg.name, "x");
  EXPECT_EQ(r.program.nodes[1].target, "torch.ops.aten.linear.default");
  EXPECT_EQ(r.program.nodes[1].inputs[0].arg.name, r.program.nodes[0].outputs[0].name);
  EXPECT_EQ(r.program.nodes[2].target, "torch.ops.aten.gelu.default");
  EXPECT_EQ(r.program.nodes[3].target, "torch.ops.aten.slice.Tensor");  // the cat's x piece
  EXPECT_EQ(r.program.nodes[3].inputs[0].arg.name, "x");
  EXPECT_EQ(r.program.nodes[4].target, "torch.ops.aten.cat.default");
  EXPECT_EQ(r.program.nodes[5].target, "torch.ops.aten.mul.Tensor");
  EXPECT_EQ(r.program.nodes[5].outputs[0].name, "kept");
  EXPECT_EQ(r.program.nodes[5].inputs[1].arg.name, "scale");
  EXPECT_EQ(r.program.tensor_values.at(r.program.nodes[0].outputs[0].name).sizes[1].value, 5);
  EXPECT_EQ(r.program.tensor_values.count("m"), 0u);
}

TEST(RowSlices, StopAtTheLinearWhenTheRowsAreStrided) {
  const RowSliceRewrite r = SinkRowSlices(FluxLikeTail(2));
  EXPECT_EQ(r.moves, 3u);  // mul, cat, gelu; slice(l) stays where the batch makes it strided
  EXPECT_EQ(r.program.nodes[0].target, "torch.ops.aten.linear.default");
  EXPECT_EQ(r.program.nodes[1].target, "torch.ops.aten.slice.Tensor");
  EXPECT_EQ(r.program.nodes[1].inputs[0].arg.name, "l");
}

TEST(RowSlices, RewrittenProgramComputesTheSameRows) {
  nn::SetFusedKernels(true);
  for (int64_t batch : {1, 2}) {
    const program::Program p = FluxLikeTail(batch);
    const at::Tensor plain = RunTail(p, /*fast=*/false, batch);
    const at::Tensor rewritten = RunTail(p, /*fast=*/true, batch);
    ASSERT_EQ(rewritten.sizes(), (std::vector<int64_t>{batch, 5, 10}));
    // fp32, the same products over fewer rows (oneDNN against ATen): float rounding only.
    EXPECT_TRUE(at::allclose(rewritten, plain, 1e-5, 1e-6)) << (rewritten - plain).abs().max().item<float>();
  }
}

TEST(RowSlices, InterpreterReportsTheMoves) {
  const program::Program p = FluxLikeTail(1);
  LoadOptions fast;
  EXPECT_EQ(Interpreter::Load(p, fast)->row_slice_moves(), 4u);
  LoadOptions plain;
  plain.fast_kernels = false;
  EXPECT_EQ(Interpreter::Load(p, plain)->row_slice_moves(), 0u);
}

// A slice that no rule lets pass (a reduction over the rows) stays, and nothing else changes.
TEST(RowSlices, ReductionsStopTheSlice) {
  program::Program p = FluxLikeTail(1);
  p.nodes[3].target = "torch.ops.aten.sum.dim_IntList";
  const RowSliceRewrite r = SinkRowSlices(p);
  EXPECT_EQ(r.moves, 0u);
  EXPECT_EQ(r.dead_slices_removed, 1u);
  EXPECT_EQ(r.program.nodes.size(), 5u);
}

}  // namespace
}  // namespace weft::interp

#pragma once

// ExecutionPlans for tiny Flux built by hand (as the compiler would lower plans/flux.weft), and
// a runner that installs one on the fixture model, so executor tests do not depend on the
// compiler.

#include <ATen/core/Tensor.h>

#include <utility>

#include "compiler/plan/execution_plan.h"
#include "executor/install.h"
#include "runtime/dist/dist_context.h"

namespace weft::exec::testing {

// The Flux CP plan for `shape`: split the four sequence inputs at the root, gather proj_out,
// every attention site context-parallel in the mesh's mode. With shape.tp > 1 also the
// tensor-parallel steps of diffusers' Flux _tp_plan (colwise q/k/v/mlp-in, rowwise outs,
// packed rowwise single-block proj_out = [inner, mlp]).
plan::ExecutionPlan FluxPlan(const dist::MeshShape& shape, plan::RotateMethod rotate, bool anything);

// Builds tiny Flux, loads the fixture weights (whole, or as streamed shards), installs `plan`
// and runs the fixture inputs. Returns (this rank's output, diffusers' reference output).
std::pair<at::Tensor, at::Tensor> RunFlux(dist::DistContext& ctx, const plan::ExecutionPlan& plan,
                                          bool streamed_shards = false, InstalledPlan* installed = nullptr);

dist::MeshShape Mesh(int ring, int ulysses, int tp = 1);

}  // namespace weft::exec::testing

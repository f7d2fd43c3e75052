#pragma once

// One weft-run job on one rank: build (or load) the model, install the compiled plan, run
// warm-up and timed sharded forwards, optionally check against the unsharded forward, and
// report latency, collectives (measured next to the compiler's prediction) and peak memory.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/ScalarType.h>
#include <c10/core/Device.h>

#include "compiler/plan/execution_plan.h"
#include "runtime/dist/dist_context.h"
#include "runtime/models/registry.h"

namespace weft::exec {

struct JobOptions {
  models::ModelSpec model{"flux", "tiny", ""};
  std::vector<std::string> weights;  // safetensors files; empty: seeded random weights
  std::string inputs;                // safetensors keyed by argument name; empty: seeded random
  std::string output;                // rank 0 writes {"output": ...} here when set
  models::Workload workload;
  uint64_t seed = 0;
  at::ScalarType dtype = at::kFloat;
  // Where parameters, inputs and activations live (executor/device.h). CUDA tensors take
  // NCCL, so the DistContext must have been created with enable_nccl.
  c10::Device device = c10::Device(c10::kCPU);
  bool check = false;
  // --check passes when max|sharded - unsharded| <= tolerance * max|unsharded|.
  // nullopt: 1e-5 for fp32 context parallelism, 1e-4 with tensor parallelism, 2e-2 in bf16.
  std::optional<double> tolerance;
  int warmup = 0;
  int iters = 1;
  std::string trace;   // Chrome trace path prefix: <trace>.rank<r>.json
  // LibTorch's operator profile of the timed iterations, path prefix: <profile_ops>.rank<r>.json
  // (Chrome trace of every ATen op and collective; bench/op_self_time.py sums it per op).
  std::string profile_ops;
  std::string report;  // "json" prints a JSON report on stdout (rank 0); a path writes it there
  bool progress = true;  // per-iteration progress on stderr (rank 0) when iters > 1
  std::string plan_hash;
  // The structure hash of `model`'s graph (ModelGraphHash); Install refuses a plan compiled
  // against a graph with another hash. Empty: not checked.
  std::string model_graph_hash;
};

struct JobResult {
  bool check_ran = false;
  bool check_passed = true;
  double max_abs_error = 0;
  double max_rel_error = 0;
  double tolerance = 0;
  std::vector<double> latencies_ms;  // timed iterations, this rank
  int exit_code = 0;                 // 0, or 1 when the check failed
};

// Runs the job. Collective over the world: every rank calls it with the same options and
// plan. Throws ExecError / DistError / std::invalid_argument on bad input (weights, inputs,
// plan), naming the key, argument or plan line.
JobResult RunJob(dist::DistContext& ctx, const plan::ExecutionPlan& plan, const JobOptions& options);

}  // namespace weft::exec

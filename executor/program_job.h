#pragma once

// `weft-run --program M.pt2`: a torch.export program (runtime/program) on weights from a
// diffusers directory, safetensors files or weft's seeded values, at inputs from a file or made
// from the program's first workload. On one rank without a plan it runs the program as it is and
// --check compares with the same program on the plain interpreter (no fused kernels). On a mesh
// (or with --plan / --compiled) the plan -- by default plans/<...>.weft of the program's class --
// is compiled against the program at these inputs, lowered to edits of its graph
// (compiler/program/lowering.h) and applied when it loads; --check then compares with the
// unsharded program on the same weights. Every class runs this way: it is weft-run's one path.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "compiler/plan/execution_plan.h"
#include "runtime/dist/dist_context.h"

namespace weft::exec {

struct ProgramJobOptions {
  std::string program;               // the .pt2 file
  std::string model_name;            // what reports and errors call the model ("flux:tiny", a model dir)
  std::string plan;                  // a plan to compile against the program ("" = its class's in plans/)
  std::string compiled;              // or a plan compiled against it already (weft compile --program)
  plan::Mesh mesh;                   // the job's mesh (axes in world order, flags)
  std::string model_dir;             // a save_pretrained directory: its config must match the program's
  std::vector<std::string> weights;  // safetensors files (instead of, or overriding, the directory's)
  std::string inputs;                // safetensors by argument name, non-tensors under `weft.args`
  // Guidance branches as forward calls of their own (a plan whose guidance_parallel says `calls`):
  // one inputs file per branch, in branch order (`inputs` is the first); each cfg group runs its
  // branches' calls and the outputs are gathered over cfg, stacked along a new dim 0.
  std::vector<std::string> branch_inputs;
  std::string workload;              // the manifest workload to make inputs at (default: the first)
  std::string output;                // {"output": ..., "output_1": ...}
  std::string dtype;                 // "fp32" / "bf16"; "" = the program's
  c10::Device device = c10::Device(c10::kCPU);
  bool fast_kernels = true;
  uint64_t seed = 0;
  bool check = false;
  std::optional<double> tolerance;   // --check: max|sharded - unsharded| <= tolerance * max|unsharded|
  // A reference output (safetensors with the keys --output writes, e.g. diffusers' own from
  // tools/make_fixtures.py): every output must be within expect_tolerance * max|reference|.
  std::string expect;
  std::vector<std::string> branch_expect;  // one reference per branch (else `expect` holds them stacked)
  std::optional<double> expect_tolerance;  // default 1e-4 fp32, 2e-2 bf16
  int warmup = 0;
  int iters = 1;
  std::string trace;
  std::string profile_ops;
  std::string report;
  bool progress = true;
  // A machine profile (weft.machine/1): the report gains the cost model's prediction for this run
  // (compiler/cost/predict.h) next to what it measured.
  std::string machine;
  std::string cpu_transport = "shm";  // how the prediction prices CPU collectives
};

// Runs the job; returns the exit status (0, or 1 when --check failed). Throws ProgramError /
// std::runtime_error naming the file, argument or key on bad input, before anything runs.
int RunProgramJob(dist::DistContext& ctx, const ProgramJobOptions& options);

// The plan of a program's class in plans/ (of DataDir()): the first whose `plan NAME for CLASS`
// names it; "" when none does.
std::string PlanFileForClass(const std::string& cls);

}  // namespace weft::exec

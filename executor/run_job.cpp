#include "executor/run_job.h"
#include "compiler/source/output_file.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <c10/core/InferenceMode.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "executor/device.h"
#include "executor/exec_error.h"
#include "executor/install.h"
#include "executor/trace.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/load_weights.h"

namespace weft::exec {
namespace {

using Clock = std::chrono::steady_clock;

int64_t PeakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

nn::Args LoadInputs(const JobOptions& options, const nn::Module& model) {
  // Floating inputs in the run's dtype (the timestep stays as given), all on the run's device.
  auto prepare = [&](const std::string& name, const at::Tensor& t) {
    return t.is_floating_point() && name != "timestep" ? t.to(options.device, options.dtype) : t.to(options.device);
  };
  nn::Args args;
  if (options.inputs.empty()) {
    for (auto& [name, tensor] : models::ExampleInputs(model, options.workload, options.seed)) {
      args.Set(name, prepare(name, tensor));
    }
    return args;
  }
  io::SafetensorsFile file = io::SafetensorsFile::Open(options.inputs);
  std::vector<std::pair<std::string, at::Tensor>> loaded;
  for (const std::string& key : file.Keys()) loaded.emplace_back(key, file.Load(key));
  try {
    models::CheckInputs(model, loaded);  // one clear sentence, not a LibTorch error from deep inside
  } catch (const std::invalid_argument& e) {
    throw ExecError("--inputs " + options.inputs + ": " + e.what());
  }
  for (auto& [key, tensor] : loaded) args.Set(key, prepare(key, tensor));
  return args;
}

// One forward of the (hooked) model; output 0. Inference only: no autograd bookkeeping.
// Returns once the device has finished it, so wall-clock timings are true on CUDA too.
at::Tensor Forward(nn::Module& model, const nn::Args& args, c10::Device device) {
  c10::InferenceMode inference;
  at::Tensor out = nn::OutputTensor(nn::Call(model, args), 0, model);
  SynchronizeDevice(device);
  return out;
}

// Parameters are read and initialised on the CPU; then they move to the run's device.
void MoveParameters(nn::Module& model, c10::Device device) {
  if (device.is_cpu()) return;
  for (auto& [name, slot] : model.NamedParameters()) *slot = slot->to(device);
}

// Seeded random weights, or the checkpoint, read as this rank's shards when `plan` (non-null)
// shards parameters over tp. Returns whether the weights are already sharded.
bool FillParameters(const JobOptions& options, const plan::ExecutionPlan* plan, const dist::DistContext& ctx,
                    nn::Module& model) {
  if (options.weights.empty()) {
    nn::RandomizeParameters(model, 1000 + options.seed);
    nn::CastParameters(model, options.dtype);
    return false;
  }
  return LoadWeightFiles(options.weights, plan, model, ctx, options.dtype);
}

// Builds the model on the run's device with its weights (FillParameters). Returns whether the
// weights are already sharded.
bool BuildModel(const JobOptions& options, const plan::ExecutionPlan* plan, const dist::DistContext& ctx,
                std::unique_ptr<nn::Module>& holder) {
  holder = models::CreateModel(options.model);
  const bool streamed = FillParameters(options, plan, ctx, *holder);
  MoveParameters(*holder, options.device);
  return streamed;
}

// A NaN or infinity in the output is wrong whatever --check says, so every run looks (every rank
// the same: the counts are all-reduced, so all exit alike).
void CheckFinite(dist::DistContext& ctx, const at::Tensor& output, const JobOptions& options) {
  at::Tensor counts = at::stack({at::isnan(output).sum(), at::isinf(output).sum()}).to(at::kDouble).cpu().contiguous();
  ctx.AllReduce(dist::Axis::kWorld, counts, dist::ReduceKind::kMax);
  const int64_t nan = static_cast<int64_t>(counts[0].item<double>());
  const int64_t inf = static_cast<int64_t>(counts[1].item<double>());
  if (nan == 0 && inf == 0) return;
  throw ExecError("the output of " + options.model.ToString() + " (" + std::string(c10::toString(options.dtype)) + ", " +
                  c10::str(output.sizes()) + ") has " + std::to_string(nan) + " NaN and " + std::to_string(inf) +
                  " infinite value(s) of " + std::to_string(output.numel()) +
                  ": the weights or inputs hold non-finite values, or the computation overflows" +
                  (options.dtype == at::kFloat ? "" : " (try --dtype fp32)"));
}

}  // namespace

JobResult RunJob(dist::DistContext& ctx, const plan::ExecutionPlan& plan, const JobOptions& options) {
  const bool leader = ctx.rank() == 0;
  std::unique_ptr<nn::Module> holder;
  const bool streamed = BuildModel(options, &plan, ctx, holder);
  nn::Module& model = *holder;
  const nn::Args inputs = LoadInputs(options, model);

  InstallOptions install;
  install.plan_hash = options.plan_hash;
  install.model_graph_hash = options.model_graph_hash;
  install.weights_already_sharded = streamed;
  InstalledPlan installed = Install(plan, model, ctx, install);
  Tracer tracer(ctx.rank());
  if (!options.trace.empty()) {
    tracer.Attach(model, 2);
    tracer.AttachCollectives(ctx);
  }

  JobResult result;
  at::Tensor output;
  for (int i = 0; i < options.warmup; ++i) output = Forward(model, inputs, options.device);
  ctx.Barrier(dist::Axis::kWorld);
  const dist::CommCounters before = ctx.counters();
  dist::CommCounters one_forward;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> op_profile;
  if (!options.profile_ops.empty()) {
    op_profile = std::make_unique<torch::autograd::profiler::RecordProfile>(options.profile_ops + ".rank" +
                                                                            std::to_string(ctx.rank()) + ".json");
  }
  for (int i = 0; i < std::max(1, options.iters); ++i) {
    const auto start = Clock::now();
    output = Forward(model, inputs, options.device);
    result.latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (i == 0) one_forward = ctx.counters().Since(before);  // the collectives of exactly one forward
    if (leader && options.progress && options.iters > 1) {
      std::fprintf(stderr, "weft-run: iteration %d/%d: %.2f ms\n", i + 1, options.iters, result.latencies_ms.back());
    }
  }
  op_profile.reset();  // writes the profile
  if (!options.trace.empty()) {
    tracer.DetachCollectives(ctx);
    tracer.Write(options.trace + ".rank" + std::to_string(ctx.rank()) + ".json");
  }
  if (leader && !options.output.empty()) io::WriteSafetensors(options.output, {{"output", output.cpu()}});
  CheckFinite(ctx, output, options);

  if (options.check) {
    const bool tp = plan.mesh.Tp() > 1;
    result.tolerance = options.tolerance.value_or(options.dtype == at::kFloat ? (tp ? 1e-4 : 1e-5) : 2e-2);
    // The reference is a fresh, unsharded copy of the model with the same weights.
    std::unique_ptr<nn::Module> unsharded;
    BuildModel(options, nullptr, ctx, unsharded);
    at::Tensor reference = Forward(*unsharded, inputs, options.device);
    if (reference.sizes() != output.sizes()) {
      throw ExecError("rank " + std::to_string(ctx.rank()) + ": sharded output " + c10::str(output.sizes()) +
                      " but unsharded output " + c10::str(reference.sizes()) + " (does the plan gather the output?)");
    }
    at::Tensor diff = (output.to(at::kDouble) - reference.to(at::kDouble)).abs().max();
    at::Tensor scale = reference.to(at::kDouble).abs().max();
    // Every rank's error, so all ranks agree on the verdict.
    at::Tensor pair = at::stack({diff, diff / scale.clamp_min(1e-30)}).to(at::kDouble).contiguous();
    ctx.AllReduce(dist::Axis::kWorld, pair, dist::ReduceKind::kMax);
    result.check_ran = true;
    result.max_abs_error = pair[0].item<double>();
    result.max_rel_error = pair[1].item<double>();
    result.check_passed = result.max_rel_error <= result.tolerance;
    result.exit_code = result.check_passed ? 0 : 1;
  }

  // Peak memory of every rank, for the report.
  std::vector<int64_t> rss = ctx.AllGatherSizes(dist::Axis::kWorld, PeakRssBytes());
  std::vector<int64_t> device_peak;
  if (options.device.is_cuda()) device_peak = ctx.AllGatherSizes(dist::Axis::kWorld, PeakDeviceBytes(options.device));

  if (leader) {
    nlohmann::json collectives = nlohmann::json::array();
    for (dist::Axis axis : dist::kAllAxes) {
      for (int op = 0; op < dist::kNumCommOps; ++op) {
        const dist::CommStat s = one_forward.Get(axis, static_cast<dist::CommOp>(op));
        if (s.calls == 0) continue;
        collectives.push_back({{"axis", dist::AxisName(axis)},
                               {"op", dist::CommOpName(static_cast<dist::CommOp>(op))},
                               {"calls", s.calls},
                               {"bytes_sent", s.bytes_sent}});
      }
    }
    nlohmann::json transport = nlohmann::json::object();
    for (dist::Axis axis : dist::kAllAxes) {
      if (ctx.AxisSize(axis) > 1) transport[dist::AxisName(axis)] = ctx.CpuTransport(axis);
    }
    nlohmann::json predicted = nlohmann::json::array();
    for (const plan::AxisTraffic& t : plan.cost.per_axis) {
      predicted.push_back({{"axis", t.axis}, {"collectives", t.collectives}, {"bytes_sent", t.bytes}});
    }
    nlohmann::json report = {
        {"model", options.model.ToString()},
        {"plan", plan.plan_name},
        {"mesh", plan.mesh.ToString()},
        {"graph", plan.graph_name},
        {"workload", plan.workload.name},
        {"world_size", ctx.world_size()},
        {"dtype", c10::toString(options.dtype)},
        {"installed", {{"splits", installed.split_hooks}, {"gathers", installed.gather_hooks},
                       {"cp_attention_sites", installed.cp_attention_sites},
                       {"local_attention_sites", installed.local_attention_sites}}},
        {"latency_ms", {{"median", Median(result.latencies_ms)},
                        {"min", *std::min_element(result.latencies_ms.begin(), result.latencies_ms.end())},
                        {"max", *std::max_element(result.latencies_ms.begin(), result.latencies_ms.end())},
                        {"iters", result.latencies_ms.size()}, {"warmup", options.warmup}}},
        {"collectives_per_forward", collectives},
        {"cpu_transport", transport},
        {"predicted_per_forward", predicted},
        {"predicted_bytes_per_forward", plan.cost.bytes},
        {"peak_rss_bytes_per_rank", rss},
        {"device", options.device.str()},
    };
    if (!device_peak.empty()) report["peak_cuda_allocated_bytes_per_rank"] = device_peak;
    if (result.check_ran) {
      report["check"] = {{"max_abs_error", result.max_abs_error}, {"max_rel_error", result.max_rel_error},
                         {"tolerance", result.tolerance}, {"passed", result.check_passed}};
    }
    if (options.report == "json") {
      std::cout << report.dump(2) << std::endl;
    } else if (!options.report.empty()) {
      source::WriteFileOrThrow(options.report, report.dump(2) + "\n");
    }
    std::fprintf(stderr, "weft-run: %s on %d ranks (%s): median %.2f ms over %zu iteration(s)\n",
                 options.model.ToString().c_str(), ctx.world_size(), plan.mesh.ToString().c_str(),
                 Median(result.latencies_ms), result.latencies_ms.size());
    std::fprintf(stderr, "%s\n", one_forward.Report().c_str());
    if (result.check_ran) {
      std::fprintf(stderr, "weft-run: check %s: max abs error %.3g, max relative error %.3g (tolerance %.1g)\n",
                   result.check_passed ? "passed" : "FAILED", result.max_abs_error, result.max_rel_error,
                   result.tolerance);
    }
  }
  return result;
}

}  // namespace weft::exec

// `weft-run`: the runner. Every model runs as a program (a model dir or a tools/model_configs
// name is exported once into the program cache): it compiles (or reads) a plan, applies it to the
// program as edits and runs sharded forward passes on N ranks, checking the result against one
// device.
//
//   weft-run                          the main job: tiny Flux as a program (--program auto),
//                                     plans/flux.weft, 4 local CPU ranks as ring=2 x ulysses=2, --check
//   weft-run --model flux:small --mesh ulysses=4 --iters 5 --report json
//   weft-run --compiled plan.json --weights w.safetensors --inputs in.safetensors --output out.safetensors
//   weft-run --smoke --nproc 8 --mesh ring=2,ulysses=2,tp=2   (the distributed smoke job)
//   torchrun --nproc-per-node 4 --no-python weft-run ...   (joins as the rank torchrun gives it)
//   weft-run --calibrate -o machine.json   (measures this machine for the cost model)
//
// Two modes: when RANK/WORLD_SIZE are set (torchrun, srun wrappers, or our own launcher) the
// process joins the job as that rank; otherwise it is the launcher and starts itself --nproc
// times with the rank environment (forked: each rank runs this main again on that environment).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>  // TORCH_VERSION only

#include "compiler/source/version.h"
#include "compiler/source/output_file.h"
#include "compiler/model/graph_json.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"
#include "compiler/plan/mesh_spec.h"
#include "compiler/source/sha256.h"
#include "executor/allocator_policy.h"
#include "executor/auto_mesh.h"
#include "executor/calibrate.h"
#include "executor/device.h"
#include "executor/host_memory.h"
#include "executor/job_identity.h"
#include "executor/model_dir.h"
#include "executor/model_names.h"
#include "executor/plan_loader.h"
#include "executor/program_cache.h"
#include "executor/program_job.h"
#include "executor/smoke_job.h"
#include "runtime/dist/dist_context.h"
#include "runtime/dist/launcher.h"
#include "runtime/dist/world.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/fused.h"

namespace {

using namespace weft;
using exec::AvailableMemoryBytes;
using exec::Gb;

struct RunOptions {
  int nproc = 0;
  std::string mesh;
  std::string mesh_order;
  // Collective timeout: --timeout (seconds), --timeout-ms, WEFT_TIMEOUT_S, else 30 s.
  double timeout_s = 0;
  int timeout_ms = 0;
  int threads = 0;
  bool no_prefix = false;
  bool smoke = false;
  // The model's program (executor/program_job.h): --program FILE, else made by ResolveProgram.
  std::string program;
  bool program_file_given = false;
  std::string model_name;  // how reports and errors name the model
  bool dtype_given = false;
  std::string plan;
  std::string compiled;
  std::string model = "flux:tiny";
  std::string model_dir;
  std::string workload;
  int64_t batch = 0;  // --batch: the program's export batch (0: 2, the cache's default)
  std::string shard_weights;  // --shard-weights: "", cp, cfg, cp,cfg
  bool ulysses_anything = false;
  bool ring_anything = false;
  std::string rotate = "allgather";
  bool no_fp32_merge = false;
  bool unfused = false;
  std::string cpu_transport = "shm";
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::vector<std::string> weights;
  std::string inputs;                     // the first --inputs file (all of them: inputs_files)
  std::vector<std::string> inputs_files;  // more than one: guidance branches run as calls of their own
  std::string output;
  bool check = false;
  std::string expect;  // --program: a reference output file (the first; all: expect_files)
  std::vector<std::string> expect_files;
  double tolerance = 0;
  bool tolerance_given = false;
  int iters = 1;
  int warmup = 0;
  std::string trace;
  std::string profile_ops;
  std::string report;
  uint64_t seed = 0;
  // --dump-graph [FILE]: print the model's weft.graph/1 instead of running it.
  bool dump_graph = false;
  std::string dump_graph_file;
  std::string save_program;  // --save-program: copy the model's program here and run nothing
  std::string model_config;
  // --calibrate -o FILE [--quick]: a machine profile (executor/calibrate.h); its ranks run the
  // hidden --calibrate-collectives FILE.
  bool calibrate = false;
  std::string calibrate_out;
  bool quick = false;
  std::string calibrate_collectives;
  // --machine FILE: the cost model's profile (the report predicts the run; --mesh auto picks with it).
  std::string machine;
  int64_t memory_per_rank = 0;  // --mesh auto: the most a rank may need (0: available / ranks)
};

std::string VersionText() {
  std::string s = std::string("weft-run ") + weft::kVersion + " (LibTorch " + TORCH_VERSION + ", Gloo";
#ifdef WEFT_WITH_CUDA
  s += ", NCCL";
#endif
  return s + ")";
}

// A mistake in the command line or the environment: reported as "weft-run: <message>", exit 2.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

dist::Axis AxisNamed(std::string_view name) {
  if (name == plan::kRingAxis) return dist::Axis::kRing;
  if (name == plan::kUlyssesAxis) return dist::Axis::kUlysses;
  return name == plan::kCfgAxis ? dist::Axis::kCfg : dist::Axis::kTp;
}

// --mesh through the compiler's one mesh parser (compiler/plan/mesh_spec.h), so `weft` and
// `weft-run` accept the same text and refuse it with the same message.
dist::MeshShape ParseMesh(const std::string& text) {
  std::string error;
  const std::optional<plan::MeshSpec> spec = plan::ParseMeshSpec(text, &error);
  if (!spec) throw UsageError(error);
  dist::MeshShape shape;
  shape.ring = static_cast<int>(spec->ring);
  shape.ulysses = static_cast<int>(spec->ulysses);
  shape.tp = static_cast<int>(spec->tp);
  shape.cfg = static_cast<int>(spec->cfg);
  for (size_t i = 0; i < shape.order.size(); ++i) shape.order[i] = AxisNamed(spec->order[i]);
  return shape;
}

// What the weights are sliced over: --shard-weights, else what a --compiled plan was compiled
// with (its mesh's `weight_axes`; the job checks the rest of the plan).
std::string ShardWeights(const RunOptions& o) {
  if (!o.shard_weights.empty() || o.compiled.empty()) return o.shard_weights;
  std::ifstream in(o.compiled);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::string axes;
  if (doc.is_object() && doc.contains("mesh") && doc["mesh"].is_object() && doc["mesh"].contains("weight_axes") &&
      doc["mesh"]["weight_axes"].is_array()) {
    for (const auto& a : doc["mesh"]["weight_axes"]) {
      if (a.is_string()) axes += (axes.empty() ? "" : ",") + a.get<std::string>();
    }
  }
  return axes;
}

// The mesh this run uses. Without --mesh: ring=2,ulysses=2 for 4 ranks (the default job),
// else ulysses=N.
dist::MeshShape ResolveMesh(const RunOptions& o, int world_size) {
  dist::MeshShape shape;
  if (!o.mesh.empty()) {
    shape = ParseMesh(o.mesh);
  } else if (world_size == 4) {
    shape.ring = 2;
    shape.ulysses = 2;
  } else {
    shape.ulysses = world_size;
  }
  if (!o.mesh_order.empty()) {
    std::string error;
    const auto order = plan::ParseMeshOrder(o.mesh_order, &error, "--mesh-order: ");
    if (!order) throw UsageError(error);
    for (size_t i = 0; i < shape.order.size(); ++i) shape.order[i] = AxisNamed((*order)[i]);
  }
  // The group the weights are sliced over (dist::Axis::kWeights).
  const std::vector<std::string> weight_axes = plan::ParseWeightAxes(o.shard_weights);
  shape.weights_over_cp = std::count(weight_axes.begin(), weight_axes.end(), std::string(plan::kCpGroup)) > 0;
  shape.weights_over_cfg = std::count(weight_axes.begin(), weight_axes.end(), std::string(plan::kCfgAxis)) > 0;
  return shape;
}

// The collective (and rendezvous) timeout: --timeout SECONDS, --timeout-ms, else the
// environment's WEFT_TIMEOUT_S (seconds; c10d has no environment variable of its own for it),
// else 30 s.
std::chrono::milliseconds CollectiveTimeout(const RunOptions& o) {
  if (o.timeout_s > 0) return std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
  if (o.timeout_ms > 0) return std::chrono::milliseconds(o.timeout_ms);
  if (const char* env = std::getenv("WEFT_TIMEOUT_S"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const double seconds = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(seconds >= 0.1 && seconds <= 86400)) {
      throw UsageError(std::string("environment variable WEFT_TIMEOUT_S=`") + env +
                       "` is not a number of seconds in 0.1..86400");
    }
    return std::chrono::milliseconds(std::llround(seconds * 1000));
  }
  return std::chrono::seconds(30);
}

// What this rank runs, for the rendezvous to compare across ranks (dist::DistOptions::job):
// the launch, the kind of job, mesh and mode flags, the model's program, plan, weights and inputs
// by content (FileIdentity), seed and iterations.
exec::JobIdentity JobIdentityOf(const RunOptions& o, const dist::MeshShape& shape) {
  exec::JobIdentity id;
  auto add = [&](const std::string& key, const std::string& value) { id.emplace_back(key, value); };
  if (const std::string launch = exec::LaunchId(); !launch.empty()) add("launch", launch);
  add("weft-run", kVersion);
  add("job", o.smoke ? "smoke" : "program");
  add("mesh", shape.ToString());
  if (!o.shard_weights.empty()) add("shard weights", o.shard_weights);
  add("device", o.device);
  add("dtype", o.dtype_given ? o.dtype : "the program's");
  add("modes", std::string(o.ulysses_anything ? "ulysses-anything " : "") + (o.ring_anything ? "ring-anything " : "") +
                   "rotate=" + o.rotate + (o.no_fp32_merge ? " no-fp32-merge" : "") + (o.unfused ? " unfused" : ""));
  add("iterations", std::to_string(o.warmup) + " warm-up + " + std::to_string(o.iters));
  add("check", o.check ? (o.tolerance_given ? "tolerance " + std::to_string(o.tolerance) : "default tolerance") : "off");
  add("seed", std::to_string(o.seed));
  if (!o.workload.empty()) add("workload", o.workload);
  if (!o.program.empty()) add("program", exec::FileIdentity(o.program));
  if (!o.plan.empty()) add("plan", exec::FileIdentity(o.plan));
  if (!o.compiled.empty()) add("compiled plan", exec::FileIdentity(o.compiled));
  if (o.weights.empty()) add("weights", "seeded");
  for (size_t i = 0; i < o.weights.size(); ++i) add("weights " + std::to_string(i + 1), exec::FileIdentity(o.weights[i]));
  add("inputs", o.inputs.empty() ? "seeded" : exec::FileIdentity(o.inputs));
  for (size_t i = 1; i < o.inputs_files.size(); ++i) add("inputs " + std::to_string(i + 1), exec::FileIdentity(o.inputs_files[i]));
  return id;
}

// The batch of an --inputs file: dim 0 of its `hidden_states` (of its first tensor when it has
// none), from the safetensors header alone; 0 when unknown (the job names what is wrong with it).
int64_t InputsBatch(const std::string& file) {
  try {
    const io::SafetensorsFile f = io::SafetensorsFile::Open(file);
    const std::vector<std::string> keys = f.Keys();
    if (keys.empty()) return 0;
    const std::string key = f.Contains("hidden_states") ? "hidden_states" : keys.front();
    const std::vector<int64_t>& shape = f.Info(key).shape;
    return shape.empty() ? 0 : shape[0];
  } catch (const std::exception&) {
    return 0;
  }
}

// Every model runs as a program: --program FILE as it is; otherwise the program of --model-dir
// (else of --model's tools/model_configs entry, else of --model-config) from the program cache,
// exported there once (executor/program_cache.h). The launcher says what it does; its ranks find
// the entry it made.
void ResolveProgram(RunOptions& o) {
  if (o.smoke) return;
  if (!o.program.empty() && o.program != "auto") {
    if (o.batch > 0) throw UsageError("--batch with --program: a program is exported at its batch already");
    if (o.model_name.empty()) o.model_name = o.program;
    return;
  }
  exec::ProgramSource source;
  std::optional<exec::ModelDir> dir;
  if (!o.model_dir.empty()) {
    try {
      dir = exec::ReadModelDir(o.model_dir);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
    source.model_dir = o.model_dir;
    o.model_name = "--model-dir " + o.model_dir;
  } else if (!o.model_config.empty()) {
    source.config_file = o.model_config;
    o.model_name = o.model_config;
  } else {
    try {
      source.config_file = exec::ModelConfigFile(o.model, exec::DataDir());
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    o.model_name = o.model;
  }
  // The export is at a workload of the config (or, for a model dir, of its class's entries), its
  // sizes dynamic; --inputs are run on it, checked by the program's guards. Only a class that no
  // entry has workloads for is exported at the inputs themselves.
  if (dir && !exec::ClassHasModelConfig(dir->class_name, exec::DataDir())) source.inputs = o.inputs;
  source.workload = o.workload;
  source.dtype = o.dtype;
  // torch.export keeps a size dynamic from 2 up: inputs of batch 1 run on a program exported at
  // batch 1 (its own cache entry), never on one that would refuse them.
  if (!o.inputs.empty() && InputsBatch(o.inputs) == 1) source.batch = 1;
  if (o.batch > 0) {
    if (!o.inputs.empty()) throw UsageError("--batch with --inputs: the inputs file carries its own batch");
    source.batch = static_cast<int>(o.batch);
  }
  o.program = exec::FindOrExportProgram(source, !dist::LaunchedAsRank()).path;
  if (dir && o.weights.empty()) {
    if (!dist::LaunchedAsRank()) {
      try {
        exec::CheckCheckpointHoldsTheProgram(o.model_dir, program::ReadProgramFile(o.program), dir->weight_files);
      } catch (const std::runtime_error& e) {
        throw UsageError(e.what());
      }
    }
    o.weights = dir->weight_files;  // what the job loads and its identity names, found once
  }
}

// One rank of the job.
int RunRank(const RunOptions& o) {
  dist::WorldConfig world = dist::WorldFromEnv();
  dist::ConfigureIntraOpThreads(world.local_world_size, o.threads);
  nn::SetFusedKernels(!o.unfused);
  exec::ReuseFreedMemory();  // best effort: only speed depends on it
  dist::MeshShape shape = ResolveMesh(o, world.world_size);
  const c10::Device device = exec::SelectDevice(o.device, world);
  dist::DistOptions dopts;
  dopts.timeout = CollectiveTimeout(o);
  dopts.enable_nccl = device.is_cuda();
  if (o.cpu_transport == "gloo") dopts.shm_budget_bytes = 0;
  // Every rank compares what it runs with the others' before any collective.
  dopts.job = JobIdentityOf(o, shape);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<dist::DistContext> ctx = dist::DistContext::Create(world, shape, dopts);
  double setup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  int status = 0;
  if (o.smoke) {
    status = exec::RunSmokeJobAndReport(*ctx, setup_ms, std::cout);
  } else {
    exec::ProgramJobOptions job;
    job.program = o.program;
    job.model_name = o.model_name;
    job.plan = o.plan;
    job.compiled = o.compiled;
    for (dist::Axis axis : shape.order) {
      if (axis != dist::Axis::kCfg || shape.cfg > 1) job.mesh.axes.push_back({dist::AxisName(axis), shape.Size(axis)});
    }
    job.mesh.weight_axes = plan::ParseWeightAxes(o.shard_weights);
    job.mesh.world_size = shape.WorldSize();
    job.mesh.ulysses_anything = o.ulysses_anything;
    job.mesh.ring_anything = o.ring_anything;
    job.mesh.convert_to_fp32 = !o.no_fp32_merge;
    job.mesh.rotate_method = *plan::ParseRotateMethod(o.rotate);
    job.model_dir = o.model_dir;
    job.weights = o.weights;
    job.inputs = o.inputs;
    if (o.inputs_files.size() > 1) job.branch_inputs = o.inputs_files;
    job.workload = o.workload;
    job.output = o.output;
    job.dtype = o.dtype_given ? o.dtype : "";
    job.device = device;
    job.fast_kernels = !o.unfused;
    job.seed = o.seed;
    job.check = o.check;
    if (o.tolerance > 0) job.tolerance = o.tolerance;
    job.expect = o.expect;
    if (o.expect_files.size() > 1) job.branch_expect = o.expect_files;
    if (o.tolerance_given) job.expect_tolerance = o.tolerance;
    job.warmup = o.warmup;
    job.iters = o.iters;
    job.trace = o.trace;
    job.profile_ops = o.profile_ops;
    job.report = o.report;
    job.progress = world.rank == 0;
    job.machine = o.machine;
    job.cpu_transport = o.cpu_transport;
    status = exec::RunProgramJob(*ctx, job);
  }
  ctx->Shutdown();
  return status;
}

// --dump-graph: the weft.graph/1 view of the model's program (what `weft program --graph-json`
// prints); no ranks.
int DumpGraph(const RunOptions& o) {
  const std::string text = model::WriteGraphJson(program::GraphOfProgram(program::ReadProgramFile(o.program)));
  if (o.dump_graph_file.empty() || o.dump_graph_file == "-") {
    std::cout << text;
    return 0;
  }
  source::WriteFileOrThrow(o.dump_graph_file, text);
  return 0;
}

// --save-program: the model's program (the program cache's entry, exported into it once) copied to
// FILE; no ranks. What a check of a plan against a published config needs (tests/zoo), without
// exporting the model again for every check.
int SaveProgram(const RunOptions& o) {
  std::error_code ec;
  std::filesystem::copy_file(o.program, o.save_program, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) throw std::runtime_error("--save-program " + o.save_program + ": cannot write it (" + ec.message() + ")");
  std::cerr << "weft-run: wrote the program of " << o.model_name << " to " << o.save_program << "\n";
  return 0;
}

// A local job whose parameters alone exceed this machine's memory is killed by the OOM killer
// after minutes of loading; refuse it up front instead. The bound is a lower one -- per rank
// the parameters divided by tp, plus a whole unsharded copy with --check (the reference) -- so a
// job refused here could not have fitted. Returns the reason, or "" when the job may fit.
std::string MemoryRefusal(const RunOptions& o, const dist::MeshShape& shape, int nproc) {
  if (o.device != "cpu") return "";  // parameters live in device memory, not this host's
  const int64_t available = AvailableMemoryBytes();
  if (available <= 0) return "";
  const program::Program p = program::ReadProgramFile(o.program);
  int64_t params = 0;
  for (const auto& [fqn, sizes] : p.ParameterShapes()) {
    params += std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<int64_t>());
  }
  // The program's own dtype: its casts are baked in (another --dtype is refused by the job).
  const std::string dtype = p.manifest && p.manifest->dtype == "bf16" ? "bf16" : "fp32";
  const int64_t element = dtype == "bf16" ? 2 : 4;
  // Sliced weights (--shard-weights over P ranks) hold at least 1/P of what tp leaves.
  const int slices = shape.Size(dist::Axis::kWeights);
  const double per_rank =
      static_cast<double>(params) * element * (1.0 / (shape.tp * slices) + (o.check ? 1.0 : 0.0));
  if (per_rank * nproc <= static_cast<double>(available)) return "";
  return o.model_name + " needs at least " + Gb(per_rank * nproc) + " for its parameters on " + std::to_string(nproc) +
         " local rank(s) (" + std::to_string(params) + " parameters in " + dtype + ", divided by tp=" +
         std::to_string(shape.tp) + (slices > 1 ? " and by the " + std::to_string(slices) + " weight slices" : "") +
         (o.check ? ", plus an unsharded copy for --check" : "") +
         ") but this machine has " + Gb(static_cast<double>(available)) +
         " available; use " + (dtype == "bf16" ? std::string() : "--dtype bf16 (a bf16 export), ") +
         "a larger tp, --shard-weights, or fewer ranks per machine";
}

// The most local ranks weft-run starts on one machine: 16 per core (a rank is mostly idle while it
// waits in collectives, but each has its own LibTorch, threads and buffers), never more than
// 1024 (the --nproc limit).
int MaxLocalRanks() {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::min(1024, 16 * cores);
}

// What one rank takes before any parameter: its share of LibTorch, the runtime, the intra-op pool,
// Gloo and the shared-memory segments (measured: ~40 MB proportional set size per rank of a tiny
// Flux job on 4 ranks, 22 MB of it private; the ranks are the launcher forked, sharing the pages
// of its LibTorch. Ranks started by exec took ~235 MB, 200 MB private, with the CUDA libraries).
constexpr double kRankBaseBytes = 40e6;

// A local mesh this machine cannot hold: more ranks than MaxLocalRanks, or more than its memory
// holds even before parameters (hundreds of ranks would be spawned and swap or be killed minutes
// later). Returns the reason, or "".
std::string LocalRankRefusal(const RunOptions& o, int nproc) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const std::string what = o.nproc > 0        ? "--nproc " + std::to_string(nproc)
                           : !o.mesh.empty() ? "--mesh " + o.mesh + " has " + std::to_string(nproc) + " ranks"
                                             : std::to_string(nproc) + " ranks";
  if (nproc > MaxLocalRanks()) {
    return what + ", more local ranks than weft-run starts on this machine (" + std::to_string(MaxLocalRanks()) +
           ": 16 per core on its " + std::to_string(cores) +
           " core(s), never more than 1024); run a mesh this large across machines under torchrun or srun";
  }
  const int64_t available = AvailableMemoryBytes();
  if (available > 0 && nproc * kRankBaseBytes > static_cast<double>(available)) {
    return what + ": " + std::to_string(nproc) + " local ranks need about " + Gb(nproc * kRankBaseBytes) +
           " before any parameter (about " + Gb(kRankBaseBytes) + " each) but this machine has " +
           Gb(static_cast<double>(available)) + " available; use fewer ranks per machine";
  }
  return "";
}

int WeftRunMain(int argc, char** argv);

// Launcher mode: start nproc local ranks of ourselves with the same arguments.
int RunLauncher(const RunOptions& o, int argc, char** argv) {
  CollectiveTimeout(o);  // a bad WEFT_TIMEOUT_S is reported once, here
  int nproc = o.nproc;
  // Without --mesh or --nproc: a program file on one rank; a model (the main job too) on 4.
  if (nproc == 0) nproc = !o.mesh.empty() ? ParseMesh(o.mesh).WorldSize() : o.program_file_given ? 1 : 4;
  if (const std::string refusal = LocalRankRefusal(o, nproc); !refusal.empty()) {
    std::cerr << "weft-run: " << refusal << "\n";
    return 2;
  }
  dist::MeshShape shape = ResolveMesh(o, nproc);
  if (shape.WorldSize() != nproc) {
    std::cerr << "weft-run: --mesh " << shape.ToString() << " has " << shape.WorldSize()
              << " ranks but --nproc is " << nproc << "\n";
    return 2;
  }
  for (const auto& [over, axis, size] : {std::tuple{shape.weights_over_cp, "cp", shape.Size(dist::Axis::kCp)},
                                          std::tuple{shape.weights_over_cfg, "cfg", shape.cfg}}) {
    if (over && size == 1) {
      std::cerr << "weft-run: warning: --shard-weights " << o.shard_weights << ": the mesh's " << axis
                << " has one rank, so its weights stay whole there (replicated)\n";
    }
  }
  if (!o.smoke) {
    if (const std::string refusal = MemoryRefusal(o, shape, nproc); !refusal.empty()) {
      std::cerr << "weft-run: " << refusal << "\n";
      return 2;
    }
  }
  dist::LaunchOptions lo;
  lo.nproc = nproc;
  lo.argv.push_back(dist::SelfExecutable("weft-run"));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    lo.argv.push_back(a);
  }
  // Children must not re-launch: they see RANK and join. They are one job: its id is part of
  // every rank's job identity, so a rank of another job cannot join this one.
  std::random_device random;
  lo.env.emplace_back("WEFT_JOB_ID", dist::HostName() + "-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
  lo.threads_per_rank = o.threads;
  lo.prefix_output = !o.no_prefix;
  // `--report json` prints one JSON document on stdout for tools: rank 0's stdout goes there as
  // it is, the other ranks' lines to stderr with their prefix. Otherwise every line keeps its
  // rank prefix.
  lo.stdout_from_rank0 = o.report == "json";
  lo.error_channel = true;      // an error every rank raises is printed once
  lo.pass_listen_fd = true;  // the ranks are weft-run: rank 0 serves the store on the reserved port
  // Each rank is this process forked: weft-run's main again, on its rank's environment, without
  // LibTorch's start-up once more per rank.
  lo.run_in_fork = [args = lo.argv]() mutable {
    std::vector<char*> ptrs;
    for (std::string& a : args) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    return WeftRunMain(static_cast<int>(args.size()), ptrs.data());
  };
  dist::LaunchResult r = dist::Launch(lo);
  return r.exit_code;
}

// Why `path` cannot be written ("" when it can): opened for appending, so an existing file is left
// as it is and one made here is removed again.
std::string UnwritableReason(const std::string& path) {
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (f == nullptr) return std::strerror(errno);
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
  return "";
}

// --calibrate: no model, no mesh; the launcher measures and starts its own rank jobs.
int RunCalibrate(const RunOptions& o, const CLI::App& app) {
  for (const char* conflicting : {"--program", "--smoke", "--mesh", "--model", "--model-dir", "--model-config",
                                  "--plan", "--compiled", "--dump-graph"}) {
    if (app.get_option(conflicting)->count() > 0) {
      throw UsageError(std::string("--calibrate measures this machine and runs no model: not with ") + conflicting);
    }
  }
  if (o.calibrate_out.empty()) throw UsageError("--calibrate needs -o FILE, the machine profile to write");
  if (dist::LaunchedAsRank()) {
    throw UsageError("--calibrate starts its own ranks: run it outside torchrun/srun (RANK or WORLD_SIZE is set)");
  }
  // Refused now rather than after minutes of measuring.
  if (const std::string why = UnwritableReason(o.calibrate_out); !why.empty()) {
    throw UsageError("-o " + o.calibrate_out + ": cannot write it (" + why + ")");
  }
  exec::CalibrateOptions c;
  c.out = o.calibrate_out;
  c.max_ranks = o.nproc;
  c.quick = o.quick;
  c.device = o.device;
  c.timeout = CollectiveTimeout(o);
  return exec::RunCalibration(c, std::cout);
}

// --mesh auto (launcher only): weighs every mesh of --nproc ranks on the machine profile
// (executor/auto_mesh.h) -- without --machine, after a quick calibration of this machine, said so --
// and returns the command line its ranks run: --mesh, --rotate and --shard-weights as picked.
// Empty after a refusal it printed.
std::vector<std::string> PickAutoMesh(RunOptions& o, const std::vector<std::string>& argv) {
  if (o.nproc <= 0) throw UsageError("--mesh auto needs --nproc N: the ranks to weigh every mesh for");
  if (!o.compiled.empty()) throw UsageError("--mesh auto compiles the plan at every mesh: give --plan, not --compiled");
  if (o.machine.empty()) {
    // Beside the program cache (executor/program_cache.h), whose directory rules it shares.
    const std::string dir = std::filesystem::path(exec::ProgramCacheDir()).parent_path().string();
    o.machine = dir + "/machine-quick-" + dist::HostName() + ".json";
    if (!std::filesystem::exists(o.machine)) {
      std::cerr << "weft-run: --mesh auto without --machine: calibrating this machine briefly first (--calibrate "
                   "--quick -o "
                << o.machine << "; `weft-run --calibrate -o FILE` measures it fully)\n";
      exec::CalibrateOptions c;
      c.out = o.machine;
      c.max_ranks = o.nproc;
      c.quick = true;
      c.timeout = CollectiveTimeout(o);
      std::ostringstream summary;
      if (exec::RunCalibration(c, summary) != 0) throw std::runtime_error("the quick calibration failed:\n" + summary.str());
    } else {
      std::cerr << "weft-run: --mesh auto without --machine: using " << o.machine << " (a quick calibration of this "
                << "machine made earlier)\n";
    }
  }
  exec::AutoMeshRequest r;
  r.program = o.program;
  r.plan = o.plan;
  r.workload = o.workload;
  r.machine = o.machine;
  r.nproc = o.nproc;
  r.ulysses_anything = o.ulysses_anything;
  r.ring_anything = o.ring_anything;
  r.weight_sharding = o.shard_weights.empty();
  r.cpu_transport = o.cpu_transport;
  r.threads = o.threads;
  r.memory_per_rank = o.memory_per_rank;
  const exec::AutoMeshPick pick = exec::PickMesh(r, std::cerr);
  o.mesh = pick.mesh;
  o.rotate = pick.rotate;
  if (o.shard_weights.empty()) o.shard_weights = pick.shard_weights;
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--mesh" || a == "--rotate" || a == "--machine") {
      ++i;
      continue;
    }
    if (a.rfind("--mesh=", 0) == 0 || a.rfind("--rotate=", 0) == 0 || a.rfind("--machine=", 0) == 0) continue;
    out.push_back(a);
  }
  out.insert(out.end(), {"--mesh", o.mesh, "--rotate", o.rotate, "--machine", o.machine});
  if (!pick.shard_weights.empty() && std::find(out.begin(), out.end(), "--shard-weights") == out.end()) {
    out.insert(out.end(), {"--shard-weights", pick.shard_weights});
  }
  return out;
}

// The last words of a process: on the error channel of weft-run's launcher when this is one of
// its ranks (WEFT_ERROR_FD; the launcher prints an error that every rank raised identically once,
// with the ranks that raised it), else on stderr.
void ReportError(const std::string& text) {
  std::cerr.flush();
  std::fflush(nullptr);
  const char* fd_text = std::getenv("WEFT_ERROR_FD");
  const int fd = fd_text != nullptr ? std::atoi(fd_text) : -1;
  if (dist::LaunchedAsRank() && fd > 2) {
    const std::string line = text + "\n";
    if (::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size())) return;
  }
  std::cerr << text << "\n";
  std::cerr.flush();
}

// weft-run's whole command line; a forked rank (RunLauncher) enters here too.
int WeftRunMain(int argc, char** argv) {
  CLI::App app{"weft-run: run a model sharded by a weft plan on N local ranks, or as one rank under "
               "torchrun/srun.\nWith no arguments: tiny Flux as a program (exported once into the program cache) "
               "with plans/flux.weft on 4 local CPU ranks (ring=2 x ulysses=2), checked against the unsharded program."};
  app.set_version_flag("--version", VersionText());
  RunOptions o;
  app.add_option("--nproc", o.nproc, "Local ranks to spawn (default: the mesh's world size, 4)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mesh", o.mesh, "Mesh degrees, e.g. ring=2,ulysses=2,tp=1; cfg=N splits the batch of guidance "
                                   "branches over N rank groups (default for 4 ranks: ring=2,ulysses=2; otherwise "
                                   "ulysses=N)");
  app.add_option("--mesh-order", o.mesh_order,
                 "Axis order, outermost first (default cfg,tp,ring,ulysses: Ulysses groups are "
                 "contiguous ranks)");
  auto* timeout_ms_opt = app.add_option("--timeout-ms", o.timeout_ms, "The same as --timeout, in milliseconds")
                             ->check(CLI::Range(100, 86400000));
  app.add_option("--timeout", o.timeout_s,
                 "Seconds the rendezvous and every collective may take; a rank that waits longer exits "
                 "non-zero naming the peer it waited for, its host, the axis and the collective (default: "
                 "WEFT_TIMEOUT_S, else 30)")
      // NaN compares false with both bounds, so Range alone lets it through (and it became 30 s).
      ->check([](const std::string& text) {
        return std::isnan(std::strtod(text.c_str(), nullptr)) ? "Value " + text + " is not a number of seconds"
                                                               : std::string();
      })
      ->check(CLI::Range(0.1, 86400.0))
      ->excludes(timeout_ms_opt);
  app.add_option("--threads", o.threads,
                 "Intra-op threads per rank (default: WEFT_THREADS, else cores / local ranks)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--no-prefix", o.no_prefix, "Do not prefix rank output with [rank k]");
  app.add_flag("--smoke", o.smoke, "Run the distributed smoke job (every collective, exact checks) instead of a model");
  auto* plan_opt = app.add_option("--plan", o.plan, "Plan to compile for this job (.weft or .json; default: "
                                                    "plans/<family>.weft)")->check(CLI::ExistingFile);
  app.add_option("--compiled", o.compiled, "Compiled plan (weft.plan/1 JSON from `weft compile`)")
      ->check(CLI::ExistingFile)->excludes(plan_opt);
  auto* program_opt = app.add_option("--program", o.program, "A torch.export program (.pt2, tools/export_program.py) to "
                                                             "run; without it weft-run runs the program of --model-dir "
                                                             "(else --model), exported once into the program cache "
                                                             "($WEFT_PROGRAM_CACHE, else ~/.cache/weft/programs). Weights "
                                                             "from --model-dir or --weights (default: seeded), inputs from "
                                                             "--inputs (default: made at its first workload). On a mesh the "
                                                             "plan (--plan, default: plans/ for its class) is compiled into "
                                                             "the program; --check compares with the unsharded program (on "
                                                             "one rank: the plain interpreter's)")
                          ->check(CLI::Validator(
                              [](std::string& v) { return v == "auto" ? std::string() : CLI::ExistingFile(v); },
                              "FILE or auto"));
  auto* model_opt = app.add_option("--model", o.model, "A model of tools/model_configs by its file name (qwen-image-tiny, "
                                     "wan2.1-t2v-1.3b ...) or short name: flux:{tiny,small,dev,schnell}, "
                                     "wan:{tiny,tiny-i2v,small,1.3b,14b} (default flux:tiny)");
  app.add_option("--model-dir", o.model_dir, "A diffusers save_pretrained directory (config.json + *.safetensors, "
                                             "sharded index files too): the model and its weights")
      ->check(CLI::ExistingDirectory);
  app.add_option("--workload", o.workload, "Graph workload to compile for and size the inputs by (default: the "
                                           "graph's first)");
  app.add_option("--batch", o.batch, "The batch the model's program is exported at and its inputs are made at "
                                     "(default 2: conditional and unconditional guidance branches); not with --program "
                                     "or --inputs, which carry their own")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--shard-weights", o.shard_weights, "Slice each block's parameters over these ranks (cp, cfg or "
                                                     "cp,cfg) and gather them just before the block runs, the next "
                                                     "block's while this one computes")
      ->check(CLI::IsMember({"cp", "cfg", "cp,cfg", "cfg,cp"}));
  app.add_flag("--ulysses-anything", o.ulysses_anything, "Allow uneven sequence lengths and head counts");
  app.add_flag("--ring-anything", o.ring_anything, "Allow uneven sequence lengths on the ring axis");
  app.add_option("--rotate", o.rotate, "Ring K/V exchange: allgather or p2p")
      ->check(CLI::IsMember({"allgather", "p2p", "alltoall"}));
  app.add_flag("--no-fp32-merge", o.no_fp32_merge, "Merge ring partial results in the input dtype");
  app.add_flag("--unfused", o.unfused,
               "No fast paths: every module called on its own and every Linear on at::linear (no fused "
               "kernels, no packed weight copies); for A/B timing and debugging");
  app.add_option("--cpu-transport", o.cpu_transport,
                 "CPU collectives: shm (shared memory between ranks on one host; groups spanning hosts use "
                 "Gloo) or gloo")
      ->check(CLI::IsMember({"shm", "gloo"}));
  app.add_option("--device", o.device, "cpu (shared memory or Gloo, see --cpu-transport) or cuda (NCCL; local rank i on GPU i)")->check(CLI::IsMember({"cpu", "cuda"}));
  auto* dtype_opt = app.add_option("--dtype", o.dtype, "fp32 or bf16 (with --program: the program's, which is the default)")
                        ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--weights", o.weights, "Checkpoint safetensors file(s) in diffusers key names (default: "
                                         "seeded random weights)")->check(CLI::ExistingFile);
  app.add_option("--inputs", o.inputs_files, "Inputs as safetensors keyed by forward argument name (default: seeded "
                                             "random); once per guidance branch for a plan whose guidance_parallel "
                                             "says `calls` (each branch a forward call of its own)")
      ->check(CLI::ExistingFile);
  app.add_option("--output", o.output, "Write the gathered output to this safetensors file (rank 0)");
  auto* dump_opt = app.add_option("--dump-graph", o.dump_graph_file,
                                  "Print the weft.graph/1 view of the model's program (at the workloads of its "
                                  "tools/model_configs entry) to stdout or FILE, and exit")
                       ->expected(0, 1);
  app.add_option("--save-program", o.save_program,
                 "Write the model's program (--model, --model-config or --model-dir; exported into the program cache "
                 "once) to this file, and exit");
  app.add_option("--model-config", o.model_config,
                 "A model config in the tools/model_configs format (class, config, workloads) to export and run");
  app.add_flag("--check", o.check, "Compare with an unsharded run; non-zero exit above the tolerance");
  app.add_option("--expect", o.expect_files,
                 "With --program: compare the output with a reference safetensors file (keys as --output writes them, "
                 "e.g. diffusers' own output); non-zero exit above --tolerance x max|reference| (default 1e-4 fp32, "
                 "2e-2 bf16); with guidance branches as calls, once per branch (or once, the branches stacked)")
      ->check(CLI::ExistingFile);
  auto* tolerance_opt = app.add_option("--tolerance", o.tolerance, "Relative tolerance of --check, a finite number >= 0 "
                                                                  "(default 1e-5 fp32 CP, 1e-4 with TP, 2e-2 bf16)");
  app.add_option("--iters", o.iters, "Timed iterations (median reported)")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "Untimed iterations first")->check(CLI::Range(0, 100000));
  app.add_option("--trace", o.trace, "Write Chrome trace JSON per rank to PREFIX.rank<r>.json");
  app.add_option("--profile-ops", o.profile_ops,
                 "Write LibTorch's per-operator profile of the timed iterations to PREFIX.rank<r>.json "
                 "(bench/op_self_time.py sums it per operator)");
  app.add_option("--report", o.report, "`json`: print a JSON report on stdout; or a file to write it to");
  app.add_option("--seed", o.seed, "Seed of random weights and inputs");
  app.add_option("--machine", o.machine, "A machine profile (weft.machine/1, from --calibrate): the report predicts this "
                                        "run's latency and peak memory; --mesh auto picks the mesh with it")
      ->check(CLI::ExistingFile);
  app.add_option("--memory-per-rank", o.memory_per_rank, "With --mesh auto: the most memory a rank may need "
                                                         "(default: this machine's available memory / ranks)")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  app.add_flag("--calibrate", o.calibrate,
               "Measure this machine (matmul, attention, elementwise rates at 1 thread and all cores; every "
               "collective on shm and Gloo for 2..--nproc local ranks, default min(8, 4 x cores)) and write a "
               "machine profile (weft.machine/1) for the cost model to -o FILE; with --device cuda: GPU 0's "
               "rates and every collective over NCCL for 2..--nproc GPUs (default: every GPU)");
  app.add_option("-o,--out", o.calibrate_out, "With --calibrate: the machine profile to write");
  app.add_flag("--quick", o.quick, "With --calibrate: fewer and smaller sizes (seconds, for tests)");
  // A rank of --calibrate's collective jobs: rank 0 writes its measurements to FILE.
  app.add_option("--calibrate-collectives", o.calibrate_collectives)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // No arguments at all: the main job -- tiny Flux as a program (exported once into the program
  // cache), plans/flux.weft compiled into it, on 4 local ranks as ring=2 x ulysses=2, checked
  // against the unsharded program.
  if (argc == 1) {
    o.check = true;
    o.mesh = "ring=2,ulysses=2";
  }
  if (!o.inputs_files.empty()) o.inputs = o.inputs_files.front();
  if (!o.expect_files.empty()) o.expect = o.expect_files.front();
  o.program_file_given = program_opt->count() > 0 && o.program != "auto";
  o.dump_graph = dump_opt->count() > 0;
  o.dtype_given = dtype_opt->count() > 0;
  o.tolerance_given = tolerance_opt->count() > 0;
  if (o.tolerance_given && !(std::isfinite(o.tolerance) && o.tolerance >= 0)) {
    std::cerr << "weft-run: --tolerance " << tolerance_opt->as<std::string>()
              << ": expected a finite number >= 0 (the largest max|sharded - unsharded| / max|unsharded| "
                 "--check accepts, e.g. 1e-5)\n";
    return 2;
  }
  if (program_opt->count() > 0 && o.smoke) {
    std::cerr << "weft-run: --program runs a program; --smoke runs no model\n";
    return 2;
  }
  if (o.program_file_given && model_opt->count() > 0) {
    std::cerr << "weft-run: --program " << o.program << " and --model " << o.model
              << " both name the model to run; give one\n";
    return 2;
  }
  if (!o.calibrate && !o.calibrate_out.empty()) {
    std::cerr << "weft-run: -o " << o.calibrate_out << " is the profile --calibrate writes; a model's output "
              << "goes to --output\n";
    return 2;
  }
  if (o.quick && !o.calibrate && o.calibrate_collectives.empty()) {
    std::cerr << "weft-run: --quick is a --calibrate option\n";
    return 2;
  }
  if (o.device == "cuda") {
#ifndef WEFT_WITH_CUDA
    std::cerr << "weft-run: --device cuda needs a build with CUDA (-DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)\n";
    return 2;
#endif
  }
  try {
    if (!o.calibrate_collectives.empty()) {
      if (!dist::LaunchedAsRank()) throw UsageError("--calibrate-collectives is for the ranks --calibrate starts");
      exec::CollectiveCalibrationOptions c;
      c.result_file = o.calibrate_collectives;
      c.device = o.device;
      c.transport = o.device == "cuda" ? "nccl" : o.cpu_transport;
      c.quick = o.quick;
      c.timeout = CollectiveTimeout(o);
      return exec::RunCollectiveCalibrationRank(c);
    }
    if (o.calibrate) return RunCalibrate(o, app);
    if (!o.save_program.empty()) {
      if (o.program_file_given) {
        throw UsageError("--save-program writes the program of a model (--model, --model-config, --model-dir); "
                         "--program " + o.program + " is one already");
      }
      // Refused now rather than after an export of minutes.
      if (const std::string why = UnwritableReason(o.save_program); !why.empty()) {
        throw UsageError("--save-program " + o.save_program + ": cannot write it (" + why + ")");
      }
    }
    o.shard_weights = ShardWeights(o);  // once: the launcher's mesh and every rank's read it
    ResolveProgram(o);
    std::vector<std::string> args(argv, argv + argc);
    if (o.mesh == "auto") {
      if (dist::LaunchedAsRank()) {
        throw UsageError("--mesh auto is picked by weft-run's own launcher (--nproc N); under torchrun or srun give "
                         "the mesh (`weft explain PLAN --program M --mesh auto --nproc N --machine F` ranks them)");
      }
      args = PickAutoMesh(o, args);
    }
    std::vector<char*> arg_ptrs;
    for (std::string& a : args) arg_ptrs.push_back(a.data());
    const int status = !o.save_program.empty() ? SaveProgram(o) : o.dump_graph ? DumpGraph(o) : dist::LaunchedAsRank() ? RunRank(o)
                                     : RunLauncher(o, static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
    // A report or graph on a full disk or a closed pipe shows only now: never exit 0 with it lost.
    if (const std::string failure = source::StdoutFailure(); !failure.empty()) {
      ReportError("weft-run: error: cannot write to stdout: " + failure);
      return status != 0 ? status : 1;
    }
    return status;
  } catch (const UsageError& e) {
    ReportError(std::string("weft-run: ") + e.what());
    std::_Exit(2);
  } catch (const c10::Error& e) {
    // LibTorch's own message, without the C++ backtrace c10 appends to what().
    ReportError(std::string("weft-run: error: ") + e.what_without_backtrace());
    std::_Exit(1);
  } catch (const std::exception& e) {
    ReportError(std::string("weft-run: error: ") + e.what());
    // Skip destructors: c10d teardown after a failed peer may block.
    std::_Exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) { return WeftRunMain(argc, argv); }

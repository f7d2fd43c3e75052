// `weft-run`: the runner. Compiles (or reads) a plan, applies it to a program (or installs it on a
// built-in model) and runs sharded forward passes on N ranks, checking the result against one
// device.
//
//   weft-run                          the main job: tiny Flux as a program (--program auto),
//                                     plans/flux.weft, 4 local CPU ranks as ring=2 x ulysses=2, --check
//   weft-run --model flux:small --mesh ulysses=4 --iters 5 --report json
//   weft-run --compiled plan.json --weights w.safetensors --inputs in.safetensors --output out.safetensors
//   weft-run --smoke --nproc 8 --mesh ring=2,ulysses=2,tp=2   (the distributed smoke job)
//   torchrun --nproc-per-node 4 --no-python weft-run ...   (joins as the rank torchrun gives it)
//
// Two modes: when RANK/WORLD_SIZE are set (torchrun, srun wrappers, or our own launcher) the
// process joins the job as that rank; otherwise it is the launcher and re-executes itself
// --nproc times with the rank environment.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>  // TORCH_VERSION only

#include "compiler/source/version.h"
#include "compiler/source/output_file.h"
#include "compiler/model/graph_json.h"
#include "compiler/plan/mesh_spec.h"
#include "compiler/source/sha256.h"
#include "executor/allocator_policy.h"
#include "executor/device.h"
#include "executor/graph_dump.h"
#include "executor/host_memory.h"
#include "executor/job_identity.h"
#include "executor/model_dir.h"
#include "executor/plan_loader.h"
#include "executor/program_cache.h"
#include "executor/program_job.h"
#include "executor/run_job.h"
#include "executor/smoke_job.h"
#include "runtime/dist/dist_context.h"
#include "runtime/dist/launcher.h"
#include "runtime/dist/world.h"
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
  // The job (executor/run_job.h), or a program's (executor/program_job.h).
  std::string program;
  bool dtype_given = false;
  std::string plan;
  std::string compiled;
  std::string model = "flux:tiny";
  std::string model_dir;
  std::string graph;
  std::string workload;
  bool ulysses_anything = false;
  bool ring_anything = false;
  std::string rotate = "allgather";
  bool no_fp32_merge = false;
  bool unfused = false;
  std::string cpu_transport = "shm";
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::vector<std::string> weights;
  std::string inputs;
  std::string output;
  bool check = false;
  std::string expect;  // --program: a reference output file
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
  std::string model_config;
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
  return name == plan::kRingAxis ? dist::Axis::kRing : name == plan::kUlyssesAxis ? dist::Axis::kUlysses : dist::Axis::kTp;
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
  for (size_t i = 0; i < 3; ++i) shape.order[i] = AxisNamed(spec->order[i]);
  return shape;
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
    for (size_t i = 0; i < 3; ++i) shape.order[i] = AxisNamed((*order)[i]);
  }
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

// The model of the job and its weight files: --model-dir (a diffusers save_pretrained
// directory: class, config and weights) or --model with --weights.
struct JobModel {
  models::ModelSpec spec;
  std::vector<std::string> weights;
  std::string graph_hash;  // exec::ModelGraphHash(spec), computed once per rank (RunRank)
};

JobModel ResolveModel(const RunOptions& o) {
  if (o.model_dir.empty()) return {models::ParseModelSpec(o.model), o.weights, {}};
  exec::ModelDir dir = exec::ReadModelDir(o.model_dir);
  return {dir.spec, o.weights.empty() ? dir.weight_files : o.weights, {}};
}

// The plan of the job: --compiled, or --plan (default: the model's plan in plans/) compiled
// here against the model's graph for this mesh.
exec::LoadedPlan LoadJobPlan(const RunOptions& o, const JobModel& model, const dist::MeshShape& shape) {
  const models::ModelSpec& spec = model.spec;
  const std::string data = exec::DataDir();
  exec::PlanRequest request;
  request.compiled_file = o.compiled;
  request.plan_file = o.plan.empty() ? exec::PlanFileFor(spec, data) : o.plan;
  request.graph_file = o.graph;
  if (request.graph_file.empty()) {
    request.graph_file = o.model_dir.empty() ? exec::GraphFileFor(spec, data) : exec::GraphFileMatching(model.graph_hash, data);
  }
  if (o.compiled.empty() && request.graph_file.empty()) {
    // No committed graph describes this model (e.g. a checkpoint of an unpublished config):
    // compile against the graph traced from the model itself, as --dump-graph prints it.
    request.graph = exec::DumpModelGraphForRun(spec, data);
  }
  request.workload = o.workload;
  for (dist::Axis axis : shape.order) {
    request.mesh.axes.push_back({dist::AxisName(axis), shape.Size(axis)});
  }
  request.mesh.world_size = shape.WorldSize();
  request.mesh.ulysses_anything = o.ulysses_anything;
  request.mesh.ring_anything = o.ring_anything;
  request.mesh.convert_to_fp32 = !o.no_fp32_merge;
  request.mesh.rotate_method = *plan::ParseRotateMethod(o.rotate);
  request.activation_bytes = o.dtype == "fp32" ? 4 : 2;
  request.model = spec;  // re-derived from the model itself: no edited plan or graph runs
  request.model_graph_hash = model.graph_hash;
  return exec::LoadPlan(request);
}

exec::JobOptions JobOptionsFrom(const RunOptions& o, const JobModel& model, const exec::LoadedPlan& loaded) {
  exec::JobOptions j;
  j.model = model.spec;
  j.weights = model.weights;
  j.inputs = o.inputs;
  j.output = o.output;
  j.workload = exec::WorkloadFromGraph(j.model.family, loaded.graph_workload);
  j.seed = o.seed;
  j.dtype = o.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  j.check = o.check;
  if (o.tolerance_given) j.tolerance = o.tolerance;
  j.warmup = o.warmup;
  j.iters = o.iters;
  j.trace = o.trace;
  j.profile_ops = o.profile_ops;
  j.report = o.report;
  j.plan_hash = loaded.hash;
  j.model_graph_hash = model.graph_hash;
  return j;
}

// What this rank runs, for the rendezvous to compare across ranks (dist::DistOptions::job):
// the launch, the kind of job, mesh and mode flags, model and its config, plan and graph,
// weights and inputs by content (FileIdentity), seed and iterations. `model` and `loaded` are
// null for the smoke and program jobs.
exec::JobIdentity JobIdentityOf(const RunOptions& o, const dist::MeshShape& shape, const JobModel* model,
                                const exec::LoadedPlan* loaded) {
  exec::JobIdentity id;
  auto add = [&](const std::string& key, const std::string& value) { id.emplace_back(key, value); };
  if (const std::string launch = exec::LaunchId(); !launch.empty()) add("launch", launch);
  add("weft-run", kVersion);
  add("job", o.smoke ? "smoke" : !o.program.empty() ? "program" : "model");
  add("mesh", shape.ToString());
  add("device", o.device);
  add("dtype", o.dtype_given || o.program.empty() ? o.dtype : "the program's");
  add("modes", std::string(o.ulysses_anything ? "ulysses-anything " : "") + (o.ring_anything ? "ring-anything " : "") +
                   "rotate=" + o.rotate + (o.no_fp32_merge ? " no-fp32-merge" : "") + (o.unfused ? " unfused" : ""));
  add("iterations", std::to_string(o.warmup) + " warm-up + " + std::to_string(o.iters));
  add("check", o.check ? (o.tolerance_given ? "tolerance " + std::to_string(o.tolerance) : "default tolerance") : "off");
  add("seed", std::to_string(o.seed));
  if (!o.workload.empty()) add("workload", o.workload);
  if (model != nullptr) {
    add("model", model->spec.ToString());
    if (!model->spec.config_json.empty()) add("model config", "sha256:" + source::Sha256Hex(model->spec.config_json));
    add("model graph", model->graph_hash);
  }
  if (loaded != nullptr) {
    add("plan", loaded->hash);
    add("graph", loaded->plan.graph_hash);
  }
  if (!o.program.empty()) add("program", exec::FileIdentity(o.program));
  const std::vector<std::string>& weights = model != nullptr ? model->weights : o.weights;
  if (weights.empty()) add("weights", "seeded");
  for (size_t i = 0; i < weights.size(); ++i) add("weights " + std::to_string(i + 1), exec::FileIdentity(weights[i]));
  add("inputs", o.inputs.empty() ? "seeded" : exec::FileIdentity(o.inputs));
  return id;
}

// The class config.json names, "" when it names none (a malformed config.json is left to
// ReadModelDir, whose messages name what is wrong with it).
std::string ClassOfModelDir(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("_class_name") || !config["_class_name"].is_string()) return "";
  return config["_class_name"].get<std::string>();
}

// --program auto, or --model-dir of a class weft has no hand-written model for: the program of
// the model (--model-dir, else --model's tools/model_configs entry) from the program cache,
// exported there once (executor/program_cache.h). The launcher says what it does; its ranks
// find the entry it made.
void ResolveProgram(RunOptions& o) {
  const std::string cls = o.program.empty() && !o.model_dir.empty() ? ClassOfModelDir(o.model_dir) : "";
  const bool no_builtin = !cls.empty() && !o.smoke && !o.dump_graph && models::FamilyOfClass(cls).empty();
  if (o.program != "auto" && !no_builtin) return;
  exec::ProgramSource source;
  if (!o.model_dir.empty()) {
    source.model_dir = o.model_dir;
  } else {
    source.config_file = exec::ModelConfigFileFor(models::ParseModelSpec(o.model), exec::DataDir());
    if (source.config_file.empty()) {
      throw UsageError("--program auto: no tools/model_configs entry for --model " + o.model + " in " +
                       exec::DataDir() + " to export it from");
    }
  }
  source.inputs = o.inputs;
  source.workload = o.workload;
  source.dtype = o.dtype;
  o.program = exec::FindOrExportProgram(source, !dist::LaunchedAsRank()).path;
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
  // The model's job: its model and plan are resolved before the rendezvous, so that every rank
  // can compare what it runs with the others' before any collective.
  std::optional<JobModel> job_model;
  std::optional<exec::LoadedPlan> job_plan;
  if (!o.smoke && o.program.empty()) {
    job_model = ResolveModel(o);
    job_model->graph_hash = exec::ModelGraphHash(job_model->spec);
    job_plan = LoadJobPlan(o, *job_model, shape);
  }
  dopts.job = JobIdentityOf(o, shape, job_model ? &*job_model : nullptr, job_plan ? &*job_plan : nullptr);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<dist::DistContext> ctx = dist::DistContext::Create(world, shape, dopts);
  double setup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  int status = 0;
  if (o.smoke) {
    status = exec::RunSmokeJobAndReport(*ctx, setup_ms, std::cout);
  } else if (!o.program.empty()) {
    exec::ProgramJobOptions job;
    job.program = o.program;
    job.plan = o.plan;
    job.compiled = o.compiled;
    for (dist::Axis axis : shape.order) job.mesh.axes.push_back({dist::AxisName(axis), shape.Size(axis)});
    job.mesh.world_size = shape.WorldSize();
    job.mesh.ulysses_anything = o.ulysses_anything;
    job.mesh.ring_anything = o.ring_anything;
    job.mesh.convert_to_fp32 = !o.no_fp32_merge;
    job.mesh.rotate_method = *plan::ParseRotateMethod(o.rotate);
    job.model_dir = o.model_dir;
    job.weights = o.weights;
    job.inputs = o.inputs;
    job.workload = o.workload;
    job.output = o.output;
    job.dtype = o.dtype_given ? o.dtype : "";
    job.device = device;
    job.fast_kernels = !o.unfused;
    job.seed = o.seed;
    job.check = o.check;
    if (o.tolerance > 0) job.tolerance = o.tolerance;
    job.expect = o.expect;
    if (o.tolerance_given) job.expect_tolerance = o.tolerance;
    job.warmup = o.warmup;
    job.iters = o.iters;
    job.trace = o.trace;
    job.profile_ops = o.profile_ops;
    job.report = o.report;
    job.progress = world.rank == 0;
    status = exec::RunProgramJob(*ctx, job);
  } else {
    exec::JobOptions job = JobOptionsFrom(o, *job_model, *job_plan);
    job.device = device;
    exec::JobResult result = exec::RunJob(*ctx, job_plan->plan, job);
    status = result.exit_code;
  }
  ctx->Shutdown();
  return status;
}

// --dump-graph: the model's graph from the C++ model on the meta device; no ranks.
int DumpGraph(const RunOptions& o) {
  const JobModel model = ResolveModel(o);
  std::string config_file = o.model_config;
  if (config_file.empty()) config_file = exec::ModelConfigFileFor(model.spec, exec::DataDir());
  if (config_file.empty()) {
    std::cerr << "weft-run: no tools/model_configs entry (the workloads to trace) for " << model.spec.ToString()
              << " in " << exec::DataDir() << "; pass one with --model-config\n";
    return 2;
  }
  const std::string text = model::WriteGraphJson(exec::DumpModelGraph(model.spec, config_file));
  if (o.dump_graph_file.empty() || o.dump_graph_file == "-") {
    std::cout << text;
    return 0;
  }
  source::WriteFileOrThrow(o.dump_graph_file, text);
  return 0;
}

// A local job whose parameters alone exceed this machine's memory is killed by the OOM killer
// after minutes of loading; refuse it up front instead. The bound is a lower one -- per rank
// the parameters divided by tp, plus a whole unsharded copy with --check (the reference) -- so a
// job refused here could not have fitted. Returns the reason, or "" when the job may fit.
std::string MemoryRefusal(const RunOptions& o, const models::ModelSpec& spec, const dist::MeshShape& shape, int nproc) {
  if (o.device != "cpu") return "";  // parameters live in device memory, not this host's
  const int64_t available = AvailableMemoryBytes();
  if (available <= 0) return "";
  int64_t params = 0;
  for (const auto& [name, tensor] : models::CreateModel(spec)->NamedParameters()) params += tensor->numel();
  const int64_t element = o.dtype == "bf16" ? 2 : 4;
  const double per_rank = static_cast<double>(params) * element * (1.0 / shape.tp + (o.check ? 1.0 : 0.0));
  if (per_rank * nproc <= static_cast<double>(available)) return "";
  return spec.ToString() + " needs at least " + Gb(per_rank * nproc) + " for its parameters on " + std::to_string(nproc) +
         " local rank(s) (" + std::to_string(params) + " parameters in " + o.dtype + ", divided by tp=" +
         std::to_string(shape.tp) + (o.check ? ", plus an unsharded copy for --check" : "") +
         ") but this machine has " + Gb(static_cast<double>(available)) +
         " available; use --dtype bf16, a larger tp, or fewer ranks per machine";
}

// The most local ranks weft-run starts on one machine: 16 per core (a rank is mostly idle while it
// waits in collectives, but each has its own LibTorch, threads and buffers), never more than
// 1024 (the --nproc limit).
int MaxLocalRanks() {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::min(1024, 16 * cores);
}

// What one rank takes before any parameter: LibTorch, the runtime, the intra-op pool, Gloo and
// the shared-memory segments (measured: ~235 MB proportional set size per rank of a tiny Flux
// job on 4 ranks, 200 MB of it private).
constexpr double kRankBaseBytes = 230e6;

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

// Launcher mode: re-execute ourselves on nproc local ranks.
int RunLauncher(const RunOptions& o, int argc, char** argv) {
  CollectiveTimeout(o);  // a bad WEFT_TIMEOUT_S is reported once, here
  // Bad arguments are reported once, here, rather than by every rank.
  std::optional<JobModel> model;
  if (!o.smoke && o.program.empty()) {
    try {
      model = ResolveModel(o);
    } catch (const std::exception& e) {
      std::cerr << "weft-run: " << e.what() << "\n";
      return 2;
    }
  }
  int nproc = o.nproc;
  if (nproc == 0) nproc = !o.mesh.empty() ? ParseMesh(o.mesh).WorldSize() : o.program.empty() ? 4 : 1;
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
  if (model) {
    if (const std::string refusal = MemoryRefusal(o, model->spec, shape, nproc); !refusal.empty()) {
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
  dist::LaunchResult r = dist::Launch(lo);
  return r.exit_code;
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-run: run a model sharded by a weft plan on N local ranks, or as one rank under "
               "torchrun/srun.\nWith no arguments: tiny Flux as a program (exported once into the program cache) "
               "with plans/flux.weft on 4 local CPU ranks (ring=2 x ulysses=2), checked against the unsharded program."};
  app.set_version_flag("--version", VersionText());
  RunOptions o;
  app.add_option("--nproc", o.nproc, "Local ranks to spawn (default: the mesh's world size, 4)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mesh", o.mesh, "Mesh degrees, e.g. ring=2,ulysses=2,tp=1 (default for 4 ranks: "
                                   "ring=2,ulysses=2; otherwise ulysses=N)");
  app.add_option("--mesh-order", o.mesh_order,
                 "Axis order, outermost first (default tp,ring,ulysses: Ulysses groups are "
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
                                                             "run instead of a built-in model, or `auto`: the program of "
                                                             "--model-dir (else --model), exported once into the program "
                                                             "cache ($WEFT_PROGRAM_CACHE, else ~/.cache/weft/programs; a "
                                                             "--model-dir of a class without a built-in model always "
                                                             "runs so). Weights from --model-dir "
                                                             "or --weights (default: seeded), inputs from --inputs "
                                                             "(default: made at its first workload). On a mesh the plan "
                                                             "(--plan, default: plans/ for its class) is compiled into "
                                                             "the program; --check compares with the unsharded program "
                                                             "(on one rank: with the built-in model of its class)")
                          ->check(CLI::Validator(
                              [](std::string& v) { return v == "auto" ? std::string() : CLI::ExistingFile(v); },
                              "FILE or auto"));
  auto* model_opt = app.add_option("--model", o.model, "Built-in model NAME:CONFIG: flux:{tiny,small,dev,schnell}, "
                                     "wan:{tiny,small,1.3b,14b,...} (default flux:tiny)");
  app.add_option("--model-dir", o.model_dir, "A diffusers save_pretrained directory (config.json + *.safetensors, "
                                             "sharded index files too): the model, its weights, its graph")
      ->check(CLI::ExistingDirectory);
  app.add_option("--graph", o.graph, "The model's graph (weft.graph/1; default: the one in graphs/ with the model's structure "
                                     "hash, else the graph traced from the model as --dump-graph prints it)")
      ->check(CLI::ExistingFile);
  app.add_option("--workload", o.workload, "Graph workload to compile for and size the inputs by (default: the "
                                           "graph's first)");
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
  app.add_option("--inputs", o.inputs, "Inputs as safetensors keyed by forward argument name (default: seeded "
                                       "random)")->check(CLI::ExistingFile);
  app.add_option("--output", o.output, "Write the gathered output to this safetensors file (rank 0)");
  auto* dump_opt = app.add_option("--dump-graph", o.dump_graph_file,
                                  "Print the model's weft.graph/1 (traced on the meta device at the workloads of "
                                  "tools/model_configs/<name>.json) to stdout or FILE, and exit")
                       ->expected(0, 1);
  app.add_option("--model-config", o.model_config,
                 "With --dump-graph: the model config with the workloads to trace (tools/model_configs format)");
  app.add_flag("--check", o.check, "Compare with an unsharded run; non-zero exit above the tolerance");
  app.add_option("--expect", o.expect,
                 "With --program: compare the output with a reference safetensors file (keys as --output writes them, "
                 "e.g. diffusers' own output); non-zero exit above --tolerance x max|reference| (default 1e-4 fp32, "
                 "2e-2 bf16)")
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
    o.program = "auto";
    o.mesh = "ring=2,ulysses=2";
  }
  o.dump_graph = dump_opt->count() > 0;
  o.dtype_given = dtype_opt->count() > 0;
  o.tolerance_given = tolerance_opt->count() > 0;
  if (o.tolerance_given && !(std::isfinite(o.tolerance) && o.tolerance >= 0)) {
    std::cerr << "weft-run: --tolerance " << tolerance_opt->as<std::string>()
              << ": expected a finite number >= 0 (the largest max|sharded - unsharded| / max|unsharded| "
                 "--check accepts, e.g. 1e-5)\n";
    return 2;
  }
  if (program_opt->count() > 0 && (o.smoke || o.dump_graph)) {
    std::cerr << "weft-run: --program runs a program; it takes no --smoke or --dump-graph\n";
    return 2;
  }
  if (program_opt->count() > 0 && o.program != "auto" && model_opt->count() > 0) {
    std::cerr << "weft-run: --program " << o.program << " and --model " << o.model
              << " both name the model to run; give one (--program auto --model " << o.model
              << " runs the program of the built-in " << o.model << ")\n";
    return 2;
  }
  if (o.device == "cuda") {
#ifndef WEFT_WITH_CUDA
    std::cerr << "weft-run: --device cuda needs a build with CUDA (-DWEFT_ENABLE_CUDA=ON against a CUDA LibTorch)\n";
    return 2;
#endif
  }
  try {
    ResolveProgram(o);
    const int status = o.dump_graph ? DumpGraph(o) : dist::LaunchedAsRank() ? RunRank(o) : RunLauncher(o, argc, argv);
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

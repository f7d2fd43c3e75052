#include "executor/program_job.h"
#include "compiler/source/output_file.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "compiler/cost/machine_profile.h"
#include "compiler/cost/predict.h"
#include "compiler/plan/plan_json.h"
#include "compiler/program/archive.h"
#include "compiler/program/edits.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/lowering.h"
#include "compiler/program/program_reader.h"
#include "compiler/rederive.h"
#include "executor/device.h"
#include "executor/plan_on_ranks.h"
#include "executor/plan_loader.h"
#include "executor/program_backend.h"
#include "executor/tp_shard.h"
#include "executor/exec_error.h"
#include "executor/host_memory.h"
#include "executor/trace.h"
#include "executor/weight_stream.h"
#include "runtime/io/diffusers_dir.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/load_weights.h"
#include "runtime/program/program_model.h"
#include "runtime/program/schema_types.h"

namespace weft::exec {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int64_t PeakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

std::optional<at::ScalarType> DtypeOfName(const std::string& name) {
  static const std::map<std::string, at::ScalarType> names = {
      {"f32", at::kFloat}, {"bf16", at::kBFloat16}, {"f16", at::kHalf}, {"f64", at::kDouble}, {"i64", at::kLong},
      {"i32", at::kInt}, {"i16", at::kShort}, {"i8", at::kChar}, {"u8", at::kByte}, {"bool", at::kBool},
      {"c64", at::kComplexFloat}};
  auto it = names.find(name);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

// A --model-dir must hold the model the program was exported from: same class, and no config
// value that differs (a value that changes no shape, like rope_theta, would otherwise go unseen).
void CheckModelDir(const std::string& dir, const program::Program& p) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) throw ExecError("--model-dir: cannot read " + path);
  Json cfg = Json::parse(in, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) throw ExecError("--model-dir: " + path + " is not a JSON object");
  if (!p.manifest) return;
  const std::string cls = cfg.value("_class_name", "");
  if (cls != p.manifest->class_name) {
    throw ExecError("--model-dir: " + path + " describes a " + (cls.empty() ? "model without `_class_name`" : cls) +
                    "; the program " + p.path + " is a " + p.manifest->class_name);
  }
  Json exported = Json::parse(p.manifest->model_config_json, nullptr, false);
  std::vector<std::string> differ;
  for (auto& [key, value] : exported.items()) {
    if (key.empty() || key[0] == '_' || !cfg.contains(key)) continue;
    if (cfg[key] != value) differ.push_back(key + " = " + cfg[key].dump() + " (the program: " + value.dump() + ")");
  }
  if (!differ.empty()) {
    std::string list;
    for (size_t i = 0; i < differ.size() && i < 5; ++i) list += (i ? "; " : "") + differ[i];
    throw ExecError("--model-dir: " + path + " differs from the config the program was exported with: " + list +
                    (differ.size() > 5 ? " (and " + std::to_string(differ.size() - 5) + " more)" : "") +
                    "; export the program from this directory (tools/export_program.py --model-dir)");
  }
}

struct Inputs {
  nn::Args args;
  std::map<std::string, std::string> extra;  // non-tensor arguments as JSON
};

Inputs ReadInputs(const std::string& file) {
  Inputs in;
  io::SafetensorsFile f = io::SafetensorsFile::Open(file);
  for (const std::string& key : f.Keys()) in.args.Set(key, f.Load(key));
  auto it = f.metadata().find("weft.args");
  if (it != f.metadata().end()) {
    Json j = Json::parse(it->second, nullptr, false);
    if (!j.is_object()) throw ExecError("--inputs " + file + ": metadata `weft.args` is not a JSON object");
    for (auto& [k, v] : j.items()) {
      if (in.args.Has(k)) throw ExecError("--inputs " + file + ": `" + k + "` is both a tensor and in weft.args");
      in.extra[k] = v.dump();
    }
  }
  return in;
}

// A workload's input is made whole on each rank: one larger than this machine's memory is refused
// by name before allocating (the reader already refused negative and overflowing shapes).
void CheckFitsInMemory(const program::InputDesc& d, const std::string& workload, size_t element_bytes) {
  const int64_t available = AvailableMemoryBytes();
  if (available <= 0) return;
  double bytes = static_cast<double>(element_bytes);
  std::string shape;
  for (int64_t x : d.shape) {
    bytes *= static_cast<double>(x);
    shape += (shape.empty() ? "" : ", ") + std::to_string(x);
  }
  if (bytes > static_cast<double>(available)) {
    throw ExecError("input `" + d.name + "` of workload `" + workload + "` is [" + shape + "] " + d.dtype + ": " +
                    Gb(bytes) + ", more than the " + Gb(static_cast<double>(available)) + " this machine has available");
  }
}

// Inputs at a manifest workload: seeded normal floats; integer and boolean tensors named like a
// mask are all ones (nothing masked); any other integer tensor (indices) needs --inputs.
Inputs MakeInputs(const program::Program& p, const std::string& workload, uint64_t seed) {
  if (!p.manifest || p.manifest->workloads.empty()) {
    throw ExecError(p.path + " records no workload to make inputs at; give --inputs (tools/export_program.py "
                    "--write-inputs writes the export's)");
  }
  const program::ManifestWorkload* w = &p.manifest->workloads[0];
  if (!workload.empty()) {
    w = nullptr;
    std::string names;
    for (const program::ManifestWorkload& x : p.manifest->workloads) {
      if (x.name == workload) w = &x;
      names += (names.empty() ? "" : ", ") + x.name;
    }
    if (w == nullptr) throw ExecError("--workload " + workload + ": the program records " + names);
  }
  Inputs in;
  at::Generator gen = at::detail::createCPUGenerator(2000 + seed);
  for (const program::InputDesc& d : w->inputs) {
    if (!d.tensor) {
      in.extra[d.name] = d.value_json;
      continue;
    }
    std::optional<at::ScalarType> dtype = DtypeOfName(d.dtype);
    if (!dtype) throw ExecError("input `" + d.name + "` has dtype " + d.dtype + ", which weft cannot make");
    CheckFitsInMemory(d, w->name, c10::elementSize(*dtype));
    if (at::isFloatingType(*dtype)) {
      in.args.Set(d.name, at::randn(d.shape, gen, at::TensorOptions().dtype(at::kFloat)).to(*dtype));
    } else if (d.name.find("mask") != std::string::npos) {
      in.args.Set(d.name, at::ones(d.shape, at::TensorOptions().dtype(*dtype)));
    } else {
      throw ExecError("input `" + d.name + "` is an integer tensor (" + d.dtype + "), which weft cannot make up; give "
                      "--inputs (tools/export_program.py --write-inputs writes the export's)");
    }
  }
  return in;
}

// Each tensor input on the run's device, floating ones in the dtype the program records for them.
// Converts every tensor input to the dtype the program takes there (see below) and, with a
// device, moves it there.
void PlaceInputs(const program::Program& p, nn::Args& args, std::optional<c10::Device> device) {
  const std::vector<program::FlatInput> flat = program::FlattenInputs(p);
  for (const program::FlatInput& f : flat) {
    if (!args.Has(f.key)) continue;
    nn::Value& v = args.Get(f.key);
    auto* t = std::get_if<at::Tensor>(&v);
    if (t == nullptr) continue;
    const program::Argument& graph_input = p.inputs[f.graph_input];
    const program::TensorMeta* meta = graph_input.kind == program::Argument::Kind::kTensor ? p.FindTensor(graph_input.name) : nullptr;
    std::optional<c10::ScalarType> want = meta != nullptr ? interp::C10ScalarType(meta->dtype) : std::nullopt;
    // What diffusers' forward accepts -- an integer timestep where the program was exported with a
    // float one, a mask as int or bool -- is converted to the dtype the program takes there; a
    // floating value where it takes an integer would lose its fraction, and is refused by name.
    if (want && t->scalar_type() != *want && t->is_floating_point() && !at::isFloatingType(*want)) {
      throw ExecError("input `" + f.key + "` is " + c10::toString(t->scalar_type()) + " but the program " + p.Where() +
                      " takes " + c10::toString(*want) + " there");
    }
    if (device.has_value()) {
      *t = want ? t->to(*device, *want) : t->to(*device);
    } else if (want) {
      *t = t->to(*want);
    }
  }
}

std::vector<at::Tensor> Forward(interp::ProgramModel& model, const nn::Args& args, c10::Device device) {
  c10::InferenceMode inference;
  std::vector<at::Tensor> out;
  for (nn::Value& v : nn::Call(model, args)) out.push_back(std::get<at::Tensor>(std::move(v)));
  SynchronizeDevice(device);
  return out;
}


// Guidance branches as calls of their own: the branches' inputs may differ only in the arguments
// the plan's `calls` names; any other input that differs (the latents, the timestep) is a mistake
// in the files, refused by name.
void CheckSharedInputs(const std::vector<Inputs>& branches, const plan::GuidanceCalls& calls,
                       const std::vector<std::string>& files) {
  auto per_branch = [&](const std::string& name) {
    return std::find(calls.arguments.begin(), calls.arguments.end(), name) != calls.arguments.end();
  };
  std::vector<std::string> names;
  for (const Inputs& b : branches) {
    for (const auto& [name, value] : b.args.entries()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const auto& [name, json] : b.extra) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  for (size_t k = 1; k < branches.size(); ++k) {
    for (const std::string& name : names) {
      if (per_branch(name)) continue;
      const Inputs& a = branches[0];
      const Inputs& b = branches[k];
      bool same = a.args.Has(name) == b.args.Has(name) && a.extra.count(name) == b.extra.count(name);
      if (same && a.args.Has(name)) {
        const auto* x = std::get_if<at::Tensor>(&a.args.Get(name));
        const auto* y = std::get_if<at::Tensor>(&b.args.Get(name));
        same = x != nullptr && y != nullptr && x->sizes() == y->sizes() && x->scalar_type() == y->scalar_type() &&
               at::equal(*x, *y);
      }
      if (same && a.extra.count(name)) same = a.extra.at(name) == b.extra.at(name);
      if (!same) {
        std::string listed;
        for (const std::string& arg : calls.arguments) listed += (listed.empty() ? "`" : ", `") + arg + "`";
        throw ExecError("--inputs " + files[k] + " (branch " + std::to_string(k) + ") and --inputs " + files[0] +
                        " (branch 0) differ in `" + name + "`, but the plan's guidance calls give only " + listed +
                        " per branch; every other input is the same in every branch's call");
      }
    }
  }
}

// This rank's guidance branches' calls, then every branch's outputs on every rank: output i of
// each call stacked along a new dim 0 and all-gathered over cfg, in branch order.
// `even`: every group makes as many calls (the plain all-gather; else the uneven one, which
// exchanges the counts first).
std::vector<at::Tensor> ForwardBranches(interp::ProgramModel& model, std::vector<Inputs>& branches, int64_t first,
                                        int64_t count, bool even, c10::Device device, dist::DistContext& ctx) {
  std::vector<std::vector<at::Tensor>> mine;
  for (int64_t b = first; b < first + count; ++b) {
    model.SetArguments(branches[static_cast<size_t>(b)].extra);
    mine.push_back(Forward(model, branches[static_cast<size_t>(b)].args, device));
  }
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < mine.front().size(); ++i) {
    std::vector<at::Tensor> calls;
    for (size_t b = 0; b < mine.size(); ++b) {
      if (mine[b][i].sizes() != mine[0][i].sizes()) {
        throw ExecError("guidance branches " + std::to_string(first) + " and " + std::to_string(first + static_cast<int64_t>(b)) +
                        " give output " + std::to_string(i) + " of shapes " + c10::str(mine[0][i].sizes()) + " and " +
                        c10::str(mine[b][i].sizes()) + "; the outputs of the branches' calls are stacked, so they must agree");
      }
      calls.push_back(mine[b][i]);
    }
    const at::Tensor stacked = at::stack(calls, 0).contiguous();
    out.push_back(ctx.AxisSize(dist::Axis::kCfg) <= 1 ? stacked
                  : even ? ctx.AllGather(dist::Axis::kCfg, stacked, 0)
                         : ctx.AllGatherUneven(dist::Axis::kCfg, stacked, 0));
  }
  return out;
}

std::vector<program::InputDesc> Describe(const program::Program& p, const Inputs& in) {
  std::vector<program::InputDesc> out;
  for (const std::string& name : program::InputKeys(program::FlattenInputs(p))) {
    program::InputDesc d;
    d.name = name;
    if (in.args.Has(name)) {
      const auto* t = std::get_if<at::Tensor>(&in.args.Get(name));
      if (t == nullptr) continue;
      d.tensor = true;
      d.shape.assign(t->sizes().begin(), t->sizes().end());
      d.dtype = program::ScalarTypeName(*[&]() -> std::optional<program::ScalarType> {
        for (int k = 0; k < 36; ++k) {
          auto st = interp::C10ScalarType(static_cast<program::ScalarType>(k));
          if (st && *st == t->scalar_type()) return static_cast<program::ScalarType>(k);
        }
        return program::ScalarType::kUnknown;
      }());
    } else if (auto it = in.extra.find(name); it != in.extra.end()) {
      d.value_json = it->second;
    } else {
      continue;
    }
    out.push_back(std::move(d));
  }
  return out;
}

// The job's plan on the program: compiled against the program's graph view with these inputs as
// its workload (`run`), then lowered to edits of the program.
// `branches`: guidance branches given as calls of their own (0: none given).
plan::ExecutionPlan ProgramPlan(const ProgramJobOptions& o, const program::Program& p, const Inputs& in,
                                int64_t branches) {
  if (!o.compiled.empty()) {
    PlanRequest request;
    request.compiled_file = o.compiled;
    LoadedPlan loaded = LoadPlan(request);
    if (!loaded.plan.program) {
      throw ExecError("--compiled " + o.compiled + " was compiled against a graph, not a program; compile it with "
                      "`weft compile --program " + o.program + "`");
    }
    // Its edits are what the interpreter applies: derived again from the plan's steps and this
    // program, they must be the ones in the file (a removed all-reduce re-hashed is refused).
    program::ManifestWorkload run;
    run.name = "run";
    run.inputs = Describe(p, in);
    try {
      CheckPlanAgainstProgram(loaded.plan, p, o.program, run, "compiled plan `" + o.compiled + "`");
    } catch (const std::runtime_error& e) {
      throw ExecError(e.what());
    }
    if (loaded.plan.guidance_calls && branches > 0 && loaded.plan.guidance_calls->branches != branches) {
      throw ExecError("--compiled " + o.compiled + " runs " + std::to_string(loaded.plan.guidance_calls->branches) +
                      " guidance branches as calls, but the job gives " + std::to_string(branches) +
                      " (--inputs files); compile it with `weft compile --branches " + std::to_string(branches) + "`");
    }
    return loaded.plan;
  }
  const std::string cls = p.manifest ? p.manifest->class_name : "";
  PlanRequest request;
  request.plan_file = o.plan.empty() ? PlanFileForClass(cls) : o.plan;
  if (request.plan_file.empty()) {
    throw ExecError("no plan in " + DataDir() + "/plans is for " + cls + "; write one and pass it with --plan");
  }
  program::Program view = p;
  if (!view.manifest) view.manifest.emplace();
  program::ManifestWorkload run;
  run.name = "run";
  run.inputs = Describe(p, in);
  view.manifest->workloads = {run};
  request.graph = program::GraphOfProgram(view);
  request.workload = "run";
  request.mesh = o.mesh;
  request.activation_bytes = p.ActivationBytes();
  request.branches = branches;
  LoadedPlan loaded = LoadPlan(request);
  program::LowerToProgramWithCost(loaded.plan, p, o.program, *request.graph);
  return loaded.plan;
}

}  // namespace

std::string PlanFileForClass(const std::string& cls) {
  const std::string dir = DataDir() + "/plans";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".weft") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  const std::regex header(R"(^\s*plan\s+\S+\s+for\s+(\S+))");
  for (const std::string& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_search(line, m, header)) {
        if (m[1] == cls) return f;
        break;
      }
    }
  }
  return "";
}

int RunProgramJob(dist::DistContext& ctx, const ProgramJobOptions& o) {
  const bool leader = ctx.rank() == 0;
  const auto t0 = Clock::now();
  auto program = std::make_shared<program::Program>(program::ReadProgramFile(o.program));
  const auto t_read = Clock::now();
  if (!o.dtype.empty() && program->manifest) {
    const std::string asked = o.dtype == "bf16" ? "bf16" : "f32";
    if (asked != program->manifest->dtype) {
      throw ExecError("--dtype " + o.dtype + ": the program " + o.program + " was exported in " +
                      c10::toString(program->manifest->dtype == "bf16" ? at::kBFloat16 : at::kFloat) +
                      " (its casts are baked in); export it again with tools/export_program.py --dtype " + o.dtype);
    }
  }
  // Guidance branches as calls of their own: one inputs file per branch; the plan compiles at the
  // first's, and the branches' own sizes are checked by the program's guards before they run.
  std::vector<Inputs> branches;
  for (const std::string& file : o.branch_inputs) {
    branches.push_back(ReadInputs(file));
    PlaceInputs(*program, branches.back().args, std::nullopt);
  }
  Inputs in = !branches.empty() ? branches.front()
              : o.inputs.empty() ? MakeInputs(*program, o.workload, o.seed) : ReadInputs(o.inputs);
  PlaceInputs(*program, in.args, std::nullopt);  // dtypes first: the plan compiles at these inputs

  // A plan on a mesh, or the program as it is on one rank.
  const bool sharded = ctx.world_size() > 1 || !o.plan.empty() || !o.compiled.empty();
  std::optional<plan::ExecutionPlan> plan;
  std::shared_ptr<program::Program> edited = program;
  ProgramBackend backend(ctx);
  if (sharded) {
    plan = ProgramPlan(o, *program, in, static_cast<int64_t>(branches.size()));
    // The plan holds for every branch's call: each has lengths of its own (a negative prompt's),
    // which its splits must divide (or the run be uneven), refused here naming the branch.
    for (size_t b = 1; b < branches.size(); ++b) {
      try {
        ProgramPlan(o, *program, branches[b], static_cast<int64_t>(branches.size()));
      } catch (const std::exception& e) {
        throw ExecError("--inputs " + o.branch_inputs[b] + " (guidance branch " + std::to_string(b) + "): " + e.what());
      }
    }
    CheckMesh(*plan, ctx);
    CheckSameOnAllRanks(ctx, "plan", plan::PlanContentHash(*plan));
    edited = std::make_shared<program::Program>(*program);
    program::ApplyEdits(*edited, *plan->program);
  }
  // Which branches this rank's cfg group calls: a contiguous block, as the plan lays them out.
  int64_t first_branch = 0, my_branches = static_cast<int64_t>(branches.size());
  bool even_branches = true;
  if (plan && plan->guidance_calls) {
    if (branches.empty() && ctx.AxisSize(dist::Axis::kCfg) > 1) {
      throw ExecError("plan `" + plan->plan_name + "` runs the guidance branches as forward calls of their own on cfg=" +
                      std::to_string(ctx.AxisSize(dist::Axis::kCfg)) + "; give one --inputs file per branch");
    }
    if (!branches.empty()) {
      CheckSharedInputs(branches, *plan->guidance_calls, o.branch_inputs);
      const std::vector<int64_t>& per_group = plan->guidance_calls->per_group;
      const int g = ctx.AxisRank(dist::Axis::kCfg);
      first_branch = std::accumulate(per_group.begin(), per_group.begin() + g, int64_t{0});
      my_branches = per_group[static_cast<size_t>(g)];
      even_branches = std::all_of(per_group.begin(), per_group.end(), [&](int64_t n) { return n == per_group[0]; });
    }
  } else if (!branches.empty() && plan) {
    throw ExecError(std::to_string(branches.size()) + " --inputs files are " + std::to_string(branches.size()) +
                    " guidance branches run as forward calls of their own, but plan `" + plan->plan_name +
                    "` has no guidance_parallel `calls` rule saying which arguments differ between them; add one, "
                    "or give one --inputs file");
  }
  interp::LoadOptions lo;
  lo.device = o.device;
  lo.fast_kernels = o.fast_kernels;
  if (plan) {
    lo.edits = &*plan->program;
    lo.backend = &backend;
  }
  // Weights sliced over ranks: the stream holds this rank's slices and gathers each block as the
  // interpreter reaches it.
  std::unique_ptr<WeightStream> stream;
  if (plan && plan->weights) {
    stream = std::make_unique<WeightStream>(*plan->weights, ctx);
    lo.weights = stream.get();
  }
  std::unique_ptr<interp::ProgramModel> model = interp::ProgramModel::Create(edited, lo);
  const auto t_loaded = Clock::now();
  const at::ScalarType dtype = model->dtype();

  // A model whose parameters alone exceed this machine's memory would be killed by the OOM killer
  // while loading; refuse it up front (parameters live in device memory with --device cuda).
  if (o.device.is_cpu()) {
    int64_t bytes = 0;
    for (auto& [name, slot] : model->NamedParameters()) bytes += slot->numel() * static_cast<int64_t>(c10::elementSize(dtype));
    const int64_t available = AvailableMemoryBytes();
    // Parameters plus a tenth and half a gigabyte for the runtime and activations, at the least.
    const double needed = static_cast<double>(bytes) * 1.1 + 0.5e9;
    if (available > 0 && needed > static_cast<double>(available)) {
      throw ExecError("the program's parameters alone are " + Gb(static_cast<double>(bytes)) + " in " +
                      c10::toString(dtype) + "; with the runtime it needs at least " + Gb(needed) +
                      " but this machine has " + Gb(static_cast<double>(available)) + " available");
    }
  }
  std::vector<std::string> weights = o.weights;
  if (!o.model_dir.empty()) {
    CheckModelDir(o.model_dir, *program);
    if (weights.empty()) weights = io::DiffusersWeightFiles(o.model_dir);
  }
  // Tensor parallelism: each rank keeps its shard of the parameters the plan shards (the edits'
  // all-reduces, head counts and norm statistics expect exactly these shards).
  // `sharding`: the plan whose TP shards to keep, or null for the full parameters (--check's
  // unsharded reference, which must not inherit the TP edits' shards).
  // `slicing`: the weight stream that slices blocks as they load (one block whole at a time).
  auto load_parameters = [&](interp::ProgramModel& m, const plan::ExecutionPlan* sharding, WeightStream* slicing) {
    ParamLoading loading;
    if (slicing != nullptr) loading = [&](const std::string& fqn) { slicing->Loaded(m, fqn); };
    if (weights.empty()) {
      const std::map<std::string, ShardSpec> specs =
          sharding != nullptr ? ShardSpecs(*sharding, ctx.AxisRank(dist::Axis::kTp)) : std::map<std::string, ShardSpec>();
      for (auto& [name, slot] : m.NamedParameters()) {
        if (loading) loading(name);
        *slot = nn::SeededValues(name, slot->sizes(), 1000 + o.seed).to(slot->scalar_type());
        if (auto spec = specs.find(name); spec != specs.end()) *slot = ShardTensor(*slot, spec->second, name);
      }
    } else {
      LoadWeightFiles(weights, sharding, m, ctx, dtype, loading);
    }
    if (slicing != nullptr) slicing->Finish(m);
    m.ConformParameters(o.device);
    if (slicing != nullptr) slicing->MoveTo(o.device);
  };
  load_parameters(*model, plan ? &*plan : nullptr, stream.get());
  const auto t_weights = Clock::now();

  PlaceInputs(*program, in.args, o.device);
  model->SetArguments(in.extra);
  model->Check(model->Describe(in.args));  // every size, range and guard, before anything runs
  for (int64_t b = first_branch; b < first_branch + (branches.empty() ? 0 : my_branches); ++b) {
    Inputs& branch = branches[static_cast<size_t>(b)];
    PlaceInputs(*program, branch.args, o.device);
    model->SetArguments(branch.extra);
    try {
      model->Check(model->Describe(branch.args));
    } catch (const std::exception& e) {
      throw ExecError("--inputs " + o.branch_inputs[static_cast<size_t>(b)] + " (guidance branch " + std::to_string(b) +
                      "): " + e.what());
    }
  }
  // One forward of the job: this rank's call, or its guidance branches' calls and their gather.
  auto forward = [&]() {
    return branches.empty() ? Forward(*model, in.args, o.device)
                            : ForwardBranches(*model, branches, first_branch, my_branches, even_branches, o.device, ctx);
  };

  Tracer tracer(ctx.rank());
  std::vector<double> opened;
  if (!o.trace.empty()) {
    tracer.Attach(*model, 0);
    tracer.AttachCollectives(ctx);
    model->interpreter().SetModuleObserver(
        [&](const std::string& path, const std::string& type, bool enter) {
          if (enter) {
            opened.push_back(tracer.NowUs());
          } else {
            tracer.AddCall(path, type, opened.back());
            opened.pop_back();
          }
        },
        2);
  }
  std::vector<at::Tensor> output;
  for (int i = 0; i < o.warmup; ++i) output = forward();
  if (sharded) ctx.Barrier(dist::Axis::kWorld);
  const dist::CommCounters before = ctx.counters();
  dist::CommCounters one_forward;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
  if (!o.profile_ops.empty()) {
    profile = std::make_unique<torch::autograd::profiler::RecordProfile>(o.profile_ops + ".rank" + std::to_string(ctx.rank()) + ".json");
  }
  std::vector<double> latencies;
  for (int i = 0; i < std::max(1, o.iters); ++i) {
    const auto start = Clock::now();
    output = forward();
    latencies.push_back(Ms(start, Clock::now()));
    if (i == 0) one_forward = ctx.counters().Since(before);
    if (o.progress && o.iters > 1) std::fprintf(stderr, "weft-run: iteration %d/%d: %.2f ms\n", i + 1, o.iters, latencies.back());
  }
  profile.reset();
  if (!o.trace.empty()) {
    tracer.DetachCollectives(ctx);
    tracer.Write(o.trace + ".rank" + std::to_string(ctx.rank()) + ".json");
  }
  // A NaN or Inf anywhere in the output is an error on every rank, --check or not: such an output
  // is never a result.
  at::Tensor counts = at::zeros({2}, at::kDouble);
  for (const at::Tensor& t : output) {
    counts[0] += at::isnan(t).sum().to(at::kCPU).item<double>();
    counts[1] += at::isinf(t).sum().to(at::kCPU).item<double>();
  }
  if (sharded) ctx.AllReduce(dist::Axis::kWorld, counts, dist::ReduceKind::kMax);
  const bool finite = counts[0].item<double>() == 0 && counts[1].item<double>() == 0;
  if (!finite) {
    throw ExecError("the output of " + (o.model_name.empty() ? o.program : o.model_name) + " (" +
                    std::string(c10::toString(dtype)) + ", " + c10::str(output[0].sizes()) + ") has " +
                    std::to_string(static_cast<int64_t>(counts[0].item<double>())) + " NaN and " +
                    std::to_string(static_cast<int64_t>(counts[1].item<double>())) + " infinite value(s) of " +
                    std::to_string(output[0].numel()) +
                    ": the weights or inputs hold non-finite values, or the computation overflows" +
                    (dtype == at::kFloat ? "" : " (try --dtype fp32)"));
  }
  if (leader && !o.output.empty()) {
    std::map<std::string, at::Tensor> named;
    for (size_t i = 0; i < output.size(); ++i) named[i == 0 ? "output" : "output_" + std::to_string(i)] = output[i].cpu();
    io::WriteSafetensors(o.output, named);
  }

  Json report = {{"program", o.program},
                 {"class", program->manifest ? program->manifest->class_name : model->type()},
                 {"dtype", c10::toString(dtype)},
                 {"device", o.device.str()},
                 {"world_size", ctx.world_size()},
                 {"nodes", edited->nodes.size()},
                 {"instructions", model->interpreter().num_nodes()},
                 {"fast_kernel_nodes", model->interpreter().fast_nodes()},
                 {"fusions", model->interpreter().fusions()},
                 {"row_slice_moves", model->interpreter().row_slice_moves()},
                 {"load_ms", {{"read", Ms(t0, t_read)}, {"prepare", Ms(t_read, t_loaded)}, {"weights", Ms(t_loaded, t_weights)}}},
                 {"latency_ms", {{"median", Median(latencies)},
                                 {"min", *std::min_element(latencies.begin(), latencies.end())},
                                 {"max", *std::max_element(latencies.begin(), latencies.end())},
                                 {"iters", latencies.size()}, {"warmup", o.warmup}}},
                 {"outputs_finite", true},  // a NaN or Inf was an error above
                 {"peak_rss_bytes", PeakRssBytes()}};
  if (!o.model_name.empty()) report["model"] = o.model_name;
  // Every rank's peak memory (one small all-gather), and which transport each group's CPU
  // collectives took.
  report["peak_rss_bytes_per_rank"] = sharded ? ctx.AllGatherSizes(dist::Axis::kWorld, PeakRssBytes())
                                              : std::vector<int64_t>{PeakRssBytes()};
  // The parameter bytes each rank holds for the whole run (what stays whole, its tp shards, its
  // weight slices) and what the weight gathers' buffers held at most.
  int64_t parameter_bytes = stream ? stream->slice_bytes() : 0;
  for (auto& [fqn, slot] : model->NamedParameters()) {
    if (slot->defined()) parameter_bytes += slot->numel() * static_cast<int64_t>(slot->element_size());
  }
  const int64_t buffer_bytes = stream ? stream->buffer_bytes() : 0;
  report["parameter_bytes_per_rank"] = sharded ? ctx.AllGatherSizes(dist::Axis::kWorld, parameter_bytes)
                                               : std::vector<int64_t>{parameter_bytes};
  report["weight_buffer_bytes_per_rank"] = sharded ? ctx.AllGatherSizes(dist::Axis::kWorld, buffer_bytes)
                                                   : std::vector<int64_t>{buffer_bytes};
  if (stream) {
    // Per forward on this rank: the gathers' time on their thread, and what of it the job waited
    // for (the rest overlapped with computing).
    const double forwards = static_cast<double>(std::max(1, o.iters) + o.warmup);
    report["weight_gathers_ms_per_forward"] = {{"gather", stream->gather_ms() / forwards},
                                               {"waited", stream->wait_ms() / forwards}};
  }
  Json transport = Json::object();
  for (dist::Axis axis : dist::kAllAxes) {
    if (ctx.AxisSize(axis) > 1) transport[dist::AxisName(axis)] = ctx.CpuTransport(axis);
  }
  report["cpu_transport"] = transport;
  if (plan) {
    Json edits = Json::object();
    for (const plan::ProgramEdit& e : plan->program->edits) edits[std::string(plan::ProgramEditKindName(e.kind))] = edits.value(std::string(plan::ProgramEditKindName(e.kind)), 0) + 1;
    report["plan"] = plan->plan_name;
    if (!branches.empty()) {
      report["guidance_calls"] = {{"branches", branches.size()}, {"first", first_branch}, {"calls_per_forward", my_branches}};
    }
    report["mesh"] = plan->mesh.ToString();
    report["edits"] = edits;
    Json collectives = Json::array();
    for (dist::Axis axis : dist::kAllAxes) {
      for (int op = 0; op < dist::kNumCommOps; ++op) {
        const dist::CommStat st = one_forward.Get(axis, static_cast<dist::CommOp>(op));
        if (st.calls == 0) continue;
        collectives.push_back({{"axis", dist::AxisName(axis)}, {"op", dist::CommOpName(static_cast<dist::CommOp>(op))},
                               {"calls", st.calls}, {"bytes_sent", st.bytes_sent}});
      }
    }
    report["collectives_per_forward"] = collectives;
    Json predicted = Json::array();
    for (const plan::AxisTraffic& t : plan->cost.per_axis) {
      predicted.push_back({{"axis", t.axis}, {"collectives", t.collectives}, {"bytes_sent", t.bytes}});
    }
    report["predicted_per_forward"] = predicted;
    report["predicted_bytes_per_forward"] = plan->cost.bytes;
    report["workload"] = plan->workload.name;
  }
  if (!o.machine.empty()) {
    // What the cost model predicted for this very run (its mesh, inputs, threads and ranks per
    // host), for comparing with the latency and peak RSS above.
    std::vector<std::string> warnings;
    const cost::MachineProfile machine = cost::ReadMachineProfile(o.machine, o.device.is_cuda() ? "cuda" : "cpu", &warnings);
    cost::PredictOptions po;
    po.ranks_per_host = ctx.world().local_world_size;
    po.threads = at::get_num_threads();
    po.transport = o.device.is_cuda() ? "nccl" : o.cpu_transport;
    po.inputs = Describe(*program, in);
    const cost::Prediction p = cost::Predict(*program, plan ? &*plan : nullptr, machine, po);
    report["machine"] = o.machine;
    report["predicted_latency_ms"] = p.latency_s * 1e3;
    report["predicted_peak_bytes_per_rank"] = p.peak_bytes;
    report["predicted"] = {{"matmul_ms", p.matmul_s * 1e3},       {"attention_ms", p.attention_s * 1e3},
                           {"memory_ms", p.memory_s * 1e3},       {"overhead_ms", p.overhead_s * 1e3},
                           {"collectives_ms", p.comm_s * 1e3},    {"hidden_collectives_ms", p.hidden_comm_s * 1e3},
                           {"nodes", p.nodes},                    {"threads", p.threads},
                           {"collectives", p.collectives},          {"p2p_exchanges", p.p2p_exchanges},
                           {"base_bytes", p.base_bytes},          {"group_bytes", p.group_bytes},
                           {"parameter_bytes", p.param_bytes},    {"weight_buffer_bytes", p.weight_buffer_bytes},
                           {"activation_bytes", p.activation_bytes}, {"notes", p.notes}, {"warnings", warnings}};
  }
  if (o.device.is_cuda()) report["peak_cuda_allocated_bytes"] = PeakDeviceBytes(o.device);
  int status = 0;
  if (o.check) {
    at::Tensor reference;
    std::string against;
    // The same program unsharded (one rank, no edits) on the same weights and inputs; on one rank
    // without a plan it runs on the plain interpreter (no fused kernels, no packed weights), so
    // the check still compares two computations of the forward.
    interp::LoadOptions plain;
    plain.device = o.device;
    plain.fast_kernels = plan ? o.fast_kernels : false;
    std::unique_ptr<interp::ProgramModel> unsharded = interp::ProgramModel::Create(program, plain);
    load_parameters(*unsharded, nullptr, nullptr);
    if (branches.empty()) {
      unsharded->SetArguments(in.extra);
      reference = Forward(*unsharded, in.args, o.device)[0];
    } else {
      // Every branch's call on the one model, stacked as the sharded job stacks them.
      std::vector<at::Tensor> calls;
      for (Inputs& b : branches) {
        PlaceInputs(*program, b.args, o.device);
        unsharded->SetArguments(b.extra);
        calls.push_back(Forward(*unsharded, b.args, o.device)[0]);
      }
      reference = at::stack(calls, 0);
    }
    against = "unsharded";
    if (reference.sizes() != output[0].sizes()) {
      throw ExecError("--check: the program's output " + c10::str(output[0].sizes()) + " but the " + against + " model's " +
                      c10::str(reference.sizes()) + (plan ? " (does the plan gather the output?)" : ""));
    }
    const double tolerance = o.tolerance.value_or(dtype == at::kFloat ? (plan && plan->mesh.Tp() > 1 ? 1e-4 : 1e-5) : 2e-2);
    at::Tensor pair = at::stack({(output[0].to(at::kDouble) - reference.to(at::kDouble)).abs().max(),
                                 reference.to(at::kDouble).abs().max()})
                          .contiguous();
    ctx.AllReduce(dist::Axis::kWorld, pair, dist::ReduceKind::kMax);
    const double error = pair[0].item<double>();
    const double rel = error / std::max(pair[1].item<double>(), 1e-30);
    const bool passed = rel <= tolerance;
    report["check"] = {{"against", against}, {"max_abs_error", error}, {"max_rel_error", rel},
                       {"tolerance", tolerance}, {"passed", passed}};
    if (leader) {
      std::fprintf(stderr, "weft-run: check against the %s model %s: max abs error %.3g, max relative error %.3g "
                   "(tolerance %.1g)\n", against.c_str(), passed ? "passed" : "FAILED", error, rel, tolerance);
    }
    status = passed ? 0 : 1;
  }
  if (!o.expect.empty()) {
    const double tolerance = o.expect_tolerance.value_or(dtype == at::kFloat ? 1e-4 : 2e-2);
    Json outputs = Json::array();
    bool passed = true;
    // One reference file, or one per guidance branch (its outputs are then the stacked outputs' rows).
    const std::vector<std::string> files = o.branch_expect.empty() ? std::vector<std::string>{o.expect} : o.branch_expect;
    if (!o.branch_expect.empty() && o.branch_expect.size() != branches.size()) {
      throw ExecError(std::to_string(o.branch_expect.size()) + " --expect files for " + std::to_string(branches.size()) +
                      " guidance branches (--inputs files); give one per branch, or one with the branches stacked");
    }
    for (size_t f = 0; f < files.size(); ++f) {
      io::SafetensorsFile file = io::SafetensorsFile::Open(files[f]);
      const std::vector<std::string> keys = file.Keys();
      for (size_t i = 0; i < output.size(); ++i) {
        const std::string key = i == 0 ? "output" : "output_" + std::to_string(i);
        const std::string label = key + (o.branch_expect.empty() ? "" : " of branch " + std::to_string(f));
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
          throw ExecError("--expect " + files[f] + ": no tensor `" + key + "` (the program has " +
                          std::to_string(output.size()) + " output(s), written as output, output_1, ...)");
        }
        const at::Tensor want = file.Load(key).to(at::kDouble);
        at::Tensor got = output[i].to(at::kCPU).to(at::kDouble);
        if (!o.branch_expect.empty()) got = got.select(0, static_cast<int64_t>(f));
        if (want.sizes() != got.sizes()) {
          throw ExecError("--expect " + files[f] + ": `" + key + "` is " + c10::str(want.sizes()) + " but the program's " +
                          (o.branch_expect.empty() ? "" : "branch " + std::to_string(f) + " ") + "is " + c10::str(got.sizes()) +
                          (!branches.empty() && o.branch_expect.empty()
                               ? " (the " + std::to_string(branches.size()) + " branches' outputs stacked; give one --expect file per branch, or one holding them stacked)"
                               : ""));
        }
        const double error = (got - want).abs().max().item<double>();
        const double scale = want.abs().max().item<double>();
        const bool ok = error <= tolerance * scale;
        passed = passed && ok;
        outputs.push_back({{"output", label}, {"max_abs_error", error}, {"max_abs_reference", scale}, {"passed", ok}});
        if (leader) {
          std::fprintf(stderr, "weft-run: %s against %s %s: max abs error %.3g, %.3g x max|reference| %.3g (tolerance %.1g)\n",
                       label.c_str(), files[f].c_str(), ok ? "passed" : "FAILED", error, error / std::max(scale, 1e-30),
                       scale, tolerance);
        }
      }
    }
    report["expect"] = {{"file", o.expect}, {"tolerance", tolerance}, {"outputs", outputs}, {"passed", passed}};
    if (!passed) status = 1;
  }
  if (leader) {
    if (o.report == "json") {
      std::cout << report.dump(2) << std::endl;
    } else if (!o.report.empty()) {
      source::WriteFileOrThrow(o.report, report.dump(2) + "\n");
    }
    std::fprintf(stderr, "weft-run: program %s (%s, %zu nodes, %zu instructions, %zu on fast kernels, %zu row-slice moves)%s: loaded in %.0f ms, "
                 "median %.2f ms over %zu iteration(s)\n", o.program.c_str(), report["class"].get<std::string>().c_str(),
                 edited->nodes.size(), model->interpreter().num_nodes(), model->interpreter().fast_nodes(),
                 model->interpreter().row_slice_moves(), plan ? (" on " + plan->mesh.ToString()).c_str() : "", Ms(t0, t_loaded), Median(latencies), latencies.size());
    if (plan) std::fprintf(stderr, "%s", one_forward.Report().c_str());
    if (report.contains("predicted_latency_ms")) {
      // The cost model against this run (median latency; rank 0's peak RSS).
      const double predicted = report["predicted_latency_ms"].get<double>(), measured = Median(latencies);
      const double peak_p = report["predicted_peak_bytes_per_rank"].get<double>();
      const double peak_m = static_cast<double>(PeakRssBytes());
      std::fprintf(stderr, "weft-run: predicted %.2f ms per forward on %s, measured %.2f ms (%+.1f%%); peak RSS "
                   "predicted %.1f MB, measured %.1f MB (%+.1f%%)\n", predicted, o.machine.c_str(), measured,
                   100 * (predicted - measured) / measured, peak_p / 1e6, peak_m / 1e6, 100 * (peak_p - peak_m) / peak_m);
    }
  }
  return status;
}

}  // namespace weft::exec

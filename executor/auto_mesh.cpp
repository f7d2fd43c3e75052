#include "executor/auto_mesh.h"

#include <ostream>
#include <stdexcept>

#include "compiler/compile.h"
#include "compiler/cost/machine_profile.h"
#include "compiler/cost/mesh_search.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"
#include "executor/host_memory.h"
#include "executor/plan_loader.h"
#include "executor/program_job.h"

namespace weft::exec {

AutoMeshPick PickMesh(const AutoMeshRequest& r, std::ostream& log) {
  const program::Program p = program::ReadProgramFile(r.program);
  const std::string cls = p.manifest ? p.manifest->class_name : "";
  const std::string plan_file = r.plan.empty() ? PlanFileForClass(cls) : r.plan;
  if (plan_file.empty()) {
    throw std::runtime_error("--mesh auto: no plan in " + DataDir() + "/plans is for " + cls + "; pass one with --plan");
  }
  std::vector<std::string> warnings;
  const cost::MachineProfile machine = cost::ReadMachineProfile(r.machine, "cpu", &warnings);
  for (const std::string& w : warnings) log << "weft-run: warning: " << w << "\n";

  source::SourceManager sources;
  std::string error;
  auto buffer = source::SourceBuffer::FromFile(plan_file, &error);
  if (!buffer) throw std::runtime_error("--mesh auto: cannot read plan `" + plan_file + "`: " + error);
  const source::SourceBuffer& src = sources.Get(sources.Add(std::move(*buffer)));
  diag::CollectingConsumer parse_errors;
  diag::Emitter diags(sources, parse_errors);
  const std::optional<syntax::PlanAst> ast = syntax::ParsePlan(src, diags);
  if (!ast || ast->has_error) {
    throw std::runtime_error("--mesh auto: plan `" + plan_file + "` does not parse (`weft check " + plan_file +
                             "` shows where)");
  }
  const model::ModelGraph graph = program::GraphOfProgram(p);

  cost::SearchRequest s;
  s.ast = &*ast;
  s.sources = &sources;
  s.plan_file = plan_file;
  s.graph = &graph;
  s.program = &p;
  s.program_file = r.program;
  s.workload = r.workload;
  s.nproc = r.nproc;
  s.flags.ulysses_anything = r.ulysses_anything;
  s.flags.ring_anything = r.ring_anything;
  s.weight_sharding = r.weight_sharding;
  s.activation_bytes = p.ActivationBytes();
  const int64_t available = AvailableMemoryBytes();
  s.memory_per_rank = r.memory_per_rank > 0 ? r.memory_per_rank : available > 0 ? available / r.nproc : 0;
  s.machine = machine;
  s.predict.ranks_per_host = r.nproc;
  s.predict.threads = r.threads;
  s.predict.transport = r.cpu_transport;
  const std::vector<cost::Candidate> all = cost::SearchMeshes(s, 1);
  if (all.empty() || !all[0].prediction) {
    std::string why;
    for (const cost::Candidate& c : all) why += "\n  " + c.text + ": " + c.refusal;
    throw std::runtime_error("--mesh auto: no mesh of " + std::to_string(r.nproc) + " ranks admits " + plan_file + ":" +
                             why + "\n(`weft explain " + plan_file + " --program " + r.program +
                             " --mesh auto --nproc N --machine " + r.machine + "` lists the nearest legal meshes)");
  }
  if (all[0].over_memory) {
    throw std::runtime_error("--mesh auto: no mesh of " + std::to_string(r.nproc) + " ranks fits in " +
                             plan::FormatBytes(s.memory_per_rank) + " per rank; the smallest needs " +
                             plan::FormatBytes(all[0].prediction->peak_bytes));
  }
  log << "weft-run: --mesh auto on " << r.machine << " (" << machine.device << "): weighed " << all.size()
      << " meshes of " << r.nproc << " ranks for " << plan_file << "\n";
  int shown = 0;
  for (const cost::Candidate& c : all) {
    if (!c.prediction || shown == 5) break;
    log << "  " << (shown == 0 ? "-> " : "   ") << c.text << ": predicted " << cost::FormatSeconds(c.prediction->latency_s)
        << ", " << plan::FormatBytes(c.prediction->peak_bytes) << " per rank" << (c.over_memory ? " (over memory)" : "")
        << "\n";
    ++shown;
  }
  AutoMeshPick pick;
  pick.mesh = all[0].mesh_arg;
  pick.rotate = std::string(plan::RotateMethodName(all[0].mesh.rotate_method));
  for (const std::string& a : all[0].mesh.weight_axes) pick.shard_weights += (pick.shard_weights.empty() ? "" : ",") + a;
  pick.text = all[0].text;
  pick.prediction = *all[0].prediction;
  return pick;
}

}  // namespace weft::exec

// `weft explain PLAN --mesh M [--workload W] [--graph G]`: a readable table of what the
// compiled plan does per module (identical list items folded into `{a..b}` rows): what is
// split or gathered, how attention runs, how weights are sharded, which collectives run and
// how many bytes each rank sends; then the totals per axis and the memory per rank.
//
// With `--machine PROFILE`, the predicted time and memory per rank on that machine follow
// (compiler/cost/predict.h on a --program; on a --graph, a coarser estimate from its module calls,
// compiler/cost/graph_predict.h). `--mesh auto --nproc N --machine PROFILE` weighs every
// mesh of N ranks instead (compiler/cost/mesh_search.h): a ranking by predicted time with its
// terms, the meshes over --memory-per-rank marked, and why the plan refuses the others.
// `--ranks-per-host H` prices groups across hosts on the transport between them, and makes
// --mesh auto weigh every axis order (which groups stay within a host).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iomanip>
#include <limits>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_set>

#include "compiler/compile.h"
#include "compiler/cost/graph_predict.h"
#include "compiler/cost/mesh_search.h"
#include "compiler/cost/predict.h"
#include "compiler/diag/consumer.h"
#include "compiler/driver/commands.h"
#include "compiler/driver/compile_inputs.h"
#include "compiler/driver/program_lowering.h"
#include "compiler/model/path_pattern.h"

namespace weft::driver {
namespace {

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string SizesText(int64_t global, const std::vector<int64_t>& sizes) {
  if (sizes.empty()) return std::to_string(global);
  const bool equal = std::all_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s == sizes[0]; });
  return std::to_string(global) + "->" + std::to_string(sizes[0]) + (equal ? "" : "/" + std::to_string(sizes.back()));
}

struct Row {
  std::vector<std::string> data;  // one split/gather per line
  std::string attention, tp, comm, bytes;
};

Row RowOf(const plan::ModuleStep& s) {
  Row r;
  std::vector<std::string> data;
  for (const plan::Split& x : s.splits) {
    std::string name = x.target == plan::Split::Target::kArgument
                           ? x.argument + (x.element >= 0 ? "[" + std::to_string(x.element) + "]" : "")
                           : "out" + std::to_string(x.output);
    // Over cfg: the guidance branches, and whether the axis divides them.
    const std::string over = x.group == plan::kCfgAxis ? (x.uneven ? " cfg uneven" : " cfg") : "";
    data.push_back("split " + name + " d" + std::to_string(x.dim) + " " + SizesText(x.global_size, x.sizes) + over);
  }
  for (const plan::Gather& g : s.gathers) {
    const std::string over = g.group == plan::kCfgAxis ? (g.uneven ? " cfg uneven" : " cfg") : "";
    std::string pieces = std::to_string(g.sizes.empty() ? g.global_size : g.sizes[0]);
    if (g.group == plan::kCfgAxis && g.uneven) pieces += "/" + std::to_string(g.sizes.back());
    data.push_back("gather out" + std::to_string(g.output) + " d" + std::to_string(g.dim) + " " + pieces + "->" +
                   std::to_string(g.global_size) + over);
  }
  r.data = data;
  if (s.attention) {
    const plan::Attention& a = *s.attention;
    std::ostringstream o;
    o << plan::AttentionModeName(a.mode);
    if (a.mode != plan::AttentionMode::kLocal) {
      if (a.ulysses > 1) o << " U" << a.ulysses;
      if (a.ring > 1) o << " R" << a.ring << "/" << plan::RotateMethodName(a.rotate_method);
    }
    o << " " << a.local_heads << "h";
    if (a.head_pad) o << "+" << a.head_pad;
    o << " q" << a.q_len << " kv" << a.kv_len;
    if (a.pair_mask) o << " pair-mask";
    if (a.linear) o << " linear (key sums all-reduced over cp)";
    r.attention = o.str();
  }
  if (s.tp) {
    std::string t(plan::ShardStyleName(s.tp->style));
    for (const plan::ParamShard& p : s.tp->params) {
      if (p.name == "weight" && p.dim >= 0) {
        t += " " + std::to_string(p.full_shape[static_cast<size_t>(p.dim)]) + "->" +
             std::to_string(p.local_shape[static_cast<size_t>(p.dim)]);
      }
    }
    r.tp = t;
  }
  std::vector<std::string> comm;
  int64_t bytes = 0;
  for (const plan::Collective& c : s.cost.collectives) {
    comm.push_back(std::string(plan::CollectiveOpName(c.op)) + " " + c.axis + " x" + std::to_string(c.count));
    bytes += c.bytes;
  }
  r.comm = Join(comm, ", ");
  r.bytes = bytes ? plan::FormatBytes(bytes) : "";
  return r;
}

void Explain(const plan::ExecutionPlan& p, const model::ModelGraph& graph, std::ostream& out) {
  out << "plan " << p.plan_name << " (" << p.plan_file << ") for " << p.model_class << "\n"
      << "graph " << p.graph_name << " " << p.graph_hash << "\n"
      << "mesh " << p.mesh.ToString() << " (world " << p.mesh.world_size << ", cp " << p.mesh.Cp()
      << (p.mesh.Cfg() > 1 ? ", cfg " + std::to_string(p.mesh.Cfg()) : "") << ")"
      << (p.mesh.ulysses_anything ? " ulysses-anything" : "") << (p.mesh.ring_anything ? " ring-anything" : "")
      << ", workload " << p.workload.name << "\n"
      << "content hash " << plan::PlanContentHash(p) << "\n\n";
  std::vector<std::pair<std::string, std::string>> keyed;
  std::vector<Row> rows;
  for (const plan::ModuleStep& s : p.steps) {
    Row r = RowOf(s);
    keyed.emplace_back(s.module, Join(r.data, "\x1e") + "\x1f" + r.attention + "\x1f" + r.tp + "\x1f" + r.comm + "\x1f" + r.bytes +
                                     "\x1f" + std::to_string(s.calls));
    rows.push_back(std::move(r));
  }
  std::unordered_set<std::string> lists;
  for (const model::Module& m : graph.modules) {
    if (m.container == model::Container::kList) lists.insert(m.path);
  }
  const auto groups =
      model::CompressPaths(keyed, [&](std::string_view prefix) { return lists.count(std::string(prefix)) > 0; });
  size_t w_mod = 6, w_data = 4, w_attn = 9, w_tp = 2, w_comm = 11;
  for (const auto& [pattern, i] : groups) {
    w_mod = std::max(w_mod, pattern.size() + 2);
    for (const std::string& d : rows[i].data) w_data = std::max(w_data, d.size());
    w_attn = std::max(w_attn, rows[i].attention.size());
    w_tp = std::max(w_tp, rows[i].tp.size());
    w_comm = std::max(w_comm, rows[i].comm.size());
  }
  auto line = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                  const std::string& e, const std::string& f) {
    out << std::left << std::setw(static_cast<int>(w_mod)) << a << "  " << std::setw(static_cast<int>(w_data)) << b
        << "  " << std::setw(static_cast<int>(w_attn)) << c << "  " << std::setw(static_cast<int>(w_tp)) << d << "  "
        << std::setw(static_cast<int>(w_comm)) << e << "  " << f << "\n";
  };
  line("module", "data", "attention", "tp", "collectives", "bytes/rank/call");
  for (const auto& [pattern, i] : groups) {
    const std::vector<std::string>& data = rows[i].data;
    line("`" + pattern + "`", data.empty() ? "" : data[0], rows[i].attention, rows[i].tp, rows[i].comm,
         rows[i].bytes);
    for (size_t k = 1; k < data.size(); ++k) line("", data[k], "", "", "", "");
  }
  if (p.guidance_calls) {
    // The branches as calls of their own: which group runs how many, and what differs per call.
    const plan::GuidanceCalls& g = *p.guidance_calls;
    std::string per_group;
    for (size_t i = 0; i < g.per_group.size(); ++i) per_group += (i ? " + " : "") + std::to_string(g.per_group[i]);
    const bool uneven = std::any_of(g.per_group.begin(), g.per_group.end(), [&](int64_t n) { return n != g.per_group[0]; });
    std::string arguments;
    for (const std::string& a : g.arguments) arguments += (arguments.empty() ? "`" : ", `") + a + "`";
    out << "\nguidance branches as calls: " << g.branches << " over cfg=" << g.per_group.size() << " (" << per_group
        << (uneven ? ", cfg uneven" : "") << "), each call with its own " << arguments << "; the modules above run once "
        << "per call, the outputs (" << plan::FormatBytes(g.output_bytes) << " a call) are gathered over cfg\n";
  }
  out << "\nper forward, per rank: " << p.cost.collectives << " collectives, " << plan::FormatBytes(p.cost.bytes)
      << " sent\n";
  for (const plan::AxisTraffic& t : p.cost.per_axis) {
    out << "  " << std::left << std::setw(8) << t.axis << std::right << std::setw(6) << t.collectives
        << " collectives  " << plan::FormatBytes(t.bytes) << " (" << t.bytes << " B)\n";
  }
  out << "memory per rank: weights " << plan::FormatBytes(p.cost.weight_bytes) << " (of "
      << plan::FormatBytes(graph.ParamBytes()) << "), largest module call " << plan::FormatBytes(p.cost.activation_bytes)
      << "\n";
  // On a program: the whole values the compiler slices where they meet shards (a RoPE table, a
  // residual of a stream split later, a timestep embedding under cfg), said so that a plan review
  // sees every place the ranks' data differs from the plan's rules.
  if (p.program) {
    std::vector<std::string> slices;
    for (const plan::ProgramEdit& e : p.program->edits) {
      if (e.kind != plan::ProgramEdit::Kind::kSplit || e.node.empty()) continue;
      const std::string module = e.module.empty() ? std::string("the root") : "`" + e.module + "`";
      const std::string why = e.group == plan::kTpAxis ? "as colwise " + module + " shards its heads"
                                                       : "as the split of " + module;
      slices.push_back("`" + e.value + "` d" + std::to_string(e.dim) + " for node `" + e.node + "`" +
                       (e.scope.empty() ? std::string(" at the root") : " in `" + e.scope + "`") + " (" + e.group +
                       ", " + why + ")");
    }
    if (!slices.empty()) {
      out << "whole values sliced where they meet a shard (each rank takes its part, no communication): "
          << slices.size() << "\n";
      for (const std::string& l : slices) out << "  " << l << "\n";
    }
    // Convolutions over a split grid, each reading its neighbours' edge rows (one send_recv each).
    std::vector<std::string> halos;
    for (const plan::ProgramEdit& e : p.program->edits) {
      if (e.kind != plan::ProgramEdit::Kind::kHalo) continue;
      halos.push_back("node `" + e.node + "` reads " + std::to_string(e.new_value) + " row(s) of each neighbour's `" +
                      e.value + "` d" + std::to_string(e.dim) + " (split by " +
                      (e.module.empty() ? std::string("the root") : "`" + e.module + "`") + ")");
    }
    if (!halos.empty()) {
      out << "convolutions over a split grid, with their neighbours' rows (a halo exchange each): " << halos.size() << "\n";
      for (const std::string& l : halos) out << "  " << l << "\n";
    }
  }
  if (p.weights) {
    int64_t sliced = 0;
    for (const plan::WeightBlock& b : p.weights->blocks) sliced += b.slice_bytes;
    std::string axes;
    for (const std::string& a : p.mesh.weight_axes) axes += (axes.empty() ? "" : " x ") + a;
    out << "weights sliced over " << axes << " (" << p.weights->ranks << " ranks): " << p.weights->blocks.size()
        << " blocks, " << plan::FormatBytes(sliced) << " of them per rank, gathered block by block into "
        << plan::FormatBytes(p.cost.weight_buffer_bytes) << " of buffers (two blocks)\n";
  }
}

struct ExplainOptions {
  CompileOptions compile;
  std::string machine;          // --machine: a weft.machine/1 profile
  int nproc = 0;                // --nproc: the ranks --mesh auto weighs
  int ranks_per_host = 0;       // --ranks-per-host: 0 = every rank on one host
  int64_t memory_per_rank = 0;  // --memory-per-rank BYTES
  int show = 8;                 // --top: ranked meshes shown
};

std::string Ms(double s) { return cost::FormatSeconds(s); }

// The prediction's terms, one line.
std::string Terms(const cost::Prediction& p) {
  std::ostringstream o;
  o << "matmul " << Ms(p.matmul_s) << ", attention " << Ms(p.attention_s) << ", memory-bound " << Ms(p.memory_s);
  if (p.from_graph) {
    o << " (" << p.nodes << " module calls), collectives " << Ms(p.comm_s);
  } else {
    o << ", overhead " << Ms(p.overhead_s) << " (" << p.nodes << " nodes), collectives " << Ms(p.comm_s);
  }
  if (p.hidden_comm_s > 0) o << " (+" << Ms(p.hidden_comm_s) << " hidden)";
  return o.str();
}

std::string MemoryTerms(const cost::Prediction& p) {
  return "base " + plan::FormatBytes(p.base_bytes) + ", groups " + plan::FormatBytes(p.group_bytes) + ", parameters " +
         plan::FormatBytes(p.param_bytes) +
         (p.weight_buffer_bytes ? ", gather buffers " + plan::FormatBytes(p.weight_buffer_bytes) : std::string()) +
         ", activations " + plan::FormatBytes(p.activation_bytes);
}

void PrintPrediction(const cost::Prediction& p, const std::string& machine, std::ostream& out) {
  out << (p.from_graph ? "estimated from the graph on " : "predicted on ") << machine << ": " << Ms(p.latency_s) << " per forward, " << plan::FormatBytes(p.peak_bytes)
      << " peak per rank (" << p.threads << " thread" << (p.threads == 1 ? "" : "s") << " per rank)\n"
      << "  time: " << Terms(p) << "\n  memory: " << MemoryTerms(p) << "\n";
  for (const std::string& n : p.notes) out << "  note: " << n << "\n";
}

// The machine profile, its warnings on stderr; exits through the caller on failure.
std::optional<cost::MachineProfile> LoadMachine(const std::string& file) {
  std::vector<std::string> warnings;
  try {
    cost::MachineProfile m = cost::ReadMachineProfile(file, "", &warnings);
    for (const std::string& w : warnings) std::cerr << "weft explain: warning: " << w << "\n";
    return m;
  } catch (const std::exception& e) {
    std::cerr << "weft explain: " << e.what() << "\n";
    return std::nullopt;
  }
}

std::string MachineName(const cost::MachineProfile& m, const std::string& file) {
  return file + " (" + m.device + (m.measured ? "" : ", published figures, not measured") + ")";
}

// The refused candidates, one line per mesh and reason (its rotations and weight slicings mostly
// share the mesh's reason).
void PrintRefusals(const std::vector<cost::Candidate>& all) {
  std::vector<std::pair<std::string, std::string>> seen;
  for (const cost::Candidate& k : all) {
    if (k.prediction) continue;
    const std::pair<std::string, std::string> key{k.mesh_arg, k.refusal};
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    std::cout << "  " << k.mesh_arg << ": " << k.refusal << "\n";
  }
}

int RunAuto(const ExplainOptions& eo) {
  const CompileOptions& o0 = eo.compile;
  if (eo.nproc <= 0) {
    std::cerr << "weft explain: --mesh auto needs --nproc N (the ranks to weigh meshes for)\n";
    return 2;
  }
  if (eo.machine.empty()) {
    std::cerr << "weft explain: --mesh auto needs --machine PROFILE (`weft-run --calibrate -o PROFILE` measures "
                 "this machine; tools/machine_profiles/ has published ones)\n";
    return 2;
  }
  if (o0.programs.size() + o0.graphs.size() != 1) {
    std::cerr << "weft explain: --mesh auto predicts on one model: give one --program M.pt2 (or one --graph G, "
                 "a coarser estimate from its module calls)\n";
    return 2;
  }
  std::optional<cost::MachineProfile> machine = LoadMachine(eo.machine);
  if (!machine) return 2;
  CompileOptions o = o0;
  o.meshes = {"ulysses=1"};  // loads the plan and program; the search makes the meshes
  diag::TextRenderer renderer(std::cerr);
  diag::SortingConsumer sorted(renderer);
  Inputs in;
  diag::Emitter diags(in.sources, sorted, o.max_errors);
  if (int rc = LoadInputs(o, in, diags, "explain")) {
    sorted.Flush();
    return rc;
  }
  if (in.plans_without_graph > 0 || in.combinations.empty()) {
    sorted.Flush();
    return 2;
  }
  sorted.Flush();
  int status = 0;
  bool first = true;
  for (const Combination& c : in.combinations) {
    const program::Program* prog = in.programs[c.graph].get();
    auto search = [&](int nproc) {
      cost::SearchRequest r;
      r.ast = &*in.plans[c.plan];
      r.sources = &in.sources;
      r.plan_file = in.plan_files[c.plan];
      r.graph = &in.graphs[c.graph];
      r.program = prog;
      r.program_file = in.graph_files[c.graph];
      r.workload = c.workload;
      r.nproc = nproc;
      r.flags = in.meshes[c.mesh];
      r.activation_bytes = prog != nullptr ? prog->ActivationBytes() : in.activation_bytes;  // a graph's: --dtype, as for check
      r.memory_per_rank = eo.memory_per_rank;
      r.machine = *machine;
      r.predict.ranks_per_host = eo.ranks_per_host;
      return cost::SearchMeshes(r, 0);
    };
    const std::vector<cost::Candidate> all = search(eo.nproc);
    if (!first) std::cout << "\n";
    first = false;
    std::cout << "plan " << in.plan_files[c.plan] << " on " << in.graph_files[c.graph] << ", workload " << c.workload
              << ", " << eo.nproc << " rank" << (eo.nproc == 1 ? "" : "s") << "\nmachine " << MachineName(*machine, eo.machine)
              << "\n";
    size_t predicted = 0, fits = 0;
    for (const cost::Candidate& k : all) {
      if (k.prediction) ++predicted;
      if (k.prediction && !k.over_memory) ++fits;
    }
    if (predicted == 0) {
      status = 1;
      std::cout << "no mesh of " << eo.nproc << " ranks admits the plan:\n";
      PrintRefusals(all);
      // The nearest world sizes that admit one.
      for (int delta = 1; delta <= eo.nproc + 8; ++delta) {
        std::vector<std::string> near;
        for (int n : {eo.nproc - delta, eo.nproc + delta}) {
          if (n < 1) continue;
          for (const cost::Candidate& k : search(n)) {
            if (k.prediction) near.push_back(k.text + " (" + std::to_string(n) + " ranks, " + Ms(k.prediction->latency_s) + ")");
            if (near.size() >= 4) break;
          }
        }
        if (!near.empty()) {
          std::cout << "nearest legal meshes:";
          for (const std::string& n : near) std::cout << "\n  " << n;
          std::cout << "\n";
          break;
        }
      }
      continue;
    }
    if (fits == 0) {
      status = 1;
      std::cout << "no mesh of " << eo.nproc << " ranks fits in " << plan::FormatBytes(eo.memory_per_rank)
                << " per rank; what each needs:\n";
      std::vector<const cost::Candidate*> by_memory;
      for (const cost::Candidate& k : all) {
        if (k.prediction) by_memory.push_back(&k);
      }
      std::stable_sort(by_memory.begin(), by_memory.end(), [](const cost::Candidate* a, const cost::Candidate* b) {
        return a->prediction->peak_bytes < b->prediction->peak_bytes;
      });
      for (const cost::Candidate* k : by_memory) {
        std::cout << "  " << k->text << ": " << plan::FormatBytes(k->prediction->peak_bytes) << " ("
                  << MemoryTerms(*k->prediction) << ")\n";
      }
      continue;
    }
    // The mesh column as wide as the longest row shown (an axis order makes them long), at least 48.
    auto row_text = [](const cost::Candidate& k) { return k.text + (k.over_memory ? " (over memory)" : ""); };
    size_t mesh_width = 48;
    int counted = 0;
    for (const cost::Candidate& k : all) {
      if (!k.prediction || counted++ >= eo.show) continue;
      mesh_width = std::max(mesh_width, row_text(k).size() + 2);
    }
    const int w_mesh = static_cast<int>(mesh_width);
    std::cout << "\n" << std::left << std::setw(5) << "#" << std::setw(w_mesh) << "mesh" << std::right << std::setw(11)
              << "predicted" << std::setw(11) << "compute" << std::setw(12) << "collectives" << std::setw(12)
              << "peak/rank" << "\n";
    int shown = 0;
    for (const cost::Candidate& k : all) {
      if (!k.prediction || shown >= eo.show) continue;
      const cost::Prediction& p = *k.prediction;
      ++shown;
      std::cout << std::left << std::setw(5) << shown << std::setw(w_mesh) << row_text(k)
                << std::right << std::setw(11) << Ms(p.latency_s) << std::setw(11)
                << Ms(p.latency_s - p.comm_s) << std::setw(12) << Ms(p.comm_s) << std::setw(12)
                << plan::FormatBytes(p.peak_bytes) << "\n";
    }
    if (predicted > static_cast<size_t>(shown)) std::cout << "(" << predicted - shown << " more; --top N shows them)\n";
    std::cout << "\nthe pick: --mesh " << all[0].mesh_arg;
    if (all[0].mesh.Ring() > 1) std::cout << " --rotate " << plan::RotateMethodName(all[0].mesh.rotate_method);
    if (!all[0].mesh.weight_axes.empty()) {
      std::string axes;
      for (const std::string& a : all[0].mesh.weight_axes) axes += (axes.empty() ? "" : ",") + a;
      std::cout << " --shard-weights " << axes;
    }
    std::cout << "\n";
    for (int i = 0; i < std::min(3, shown); ++i) {
      std::cout << "  " << all[static_cast<size_t>(i)].text << ": " << Terms(*all[static_cast<size_t>(i)].prediction) << "\n";
    }
    size_t refused = 0;
    for (const cost::Candidate& k : all) refused += k.prediction ? 0 : 1;
    if (refused > 0) {
      std::cout << "refused by the plan (" << refused << "):\n";
      PrintRefusals(all);
    }
  }
  return status;
}

int RunExplain(const ExplainOptions& eo) {
  const CompileOptions& o = eo.compile;
  if (std::find(o.meshes.begin(), o.meshes.end(), "auto") != o.meshes.end()) {
    if (o.meshes.size() != 1) {
      std::cerr << "weft explain: --mesh auto weighs every mesh; give no other --mesh with it\n";
      return 2;
    }
    return RunAuto(eo);
  }
  std::optional<cost::MachineProfile> machine;
  if (!eo.machine.empty()) {
    machine = LoadMachine(eo.machine);
    if (!machine) return 2;
  }
  diag::TextRenderer renderer(std::cerr);
  diag::SortingConsumer sorted(renderer);
  Inputs in;
  diag::Emitter diags(in.sources, sorted, o.max_errors);
  if (int rc = LoadInputs(o, in, diags, "explain")) {
    sorted.Flush();
    return rc;
  }
  if (in.plans_without_graph > 0) {
    sorted.Flush();
    return 2;
  }
  bool failed = diags.has_errors();
  bool first = true;
  for (const Combination& c : in.combinations) {
    std::optional<plan::ExecutionPlan> plan =
        CompileAst(*in.plans[c.plan], in.graphs[c.graph], BindOptionsFor(in, c), diags);
    // On a program, the plan must also lower into it (the dataflow checks run there), as
    // `check` and `compile` require; the explanation then shows the cost matched to the edits.
    if (plan && in.programs[c.graph] != nullptr && !LowerIntoProgram(in, c, *plan, diags)) plan.reset();
    if (!plan) {
      failed = true;
      continue;
    }
    if (!first) std::cout << "\n";
    first = false;
    Explain(*plan, in.graphs[c.graph], std::cout);
    if (machine) {
      try {
        cost::PredictOptions po;
        po.workload = c.workload;
        po.ranks_per_host = eo.ranks_per_host;
        PrintPrediction(in.programs[c.graph] != nullptr ? cost::Predict(*in.programs[c.graph], &*plan, *machine, po)
                                                        : cost::PredictFromGraph(in.graphs[c.graph], &*plan, *machine, po),
                        MachineName(*machine, eo.machine), std::cout);
      } catch (const std::exception& e) {
        std::cerr << "weft explain: cannot predict: " << e.what() << "\n";
        failed = true;
      }
    }
  }
  sorted.Flush();
  return failed ? 1 : 0;
}

}  // namespace

Command MakeExplainCommand(CLI::App& weft) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* app = weft.add_subcommand("explain", "Show per module what a compiled plan does and what it costs");
  AddCompileOptions(app, options->compile, /*many=*/false);
  app->add_option("--machine", options->machine, "A machine profile (weft.machine/1: `weft-run --calibrate -o FILE`, "
                                                 "or tools/machine_profiles/): predict time and memory per rank on it (from a --graph: an "
                                                 "estimate from its module calls, a lower bound)");
  app->add_option("--nproc", options->nproc, "With --mesh auto: the ranks to weigh every mesh for")
      ->check(CLI::Range(1, 4096));
  app->add_option("--ranks-per-host", options->ranks_per_host,
                  "With --machine: ranks on each host (default: all on one), in blocks of consecutive ranks as "
                  "torchrun and srun place them; a group across hosts is priced on Gloo (CPU) or the profile's "
                  "nccl-net lines (GPU), and --mesh auto also weighs every axis order")
      ->check(CLI::Range(1, 4096));
  app->add_option("--memory-per-rank", options->memory_per_rank,
                  "With --mesh auto: drop meshes whose predicted peak per rank exceeds BYTES")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  app->add_option("--top", options->show, "With --mesh auto: how many ranked meshes to show (default 8)")
      ->check(CLI::Range(1, 1000));
  return Command{app, [options] { return RunExplain(*options); }};
}

}  // namespace weft::driver

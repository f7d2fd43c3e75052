// `weft explain PLAN --mesh M [--workload W] [--graph G]`: a readable table of what the
// compiled plan does per module (identical list items folded into `{a..b}` rows): what is
// split or gathered, how attention runs, how weights are sharded, which collectives run and
// how many bytes each rank sends; then the totals per axis and the memory per rank.
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_set>

#include "compiler/compile.h"
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
  out << "\nper forward, per rank: " << p.cost.collectives << " collectives, " << plan::FormatBytes(p.cost.bytes)
      << " sent\n";
  for (const plan::AxisTraffic& t : p.cost.per_axis) {
    out << "  " << std::left << std::setw(8) << t.axis << std::right << std::setw(6) << t.collectives
        << " collectives  " << plan::FormatBytes(t.bytes) << " (" << t.bytes << " B)\n";
  }
  out << "memory per rank: weights " << plan::FormatBytes(p.cost.weight_bytes) << " (of "
      << plan::FormatBytes(graph.ParamBytes()) << "), largest module call " << plan::FormatBytes(p.cost.activation_bytes)
      << "\n";
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

int RunExplain(const CompileOptions& o) {
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
  }
  sorted.Flush();
  return failed ? 1 : 0;
}

}  // namespace

Command MakeExplainCommand(CLI::App& weft) {
  auto options = std::make_shared<CompileOptions>();
  CLI::App* app = weft.add_subcommand("explain", "Show per module what a compiled plan does and what it costs");
  AddCompileOptions(app, *options, /*many=*/false);
  return Command{app, [options] { return RunExplain(*options); }};
}

}  // namespace weft::driver

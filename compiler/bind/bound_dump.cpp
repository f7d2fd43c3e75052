#include <sstream>

#include "compiler/bind/bind.h"

namespace weft::bind {
namespace {

std::string Sizes(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

}  // namespace

std::string DumpBound(const BoundPlan& b, const model::ModelGraph& graph) {
  std::ostringstream out;
  auto path = [&](model::ModuleId id) { return "`" + graph.modules.at(id).path + "`"; };
  out << "bound plan " << b.plan_name << " (" << b.plan_file << ") for " << b.model_class << "\n";
  out << "graph " << graph.name << ", mesh " << b.mesh.ToString() << ", workload " << b.workload
      << ", activation bytes " << b.activation_bytes << "\n";
  for (const BoundSplit& s : b.splits) {
    out << "split " << path(s.module) << " ";
    if (s.split.target == plan::Split::Target::kArgument) {
      out << "argument " << s.split.argument;
      if (s.split.element >= 0) out << "[" << s.split.element << "]";
    } else {
      out << "output " << s.split.output;
    }
    out << " dim " << s.split.dim << " rank " << s.split.rank << (s.split.optional ? " optional" : "") << ": "
        << s.split.global_size << " -> " << Sizes(s.split.sizes) << "  @ " << s.split.origin.ToString() << "\n";
  }
  for (const BoundGather& g : b.gathers) {
    out << "gather " << path(g.module) << " output " << g.gather.output << " dim " << g.gather.dim << ": "
        << Sizes(g.gather.sizes) << " -> " << g.gather.global_size << "  @ " << g.gather.origin.ToString() << "\n";
  }
  for (const BoundAttention& a : b.attention) {
    out << "attention " << path(a.module) << (a.context_parallel ? " context_parallel" : " local")
        << (a.kv_sharded ? " kv-sharded" : "") << (a.q_sharded ? " q-sharded" : "") << " heads=" << a.heads
        << " local_heads=" << a.local_heads << " head_dim=" << a.head_dim;
    if (a.head_pad) out << " head_pad=" << a.head_pad;
    out << " q=" << a.q_len << " kv=" << a.kv_len << " calls=" << a.calls << "  @ " << a.origin.ToString() << "\n";
  }
  for (const BoundTp& t : b.tp) {
    out << "tp " << path(t.module) << " " << plan::ShardStyleName(t.style);
    if (!t.blocks.empty()) out << " blocks " << Sizes(t.blocks);
    out << "  @ " << t.origin.ToString() << "\n";
  }
  out << "sharded lengths " << Sizes(b.sharded_lengths) << "\n";
  return out.str();
}

}  // namespace weft::bind

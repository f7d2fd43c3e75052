#include "compiler/program/edits.h"

#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "compiler/program/archive.h"

namespace weft::program {
namespace {

using Kind = plan::ProgramEdit::Kind;

bool InScope(const Program& p, const Node& n, const std::string& scope) {
  if (scope.empty()) return true;
  if (n.stack < 0) return false;
  for (const ModuleFrame& f : p.module_stacks[static_cast<size_t>(n.stack)]) {
    if (f.path == scope) return true;
  }
  return false;
}

Node EditNode(const std::string& target, size_t edit, const std::string& input, const std::string& output, int32_t stack) {
  Node n;
  n.name = output;
  n.target = target;
  NamedArgument self;
  self.name = "self";
  self.arg.kind = Argument::Kind::kTensor;
  self.arg.name = input;
  NamedArgument index;
  index.name = "edit";
  index.arg.kind = Argument::Kind::kInt;
  index.arg.i = static_cast<int64_t>(edit);
  n.inputs = {self, index};
  Argument out;
  out.kind = Argument::Kind::kTensor;
  out.name = output;
  n.outputs = {out};
  n.stack = stack;
  return n;
}

void Rename(Argument& a, const std::function<std::string(const std::string&)>& rename) {
  if (a.kind == Argument::Kind::kTensor) a.name = rename(a.name);
  for (std::string& n : a.names) {
    if (!n.empty()) n = rename(n);
  }
}

}  // namespace

void ApplyEdits(Program& p, const plan::ProgramEdits& edits) {
  const std::string where = p.path.empty() ? std::string("program") : p.path;
  if (!edits.program_hash.empty() && edits.program_hash != p.hash) {
    throw ProgramError(where + ": the plan was compiled against another program (" + edits.program_hash +
                       ", this one is " + p.hash + "); compile it against this program");
  }
  std::set<std::string> values;
  std::set<std::string> graph_inputs;
  for (const Argument& a : p.inputs) {
    for (const std::string& n : a.TensorNames()) {
      values.insert(n);
      graph_inputs.insert(n);
    }
  }
  std::map<std::string, size_t> node_index;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    node_index[p.nodes[i].name] = i;
    for (const Argument& o : p.nodes[i].outputs) {
      for (const std::string& n : o.TensorNames()) values.insert(n);
    }
  }
  // Edits by what triggers them.
  struct Scoped {
    size_t edit;
    std::string value, scope, renamed;
    bool emitted = false;
  };
  std::vector<Scoped> scoped;                                 // splits of a module argument
  std::map<std::string, std::vector<size_t>> after;           // value -> edits applied after its producer
  std::map<std::string, size_t> attention;                    // node -> edit
  for (size_t i = 0; i < edits.edits.size(); ++i) {
    const plan::ProgramEdit& e = edits.edits[i];
    const std::string rule = e.origin.Known() ? " (rule at " + e.origin.ToString() + ")" : "";
    switch (e.kind) {
      case Kind::kSplit:
      case Kind::kGather:
        if (values.count(e.value) == 0) {
          throw ProgramError(where + ": the plan's " + std::string(plan::ProgramEditKindName(e.kind)) + " of `" + e.module +
                             "`" + rule + " names value `" + e.value + "`, which the program does not have");
        }
        if (e.kind == Kind::kSplit && !e.after_producer && !(e.scope.empty() && graph_inputs.count(e.value))) {
          scoped.push_back({i, e.value, e.scope, e.value + "@" + std::to_string(i)});
        } else {
          after[e.value].push_back(i);
        }
        break;
      case Kind::kAttention:
        if (node_index.count(e.node) == 0) {
          throw ProgramError(where + ": the plan's attention of `" + e.module + "`" + rule + " names node `" + e.node +
                             "`, which the program does not have");
        }
        attention[e.node] = i;
        break;
      default:
        throw ProgramError(where + ": edit " + std::string(plan::ProgramEditKindName(e.kind)) + " of `" + e.module +
                           "` is not supported yet");
    }
  }

  std::unordered_map<std::string, std::string> renamed;  // value -> what every later use reads
  auto current = [&](const std::string& v) {
    auto it = renamed.find(v);
    return it == renamed.end() ? v : it->second;
  };
  std::vector<Node> nodes;
  nodes.reserve(p.nodes.size() + edits.edits.size());
  auto emit_after = [&](const std::string& value, int32_t stack) {
    auto it = after.find(value);
    if (it == after.end()) return;
    for (size_t i : it->second) {
      const plan::ProgramEdit& e = edits.edits[i];
      const std::string out = value + "@" + std::to_string(i);
      nodes.push_back(EditNode(e.kind == Kind::kSplit ? kSplitTarget : kGatherTarget, i, current(value), out, stack));
      if (const TensorMeta* meta = p.FindTensor(value)) p.tensor_values.emplace(out, *meta);
      renamed[value] = out;
    }
  };
  // Graph inputs first: the root's splits.
  for (const std::string& in : graph_inputs) emit_after(in, -1);
  for (Node& n : p.nodes) {
    for (NamedArgument& in : n.inputs) {
      Rename(in.arg, [&](const std::string& v) {
        for (Scoped& s : scoped) {
          if (s.value != v || !InScope(p, n, s.scope)) continue;
          if (!s.emitted) {
            nodes.push_back(EditNode(kSplitTarget, s.edit, current(v), s.renamed, n.stack));
            if (const TensorMeta* meta = p.FindTensor(v)) p.tensor_values.emplace(s.renamed, *meta);
            s.emitted = true;
          }
          return s.renamed;
        }
        return current(v);
      });
    }
    auto att = attention.find(n.name);
    if (att != attention.end()) {
      n.target = kAttentionTarget;
      NamedArgument index;
      index.name = "edit";
      index.arg.kind = Argument::Kind::kInt;
      index.arg.i = static_cast<int64_t>(att->second);
      n.inputs.push_back(index);
    }
    std::vector<std::string> produced;
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) produced.push_back(v);
    }
    const int32_t stack = n.stack;
    nodes.push_back(std::move(n));
    for (const std::string& v : produced) emit_after(v, stack);
  }
  for (Argument& o : p.outputs) Rename(o, current);
  for (const Scoped& s : scoped) {
    if (!s.emitted) {
      const plan::ProgramEdit& e = edits.edits[s.edit];
      throw ProgramError(where + ": the plan splits `" + s.value + "` for the uses inside `" + s.scope + "`" +
                         (e.origin.Known() ? " (rule at " + e.origin.ToString() + ")" : "") +
                         ", but no node there reads it");
    }
  }
  p.nodes = std::move(nodes);
}

}  // namespace weft::program

#include "compiler/program/edits.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "compiler/program/archive.h"
#include "compiler/program/local_sizes.h"
#include "compiler/program/plan_edit_error.h"

namespace weft::program {
namespace {

using Kind = plan::ProgramEdit::Kind;

// The `edit` input of weft's nodes: the index of their edit in ProgramEdits::edits.
NamedArgument EditIndex(size_t edit) {
  NamedArgument index;
  index.name = "edit";
  index.arg.kind = Argument::Kind::kInt;
  index.arg.i = static_cast<int64_t>(edit);
  return index;
}


// `name = sym_size.int(value, dim)`: a length read at run time (a whole stream's, for an attention
// over a joint sequence with streams every rank holds whole).
Node LengthNode(const std::string& name, const std::string& value, int64_t dim, int32_t stack) {
  Node n;
  n.name = name;
  n.target = "torch.ops.aten.sym_size.int";
  NamedArgument self;
  self.name = "self";
  self.arg.kind = Argument::Kind::kTensor;
  self.arg.name = value;
  NamedArgument d;
  d.name = "dim";
  d.arg.kind = Argument::Kind::kInt;
  d.arg.i = dim;
  n.inputs = {self, d};
  Argument out;
  out.kind = Argument::Kind::kSymInt;
  out.sym_ints.push_back(SymIntRef{true, name, 0});
  n.outputs = {out};
  n.stack = stack;
  return n;
}

// `unit`: a split's row length as the product of these symbolic ints or integer literals; `rows`:
// the count of its rows, one symbolic int or literal.
NamedArgument UnitArgument(const std::vector<std::string>& unit, const char* name) {
  NamedArgument a;
  a.name = name;
  a.arg.kind = Argument::Kind::kSymInts;
  for (const std::string& u : unit) {
    a.arg.sym_ints.push_back(IsLengthLiteral(u) ? SymIntRef{false, "", std::stoll(u)} : SymIntRef{true, u, 0});
  }
  return a;
}

// `parts`: the full length of each stream a dim lays out, a symbolic int or (a stream of constant
// length) an integer literal.
NamedArgument PartsArgument(const std::vector<std::string>& parts) { return UnitArgument(parts, "parts"); }

Node EditNode(const std::string& target, size_t edit, const std::string& input, const std::string& output, int32_t stack,
              const std::vector<std::string>& parts = {}) {
  Node n;
  n.name = output;
  n.target = target;
  NamedArgument self;
  self.name = "self";
  self.arg.kind = Argument::Kind::kTensor;
  self.arg.name = input;
  n.inputs = {self, EditIndex(edit)};
  if (!parts.empty()) n.inputs.push_back(PartsArgument(parts));
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

// Applies kArgument edit `e` (index `index`) to `n`, which reads `reads` (program value -> the
// value it reads now, sharded where a split covers it): the symbolic int becomes the size of
// the shard of `e.value` along `e.dim`, computed by a sym_size node inserted before it (negated
// when `e.new_value` is -1); or, without a value, the constant `e.new_value`.
void EditArgument(Program& p, Node& n, const plan::ProgramEdit& e, size_t index,
                  const std::map<std::string, std::string>& reads, std::vector<Node>& nodes) {
  const std::string where = p.Where();
  const std::string rule = RuleAt(e.origin);
  NamedArgument* arg = nullptr;
  for (NamedArgument& in : n.inputs) {
    if (in.name == e.argument) arg = &in;
  }
  const bool single = e.element < 0;
  if (arg == nullptr ||
      (single ? arg->arg.kind != Argument::Kind::kSymInt && arg->arg.kind != Argument::Kind::kInt
              : (arg->arg.kind != Argument::Kind::kSymInts && arg->arg.kind != Argument::Kind::kInts) ||
                    static_cast<size_t>(e.element) >=
                        (arg->arg.kind == Argument::Kind::kInts ? arg->arg.ints.size() : arg->arg.sym_ints.size()))) {
    throw ProgramError(where + ": the plan's argument edit for `" + e.module + "`" + rule + " names argument `" +
                       e.argument + "`" + (single ? "" : " element " + std::to_string(e.element)) + " of node `" +
                       n.name + "`, which is no integer there");
  }
  if (e.value.empty()) {
    // -1: a view's split dim sized from this rank's part (shard_flow.h), which holds only when
    // the part is whole rows of the dims after it.
    if (e.new_value == -1 && !single) {
      n.edit_requires = "the plan's split leaves this view the length of the split dim to infer from each rank's "
                        "part, which must be whole rows of the dims after it: a CP degree (ring x ulysses) that "
                        "divides the rows";
    }
    if (arg->arg.kind == Argument::Kind::kInt) {
      arg->arg.i = e.new_value;
    } else if (arg->arg.kind == Argument::Kind::kInts) {
      arg->arg.ints[static_cast<size_t>(e.element)] = e.new_value;
    } else {
      SymIntRef& ref = arg->arg.sym_ints[single ? 0 : static_cast<size_t>(e.element)];
      ref = SymIntRef{false, "", e.new_value};
    }
    return;
  }
  // A constant the export fixed becomes a symbolic int (shard_flow.h's local constants).
  if (arg->arg.kind == Argument::Kind::kInt) {
    arg->arg.sym_ints = {SymIntRef{false, "", arg->arg.i}};
    arg->arg.kind = Argument::Kind::kSymInt;
  } else if (arg->arg.kind == Argument::Kind::kInts) {
    arg->arg.sym_ints.clear();
    for (int64_t v : arg->arg.ints) arg->arg.sym_ints.push_back(SymIntRef{false, "", v});
    arg->arg.ints.clear();
    arg->arg.kind = Argument::Kind::kSymInts;
  }
  auto tensor = reads.find(e.value);
  if (tensor == reads.end()) {
    throw ProgramError(where + ": the plan's local size for node `" + n.name + "`" + rule + " reads `" + e.value +
                       "`, which that node cannot see");
  }
  SymIntRef& ref = arg->arg.sym_ints[single ? 0 : static_cast<size_t>(e.element)];
  // A repeat count made local changes the output's length, which repeat_interleave checks
  // against its `output_size` hint (the full one): the hint goes; the op needs none.
  if (n.target == "torch.ops.aten.repeat_interleave.self_int" && e.argument == "repeats") {
    for (NamedArgument& in : n.inputs) {
      if (in.name == "output_size") in.arg = Argument{};
    }
  }
  Node size;
  size.name = e.value + "@" + std::to_string(index) + ".size";
  size.target = "torch.ops.aten.sym_size.int";
  NamedArgument self;
  self.name = "self";
  self.arg.kind = Argument::Kind::kTensor;
  self.arg.name = tensor->second;
  NamedArgument dim;
  dim.name = "dim";
  dim.arg.kind = Argument::Kind::kInt;
  dim.arg.i = e.dim;
  size.inputs = {self, dim};
  Argument out;
  out.kind = Argument::Kind::kSymInt;
  out.sym_ints = {SymIntRef{true, size.name, 0}};
  size.outputs = {out};
  size.stack = n.stack;
  if (!ref.is_name) {
    p.sym_int_values.emplace(size.name, SymInt{true, ref.value, size.name});  // a constant made local: its full value is the hint
  } else if (auto old = p.sym_int_values.find(ref.name); old != p.sym_int_values.end()) {
    p.sym_int_values.emplace(size.name, old->second);
  }
  ref = SymIntRef{true, size.name, 0};
  const std::string local = size.name;
  nodes.push_back(std::move(size));
  if (e.new_value == -1) {  // a negated length: -size
    Node neg;
    neg.name = local + ".neg";
    neg.target = "_operator.neg";
    NamedArgument operand;
    operand.name = "a";
    operand.arg.kind = Argument::Kind::kSymInt;
    operand.arg.sym_ints = {SymIntRef{true, local, 0}};
    neg.inputs = {operand};
    Argument negated;
    negated.kind = Argument::Kind::kSymInt;
    negated.sym_ints = {SymIntRef{true, neg.name, 0}};
    neg.outputs = {negated};
    neg.stack = n.stack;
    ref = SymIntRef{true, neg.name, 0};
    nodes.push_back(std::move(neg));
  }
}

// Applies kHalo edit `e` (index `index`) to convolution `n`: its input (as renamed so far) goes
// through `weft.halo`, which adds `e.new_value` rows of each neighbouring rank's part on either
// side of dim `e.dim`, and the convolution pads none along that dim.
void ReadWithHalo(Program& p, Node& n, const plan::ProgramEdit& e, size_t index, std::vector<Node>& nodes) {
  const std::string where = p.Where();
  NamedArgument* input = nullptr;
  NamedArgument* padding = nullptr;
  for (NamedArgument& in : n.inputs) {
    if (in.name == "input" && in.arg.kind == Argument::Kind::kTensor) input = &in;
    if (in.name == "padding" && in.arg.kind == Argument::Kind::kInts) padding = &in;
  }
  const size_t spatial = e.rank > 2 && e.dim >= 2 ? static_cast<size_t>(e.rank - 2) : 0;
  const size_t at = static_cast<size_t>(e.dim) - 2;
  if (input == nullptr || padding == nullptr || spatial == 0 || at >= spatial ||
      (padding->arg.ints.size() != 1 && padding->arg.ints.size() != spatial)) {
    throw ProgramError(where + ": the plan's halo edit for `" + e.module + "`" + RuleAt(e.origin) + " names node `" +
                       n.name + "`, which is no convolution padded along dim " + std::to_string(e.dim) +
                       " (compile the plan again)");
  }
  std::vector<int64_t>& pads = padding->arg.ints;
  if (pads.size() == 1) pads.assign(spatial, pads[0]);
  pads[at] = 0;
  const std::string out = e.value + "@" + std::to_string(index);
  nodes.push_back(EditNode(kHaloTarget, index, input->arg.name, out, n.stack));
  if (const TensorMeta* meta = p.FindTensor(e.value)) p.tensor_values.emplace(out, *meta);
  input->arg.name = out;
}

}  // namespace

void ApplyEdits(Program& p, const plan::ProgramEdits& edits) {
  const std::string where = p.Where();
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
    std::string value, scope, node, renamed;  // node: "" = every use inside scope
    bool emitted = false;
  };
  std::vector<Scoped> scoped;                                 // splits of a module argument
  std::map<std::string, std::vector<size_t>> after;           // value -> edits applied after its producer
  // node -> weft's target it becomes and its edit (an attention the plan runs, an RMS norm with
  // statistics over tp)
  std::map<std::string, std::pair<const char*, size_t>> retarget;
  std::map<std::string, std::vector<size_t>> arguments;       // node -> its argument edits
  std::map<std::string, size_t> reduced;                      // rowwise Linear node -> its all-reduce
  std::map<std::string, size_t> halos;                        // convolution node -> its halo exchange
  for (size_t i = 0; i < edits.edits.size(); ++i) {
    const plan::ProgramEdit& e = edits.edits[i];
    const std::string rule = RuleAt(e.origin);
    switch (e.kind) {
      case Kind::kSplit:
      case Kind::kGather:
        if (values.count(e.value) == 0) {
          throw ProgramError(where + ": the plan's " + std::string(plan::ProgramEditKindName(e.kind)) + " of `" + e.module +
                             "`" + rule + " names value `" + e.value + "`, which the program does not have");
        }
        if (e.kind == Kind::kSplit && !e.after_producer &&
            !(e.scope.empty() && e.node.empty() && graph_inputs.count(e.value))) {
          scoped.push_back({i, e.value, e.scope, e.node, e.value + "@" + std::to_string(i)});
        } else {
          after[e.value].push_back(i);
        }
        break;
      case Kind::kAttention:
      case Kind::kArgument:
      case Kind::kAllReduce:
      case Kind::kNormStats:
      case Kind::kHalo:
        if (node_index.count(e.node) == 0) {
          throw ProgramError(where + ": the plan's " + std::string(plan::ProgramEditKindName(e.kind)) + " edit for `" +
                             e.module + "`" + rule + " names node `" + e.node + "`, which the program does not have");
        }
        if (e.kind == Kind::kArgument) {
          arguments[e.node].push_back(i);
        } else if (e.kind == Kind::kHalo) {
          halos[e.node] = i;
        } else if (e.kind == Kind::kAllReduce) {
          reduced[e.node] = i;
        } else {
          retarget[e.node] = {e.kind == Kind::kAttention ? kAttentionTarget : kNormStatsTarget, i};
        }
        break;
      default:
        throw ProgramError(where + ": edit " + std::string(plan::ProgramEditKindName(e.kind)) + " of `" + e.module +
                           "` is not supported yet");
    }
  }

  // A value gathered over both the CP group and cfg: the branches last, so that cfg moves whole
  // sequences (what the cost model counts, compiler/lower/lower.cpp).
  for (auto& [value, list] : after) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      auto last = [&](size_t i) { return edits.edits[i].kind == Kind::kGather && edits.edits[i].group == plan::kCfgAxis; };
      return !last(a) && last(b);
    });
  }

  std::unordered_map<std::string, std::string> renamed;  // value -> what every later use reads
  auto current = [&](const std::string& v) {
    auto it = renamed.find(v);
    return it == renamed.end() ? v : it->second;
  };
  // The full lengths of the streams a split or a pair mask lays out (an edit's parts): the sym_size
  // that the export computed may read the split tensor by the time it runs (a split at the graph
  // input), so a twin reads the same dim of the value before its split (below).
  std::map<std::string, std::string> whole_lengths;  // part -> the symbolic int read off a whole value
  for (const plan::ProgramEdit& e : edits.edits) {
    for (const std::string& part : e.parts) whole_lengths.emplace(part, part);
  }
  auto whole = [&](std::vector<std::string> parts) {
    for (std::string& part : parts) part = whole_lengths[part];
    return parts;
  };
  std::vector<Node> nodes;
  nodes.reserve(p.nodes.size() + edits.edits.size());
  std::set<std::string> computed;  // symbolic ints the nodes so far compute
  // Size arithmetic a split's rows need where the program computes it only after the split (Wan
  // Animate's frame count, computed in the face adapter from the face video's length): the nodes
  // computing it from the forward's inputs' sizes alone move to just before the split. They read
  // the whole inputs, so they compute the full count wherever they run -- but for the length of a
  // dim the plan splits at the root, which later nodes read off the split (this rank's): not moved.
  std::set<std::pair<std::string, int64_t>> split_at_root;
  for (const plan::ProgramEdit& e : edits.edits) {
    if (e.kind == Kind::kSplit && e.scope.empty() && e.node.empty() && graph_inputs.count(e.value)) {
      split_at_root.emplace(e.value, e.dim);
    }
  }
  std::map<std::string, size_t> defined_at;  // symbolic int -> the node computing it
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (const Argument& o : p.nodes[i].outputs) {
      for (const SymIntRef& r : o.sym_ints) {
        if (r.is_name) defined_at.emplace(r.name, i);
      }
    }
  }
  std::set<std::string> hoisted;  // nodes moved before a split
  std::function<bool(const std::string&)> hoist = [&](const std::string& sym) {
    const auto at = defined_at.find(sym);
    if (at == defined_at.end()) return false;
    const Node& n = p.nodes[at->second];
    const bool size = n.target == "torch.ops.aten.sym_size.int";
    if (!size && n.target.rfind("_operator.", 0) != 0) return false;
    for (const NamedArgument& in : n.inputs) {
      for (const std::string& t : in.arg.TensorNames()) {
        if (!size || !graph_inputs.count(t)) return false;
        for (const NamedArgument& d : n.inputs) {
          if (d.name == "dim" && d.arg.kind == Argument::Kind::kInt && split_at_root.count({t, d.arg.i})) return false;
        }
      }
      for (const SymIntRef& r : in.arg.sym_ints) {
        if (r.is_name && !computed.count(r.name) && !hoist(r.name)) return false;
      }
    }
    nodes.push_back(n);
    hoisted.insert(n.name);
    for (const Argument& o : n.outputs) {
      for (const SymIntRef& r : o.sym_ints) {
        if (r.is_name) computed.insert(r.name);
      }
    }
    return true;
  };
  // A split made in rows reads the row's length where it is made: the program must have computed it.
  auto with_unit = [&](Node split, const plan::ProgramEdit& e) {
    if (e.unit.empty() && e.rows.empty()) return split;
    std::vector<std::string> sizes = e.unit;
    if (!e.rows.empty()) sizes.push_back(e.rows);
    for (const std::string& u : sizes) {
      if (!IsLengthLiteral(u) && !computed.count(u) && !hoist(u)) {
        throw ProgramError(where + ": the plan's split of `" + e.value + "`" + RuleAt(e.origin) +
                           " is made in whole rows of `" + u + "`, which the program computes only after it; split " +
                           "the stream later (after `" + u + "` is computed)");
      }
    }
    if (!e.unit.empty()) split.inputs.push_back(UnitArgument(e.unit, "unit"));
    if (!e.rows.empty()) split.inputs.push_back(UnitArgument({e.rows}, "rows"));
    return split;
  };
  auto emit_after = [&](const std::string& value, int32_t stack) {
    auto it = after.find(value);
    if (it == after.end()) return;
    for (size_t i : it->second) {
      const plan::ProgramEdit& e = edits.edits[i];
      const std::string out = value + "@" + std::to_string(i);
      nodes.push_back(with_unit(EditNode(e.kind == Kind::kSplit ? kSplitTarget : kGatherTarget, i, current(value), out, stack, whole(e.parts)), e));
      if (const TensorMeta* meta = p.FindTensor(value)) p.tensor_values.emplace(out, *meta);
      renamed[value] = out;
    }
  };
  // What node `n` reads for value `v`: a split made for its module's uses (emitted before the
  // first of them), else the value as renamed so far.
  auto read = [&](const Node& n, const std::string& v) {
    for (Scoped& s : scoped) {
      if (s.value != v || !NodeInModule(p, n, s.scope) || (!s.node.empty() && s.node != n.name)) continue;
      if (!s.emitted) {
        nodes.push_back(with_unit(EditNode(kSplitTarget, s.edit, current(v), s.renamed, n.stack, whole(edits.edits[s.edit].parts)),
                                  edits.edits[s.edit]));
        if (const TensorMeta* meta = p.FindTensor(v)) p.tensor_values.emplace(s.renamed, *meta);
        s.emitted = true;
      }
      return s.renamed;
    }
    return current(v);
  };
  // Graph inputs first: the root's splits.
  for (const std::string& in : graph_inputs) emit_after(in, -1);
  for (Node& n : p.nodes) {
    if (hoisted.count(n.name)) continue;
    std::optional<Node> whole_twin;
    if (n.target == "torch.ops.aten.sym_size.int" && n.outputs.size() == 1 && n.outputs[0].sym_ints.size() == 1 &&
        whole_lengths.count(n.outputs[0].sym_ints[0].name)) {
      for (const NamedArgument& in : n.inputs) {
        if (in.name != "self" || in.arg.kind != Argument::Kind::kTensor || read(n, in.arg.name) == in.arg.name) continue;
        whole_twin = n;
        const std::string part = n.outputs[0].sym_ints[0].name;
        whole_twin->name = part + "@whole";
        whole_twin->outputs[0].sym_ints[0].name = whole_twin->name;
        if (auto sym = p.sym_int_values.find(part); sym != p.sym_int_values.end()) {
          p.sym_int_values.emplace(whole_twin->name, sym->second);
        }
        whole_lengths[part] = whole_twin->name;
      }
    }
    if (whole_twin) nodes.push_back(std::move(*whole_twin));
    std::map<std::string, std::string> reads;  // the node's inputs: program value -> what it reads now
    for (NamedArgument& in : n.inputs) {
      Rename(in.arg, [&](const std::string& v) -> std::string {
        const std::string now = read(n, v);
        reads.emplace(v, now);
        return now;
      });
    }
    if (auto edited = arguments.find(n.name); edited != arguments.end()) {
      for (size_t i : edited->second) {
        const plan::ProgramEdit& e = edits.edits[i];
        if (!e.value.empty() && !reads.count(e.value)) reads.emplace(e.value, read(n, e.value));
        EditArgument(p, n, e, i, reads, nodes);
      }
    }
    if (auto h = halos.find(n.name); h != halos.end()) ReadWithHalo(p, n, edits.edits[h->second], h->second, nodes);
    if (auto r = retarget.find(n.name); r != retarget.end()) {
      n.target = r->second.first;
      n.inputs.push_back(EditIndex(r->second.second));
      // Attention whose mask over (query, key) pairs lays out several split streams: each one's
      // full length, read at run time, as a split reads its parts.
      if (const std::vector<std::string>& parts = edits.edits[r->second.second].parts; !parts.empty()) {
        n.inputs.push_back(PartsArgument(whole(parts)));
      }
      // Streams every rank holds whole around the split rows of a joint sequence: their lengths,
      // read off the whole values just before the attention.
      if (const std::vector<plan::WholePart>& held = edits.edits[r->second.second].whole_parts; !held.empty()) {
        NamedArgument lengths;
        lengths.name = "whole_parts";
        lengths.arg.kind = Argument::Kind::kSymInts;
        for (size_t w = 0; w < held.size(); ++w) {
          const std::string name = n.name + "@whole" + std::to_string(w);
          nodes.push_back(LengthNode(name, read(n, held[w].value), held[w].dim, n.stack));
          lengths.arg.sym_ints.push_back(SymIntRef{true, name, 0});
        }
        n.inputs.push_back(std::move(lengths));
      }
    }
    std::string bias;  // a rowwise Linear's bias, added after the all-reduce
    const auto reduce = reduced.find(n.name);
    if (reduce != reduced.end()) {
      for (NamedArgument& in : n.inputs) {
        if (in.name != "bias" || in.arg.kind != Argument::Kind::kTensor) continue;
        bias = in.arg.name;
        in.arg = Argument();
      }
      const plan::ProgramEdit& e = edits.edits[reduce->second];
      if (bias != e.bias) {
        throw ProgramError(where + ": the plan's all_reduce for `" + e.module + "` adds bias `" + e.bias +
                           "` but node `" + n.name + "` reads bias `" + bias + "` (compile the plan again)");
      }
    }
    std::vector<std::string> produced;
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) produced.push_back(v);
    }
    const int32_t stack = n.stack;
    for (const Argument& o : n.outputs) {
      if (o.kind == Argument::Kind::kSymInt && !o.name.empty()) computed.insert(o.name);
      for (const SymIntRef& r : o.sym_ints) {
        if (r.is_name) computed.insert(r.name);
      }
    }
    nodes.push_back(std::move(n));
    if (reduce != reduced.end()) {
      const plan::ProgramEdit& e = edits.edits[reduce->second];
      if (produced.size() != 1 || produced[0] != e.value) {
        throw ProgramError(where + ": the plan's all_reduce for `" + e.module + "` names value `" + e.value +
                           "`, which node `" + e.node + "` does not produce alone");
      }
      const std::string out = e.value + "@" + std::to_string(reduce->second);
      Node sum = EditNode(kAllReduceTarget, reduce->second, e.value, out, stack);
      NamedArgument b;
      b.name = "bias";
      if (!bias.empty()) {
        b.arg.kind = Argument::Kind::kTensor;
        b.arg.name = bias;
      }
      sum.inputs.push_back(std::move(b));
      nodes.push_back(std::move(sum));
      if (const TensorMeta* meta = p.FindTensor(e.value)) p.tensor_values.emplace(out, *meta);
      renamed[e.value] = out;
    }
    for (const std::string& v : produced) emit_after(v, stack);
  }
  for (Argument& o : p.outputs) Rename(o, current);
  for (const Scoped& s : scoped) {
    if (!s.emitted) {
      const plan::ProgramEdit& e = edits.edits[s.edit];
      throw ProgramError(where + ": the plan splits `" + s.value + "` for the uses inside `" + s.scope + "`" +
                         RuleAt(e.origin) +
                         ", but no node there reads it");
    }
  }
  p.nodes = std::move(nodes);
}

}  // namespace weft::program

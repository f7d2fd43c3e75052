#include "compiler/program/local_sizes.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "compiler/program/archive.h"
#include "compiler/program/equal_sizes.h"
#include "compiler/program/expr.h"
#include "compiler/program/plan_edit_error.h"
#include "compiler/program/shard_flow.h"

namespace weft::program {
namespace {

using Kind = plan::ProgramEdit::Kind;

// One full length a shard was split from, and the edit (the plan rule) that split it.
using FullLengths = std::map<std::string, size_t>;  // canonical expression -> edit index
// Shards share their sets: a deep program's values carry up to a hundred lengths each, and most
// nodes yield the very set they read (copying it per value made `weft suggest` minutes long).
using SharedLengths = std::shared_ptr<const FullLengths>;


}  // namespace

bool NodeInModule(const Program& p, const Node& n, const std::string& module) {
  if (module.empty()) return true;
  if (n.stack < 0) return false;
  for (const ModuleFrame& f : p.module_stacks[static_cast<size_t>(n.stack)]) {
    if (f.path == module) return true;
  }
  return false;
}

std::string ModuleOf(const Program& p, const Node& n) {
  if (n.stack < 0 || p.module_stacks[static_cast<size_t>(n.stack)].empty()) return "";
  return p.module_stacks[static_cast<size_t>(n.stack)].back().path;
}

bool IsFactory(const std::string& target) {
  static const char* const kOps[] = {"torch.ops.aten.ones.default", "torch.ops.aten.zeros.default",
                                     "torch.ops.aten.full.default", "torch.ops.aten.empty.memory_format",
                                     "torch.ops.aten.arange.default", "torch.ops.aten.arange.start"};
  for (const char* op : kOps) {
    if (target == op) return true;
  }
  return false;
}

bool IsLengthLiteral(const std::string& length) {
  return !length.empty() && length.find_first_not_of("0123456789") == std::string::npos;
}

namespace {

class LocalSizes {
 public:
  LocalSizes(const Program& p, plan::ProgramEdits& edits)
      : p_(p), edits_(edits), where_(p.Where()), spelling_(p) {}

  void Run() {
    Collect();
    if (all_lengths_.empty()) return;
    for (size_t index = 0; index < p_.nodes.size(); ++index) {
      Visit(index);
      TrackLocalSizes(p_.nodes[index]);
    }
    for (auto it = local_attention_.rbegin(); it != local_attention_.rend(); ++it) {
      edits_.edits.erase(edits_.edits.begin() + static_cast<std::ptrdiff_t>(*it));
    }
    for (plan::ProgramEdit& e : added_) edits_.edits.push_back(std::move(e));
  }

 private:
  // Where a local length can be read: a dim of a shard, produced by node `position` (-1: a graph
  // input), visible only inside `scope` (a scoped split's value) or everywhere ("").
  struct Source {
    std::string value;
    int64_t dim;
    std::string scope;
    int64_t position;
  };
  struct Scoped {
    std::string value, scope, length;
    size_t edit;
    std::string node;  // "" = every read inside scope
  };

  // `value`'s size along `dim` (negative from the end), or null.
  const SymInt* SizeAt(const std::string& value, int64_t dim) const {
    const TensorMeta* meta = p_.FindTensor(value);
    if (meta == nullptr) return nullptr;
    const int64_t rank = static_cast<int64_t>(meta->sizes.size());
    if (dim < 0) dim += rank;
    return dim < 0 || dim >= rank ? nullptr : &meta->sizes[static_cast<size_t>(dim)];
  }

  // The split of a stream of this length: a symbolic one's, or a constant one's (its literal).
  std::optional<size_t> StreamSplit(const std::string& length) const {
    if (auto it = all_lengths_.find(length); it != all_lengths_.end()) return it->second;
    if (auto it = constant_lengths_.find(length); it != constant_lengths_.end()) return it->second;
    return std::nullopt;
  }

  std::string FullLength(const std::string& value, int64_t dim) {
    const SymInt* size = SizeAt(value, dim);
    return size == nullptr ? "" : spelling_.Infix(*size);
  }

  void Collect() {
    std::set<std::string> graph_inputs;
    for (const Argument& a : p_.inputs) {
      for (const std::string& n : a.TensorNames()) graph_inputs.insert(n);
    }
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      for (const Argument& o : p_.nodes[i].outputs) {
        for (const std::string& v : o.TensorNames()) producer_[v] = i;
      }
    }
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      for (const Argument& o : p_.nodes[i].outputs) {
        for (const SymIntRef& r : o.sym_ints) {
          if (r.is_name) sym_producer_.emplace(r.name, i);
        }
      }
    }
    for (size_t i = 0; i < edits_.edits.size(); ++i) {
      const plan::ProgramEdit& e = edits_.edits[i];
      if (e.kind == Kind::kGather) gathered_[e.value].insert(e.group);
      if (e.kind == Kind::kAttention) attention_.emplace(e.node, i);
      if (e.kind != Kind::kSplit) continue;
      if (e.group == plan::kCpGroup) uneven_ = e.uneven;  // the mesh's, on every CP split
      const std::string length = FullLength(e.value, e.dim);
      if (length.empty()) {
        // A constant length: no symbolic size derives from it, but it may be a stream of a joint
        // sequence (NucleusMoE's text, fixed at 12 tokens, beside its image tokens).
        if (const SymInt* size = SizeAt(e.value, e.dim); size != nullptr && !size->symbolic && e.group == plan::kCpGroup) {
          constant_lengths_.emplace(std::to_string(size->value), i);
        }
        continue;
      }
      all_lengths_.emplace(length, i);
      if (!e.after_producer && !(e.scope.empty() && e.node.empty() && graph_inputs.count(e.value))) {
        scoped_[e.value].push_back({e.value, e.scope, length, i, e.node});
        Remember(e.value, FullLengths{{length, i}}, e.scope, -1);
      } else if (graph_inputs.count(e.value)) {
        auto merged = std::make_shared<FullLengths>(shard_.count(e.value) ? *shard_[e.value] : FullLengths{});
        merged->emplace(length, i);
        shard_[e.value] = std::move(merged);
        Remember(e.value, FullLengths{{length, i}}, "", -1);
      } else {
        split_after_[e.value].emplace(length, i);
      }
    }
    RefuseSplitsOfJointSequences();
  }

  // A plan's split of a value whose dim is a joint sequence -- the concatenation of streams other
  // splits of the plan cut apart (HunyuanVideo's mask over cat(video, text)) -- made as one stream
  // gives each rank a contiguous block of it, while each rank's joint tokens are its piece of every
  // stream: wherever the two differ (a padded text position on another rank's block) the answer is
  // silently wrong. Left whole, such a value is sliced as the streams lay it out where it meets
  // context-parallel attention (AddKeyMask), so the split is refused.
  void RefuseSplitsOfJointSequences() {
    for (const auto& [length, i] : all_lengths_) {
      const plan::ProgramEdit& e = edits_.edits[i];
      if (e.group != plan::kCpGroup || !e.parts.empty()) continue;
      const std::vector<std::string> streams = JointStreams(p_.nodes.size(), length);
      if (streams.size() < 2) continue;
      std::string listed;
      for (const std::string& s : streams) listed += (listed.empty() ? "" : ", ") + s;
      throw PlanEditError(EditCheck::kSplitOfJointSequence, e.origin,
                          where_ + ": the split of `" + e.value + "`" + RuleAt(e.origin) + (e.scope.empty() ? "" : " in `" + e.scope + "`") +
                              " along dim " + std::to_string(e.dim) + " cuts " + length +
                              " tokens as one stream, but they are a joint sequence of the streams " + listed +
                              ", which this plan splits each on its own: each rank would take a block of it, not its "
                              "piece of every stream; leave it whole (context-parallel attention slices a whole mask "
                              "as the streams lay it out)");
    }
  }

  void Remember(const std::string& value, const FullLengths& of, const std::string& scope, int64_t position) {
    const TensorMeta* meta = p_.FindTensor(value);
    if (meta == nullptr) return;
    for (size_t d = 0; d < meta->sizes.size(); ++d) {
      const std::string& length = spelling_.Infix(meta->sizes[d]);
      auto it = of.find(length);
      // Later uses read a gathered value whole along its group's lengths.
      if (!length.empty() && it != of.end() && !GatheredOver(value, it->second)) {
        seen_[length].push_back({value, static_cast<int64_t>(d), scope, position});
      }
    }
  }

  // True when a gather of `value` joins the group of split `edit` (a context-parallel gather
  // leaves the guidance branches' split in place, and the other way round).
  bool GatheredOver(const std::string& value, size_t edit) const {
    auto it = gathered_.find(value);
    return it != gathered_.end() && it->second.count(edits_.edits[edit].group) > 0;
  }

  // `lengths` less those a gather of `value` makes whole.
  SharedLengths NotGathered(const std::string& value, SharedLengths lengths) const {
    if (gathered_.count(value) == 0) return lengths;
    auto kept = std::make_shared<FullLengths>();
    for (const auto& [length, edit] : *lengths) {
      if (!GatheredOver(value, edit)) kept->emplace(length, edit);
    }
    return kept;
  }

  // The full lengths that input `t` of node `n` is a shard of.
  static const SharedLengths& NoLengths() {
    static const SharedLengths kNone = std::make_shared<const FullLengths>();
    return kNone;
  }

  SharedLengths ShardOf(const Node& n, const std::string& t) {
    SharedLengths of = NoLengths();
    if (auto it = shard_.find(t); it != shard_.end()) of = it->second;
    if (auto it = scoped_.find(t); it != scoped_.end()) {
      std::shared_ptr<FullLengths> with;
      for (const Scoped& s : it->second) {
        if (!NodeInModule(p_, n, s.scope) || !(s.node.empty() || s.node == n.name)) continue;
        if (with == nullptr) with = std::make_shared<FullLengths>(*of);
        with->emplace(s.length, s.edit);
      }
      if (with != nullptr) of = std::move(with);
    }
    return of;
  }

  // The lengths of both, `a`'s edit kept for a length in both; shared, not copied, when one holds
  // the other.
  static SharedLengths Union(const SharedLengths& a, const SharedLengths& b) {
    if (b->empty() || a == b) return a;
    if (a->empty()) return b;
    bool within = true;
    for (const auto& [length, edit] : *b) within = within && a->count(length) > 0;
    if (within) return a;
    auto both = std::make_shared<FullLengths>(*a);
    both->insert(b->begin(), b->end());
    return both;
  }

  // The length of `lengths` that `size` is, with its sign: a length, or its negation (a slice's
  // end of `-text_len`); nullopt for anything else.
  std::optional<std::pair<std::string, int64_t>> LengthOf(const SymInt& size, const FullLengths& lengths) {
    const std::string& length = spelling_.Infix(size);
    if (lengths.count(length)) return std::make_pair(length, int64_t{1});
    if (length.rfind("-", 0) != 0) return std::nullopt;
    std::string negated = length.substr(length.rfind("-1*", 0) == 0 ? 3 : 1);
    if (negated.size() > 2 && negated.front() == '(' && negated.back() == ')') negated = negated.substr(1, negated.size() - 2);
    if (lengths.count(negated)) return std::make_pair(negated, int64_t{-1});
    return std::nullopt;
  }

  // kArgument edits for every symbolic-int argument of node `index` whose value is one of
  // `lengths`, read from `local` (length -> (value, dim)) or else from a shard made before it.
  void Localize(size_t index, const FullLengths& lengths, std::map<std::string, std::pair<std::string, int64_t>> local) {
    const Node& n = p_.nodes[index];
    for (const NamedArgument& in : n.inputs) {
      if (in.arg.kind != Argument::Kind::kSymInt && in.arg.kind != Argument::Kind::kSymInts) continue;
      for (size_t k = 0; k < in.arg.sym_ints.size(); ++k) {
        const SymIntRef& ref = in.arg.sym_ints[k];
        if (!ref.is_name) continue;
        auto value = p_.sym_int_values.find(ref.name);
        if (value == p_.sym_int_values.end()) continue;
        const std::optional<std::pair<std::string, int64_t>> match = LengthOf(value->second, lengths);
        if (!match) continue;
        const auto& [length, sign] = *match;
        auto split = lengths.find(length);
        const plan::ProgramEdit& origin = edits_.edits[split->second];
        auto at = local.find(length);
        if (at == local.end()) {
          for (const Source& source : seen_[length]) {
            if (source.position < static_cast<int64_t>(index) && NodeInModule(p_, n, source.scope)) {
              at = local.emplace(length, std::make_pair(source.value, source.dim)).first;
              break;
            }
          }
        }
        if (at == local.end()) {
          throw PlanEditError(EditCheck::kFullLengthWithoutShard, origin.origin,
                              where_ + ": node `" + n.name + "` (" + n.target + ", module `" + ModuleOf(p_, n) +
                                  "`) runs on a shard of the split of `" + origin.module + "`" + RuleAt(origin.origin) +
                                  " but its argument `" + in.name + "` is the full length " + length +
                                  ", and no shard before it has a dim of that length to take the local one from",
                              n.name, ModuleOf(p_, n));
        }
        plan::ProgramEdit e;
        e.kind = Kind::kArgument;
        e.node = n.name;
        e.argument = in.name;
        e.element = in.arg.kind == Argument::Kind::kSymInt ? -1 : static_cast<int64_t>(k);
        e.value = at->second.first;
        e.dim = at->second.second;
        e.new_value = sign;
        e.group = origin.group;  // which walk (compiler/program/shard_flow.cpp) the local size belongs to
        e.module = origin.module;
        e.origin = origin.origin;
        added_.push_back(std::move(e));
      }
    }
  }

  // A factory's output combined with shards, built at a full length that a split of the same
  // group as theirs cuts (`with`: the lengths the node's sharded inputs carry): built locally
  // instead, and a shard from then on. True when it was. (The group's lengths: a joint mask's
  // ones over the image meet text shards; a text-length arange meeting a mask split only over the
  // guidance branches stays whole along the text.)
  bool LocalizeFactory(const std::string& t, const FullLengths& with) {
    auto at = producer_.find(t);
    if (at == producer_.end() || !IsFactory(p_.nodes[at->second].target) || localized_.count(t)) return false;
    const TensorMeta* meta = p_.FindTensor(t);
    if (meta == nullptr) return false;
    std::set<std::string> groups;
    for (const auto& [length, edit] : with) groups.insert(edits_.edits[edit].group);
    FullLengths of;
    for (const SymInt& size : meta->sizes) {
      auto it = all_lengths_.find(spelling_.Infix(size));
      if (it != all_lengths_.end() && groups.count(edits_.edits[it->second].group)) of.insert(*it);
    }
    if (of.empty()) return false;
    Localize(at->second, of, {});
    localized_.insert(t);
    shard_[t] = std::make_shared<const FullLengths>(std::move(of));
    return true;
  }

  // The output dims of a copy (`expand`, `repeat`) of a whole tensor whose size is a symbol read
  // off a shard (`sym_size` of a split tensor): built at the local length already at run time
  // (AuraFlow's register tokens `repeat(batch, 1, 1)`, LTX's RoPE expanded to the batch, under
  // cfg), so a shard from then on with nothing to edit, as shard_flow.cpp's LocalLengthFactory
  // follows it. Empty when its input is a shard itself or no size is such a symbol.
  std::vector<size_t> DimsSizedOffAShard(const Node& n) {
    std::vector<size_t> dims;
    for (const NamedArgument& in : n.inputs) {
      if (in.name == "self" && in.arg.kind == Argument::Kind::kTensor && !ShardOf(n, in.arg.name)->empty()) return {};
    }
    for (const NamedArgument& in : n.inputs) {
      if (in.name != "size" && in.name != "repeats") continue;
      for (size_t i = 0; i < in.arg.sym_ints.size(); ++i) {
        const SymIntRef& r = in.arg.sym_ints[i];
        if (!r.is_name) continue;
        auto produced = sym_producer_.find(r.name);
        if (produced == sym_producer_.end()) continue;
        const Node& sz = p_.nodes[produced->second];
        if (sz.target != "torch.ops.aten.sym_size.int") continue;
        for (const NamedArgument& a : sz.inputs) {
          if (a.name == "self" && a.arg.kind == Argument::Kind::kTensor && !ShardOf(sz, a.arg.name)->empty()) {
            dims.push_back(i);
          }
        }
      }
    }
    return dims;
  }

  // A whole tensor's rows each repeated a split's full length of times (Latte's timestep embedding
  // per token: `repeat_interleave(emb, tokens, dim=0)`): built at the local length instead, every
  // copy being the same, so a shard of that length from here (shard_flow.cpp follows it). The
  // count becomes local as any full length a node on shards takes (Localize).
  SharedLengths RepeatedFullLength(size_t index) {
    const Node& n = p_.nodes[index];
    if (n.target != "torch.ops.aten.repeat_interleave.self_int") return NoLengths();
    std::string self;
    const SymIntRef* repeats = nullptr;
    for (const NamedArgument& in : n.inputs) {
      if (in.name == "self" && in.arg.kind == Argument::Kind::kTensor) self = in.arg.name;
      if (in.name == "repeats" && in.arg.kind == Argument::Kind::kSymInt && !in.arg.sym_ints.empty()) {
        repeats = &in.arg.sym_ints[0];
      }
    }
    if (self.empty() || repeats == nullptr || !repeats->is_name) return NoLengths();
    auto value = p_.sym_int_values.find(repeats->name);
    if (value == p_.sym_int_values.end()) return NoLengths();
    auto split = all_lengths_.find(spelling_.Infix(value->second));
    if (split == all_lengths_.end()) return NoLengths();
    // Rows split by another length (the batch of guidance branches, under cfg x ulysses) are
    // repeated the same way: each rank's rows, each this rank's part of the count times.
    if (ShardOf(n, self)->count(split->first) > 0) return NoLengths();
    // Only inside the split's reach: a split for the uses inside a module (around one attention)
    // leaves copies made elsewhere whole.
    const plan::ProgramEdit& origin = edits_.edits[split->second];
    if (!origin.after_producer && !NodeInModule(p_, n, origin.scope)) return NoLengths();
    // Only after a shard of that length exists to read the local count off; before the split the
    // copies stay whole.
    bool readable = false;
    for (const Source& source : seen_[split->first]) {
      readable = readable || (source.position < static_cast<int64_t>(index) && NodeInModule(p_, n, source.scope));
    }
    if (!readable) return NoLengths();
    return std::make_shared<const FullLengths>(FullLengths{*split});
  }

  void Visit(size_t index) {
    const Node& n = p_.nodes[index];
    // A whole tensor copied to a size read off a shard is a shard where it is made, along the dims
    // whose size is such a symbol.
    if (n.target == "torch.ops.aten.expand.default" || n.target == "torch.ops.aten.repeat.default") {
      const std::vector<size_t> dims = DimsSizedOffAShard(n);
      const std::vector<std::string> outs = n.outputs.empty() ? std::vector<std::string>{} : n.outputs[0].TensorNames();
      const TensorMeta* meta = outs.empty() ? nullptr : p_.FindTensor(outs[0]);
      if (!dims.empty() && meta != nullptr) {
        FullLengths of;
        for (size_t d : dims) {
          if (d >= meta->sizes.size()) continue;
          const std::string length = spelling_.Infix(meta->sizes[d]);
          auto it = all_lengths_.find(length);
          if (it != all_lengths_.end()) {
            of.insert(*it);
            continue;
          }
          // A joint sequence's length read off its shard (ErnieImage's per-token modulation
          // expanded to x.shape[0] of cat(image, text)): a shard of the joint sequence too, every
          // row the same. (Taken for whole, it would be sliced by the streams a second time.)
          const std::vector<std::string> streams = JointStreams(index, length);
          if (!streams.empty()) of.emplace(length, *StreamSplit(streams.front()));
        }
        if (!of.empty()) {
          shard_[outs[0]] = std::make_shared<const FullLengths>(std::move(of));
          return;
        }
      }
    }
    // The full lengths this node's inputs are shards of, and where each is available locally:
    // an input's dim whose (full) size is that length.
    SharedLengths lengths = RepeatedFullLength(index);
    std::map<std::string, std::pair<std::string, int64_t>> local;
    std::vector<std::string> full_inputs;
    std::vector<std::pair<std::string, SharedLengths>> inputs;  // every tensor input, with what it is a shard of
    for (const NamedArgument& in : n.inputs) {
      for (const std::string& t : in.arg.TensorNames()) {
        const SharedLengths of = ShardOf(n, t);
        inputs.emplace_back(t, of);
        if (of->empty()) {
          full_inputs.push_back(t);
          continue;
        }
        lengths = Union(lengths, of);
        if (const TensorMeta* meta = p_.FindTensor(t)) {
          for (size_t d = 0; d < meta->sizes.size(); ++d) {
            const std::string& length = spelling_.Infix(meta->sizes[d]);
            if (of->count(length)) local.emplace(length, std::make_pair(t, static_cast<int64_t>(d)));
          }
        }
      }
    }
    if (auto site = attention_.find(n.name); site != attention_.end()) CheckAttentionKeys(n, site->second);
    TrackFullSizes(n);
    if (!lengths->empty()) CheckDerivedFullSizes(n, *lengths);
    if (!lengths->empty()) {
      const SharedLengths carried = lengths;
      for (const std::string& t : full_inputs) {
        if (LocalizeFactory(t, *carried)) lengths = Union(lengths, shard_[t]);
      }
      SplitWholeOperands(index, *carried, inputs);
      Localize(index, *lengths, local);
      if (auto site = attention_.find(n.name); site != attention_.end() && !local_attention_.count(site->second)) {
        SplitMask(index, site->second);
      }
    }
    // What the node yields: shards of the same full lengths, and of the lengths of its outputs
    // that derive from them (a flatten's S*H of a split S), each of the split its symbols come
    // from; none of a group after a gather over it (a cp gather leaves the guidance split).
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) {
        SharedLengths out = lengths;
        if (auto it = split_after_.find(v); it != split_after_.end()) {
          out = Union(out, std::make_shared<const FullLengths>(it->second));
        }
        out = NotGathered(v, std::move(out));
        if (out->empty()) continue;
        std::shared_ptr<FullLengths> derived;  // `out` and the lengths derived from it, once one is
        std::map<std::string, size_t> split_of_symbol;  // the symbols of `out`'s lengths, once needed
        if (const TensorMeta* meta = p_.FindTensor(v); meta != nullptr) {
          for (const SymInt& size : meta->sizes) {
            const std::string& length = spelling_.Infix(size);
            if (length.empty() || out->count(length) || (derived != nullptr && derived->count(length))) continue;
            if (split_of_symbol.empty()) {
              // The symbols of each split's own length, not of every length carried: a batch x
              // frames carried for the guidance split (s47*s87) does not make the frames (s87), nor
              // a text length summed with them, lengths that split cuts.
              for (const auto& [carried, edit] : *out) {
                const plan::ProgramEdit& split = edits_.edits[edit];
                const std::string own = FullLength(split.value, split.dim);
                for (const std::string& s : SymbolsOf(own.empty() ? carried : own)) split_of_symbol.emplace(s, edit);
              }
            }
            if (split_of_symbol.empty()) break;
            for (const std::string& s : SymbolsOf(length)) {
              if (auto from = split_of_symbol.find(s); from != split_of_symbol.end()) {
                if (derived == nullptr) derived = std::make_shared<FullLengths>(*out);
                derived->emplace(length, from->second);
                break;
              }
            }
          }
        }
        if (derived != nullptr) out = std::move(derived);
        Remember(v, *out, "", static_cast<int64_t>(index));
        shard_[v] = std::move(out);
      }
    }
  }

  // An elementwise node that combines a shard with a tensor every rank holds whole along the
  // shard's length (a RoPE table built from every position, a residual of the stream before its
  // split, a gate over all tokens): the whole operand is split for this node's read only, as the
  // plan's split of that length lays it out -- a local slice, no communication (every rank of the
  // group holds the same tensor). A length a split cuts as one stream, or the length of a joint
  // sequence the program concatenates from split streams (HiDream's and Krea 2's RoPE tables over
  // image and text positions, built whole from one table of ids): then each stream's part is
  // taken, in the order of the cat (edit.parts) -- row j of the table still meets row j of the
  // joint sequence. Found on exactly one dim of the operand; shard_flow.h then proves the two
  // operands line up (a broadcast that puts the length on another dim is refused there). A dtype
  // source (type_as's `other`) and the destination of a copy are not operands.
  // An operand split along other lengths only (a RoPE table split over the guidance branches, whole
  // along the tokens split over cp) is whole along the rest, and split along them the same way.
  void SplitWholeOperands(size_t index, const FullLengths& carried,
                          const std::vector<std::pair<std::string, SharedLengths>>& inputs) {
    const Node& n = p_.nodes[index];
    if (!IsElementwise(n.target) || n.target == "torch.ops.aten.type_as.default" ||
        n.target == "torch.ops.aten.copy_.default" || n.target == "torch.ops.aten.copy.default") {
      return;
    }
    for (const auto& [t, own] : inputs) {
      if (localized_.count(t)) continue;
      const TensorMeta* meta = p_.FindTensor(t);
      if (meta == nullptr) continue;
      int64_t dim = -1;
      size_t split = 0;
      int found = 0;
      std::vector<std::string> parts;  // a joint sequence's streams: their full lengths' values
      for (size_t d = 0; d < meta->sizes.size(); ++d) {
        const std::string& length = spelling_.Infix(meta->sizes[d]);
        auto it = carried.find(length);
        if (length.empty() || it == carried.end() || own->count(length)) continue;
        // The shard met carries the length of its own split (one stream), or a length derived
        // from it: a joint sequence, whatever other split cuts that length as one stream.
        const plan::ProgramEdit& carrier = edits_.edits[it->second];
        if (FullLength(carrier.value, carrier.dim) != length) {
          std::vector<std::string> streams = JointStreams(index, length);
          if (streams.empty()) continue;
          streams = StreamValues(index, streams);
          if (streams.empty()) continue;
          parts = std::move(streams);
        }
        dim = static_cast<int64_t>(d);
        split = it->second;
        ++found;
      }
      if (found != 1) continue;
      if (auto local = local_sized_.find(t); local != local_sized_.end()) {
        const plan::ProgramEdit& split_by = edits_.edits[local->second];
        throw PlanEditError(EditCheck::kFullLengthWithoutShard, split_by.origin,
                            where_ + ": node `" + n.name + "` (" + n.target + ", module `" + ModuleOf(p_, n) +
                                "`) combines a shard with `" + t + "`, whose length along dim " + std::to_string(dim) +
                                " is built from sizes read off the split `" + split_by.value + "`" + RuleAt(split_by.origin) +
                                ": it holds neither every position nor this rank's; split `" + split_by.value +
                                "` later, after those sizes are read off it",
                            n.name, ModuleOf(p_, n));
      }
      const plan::ProgramEdit& origin = edits_.edits[split];
      plan::ProgramEdit e;
      e.kind = Kind::kSplit;
      e.value = t;
      e.node = n.name;
      e.scope = ModuleOf(p_, n);
      e.dim = dim;
      e.rank = static_cast<int64_t>(meta->sizes.size());
      e.parts = std::move(parts);
      e.uneven = origin.uneven;
      e.group = origin.group;
      e.module = origin.module;
      e.origin = origin.origin;
      added_.push_back(std::move(e));
      scoped_[t].push_back({t, ModuleOf(p_, n), spelling_.Infix(meta->sizes[static_cast<size_t>(dim)]), split, n.name});
    }
  }

  // The symbolic ints read off a tensor that is whole where they are read, along a dim a split
  // cuts (`sym_size(pooled_projections, 0)` when the guidance split leaves it whole), and those
  // computed from them (`b * heads`): the full length, or something derived from it.
  void TrackFullSizes(const Node& n) {
    if (n.target == "torch.ops.aten.sym_size.int") {
      const auto [self, dim] = SymSizeOf(n);
      if (self.empty() || !ShardOf(n, self)->empty()) return;
      const std::string length = FullLength(self, dim);
      if (length.empty() || all_lengths_.count(length) == 0) return;
      for (const std::string& o : SymIntOutputs(n)) full_syms_[o] = {self, length};
      return;
    }
    if (n.target.compare(0, 10, "_operator.") != 0) return;
    for (const NamedArgument& in : n.inputs) {
      for (const std::string& v : in.arg.SymbolNames()) {
        auto it = full_syms_.find(v);
        if (it == full_syms_.end()) continue;
        for (const std::string& o : SymIntOutputs(n)) full_syms_[o] = it->second;
        return;
      }
    }
  }

  // The tensor and dim a sym_size node reads ("" when it names none).
  static std::pair<std::string, int64_t> SymSizeOf(const Node& n) {
    std::string self;
    int64_t dim = -1;
    for (const NamedArgument& in : n.inputs) {
      if (in.name == "self" && in.arg.kind == Argument::Kind::kTensor) self = in.arg.name;
      if (in.name == "dim" && in.arg.kind == Argument::Kind::kInt) dim = in.arg.i;
    }
    return {self, dim};
  }

  static std::vector<std::string> SymIntOutputs(const Node& n) {
    std::vector<std::string> out;
    for (const Argument& o : n.outputs) {
      if (!o.name.empty()) out.push_back(o.name);
      for (const SymIntRef& r : o.sym_ints) {
        if (r.is_name) out.push_back(r.name);
      }
    }
    return out;
  }

  // The symbolic ints read off a shard along its split dim (this rank's length, at run time) and
  // those computed from them; and the tensors that are no shard but are sized by them (HiDream's
  // text position ids, `zeros(B, t5 + 2 x llama, 3)` with the text split at the root), or built
  // from such a tensor. Such a tensor holds neither every position nor this rank's: SplitWholeOperands
  // refuses to slice it as a whole one. Each entry: the split edit the length comes from.
  void TrackLocalSizes(const Node& n) {
    if (n.target == "torch.ops.aten.sym_size.int") {
      const auto [self, dim] = SymSizeOf(n);
      if (self.empty()) return;
      const SharedLengths of = ShardOf(n, self);
      auto it = of->find(FullLength(self, dim));
      if (it == of->end()) return;
      for (const std::string& o : SymIntOutputs(n)) local_syms_[o] = it->second;
      return;
    }
    std::optional<size_t> from;
    for (const NamedArgument& in : n.inputs) {
      for (const std::string& v : in.arg.SymbolNames()) {
        if (auto it = local_syms_.find(v); it != local_syms_.end()) from = it->second;
      }
      for (const std::string& t : in.arg.TensorNames()) {
        if (auto it = local_sized_.find(t); it != local_sized_.end()) from = it->second;
      }
    }
    if (!from) return;
    if (n.target.compare(0, 10, "_operator.") == 0) {
      for (const std::string& o : SymIntOutputs(n)) local_syms_[o] = *from;
      return;
    }
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) {
        if (shard_.count(v) == 0) local_sized_[v] = *from;
      }
    }
  }

  // A node on shards of length L whose size argument is computed from L read off a whole tensor
  // but is not L itself (repeat_interleave's output_size of `b * heads`): Localize can make L
  // local, not an expression of it, and the node would run at the full size on a shard -- an
  // error at run time, or worse, positions of the whole tensor on every rank. Refused, naming the
  // whole tensor to split.
  void CheckDerivedFullSizes(const Node& n, const FullLengths& lengths) {
    for (const NamedArgument& in : n.inputs) {
      if (in.arg.kind != Argument::Kind::kSymInt && in.arg.kind != Argument::Kind::kSymInts) continue;
      for (const SymIntRef& ref : in.arg.sym_ints) {
        if (!ref.is_name) continue;
        auto full = full_syms_.find(ref.name);
        if (full == full_syms_.end()) continue;
        auto split = lengths.find(full->second.length);
        if (split == lengths.end()) continue;
        auto value = p_.sym_int_values.find(ref.name);
        if (value != p_.sym_int_values.end() && LengthOf(value->second, lengths)) continue;  // Localize's
        const plan::ProgramEdit& origin = edits_.edits[split->second];
        throw PlanEditError(EditCheck::kFullLengthWithoutShard, origin.origin,
                            where_ + ": node `" + n.name + "` (" + n.target + ", module `" + ModuleOf(p_, n) +
                                "`) runs on a shard of the split of " +
                                (origin.module.empty() ? std::string("the root") : "`" + origin.module + "`") +
                                RuleAt(origin.origin) + " but its argument `" + in.name + "` is computed from the full length " +
                                full->second.length + " of `" + full->second.tensor +
                                "`, which is whole there: split `" + full->second.tensor + "` too",
                            n.name, ModuleOf(p_, n));
      }
    }
  }

  // A context-parallel attention whose keys are whole on every rank (the text refiner of
  // HunyuanVideo runs before the plan splits the text): an attention the compiler derived as
  // context-parallel from the module-level view runs locally instead; one a rule names is refused
  // (its K/V are replicated: ring or Ulysses would attend every key once per rank).
  void CheckAttentionKeys(const Node& n, size_t site) {
    std::string key;
    for (const NamedArgument& in : n.inputs) {
      if (in.name == "key" && in.arg.kind == Argument::Kind::kTensor) key = in.arg.name;
    }
    if (key.empty()) return;
    // Split keys: a shard whose sequence dim (the operator's (B, H, S, D)) is a split length.
    const FullLengths& of = *ShardOf(n, key);
    const TensorMeta* meta = p_.FindTensor(key);
    if (meta != nullptr && meta->sizes.size() == 4 && of.count(spelling_.Infix(meta->sizes[2]))) return;
    const plan::ProgramEdit& e = edits_.edits[site];
    if (e.origin.derived) {
      local_attention_.insert(site);
      return;
    }
    throw PlanEditError(EditCheck::kCpAttentionOverWholeKeys, e.origin,
                        where_ + ": the plan runs attention `" + e.module + "` context-parallel" + RuleAt(e.origin) +
                            ", but its keys `" + key + "` (node `" + n.name + "`) are whole on every rank there: no "
                            "split reaches them, so ring or Ulysses would attend every key once per rank; leave it "
                            "local, or split its inputs",
                        n.name, ModuleOf(p_, n));
  }

  // True when `mask` is an expand (through dtype casts and copies) of a tensor with one query row.
  bool ExpandedFromOneRow(std::string v) const {
    for (int step = 0; step < 16; ++step) {
      const Node* producer = nullptr;
      for (const Node& c : p_.nodes) {
        for (const Argument& o : c.outputs) {
          if (o.kind == Argument::Kind::kTensor && o.name == v) producer = &c;
        }
      }
      if (producer == nullptr || producer->inputs.empty() || producer->inputs[0].arg.kind != Argument::Kind::kTensor) {
        return false;
      }
      const std::string& in = producer->inputs[0].arg.name;
      if (producer->target == "torch.ops.aten.expand.default") {
        const TensorMeta* m = p_.FindTensor(in);
        return m != nullptr && m->sizes.size() == 4 && !m->sizes[2].symbolic && m->sizes[2].value == 1;
      }
      static const char* const kKeep[] = {"torch.ops.aten.to.dtype", "torch.ops.aten._to_copy.default",
                                          "torch.ops.aten.clone.default", "torch.ops.aten.contiguous.default",
                                          "torch.ops.aten.type_as.default", "torch.ops.aten.bitwise_not.default",
                                          "torch.ops.aten.logical_not.default"};
      bool keep = false;
      for (const char* op : kKeep) keep = keep || producer->target == op;
      if (!keep) return false;
      v = in;
    }
    return false;
  }

  // A mask over (query, key) pairs (B, 1 or H, queries, keys) -- a sliding window, segments of
  // packed samples -- reaches context-parallel attention node `n` (edit `site`): it stays whole, and
  // the kernels apply each rank's rows and each key block's columns (the edit's pair_mask). That
  // is exact when the mask is whole on every rank and its rows and its columns are each one split
  // stream, so that the ranks' pieces in rank order are the mask's own order, or both the same
  // concatenation of split streams, whose order the runtime makes the ranks' (the edit's parts);
  // anything else is refused by name.
  void PairMask(const Node& n, size_t index, size_t site, const std::string& mask, const TensorMeta& meta) {
    plan::ProgramEdit& attention = edits_.edits[site];
    const std::string module = ModuleOf(p_, n);
    auto refuse = [&](const std::string& why, const plan::Origin& at) {
      return PlanEditError(EditCheck::kMaskNotLaidOutWithKeys, at,
                           where_ + ": the mask `" + mask + "` of context-parallel attention `" + n.name + "` (module `" +
                               module + "`" + RuleAt(attention.origin) + ") varies along the queries as well as the keys, " +
                               why + "; leave this attention local",
                           n.name, module);
    };
    // Along the heads it may only be expanded (HunyuanVideo's refiner repeats its mask per head):
    // the runtime checks by value that every head holds the same mask and applies one.
    for (const auto& [length, edit] : *ShardOf(n, mask)) {
      // Located at the split that reached the mask: that rule is the one to change (the mask's
      // source left whole, or split only past the mask's last use).
      const plan::ProgramEdit& split = edits_.edits[edit];
      if (split.group == plan::kCpGroup) {
        throw refuse("but it is split along " + length + RuleAt(split.origin) +
                         ": each rank takes its rows and columns from the whole mask, so it must reach the attention "
                         "whole -- leave its source unsplit",
                     split.origin.Known() ? split.origin : attention.origin);
      }
    }
    const std::string rows = spelling_.Infix(meta.sizes[2]), cols = spelling_.Infix(meta.sizes[3]);
    // A mask given as an input has sizes of its own symbol (OmniGen's (B, S, S) attention_mask over
    // cat(text, time, image) that its layers attend as one sequence): it is laid out as the
    // queries (keys) when those are one split stream and it is as long as they are at the export's
    // example; the kernels check at run time that it holds every rank's queries and keys.
    auto laid_out_as = [&](const std::string& length, const SymInt& size, const char* operand) {
      if (all_lengths_.count(length)) return true;
      const TensorMeta* m = nullptr;
      for (const NamedArgument& in : n.inputs) {
        if (in.name == operand && in.arg.kind == Argument::Kind::kTensor) m = p_.FindTensor(in.arg.name);
      }
      return m != nullptr && m->sizes.size() == 4 && all_lengths_.count(spelling_.Infix(m->sizes[2])) > 0 &&
             m->sizes[2].value == size.value;
    };
    if (laid_out_as(rows, meta.sizes[2], "query") && laid_out_as(cols, meta.sizes[3], "key")) {
      attention.attention->pair_mask = true;
      return;
    }
    // A joint sequence of split streams (Chroma's cat(text, image), its text mask squared into
    // pairs): each rank holds its piece of every stream, so the ranks' pieces in rank order are
    // not the mask's order. The runtime reorders the mask's rows and columns into theirs (the
    // edit's parts: each stream's full length), with no communication.
    const std::vector<std::string> order = rows == cols ? CatOrder(index, module, rows, /*anywhere_before=*/true)
                                                        : std::vector<std::string>{};
    if (order.empty()) {
      throw refuse("and its " + rows + " queries or " + cols + " keys are neither one split stream each nor one "
                   "concatenation of split streams as both",
                   attention.origin);
    }
    attention.parts = PartValues(n, index, site, mask, order);
    attention.attention->pair_mask = true;
  }

  // The attention mask of context-parallel attention node `index` (edit `site`), when the plan
  // left it whole: split for the site's module along its keys dim, as the site's K/V are laid
  // out -- one split stream, or the concatenation of several (HunyuanVideo's joint mask over
  // cat(video, text) keys, built whole at the root), each part split on its own.
  void SplitMask(size_t index, size_t site) {
    const Node& n = p_.nodes[index];
    std::string mask;
    for (const NamedArgument& in : n.inputs) {
      if (in.name == "attn_mask" && in.arg.kind == Argument::Kind::kTensor) mask = in.arg.name;
    }
    if (mask.empty()) return;
    const TensorMeta* qmeta = p_.FindTensor(mask);
    if (qmeta != nullptr) {
      const TensorMeta* meta = qmeta;
      const std::string module = ModuleOf(p_, n);
      // Ring and Ulysses move keys, not queries: a mask over (query, key) pairs (HunyuanVideo's
      // text refiner: its text mask as rows and columns) has no per-key layout. A mask expanded
      // from one row (LTX per head) is one row per key, as the runtime checks by value.
      if (meta->sizes.size() == 4 && (meta->sizes[2].symbolic || meta->sizes[2].value != 1) && !ExpandedFromOneRow(mask)) {
        PairMask(n, index, site, mask, *meta);
        return;
      }
    }
    // A mask already split with its keys needs no split here; one that is only a shard of the
    // guidance branches (the batch, over cfg) still holds every key.
    for (const auto& [length, edit] : *ShardOf(n, mask)) {
      if (edits_.edits[edit].group == plan::kCpGroup) return;
    }
    const TensorMeta* meta = p_.FindTensor(mask);
    if (meta == nullptr || meta->sizes.empty()) return;
    const std::string module = ModuleOf(p_, n);
    if (!split_masks_.insert(mask + "\n" + module).second) return;
    const int64_t dim = static_cast<int64_t>(meta->sizes.size()) - 1;
    const std::string keys = spelling_.Infix(meta->sizes.back());
    const plan::ProgramEdit& attention = edits_.edits[site];
    plan::ProgramEdit e;
    e.kind = Kind::kSplit;
    e.value = mask;
    e.scope = module;
    e.dim = dim;
    e.rank = dim + 1;
    e.uneven = uneven_;
    e.module = attention.module;
    e.origin = attention.origin;
    if (all_lengths_.count(keys) == 0) {
      // Several streams: their order is the cat that lays out this module's keys, or else the one
      // every cat before it of that length agrees on (ErnieImage joins image and text at the root).
      std::vector<std::string> order = CatOrder(index, module, keys, /*anywhere_before=*/false);
      if (order.empty()) order = JointStreams(index, keys);
      if (order.empty()) {
        throw PlanEditError(EditCheck::kMaskNotLaidOutWithKeys, attention.origin,
                            where_ + ": the mask `" + mask + "` of context-parallel attention `" + n.name +
                                "` (module `" + module + "`" + RuleAt(attention.origin) + ") spans " + keys +
                                " keys, which is neither one split stream nor a concatenation of split streams in "
                                "this module: split it in the plan, or leave the attention local",
                            n.name, module);
      }
      e.parts = PartValues(n, index, site, mask, order);
    }
    added_.push_back(std::move(e));
  }

  // The split streams, in order, whose `cat` along a sequence dim lays out `length` tokens: the
  // cat in `module` (HunyuanVideo's joint keys cat(video, text) inside its attention), or, with
  // `anywhere_before`, any cat before node `index` (Chroma's single blocks read cat(text, image)
  // made at the root), provided every such cat agrees on the order. Empty when no cat of split
  // streams makes that length.
  std::vector<std::string> CatOrder(size_t index, const std::string& module, const std::string& length,
                                    bool anywhere_before) {
    std::vector<std::string> found;
    for (size_t c_index = 0; c_index < index && c_index < p_.nodes.size(); ++c_index) {
      const Node& c = p_.nodes[c_index];
      if (!anywhere_before && !NodeInModule(p_, c, module)) continue;
      std::vector<std::string> order = CatPartLengths(c, length);
      bool known = order.size() > 1;
      for (const std::string& part : order) known = known && StreamSplit(part).has_value();
      if (!known) continue;
      if (!found.empty() && found != order) return {};  // two layouts of the same length: ambiguous
      found = order;
      if (!anywhere_before) break;
    }
    return found;
  }

  // When node `c` concatenates tensors along a dim of `length`: each part's length along it ("" for
  // one whose size is unknown); empty otherwise.
  std::vector<std::string> CatPartLengths(const Node& c, const std::string& length) {
    if (c.target != "torch.ops.aten.cat.default" || c.outputs.empty() || c.inputs.empty()) return {};
    const TensorMeta* out = p_.FindTensor(c.outputs[0].name);
    if (out == nullptr) return {};
    int64_t cat_dim = 0;
    for (const NamedArgument& in : c.inputs) {
      if (in.name == "dim" && in.arg.kind == Argument::Kind::kInt) cat_dim = in.arg.i;
    }
    if (cat_dim < 0) cat_dim += static_cast<int64_t>(out->sizes.size());
    if (cat_dim < 0 || cat_dim >= static_cast<int64_t>(out->sizes.size()) ||
        spelling_.Infix(out->sizes[static_cast<size_t>(cat_dim)]) != length) {
      return {};
    }
    std::vector<std::string> parts;
    for (const std::string& part : c.inputs[0].arg.TensorNames()) {
      const TensorMeta* pm = p_.FindTensor(part);
      if (pm == nullptr || cat_dim >= static_cast<int64_t>(pm->sizes.size())) {
        parts.push_back("");
        continue;
      }
      const SymInt& size = pm->sizes[static_cast<size_t>(cat_dim)];
      // A constant part is known as a stream only when a split cuts that length.
      const std::string literal = size.symbolic ? "" : std::to_string(size.value);
      parts.push_back(size.symbolic ? spelling_.Infix(size) : constant_lengths_.count(literal) ? literal : "");
    }
    return parts;
  }

  // The split streams, in order, that a joint sequence of `length` concatenates, following cats
  // of joint sequences down to the streams (HiDream's double-stream queries cat(image, text), the
  // text cat(cat(t5, llama), llama_i)); any cat before node `index` that makes the length must lay
  // it out alike. Empty when none does, or two disagree.
  std::vector<std::string> JointStreams(size_t index, const std::string& length, int depth = 0) {
    if (depth > 0 && StreamSplit(length)) return {length};
    if (depth > 8) return {};  // a cycle of equal spellings cannot be; a bound all the same
    std::vector<std::string> found;
    for (size_t c_index = 0; c_index < index && c_index < p_.nodes.size(); ++c_index) {
      const std::vector<std::string> parts = CatPartLengths(p_.nodes[c_index], length);
      if (parts.size() < 2) continue;
      std::vector<std::string> order;
      for (const std::string& part : parts) {
        const std::vector<std::string> streams =
            part.empty() ? std::vector<std::string>{} : JointStreams(c_index, part, depth + 1);
        if (streams.empty()) {
          order.clear();
          break;
        }
        order.insert(order.end(), streams.begin(), streams.end());
      }
      if (order.empty()) continue;
      if (!found.empty() && found != order) return {};  // two layouts of the same length: ambiguous
      found = std::move(order);
    }
    return found;
  }

  // The symbolic-int values, computed before node `index`, holding the full length of each part
  // of `order` (what the runtime reads each part's length from); "" for a part that has none.
  std::vector<std::string> PartValuesOrEmpty(size_t index, const std::vector<std::string>& order) {
    std::vector<std::string> names;
    for (const std::string& part : order) {
      if (IsLengthLiteral(part)) {  // a constant stream's length: the literal itself
        names.push_back(part);
        continue;
      }
      std::string name;
      size_t at = p_.nodes.size();
      for (const auto& [value, sym] : p_.sym_int_values) {
        auto produced = sym_producer_.find(value);
        if (produced == sym_producer_.end() || produced->second >= index || produced->second >= at) continue;
        if (spelling_.Infix(sym) == part) {
          name = value;
          at = produced->second;
        }
      }
      names.push_back(name);
    }
    return names;
  }

  // The values of JointStreams's streams; empty when one length is computed nowhere before `index`.
  std::vector<std::string> StreamValues(size_t index, const std::vector<std::string>& order) {
    std::vector<std::string> names = PartValuesOrEmpty(index, order);
    for (const std::string& name : names) {
      if (name.empty()) return {};
    }
    return names;
  }

  // PartValuesOrEmpty for the mask of attention edit `site` at node `index`: refused when a part
  // has no value.
  std::vector<std::string> PartValues(const Node& n, size_t index, size_t site, const std::string& mask,
                                      const std::vector<std::string>& order) {
    const plan::ProgramEdit& attention = edits_.edits[site];
    std::vector<std::string> names = PartValuesOrEmpty(index, order);
    for (size_t i = 0; i < names.size(); ++i) {
      if (!names[i].empty()) continue;
      throw PlanEditError(EditCheck::kMaskNotLaidOutWithKeys, attention.origin,
                          where_ + ": the mask `" + mask + "` of context-parallel attention `" + n.name +
                              "` lays out a part of " + order[i] + " keys, but no size of that length is computed before it",
                          n.name, ModuleOf(p_, n));
    }
    return names;
  }

  // The symbols of a canonical length, parsed once per length: a 48-block program asks for the
  // same few lengths at each of its ~15,000 nodes (parsing them each time took minutes).
  const std::vector<std::string>& SymbolsOf(const std::string& length) {
    auto it = symbols_of_.find(length);
    if (it != symbols_of_.end()) return it->second;
    std::vector<std::string> symbols;
    try {
      symbols = Expr::Parse(length).Symbols();
    } catch (const ExprError&) {
      // An expression weft cannot read names no symbol it could follow.
    }
    return symbols_of_.emplace(length, std::move(symbols)).first->second;
  }

  const Program& p_;
  plan::ProgramEdits& edits_;
  const std::string where_;
  SizeSpelling spelling_;  // lengths compared as text in one spelling (equal_sizes.h)
  std::unordered_map<std::string, std::vector<std::string>> symbols_of_;
  std::unordered_map<std::string, std::vector<Scoped>> scoped_;  // by the value they split
  std::unordered_map<std::string, SharedLengths> shard_;  // value -> the full lengths it is a shard of
  std::unordered_map<std::string, FullLengths> split_after_;
  FullLengths all_lengths_;
  std::map<std::string, std::set<std::string>> gathered_;  // value -> the groups its gathers join
  FullLengths constant_lengths_;  // a constant-length cp split's length (its literal) -> the edit
  std::set<std::string> localized_;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, size_t> sym_producer_;  // symbolic int -> the node that computes it
  std::unordered_map<std::string, size_t> attention_;     // context-parallel attention node -> its edit
  std::set<std::string> split_masks_;                     // mask + module already split
  struct FullSize {
    std::string tensor, length;  // read off `tensor`, whole there, along a dim of `length`
  };
  std::unordered_map<std::string, FullSize> full_syms_;
  std::unordered_map<std::string, size_t> local_syms_;   // TrackLocalSizes: symbol -> split edit
  std::unordered_map<std::string, size_t> local_sized_;  // TrackLocalSizes: tensor -> split edit
  std::set<size_t> local_attention_;                      // derived attention edits found local
  bool uneven_ = false;
  std::map<std::string, std::vector<Source>> seen_;
  std::vector<plan::ProgramEdit> added_;
};

}  // namespace

void AddLocalSizeEdits(const Program& p, plan::ProgramEdits& edits) { LocalSizes(p, edits).Run(); }

}  // namespace weft::program

#include "compiler/program/shard_flow.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/program/equal_sizes.h"
#include "compiler/program/expr.h"
#include "compiler/program/local_sizes.h"
#include "compiler/program/plan_edit_error.h"

namespace weft::program {
namespace {

using Kind = plan::ProgramEdit::Kind;
using AK = Argument::Kind;

// A tensor sharded along `dim`: the full extent there is the sum of `blocks` (for a split
// sequence, the lengths at the export's example) and each rank holds its part of every block,
// blocks in order (tp: its r-th 1/tp, executor/tp_shard.h; cp: its split of each stream).
struct Sharding {
  int64_t dim = 0;
  std::vector<int64_t> blocks;
  size_t rule = 0;  // where it came from (ShardFlow::rules_)
  // Context parallelism over a joint sequence some of whose streams every rank holds whole
  // (Mochi joins each sample's valid text tokens to the rank's split video tokens): parallel to
  // `blocks`, the whole ones, each with a tensor whose dim holds its length at run time
  // (plan::WholePart; value "" when no tensor does, after a pad); nullopt for a split block.
  // Empty: every block is split.
  std::vector<std::optional<plan::WholePart>> whole;

  bool HasWhole() const { return !whole.empty(); }
  bool IsWhole(size_t i) const { return i < whole.size() && whole[i].has_value(); }
  bool SameLayout(const Sharding& o) const {
    if (dim != o.dim || blocks != o.blocks || whole.size() != o.whole.size()) return false;
    for (size_t i = 0; i < whole.size(); ++i) {
      if (IsWhole(i) != o.IsWhole(i)) return false;
    }
    return true;
  }
};

struct Rule {
  std::string module;
  plan::Origin origin;
};

std::string List(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string ShortOp(const std::string& target) {
  const std::string prefix = "torch.ops.aten.";
  return target.compare(0, prefix.size(), prefix) == 0 ? target.substr(prefix.size()) : target;
}

// True when `target` is torch.ops.aten.<op> for one of `ops` (compared without building strings:
// the walk asks this dozens of times per node).
bool OneOf(const std::string& target, std::initializer_list<std::string_view> ops) {
  constexpr std::string_view kAten = "torch.ops.aten.";
  const std::string_view t(target);
  if (t.substr(0, kAten.size()) != kAten) return false;
  const std::string_view op_name = t.substr(kAten.size());
  for (std::string_view op : ops) {
    if (op_name == op) return true;
  }
  return false;
}

}  // namespace

bool IsElementwise(const std::string& target) {
  // In-place variants (addcmul_.default) compute the same as their out-of-place op.
  std::string t = target;
  const size_t dot = t.rfind('.');
  if (dot != std::string::npos && dot > 0 && t[dot - 1] == '_' && t.compare(0, 15, "torch.ops.aten.") == 0 &&
      t.compare(dot - 2, 2, "__") != 0) {
    t.erase(dot - 1, 1);
  }
  return OneOf(t, {"add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar", "mul.Tensor", "mul.Scalar",
                   "div.Tensor", "div.Scalar", "div.Tensor_mode", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
                   "pow.Scalar", "neg.default", "exp.default", "log.default", "silu.default", "gelu.default",
                   "relu.default", "tanh.default", "sigmoid.default", "sin.default", "cos.default", "rsqrt.default",
                   "sqrt.default", "reciprocal.default", "abs.default", "erf.default", "square.default",
                   "clamp.default", "clamp_min.default", "clamp_max.default", "where.self", "masked_fill.Scalar",
                   "masked_fill.Tensor", "maximum.default", "minimum.default", "lerp.Scalar", "addcmul.default",
                   "to.dtype", "to.dtype_layout", "to.device", "_to_copy.default", "clone.default",
                   "contiguous.default", "alias.default", "detach.default", "dropout.default", "copy_.default",
                   "copy.default", "empty_like.default", "zeros_like.default", "ones_like.default",
                   "full_like.default", "type_as.default", "softplus.default", "leaky_relu.default",
                   "hardswish.default", "mish.default", "elu.default", "log1p.default", "expm1.default",
                   "__and__.Tensor", "__or__.Tensor", "bitwise_and.Tensor", "bitwise_or.Tensor",
                   "bitwise_not.default", "logical_and.default", "logical_or.default", "logical_not.default",
                   "eq.Scalar", "eq.Tensor", "ne.Scalar", "ne.Tensor", "gt.Scalar", "gt.Tensor", "lt.Scalar",
                   "lt.Tensor", "ge.Scalar", "ge.Tensor", "le.Scalar", "le.Tensor", "fill.Tensor", "fill.Scalar"});
}

namespace {

class ShardFlow {
 public:
  // kCfg: the guidance branches, split along the batch over the cfg axis; followed like a
  // context-parallel split (its own walk: a value may be split over both, on different dims).
  enum class Axis : uint8_t { kTp, kCp, kCfg };

  // Reads the plan's edits from `in`; appends the edits it decides to `out` (none: a check only).
  ShardFlow(Axis axis, const plan::ExecutionPlan& plan, const Program& p, const plan::ProgramEdits& in,
            plan::ProgramEdits* out)
      : axis_(axis), plan_(plan), p_(p), in_(in), out_(out), tp_(plan.mesh.Tp()),
        where_(p.Where()), spelling_(p) {}

  // Records in `record` each node that reads or writes a shard on this walk's axis (its bit:
  // kShardTp, kShardCp, kShardCfg), for ShardedNodes.
  void RecordInto(std::unordered_map<std::string, uint8_t>* record) { record_ = record; }

  // Attention nodes over joint sequences with whole streams, and those streams (Run fills it).
  const std::map<std::string, std::vector<plan::WholePart>>& WholeParts() const { return whole_parts_; }

  // Streams a view parts into rows (RecordRows), by their length's spelling (SizeSpelling).
  struct RowsOfStream {
    std::vector<std::string> unit;
    std::string count;  // or, where the view infers the row's length, the count of rows (a symbol or a literal)
    std::string node;   // the first view that parts it
  };
  const std::map<std::string, RowsOfStream>& Rows() const { return rows_; }
  // The most rows a convolution over a split grid reads of each neighbour (0: none).
  int64_t WidestHalo() const { return widest_halo_; }
  SizeSpelling& Spelling() { return spelling_; }

  void Run() {
    if (axis_ == Axis::kTp) {
      if (tp_ <= 1) return;
      ShardParameters();
      if (sharded_.empty()) return;
    } else {
      if ((axis_ == Axis::kCp ? plan_.mesh.Cp() : plan_.mesh.Cfg()) <= 1) return;
      CollectSplits();
      if (sharded_.empty() && scoped_.empty() && after_.empty()) return;
    }
    for (const Node& n : p_.nodes) {
      current_ = &n;
      const bool reads = record_ != nullptr && ReadsShard(n);
      Visit(n);
      whole_in_.reset();
      if (record_ != nullptr && (reads || WritesShard(n))) (*record_)[n.name] |= RecordBit();
      if (!Tp()) AfterProducer(n);
    }
    current_ = nullptr;
    for (const Argument& o : p_.outputs) {
      for (const std::string& v : o.TensorNames()) {
        auto it = sharded_.find(v);
        if (it == sharded_.end()) continue;
        if (axis_ == Axis::kTp) {
          throw PlanEditError(EditCheck::kTpShardReachesOutput, rules_[it->second.rule].origin,
                              where_ + ": `" + v + "` reaches the program's output tp-sharded along dim " +
                                  std::to_string(it->second.dim) + " (no rowwise layer reduces it)" + From(it->second));
        }
        throw PlanEditError(EditCheck::kSplitNeverGathered, rules_[it->second.rule].origin,
                            where_ + ": `" + v + "` reaches the program's output split along dim " +
                                std::to_string(it->second.dim) + " (no gather of the plan joins it)" + From(it->second));
      }
    }
  }

 private:
  bool Tp() const { return axis_ == Axis::kTp; }
  uint8_t RecordBit() const { return axis_ == Axis::kTp ? kShardTp : axis_ == Axis::kCp ? kShardCp : kShardCfg; }
  bool ReadsShard(const Node& n) const {
    for (const NamedArgument& a : n.inputs) {
      for (const std::string& v : a.arg.TensorNames()) {
        if (Find(v) != nullptr) return true;
      }
    }
    return false;
  }
  bool WritesShard(const Node& n) const {
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) {
        if (Find(v) != nullptr) return true;
      }
    }
    return false;
  }
  // The group of the splits and gathers this walk follows.
  std::string_view Group() const { return axis_ == Axis::kCfg ? plan::kCfgAxis : plan::kCpGroup; }

  // The plan's splits and gathers (edits), the attention nodes it runs context-parallel, and the
  // factories local_sizes.h builds at a local length (they are split like the shards they meet).
  void CollectSplits() {
    auto rule = [&](const plan::ProgramEdit& e) {
      rules_.push_back({e.module, e.origin});
      return rules_.size() - 1;
    };
    std::set<std::string> graph_input;
    for (const Argument& a : p_.inputs) {
      for (const std::string& v : a.TensorNames()) graph_input.insert(v);
    }
    for (size_t i = 0; i < p_.inputs.size() && i < p_.input_specs.size(); ++i) {
      if (p_.input_specs[i].kind != InputSpec::Kind::kUserInput) continue;
      for (const SymIntRef& r : p_.inputs[i].sym_ints) {
        if (r.is_name) user_syms_.insert(r.name);
      }
      if (p_.inputs[i].kind == AK::kSymInt && !p_.inputs[i].name.empty()) user_syms_.insert(p_.inputs[i].name);
    }
    for (const plan::ProgramEdit& e : in_.edits) {
      if ((e.kind == Kind::kSplit || e.kind == Kind::kGather || e.kind == Kind::kArgument) && e.group != Group()) {
        continue;
      }
      Sharding s;
      s.dim = e.dim;
      if (e.kind == Kind::kSplit) {
        const std::vector<int64_t> sizes = Sizes(e.value);
        s.blocks = {e.dim < static_cast<int64_t>(sizes.size()) ? sizes[static_cast<size_t>(e.dim)] : 0};
        // A split of a joint sequence's streams (edit.parts: a whole table sliced for the joint
        // tokens it meets): one block per stream, at the lengths the program records.
        if (!e.parts.empty()) {
          s.blocks.clear();
          for (const std::string& part : e.parts) {
            if (IsLengthLiteral(part)) {
              s.blocks.push_back(std::stoll(part));  // a stream of constant length
              continue;
            }
            auto it = p_.sym_int_values.find(part);
            s.blocks.push_back(it == p_.sym_int_values.end() ? 0 : it->second.value);
          }
        }
        s.rule = rule(e);
        if (e.after_producer) {
          after_[e.value] = s;
        } else if (e.scope.empty() && e.node.empty() && graph_input.count(e.value)) {
          SetLike(e.value, s.dim, s);
        } else {
          scoped_.push_back({e.value, e.scope, e.node, s});
        }
      } else if (e.kind == Kind::kGather) {
        gathers_[e.value] = {rule(e), e.dim};
      } else if (e.kind == Kind::kAttention && axis_ == Axis::kCp) {
        attention_.insert(e.node);
        attention_origin_[e.node] = e.origin;
      } else if (e.kind == Kind::kArgument && !e.value.empty()) {
        // A factory's size list element is its output dim; arange's single length is dim 0.
        factory_dims_[e.node].push_back({std::max<int64_t>(e.element, 0), rule(e)});
        if (e.argument == "repeats") local_repeats_[e.node] = rules_.size() - 1;
      }
    }
  }

  // A factory sized by a split's local length (`x.new_zeros(B, x.size(1), C)`) holds this rank's
  // part of that dim, as the split does: it is followed as a shard, so whatever writes whole
  // positions into it (index_copy at full-length indices) is refused instead of failing at run time.
  // So does a whole tensor repeated or expanded to a split's local length along a dim of size 1
  // (AuraFlow's register tokens `repeat(batch, 1, 1)` under cfg): every copy is the same, so the
  // local number of copies is this rank's part.
  void LocalLengthFactory(const Node& n) {
    if (OneOf(n.target, {"repeat_interleave.self_int"})) return RepeatedToLocalLength(n);
    if (local_lengths_.empty()) return;
    const bool copies = OneOf(n.target, {"repeat.default", "expand.default"});
    if (!IsFactory(n.target) && !copies &&
        !OneOf(n.target, {"new_zeros.default", "new_ones.default", "new_empty.default", "new_full.default"})) {
      return;
    }
    const std::vector<std::string> outs = Outputs(n);
    if (outs.empty() || Find(outs[0]) != nullptr) return;
    if (copies) {
      const char* name = n.target == "torch.ops.aten.repeat.default" ? "repeats" : "size";
      const std::string self = TensorArg(n, "self");
      const Argument* a = Arg(n, name);
      if (self.empty() || Find(self) != nullptr || a == nullptr) return;
      const int64_t lead = static_cast<int64_t>(a->sym_ints.size()) - Rank(self);
      for (size_t i = 0; i < a->sym_ints.size(); ++i) {
        if (!a->sym_ints[i].is_name) continue;
        auto it = local_lengths_.find(a->sym_ints[i].name);
        if (it == local_lengths_.end()) continue;
        const int64_t d = static_cast<int64_t>(i) - lead;
        if (d >= 0 && !StaticOne(self, d)) return;
        const Sharding& split = it->second.second;
        return SetLike(outs[0], static_cast<int64_t>(i), split);
      }
      return;
    }
    for (const NamedArgument& a : n.inputs) {
      if (a.name != "size" && a.name != "end") continue;
      for (size_t i = 0; i < a.arg.sym_ints.size(); ++i) {
        if (!a.arg.sym_ints[i].is_name) continue;
        auto it = local_lengths_.find(a.arg.sym_ints[i].name);
        if (it == local_lengths_.end()) continue;
        const Sharding& split = it->second.second;
        return SetLike(outs[0], a.name == "end" ? 0 : static_cast<int64_t>(i), split);
      }
    }
  }

  // A whole tensor whose rows are each repeated a split's full length of times (Latte's timestep
  // embedding per token, `repeat_interleave(emb, tokens, dim=0)`, meeting tokens merged into the
  // batch): local_sizes.h makes the count the local length, so each row's run holds this rank's
  // part of that split -- every copy is the same -- laid out as the merged split dim is, one block
  // per row (MergeWithDimsBefore).
  void RepeatedToLocalLength(const Node& n) {
    auto it = local_repeats_.find(n.name);
    if (it == local_repeats_.end()) return;
    const std::string self = TensorArg(n, "self");
    const std::vector<std::string> outs = Outputs(n);
    if (self.empty() || outs.empty() || Find(self) != nullptr) return;  // a shard's rows: Visit follows it
    const std::optional<int64_t> dim = IntArg(n, "dim");
    const std::vector<int64_t> in = Sizes(self), out = Sizes(outs[0]);
    Sharding made;
    made.rule = it->second;
    if (!dim || in.empty() || out.size() != in.size()) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, self, made, "it repeats a whole tensor's elements, flattened, a split's length of times");
    }
    const int64_t d = Norm(*dim, static_cast<int64_t>(in.size()));
    const int64_t rows = in[static_cast<size_t>(d)];
    if (rows <= 0 || out[static_cast<size_t>(d)] % rows != 0) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, self, made, "the program records sizes that do not line up with its repeats");
    }
    Set(outs[0], d, std::vector<int64_t>(static_cast<size_t>(rows), out[static_cast<size_t>(d)] / rows), it->second);
  }

  // A whole tensor viewed at a split's local length (Kandinsky5's text RoPE: a table of every
  // position reshaped by the local text length) would fail at run time, or worse, keep the first
  // positions on every rank: refused, naming the whole tensor (weft suggest splits it).
  void WholeAtLocalLength(const Node& n) {
    // Sizes computed from a local length are local too (`s // 2`, `b * s`).
    if (!Tp() && !local_syms_.empty() && n.target.compare(0, 10, "_operator.") == 0) {
      bool local = false;
      for (const NamedArgument& a : n.inputs) {
        for (const std::string& v : a.arg.SymbolNames()) local = local || local_syms_.count(v) > 0;
      }
      if (local) {
        for (const Argument& o : n.outputs) {
          if (!o.name.empty()) local_syms_.insert(o.name);
          for (const SymIntRef& r : o.sym_ints) {
            if (r.is_name) local_syms_.insert(r.name);
          }
        }
      }
      return;
    }
    if (Tp() || local_lengths_.empty() ||
        !OneOf(n.target, {"view.default", "reshape.default", "_unsafe_view.default", "expand.default"})) {
      return;
    }
    const std::string self = TensorArg(n, "self");
    if (self.empty()) return;
    for (const NamedArgument& a : n.inputs) {
      if (a.name != "size" && a.name != "shape") continue;
      for (size_t i = 0; i < a.arg.sym_ints.size(); ++i) {
        const SymIntRef& r = a.arg.sym_ints[i];
        if (!r.is_name) continue;
        auto it = local_lengths_.find(r.name);
        if (it == local_lengths_.end()) continue;
        // Expanding a dim of size 1 (or a new one) to the local length copies it: a shard
        // (LocalLengthFactory, after this node).
        const int64_t d = static_cast<int64_t>(i) - (static_cast<int64_t>(a.arg.sym_ints.size()) - Rank(self));
        if (n.target == "torch.ops.aten.expand.default" && (d < 0 || StaticOne(self, d))) continue;
        // The dim of `self` that holds the full length: the one whose size the local one stands for.
        const auto& [split_value, split] = it->second;
        const std::vector<int64_t> sizes = Sizes(self);
        const int64_t full = std::accumulate(split.blocks.begin(), split.blocks.end(), int64_t{0});
        int64_t dim = -1;
        for (size_t k = 0; k < sizes.size() && dim < 0; ++k) {
          if (sizes[k] == full) dim = static_cast<int64_t>(k);
        }
        // Else the dim holding it times a factor (a text mask repeated per head along the batch:
        // LTX's (batch x heads, 1, text) reshaped to (batch, heads, 1, text)); weft suggest traces
        // it back through the repeat to the input to split.
        for (size_t k = 0; k < sizes.size() && dim < 0 && full > 0; ++k) {
          if (sizes[k] > full && sizes[k] % full == 0) dim = static_cast<int64_t>(k);
        }
        Refuse(EditCheck::kTpColwiseEscapes, n, split_value, split,
               "it reshapes `" + self + "`, which is whole, to `" + r.name + "`, the local length of `" + split_value +
                   "` (each rank holds only its part of that dim)",
               self, dim);
      }
    }
  }

  // A context-parallel split or gather right after the node producing the value.
  void AfterProducer(const Node& n) {
    LocalLengthFactory(n);
    if (IsFactory(n.target)) {
      auto it = factory_dims_.find(n.name);
      if (it != factory_dims_.end()) {
        for (const std::string& o : Outputs(n)) {
          const std::vector<int64_t> sizes = Sizes(o);
          for (const auto& [dim, rule] : it->second) {
            if (dim < static_cast<int64_t>(sizes.size())) Set(o, dim, {sizes[static_cast<size_t>(dim)]}, rule);
          }
        }
      }
    }
    for (const std::string& o : Outputs(n)) {
      if (auto split = after_.find(o); split != after_.end()) {
        if (auto already = sharded_.find(o); already != sharded_.end()) RefuseSecondSplit(n, o, split->second, already->second);
        sharded_[o] = split->second;
      }
      auto gather = gathers_.find(o);
      if (gather == gathers_.end()) continue;
      const Rule& r = rules_[gather->second.first];
      auto split = sharded_.find(o);
      if (split == sharded_.end()) {
        throw PlanEditError(EditCheck::kGatherOfUnsplitValue, r.origin,
                            where_ + ": the plan gathers `" + o + "`, output of `" + r.module + "`" + RuleAt(r.origin) +
                                ", but no split reaches it: every rank holds it whole already",
                            n.name, ModuleOf(n));
      }
      // A gather along another dim would stack the ranks' pieces where no split cut them: an
      // output of the wrong shape (and values in the wrong places), exit 0.
      const int64_t dim = Norm(gather->second.second, Rank(o));
      if (dim != split->second.dim) {
        throw PlanEditError(EditCheck::kGatherOnOtherDim, r.origin,
                            where_ + ": the plan gathers `" + o + "`, output of `" + r.module + "`" + RuleAt(r.origin) +
                                ", along dim " + std::to_string(gather->second.second) + ", but it is split along dim " +
                                std::to_string(split->second.dim) + " (sizes " + List(Sizes(o)) + ")" + From(split->second) +
                                "; gather it along dim " + std::to_string(split->second.dim),
                            n.name, ModuleOf(n));
      }
      // A value laid out as several split streams (cat(image, text) with each stream split): the
      // all-gather joins the ranks' parts rank by rank -- image 0, text 0, image 1, text 1 -- not
      // stream by stream, so the output would hold its rows out of order, exit 0 (ErnieImage
      // gathered before its forward slices the image rows off the joint sequence).
      const Sharding& at = split->second;
      if (axis_ == Axis::kCp && at.blocks.size() > 1 && !at.HasWhole()) {
        throw PlanEditError(EditCheck::kGatherOnOtherDim, r.origin,
                            where_ + ": the plan gathers `" + o + "`, output of `" + r.module + "`" + RuleAt(r.origin) +
                                ", which is laid out as the split streams " + List(at.blocks) + " along dim " +
                                std::to_string(at.dim) + From(at) +
                                ": an all-gather joins the ranks' parts rank by rank, not stream by stream; gather "
                                "where one stream is left alone (after the forward parts the streams, as a "
                                "slice at their bound does)",
                            n.name, ModuleOf(n));
      }
      sharded_.erase(split);
    }
  }

  // The parameters the plan shards, as sharded graph inputs.
  void ShardParameters() {
    std::map<std::string, std::string> value_of;  // parameter fqn -> graph input
    for (size_t i = 0; i < p_.input_specs.size() && i < p_.inputs.size(); ++i) {
      if (p_.input_specs[i].kind == InputSpec::Kind::kParameter) value_of[p_.input_specs[i].target] = p_.inputs[i].name;
    }
    for (const plan::ModuleStep& step : plan_.steps) {
      if (!step.tp) continue;
      for (const plan::ParamShard& param : step.tp->params) {
        if (param.dim < 0) continue;
        const std::string fqn = step.module.empty() ? param.name : step.module + "." + param.name;
        auto value = value_of.find(fqn);
        if (value == value_of.end()) {
          throw PlanEditError(EditCheck::kProgramLacksValue, step.tp->origin,
                              where_ + ": the plan shards parameter `" + fqn + "`" + RuleAt(step.tp->origin) +
                                  ", which the program has no parameter for");
        }
        Sharding s;
        s.dim = param.dim;
        s.blocks = param.blocks;
        if (s.blocks.empty() && param.dim < static_cast<int64_t>(param.full_shape.size())) {
          s.blocks = {param.full_shape[static_cast<size_t>(param.dim)]};
        }
        s.rule = rules_.size();
        rules_.push_back({step.module, step.tp->origin});
        sharded_[value->second] = s;
      }
    }
  }

  // `second` would split `v`, which `first` already splits: each rank would keep a piece of its
  // piece (and attention, gathers and factories would count the lengths wrong).
  [[noreturn]] void RefuseSecondSplit(const Node& n, const std::string& v, const Sharding& second,
                                      const Sharding& first) const {
    const Rule& r = rules_[second.rule];
    const std::string module = r.module.empty() ? "the root" : "`" + r.module + "`";
    throw PlanEditError(EditCheck::kSplitOfSplitValue, r.origin,
                        where_ + ": the plan's rule for " + module + RuleAt(r.origin) + " splits `" + v + "` along dim " +
                            std::to_string(second.dim) + ", but a split reaches it already, along dim " +
                            std::to_string(first.dim) + From(first) +
                            "; split each stream once, where it enters (drop one of the two rules)",
                        n.name, ModuleOf(n));
  }

  std::string From(const Sharding& s) const {
    const Rule& r = rules_[s.rule];
    const std::string module = r.module.empty() ? "the root" : "`" + r.module + "`";
    return (Tp() ? "; its sharding comes from the TP rule for " : "; its split comes from the plan's rule for ") + module +
           RuleAt(r.origin);
  }

  // The walk's checks are written once, in their tensor-parallel kinds; on a context-parallel
  // split each stands for its CP kind. Every kind is listed (no default), so a new one must
  // say what it means on a split.
  EditCheck ForAxis(EditCheck check) const {
    if (Tp()) return check;
    switch (check) {
      case EditCheck::kTpReducesShardedDim: return EditCheck::kCpReducesSplitDim;
      case EditCheck::kTpColwiseEscapes: return EditCheck::kCpSplitMixedWithWhole;
      case EditCheck::kTpAttentionHeadsMismatch: return EditCheck::kLocalAttentionOverSplitKeys;
      case EditCheck::kTpShardReachesOutput: return EditCheck::kSplitNeverGathered;
      // A split never shards a weight, so no Linear is rowwise on one: only an operator the walk
      // cannot pass is left.
      case EditCheck::kTpRowwiseInputNotSharded:
      case EditCheck::kTpUnsupportedOperator: return EditCheck::kCpUnsupportedOperator;
      case EditCheck::kProgramLacksValue:
      case EditCheck::kFullLengthWithoutShard:
      case EditCheck::kCpAttentionOverWholeKeys:
      case EditCheck::kMaskNotLaidOutWithKeys:
      case EditCheck::kCpReducesSplitDim:
      case EditCheck::kCpSplitMixedWithWhole:
      case EditCheck::kLocalAttentionOverSplitKeys:
      case EditCheck::kCpUnsupportedOperator:
      case EditCheck::kSplitNeverGathered:
      case EditCheck::kGatherOfUnsplitValue:
      case EditCheck::kGatherOnOtherDim:
      case EditCheck::kSplitOfSplitValue:
      case EditCheck::kSplitOfJointSequence: return check;
    }
    return check;
  }

  std::string ModuleOf(const Node& n) const { return program::ModuleOf(p_, n); }

  [[noreturn]] void Refuse(EditCheck check, const Node& n, const std::string& value, const Sharding& s,
                           const std::string& what, const std::string& whole = "", int64_t whole_dim = -1) const {
    const std::string module = ModuleOf(n);
    throw PlanEditError(ForAxis(check), rules_[s.rule].origin,
                        where_ +
                            (Tp()                    ? ": tensor parallelism cannot shard node `"
                             : axis_ == Axis::kCfg ? ": a split of the guidance branches (cfg) cannot pass node `"
                                                     : ": a context-parallel split cannot pass node `") +
                            n.name + "` (" + ShortOp(n.target) + ")" +
                            (module.empty() ? std::string(" at the root") : " in module `" + module + "`") + ": " + what +
                            "; it reads `" + value + (Tp() ? "`, tp-sharded along dim " : "`, split along dim ") +
                            std::to_string(s.dim) + " in blocks " + List(s.blocks) + From(s),
                        n.name, module)
        .WithWhole(whole, whole_dim);
  }

  const Argument* Arg(const Node& n, const char* name) const {
    for (const NamedArgument& in : n.inputs) {
      if (in.name == name) return &in.arg;
    }
    return nullptr;
  }
  std::string TensorArg(const Node& n, const char* name) const {
    const Argument* a = Arg(n, name);
    return a != nullptr && a->kind == AK::kTensor ? a->name : "";
  }
  // An integer argument: its constant, or nullopt when absent, None or symbolic.
  std::optional<int64_t> IntArg(const Node& n, const char* name) const {
    const Argument* a = Arg(n, name);
    if (a == nullptr) return std::nullopt;
    if (a->kind == AK::kInt) return a->i;
    if (a->kind == AK::kSymInt && !a->sym_ints.empty() && !a->sym_ints[0].is_name) return a->sym_ints[0].value;
    return std::nullopt;
  }
  std::vector<int64_t> IntsArg(const Node& n, const char* name) const {
    const Argument* a = Arg(n, name);
    if (a == nullptr) return {};
    if (a->kind == AK::kInts) return a->ints;
    if (a->kind == AK::kInt) return {a->i};
    std::vector<int64_t> out;
    if (a->kind == AK::kSymInts || a->kind == AK::kSymInt) {
      for (const SymIntRef& r : a->sym_ints) out.push_back(r.is_name ? std::numeric_limits<int64_t>::min() : r.value);
    }
    return out;
  }

  // How `v` is sharded where the node being visited reads it (a split of a module argument covers
  // the reads inside that module only; one of a value a split already reaches is refused).
  const Sharding* Find(const std::string& v) const {
    if (current_ != nullptr) {
      for (const Scoped& s : scoped_) {
        if (s.value != v || !NodeInModule(p_, *current_, s.scope) || (!s.node.empty() && s.node != current_->name)) continue;
        if (auto already = sharded_.find(v); already != sharded_.end()) {
          RefuseSecondSplit(*current_, v, s.sharding, already->second);
        }
        return &s.sharding;
      }
    }
    auto it = sharded_.find(v);
    return it == sharded_.end() ? nullptr : &it->second;
  }
  // A size argument's value at the export's example: its constant, or the hint of its symbol.
  std::optional<int64_t> HintArg(const Node& n, const char* name) const {
    const Argument* a = Arg(n, name);
    if (a == nullptr) return std::nullopt;
    if (a->kind == AK::kSymInt && !a->sym_ints.empty() && a->sym_ints[0].is_name) {
      auto it = p_.sym_int_values.find(a->sym_ints[0].name);
      if (it != p_.sym_int_values.end()) return it->second.value;
      return std::nullopt;
    }
    return IntArg(n, name);
  }
  // Sizes by their hints (symbolic sizes at the export's example).
  std::vector<int64_t> Sizes(const std::string& v) const {
    std::vector<int64_t> out;
    if (const TensorMeta* m = p_.FindTensor(v)) {
      for (const SymInt& s : m->sizes) out.push_back(s.value);
    }
    return out;
  }
  // True when dim `dim` of `v` has a size known only at run time (an unbacked symbol `u0` of a
  // nonzero, a boolean-mask index).
  bool DataDependentLength(const std::string& v, int64_t dim) const {
    const TensorMeta* m = p_.FindTensor(v);
    if (m == nullptr || dim < 0 || dim >= static_cast<int64_t>(m->sizes.size())) return false;
    const SymInt& size = m->sizes[static_cast<size_t>(dim)];
    if (!size.symbolic) return false;
    const std::vector<std::string> symbols = Expr::Parse(size.expr).Symbols();
    return std::any_of(symbols.begin(), symbols.end(), IsUnbackedSymbol);
  }
  bool StaticOne(const std::string& v, int64_t dim) const {
    const TensorMeta* m = p_.FindTensor(v);
    return m != nullptr && dim >= 0 && dim < static_cast<int64_t>(m->sizes.size()) &&
           !m->sizes[static_cast<size_t>(dim)].symbolic && m->sizes[static_cast<size_t>(dim)].value == 1;
  }
  int64_t Rank(const std::string& v) const {
    const TensorMeta* m = p_.FindTensor(v);
    return m == nullptr ? -1 : static_cast<int64_t>(m->sizes.size());
  }
  static int64_t Norm(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

  std::vector<std::string> Outputs(const Node& n) const {
    std::vector<std::string> out;
    for (const Argument& o : n.outputs) {
      for (const std::string& v : o.TensorNames()) out.push_back(v);
    }
    return out;
  }
  // A sharding with new blocks. A node that reads a joint sequence with whole streams must say
  // where they go (SetLike, or Set with `whole`): one that rebuilds the blocks without them is
  // refused, never left to treat a whole stream as split.
  void Set(const std::string& v, int64_t dim, std::vector<int64_t> blocks, size_t rule) {
    if (whole_in_) {
      // Name the whole stream (the first whose tensor is known).
      const auto& streams = whole_in_->second.whole;
      const auto named = std::find_if(streams.begin(), streams.end(), [](const auto& w) { return w && !w->value.empty(); });
      const std::string whole = named == streams.end() ? "" : (*named)->value;
      const int64_t whole_dim = named == streams.end() ? -1 : (*named)->dim;
      Refuse(EditCheck::kTpColwiseEscapes, *current_, whole_in_->first, whole_in_->second,
             "it reads a joint sequence that holds " + (whole.empty() ? std::string("a stream") : "`" + whole + "`") +
                 " whole on every rank (a cat joined it to split streams), which weft follows through row-wise "
                 "operators, attention, a pad of the whole stream and a split at the streams' bounds only; split it "
                 "with the others",
             whole, whole_dim);
    }
    Set(v, dim, std::move(blocks), rule, {});
  }
  // As `like` (same blocks, whole streams and rule) along `dim`.
  void SetLike(const std::string& v, int64_t dim, const Sharding& like) { Set(v, dim, like.blocks, like.rule, like.whole); }
  void Set(const std::string& v, int64_t dim, std::vector<int64_t> blocks, size_t rule,
           std::vector<std::optional<plan::WholePart>> whole) {
    if (v.empty()) return;
    if (std::none_of(whole.begin(), whole.end(), [](const auto& w) { return w.has_value(); })) whole.clear();
    if (!Tp() && !gathers_.count(v)) {
      const TensorMeta* meta = p_.FindTensor(v);
      if (meta != nullptr && dim < static_cast<int64_t>(meta->sizes.size()) && !meta->sizes[static_cast<size_t>(dim)].symbolic) {
        constant_blocks_.emplace(blocks, std::make_pair(v, dim));
      } else if (meta != nullptr && dim < static_cast<int64_t>(meta->sizes.size()) && blocks.size() == 1 && whole.empty()) {
        symbolic_splits_.emplace(spelling_.Expression(meta->sizes[static_cast<size_t>(dim)]), std::make_pair(v, dim));
      }
    }
    sharded_[v] = Sharding{dim, std::move(blocks), rule, std::move(whole)};
  }

  // A constant that argument `argument` (element `element`, -1 = the argument) of `n` gives the
  // split dim -- a slice bound, a split size, a view's size -- is a full length: the sum of the
  // constant-length `blocks` it spans (negated with `sign` -1: a bound counted from the end). On
  // each rank it becomes the size of a shard made before `n` that holds exactly those blocks
  // (every stream of a group is split by one rule, so that shard's size is this rank's length of
  // them; CogVideoX's `split_with_sizes([226, S])` of cat(text, video)). False when no shard holds
  // them: the caller refuses.
  bool LocalConstant(const Node& n, const char* argument, int64_t element, const std::vector<int64_t>& blocks,
                     int64_t sign, const Sharding& s) {
    auto it = constant_blocks_.find(blocks);
    if (it == constant_blocks_.end()) return false;
    plan::ProgramEdit e = ArgumentEdit(n, argument, element, sign);
    e.value = it->second.first;
    e.dim = it->second.second;
    Edit(std::move(e), s.rule);
    return true;
  }
  // A view's size `symbol`, read off whole tensors, that is the full length the view gives its
  // output dim `j` and that of a split stream some shard holds: that shard's length, as
  // LocalConstant makes a constant local (Wan Animate's frame count, read off the face video, where
  // the face features are split along their frames with the tokens' rows). False when no shard
  // holds such a stream.
  bool LocalSymbol(const Node& n, const char* argument, int64_t element, const std::string& symbol, size_t j,
                   const Sharding& s) {
    const auto value = p_.sym_int_values.find(symbol);
    const std::vector<std::string> outs = Outputs(n);
    const TensorMeta* out = outs.empty() ? nullptr : p_.FindTensor(outs[0]);
    if (value == p_.sym_int_values.end() || !value->second.symbolic || out == nullptr || j >= out->sizes.size()) return false;
    const std::string length = spelling_.Expression(value->second);
    if (spelling_.Expression(out->sizes[j]) != length) return false;
    const auto it = symbolic_splits_.find(length);
    if (it == symbolic_splits_.end()) return false;
    plan::ProgramEdit e = ArgumentEdit(n, argument, element, 1);
    e.value = it->second.first;
    e.dim = it->second.second;
    Edit(std::move(e), s.rule);
    return true;
  }
  // Argument `argument` (element `element`, -1 = the argument) of `n` becomes `value` (with the
  // edit's `value` and `dim` set, the size of that shard times `value`: local_sizes.h's sign).
  plan::ProgramEdit ArgumentEdit(const Node& n, const char* argument, int64_t element, int64_t value) const {
    plan::ProgramEdit e;
    e.kind = Kind::kArgument;
    e.group = std::string(Group());
    e.node = n.name;
    e.argument = argument;
    e.element = element;
    e.new_value = value;
    return e;
  }
  // `n`'s argument `name` when it is an integer constant (a symbolic size is local_sizes.h's).
  std::optional<int64_t> ConstantArg(const Node& n, const char* name) const {
    const Argument* a = Arg(n, name);
    if (a == nullptr || (a->kind != AK::kInt && a->kind != AK::kSymInt)) return std::nullopt;
    return IntArg(n, name);
  }

  void Edit(plan::ProgramEdit e, size_t rule) {
    if (out_ == nullptr) return;  // a check only: the sizes of splits are local_sizes.h's
    e.module = rules_[rule].module;
    e.origin = rules_[rule].origin;
    out_->edits.push_back(std::move(e));
  }
  // Argument `argument` (element `element`, -1 = the argument) of `n` becomes `value`.
  // Tensor parallelism only: its shards are even, so a constant size divides by tp; the split
  // walks make constants local with LocalConstant.
  void EditInt(const Node& n, const char* argument, int64_t element, int64_t value, size_t rule) {
    if (!Tp()) return;
    Edit(ArgumentEdit(n, argument, element, value), rule);
  }

  // Prefix sums of `blocks` (0, b0, b0 + b1, ...).
  static std::vector<int64_t> Boundaries(const std::vector<int64_t>& blocks) {
    std::vector<int64_t> b = {0};
    for (int64_t x : blocks) b.push_back(b.back() + x);
    return b;
  }
  // The blocks between full offsets [start, end), or nullopt when either is inside a block.
  static std::optional<std::vector<int64_t>> BlocksBetween(const std::vector<int64_t>& blocks, int64_t start, int64_t end) {
    const std::vector<int64_t> b = Boundaries(blocks);
    auto s = std::find(b.begin(), b.end(), start);
    auto e = std::find(b.begin(), b.end(), end);
    if (s == b.end() || e == b.end() || e < s) return std::nullopt;
    std::vector<int64_t> out(blocks.begin() + (s - b.begin()), blocks.begin() + (e - b.begin()));
    return out;
  }

  void Visit(const Node& n) {
    // The sharded tensors this node reads.
    std::vector<std::pair<std::string, Sharding>> in;
    for (const NamedArgument& a : n.inputs) {
      for (const std::string& v : a.arg.TensorNames()) {
        if (const Sharding* s = Find(v)) in.emplace_back(v, *s);
      }
    }
    if (in.empty()) return WholeAtLocalLength(n);
    for (const auto& read : in) {
      if (read.second.HasWhole()) whole_in_ = read;
    }
    const std::string& t = n.target;
    const std::vector<std::string> outs = Outputs(n);
    if (t == "torch.ops.aten.linear.default") return Linear(n);
    if (t == "torch.ops.aten._assert_tensor_metadata.default") {
      const Argument* size = Arg(n, "size");
      if (size != nullptr && size->kind != AK::kNone) Refuse(EditCheck::kTpUnsupportedOperator, n, in[0].first, in[0].second, "asserts the full sizes");
      return;
    }
    if (IsElementwise(t)) return Pointwise(n);
    const auto& [value, s] = in[0];
    if (OneOf(t, {"outer.default"})) {  // out[i, j] = self[i] * vec2[j]
      if (in.size() > 1) Refuse(EditCheck::kTpReducesShardedDim, n, in[1].first, in[1].second, "both factors are sharded");
      return SetLike(outs[0], TensorArg(n, "self") == in[0].first ? 0 : 1, in[0].second);
    }
    if (OneOf(t, {"index_select.default"})) {
      const std::string self = TensorArg(n, "self"), index = TensorArg(n, "index");
      const int64_t d = Norm(IntArg(n, "dim").value_or(0), Rank(self));
      if (const Sharding* si = Find(index)) {  // a whole table looked up at sharded indices (positions)
        if (Find(self) != nullptr) Refuse(EditCheck::kTpReducesShardedDim, n, index, *si, "both the table and the indices are sharded");
        return SetLike(outs[0], d, *si);
      }
      const Sharding& st = *Find(self);
      if (d == st.dim) Refuse(EditCheck::kTpReducesShardedDim, n, self, st, "it picks indices along the sharded dim");
      return SetLike(outs[0], st.dim, st);
    }
    if (OneOf(t, {"embedding.default"})) {  // out = weight[indices]: indices' dims, then the table's width
      const std::string indices = TensorArg(n, "indices");
      const Sharding* si = Find(indices);
      if (si == nullptr) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "looks its indices up in a sharded table");
      if (in.size() > 1) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "both the table and the indices are sharded");
      return SetLike(outs[0], si->dim, *si);
    }
    if (OneOf(t, {"index.Tensor"})) return Index(n, value, s);
    // x.new_zeros(size) reads only x's dtype and device: its output is whole, or a shard when
    // sized by a split's local length (LocalLengthFactory, after this node).
    if (OneOf(t, {"new_zeros.default", "new_ones.default", "new_empty.default", "new_full.default"}) &&
        in.size() == 1 && TensorArg(n, "self") == in[0].first) {
      return;
    }
    if (OneOf(t, {"gather.default"})) {  // out[..i..] = self[..index[..i..]..] along `dim`
      // Along any other dim, self and index pair element for element (NucleusMoE gathers each
      // token's chosen experts): both must be sharded alike there.
      const std::string self = TensorArg(n, "self"), index = TensorArg(n, "index");
      const Sharding* ss = Find(self);
      const Sharding* si = Find(index);
      if (ss == nullptr || si == nullptr || ss->dim != si->dim || !ss->SameLayout(*si)) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it gathers from a tensor and at indices not sharded alike");
      }
      if (Norm(IntArg(n, "dim").value_or(0), Rank(self)) == ss->dim) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it gathers along the sharded dim");
      }
      return SetLike(outs[0], ss->dim, *ss);
    }
    if (OneOf(t, {"index_copy.default", "index_copy_.default", "index_put.default", "index_put_.default"})) {
      return IndexWrite(n);
    }
    if (OneOf(t, {"matmul.default", "bmm.default"})) return Matmul(n);
    if (OneOf(t, {"einsum.default"})) return Einsum(n);
    if (in.size() > 1 && !OneOf(t, {"cat.default", "concat.default", "concatenate.default", "stack.default", "scaled_dot_product_attention.default",
                                     "rms_norm.default"})) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, in[1].first, in[1].second, "reads two sharded tensors");
    }
    const int64_t rank = Rank(value);
    const std::string out = outs.empty() ? std::string() : outs[0];
    if (OneOf(t, {"view.default", "reshape.default", "_unsafe_view.default", "unflatten.int", "flatten.using_ints"})) {
      return Reshape(n, value, s);
    }
    if (OneOf(t, {"view_as_complex.default"})) {
      if (s.dim == rank - 1) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "pairs the elements of the sharded dim into complex numbers");
      return SetLike(out, s.dim, s);
    }
    if (OneOf(t, {"view_as_real.default"})) return SetLike(out, s.dim, s);
    if (OneOf(t, {"expand.default"})) {
      const int64_t d = s.dim + Rank(out) - rank;
      const std::vector<int64_t> size = IntsArg(n, "size");
      if (Tp() && d < static_cast<int64_t>(size.size())) {
        const int64_t v = size[static_cast<size_t>(d)];
        if (v == std::numeric_limits<int64_t>::min()) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "gives the sharded dim's size symbolically");
        if (v > 0) EditInt(n, "size", d, v / tp_, s.rule);
      }
      return SetLike(out, d, s);
    }
    if (OneOf(t, {"permute.default"})) {
      const std::vector<int64_t> dims = IntsArg(n, "dims");
      for (size_t i = 0; i < dims.size(); ++i) {
        if (Norm(dims[i], rank) == s.dim) return SetLike(out, static_cast<int64_t>(i), s);
      }
      Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "permutes without the sharded dim");
    }
    if (OneOf(t, {"transpose.int", "swapaxes.default"})) {
      const bool swap = t == "torch.ops.aten.swapaxes.default";
      const int64_t a = Norm(IntArg(n, swap ? "axis0" : "dim0").value_or(0), rank);
      const int64_t b = Norm(IntArg(n, swap ? "axis1" : "dim1").value_or(0), rank);
      return SetLike(out, s.dim == a ? b : s.dim == b ? a : s.dim, s);
    }
    if (OneOf(t, {"t.default"})) return SetLike(out, rank == 2 ? 1 - s.dim : s.dim, s);
    if (OneOf(t, {"unsqueeze.default"})) {
      const int64_t d = Norm(IntArg(n, "dim").value_or(0), rank + 1);
      return SetLike(out, d <= s.dim ? s.dim + 1 : s.dim, s);
    }
    if (OneOf(t, {"squeeze.dim", "squeeze.dims", "squeeze.default"})) {
      int64_t removed = 0;
      for (int64_t d = 0; d < s.dim; ++d) removed += StaticOne(value, d) && !StaticOne(out, d - removed) ? 1 : 0;
      return SetLike(out, s.dim - removed, s);
    }
    if (OneOf(t, {"repeat_interleave.self_int"})) {
      const std::optional<int64_t> dim = IntArg(n, "dim");
      std::optional<int64_t> repeats = IntArg(n, "repeats");
      // A count that is a size of some other dim (Latte repeats each sample's text once per frame,
      // along the batch of branches) is the same on every rank: its hint sizes the blocks as
      // every other size here is. A count that is a split's length is made local (local_sizes.h),
      // and differs between ranks: refused below.
      const Argument* count = Arg(n, "repeats");
      if (!repeats && count != nullptr && count->kind == AK::kSymInt && !count->sym_ints.empty() &&
          count->sym_ints[0].is_name && local_lengths_.count(count->sym_ints[0].name) == 0 &&
          local_repeats_.count(n.name) == 0) {
        repeats = HintArg(n, "repeats");
      }
      if (dim && Norm(*dim, rank) == s.dim && repeats && *repeats > 0) {
        // Each element repeated in place: a rank's rows stay its own, each block `repeats` times
        // longer (HunyuanVideo's text mask per head, along the batch of branches; under tp, Krea 2's
        // key/value heads repeated to its query heads: rank r's key heads become exactly the query
        // heads its colwise projection holds). A constant output size would be the full one.
        const Argument* size = Arg(n, "output_size");
        if (size != nullptr && size->kind == AK::kInt) {
          Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it repeats elements along the split dim to a constant total size");
        }
        std::vector<int64_t> blocks = s.blocks;
        for (int64_t& b : blocks) b *= *repeats;
        return Set(out, s.dim, blocks, s.rule);
      }
      if (!dim || Norm(*dim, rank) == s.dim) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it repeats elements along the sharded dim");
      return SetLike(out, s.dim, s);
    }
    if (OneOf(t, {"select.int"})) {
      const int64_t d = Norm(IntArg(n, "dim").value_or(0), rank);
      if (d == s.dim) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "selects one index of the sharded dim");
      return SetLike(out, d < s.dim ? s.dim - 1 : s.dim, s);
    }
    if (OneOf(t, {"unbind.int"})) {
      const int64_t d = Norm(IntArg(n, "dim").value_or(0), rank);
      if (d == s.dim) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "unbinds the sharded dim");
      for (const std::string& o : outs) SetLike(o, d < s.dim ? s.dim - 1 : s.dim, s);
      return;
    }
    if (OneOf(t, {"slice.Tensor"})) return Slice(n, value, s);
    if (OneOf(t, {"split_with_sizes.default", "split.Tensor", "chunk.default"})) return Split(n, value, s);
    if (OneOf(t, {"cat.default", "concat.default", "concatenate.default", "stack.default"})) return Concat(n);
    if (OneOf(t, {"scaled_dot_product_attention.default"})) {
      return Tp() ? Attention(n) : axis_ == Axis::kCfg ? BranchAttention(n) : SplitAttention(n);
    }
    if (OneOf(t, {"rms_norm.default", "layer_norm.default", "native_layer_norm.default"})) return Norm(n, value, s);
    if (OneOf(t, {"mean.dim", "sum.dim_IntList", "amax.default", "amin.default", "any.dim", "any.dims", "max.dim",
                  "min.dim", "var.correction", "std.correction", "argmax.default", "logsumexp.default"})) {
      return Reduce(n, value, s);
    }
    if (OneOf(t, {"softmax.int", "_softmax.default", "log_softmax.int", "_log_softmax.default", "cumsum.default"})) {
      if (Norm(IntArg(n, "dim").value_or(0), rank) == s.dim) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "mixes the elements of the sharded dim");
      return SetLike(out, s.dim, s);
    }
    if (OneOf(t, {"sym_size.int"})) {
      // A split's sizes are read locally on purpose (local_sizes.h); a tp-sharded one is not.
      if (Tp() && Norm(IntArg(n, "dim").value_or(0), rank) == s.dim) {
        Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "reads the size of the sharded dim (on a shard it is the local size)");
      }
      // The local length of a split: a tensor built at it is a shard too (below, LocalLengthFactory).
      if (!Tp() && Norm(IntArg(n, "dim").value_or(0), rank) == s.dim) {
        for (const Argument& o : n.outputs) {
          if (o.kind == AK::kSymInt && !o.sym_ints.empty() && o.sym_ints[0].is_name) {
            local_lengths_[o.sym_ints[0].name] = {value, s};
            local_syms_.insert(o.sym_ints[0].name);
          }
          if (!o.name.empty()) {
            local_lengths_[o.name] = {value, s};
            local_syms_.insert(o.name);
          }
        }
      }
      return;
    }
    if (OneOf(t, {"repeat.default"})) {  // tiles each dim `repeats[i]` times (new leading dims first)
      const std::vector<int64_t> repeats = IntsArg(n, "repeats");
      const int64_t d = s.dim + static_cast<int64_t>(repeats.size()) - rank;
      if (d < 0 || d >= static_cast<int64_t>(repeats.size()) || repeats[static_cast<size_t>(d)] != 1) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it tiles the sharded dim");
      }
      return SetLike(out, d, s);
    }
    if (OneOf(t, {"pad.default", "constant_pad_nd.default"})) {
      // `pad` lists (before, after) pairs from the last dim backwards: padding any other dim keeps
      // the sharding (Sana's linear attention pads its values with a row of ones, along the
      // features); padding the sharded dim would add positions to every rank's part.
      const std::vector<int64_t> pad = IntsArg(n, "pad");
      const int64_t from_end = rank - 1 - s.dim;
      if (2 * from_end + 1 < static_cast<int64_t>(pad.size()) &&
          (pad[static_cast<size_t>(2 * from_end)] != 0 || pad[static_cast<size_t>(2 * from_end + 1)] != 0)) {
        // A whole stream at the padded end grows on every rank alike (Mochi pads each sample's
        // attention output from its valid text tokens to the full text length).
        const bool before = pad[static_cast<size_t>(2 * from_end)] != 0, after = pad[static_cast<size_t>(2 * from_end + 1)] != 0;
        const size_t last = s.blocks.size() - 1;
        if (before == after || (before && !s.IsWhole(0)) || (after && !s.IsWhole(last))) {
          Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it pads the sharded dim");
        }
        Sharding padded = s;
        const size_t i = before ? 0 : last;
        // The padded length less the other blocks (a data-dependent length has no hint to add to).
        padded.blocks[i] = Sizes(out)[static_cast<size_t>(s.dim)] -
                           (std::accumulate(s.blocks.begin(), s.blocks.end(), int64_t{0}) - s.blocks[i]);
        padded.whole[i] = plan::WholePart{};  // no tensor holds the padded length
        return SetLike(out, s.dim, padded);
      }
      return SetLike(out, s.dim, s);
    }
    if (OneOf(t, {"group_norm.default", "native_group_norm.default"})) {
      // Statistics per sample over its groups of channels and every position (N, C, ...): a
      // sharding of the batch passes; any other dim is normalized over.
      if (TensorArg(n, "input") != value || s.dim != 0 || in.size() > 1) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "a group norm takes its statistics over the sharded dim");
      }
      for (const std::string& o : outs) SetLike(o, 0, s);
      return;
    }
    if (OneOf(t, {"topk.default", "sort.default", "sort.stable"})) {
      // Values and indices along `dim` (MoE routing picks experts per token): another dim keeps
      // its sharding in both outputs.
      if (Norm(IntArg(n, "dim").value_or(-1), rank) == s.dim) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it ranks the elements of the sharded dim");
      }
      for (const std::string& o : outs) SetLike(o, s.dim, s);
      return;
    }
    if (OneOf(t, {"conv1d.default", "conv2d.default", "conv3d.default", "convolution.default",
                  "conv_transpose1d.default", "conv_transpose2d.input", "conv_transpose3d.input"})) {
      // Each sample apart (N, C, ...): a sharding of the batch passes; channels are mixed by the
      // kernel; a split spatial dim needs its neighbours' rows (SplitConvolution).
      if (axis_ == Axis::kCp && TensorArg(n, "input") == value && s.dim >= 2 && in.size() == 1) {
        return SplitConvolution(n, value, s);
      }
      if (TensorArg(n, "input") != value || s.dim != 0 || in.size() > 1) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "a convolution mixes its channels and neighbouring positions");
      }
      return SetLike(out, 0, s);
    }
    Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "weft does not follow a sharding through this operator");
  }

  // self[..., idx, ...]: one index tensor at position k (the others None). Its result holds
  // self's dims before k, then idx's dims, then self's after k. A whole table looked up at
  // sharded indices (RoPE frequencies at a split's positions) is sharded as the indices are; a
  // sharded self indexed along another dim keeps its sharding, moved by the index's rank.
  void Index(const Node& n, const std::string& value, const Sharding& s) {
    const std::string self = TensorArg(n, "self");
    const Argument* indices = Arg(n, "indices");
    const std::string out = Outputs(n).empty() ? std::string() : Outputs(n)[0];
    std::string idx;
    int64_t k = -1;
    if (indices != nullptr && (indices->kind == AK::kOptionalTensors || indices->kind == AK::kTensors)) {
      for (size_t i = 0; i < indices->names.size(); ++i) {
        if (indices->names[i].empty()) continue;
        if (!idx.empty()) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "it indexes with several tensors at once");
        idx = indices->names[i];
        k = static_cast<int64_t>(i);
      }
    }
    if (idx.empty()) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "it indexes with no index tensor");
    const Sharding* ss = Find(self);
    if (const Sharding* si = Find(idx)) {
      if (ss != nullptr) Refuse(EditCheck::kTpReducesShardedDim, n, idx, *si, "both the table and the indices are sharded");
      return SetLike(out, k + si->dim, *si);
    }
    if (ss->dim == k) Refuse(EditCheck::kTpReducesShardedDim, n, self, *ss, "it picks indices along the sharded dim");
    return SetLike(out, ss->dim < k ? ss->dim : ss->dim - 1 + Rank(idx), *ss);
  }

  // Writes at indices along other dims than the sharded one: `index_copy(self, d, index, source)`
  // and `index_put(self, [None, .., idx, ..], values)` (MiniMax-H3 places each sample's text, video
  // and audio rows into one sequence; Ideogram 4 writes RoPE channels per sample). Each rank's
  // rows of self take its rows of the written values, so both must be sharded alike along a dim no
  // index addresses -- for index_put, one before every index tensor -- and the indices whole: the
  // output is sharded as self is. Values with no extent along the sharded dim (broadcast) are the
  // same for every row.
  void IndexWrite(const Node& n) {
    const bool copy = OneOf(n.target, {"index_copy.default", "index_copy_.default"});
    const std::string self = TensorArg(n, "self"), source = TensorArg(n, copy ? "source" : "values");
    const std::string out = Outputs(n).empty() ? std::string() : Outputs(n)[0];
    const Sharding* ss = Find(self);
    const Sharding* sv = Find(source);
    std::vector<std::string> index_tensors;
    int64_t first_indexed = Rank(self);  // the first dim an index addresses
    if (copy) {
      index_tensors.push_back(TensorArg(n, "index"));
      first_indexed = Norm(IntArg(n, "dim").value_or(0), Rank(self));
    } else if (const Argument* indices = Arg(n, "indices");
               indices != nullptr && (indices->kind == AK::kOptionalTensors || indices->kind == AK::kTensors)) {
      for (size_t i = 0; i < indices->names.size(); ++i) {
        if (indices->names[i].empty()) continue;
        index_tensors.push_back(indices->names[i]);
        first_indexed = std::min(first_indexed, static_cast<int64_t>(i));
      }
    }
    for (const std::string& idx : index_tensors) {
      if (const Sharding* si = Find(idx)) Refuse(EditCheck::kTpReducesShardedDim, n, idx, *si, "it writes at sharded indices");
    }
    if (ss == nullptr) Refuse(EditCheck::kTpReducesShardedDim, n, source, *sv, "it writes a sharded tensor into a whole one");
    if (ss->dim >= first_indexed) Refuse(EditCheck::kTpReducesShardedDim, n, self, *ss, "it writes at indices along the sharded dim");
    if (sv == nullptr) {
      // Whole values broadcast along the sharded dim (size 1 or no such dim, aligned from the
      // right) are the same for every rank's rows; any other extent there is a whole tensor's.
      const std::vector<int64_t> values = Sizes(source);
      const int64_t aligned = ss->dim - (Rank(self) - static_cast<int64_t>(values.size()));
      if (!source.empty() && aligned >= 0 && values[static_cast<size_t>(aligned)] != 1) {
        Refuse(EditCheck::kTpUnsupportedOperator, n, self, *ss, "it writes a whole tensor into a sharded one");
      }
    } else if (Rank(source) != Rank(self) || !sv->SameLayout(*ss)) {
      Refuse(EditCheck::kTpReducesShardedDim, n, source, *sv, "it writes values not sharded as the tensor written into");
    }
    return SetLike(out, ss->dim, *ss);
  }

  // A convolution over a context-parallel split of spatial dim `s.dim` (Sana's Mix-FFN: its tokens
  // viewed as the latent grid, a 3x3 depthwise kernel over it): each output row reads the input
  // rows within the kernel's reach, so a rank's first and last output rows need rows its neighbours
  // hold. With stride 1 and the padding that keeps the length (dilation x (kernel - 1) / 2 on each
  // side), the rank's part padded with that many rows of each neighbour -- zeros beyond the first
  // and the last part, which are the convolution's own zero padding -- convolved without padding
  // along the dim gives exactly its part of the output: a kHalo edit (the runtime exchanges the
  // rows point to point). A pointwise kernel along the dim (1, no padding) needs none. Anything else
  // (a stride, a padding that changes the length, a transposed convolution, a split holding several
  // streams) is refused by name.
  void SplitConvolution(const Node& n, const std::string& value, const Sharding& s) {
    const std::string out = Outputs(n)[0];
    const bool plain = OneOf(n.target, {"conv1d.default", "conv2d.default", "conv3d.default"});
    const Argument* transposed = Arg(n, "transposed");
    if (!plain && (n.target != "torch.ops.aten.convolution.default" || transposed == nullptr ||
                   transposed->kind != AK::kBool || transposed->b)) {
      Refuse(EditCheck::kCpReducesSplitDim, n, value, s, "a transposed convolution spreads each input row over several output rows");
    }
    if (s.blocks.size() != 1 || s.HasWhole()) {
      Refuse(EditCheck::kCpReducesSplitDim, n, value, s, "a convolution over a split dim that lays out several streams mixes them at their bounds");
    }
    const std::vector<int64_t> weight = Sizes(TensorArg(n, "weight"));
    const size_t d = static_cast<size_t>(s.dim);
    const size_t spatial = d - 2;  // the dim's index among the spatial dims
    if (weight.size() <= d) Refuse(EditCheck::kCpUnsupportedOperator, n, value, s, "the program records no kernel size for it");
    const int64_t kernel = weight[d];
    // stride, padding and dilation: one value per spatial dim, or one for all.
    auto at = [&](const char* name, int64_t absent) {
      const std::vector<int64_t> v = IntsArg(n, name);
      if (v.empty()) return absent;
      return v.size() == 1 ? v[0] : spatial < v.size() ? v[spatial] : std::numeric_limits<int64_t>::min();
    };
    const int64_t stride = at("stride", 1), padding = at("padding", 0), dilation = at("dilation", 1);
    for (const auto& [name, v] : {std::pair<const char*, int64_t>{"stride", stride}, {"padding", padding}, {"dilation", dilation}}) {
      if (v == std::numeric_limits<int64_t>::min()) {
        Refuse(EditCheck::kCpUnsupportedOperator, n, value, s, std::string("its ") + name + " along the split dim is no constant");
      }
    }
    if (stride != 1) {
      Refuse(EditCheck::kCpReducesSplitDim, n, value, s,
             "it strides " + std::to_string(stride) + " along the split dim (each rank's part would start off the grid)");
    }
    if (2 * padding != dilation * (kernel - 1)) {
      Refuse(EditCheck::kCpReducesSplitDim, n, value, s,
             "its kernel of " + std::to_string(kernel) + " (dilation " + std::to_string(dilation) + ") pads " +
                 std::to_string(padding) + " along the split dim, which changes its length; weft exchanges the rows of " +
                 "a convolution that keeps it");
    }
    if (padding > 0) {
      widest_halo_ = std::max(widest_halo_, padding);
      plan::ProgramEdit e;
      e.kind = Kind::kHalo;
      e.node = n.name;
      e.value = value;
      e.dim = s.dim;
      e.rank = Rank(value);
      e.new_value = padding;
      Edit(std::move(e), s.rule);
    }
    SetLike(out, s.dim, s);
  }

  // Node `n` sums over split tokens (`out` each rank's partial sum): the compiler sums the parts
  // over the CP group right after it (kAllReduce, group cp), and `out` is whole from there.
  void SumOverCpGroup(const Node& n, const std::string& out, size_t rule) {
    plan::ProgramEdit e;
    e.kind = Kind::kAllReduce;
    e.group = std::string(plan::kCpGroup);
    e.node = n.name;
    e.value = out;
    Edit(std::move(e), rule);
  }

  // Node `n` (a sum or, with `mean`, a mean over the tp-sharded dim) gives each rank its part's:
  // summed over the tp group right after it (kAllReduce, group tp, no bias; `new_value` the divisor
  // of a mean, tp), and whole from there.
  void SumOverTpGroup(const Node& n, const Sharding& s, bool mean) {
    const std::vector<std::string> outs = Outputs(n);
    if (outs.size() != 1) Refuse(EditCheck::kTpReducesShardedDim, n, outs.empty() ? "" : outs[0], s, "it reduces over the sharded dim");
    for (int64_t block : s.blocks) {
      if (block % tp_ != 0) Refuse(EditCheck::kTpReducesShardedDim, n, outs[0], s, "it reduces over the sharded dim, whose blocks tp does not divide");
    }
    plan::ProgramEdit e;
    e.kind = Kind::kAllReduce;
    e.group = std::string(plan::kTpAxis);
    e.node = n.name;
    e.value = outs[0];
    e.new_value = mean ? tp_ : 1;
    Edit(std::move(e), s.rule);
  }

  // matmul / bmm of a (..., M, K) and b (..., K, N). A sharding of M (a's rows) or of N (b's
  // columns) carries into the output's; one of a batch dim must be on both operands alike (or b
  // has no batch dims and broadcasts). K sharded on both alike -- a linear attention's sum over
  // the keys, Sana's V^T K with the tokens split -- gives each rank a partial sum: on a
  // context-parallel split the compiler sums the parts over the CP group right after the node
  // (kAllReduce, group cp) and the output is whole; under tp or cfg it is refused.
  void Matmul(const Node& n) {
    const std::string a = TensorArg(n, "self");
    const std::string b = TensorArg(n, n.target == "torch.ops.aten.bmm.default" ? "mat2" : "other");
    const std::string out = Outputs(n).empty() ? std::string() : Outputs(n)[0];
    const Sharding* sa = Find(a);
    const Sharding* sb = Find(b);
    const int64_t ra = Rank(a), rb = Rank(b), ro = Rank(out);
    if (ra < 2 || rb < 2) {
      const Sharding& s = sa != nullptr ? *sa : *sb;
      Refuse(EditCheck::kTpUnsupportedOperator, n, sa != nullptr ? a : b, s, "a matrix-vector product (an operand of one dim)");
    }
    const bool a_contracts = sa != nullptr && sa->dim == ra - 1;
    const bool b_contracts = sb != nullptr && sb->dim == rb - 2;
    if (a_contracts || b_contracts) {
      if (!(a_contracts && b_contracts) || sa->blocks != sb->blocks) {
        const bool blame_a = sa != nullptr && a_contracts;
        Refuse(EditCheck::kTpReducesShardedDim, n, blame_a ? a : b, blame_a ? *sa : *sb,
               "it contracts the sharded dim against an operand not sharded alike along it");
      }
      if (axis_ != Axis::kCp) {
        Refuse(EditCheck::kTpReducesShardedDim, n, a, *sa, "it contracts the sharded dim (a sum over it)");
      }
      return SumOverCpGroup(n, out, sa->rule);
    }
    if (sa != nullptr && sa->dim == ra - 2) {
      if (sb != nullptr) Refuse(EditCheck::kTpUnsupportedOperator, n, b, *sb, "both operands are sharded (rows of one, another dim of the other)");
      return SetLike(out, ro - 2, *sa);
    }
    if (sb != nullptr && sb->dim == rb - 1) {
      if (sa != nullptr) Refuse(EditCheck::kTpUnsupportedOperator, n, a, *sa, "both operands are sharded (columns of one, another dim of the other)");
      return SetLike(out, ro - 1, *sb);
    }
    // A batch dim: both alike (counted from the end), or b without batch dims.
    const Sharding& s = sa != nullptr ? *sa : *sb;
    const std::string& v = sa != nullptr ? a : b;
    const int64_t from_end = (sa != nullptr ? ra : rb) - s.dim;
    const Sharding* other = sa != nullptr ? sb : sa;
    const int64_t other_rank = sa != nullptr ? rb : ra;
    const bool alike = other != nullptr && other_rank - other->dim == from_end && other->blocks == s.blocks;
    const bool broadcast = other == nullptr && (sa != nullptr ? rb == 2 : ra == 2);
    if (!alike && !broadcast) {
      Refuse(EditCheck::kTpColwiseEscapes, n, v, s, "a batched matmul reads the other operand whole along the sharded batch dim");
    }
    return SetLike(out, ro - from_end, s);
  }

  // einsum over explicit subscripts ("nhwpqc->nchpwq", "bhnd,bhmd->bhnm"): the sharded dim's
  // letter names where it goes in the output. Every operand with that letter must be sharded alike
  // along it (or have it of size 1, broadcast); a letter summed over (absent from the output) is
  // refused -- unlike a matmul's contraction, no all-reduce is offered for it. Implicit output
  // subscripts and ellipses are refused by name.
  void Einsum(const Node& n) {
    const Argument* eq = Arg(n, "equation");
    const Argument* ops = Arg(n, "tensors");
    const std::string out = Outputs(n).empty() ? std::string() : Outputs(n)[0];
    std::string equation;
    for (char c : eq != nullptr && eq->kind == AK::kString ? eq->s : std::string()) {
      if (c != ' ') equation += c;
    }
    std::vector<std::string> operands = ops != nullptr ? ops->names : std::vector<std::string>{};
    // The first sharded operand decides the letter; the others are checked against it.
    size_t first = operands.size();
    for (size_t i = 0; i < operands.size() && first == operands.size(); ++i) {
      if (Find(operands[i]) != nullptr) first = i;
    }
    if (first == operands.size()) return WholeAtLocalLength(n);
    const std::string& v = operands[first];
    const Sharding s = *Find(v);
    const size_t arrow = equation.find("->");
    if (arrow == std::string::npos || equation.find('.') != std::string::npos) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, v, s,
             "an einsum without explicit output subscripts or with an ellipsis (`" + equation + "`)");
    }
    std::vector<std::string> subscripts;
    for (size_t at = 0; at <= arrow;) {
      const size_t comma = std::min(equation.find(',', at), arrow);
      subscripts.push_back(equation.substr(at, comma - at));
      at = comma + 1;
    }
    const std::string result = equation.substr(arrow + 2);
    if (subscripts.size() != operands.size() || static_cast<int64_t>(subscripts[first].size()) != Rank(v)) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, v, s, "its subscripts `" + equation + "` do not match its operands");
    }
    const char letter = subscripts[first][static_cast<size_t>(s.dim)];
    if (std::count(subscripts[first].begin(), subscripts[first].end(), letter) != 1) {
      Refuse(EditCheck::kTpReducesShardedDim, n, v, s, "it takes a diagonal along the sharded dim (`" + equation + "`)");
    }
    for (size_t i = 0; i < operands.size(); ++i) {
      if (i == first) continue;
      const size_t d = subscripts[i].find(letter);
      const Sharding* o = Find(operands[i]);
      if (d == std::string::npos) {
        if (o != nullptr) Refuse(EditCheck::kTpUnsupportedOperator, n, operands[i], *o, "two operands sharded along different letters");
        continue;
      }
      const bool alike = o != nullptr && o->dim == static_cast<int64_t>(d) && o->blocks == s.blocks;
      if (!alike && !StaticOne(operands[i], static_cast<int64_t>(d))) {
        Refuse(EditCheck::kTpColwiseEscapes, n, v, s,
               "it reads operand `" + operands[i] + "` whole along the sharded letter `" + std::string(1, letter) + "`");
      }
    }
    const size_t to = result.find(letter);
    if (to == std::string::npos) {
      Refuse(EditCheck::kTpReducesShardedDim, n, v, s,
             "it sums over the sharded letter `" + std::string(1, letter) + "` (`" + equation + "`)");
    }
    return SetLike(out, static_cast<int64_t>(to), s);
  }

  void Linear(const Node& n) {
    const std::string input = TensorArg(n, "input"), weight = TensorArg(n, "weight"), bias = TensorArg(n, "bias");
    const std::string out = Outputs(n).empty() ? std::string() : Outputs(n)[0];
    const Sharding* w = Find(weight);
    const Sharding* x = Find(input);
    const Sharding* b = bias.empty() ? nullptr : Find(bias);
    const int64_t in_rank = Rank(input);
    if (w != nullptr && w->dim == 0) {  // colwise: output features split
      if (x != nullptr) {
        Refuse(EditCheck::kTpColwiseEscapes, n, input, *x, "a colwise Linear reads an input that is tp-sharded already (make the layer before it "
                             "rowwise, or this one whole)");
      }
      if (!bias.empty() && (b == nullptr || b->dim != 0 || b->blocks != w->blocks)) {
        Refuse(EditCheck::kTpColwiseEscapes, n, weight, *w, "a colwise Linear's bias `" + bias + "` must be sharded as its weight's rows");
      }
      return SetLike(out, Rank(out) - 1, *w);
    }
    if (w != nullptr && w->dim == 1) {  // rowwise: partial sums, reduced over the tp group
      if (x == nullptr) {
        Refuse(EditCheck::kTpRowwiseInputNotSharded, n, weight, *w, "a rowwise Linear reads `" + input +
                                  "`, which is whole (no colwise layer before it shards its features)");
      }
      if (x->dim != in_rank - 1 || x->blocks != w->blocks) {
        Refuse(EditCheck::kTpRowwiseInputNotSharded, n, input, *x, "a rowwise Linear's weight is sharded in blocks " + List(w->blocks) +
                                 " along its input features, but its input is not sharded so along its last dim");
      }
      if (b != nullptr) Refuse(EditCheck::kTpRowwiseInputNotSharded, n, bias, *b, "a rowwise Linear's bias must be whole (it is added once, after the sum)");
      plan::ProgramEdit e;
      e.kind = Kind::kAllReduce;
      e.group = std::string(plan::kTpAxis);
      e.node = n.name;
      e.value = out;
      e.bias = bias;
      Edit(std::move(e), w->rule);
      return;
    }
    if (w != nullptr) Refuse(EditCheck::kTpUnsupportedOperator, n, weight, *w, "a Linear's weight is sharded along neither its rows nor its columns");
    if (b != nullptr) Refuse(EditCheck::kTpColwiseEscapes, n, bias, *b, "a Linear with a whole weight has a tp-sharded bias");
    if (x != nullptr && x->dim == in_rank - 1) {
      if (!Tp()) {
        Refuse(EditCheck::kTpReducesShardedDim, n, input, *x,
               "a Linear contracts the split dim (each rank would sum only its part of the features)");
      }
      Refuse(EditCheck::kTpColwiseEscapes, n, input, *x, "a Linear whose weight is whole reads tp-sharded features (a colwise output must reach a "
                           "rowwise layer, attention, a head reshape or elementwise ops)");
    }
    if (x != nullptr) SetLike(out, x->dim, *x);
  }

  // `single` splits one stream of the length `joint` lays out as several, along the same dim.
  static bool JointSplitAsOneStream(const Sharding& single, const Sharding& joint) {
    if (single.dim != joint.dim || single.blocks.size() != 1 || joint.blocks.size() < 2 || single.HasWhole() || joint.HasWhole()) {
      return false;
    }
    int64_t length = 0;
    for (int64_t block : joint.blocks) length += block;
    return length == single.blocks[0];
  }

  void Pointwise(const Node& n) {
    const std::vector<std::string> outs = Outputs(n);
    if (outs.empty()) return;
    const int64_t rank = Rank(outs[0]);
    // The operands that carry data into the output (type_as reads only the other's dtype).
    std::vector<std::string> operands;
    for (const NamedArgument& a : n.inputs) {
      if (n.target == "torch.ops.aten.type_as.default" && a.name == "other") continue;
      for (const std::string& v : a.arg.TensorNames()) operands.push_back(v);
    }
    std::optional<Sharding> result;
    std::string first;
    for (const std::string& v : operands) {
      const Sharding* s = Find(v);
      if (s == nullptr) continue;
      Sharding aligned = *s;
      aligned.dim = s->dim + rank - Rank(v);
      if (!result) {
        result = aligned;
        first = v;
      } else if (!result->SameLayout(aligned)) {
        // One split as a single stream of the length the other lays out as several (a RoPE table
        // over a joint sequence split whole, HiDream's): that split is the one to drop -- left
        // whole, the table is sliced as the streams lay it out (local_sizes.h) -- so it is named.
        const Sharding* one = JointSplitAsOneStream(*result, aligned) ? Find(first) : JointSplitAsOneStream(aligned, *result) ? s : nullptr;
        if (!Tp() && one != nullptr) {
          const std::string& single = one == s ? v : first;
          const std::string& joint = one == s ? first : v;
          Refuse(EditCheck::kTpColwiseEscapes, n, single, *one,
                 "it combines `" + first + "` and `" + v + "`, which are sharded differently: `" + single +
                     "` is split as one stream, while `" + joint + "` lays out its " + std::to_string(one->blocks[0]) +
                     " tokens as the streams " + List(one == s ? result->blocks : aligned.blocks) +
                     "; leave `" + single + "` whole (it is then sliced as those streams lay it out)");
        }
        Refuse(EditCheck::kTpColwiseEscapes, n, v, *s, "it combines `" + first + "` and `" + v + "`, which are sharded differently");
      }
    }
    if (!result) return;  // only the dtype source is sharded
    for (const std::string& v : operands) {
      if (Find(v) != nullptr) continue;
      const int64_t d = result->dim - (rank - Rank(v));
      if (d >= 0 && !StaticOne(v, d)) {
        if (Tp() && SliceWholeOperand(n, v, d, *result)) continue;
        Refuse(EditCheck::kTpColwiseEscapes, n, first, *Find(first),
               "it combines the sharded tensor with `" + v + "`, which is whole along the sharded dim", v, d);
      }
    }
    for (const std::string& o : outs) SetLike(o, result->dim, *result);
  }

  // A whole operand of an elementwise node whose dim, aligned with the tp-sharded one, holds all
  // of it (Mochi's RoPE tables are per head, (tokens, heads, 64), and meet queries whose heads the
  // colwise projections sharded): each rank reads its own block of that dim for this node, as a
  // scoped split over tp -- the same slice the colwise weight gave the other operand, since both
  // hold the dim whole in one block, split evenly in rank order. False where that does not hold
  // (several blocks, a size that is not the whole dim, or not a multiple of tp): refused as before.
  // `symbolic_ok`: a size the export computed (an attention mask's heads, `2 * s78 // s47` where the
  // guards make the batches equal) is taken at its hint; the attention itself then checks that the
  // mask's heads meet the queries' at run time.
  bool SliceWholeOperand(const Node& n, const std::string& v, int64_t d, const Sharding& shard, bool symbolic_ok = false) {
    if (shard.blocks.size() != 1 || shard.HasWhole() || shard.blocks[0] % tp_ != 0) return false;
    const TensorMeta* meta = p_.FindTensor(v);
    if (meta == nullptr || d >= static_cast<int64_t>(meta->sizes.size())) return false;
    const SymInt& size = meta->sizes[static_cast<size_t>(d)];
    if ((size.symbolic && !symbolic_ok) || size.value != shard.blocks[0]) return false;
    plan::ProgramEdit e;
    e.kind = Kind::kSplit;
    e.group = std::string(plan::kTpAxis);
    e.value = v;
    e.node = n.name;
    e.scope = ModuleOf(n);
    e.dim = d;
    e.rank = Rank(v);
    Edit(std::move(e), shard.rule);
    return true;
  }

  // view / reshape / unflatten / flatten: where the sharded dim lands, from the sizes before and
  // after (row-major: an input dim maps to the output dims whose prefix products bracket it).
  void Reshape(const Node& n, const std::string& value, const Sharding& s) {
    const std::string out = Outputs(n).empty() ? std::string() : Outputs(n)[0];
    const std::vector<int64_t> a = Sizes(value), b = Sizes(out);
    if (static_cast<int64_t>(a.size()) <= s.dim || b.empty()) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "the program records no sizes for it");
    int64_t before = 1;
    for (int64_t d = 0; d < s.dim; ++d) before *= a[static_cast<size_t>(d)];
    const int64_t through = before * a[static_cast<size_t>(s.dim)];
    int64_t prefix = 1;
    size_t j = 0;
    while (j < b.size() && prefix * b[j] <= before) prefix *= b[j++];
    if (j == b.size()) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "the sizes do not line up with the sharded dim");
    if (prefix != before) return MergeWithDimsBefore(n, value, s, a, b, j, prefix);
    const int64_t reach = prefix * b[j];
    std::vector<int64_t> blocks = s.blocks;
    if (reach < through && !Tp()) {
      if (std::optional<std::vector<int64_t>> row = UnmergedBlocks(s, b, j)) {
        // The dim a merge made (below) parted again into (rows, row length): the split is along the
        // row length, in the blocks of one row (Latte's (batch, tokens, ...) back from (batch x
        // tokens, ...); HiDream's joint sequence of four streams, back from its MoE's token list).
        LocalSizeOfSplitDim(n, a, j + 1, value, s, *row);
        return Set(out, static_cast<int64_t>(j + 1), *row, s.rule);
      }
    }
    if (reach < through) {  // split: the sharded dim becomes b[j] outer parts (the heads)
      const int64_t inner = through / reach;
      if (!Tp()) RecordRows(n, value, s, a.size(), b, j, inner);
      for (int64_t& block : blocks) {
        if (block % (Tp() ? inner * tp_ : inner) != 0) {
          Refuse(EditCheck::kTpReducesShardedDim, n, value, s,
                 "it splits the sharded dim into " + std::to_string(b[j]) + " x " + std::to_string(inner) +
                     ", and a block of " + std::to_string(block) + " does not hold a whole number of such parts" +
                     (Tp() ? " on each of tp=" + std::to_string(tp_) + " ranks" : std::string()));
        }
        block /= inner;
      }
    } else if (reach > through) {  // merge with the dims after it
      if (reach % through != 0) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "the sizes do not line up with the sharded dim");
      for (int64_t& block : blocks) block *= reach / through;
    }
    // The size argument that fills output dim j holds the full size: make it the local one.
    const bool unflatten = n.target == "torch.ops.aten.unflatten.int";
    const char* name = unflatten ? "sizes" : n.target == "torch.ops.aten.reshape.default" ? "shape" : "size";
    if (Tp() && n.target != "torch.ops.aten.flatten.using_ints") {
      const int64_t offset = unflatten ? Norm(IntArg(n, "dim").value_or(0), static_cast<int64_t>(a.size())) : 0;
      const std::vector<int64_t> sizes = IntsArg(n, name);
      const int64_t element = static_cast<int64_t>(j) - offset;
      if (element >= 0 && element < static_cast<int64_t>(sizes.size())) {
        const int64_t v = sizes[static_cast<size_t>(element)];
        if (v == std::numeric_limits<int64_t>::min()) {
          Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "it gives the size of the sharded dim symbolically; weft makes constants local");
        }
        if (v > 0) EditInt(n, name, element, v / tp_, s.rule);
      }
    }
    if (!Tp()) LocalSizeOfSplitDim(n, a, j, value, s, blocks);
    if (blocks == s.blocks) return SetLike(out, static_cast<int64_t>(j), s);  // the sharded dim kept as it is
    Set(out, static_cast<int64_t>(j), blocks, s.rule);
  }

  // A context-parallel split dim merged with the dims before it (Latte's (batch, tokens, frames, C)
  // viewed as (batch x tokens, frames, C) for its temporal attention): the merged dim holds, for
  // each index of the dims before, one run of the split dim -- each rank its part of every run,
  // which is the block layout a sharding already has, the blocks repeated once per outer index.
  // Attention and row-wise operators then run on each rank's rows as they are; a reshape that
  // parts the dim again (UnmergedBlocks) brings the split back. Under tensor parallelism, or where
  // the output dim does not start at an input dim, refused as before.
  void MergeWithDimsBefore(const Node& n, const std::string& value, const Sharding& s, const std::vector<int64_t>& a,
                           const std::vector<int64_t>& b, size_t j, int64_t prefix) {
    auto refuse = [&] { Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it merges the sharded dim with the dim before it"); };
    if (Tp() || s.HasWhole()) refuse();
    int64_t start = 1;  // the product of the input dims before the first one merged
    int64_t m = 0;
    while (m < s.dim && start < prefix) start *= a[static_cast<size_t>(m++)];
    if (start != prefix) refuse();
    int64_t outer = 1;
    for (int64_t d = m; d < s.dim; ++d) outer *= a[static_cast<size_t>(d)];
    const int64_t through = prefix * outer * a[static_cast<size_t>(s.dim)];
    const int64_t reach = prefix * b[j];
    if (outer <= 1 || reach < through || reach % through != 0) refuse();
    std::vector<int64_t> blocks;
    blocks.reserve(s.blocks.size() * static_cast<size_t>(outer));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t block : s.blocks) blocks.push_back(block * (reach / through));
    }
    LocalSizeOfSplitDim(n, a, j, value, s, blocks);
    const std::vector<std::string> outs = Outputs(n);
    if (!outs.empty()) Set(outs[0], static_cast<int64_t>(j), std::move(blocks), s.rule);
  }

  // A context-parallel split of one stream that a view parts into (rows, the row's dims) with the
  // split on the rows: each rank must hold whole rows, so the split is made in rows (the split
  // edit's `unit`, the product of the sizes this view gives the row's dims -- symbols the program
  // computes from its inputs, or constants). Recorded by the stream's length, for every split of it
  // (AddSplitDataflowEdits). Where the view infers the row's size (-1) and gives the rows a count,
  // a constant or a symbolic int (Wan Animate's face adapter: (frames, -1), the frame count read off
  // the face video, made local off the face features' shard), the split is made in that many equal
  // rows: a view
  // checking only that each rank's part divides into its count of rows could pass with rows of
  // the wrong length (21 frames of 220 tokens over 2 ranks: 2310 tokens are 11 rows of 210 and 10
  // of 231). Two views parting the stream into rows of different lengths are refused: no one
  // split gives both whole rows.
  void RecordRows(const Node& n, const std::string& value, const Sharding& s, size_t in_rank, const std::vector<int64_t>& b,
                  size_t j, int64_t inner) {
    if (s.blocks.size() != 1 || s.HasWhole()) return;
    const TensorMeta* m = p_.FindTensor(value);
    if (m == nullptr || static_cast<size_t>(s.dim) >= m->sizes.size() || !m->sizes[static_cast<size_t>(s.dim)].symbolic) return;
    const bool unflatten = n.target == "torch.ops.aten.unflatten.int";
    const char* name = unflatten ? "sizes" : n.target == "torch.ops.aten.reshape.default" ? "shape" : "size";
    const Argument* arg = Arg(n, name);
    if (arg == nullptr) return;
    const int64_t offset = unflatten ? Norm(IntArg(n, "dim").value_or(0), static_cast<int64_t>(in_rank)) : 0;
    // The size the view gives at `element` when it is a constant.
    auto constant_at = [&](int64_t element) -> std::optional<int64_t> {
      if (element < 0) return std::nullopt;
      if (arg->kind == AK::kInts && element < static_cast<int64_t>(arg->ints.size())) return arg->ints[static_cast<size_t>(element)];
      if (arg->kind == AK::kSymInts && element < static_cast<int64_t>(arg->sym_ints.size()) &&
          !arg->sym_ints[static_cast<size_t>(element)].is_name) {
        return arg->sym_ints[static_cast<size_t>(element)].value;
      }
      return std::nullopt;
    };
    RowsOfStream rows{{}, "", n.name};
    std::vector<std::string>& unit = rows.unit;
    int64_t product = 1;
    bool inferred = false;
    for (size_t k = j + 1; k < b.size() && product < inner; ++k) {
      product *= b[k];
      const int64_t element = static_cast<int64_t>(k) - offset;
      if (element < 0) return;
      if (constant_at(element) == -1) {
        inferred = true;
      } else if (arg->kind == AK::kInts && element < static_cast<int64_t>(arg->ints.size())) {
        if (arg->ints[static_cast<size_t>(element)] < 1) return;
        unit.push_back(std::to_string(arg->ints[static_cast<size_t>(element)]));
      } else if (arg->kind == AK::kSymInts && element < static_cast<int64_t>(arg->sym_ints.size())) {
        const SymIntRef& r = arg->sym_ints[static_cast<size_t>(element)];
        if (!r.is_name && r.value < 1) return;
        unit.push_back(r.is_name ? r.name : std::to_string(r.value));
      } else {
        return;
      }
    }
    if (product != inner) return;
    if (inferred) {  // the count of rows, a constant or a symbolic int; else the view checks the parts
      const int64_t element = static_cast<int64_t>(j) - offset;
      if (const std::optional<int64_t> count = constant_at(element)) {
        if (*count < 1) return;
        rows.count = std::to_string(*count);
      } else if (arg->kind == AK::kSymInts && element >= 0 && element < static_cast<int64_t>(arg->sym_ints.size())) {
        rows.count = arg->sym_ints[static_cast<size_t>(element)].name;
      } else {
        return;
      }
      unit.clear();
    }
    const std::string key = spelling_.Expression(m->sizes[static_cast<size_t>(s.dim)]);
    auto [it, added] = rows_.emplace(key, rows);
    if (!added && (it->second.unit != unit || it->second.count != rows.count)) {
      auto text = [](const RowsOfStream& r) {
        if (!r.count.empty()) return r.count + " equal rows";
        std::string t;
        for (const std::string& x : r.unit) t += (t.empty() ? "" : " x ") + x;
        return "rows of " + t;
      };
      Refuse(EditCheck::kCpReducesSplitDim, n, value, s,
             "it parts the split dim into " + text(rows) + ", and node `" + it->second.node +
                 "` parts the same stream into " + text(it->second) + ": no one split gives both whole rows");
    }
  }

  // When a reshape parts the sharded dim into (rows, a row's length) at output dims `j`, `j + 1`,
  // and the blocks are one row's blocks repeated for each index of dim `j`: that row's blocks.
  static std::optional<std::vector<int64_t>> UnmergedBlocks(const Sharding& s, const std::vector<int64_t>& b, size_t j) {
    if (s.blocks.size() < 2 || s.HasWhole() || j + 1 >= b.size() || b[j] < 2) return std::nullopt;
    const size_t outer = static_cast<size_t>(b[j]);
    if (s.blocks.size() % outer != 0) return std::nullopt;
    // The merge repeated the split dim's blocks once per outer index (MergeWithDimsBefore).
    const std::vector<int64_t> row(s.blocks.begin(), s.blocks.begin() + static_cast<std::ptrdiff_t>(s.blocks.size() / outer));
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      if (s.blocks[i] != row[i % row.size()]) return std::nullopt;
    }
    int64_t length = 0;
    for (int64_t block : row) length += block;
    if (length != b[j + 1]) return std::nullopt;
    return row;
  }

  // A view's size given to the split dim at output dim `j` must be the local one (flatten gives none).
  void LocalSizeOfSplitDim(const Node& n, const std::vector<int64_t>& a, size_t j, const std::string& value,
                           const Sharding& s, const std::vector<int64_t>& out_blocks) {
    if (n.target == "torch.ops.aten.flatten.using_ints") return;
    const bool unflatten = n.target == "torch.ops.aten.unflatten.int";
    const char* name = unflatten ? "sizes" : n.target == "torch.ops.aten.reshape.default" ? "shape" : "size";
    FullSizeOfSplitDim(n, name, unflatten, a.size(), j, value, s, out_blocks);
  }

  // The size a view gives the split dim (output dim `j`) must be the local one: -1, a size read
  // off a shard (sym_size of a split and sizes computed from it), or one local_sizes.h rewrites.
  // A constant or a size the whole tensors give (a forward argument, TransformerTemporal's
  // `num_frames`; Sana's latent height, read off the input image) is the full length, on which
  // every rank would fail. Where the view gives every other dim its size, it becomes -1: the view
  // takes the split dim's local length from the elements this rank holds (Sana's tokens viewed as
  // the latent grid, (H x W) -> (H, W), the split on the rows). That needs each rank's part to be
  // whole rows of the dims after it, which the view itself checks at run time (a part of 6 tokens
  // is no number of rows of 4: the CP degree must divide the rows). With another size inferred
  // too, it is refused.
  void FullSizeOfSplitDim(const Node& n, const char* name, bool unflatten, size_t in_rank, size_t j,
                          const std::string& value, const Sharding& s, const std::vector<int64_t>& out_blocks) {
    const Argument* arg = Arg(n, name);
    if (arg == nullptr) return;
    const int64_t offset = unflatten ? Norm(IntArg(n, "dim").value_or(0), static_cast<int64_t>(in_rank)) : 0;
    const int64_t element = static_cast<int64_t>(j) - offset;
    if (element < 0) return;
    for (const plan::ProgramEdit& e : in_.edits) {
      if (e.kind == Kind::kArgument && e.node == n.name && (e.element == element || e.element < 0)) return;
    }
    std::string full;
    std::string source;  // the symbol's length, where a whole input of the view's module has it
    int64_t source_dim = -1;
    std::optional<int64_t> constant;
    if (arg->kind == AK::kInts && element < static_cast<int64_t>(arg->ints.size())) {
      const int64_t v = arg->ints[static_cast<size_t>(element)];
      if (v != -1) constant = v;
    } else if ((arg->kind == AK::kSymInts || arg->kind == AK::kSymInt) && element < static_cast<int64_t>(arg->sym_ints.size())) {
      const SymIntRef& r = arg->sym_ints[static_cast<size_t>(element)];
      if (!r.is_name && r.value != -1) constant = r.value;
      if (r.is_name && user_syms_.count(r.name)) {
        full = "the forward argument `" + r.name + "`";
      } else if (r.is_name && local_syms_.count(r.name) == 0) {
        if (LocalSymbol(n, name, arg->kind == AK::kSymInt ? -1 : element, r.name, j, s)) return;
        // Neither read off a shard nor made local (local_sizes.h): a size the whole tensors give,
        // which would regroup rows across the split or fail at run time.
        full = "`" + r.name + "`, a size read off no shard";
        std::tie(source, source_dim) = WholeInputOfLength(n, r.name);
      }
    }
    if (constant) {
      // The full length of constant-length blocks: local off a shard that holds them.
      const int64_t sum = std::accumulate(out_blocks.begin(), out_blocks.end(), int64_t{0});
      if (*constant == sum && LocalConstant(n, name, arg->kind == AK::kSymInt || arg->kind == AK::kInt ? -1 : element, out_blocks, 1, s)) {
        return;
      }
      full = "the constant " + std::to_string(*constant);
    }
    if (full.empty()) return;
    if (element >= 0 && !InfersASize(*arg, element)) return Edit(ArgumentEdit(n, name, element, -1), s.rule);
    Refuse(EditCheck::kTpReducesShardedDim, n, value, s,
           "it gives the split dim " + full + ", the full length (each rank holds only its part)" +
               (source.empty() ? std::string()
                               : "; `" + source + "` has that length along dim " + std::to_string(source_dim) +
                                     ": split it there too, and the length is its shard's"),
           source, source_dim);
  }

  // A tensor the module of `n` reads from outside it whose length along some dim is the symbolic
  // int `symbol` (by spelling): where a view's row count comes from (Wan Animate's face features,
  // their frames), which a split of that dim makes local (LocalSymbol). {"", -1}: none.
  std::pair<std::string, int64_t> WholeInputOfLength(const Node& n, const std::string& symbol) {
    const auto value = p_.sym_int_values.find(symbol);
    const std::string module = ModuleOf(n);
    if (value == p_.sym_int_values.end() || !value->second.symbolic || module.empty()) return {"", -1};
    const std::string length = spelling_.Expression(value->second);
    std::set<std::string> inside;
    for (const Node& m : p_.nodes) {
      if (!NodeInModule(p_, m, module)) continue;
      for (const std::string& o : Outputs(m)) inside.insert(o);
    }
    for (const Node& m : p_.nodes) {
      if (!NodeInModule(p_, m, module)) continue;
      for (const NamedArgument& in : m.inputs) {
        for (const std::string& t : in.arg.TensorNames()) {
          const TensorMeta* meta = inside.count(t) ? nullptr : p_.FindTensor(t);
          if (meta == nullptr) continue;
          for (size_t d = 0; d < meta->sizes.size(); ++d) {
            if (meta->sizes[d].symbolic && spelling_.Expression(meta->sizes[d]) == length) return {t, static_cast<int64_t>(d)};
          }
        }
      }
    }
    return {"", -1};
  }

  // True when a view's sizes `arg` give -1 (a size inferred from the others) at an element other
  // than `element`.
  static bool InfersASize(const Argument& arg, int64_t element) {
    for (size_t i = 0; i < arg.ints.size(); ++i) {
      if (static_cast<int64_t>(i) != element && arg.ints[i] == -1) return true;
    }
    for (size_t i = 0; i < arg.sym_ints.size(); ++i) {
      if (static_cast<int64_t>(i) != element && !arg.sym_ints[i].is_name && arg.sym_ints[i].value == -1) return true;
    }
    return false;
  }

  void Slice(const Node& n, const std::string& value, const Sharding& s) {
    const std::string out = Outputs(n)[0];
    const int64_t rank = Rank(value);
    if (Norm(IntArg(n, "dim").value_or(0), rank) != s.dim) return SetLike(out, s.dim, s);
    const int64_t full = std::accumulate(s.blocks.begin(), s.blocks.end(), int64_t{0});
    const Argument* start_arg = Arg(n, "start");
    const Argument* end_arg = Arg(n, "end");
    const bool start_none = start_arg == nullptr || start_arg->kind == AK::kNone;
    const bool end_none = end_arg == nullptr || end_arg->kind == AK::kNone;
    // Split sequences have symbolic bounds, which local_sizes.h makes local: check them at their hints.
    const std::optional<int64_t> start = start_none ? std::optional<int64_t>(0) : Tp() ? IntArg(n, "start") : HintArg(n, "start");
    const std::optional<int64_t> end = end_none ? std::optional<int64_t>(full) : Tp() ? IntArg(n, "end") : HintArg(n, "end");
    if (IntArg(n, "step").value_or(1) != 1 || !start || !end) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "it slices the sharded dim with a step or symbolic bounds");
    }
    auto clip = [&](int64_t v) { return std::clamp(v < 0 ? v + full : v, int64_t{0}, full); };
    const int64_t lo = clip(*start), hi = clip(*end);
    const std::optional<std::vector<int64_t>> blocks = BlocksBetween(s.blocks, lo, hi);
    if (!blocks || blocks->empty()) {
      Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it slices [" + std::to_string(lo) + ", " + std::to_string(hi) +
                              ") of the sharded dim, which does not begin and end at the blocks' bounds");
    }
    if (Tp()) {
      if (lo != 0) EditInt(n, "start", -1, lo / tp_, s.rule);
      if (hi != full) EditInt(n, "end", -1, hi / tp_, s.rule);
    } else {
      LocalBound(n, value, "start", lo, s);
      LocalBound(n, value, "end", hi, s);
    }
    Set(out, s.dim, *blocks, s.rule);
  }

  // A constant bound of a slice along the split dim, at full offset `at` (a block boundary): 0 and
  // the end stay; any other is the length of the blocks before it (after it, negated, when it
  // counts from the end), made local.
  void LocalBound(const Node& n, const std::string& value, const char* name, int64_t at, const Sharding& s) {
    const std::optional<int64_t> raw = ConstantArg(n, name);
    const int64_t full = std::accumulate(s.blocks.begin(), s.blocks.end(), int64_t{0});
    if (!raw || at == 0 || at == full) return;
    const std::vector<int64_t> b = Boundaries(s.blocks);
    const size_t k = static_cast<size_t>(std::find(b.begin(), b.end(), at) - b.begin());
    const bool from_end = *raw < 0;
    const std::vector<int64_t> spanned = from_end ? std::vector<int64_t>(s.blocks.begin() + static_cast<std::ptrdiff_t>(k), s.blocks.end())
                                                  : std::vector<int64_t>(s.blocks.begin(), s.blocks.begin() + static_cast<std::ptrdiff_t>(k));
    if (LocalConstant(n, name, -1, spanned, from_end ? -1 : 1, s)) return;
    RefuseConstant(n, value, std::string("its ") + name + " is the constant " + std::to_string(*raw), spanned, s);
  }

  [[noreturn]] void RefuseConstant(const Node& n, const std::string& value, const std::string& what,
                                   const std::vector<int64_t>& spanned, const Sharding& s) {
    Refuse(EditCheck::kTpUnsupportedOperator, n, value, s,
           what + ", the full length of the split blocks " + List(spanned) +
               " (each rank holds only its part), and no shard before it holds exactly those blocks to take the local "
               "length from; export that length dynamic, or split after this node");
  }

  void Split(const Node& n, const std::string& value, const Sharding& s) {
    const std::vector<std::string> outs = Outputs(n);
    const int64_t rank = Rank(value);
    const int64_t d = Norm(IntArg(n, "dim").value_or(0), rank);
    if (d != s.dim) {
      for (const std::string& o : outs) SetLike(o, s.dim, s);
      return;
    }
    int64_t at = 0;
    std::vector<int64_t> lengths;
    std::vector<std::vector<int64_t>> groups;  // the blocks each output holds
    std::vector<bool> all_whole;  // outputs that hold whole streams only: whole from here
    for (const std::string& o : outs) {
      const std::vector<int64_t> sizes = Sizes(o);
      const int64_t length = s.dim < static_cast<int64_t>(sizes.size()) ? sizes[static_cast<size_t>(s.dim)] : 0;
      const std::optional<std::vector<int64_t>> blocks = BlocksBetween(s.blocks, at, at + length);
      if (!blocks || blocks->empty()) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it splits the sharded dim at " + std::to_string(at + length) + ", inside a block");
      }
      if (s.HasWhole()) {
        const std::vector<int64_t> b = Boundaries(s.blocks);
        const size_t first = static_cast<size_t>(std::find(b.begin(), b.end(), at) - b.begin());
        std::vector<std::optional<plan::WholePart>> whole(s.whole.begin() + static_cast<std::ptrdiff_t>(first),
                                                          s.whole.begin() + static_cast<std::ptrdiff_t>(first + blocks->size()));
        all_whole.push_back(std::all_of(whole.begin(), whole.end(), [](const auto& w) { return w.has_value(); }));
        if (!all_whole.back()) Set(o, s.dim, *blocks, s.rule, whole);
      } else {
        all_whole.push_back(false);
        Set(o, s.dim, *blocks, s.rule);
      }
      groups.push_back(*blocks);
      lengths.push_back(length);
      at += length;
    }
    if (!Tp()) {
      // A constant size is a full length the export fixed (CogVideoX's 226 text tokens): the
      // length of the blocks that output holds, made local.
      if (n.target == "torch.ops.aten.split_with_sizes.default") {
        const std::vector<int64_t> sizes = IntsArg(n, "split_sizes");
        for (size_t i = 0; i < sizes.size() && i < groups.size(); ++i) {
          if (sizes[i] == std::numeric_limits<int64_t>::min() || all_whole[i]) continue;  // whole: the same on every rank
          if (!LocalConstant(n, "split_sizes", static_cast<int64_t>(i), groups[i], 1, s)) {
            RefuseConstant(n, value, "it splits the split dim at the constant size " + std::to_string(sizes[i]), groups[i], s);
          }
        }
      } else if (s.HasWhole()) {
        Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it cuts a joint sequence with whole streams into parts of one size");
      } else if (n.target == "torch.ops.aten.split.Tensor" && ConstantArg(n, "split_size")) {
        // Each part but the last holds the same blocks, or the local parts would not line up.
        for (size_t i = 1; i + 1 < groups.size(); ++i) {
          if (groups[i] != groups[0]) {
            Refuse(EditCheck::kTpReducesShardedDim, n, value, s,
                   "it splits the split dim into parts of " + std::to_string(lengths[0]) + " made of different blocks (" +
                       List(groups[0]) + ", " + List(groups[i]) + ")");
          }
        }
        if (groups.size() > 1 && !LocalConstant(n, "split_size", -1, groups[0], 1, s)) {
          RefuseConstant(n, value, "it splits the split dim into parts of the constant size " + std::to_string(lengths[0]), groups[0], s);
        }
        return;
      }
    }
    if (n.target == "torch.ops.aten.split_with_sizes.default") {
      const std::vector<int64_t> sizes = Tp() ? IntsArg(n, "split_sizes") : std::vector<int64_t>{};
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] == std::numeric_limits<int64_t>::min()) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "it splits by symbolic sizes");
        EditInt(n, "split_sizes", static_cast<int64_t>(i), sizes[i] / tp_, s.rule);
      }
    } else if (n.target == "torch.ops.aten.split.Tensor") {
      const std::optional<int64_t> size = IntArg(n, "split_size");
      if (!size && Tp()) Refuse(EditCheck::kTpUnsupportedOperator, n, value, s, "it splits by a symbolic size");
      if (size) EditInt(n, "split_size", -1, *size / tp_, s.rule);
    } else if (std::adjacent_find(lengths.begin(), lengths.end(), std::not_equal_to<>()) != lengths.end()) {
      Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it chunks the sharded dim into unequal parts");
    }
  }

  void Concat(const Node& n) {
    const std::string out = Outputs(n)[0];
    const Argument* tensors = Arg(n, "tensors");
    if (tensors == nullptr) return;
    const bool stack = n.target == "torch.ops.aten.stack.default";
    const int64_t rank = Rank(out);
    const int64_t d = Norm(IntArg(n, "dim").value_or(0), rank);
    std::string sharded;
    for (const std::string& v : tensors->names) {
      if (sharded.empty() && Find(v) != nullptr) sharded = v;
    }
    const Sharding cut = *Find(sharded);
    // Joined along the split dim, a whole tensor whose length there is data-dependent is a stream
    // every rank holds whole (Mochi joins each sample's valid text tokens, picked by a nonzero, to
    // the rank's video tokens): no plan can split a length known only at run time. Context
    // parallelism only -- tp shards features, and a whole block there would be summed tp times. A
    // whole tensor of any other length is refused: the plan should split it with the others.
    const bool along = !stack && d == cut.dim;
    std::optional<Sharding> result;
    if (along) result = Sharding{d, {}, cut.rule, {}};
    std::vector<std::optional<plan::WholePart>> whole;
    std::string first;
    for (const std::string& v : tensors->names) {
      const Sharding* s = Find(v);
      if (s == nullptr) {
        if (!along || axis_ != Axis::kCp || Rank(v) != Rank(sharded) || !DataDependentLength(v, d)) {
          Refuse(EditCheck::kTpColwiseEscapes, n, sharded, cut, "it joins the sharded tensor with `" + v + "`, which is whole", v,
                 cut.dim + Rank(v) - Rank(sharded));
        }
        const std::vector<int64_t> sizes = Sizes(v);
        result->blocks.push_back(sizes[static_cast<size_t>(d)]);
        whole.push_back(plan::WholePart{v, d, ""});
        continue;
      }
      if (along) {
        if (s->dim != d) Refuse(EditCheck::kTpColwiseEscapes, n, v, *s, "it joins `" + sharded + "` and `" + v + "`, which are sharded differently");
        result->blocks.insert(result->blocks.end(), s->blocks.begin(), s->blocks.end());
        for (size_t i = 0; i < s->blocks.size(); ++i) whole.push_back(s->IsWhole(i) ? s->whole[i] : std::nullopt);
        continue;
      }
      if (!result) {
        result = *s;
        first = v;
      } else if (!result->SameLayout(*s)) {
        Refuse(EditCheck::kTpColwiseEscapes, n, v, *s, "it joins `" + first + "` and `" + v + "`, which are sharded differently");
      }
    }
    if (along) {
      result->whole = std::move(whole);
      return Set(out, d, result->blocks, result->rule, result->whole);
    }
    SetLike(out, stack && d <= result->dim ? result->dim + 1 : result->dim, *result);
  }

  // Attention runs apart along `dim` of its (B, H, S, D): the heads under tensor parallelism, the
  // batch for guidance branches. Q, K and V must be sharded along it alike; a mask that varies
  // along it must be sharded with them. Refusals say `whole` of a Q/K/V left whole, `elsewhere` of
  // one sharded along another dim or layout, `mask_whole` of a mask that varies along `dim` unsharded.
  void AttentionApart(const Node& n, int64_t dim, const std::string& whole, EditCheck elsewhere_check,
                      const std::string& elsewhere, const std::string& mask_whole) {
    const std::string q = TensorArg(n, "query"), k = TensorArg(n, "key"), v = TensorArg(n, "value");
    const std::string mask = TensorArg(n, "attn_mask");
    const Sharding* sq = Find(q);
    const Sharding* sk = Find(k);
    const Sharding* sv = Find(v);
    const Sharding* any = sq ? sq : sk ? sk : sv;
    const std::string any_name = sq ? q : sk ? k : v;
    const Sharding* sm = mask.empty() ? nullptr : Find(mask);
    if (any == nullptr) {
      Refuse(Tp() ? EditCheck::kTpAttentionHeadsMismatch : EditCheck::kTpColwiseEscapes, n, mask, *sm,
             Tp() ? "its mask is tp-sharded" : "its mask is split over the branches but its queries, keys and values are whole");
    }
    for (const auto& [role, name, s] : {std::tuple{"query", q, sq}, std::tuple{"key", k, sk}, std::tuple{"value", v, sv}}) {
      if (s == nullptr) {
        Refuse(Tp() ? EditCheck::kTpAttentionHeadsMismatch : EditCheck::kTpColwiseEscapes, n, any_name, *any,
               std::string("its ") + role + " `" + name + "` " + whole);
      }
      if (s->dim == dim && GroupedQueryHeads(n, *sq, *s)) continue;
      if (s->dim != dim || !s->SameLayout(*any)) Refuse(elsewhere_check, n, name, *s, elsewhere);
    }
    if (!mask.empty()) {
      if (Tp() && sm != nullptr) Refuse(EditCheck::kTpAttentionHeadsMismatch, n, mask, *sm, "its mask is tp-sharded");
      const int64_t d = dim - (4 - Rank(mask));  // the mask's dim that broadcasts along `dim`
      // A whole mask laid out per head (diffusers' prepare_attention_mask repeats the text mask per
      // head, Sana's cross-attention): each rank reads its heads' block of it, as its colwise
      // projections hold those heads.
      if (Tp() && sm == nullptr && d >= 0 && !StaticOne(mask, d) && SliceWholeOperand(n, mask, d, *sq, /*symbolic_ok=*/true)) {
        return SetLike(Outputs(n)[0], dim, *any);
      }
      if (sm == nullptr && d >= 0 && !StaticOne(mask, d)) {
        Refuse(Tp() ? EditCheck::kTpAttentionHeadsMismatch : EditCheck::kTpColwiseEscapes, n, q, *sq,
               "its mask `" + mask + "` " + mask_whole);
      }
    }
    SetLike(Outputs(n)[0], dim, *any);
  }

  // Grouped-query attention (SDPA's enable_gqa) over tp: query head h reads key/value head
  // h / (heads / kv_heads), so with the query heads and the key/value heads each cut into the same
  // number of equal parts in order, every rank's query heads read exactly its key/value heads.
  bool GroupedQueryHeads(const Node& n, const Sharding& q, const Sharding& kv) const {
    const Argument* gqa = Arg(n, "enable_gqa");
    if (!Tp() || gqa == nullptr || gqa->kind != AK::kBool || !gqa->b) return false;
    if (q.blocks.size() != 1 || kv.blocks.size() != 1 || q.HasWhole() || kv.HasWhole()) return false;
    const int64_t heads = q.blocks[0], kv_heads = kv.blocks[0];
    return kv_heads > 0 && heads % kv_heads == 0 && kv_heads % tp_ == 0;
  }

  void Attention(const Node& n) {
    AttentionApart(n, 1, "is whole while another of Q/K/V is sharded (shard its projection colwise too)",
                   EditCheck::kTpAttentionHeadsMismatch,
                   "attention runs heads apart only: Q, K and V must be sharded alike along the heads (dim 1)",
                   "varies along the heads");
  }

  // Context parallelism: queries keep their split (B, H, S, D: dim 2); split keys and values need
  // the plan's context-parallel attention, which the kernels give every query all of.
  void SplitAttention(const Node& n) {
    const std::string q = TensorArg(n, "query"), k = TensorArg(n, "key"), v = TensorArg(n, "value");
    const Sharding* sq = Find(q);
    const Sharding* sk = Find(k);
    const Sharding* sv = Find(v);
    // A (B, H, queries, keys) mask split along its queries: ring and Ulysses move keys, and
    // take a mask over the keys only.
    const std::string mask = TensorArg(n, "attn_mask");
    if (const Sharding* sm = mask.empty() ? nullptr : Find(mask); sm != nullptr && Rank(mask) == 4 && sm->dim == 2) {
      Refuse(EditCheck::kMaskNotLaidOutWithKeys, n, mask, *sm,
             "its mask is split along the queries; context-parallel attention takes a mask over the keys only");
    }
    // A mask split along the keys while the keys are whole would mask each rank's keys with a part
    // of the mask (NucleusMoE's text mask split alone fails at run time on mismatched sizes).
    if (const Sharding* sm = mask.empty() ? nullptr : Find(mask);
        sm != nullptr && sk == nullptr && Rank(mask) >= 2 && sm->dim == Rank(mask) - 1) {
      Refuse(EditCheck::kMaskNotLaidOutWithKeys, n, mask, *sm,
             "its mask is split along the keys, but its keys `" + k + "` are whole (split them alike, or leave the mask whole)");
    }
    // A mask split along the keys in another layout than the keys': a joint sequence's mask split
    // as one stream gives each rank a contiguous block of it, while its keys are its piece of each
    // stream (HunyuanVideo's cat(video, text) mask) -- a silent wrong answer wherever a masked
    // position lands on another rank's block (ring=3 over padded text).
    if (const Sharding* sm = mask.empty() ? nullptr : Find(mask);
        sm != nullptr && sk != nullptr && sk->dim == 2 && Rank(mask) >= 2 && sm->dim == Rank(mask) - 1) {
      Sharding as_keys = *sm;
      as_keys.dim = sk->dim;
      if (!as_keys.SameLayout(*sk)) {
        Refuse(EditCheck::kMaskNotLaidOutWithKeys, n, mask, *sm,
               JointSplitAsOneStream(as_keys, *sk)
                   ? "its mask is split along the keys as one stream of " + std::to_string(sm->blocks[0]) +
                         ", while its keys `" + k + "` lay them out as the streams " + List(sk->blocks) +
                         "; leave the mask whole (it is then sliced as those streams lay it out)"
                   : "its mask is split along the keys in blocks " + List(sm->blocks) + ", but its keys `" + k +
                         "` in blocks " + List(sk->blocks) + " (split the mask as the keys are, or leave it whole)");
      }
    }
    if (sq != nullptr && sq->dim == 0) return AttentionOnSplitBatch(n, mask);
    for (const auto& [name, s] : {std::pair{q, sq}, std::pair{k, sk}, std::pair{v, sv}}) {
      if (s != nullptr && s->dim != 2) {
        Refuse(EditCheck::kTpReducesShardedDim, n, name, *s, "attention mixes along the split dim (not its sequence)");
      }
    }
    // Keys and values travel together (ring passes them, Ulysses exchanges them): one split and
    // the other whole would pair each rank's keys with every value.
    if ((sk == nullptr) != (sv == nullptr) || (sk != nullptr && !sk->SameLayout(*sv))) {
      const bool k_split = sk != nullptr;
      Refuse(EditCheck::kTpColwiseEscapes, n, k_split ? k : v, k_split ? *sk : *sv,
             sk != nullptr && sv != nullptr
                 ? "its keys and values are split in different blocks"
                 : std::string("its ") + (k_split ? "keys are split while its values `" + v + "` are whole"
                                                  : "values are split while its keys `" + k + "` are whole"),
             sk != nullptr && sv != nullptr ? "" : (k_split ? v : k), 2);
    }
    // The context-parallel kernels take no causal mask and no dropout: refused here, by name,
    // rather than on every rank once the run reaches the node.
    const Argument* causal = Arg(n, "is_causal");
    const bool is_causal = causal != nullptr && causal->kind == AK::kBool && causal->b;
    if (sk != nullptr && attention_.count(n.name) != 0) {
      // (Grouped-query attention is taken: the runtime repeats the key/value heads first.)
      if (is_causal) {
        Refuse(EditCheck::kCpUnsupportedOperator, n, k, *sk, "the context-parallel attention kernels take no is_causal");
      }
      const Argument* dropout = Arg(n, "dropout_p");
      if (dropout != nullptr && dropout->kind == AK::kFloat && dropout->f != 0.0) {
        Refuse(EditCheck::kCpUnsupportedOperator, n, k, *sk, "the context-parallel attention kernels take no dropout");
      }
    }
    if ((sk != nullptr || sv != nullptr) && attention_.count(n.name) == 0) {
      const std::string& name = sk != nullptr ? k : v;
      Refuse(EditCheck::kTpAttentionHeadsMismatch, n, name, sk != nullptr ? *sk : *sv,
             "the plan leaves this attention local, so each query would see only this rank's keys; make it "
             "context_parallel");
    }
    // A causal attention pairs query i with keys 0..i by position within the tensors it is given:
    // run on this rank's queries alone, its first query would see key 0 only -- a silent wrong
    // answer, whatever the keys hold.
    if (sq != nullptr && is_causal) {
      Refuse(EditCheck::kCpUnsupportedOperator, n, q, *sq,
             "it is causal (is_causal: query i sees keys 0..i by position), and with its queries split each "
             "rank's first query would see key 0 only; leave its queries whole");
    }
    if ((sq != nullptr && sq->HasWhole()) || (sk != nullptr && sk->HasWhole())) WholeStreams(n, mask, sq, sk);
    // Whole keys and values: a local attention of this rank's queries is exact (cross-attention on
    // whole text).
    if (sq != nullptr) SetLike(Outputs(n)[0], 2, *sq);
  }

  // Attention whose batch rows hold the split (a split dim merged into the batch, MergeWithDimsBefore:
  // Latte's temporal attention over the frames of each of this rank's tokens): every row attends
  // only its own keys, so with Q, K, V (and a mask that varies along the batch) split alike a local
  // attention on this rank's rows is exact. Run context-parallel it would exchange rows that attend
  // apart: refused, as is any operand whole or split otherwise.
  void AttentionOnSplitBatch(const Node& n, const std::string& mask) {
    const std::string q = TensorArg(n, "query"), k = TensorArg(n, "key"), v = TensorArg(n, "value");
    const Sharding& sq = *Find(q);
    if (attention_.count(n.name) != 0) {
      // Located at the attention's rule: it is the rule to change (weft suggest drops it).
      const std::string module = ModuleOf(n);
      throw PlanEditError(EditCheck::kCpAttentionOverWholeKeys, attention_origin_[n.name],
                          where_ + ": the plan runs attention node `" + n.name + "` (module `" + module +
                              "`) context-parallel, but its split runs along the batch: `" + q + "` is split along dim 0 in blocks " +
                              List(sq.blocks) + From(sq) + ", each row attending its own keys; leave this attention local",
                          n.name, module);
    }
    std::vector<std::string> operands = {k, v};
    if (!mask.empty() && !StaticOne(mask, 0)) operands.push_back(mask);
    for (const std::string& o : operands) {
      const Sharding* so = Find(o);
      if (so == nullptr || so->dim != 0 || !so->SameLayout(sq)) {
        Refuse(EditCheck::kTpColwiseEscapes, n, q, sq,
               "its queries are split along the batch, and `" + o + "` is " +
                   (so == nullptr ? std::string("whole there") : "split otherwise"),
               so == nullptr ? o : "", 0);
      }
    }
    SetLike(Outputs(n)[0], 0, sq);
  }

  // Attention over a joint sequence with streams every rank holds whole: the runtime needs to find
  // them around the split rows (before or after, with a length it can read), and attends whole
  // keys once (runtime/attention AttentionWithWholeRows). Keys left whole entirely need nothing:
  // a local attention of each rank's queries is exact.
  void WholeStreams(const Node& n, const std::string& mask, const Sharding* sq, const Sharding* sk) {
    if (sk == nullptr) return;
    const std::string q = TensorArg(n, "query"), k = TensorArg(n, "key");
    if (!mask.empty()) {
      const bool q_whole = sq != nullptr && sq->HasWhole();
      Refuse(EditCheck::kMaskNotLaidOutWithKeys, n, q_whole ? q : k, q_whole ? *sq : *sk,
             "it has a mask, and attention over a joint sequence with streams every rank holds whole takes none yet");
    }
    std::vector<plan::WholePart> parts;
    for (const auto& [role, name, s] : {std::tuple{"q", q, sq}, std::tuple{"kv", k, sk}}) {
      if (s == nullptr || !s->HasWhole()) continue;
      // Whole blocks before the split ones and after them; none in between.
      bool split_seen = false, after = false;
      for (size_t i = 0; i < s->blocks.size(); ++i) {
        if (!s->IsWhole(i)) {
          if (after) {
            Refuse(EditCheck::kTpUnsupportedOperator, n, name, *s,
                   "its streams every rank holds whole lie between split ones; weft takes them before or after the split rows");
          }
          split_seen = true;
          continue;
        }
        after = split_seen;
        parts.push_back(Located(n, name, *s, i, std::string(role) + (after ? "_after" : "_before")));
      }
    }
    whole_parts_[n.name] = std::move(parts);
  }
  plan::WholePart Located(const Node& n, const std::string& name, const Sharding& s, size_t i, std::string at) const {
    const plan::WholePart& w = *s.whole[i];
    if (w.value.empty()) {
      Refuse(EditCheck::kTpUnsupportedOperator, n, name, s,
             "the length of its whole stream " + std::to_string(i) + " is read off no tensor (it was padded on the way)");
    }
    return plan::WholePart{w.value, w.dim, std::move(at)};
  }

  // Guidance branches: attention runs each batch row apart, so Q, K and V (B, H, S, D) must all
  // carry this rank's branches (dim 0), and so must a mask that varies along the batch.
  void BranchAttention(const Node& n) {
    AttentionApart(n, 0, "holds every branch while another of Q/K/V holds this rank's", EditCheck::kTpReducesShardedDim,
                   "attention mixes along the split dim (not its batch)",
                   "holds every branch (it varies along the batch) while the queries hold this rank's; split the "
                   "mask's source with the branches");
  }

  void Norm(const Node& n, const std::string& value, const Sharding& s) {
    const std::string input = TensorArg(n, "input");
    const Sharding* x = Find(input);
    const std::string weight = TensorArg(n, "weight");
    const Sharding* w = Find(weight);
    const std::vector<int64_t> shape = IntsArg(n, "normalized_shape");
    const int64_t rank = Rank(input);
    const int64_t first = rank - static_cast<int64_t>(shape.size());
    const bool rms = n.target == "torch.ops.aten.rms_norm.default";
    if (x == nullptr) Refuse(EditCheck::kTpColwiseEscapes, n, value, s, "a norm's weight is tp-sharded but its input is whole");
    if (x->dim < first) {
      if (w != nullptr) Refuse(EditCheck::kTpColwiseEscapes, n, weight, *w, "a norm over whole features has a tp-sharded weight");
      if (!TensorArg(n, "bias").empty() && Find(TensorArg(n, "bias")) != nullptr) {
        Refuse(EditCheck::kTpColwiseEscapes, n, TensorArg(n, "bias"), *Find(TensorArg(n, "bias")), "a norm over whole features has a tp-sharded bias");
      }
      for (const std::string& o : Outputs(n)) {
        if (Rank(o) == rank) SetLike(o, x->dim, *x);
      }
      return;
    }
    if (!rms || !Tp()) Refuse(EditCheck::kTpReducesShardedDim, n, input, *x, "it normalizes over the sharded dim (only RMS norms take their statistics over the tp group)");
    if (!weight.empty() && (w == nullptr || w->dim != x->dim - first || w->blocks != x->blocks)) {
      Refuse(EditCheck::kTpReducesShardedDim, n, input, *x, "an RMS norm over the sharded width needs its weight `" + weight +
                               "` sharded alike (shard the norm colwise with the layer before it)");
    }
    int64_t width = 1;
    for (int64_t v : shape) width *= v;
    plan::ProgramEdit e;
    e.kind = Kind::kNormStats;
    e.node = n.name;
    e.value = Outputs(n)[0];
    e.new_value = width;
    Edit(std::move(e), w != nullptr ? w->rule : x->rule);
    SetLike(Outputs(n)[0], x->dim, *x);
  }

  void Reduce(const Node& n, const std::string& value, const Sharding& s) {
    const int64_t rank = Rank(value);
    std::vector<int64_t> dims = IntsArg(n, "dim");
    const Argument* dim = Arg(n, "dim");
    if (dim == nullptr || dim->kind == AK::kNone || dims.empty()) {
      Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it reduces over every dim, the sharded one too");
    }
    int64_t removed = 0;
    const bool keep = [&] {
      const Argument* k = Arg(n, "keepdim");
      return k != nullptr && k->kind == AK::kBool && k->b;
    }();
    for (int64_t d : dims) {
      d = Norm(d, rank);
      if (d == s.dim && axis_ == Axis::kCp && n.target == "torch.ops.aten.sum.dim_IntList") {
        // SanaVideo's linear attention normalizes by its keys' sum.
        return SumOverCpGroup(n, Outputs(n).empty() ? std::string() : Outputs(n)[0], s.rule);
      }
      if (d == s.dim && Tp() && OneOf(n.target, {"sum.dim_IntList", "mean.dim"})) {
        // An RMS norm over all heads computed by hand (diffusers' RMSNorm: the mean of squares over
        // the projection's width, which colwise Q/K shard): each rank sums or averages its part, the
        // parts are summed over the tp group, a mean divided by tp (the shards are even), and the
        // result is whole.
        return SumOverTpGroup(n, s, n.target == "torch.ops.aten.mean.dim");
      }
      if (d == s.dim) Refuse(EditCheck::kTpReducesShardedDim, n, value, s, "it reduces over the sharded dim");
      if (d < s.dim) ++removed;
    }
    for (const std::string& o : Outputs(n)) SetLike(o, keep ? s.dim : s.dim - removed, s);
  }

  struct Scoped {
    std::string value, scope, node;  // node: "" = every read inside scope
    Sharding sharding;
  };

  const Axis axis_;
  const plan::ExecutionPlan& plan_;
  const Program& p_;
  const plan::ProgramEdits& in_;
  plan::ProgramEdits* out_;
  const int64_t tp_;
  const std::string where_;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, Sharding> sharded_;
  std::unordered_map<std::string, uint8_t>* record_ = nullptr;
  const Node* current_ = nullptr;  // the node being visited
  // A joint sequence with whole streams that node reads (Set refuses to drop them).
  std::optional<std::pair<std::string, Sharding>> whole_in_;
  // Attention nodes over joint sequences with whole streams: the streams (the edits' whole_parts).
  std::map<std::string, std::vector<plan::WholePart>> whole_parts_;
  // Context parallelism (CollectSplits).
  std::vector<Scoped> scoped_;                        // splits of a module argument
  std::map<std::string, Sharding> after_;             // splits right after a value's producer
  std::map<std::string, std::pair<size_t, int64_t>> gathers_;  // value -> its gather's rule, dim
  std::set<std::string> attention_;                   // nodes run context-parallel
  std::map<std::string, plan::Origin> attention_origin_;  // ... and the attention rule of each
  // sym_size of a split dim -> the split value and its sharding
  std::unordered_map<std::string, std::pair<std::string, Sharding>> local_lengths_;
  std::unordered_set<std::string> local_syms_;  // sizes read off shards, and computed from them
  std::unordered_set<std::string> user_syms_;   // forward arguments that are ints (full sizes)
  std::map<std::string, std::vector<std::pair<int64_t, size_t>>> factory_dims_;  // node -> (dim, rule) made local
  std::map<std::string, size_t> local_repeats_;  // repeat_interleave node whose count local_sizes.h made local -> rule
  // The first shard made of each list of constant-length blocks, and its dim (LocalConstant).
  std::map<std::vector<int64_t>, std::pair<std::string, int64_t>> constant_blocks_;
  // The same for one split stream of a symbolic length, by its spelling (LocalSymbol).
  std::map<std::string, std::pair<std::string, int64_t>> symbolic_splits_;
  SizeSpelling spelling_;
  std::map<std::string, RowsOfStream> rows_;  // RecordRows
  int64_t widest_halo_ = 0;
};

}  // namespace

void AddTensorParallelEdits(const plan::ExecutionPlan& plan, const Program& program, plan::ProgramEdits& edits) {
  ShardFlow(ShardFlow::Axis::kTp, plan, program, edits, &edits).Run();
}

void CheckSplitDataflow(const plan::ExecutionPlan& plan, const Program& program, const plan::ProgramEdits& edits) {
  ShardFlow(ShardFlow::Axis::kCp, plan, program, edits, nullptr).Run();
  ShardFlow(ShardFlow::Axis::kCfg, plan, program, edits, nullptr).Run();
}

void AddSplitDataflowEdits(const plan::ExecutionPlan& plan, const Program& program, plan::ProgramEdits& edits) {
  // The walks read `edits` while they decide; what they add is appended once both are done.
  plan::ProgramEdits added;
  ShardFlow cp(ShardFlow::Axis::kCp, plan, program, edits, &added);
  cp.Run();
  ShardFlow(ShardFlow::Axis::kCfg, plan, program, edits, &added).Run();
  for (plan::ProgramEdit& e : edits.edits) {
    if (e.kind != Kind::kAttention) continue;
    if (auto it = cp.WholeParts().find(e.node); it != cp.WholeParts().end()) e.whole_parts = it->second;
  }
  for (plan::ProgramEdit& e : added.edits) edits.edits.push_back(std::move(e));
  // Every split of a stream some view parts into rows is made in those rows, alike on every rank
  // (the tokens, and the whole tables sliced to meet them).
  if (cp.Rows().empty()) return;
  for (plan::ProgramEdit& e : edits.edits) {
    if (e.kind != Kind::kSplit || e.group != plan::kCpGroup || !e.parts.empty()) continue;
    const TensorMeta* m = program.FindTensor(e.value);
    if (m == nullptr || e.dim < 0 || static_cast<size_t>(e.dim) >= m->sizes.size()) continue;
    auto it = cp.Rows().find(cp.Spelling().Expression(m->sizes[static_cast<size_t>(e.dim)]));
    if (it == cp.Rows().end()) continue;
    e.unit = it->second.unit;
    e.rows = it->second.count;
    e.min_rows = std::max<int64_t>(1, cp.WidestHalo());
  }
}

std::unordered_map<std::string, uint8_t> ShardedNodes(const plan::ExecutionPlan& plan, const Program& program,
                                                     const plan::ProgramEdits& edits) {
  std::unordered_map<std::string, uint8_t> record;
  for (ShardFlow::Axis axis : {ShardFlow::Axis::kTp, ShardFlow::Axis::kCp, ShardFlow::Axis::kCfg}) {
    ShardFlow walk(axis, plan, program, edits, nullptr);
    walk.RecordInto(&record);
    walk.Run();
  }
  return record;
}

}  // namespace weft::program

// The binder: resolves a PlanAst against a model graph, a mesh and a workload, and runs the
// checks of design.md 5.2. Messages follow the house style (style.md 4.4): lower case, code in
// backticks, every number involved.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/bind/bind.h"
#include "compiler/bind/glob.h"
#include "compiler/plan/mesh_spec.h"
#include "compiler/source/checked_math.h"

namespace weft::bind {
namespace {

using source::SourceRange;

// ---- Diagnostics -----------------------------------------------------------------------------
WEFT_DIAGNOSTIC(ModelClassMismatch, Error,
                "plan `{0}` is written for `{1}`, but graph `{2}` is a `{3}`", std::string, std::string,
                std::string, std::string);
WEFT_DIAGNOSTIC(MeshDegreeInvalid, Error, "mesh axis `{0}` has size {1}; sizes are at least 1", std::string,
                int64_t);
WEFT_DIAGNOSTIC(MeshWorldMismatch, Error, "mesh {0} needs {1} ranks; world size is {2}", std::string, int64_t,
                int64_t);
WEFT_DIAGNOSTIC(PatternMatchesNothing, Error, "pattern `{0}` matches no module of `{1}`{2}", std::string,
                std::string, std::string);
WEFT_DIAGNOSTIC(ModuleListEntries, Note, "module list `{0}` has {1} entries (0..{2})", std::string, int64_t,
                int64_t);
WEFT_DIAGNOSTIC(ModuleNotCalled, Error, "module `{0}` is never called at workload `{1}`; nothing to {2}",
                std::string, std::string, std::string);
WEFT_DIAGNOSTIC(UnknownArgument, Error, "`{0}` has no forward argument `{1}`{2}", std::string, std::string,
                std::string);
WEFT_DIAGNOSTIC(ArgumentNotPassed, Error,
                "argument `{0}` of `{1}` is {2} at workload `{3}`; mark the item `optional` to skip it then",
                std::string, std::string, std::string, std::string);
WEFT_DIAGNOSTIC(NotATuple, Error, "argument `{0}` of `{1}` is not a tuple or list at workload `{2}`; found {3}",
                std::string, std::string, std::string, std::string);
WEFT_DIAGNOSTIC(ElementOutOfRange, Error, "argument `{0}` of `{1}` has {2} elements; element {3} does not exist",
                std::string, std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(OutputOutOfRange, Error, "`{0}` returns {1} output(s) at workload `{2}`; output {3} does not exist",
                std::string, int64_t, std::string, int64_t);
WEFT_DIAGNOSTIC(RankMismatch, Error,
                "{0} of `{1}` has rank {2} at workload `{3}` (shape {4}), the rule declares rank {5}; "
                "mark it `optional` to skip the split when the rank differs",
                std::string, std::string, int64_t, std::string, std::string, int64_t);
WEFT_DIAGNOSTIC(DimOutOfRange, Error, "dim {0} is out of range for {1} of `{2}` with shape {3} (rank {4})",
                int64_t, std::string, std::string, std::string, int64_t);
WEFT_DIAGNOSTIC(SplitNotDivisible, Error,
                "{0} of `{1}` has length {2} along dim {3}, not divisible by the CP degree {4} ({5}); "
                "{2} = {4} x {6} + {7}; use --ulysses-anything or --ring-anything for uneven splits",
                std::string, std::string, int64_t, int64_t, int64_t, std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(DuplicateSplit, Error, "{0} of `{1}` is split twice", std::string, std::string);
WEFT_DIAGNOSTIC(PreviousRule, Note, "previous rule for `{0}` here", std::string);
WEFT_DIAGNOSTIC(GatherWithoutSplit, Error,
                "`{0}` gathers output {1}, but no split runs before it; gathering an unsplit tensor "
                "would repeat it once per CP rank ({2} on this mesh)",
                std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(GatherOnOtherDim, Error,
                "`{0}` gathers output {1} along dim {2}, where it has length {3} at workload `{4}`; no split of "
                "the plan cuts that length ({5}): a gather joins the pieces of a split, along the dim it cut",
                std::string, int64_t, int64_t, int64_t, std::string, std::string);
WEFT_DIAGNOSTIC(AttentionRuleMatchesNoSite, Error,
                "pattern `{0}` matches {1} module(s), none of which is or contains an attention site", std::string,
                int64_t);
WEFT_DIAGNOSTIC(HeadsNotDivisibleByUlysses, Error,
                "attention `{0}` has {1} heads{2}, not divisible by ulysses {3}; use --ulysses-anything to "
                "pad heads, or a ring axis",
                std::string, int64_t, std::string, int64_t);
WEFT_DIAGNOSTIC(HeadsNotDivisibleByTp, Error, "attention `{0}` has {1} heads, not divisible by tp {2}",
                std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(HeadPaddingTooLarge, Error,
                "attention `{0}`: {1} heads over ulysses {2} need {3} padding heads, but each rank holds only {4} "
                "head(s); the padding must be smaller than that",
                std::string, int64_t, int64_t, int64_t, int64_t);
WEFT_DIAGNOSTIC(RingNeedsLseKernel, Error,
                "attention `{0}` runs ring attention (ring {1}) but kernel `{2}` returns no log-sum-exp to merge "
                "the K/V blocks with; use --attention-kernel fused or math, or a mesh without a ring axis",
                std::string, int64_t, std::string);
WEFT_DIAGNOSTIC(ShardedKvRunsLocal, Error,
                "attention `{0}`{1} is declared local, but its keys/values have length {2}, a sequence this plan "
                "splits; local attention would attend to one shard only",
                std::string, std::string, int64_t);
WEFT_DIAGNOSTIC(KvSplitHere, Note, "length {0} is split here", int64_t);
WEFT_DIAGNOSTIC(ConflictingStyles, Error, "`{0}` gets style `{1}` here and `{2}` from an earlier rule",
                std::string, std::string, std::string);
WEFT_DIAGNOSTIC(DuplicateTpRule, Error, "`{0}` is already `{1}` by an earlier rule", std::string, std::string);
WEFT_DIAGNOSTIC(TpNeedsLinear, Error, "`{0}` is a `{1}` without a 2-D `weight`; only Linear-like modules are {2}",
                std::string, std::string, std::string);
WEFT_DIAGNOSTIC(ColwiseNotDivisible, Error, "colwise `{0}` has {1} output features, not divisible by tp {2}",
                std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(RowwiseNotDivisible, Error, "rowwise `{0}` has {1} input features, not divisible by tp {2}",
                std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(PackedBlocksMismatch, Error,
                "packed blocks {0} of `{1}` sum to {2}, which does not divide its {3} {4}", std::string, std::string,
                int64_t, int64_t, std::string);
WEFT_DIAGNOSTIC(PackedBlockNotDivisible, Error, "packed block {0} of `{1}` has size {2}, not divisible by tp {3}",
                int64_t, std::string, int64_t, int64_t);
WEFT_DIAGNOSTIC(UnknownConfigValue, Error, "graph `{0}` has no config value `{1}`{2}", std::string, std::string,
                std::string);
WEFT_DIAGNOSTIC(ColwiseWithoutRowwise, Error,
                "colwise `{0}` shards a width of {1} over tp, but no rowwise layer in `{2}` takes {1} input "
                "features to reduce it back",
                std::string, int64_t, std::string);

WEFT_DIAGNOSTIC(OutputNotGathered, Error,
                "{0} of `{1}` is split here, but no gather runs after the plan's last split: output {2} of `{3}`{4} "
                "would be returned split over the {5} CP ranks ({6}); add a `gather` rule for the module that "
                "produces it",
                std::string, std::string, int64_t, std::string, std::string, int64_t, std::string);
WEFT_DIAGNOSTIC(LastSplitHere, Note, "the plan's last split runs here, at `{0}`", std::string);
WEFT_DIAGNOSTIC(LastGatherHere, Note, "the plan's last gather runs here, at `{0}`, before that split", std::string);
WEFT_DIAGNOSTIC(PackedBlocksOverflow, Error,
                "packed blocks {0} of `{1}` sum to more than 9223372036854775807 (2^63 - 1); they must sum to a "
                "divisor of its {2} {3}",
                std::string, std::string, int64_t, std::string);
WEFT_DIAGNOSTIC(PackedBlockNotPositive, Error,
                "packed block {0} of `{1}` is `{2}` = {3} in graph `{4}`; block sizes are at least 1", int64_t,
                std::string, std::string, int64_t, std::string);
WEFT_DIAGNOSTIC(FewerBranchesThanCfgRanks, Error,
                "{0} of `{1}` has a batch of {2} along dim {3} in workload `{4}`: fewer guidance branches than the {5} "
                "cfg ranks; give a batch of at least {5} (one row per branch: conditional, unconditional ...) or a "
                "smaller cfg axis",
                std::string, std::string, int64_t, int64_t, std::string, int64_t);
WEFT_DIAGNOSTIC(FewerCallsThanCfgRanks, Error,
                "the plan runs the guidance branches as forward calls of their own, but the job has {0} branch(es) "
                "for the {1} cfg ranks: every cfg rank group needs a call; give at least {1} branches (weft-run: one "
                "--inputs file per branch; weft: --branches) or a smaller cfg axis",
                int64_t, int64_t);
WEFT_DIAGNOSTIC(CfgAxisWithoutBranches, Error,
                "the mesh has cfg={0} but plan `{1}` says no input carries guidance branches; add a "
                "`guidance_parallel` section that splits the batch of the branches (and gathers the output), "
                "or drop the cfg axis",
                int64_t, std::string);
WEFT_DIAGNOSTIC(BranchesNeverGathered, Error,
                "{0} of `{1}` is split over the {2} cfg ranks, but no `guidance_parallel` gather brings the "
                "branches back: the model's output would hold only each rank's branches; add a gather of the "
                "output along its batch dim",
                std::string, std::string, int64_t);
WEFT_DIAGNOSTIC(GatherNotOverBranches, Error,
                "`{0}` gathers output {1} along dim {2} over cfg, but that dim has length {3} in workload `{4}`, "
                "not the {5} branches the plan splits; the output does not carry the branches there",
                std::string, int64_t, int64_t, int64_t, std::string, std::string);
WEFT_DIAGNOSTIC(WeightAxisOfOne, Warning,
                "--shard-weights {0}: the mesh's {0} has one rank, so its weights stay whole there (replicated)",
                std::string);
WEFT_DIAGNOSTIC(MeshTooLarge, Error, "mesh {0} has {1} ranks, more than the {2} ranks a mesh may have", std::string,
                std::string, int64_t);

// ---- Small helpers ---------------------------------------------------------------------------

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string Backticked(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += (i + 1 == words.size()) ? " or " : ", ";
    out += "`" + words[i] + "`";
  }
  return out;
}

size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// "; did you mean `x`?" / "; expected `a`, `b` or `c`" (short lists only) / "".
std::string Suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = word.size() >= 5 ? 3 : 2;
  for (const std::string& c : candidates) {
    const size_t d = Distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (!best.empty()) return "; did you mean `" + best + "`?";
  if (!candidates.empty() && candidates.size() <= 8) return "; expected " + Backticked(candidates);
  return "";
}

// Heads appended so that `heads + pad` divides by `ulysses` (what --ulysses-anything does).
int64_t HeadPad(int64_t heads, int64_t ulysses) {
  if (ulysses <= 1 || heads % ulysses == 0) return 0;
  return ulysses - heads % ulysses;
}

// What a split cuts, for messages: "`hidden_states`", "`image_rotary_emb[0]`" or "output 0".
std::string SplitWhat(const plan::Split& s) {
  return s.target == plan::Split::Target::kOutput
             ? "output " + std::to_string(s.output)
             : "`" + s.argument + (s.element >= 0 ? "[" + std::to_string(s.element) + "]" : "") + "`";
}

std::string CpDegreeText(const plan::Mesh& m) {
  return "ring " + std::to_string(m.Ring()) + " x ulysses " + std::to_string(m.Ulysses());
}

// ---- The binder ------------------------------------------------------------------------------

class Binder {
 public:
  Binder(const syntax::PlanAst& ast, const model::ModelGraph& graph, const BindOptions& options,
         diag::Emitter& diags)
      : ast_(ast), graph_(graph), options_(options), diags_(diags) {}

  std::optional<BoundPlan> Run();

 private:
  plan::Origin OriginOf(const SourceRange& r) const {
    return {options_.plan_file, static_cast<int>(r.line), static_cast<int>(r.col), false};
  }
  // True the first time `key` is seen: one report per rule item, not one per matched module.
  bool Once(const std::string& key) { return reported_.insert(key).second; }
  std::string Key(const SourceRange& r, const char* what) { return std::to_string(r.offset) + ":" + what; }

  // A module path for messages: the root is shown as its class name.
  std::string Display(const std::string& path) const { return path.empty() ? graph_.class_name : path; }
  bool CheckMesh();
  // Matches `pattern`; matching nothing is an error (PatternMatchesNothing) unless
  // `empty_ok` (an `optional` rule), when it returns true with `out` empty.
  bool Match(const syntax::Pattern& pattern, std::vector<model::ModuleId>& out, bool empty_ok = false);
  // The shared walk of split and gather rules: for every matched module the workload calls
  // and every item of the rule (`outputs_only`: output items only) that resolves against the
  // module's first call with valid dims, runs `bind`; a rule whose modules are never called is
  // reported once as ModuleNotCalled (`rule_kind` names the rule in the message).
  using BindItem = std::function<void(model::ModuleId id, const model::ModuleCalls& calls, const syntax::ShardItem& item,
                                      const model::Value& value, const std::string& what)>;
  void ForEachBoundItem(const syntax::CpRule& rule, const char* rule_kind, bool outputs_only, const BindItem& bind);
  void BindSplitRule(const syntax::CpRule& rule);
  void BindSplitItem(model::ModuleId id, const model::ModuleCalls& calls, const syntax::ShardItem& item,
                     const model::Value& value, const std::string& what);
  void BindGatherRule(const syntax::CpRule& rule);
  // A gather's length at its dim is one the splits cut (or a sum of them: joined streams): a
  // gather along another dim stacks pieces no split made (--graph has no dataflow to follow;
  // programs check the dim itself, compiler/program/shard_flow.cpp).
  void CheckGatherLengths();
  void BindAttentionRule(const syntax::CpRule& rule);
  // Resolves the tensor an item addresses in `call`; nullptr (diagnosed or skipped) if none.
  const model::Value* Resolve(const syntax::ShardItem& item, model::ModuleId id, const model::Call& call,
                              std::string& what, bool& skip);
  bool CheckDims(const syntax::ShardItem& item, model::ModuleId id, const model::Value& v, const std::string& what,
                 bool& skip);
  void CheckDivisible(const SourceRange& range, const std::string& what, const std::string& module, int64_t length,
                      int64_t dim);
  void ComputeShardedLengths();
  void BindAttentionSites();
  void BindTpRules();
  void CheckColwiseChains();
  void CheckGathers();
  void CheckOutputGathered();
  // The guidance_parallel section: the batch of branches split and gathered over the cfg axis.
  void BindGuidance();
  void BindGuidanceCalls(const syntax::CpRule& rule);
  void BindBranchSplit(model::ModuleId id, const syntax::ShardItem& item, const model::Value& value,
                       const std::string& what, std::vector<SourceRange>& ranges);
  // The split or gather an item makes of `value` over `parts` ranks of `group`.
  plan::Split SplitOf(const syntax::ShardItem& item, const model::Value& value, int64_t parts,
                      std::string_view group) const;
  plan::Gather GatherOf(const syntax::ShardItem& item, const model::Value& value, int64_t parts,
                        std::string_view group) const;
  // True (and DuplicateSplit reported once) when `splits` split the tensor `s` of module `id` already.
  bool SplitTwice(const std::vector<BoundSplit>& splits, const std::vector<SourceRange>& ranges, model::ModuleId id,
                  const plan::Split& s, const syntax::ShardItem& item, const std::string& what);

  const syntax::PlanAst& ast_;
  const model::ModelGraph& graph_;
  const BindOptions& options_;
  diag::Emitter& diags_;
  const model::Workload* workload_ = nullptr;
  BoundPlan out_;
  std::set<std::string> reported_;
  // Attention declarations: site module -> (context_parallel, rule range).
  std::map<model::ModuleId, std::pair<bool, SourceRange>> declared_;
  // Split lengths -> the range of an item that splits a tensor of that length.
  std::map<int64_t, SourceRange> split_length_origin_;
  std::vector<SourceRange> split_ranges_;  // parallel to out_.splits
  struct LocalViolation {
    SourceRange range;
    std::string site;
    int64_t length = 0;
    int64_t count = 0;
  };
  std::map<uint32_t, LocalViolation> local_violations_;
  std::vector<SourceRange> gather_ranges_;
  std::map<model::ModuleId, std::pair<plan::ShardStyle, SourceRange>> tp_rule_of_;
  std::unordered_map<model::ModuleId, SourceRange> tp_range_;
};

bool Binder::CheckMesh() {
  bool ok = true;
  int64_t product = 1;
  for (const plan::MeshAxis& a : options_.mesh.axes) {
    if (a.size < 1) {
      diags_.Emit(ast_.header_range, MeshDegreeInvalid, a.name, a.size);
      ok = false;
    }
    product = source::SaturatingMul(product, std::max<int64_t>(a.size, 1));
  }
  if (ok && product > plan::kMaxMeshWorldSize) {
    // The driver's parser bounds meshes; a caller building one in memory may not have.
    diags_.Emit(ast_.header_range, MeshTooLarge, options_.mesh.ToString(),
                product == source::kSaturated ? "more than 9223372036854775807" : std::to_string(product),
                plan::kMaxMeshWorldSize);
    return false;
  }
  if (ok && options_.world_size > 0 && options_.world_size != product) {
    diags_.Emit(ast_.header_range, MeshWorldMismatch, options_.mesh.ToString(), product, options_.world_size);
    ok = false;
  }
  out_.mesh = options_.mesh;
  out_.mesh.world_size = product;
  for (const std::string& axis : out_.mesh.weight_axes) {
    if ((axis == plan::kCpGroup ? out_.mesh.Cp() : out_.mesh.Size(axis)) <= 1) {
      diags_.Emit(ast_.header_range, WeightAxisOfOne, axis);
    }
  }
  return ok;
}

bool Binder::Match(const syntax::Pattern& pattern, std::vector<model::ModuleId>& out, bool empty_ok) {
  std::string error;
  MatchFailure failure;
  if (!MatchPatternDetailed(graph_, pattern.text, out, error, &failure)) {
    // The parser validates patterns; a malformed one here is reported as matching nothing.
    diags_.Emit(pattern.range, PatternMatchesNothing, pattern.text, graph_.class_name, "; " + error);
    return false;
  }
  if (!out.empty() || empty_ok) return true;
  std::string hint;
  const model::Module* parent = failure.set ? &graph_.modules[failure.parent] : nullptr;
  bool list_note = false;
  if (parent != nullptr) {
    if (parent->container == model::Container::kList) {
      list_note = true;
    } else {
      hint = Suggest(failure.segment, parent->children);
      if (!hint.empty()) hint += " (in `" + Display(parent->path) + "`)";
    }
  }
  auto builder = diags_.Build(pattern.range, PatternMatchesNothing, pattern.text, graph_.class_name, hint);
  if (list_note) {
    const int64_t n = static_cast<int64_t>(parent->children.size());
    builder.Note(SourceRange{}, ModuleListEntries, parent->path, n, n - 1);
  }
  builder.Emit();
  return false;
}

const model::Value* Binder::Resolve(const syntax::ShardItem& item, model::ModuleId id, const model::Call& call,
                                    std::string& what, bool& skip) {
  const model::Module& m = graph_.modules[id];
  const syntax::Target& t = item.target;
  skip = false;
  if (t.kind == syntax::TargetKind::kOutput) {
    what = "output " + std::to_string(t.index.value);
    if (t.index.value >= static_cast<int64_t>(call.outputs.size())) {
      if (Once(Key(t.range, "out"))) {
        diags_.Emit(t.range, OutputOutOfRange, Display(m.path), static_cast<int64_t>(call.outputs.size()), workload_->name,
                    t.index.value);
      }
      return nullptr;
    }
    return &call.outputs[static_cast<size_t>(t.index.value)];
  }
  const std::string& name = t.argument.text;
  what = "`" + name + "`";
  const model::ModuleType* type = graph_.FindType(m.type);
  if (type == nullptr || !type->ArgIndex(name)) {
    // Variadic forwards accept anything the caller passed.
    const bool passed = call.FindArg(name) != nullptr;
    if (!(type != nullptr && type->variadic && passed)) {
      if (Once(Key(t.argument.range, "arg"))) {
        std::vector<std::string> names;
        if (type != nullptr) {
          for (const model::Arg& a : type->args) names.push_back(a.name);
        }
        diags_.Emit(t.argument.range, UnknownArgument, m.type, name, Suggest(name, names));
      }
      return nullptr;
    }
  }
  const model::Value* v = call.FindArg(name);
  if (v == nullptr || v->kind == model::Value::Kind::kNone) {
    if (item.optional) {
      skip = true;
      return nullptr;
    }
    if (Once(Key(t.argument.range, "absent"))) {
      diags_.Emit(t.argument.range, ArgumentNotPassed, name, Display(m.path), v == nullptr ? "not passed" : "None",
                  workload_->name);
    }
    return nullptr;
  }
  if (t.kind == syntax::TargetKind::kArgumentElement) {
    what = "`" + name + "[" + std::to_string(t.index.value) + "]`";
    if (v->kind != model::Value::Kind::kTuple) {
      if (Once(Key(t.range, "tuple"))) {
        diags_.Emit(t.range, NotATuple, name, Display(m.path), workload_->name,
                    v->IsTensor() ? "a tensor of shape " + ShapeText(v->shape) : std::string("a scalar"));
      }
      return nullptr;
    }
    // `arg[i]` is the i-th leaf, depth first, as in a program (which flattens its inputs): Allegro's
    // RoPE ((tables of t, h, w), (positions of t, h, w)) has leaves 0-5 (cos, sin per axis) and 6-8.
    std::vector<const model::Value*> leaves;
    std::function<void(const model::Value&)> flatten = [&](const model::Value& e) {
      if (e.kind == model::Value::Kind::kTuple) {
        for (const model::Value& x : e.elements) flatten(x);
      } else {
        leaves.push_back(&e);
      }
    };
    flatten(*v);
    if (t.index.value >= static_cast<int64_t>(leaves.size())) {
      if (Once(Key(t.index.range, "elem"))) {
        diags_.Emit(t.index.range, ElementOutOfRange, name, Display(m.path), static_cast<int64_t>(leaves.size()),
                    t.index.value);
      }
      return nullptr;
    }
    return leaves[static_cast<size_t>(t.index.value)];
  }
  return v;
}

bool Binder::CheckDims(const syntax::ShardItem& item, model::ModuleId id, const model::Value& v,
                       const std::string& what, bool& skip) {
  const model::Module& m = graph_.modules[id];
  skip = false;
  if (!v.IsTensor()) {
    if (Once(Key(item.range, "tensor"))) {
      diags_.Emit(item.target.range, NotATuple, what, Display(m.path), workload_->name, "not a tensor");
    }
    return false;
  }
  if (item.rank && item.rank->value != v.Rank()) {
    if (item.optional) {
      skip = true;
      return false;
    }
    if (Once(Key(item.rank->range, "rank"))) {
      diags_.Emit(item.rank->range, RankMismatch, what, Display(m.path), v.Rank(), workload_->name, ShapeText(v.shape),
                  item.rank->value);
    }
    return false;
  }
  if (item.dim.value >= v.Rank()) {
    if (Once(Key(item.dim.range, "dim"))) {
      diags_.Emit(item.dim.range, DimOutOfRange, item.dim.value, what, Display(m.path), ShapeText(v.shape), v.Rank());
    }
    return false;
  }
  return true;
}

void Binder::CheckDivisible(const SourceRange& range, const std::string& what, const std::string& module,
                            int64_t length, int64_t dim) {
  const int64_t cp = out_.mesh.Cp();
  if (cp <= 1 || out_.mesh.Uneven()) return;
  if (length % cp == 0) return;
  if (!Once(Key(range, "div") + std::to_string(length))) return;
  diags_.Emit(range, SplitNotDivisible, what, module, length, dim, cp, CpDegreeText(out_.mesh), length / cp,
              length % cp);
}

void Binder::ForEachBoundItem(const syntax::CpRule& rule, const char* rule_kind, bool outputs_only,
                              const BindItem& bind) {
  std::vector<model::ModuleId> modules;
  if (!Match(rule.pattern, modules)) return;
  bool any_called = false;
  for (model::ModuleId id : modules) {
    const model::ModuleCalls* calls = workload_->FindCalls(graph_.modules[id].path);
    if (calls == nullptr || calls->calls.empty()) continue;
    any_called = true;
    for (const syntax::ShardItem& item : rule.items) {
      if (item.has_error || (outputs_only && item.target.kind != syntax::TargetKind::kOutput)) continue;
      std::string what;
      bool skip = false;
      const model::Value* v = Resolve(item, id, calls->calls.front(), what, skip);
      if (v == nullptr || !CheckDims(item, id, *v, what, skip)) continue;
      bind(id, *calls, item, *v, what);
    }
  }
  if (!any_called && Once(Key(rule.pattern.range, "called"))) {
    diags_.Emit(rule.pattern.range, ModuleNotCalled, Display(graph_.modules[modules.front()].path), workload_->name,
                rule_kind);
  }
}

plan::Split Binder::SplitOf(const syntax::ShardItem& item, const model::Value& value, int64_t parts,
                            std::string_view group) const {
  plan::Split s;
  if (item.target.kind == syntax::TargetKind::kOutput) {
    s.target = plan::Split::Target::kOutput;
    s.output = item.target.index.value;
  } else {
    s.argument = item.target.argument.text;
    if (item.target.kind == syntax::TargetKind::kArgumentElement) s.element = item.target.index.value;
  }
  s.group = std::string(group);
  s.dim = item.dim.value;
  s.rank = value.Rank();
  s.optional = item.optional.has_value();
  s.global_size = value.shape[static_cast<size_t>(s.dim)];
  s.sizes = plan::SplitSizes(s.global_size, parts);
  s.uneven = s.global_size % parts != 0;
  s.origin = OriginOf(item.range);
  return s;
}

plan::Gather Binder::GatherOf(const syntax::ShardItem& item, const model::Value& value, int64_t parts,
                              std::string_view group) const {
  plan::Gather g;
  g.group = std::string(group);
  g.output = item.target.index.value;
  g.dim = item.dim.value;
  g.rank = value.Rank();
  g.global_size = value.shape[static_cast<size_t>(g.dim)];
  g.sizes = plan::SplitSizes(g.global_size, parts);
  g.uneven = g.global_size % parts != 0;
  g.origin = OriginOf(item.range);
  return g;
}

bool Binder::SplitTwice(const std::vector<BoundSplit>& splits, const std::vector<SourceRange>& ranges,
                        model::ModuleId id, const plan::Split& s, const syntax::ShardItem& item,
                        const std::string& what) {
  for (size_t k = 0; k < splits.size(); ++k) {
    const BoundSplit& o = splits[k];
    if (o.module == id && o.split.target == s.target && o.split.argument == s.argument &&
        o.split.element == s.element && o.split.output == s.output) {
      if (Once(Key(item.range, "dup"))) {
        diags_.Build(item.range, DuplicateSplit, what, Display(graph_.modules[id].path))
            .Note(ranges[k], PreviousRule, Display(graph_.modules[id].path))
            .Emit();
      }
      return true;
    }
  }
  return false;
}

void Binder::BindSplitRule(const syntax::CpRule& rule) {
  ForEachBoundItem(rule, "split", /*outputs_only=*/false,
                   [this](model::ModuleId id, const model::ModuleCalls& calls, const syntax::ShardItem& item,
                          const model::Value& value, const std::string& what) {
                     BindSplitItem(id, calls, item, value, what);
                   });
}

void Binder::BindSplitItem(model::ModuleId id, const model::ModuleCalls& calls, const syntax::ShardItem& item,
                           const model::Value& value, const std::string& what) {
  plan::Split s = SplitOf(item, value, out_.mesh.Cp(), plan::kCpGroup);
  if (out_.mesh.Cp() > 1 && s.global_size < out_.mesh.Cp()) {
    if (Once(Key(item.range, "short"))) {
      diags_.Emit(item.range, SplitNotDivisible, what, Display(graph_.modules[id].path), s.global_size, s.dim,
                  out_.mesh.Cp(), CpDegreeText(out_.mesh), int64_t{0}, s.global_size);
    }
    return;
  }
  CheckDivisible(item.range, what, Display(graph_.modules[id].path), s.global_size, s.dim);
  // Later calls of the same module must divide too.
  for (size_t c = 1; c < calls.calls.size(); ++c) {
    std::string w2;
    bool skip2 = false;
    const model::Value* v2 = Resolve(item, id, calls.calls[c], w2, skip2);
    if (v2 != nullptr && v2->IsTensor() && s.dim < v2->Rank()) {
      CheckDivisible(item.range, what, Display(graph_.modules[id].path), v2->shape[static_cast<size_t>(s.dim)], s.dim);
    }
  }
  // Duplicate: the same tensor of the same module split twice.
  if (SplitTwice(out_.splits, split_ranges_, id, s, item, what)) return;
  split_length_origin_.emplace(s.global_size, item.range);
  out_.splits.push_back({id, std::move(s)});
  split_ranges_.push_back(item.range);
}

void Binder::BindGatherRule(const syntax::CpRule& rule) {
  ForEachBoundItem(rule, "gather", /*outputs_only=*/true,
                   [&](model::ModuleId id, const model::ModuleCalls&, const syntax::ShardItem& item,
                       const model::Value& value, const std::string& what) {
                     plan::Gather g = GatherOf(item, value, out_.mesh.Cp(), plan::kCpGroup);
                     CheckDivisible(item.range, what, Display(graph_.modules[id].path), g.global_size, g.dim);
                     out_.gathers.push_back({id, std::move(g)});
                     gather_ranges_.push_back(item.range);
                   });
}

void Binder::BindAttentionRule(const syntax::CpRule& rule) {
  std::vector<model::ModuleId> modules;
  if (!Match(rule.pattern, modules)) return;
  int64_t sites = 0;
  for (const model::AttentionSite& site : graph_.attention_sites) {
    for (model::ModuleId id : modules) {
      const std::string& p = graph_.modules[id].path;
      if (p.empty() || site.path == p || site.path.rfind(p + ".", 0) == 0) {
        const model::ModuleId sid = *graph_.FindModuleId(site.path);
        const bool cp = rule.mode == syntax::AttentionMode::kContextParallel;
        auto it = declared_.find(sid);
        if (it != declared_.end() && it->second.first != cp) {
          if (Once(Key(rule.range, "attn") + site.path)) {
            diags_.Build(rule.range, ConflictingStyles, site.path, cp ? "context_parallel" : "local",
                         it->second.first ? "context_parallel" : "local")
                .Note(it->second.second, PreviousRule, site.path)
                .Emit();
          }
        } else {
          declared_[sid] = {cp, rule.range};
        }
        ++sites;
        break;
      }
    }
  }
  if (sites == 0) {
    diags_.Emit(rule.pattern.range, AttentionRuleMatchesNoSite, rule.pattern.text,
                static_cast<int64_t>(modules.size()));
  }
}

void Binder::ComputeShardedLengths() {
  std::set<int64_t> lengths;
  for (const BoundSplit& s : out_.splits) lengths.insert(s.split.global_size);
  std::vector<int64_t> base(lengths.begin(), lengths.end());
  if (base.size() > 12) base.resize(12);
  std::set<int64_t> sums;
  for (uint32_t mask = 1; mask < (1u << base.size()); ++mask) {
    int64_t sum = 0;
    int64_t first = -1;
    for (size_t i = 0; i < base.size(); ++i) {
      if (mask & (1u << i)) {
        sum = source::SaturatingAdd(sum, base[i]);
        if (first < 0) first = base[i];
      }
    }
    if (sum == source::kSaturated) continue;  // no traced length is that long
    sums.insert(sum);
    // A concatenation of split streams (Flux: text + image) points at its first stream's split.
    if (first >= 0 && !split_length_origin_.count(sum)) split_length_origin_.emplace(sum, split_length_origin_[first]);
  }
  out_.sharded_lengths.assign(sums.begin(), sums.end());
}

void Binder::BindAttentionSites() {
  const int64_t U = out_.mesh.Ulysses();
  const int64_t T = out_.mesh.Tp();
  auto sharded = [&](int64_t len) {
    return std::binary_search(out_.sharded_lengths.begin(), out_.sharded_lengths.end(), len);
  };
  for (const model::AttentionSite& site : graph_.attention_sites) {
    const model::SiteCalls* calls = workload_->FindAttention(site.path);
    if (calls == nullptr || calls->calls.empty()) continue;
    const model::ModuleId id = *graph_.FindModuleId(site.path);
    BoundAttention a;
    a.module = id;
    a.heads = site.heads;
    a.head_dim = site.head_dim;
    a.q_len = calls->calls.front().q.at(1);
    a.kv_len = calls->calls.front().k.at(1);
    a.calls = static_cast<int64_t>(calls->calls.size());
    int64_t sharded_kv_len = 0;
    for (const model::AttentionCall& c : calls->calls) {
      if (sharded(c.k.at(1)) && sharded_kv_len == 0) sharded_kv_len = c.k.at(1);
      a.q_sharded |= sharded(c.q.at(1));
    }
    a.kv_sharded = sharded_kv_len != 0;
    auto declared = declared_.find(id);
    SourceRange where;
    if (declared != declared_.end()) {
      a.context_parallel = declared->second.first;
      a.origin = OriginOf(declared->second.second);
      where = declared->second.second;
      if (!a.context_parallel && a.kv_sharded && out_.mesh.Cp() > 1) {
        LocalViolation& v = local_violations_[where.offset];
        if (v.count++ == 0) {
          v.range = where;
          v.site = site.path;
          v.length = sharded_kv_len;
        }
      }
    } else {
      a.context_parallel = a.kv_sharded;
      // Derived: point at a split that made it context-parallel, if one is known.
      auto split = split_length_origin_.find(sharded_kv_len);
      if (a.kv_sharded && split != split_length_origin_.end()) {
        where = split->second;
        a.origin = OriginOf(split->second);
      } else if (!split_length_origin_.empty()) {
        where = split_length_origin_.begin()->second;
        a.origin = OriginOf(where);
      }
      a.origin.derived = true;
    }
    if (out_.mesh.Cp() <= 1) a.context_parallel = false;
    if (a.context_parallel && out_.mesh.Ring() > 1 && options_.attention_kernel == "sdpa" && Once("lse")) {
      diags_.Emit(where, RingNeedsLseKernel, site.path, out_.mesh.Ring(), options_.attention_kernel);
    }
    // Heads: with TP, the projections feeding this site are sharded when a TP rule touches
    // a module inside it (or the site itself).
    bool tp_sharded = false;
    SourceRange tp_where;
    // Modules are in pre-order: the site's subtree is the id range starting at the site.
    for (auto it = tp_rule_of_.lower_bound(id); it != tp_rule_of_.end(); ++it) {
      const std::string& p = graph_.modules[it->first].path;
      if (!(p == site.path || p.rfind(site.path + ".", 0) == 0)) break;
      if (it->second.first != plan::ShardStyle::kReplicate) {
        tp_sharded = true;
        tp_where = it->second.second;
        break;
      }
    }
    int64_t local = site.heads;
    if (tp_sharded && T > 1) {
      if (site.heads % T != 0) {
        if (Once("tpheads:" + std::to_string(tp_where.offset) + ":" + std::to_string(site.heads))) {
          diags_.Emit(tp_where, HeadsNotDivisibleByTp, site.path, site.heads, T);
        }
      } else {
        local = site.heads / T;
      }
    }
    if (a.context_parallel && U > 1 && local % U != 0) {
      const std::string detail = local != site.heads ? " (" + std::to_string(local) + " per tp rank)" : "";
      if (!out_.mesh.ulysses_anything) {
        if (Once("uheads:" + std::to_string(where.offset) + ":" + std::to_string(local))) {
          diags_.Emit(where, HeadsNotDivisibleByUlysses, site.path, site.heads, detail, U);
        }
      } else {
        const int64_t pad = HeadPad(local, U);
        const int64_t per_rank = (local + pad) / U;
        if (pad >= per_rank && Once("pad:" + std::to_string(where.offset) + ":" + std::to_string(local))) {
          diags_.Emit(where, HeadPaddingTooLarge, site.path, local, U, pad, per_rank);
        }
      }
    }
    a.local_heads = local;
    a.head_pad = a.context_parallel && out_.mesh.ulysses_anything ? HeadPad(local, U) : 0;
    out_.attention.push_back(std::move(a));
  }
  // One report per `attention ... local` rule, naming its first offending site.
  for (const auto& [offset, v] : local_violations_) {
    const std::string more = v.count > 1 ? " (and " + std::to_string(v.count - 1) + " more sites)" : "";
    auto builder = diags_.Build(v.range, ShardedKvRunsLocal, v.site, more, v.length);
    auto split = split_length_origin_.find(v.length);
    if (split != split_length_origin_.end()) builder.Note(split->second, KvSplitHere, v.length);
    builder.Emit();
  }
}

void Binder::BindTpRules() {
  const int64_t T = out_.mesh.Tp();
  for (const syntax::TpRule& rule : ast_.tensor_parallel->rules) {
    if (rule.has_error) continue;
    std::vector<model::ModuleId> modules;
    // An optional rule that matches nothing is skipped silently; a malformed pattern still fails.
    if (!Match(rule.pattern, modules, /*empty_ok=*/rule.optional.has_value()) || modules.empty()) continue;
    plan::ShardStyle style = rule.style == syntax::TpStyle::kColwise   ? plan::ShardStyle::kColwise
                             : rule.style == syntax::TpStyle::kRowwise ? plan::ShardStyle::kRowwise
                                                                       : plan::ShardStyle::kReplicate;
    if (rule.packed) {
      style = style == plan::ShardStyle::kColwise ? plan::ShardStyle::kPackedColwise : plan::ShardStyle::kPackedRowwise;
    }
    const std::string style_name(plan::ShardStyleName(style));
    // Packed block sizes: literals or graph config names.
    std::vector<int64_t> raw_blocks;
    bool blocks_ok = true;
    if (rule.packed) {
      for (const syntax::BlockSize& b : rule.packed->blocks) {
        if (!b.is_name) {
          raw_blocks.push_back(b.value);
          continue;
        }
        if (auto v = graph_.ConfigValue(b.name)) {
          if (*v < 1) {
            diags_.Emit(b.range, PackedBlockNotPositive, static_cast<int64_t>(raw_blocks.size()),
                        rule.pattern.text, b.name, *v, graph_.name);
            blocks_ok = false;
          }
          raw_blocks.push_back(*v);
        } else {
          std::vector<std::string> names;
          for (const auto& [k, val] : graph_.config) names.push_back(k);
          diags_.Emit(b.range, UnknownConfigValue, graph_.name, b.name, Suggest(b.name, names));
          blocks_ok = false;
        }
      }
    }
    for (model::ModuleId id : modules) {
      const model::Module& m = graph_.modules[id];
      const model::Param* w = m.FindParam("weight");
      // A norm with a 1-D weight may be colwise: its input width is sharded (Wan's q/k norms
      // over all heads); the executor then all-reduces its statistics over tp.
      const bool sharded_norm = style == plan::ShardStyle::kColwise && w != nullptr && w->shape.size() == 1 &&
                                m.type.find("Norm") != std::string::npos;
      if (style != plan::ShardStyle::kReplicate && !sharded_norm && (w == nullptr || w->shape.size() != 2)) {
        if (Once(Key(rule.pattern.range, "linear"))) {
          diags_.Emit(rule.pattern.range, TpNeedsLinear, Display(m.path), m.type, style_name);
        }
        continue;
      }
      auto prev = tp_rule_of_.find(id);
      if (prev != tp_rule_of_.end()) {
        if (Once(Key(rule.range, "conflict"))) {
          const std::string prev_name(plan::ShardStyleName(prev->second.first));
          if (prev->second.first != style) {
            diags_.Build(rule.range, ConflictingStyles, Display(m.path), style_name, prev_name)
                .Note(prev->second.second, PreviousRule, Display(m.path))
                .Emit();
          } else {
            diags_.Build(rule.range, DuplicateTpRule, Display(m.path), prev_name)
                .Note(prev->second.second, PreviousRule, Display(m.path))
                .Emit();
          }
        }
        continue;
      }
      tp_rule_of_[id] = {style, rule.range};
      BoundTp bt;
      bt.module = id;
      bt.style = style;
      bt.origin = OriginOf(rule.range);
      const bool col = style == plan::ShardStyle::kColwise || style == plan::ShardStyle::kPackedColwise;
      if (style != plan::ShardStyle::kReplicate) {
        const int64_t extent = col ? w->shape[0] : w->shape[1];
        const std::string dim_name = col ? "output features" : "input features";
        if (rule.packed && blocks_ok) {
          std::optional<int64_t> sum = 0;
          for (int64_t b : raw_blocks) {
            if (sum) sum = source::CheckedAdd(*sum, b);
          }
          std::string list = "[";
          for (size_t i = 0; i < raw_blocks.size(); ++i) list += (i ? ", " : "") + std::to_string(raw_blocks[i]);
          list += "]";
          if (!sum) {
            if (Once(Key(rule.packed->range, "sum"))) {
              diags_.Emit(rule.packed->range, PackedBlocksOverflow, list, Display(m.path), extent, dim_name);
            }
            continue;
          }
          if (*sum <= 0 || extent % *sum != 0) {
            if (Once(Key(rule.packed->range, "sum"))) {
              diags_.Emit(rule.packed->range, PackedBlocksMismatch, list, Display(m.path), *sum, extent, dim_name);
            }
            continue;
          }
          const int64_t scale = extent / *sum;  // proportions scale to the dimension (b * scale <= extent)
          for (int64_t b : raw_blocks) bt.blocks.push_back(b * scale);
          if (T > 1) {
            for (size_t i = 0; i < bt.blocks.size(); ++i) {
              if (bt.blocks[i] % T != 0 && Once(Key(rule.packed->range, "blk") + std::to_string(i))) {
                diags_.Emit(rule.packed->blocks[i].range, PackedBlockNotDivisible, static_cast<int64_t>(i), Display(m.path),
                            bt.blocks[i], T);
              }
            }
          }
        } else if (!rule.packed && T > 1 && extent % T != 0) {
          if (Once(Key(rule.range, "tpdiv") + std::to_string(extent))) {
            if (col) {
              diags_.Emit(rule.pattern.range, ColwiseNotDivisible, Display(m.path), extent, T);
            } else {
              diags_.Emit(rule.pattern.range, RowwiseNotDivisible, Display(m.path), extent, T);
            }
          }
          continue;
        }
      }
      tp_range_[id] = rule.range;
      out_.tp.push_back(std::move(bt));
    }
  }
  std::sort(out_.tp.begin(), out_.tp.end(), [](const BoundTp& a, const BoundTp& b) { return a.module < b.module; });
}

void Binder::CheckColwiseChains() {
  // A colwise layer's output is sharded along its width; a rowwise layer that takes that width
  // as its input features (or as one of its packed blocks) must reduce it back, inside the
  // same block: the nearest ancestor subtree with such a layer, looking no higher than the
  // outermost list item (the transformer block) or the root. A program's dataflow follows each
  // colwise output to the layer that reduces it (or refuses it by name), widths aside.
  if (options_.checked_by_dataflow) return;
  std::vector<std::vector<int64_t>> reduces(graph_.modules.size());
  for (const BoundTp& t : out_.tp) {
    if (t.style == plan::ShardStyle::kRowwise) {
      const model::Param* w = graph_.modules[t.module].FindParam("weight");
      if (w != nullptr && w->shape.size() == 2) reduces[t.module].push_back(w->shape[1]);
    } else if (t.style == plan::ShardStyle::kPackedRowwise) {
      reduces[t.module] = t.blocks;
    }
  }
  // Widths reduced somewhere in each module's subtree (keyed by path, "" = root).
  std::unordered_map<std::string, std::set<int64_t>> reduced_below;
  for (size_t i = 0; i < graph_.modules.size(); ++i) {
    if (reduces[i].empty()) continue;
    std::string path = graph_.modules[i].path;
    while (true) {
      reduced_below[path].insert(reduces[i].begin(), reduces[i].end());
      if (path.empty()) break;
      const size_t dot = path.rfind('.');
      path = dot == std::string::npos ? "" : path.substr(0, dot);
    }
  }
  // The colwise widths of each module's direct children: grouped-query attention's keys and
  // values are narrower than its queries, whose width the output projection reduces.
  std::unordered_map<std::string, std::set<int64_t>> colwise_of_parent;
  for (const BoundTp& t : out_.tp) {
    if (t.style != plan::ShardStyle::kColwise) continue;
    const model::Param* w = graph_.modules[t.module].FindParam("weight");
    const std::string& path = graph_.modules[t.module].path;
    const size_t dot = path.rfind('.');
    if (w != nullptr && w->shape.size() == 2) colwise_of_parent[dot == std::string::npos ? "" : path.substr(0, dot)].insert(w->shape[0]);
  }
  auto subtree_reduces = [&](const std::string& prefix, int64_t width) {
    auto it = reduced_below.find(prefix);
    return it != reduced_below.end() && it->second.count(width) > 0;
  };
  // `width` a whole fraction of a sibling colwise width that the subtree reduces (the key/value
  // heads of grouped-query attention, each serving several query heads).
  auto grouped_with_sibling = [&](const std::string& prefix, const std::string& own, int64_t width) {
    auto it = reduced_below.find(prefix);
    const size_t dot = own.rfind('.');
    auto sib = colwise_of_parent.find(dot == std::string::npos ? "" : own.substr(0, dot));
    if (it == reduced_below.end() || sib == colwise_of_parent.end() || width <= 0) return false;
    for (const int64_t w : sib->second) {
      if (w > width && w % width == 0 && it->second.count(w) > 0) return true;
    }
    return false;
  };
  for (const BoundTp& t : out_.tp) {
    if (t.style != plan::ShardStyle::kColwise && t.style != plan::ShardStyle::kPackedColwise) continue;
    const std::string& own = graph_.modules[t.module].path;
    std::vector<int64_t> widths = t.blocks;
    if (t.style == plan::ShardStyle::kColwise) {
      const model::Param* w = graph_.modules[t.module].FindParam("weight");
      if (w == nullptr || w->shape.size() != 2) continue;
      widths = {w->shape[0]};
    }
    // The block: the shallowest ancestor that is an item of a list (or the root).
    std::string block;
    {
      std::string prefix;
      for (const std::string& seg : Segments(own)) {
        const model::Module* parent = graph_.FindModule(prefix);
        prefix = prefix.empty() ? seg : prefix + "." + seg;
        if (parent != nullptr && parent->container == model::Container::kList) {
          block = prefix;
          break;
        }
      }
    }
    for (int64_t width : widths) {
      std::string path = own;
      bool found = false;
      while (true) {
        const size_t dot = path.rfind('.');
        const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
        if (subtree_reduces(parent, width) || grouped_with_sibling(parent, own, width)) {
          found = true;
          break;
        }
        if (parent == block || parent.empty()) break;
        path = parent;
      }
      if (!found && Once(Key(tp_range_[t.module], "chain"))) {
        diags_.Emit(tp_range_[t.module], ColwiseWithoutRowwise, Display(own), width, Display(block));
      }
    }
  }
}

void Binder::CheckGathers() {
  for (size_t k = 0; k < out_.gathers.size(); ++k) {
    const BoundGather& g = out_.gathers[k];
    bool before = false;
    for (const BoundSplit& s : out_.splits) before |= s.module <= g.module;
    if (!before && Once(Key(gather_ranges_[k], "nosplit"))) {
      diags_.Emit(gather_ranges_[k], GatherWithoutSplit, Display(graph_.modules[g.module].path), g.gather.output,
                  out_.mesh.Cp());
    }
  }
}

void Binder::CheckGatherLengths() {
  if (out_.mesh.Cp() <= 1 || out_.splits.empty() || options_.checked_by_dataflow) return;
  const std::vector<int64_t>& cut = out_.sharded_lengths;
  for (size_t k = 0; k < out_.gathers.size(); ++k) {
    const BoundGather& g = out_.gathers[k];
    if (std::binary_search(cut.begin(), cut.end(), g.gather.global_size)) continue;
    if (!Once(Key(gather_ranges_[k], "length") + std::to_string(g.gather.global_size))) continue;
    std::string lengths;  // each length once, with the first split that cuts it
    std::set<int64_t> named;
    for (const BoundSplit& s : out_.splits) {
      if (!named.insert(s.split.global_size).second) continue;
      const std::string what = s.split.target == plan::Split::Target::kOutput
                                   ? "output " + std::to_string(s.split.output)
                                   : "`" + s.split.argument + "`";
      lengths += (lengths.empty() ? "" : ", ") + std::to_string(s.split.global_size) + " (" + what + " of `" +
                 Display(graph_.modules[s.module].path) + "`, dim " + std::to_string(s.split.dim) + ")";
    }
    diags_.Emit(gather_ranges_[k], GatherOnOtherDim, Display(graph_.modules[g.module].path), g.gather.output,
                g.gather.dim, g.gather.global_size, workload_->name, "the splits cut " + lengths + " and their sums");
  }
}

void Binder::CheckOutputGathered() {
  // When data moves, in module pre-order (the order of the graph's registration, which the
  // exporters keep and the gather check above relies on too): a module's argument splits run
  // as it starts, at 2*id; its output splits and gathers as it returns, at 2*end-1 where `end`
  // is one past its subtree. The model returns sharded data when the last split comes after
  // the last gather. A program's dataflow knows the real order (BriaFibo calls its
  // `caption_projection` list, registered after `proj_out`, before every block) and refuses a
  // split that reaches the output itself (shard_flow.cpp, SplitNeverGathered).
  if (out_.splits.empty() || out_.mesh.Cp() <= 1 || options_.checked_by_dataflow) return;
  auto subtree_end = [&](model::ModuleId id) {
    const std::string& path = graph_.modules[id].path;
    size_t end = id + 1;
    while (end < graph_.modules.size() &&
           (path.empty() || graph_.modules[end].path.rfind(path + ".", 0) == 0)) {
      ++end;
    }
    return end;
  };
  auto split_time = [&](const BoundSplit& s) {
    return s.split.target == plan::Split::Target::kArgument ? 2 * s.module : 2 * subtree_end(s.module) - 1;
  };
  size_t last_split = 0;
  for (size_t k = 1; k < out_.splits.size(); ++k) {
    if (split_time(out_.splits[k]) > split_time(out_.splits[last_split])) last_split = k;
  }
  std::optional<size_t> last_gather;
  for (size_t k = 0; k < out_.gathers.size(); ++k) {
    if (!last_gather || subtree_end(out_.gathers[k].module) > subtree_end(out_.gathers[*last_gather].module)) {
      last_gather = k;
    }
  }
  if (last_gather && 2 * subtree_end(out_.gathers[*last_gather].module) - 1 >= split_time(out_.splits[last_split])) {
    return;
  }
  // Which output stays split: the model's first traced tensor output.
  int64_t output = 0;
  std::string shape;
  if (const model::ModuleCalls* root = workload_->FindCalls(""); root != nullptr && !root->calls.empty()) {
    const std::vector<model::Value>& outs = root->calls.front().outputs;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].IsTensor()) {
        output = static_cast<int64_t>(i);
        shape = " (shape " + ShapeText(outs[i].shape) + ")";
        break;
      }
    }
  }
  const BoundSplit& first = out_.splits.front();
  const std::string what = SplitWhat(first.split);
  auto builder = diags_.Build(split_ranges_.front(), OutputNotGathered, what, Display(graph_.modules[first.module].path),
                              output, graph_.class_name, shape, out_.mesh.Cp(), CpDegreeText(out_.mesh));
  if (last_split != 0 && split_ranges_[last_split].offset != split_ranges_.front().offset) {
    builder.Note(split_ranges_[last_split], LastSplitHere, Display(graph_.modules[out_.splits[last_split].module].path));
  }
  if (last_gather) {
    builder.Note(gather_ranges_[*last_gather], LastGatherHere,
                 Display(graph_.modules[out_.gathers[*last_gather].module].path));
  }
  builder.Emit();
}

void Binder::BindBranchSplit(model::ModuleId id, const syntax::ShardItem& item, const model::Value& value,
                             const std::string& what, std::vector<SourceRange>& ranges) {
  const int64_t cfg = out_.mesh.Cfg();
  plan::Split s = SplitOf(item, value, cfg, plan::kCfgAxis);
  if (cfg > 1 && s.global_size < cfg) {
    if (Once(Key(item.range, "branches"))) {
      diags_.Emit(item.range, FewerBranchesThanCfgRanks, what, Display(graph_.modules[id].path), s.global_size, s.dim,
                  workload_->name, cfg);
    }
    return;
  }
  if (SplitTwice(out_.cfg_splits, ranges, id, s, item, what)) return;
  out_.cfg_splits.push_back({id, std::move(s)});
  ranges.push_back(item.range);
}

// `calls`: each branch a forward call of the root's own, the items the arguments that differ.
void Binder::BindGuidanceCalls(const syntax::CpRule& rule) {
  const int64_t cfg = out_.mesh.Cfg();
  const std::optional<model::ModuleId> root = graph_.FindModuleId("");
  const model::ModuleCalls* calls = workload_->FindCalls("");
  if (!root || calls == nullptr || calls->calls.empty()) return;
  plan::GuidanceCalls g;
  for (const syntax::ShardItem& item : rule.items) {
    if (item.has_error) continue;
    std::string what;
    bool skip = false;
    if (Resolve(item, *root, calls->calls.front(), what, skip) == nullptr) continue;
    std::string name = item.target.argument.text;
    if (item.target.kind == syntax::TargetKind::kArgumentElement) name += "[" + std::to_string(item.target.index.value) + "]";
    g.arguments.push_back(name);
  }
  g.origin = OriginOf(rule.keyword_range);
  // Without a cfg axis the one group makes every call.
  g.branches = options_.branches > 0 ? options_.branches : cfg;
  if (g.branches < cfg) {
    diags_.Emit(rule.keyword_range, FewerCallsThanCfgRanks, g.branches, cfg);
    return;
  }
  g.per_group = plan::SplitSizes(g.branches, cfg);
  out_.guidance_calls = std::move(g);
}

void Binder::BindGuidance() {
  const int64_t cfg = out_.mesh.Cfg();
  std::vector<SourceRange> split_ranges;
  std::vector<std::pair<BoundGather, SourceRange>> gathers;
  if (ast_.guidance_parallel) {
    for (const syntax::CpRule& rule : ast_.guidance_parallel->rules) {
      if (rule.has_error) continue;
      if (rule.kind == syntax::CpRuleKind::kCalls) {
        BindGuidanceCalls(rule);
        return;  // structure_check.cpp keeps split and gather rules out of a section with `calls`
      }
      const bool split = rule.kind == syntax::CpRuleKind::kSplit;
      ForEachBoundItem(rule, split ? "split" : "gather", /*outputs_only=*/!split,
                       [&](model::ModuleId id, const model::ModuleCalls&, const syntax::ShardItem& item,
                           const model::Value& value, const std::string& what) {
                         if (split) {
                           BindBranchSplit(id, item, value, what, split_ranges);
                         } else {
                           gathers.push_back({{id, GatherOf(item, value, cfg, plan::kCfgAxis)}, item.range});
                         }
                       });
    }
  }
  if (cfg <= 1) return;
  if (out_.cfg_splits.empty()) {
    // A split that failed its own check was diagnosed already.
    if (split_ranges.empty() && diags_.error_count() == 0) {
      diags_.Emit(ast_.header_range, CfgAxisWithoutBranches, cfg, ast_.name.text);
    }
    return;
  }
  if (gathers.empty()) {
    const BoundSplit& first = out_.cfg_splits.front();
    diags_.Emit(split_ranges.front(), BranchesNeverGathered, SplitWhat(first.split),
                Display(graph_.modules[first.module].path), cfg);
    return;
  }
  std::set<int64_t> lengths;
  std::string lengths_text;
  for (const BoundSplit& s : out_.cfg_splits) {
    if (lengths.insert(s.split.global_size).second) {
      lengths_text += (lengths_text.empty() ? "" : ", ") + std::to_string(s.split.global_size) + " (" +
                      SplitWhat(s.split) + ")";
    }
  }
  for (auto& [g, range] : gathers) {
    if (!lengths.count(g.gather.global_size)) {
      if (Once(Key(range, "branches"))) {
        diags_.Emit(range, GatherNotOverBranches, Display(graph_.modules[g.module].path), g.gather.output,
                    g.gather.dim, g.gather.global_size, workload_->name, lengths_text);
      }
      continue;
    }
    out_.cfg_gathers.push_back(std::move(g));
  }
}

std::optional<BoundPlan> Binder::Run() {
  const uint32_t errors_before = diags_.error_count();
  out_.header_range = ast_.header_range;
  out_.plan_name = ast_.name.text;
  out_.plan_file = options_.plan_file;
  out_.model_class = ast_.model.text;
  out_.workload = options_.workload;
  out_.activation_bytes = options_.activation_bytes;
  workload_ = graph_.FindWorkload(options_.workload);
  if (workload_ == nullptr || graph_.modules.empty()) return std::nullopt;
  if (!CheckMesh()) return std::nullopt;
  if (ast_.model.text != graph_.class_name) {
    diags_.Emit(ast_.model.range, ModelClassMismatch, ast_.name.text, ast_.model.text, graph_.name, graph_.class_name);
    return std::nullopt;
  }
  if (ast_.context_parallel) {
    for (const syntax::CpRule& rule : ast_.context_parallel->rules) {
      if (rule.has_error) continue;
      switch (rule.kind) {
        case syntax::CpRuleKind::kSplit:
          BindSplitRule(rule);
          break;
        case syntax::CpRuleKind::kGather:
          BindGatherRule(rule);
          break;
        case syntax::CpRuleKind::kAttention:
          BindAttentionRule(rule);
          break;
        case syntax::CpRuleKind::kCalls:
          break;  // refused in context_parallel by structure_check.cpp
      }
    }
  }
  CheckGathers();
  CheckOutputGathered();
  ComputeShardedLengths();
  CheckGatherLengths();
  if (ast_.tensor_parallel) BindTpRules();
  CheckColwiseChains();
  BindAttentionSites();
  BindGuidance();
  if (diags_.error_count() != errors_before) return std::nullopt;
  return std::move(out_);
}

}  // namespace

std::optional<BoundPlan> Bind(const syntax::PlanAst& ast, const model::ModelGraph& graph, const BindOptions& options,
                              diag::Emitter& diags) {
  Binder binder(ast, graph, options, diags);
  return binder.Run();
}

}  // namespace weft::bind

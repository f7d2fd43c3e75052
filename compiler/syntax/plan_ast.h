#pragma once

// PlanAst: the output of the parse phase, from either surface form (DSL or JSON). Syntax
// only: names are not resolved, patterns are not matched, numbers are not checked against
// a model. Plain value types (vectors, strings, enums, optionals) with no parent pointers,
// so the AST copies, compares and dumps trivially.
//
// Contract with the binder (compiler/bind):
// - Every rule, and every token a later phase may report on (pattern, argument name,
//   index, dim, rank, style, mode, block size), carries a SourceRange: file id, byte offset,
//   byte length, 1-based line and byte column. For DSL plans a pattern's range covers its
//   quotes; for JSON plans ranges cover the JSON value (and the SourceBuffer knows the
//   value's JSON pointer, which diagnostics print).
// - A node whose syntax was broken has `has_error` set and may be incomplete (empty
//   strings, zero numbers). The parser has already reported it; later phases skip such
//   nodes silently instead of cascading. A node with has_error == false is complete:
//   every required field is present and every enum is a known value.
// - Patterns are syntactically valid globs when has_error is false: `*` (one path
//   segment), `{a,b}` alternation, `{m..n}` integer ranges (m <= n), literal segments of
//   [A-Za-z0-9_]; `""` is the root module. Globs are compiled by the binder.
// - Comments are kept (for `weft fmt`) but carry no meaning.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/source/source_range.h"

namespace weft::syntax {

using source::SourceRange;

// Comment lines attached to a node: `leading` are whole-line comments just before it,
// `trailing` is a comment at the end of its (last) line. Text excludes the `#` and one
// following space.
struct Comments {
  std::vector<std::string> leading;
  std::optional<std::string> trailing;

  bool empty() const { return leading.empty() && !trailing; }
};

// An identifier as written (plan name, model class, argument name, config name).
struct Name {
  std::string text;
  SourceRange range;
};

// A non-negative integer literal.
struct IntLit {
  int64_t value = 0;
  SourceRange range;
};

// A module-path glob. `text` is the pattern without quotes; "" is the root module.
struct Pattern {
  std::string text;
  SourceRange range;
};

// Which tensor a split or gather item addresses.
enum class TargetKind : uint8_t {
  kArgument,         // a forward argument, by name: `hidden_states`
  kArgumentElement,  // element `index` of a tuple/list argument: `image_rotary_emb[0]`
  kOutput,           // forward output `index`: `output 0` (split after forward, or gather)
};

struct Target {
  TargetKind kind = TargetKind::kArgument;
  Name argument;  // kArgument, kArgumentElement
  IntLit index;   // kArgumentElement: element index; kOutput: output index
  SourceRange range;
};

// One tensor of a split or gather rule: `hidden_states dim 1 rank 3 optional`.
struct ShardItem {
  Target target;
  IntLit dim;                           // tensor dim to split along or gather along
  std::optional<IntLit> rank;           // declared tensor rank
  std::optional<SourceRange> optional;  // present: skip (do not fail) when the rank differs
  Comments comments;
  SourceRange range;
  bool has_error = false;
};

enum class CpRuleKind : uint8_t {
  kSplit,      // split inputs before forward (or outputs after forward, `output N`)
  kGather,     // gather outputs after forward
  kAttention,  // declare how attention call sites inside matching modules run
  kCalls,      // guidance_parallel only: each branch is a forward call of its own; the items name
               // the root's arguments that differ between the branches' calls
};

enum class AttentionMode : uint8_t {
  kContextParallel,  // the site runs ring / ulysses / USP attention over the CP axes
  kLocal,            // the site runs local attention; its K/V must be replicated
};

// A rule of the `context_parallel` section.
struct CpRule {
  CpRuleKind kind = CpRuleKind::kSplit;
  SourceRange keyword_range;  // `split`, `gather` or `attention`
  Pattern pattern;
  std::vector<ShardItem> items;  // kSplit, kGather (gather items are all kOutput)
  AttentionMode mode = AttentionMode::kContextParallel;  // kAttention
  SourceRange mode_range;                                // kAttention
  Comments comments;
  std::vector<std::string> end_comments;  // before the `}` of a braced item list
  SourceRange range;
  bool has_error = false;
};

enum class TpStyle : uint8_t { kColwise, kRowwise, kReplicate };

// A block size of a packed style: a literal or the name of a graph config value.
struct BlockSize {
  bool is_name = false;
  int64_t value = 0;  // !is_name
  std::string name;   // is_name
  SourceRange range;
};

// `packed [a, b, ...]`: the weight is a concatenation of blocks, each sharded separately.
// Literals are proportions or absolute sizes (the binder scales them to the dimension).
struct Packed {
  std::vector<BlockSize> blocks;
  SourceRange range;
};

// A rule of the `tensor_parallel` section: `colwise "pattern" packed [..] optional`.
struct TpRule {
  TpStyle style = TpStyle::kColwise;
  SourceRange style_range;
  Pattern pattern;
  std::optional<Packed> packed;  // colwise / rowwise only
  // `optional`: a pattern that matches no module is skipped instead of an error (Wan's I2V-only
  // image K/V projections, absent from its T2V models of the same class).
  std::optional<SourceRange> optional;
  Comments comments;
  SourceRange range;
  bool has_error = false;
};

struct ContextParallelSection {
  std::vector<CpRule> rules;  // in source order
  Comments comments;          // before the section keyword
  std::vector<std::string> end_comments;  // before the closing `}`
  SourceRange range;          // the section keyword
};

struct TensorParallelSection {
  std::vector<TpRule> rules;  // in source order
  Comments comments;
  std::vector<std::string> end_comments;
  SourceRange range;
};

// A whole plan: `plan <name> for <model>` and at most one section of each kind.
struct PlanAst {
  source::FileId file;
  Name name;
  Name model;  // the model class the plan is written for
  Comments comments;  // before `plan`
  SourceRange header_range;
  std::optional<ContextParallelSection> context_parallel;
  std::optional<TensorParallelSection> tensor_parallel;
  // Splits and gathers over the cfg axis (guidance branches along the batch); the same rule
  // forms as context_parallel except `attention`, which the parser refuses here.
  std::optional<ContextParallelSection> guidance_parallel;
  std::vector<std::string> end_comments;  // after the last section
  bool has_error = false;  // some part failed to parse (and was diagnosed)
};

// Keyword spellings, shared by the DSL printer, the JSON form and diagnostics.
const char* TpStyleName(TpStyle style);             // "colwise", "rowwise", "replicate"
const char* AttentionModeName(AttentionMode mode);  // "context_parallel", "local"
const char* CpRuleKindName(CpRuleKind kind);        // "split", "gather", "attention"

}  // namespace weft::syntax

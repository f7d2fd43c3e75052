#pragma once

// A plan proposed from a program's dataflow (`weft suggest`), before any check: which values to
// split, where to gather, which attention runs context-parallel, which Linears to shard over tp,
// and how the guidance branches ride the batch. Every rule keeps the reason that decided it
// (the node, input or size), which the rendered plan prints as a comment.
//
// The sequence of a model is read off its attention: a scaled_dot_product_attention whose
// queries and keys have the same symbolic length is self-attention over that length (joint
// attention: over a sum of lengths, `s_txt + s_img`, each a stream). A value carries tokens
// along a dim whose symbolic size is such a length or one of its streams. The plan splits each
// token-carrying value at its *source*: a module boundary (a forward argument of the root, an
// argument or output of a module call the export preserved) whose token dim no earlier split
// reaches; the walk follows token dims forward by their symbolic sizes. Each source keeps the
// boundaries downstream of it, in program order, as fallbacks: when the checks refuse a split
// where it is (the root derives a length from it, a mask is read whole), the split moves to the
// next boundary (QwenImage: from the root's `hidden_states` to block 0's).
//
// Tokens a view folds into the dims before them (Latte's (batch x tokens, frames, C) for its
// temporal attention) are followed as folded rows, found again where a view parts them, and an
// attention over such rows is not proposed context-parallel (it runs local on each rank's rows).
// Sizes are compared in one spelling per function of the input sizes (equal_sizes.h).
//
// The program's outputs are gathered at the last module output on their way that still carries
// the split dim (before an unpatchify reshapes it away); for each source alone too
// (gathers_of_source): when two sources refuse each other's splits (Latte's tokens and frames,
// each folded into the other's rows) driver/suggest_command.cpp tries each alone. Tensor parallelism follows the attention
// sites: the Linears that produce Q, K and V (through reshapes, norms over a head, RoPE) are
// colwise, the ones that read the attention's output rowwise (packed when the output is
// concatenated with another colwise stream first, Flux's single blocks), a norm over all heads
// before the head reshape colwise too; a feed-forward is a Linear reading tokens whose output
// reaches another Linear through activations only, mapping back to the tokens' width (colwise,
// then rowwise). Guidance branches: every forward argument whose dim 0 is the attention's
// symbolic batch is split along it over cfg, and every output along dim 0 gathered.
//
// When no split flows through the model (a history cut inside each block, a convolution over
// the positions), the fallback is an island per self-attention module: its token arguments split
// where it is called, its outputs gathered where it returns (island_*).
//
// Nothing here is proven: driver/suggest_command.cpp checks the rendered plan with the checks of
// a written one and moves or drops the rules they refuse.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/program/program.h"

namespace weft::program {

// Why no plan can be proposed at all (no attention; token lengths fixed at export).
class SuggestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One split: `module` (a glob, "" the root) and its argument `argument` or output `output`.
struct SuggestedSplit {
  std::string module;
  std::string argument;  // "" for an output; `arg[i]` for a leaf of a list argument, as a plan names it
  int64_t output = -1;
  int64_t dim = 0;
  int64_t rank = 0;
  std::string why;
};

struct SuggestedGather {
  std::string module;
  int64_t output = 0;
  int64_t dim = 0;
  int64_t rank = 0;
  std::string why;
};

// A value to split and where it may be split, first choice first.
struct TokenSource {
  std::vector<SuggestedSplit> at;
  size_t current = 0;
  bool dropped = false;
};

struct SuggestedAttention {
  std::string module;  // a glob
  bool context_parallel = true;
  std::string why;
};

struct SuggestedTp {
  std::string pattern;  // a glob
  std::string owner;    // the attention module or feed-forward the rule shards (dropped together)
  bool colwise = true;
  std::vector<int64_t> packed;  // rowwise over concatenated blocks: their widths
  std::string why;
};

struct Suggestion {
  std::string class_name;
  std::string plan_name;
  std::vector<TokenSource> sources;
  std::vector<SuggestedGather> gathers;
  // For each source, the gathers of its tokens alone: where each forward output's value is last
  // a module's output holding them (a stream folded into another's rows past the output's nearest
  // boundary: Latte's tokens, gathered after `proj_out` where its frames reach the output itself).
  std::vector<std::vector<SuggestedGather>> gathers_of_source;
  std::vector<SuggestedAttention> attention;
  std::vector<SuggestedAttention> attention_deferred;  // refused while other rules moved; retried last
  std::vector<SuggestedTp> tp;
  std::string tp_dropped;  // why the tensor-parallel rules were left out ("" when kept or none)
  // Why no context_parallel section can be proposed at all (no self-attention over a symbolic
  // length: Sana's linear attention, token lengths the export fixed); tensor parallelism and the
  // guidance branches are still proposed.
  std::string cp_dropped;
  // The fallback when no split flows through the model (Helios cuts its history out inside each
  // block): each self-attention module split where it is called and gathered where it returns,
  // run context-parallel -- its quadratic work divided, one all-gather per call.
  std::vector<TokenSource> island_sources;
  std::vector<SuggestedGather> island_gathers;
  std::vector<SuggestedAttention> island_attention;
  std::vector<SuggestedSplit> cfg_splits;
  std::vector<SuggestedGather> cfg_gathers;
  std::string cfg_dropped;
  int64_t min_heads = 0;  // the fewest heads of any context-parallel attention site
  std::vector<std::string> notes;  // what the checks moved or dropped, for the plan's header
  // Splits the checks refused (module, argument, output, dim): never proposed again.
  std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> refused;
  bool Refused(const SuggestedSplit& x) const;
  void Refuse(const SuggestedSplit& x);
};

// Proposes a plan for `program`. Throws SuggestError when no attention site exists. When no
// self-attention runs over a symbolic length (none at all, or the export specialised the token
// inputs: cp_dropped names them and how to export them dynamic), the plan has no context-parallel
// rules.
Suggestion SuggestPlan(const Program& program);

// Where to split `value` along `dim` so that it lines up with a split it meets: the module
// boundaries it is computed from (through layout ops and elementwise ops, following the dim by its
// size, up to an attention, whose queries it does not trace), each as a split of that boundary,
// nearest first; empty when the dim cannot be followed to one.
std::vector<SuggestedSplit> SplitsWhereMade(const Program& program, const std::string& value, int64_t dim);

// One line of a rendered plan that comes from a rule (for mapping a checker's diagnostic back).
struct RenderedRule {
  enum class Kind : uint8_t { kSplit, kGather, kAttention, kTp, kCfg };
  Kind kind = Kind::kSplit;
  size_t index = 0;  // into sources (kSplit), gathers, attention, tp, or cfg_splits then cfg_gathers
  uint32_t line = 0;
};

// The plan text (weft's DSL), each rule with its reason as a comment; `rules` receives the line
// of every rule.
std::string RenderSuggestion(const Suggestion& s, std::vector<RenderedRule>* rules);

// "transformer_blocks.3.attn.to_out.0" -> "transformer_blocks.*.attn.to_out.0": the first
// all-digit segment (the index of the blocks) as `*`; indices inside a block (a Sequential's
// `to_out.0`) stay.
std::string GlobOfPath(const std::string& path);

// Merges the splits of one argument (or output) of sibling modules `P.i` whose indices run
// without a gap -- HiDream's 49 caption projections, one text stream each -- into one rule of
// `P.{lo..hi}` (the same modules, one line to review). True when any merged.
bool MergeSiblingSplits(Suggestion& s);

}  // namespace weft::program

#pragma once

// Why a plan cannot become edits of a program: which check of the lowering or of its dataflow
// failed, at which plan rule, on which node. `weft check --program` reports each check as its
// own diagnostic kind, located at the rule (compiler/driver/check_command.cpp); weft-run prints
// the message, which names all of it too.

#include <cstdint>
#include <string>
#include <utility>

#include "compiler/plan/execution_plan.h"
#include "compiler/program/archive.h"

namespace weft::program {

// How a program error cites the plan rule an edit comes from: " (rule at file:line:col)", or ""
// when the origin is unknown.
inline std::string RuleAt(const plan::Origin& origin) {
  return origin.Known() ? " (rule at " + origin.ToString() + ")" : "";
}

enum class EditCheck : uint8_t {
  kProgramLacksValue,         // the plan names a module call, argument, output, attention or parameter
                              // the program lacks
  kFullLengthWithoutShard,    // a node on shards needs a split's full length that no shard carries
  kCpAttentionOverWholeKeys,  // context-parallel attention whose keys no split reaches along their sequence
  kMaskNotLaidOutWithKeys,    // a context-parallel attention's mask laid out otherwise than its keys
  kTpReducesShardedDim,       // a reduction, softmax, norm, merge, slice or split across a tp-sharded dim
  kTpColwiseEscapes,          // a colwise output reaching a whole Linear or mixed with a whole tensor
  kTpRowwiseInputNotSharded,  // a rowwise Linear whose input is not sharded as its weight
  kTpAttentionHeadsMismatch,  // Q, K and V of an attention not sharded alike along the heads
  kTpUnsupportedOperator,     // an operator the TP rewrite cannot shard through
  kTpShardReachesOutput,      // a tp-sharded value reaching the program's output
  kCpReducesSplitDim,         // a reduction, softmax, norm, merge, slice or split across a split sequence dim
  kCpSplitMixedWithWhole,     // a split tensor combined with a whole one along the split dim
  kLocalAttentionOverSplitKeys,  // attention over split keys that the plan leaves local
  kCpUnsupportedOperator,     // an operator a split cannot pass through
  kSplitNeverGathered,        // a split value reaching the program's output
  kGatherOfUnsplitValue,      // a gather of a value that no split reaches
  kGatherOnOtherDim,          // a gather along another dim than the one its value is split on
  kSplitOfSplitValue,         // a split of a value that a split already reaches
  kSplitOfJointSequence,      // a split, as one stream, of a joint sequence whose streams other splits cut
};

class PlanEditError : public ProgramError {
 public:
  PlanEditError(EditCheck check, plan::Origin origin, const std::string& message, std::string node = "",
                std::string module = "")
      : ProgramError(message), check_(check), origin_(std::move(origin)), node_(std::move(node)),
        module_(std::move(module)) {}

  EditCheck check() const { return check_; }
  // The plan rule the failing edit comes from (unknown when none).
  const plan::Origin& origin() const { return origin_; }
  // The program node and its module, when one node is at fault.
  const std::string& node() const { return node_; }
  const std::string& module() const { return module_; }
  // A whole value the split or sharding met along its dim (SplitMixedWithWhole, ColwiseEscapes):
  // the value and its dim that a split of its own would line up; "" and -1 otherwise. `weft
  // suggest` splits it where it is made.
  const std::string& whole_value() const { return whole_value_; }
  int64_t whole_dim() const { return whole_dim_; }
  PlanEditError& WithWhole(std::string value, int64_t dim) {
    whole_value_ = std::move(value);
    whole_dim_ = dim;
    return *this;
  }

 private:
  EditCheck check_;
  plan::Origin origin_;
  std::string node_;
  std::string module_;
  std::string whole_value_;
  int64_t whole_dim_ = -1;
};

}  // namespace weft::program

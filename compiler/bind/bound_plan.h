#pragma once

// BoundPlan: a plan resolved against one model graph, one mesh and one workload. Every glob is
// expanded to concrete modules, every argument/output resolved against the forward signature
// and the trace, every size read from the trace, every check of design.md 5.2 passed. Still
// per rule (the lowering merges rules per module and adds costs). Plain data; module ids index
// the graph the plan was bound against, which the lowering receives alongside.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/model/graph.h"
#include "compiler/plan/execution_plan.h"
#include "compiler/source/source_range.h"

namespace weft::bind {

// One tensor split at one module (from a split rule item).
struct BoundSplit {
  model::ModuleId module = 0;
  plan::Split split;  // target, dim, rank, sizes, origin: final
};

// One output gathered at one module.
struct BoundGather {
  model::ModuleId module = 0;
  plan::Gather gather;
};

// How one attention site runs. Every traced site of the graph has one entry.
struct BoundAttention {
  model::ModuleId module = 0;
  bool context_parallel = false;  // else local
  bool kv_sharded = false;        // derived: its K/V carry a split sequence
  bool q_sharded = false;         // derived: its queries carry a split sequence
  plan::Origin origin;            // the attention rule, or the split that made K/V sharded
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t local_heads = 0;  // heads / tp when TP shards the site's projections
  int64_t head_pad = 0;     // Ulysses padding (ulysses_anything)
  int64_t q_len = 0;   // first traced call, global
  int64_t kv_len = 0;
  int64_t calls = 0;   // attention calls per forward at this site
};

// One TP-sharded (or explicitly replicated) module.
struct BoundTp {
  model::ModuleId module = 0;
  plan::ShardStyle style = plan::ShardStyle::kReplicate;
  std::vector<int64_t> blocks;  // resolved absolute block sizes (packed), else empty
  plan::Origin origin;
};

struct BoundPlan {
  source::SourceRange header_range;  // the plan's `plan ... for ...` line, for whole-plan diagnostics
  std::string plan_name;
  std::string plan_file;
  std::string model_class;
  plan::Mesh mesh;
  std::string workload;              // the graph workload the sizes come from
  int64_t activation_bytes = 2;      // bytes per activation element in the cost model
  std::vector<BoundSplit> splits;    // in rule order, then module order
  std::vector<BoundGather> gathers;
  std::vector<BoundAttention> attention;  // in module order
  std::vector<BoundTp> tp;                // in module order
  // The guidance_parallel section's splits and gathers (Split::group / Gather::group "cfg"),
  // apart from the context-parallel ones: they cut the batch, not a sequence, so nothing of the
  // CP checks (sharded lengths, K/V) applies to them.
  std::vector<BoundSplit> cfg_splits;
  std::vector<BoundGather> cfg_gathers;
  // Or the branches as forward calls of their own (`calls`), on a cfg axis of more than one rank.
  std::optional<plan::GuidanceCalls> guidance_calls;
  // Sequence lengths the plan splits (and their sums): a traced tensor with one of these
  // lengths on some dim is treated as carrying a split sequence (cost model, K/V check).
  std::vector<int64_t> sharded_lengths;
};

}  // namespace weft::bind

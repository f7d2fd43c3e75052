#pragma once

// ExecutionPlan: the plain-data contract between the compiler and the executor (design.md 3,
// rule 4). Concrete per-module steps for one model graph, one mesh and one workload: no globs,
// no AST, every size resolved to a number, every step carrying the origin (file:line:col) of
// the plan rule that produced it, and a cost section. Serialised as versioned JSON with a
// content hash (compiler/plan/plan_json.h); the format is documented in compiler/plan/README.md.
//
// Depends on nothing but the standard library, so the executor can include it freely.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::plan {

inline constexpr std::string_view kPlanFormat = "weft.plan/1";
inline constexpr int kPlanVersion = 1;

// Where a step came from: the plan rule's position (1-based; 0 = unknown). A step the compiler
// derived without a rule (e.g. an attention site made context-parallel because its K/V are
// split) has `derived` set and points at the rule that caused it when there is one.
struct Origin {
  std::string file;
  int line = 0;
  int col = 0;
  bool derived = false;

  bool Known() const { return line > 0; }
  // "file:line:col", or "<derived>" when nothing is known.
  std::string ToString() const;
};

// ---------------------------------------------------------------------------------------------
// Mesh and workload

// Well-known axis names. A mesh may carry other axes (e.g. "fsdp"); the compiler gives them no
// meaning. "cp" is not a mesh axis: it names the flattened ring x ulysses group (CP rank
// k = ring_index * ulysses + ulysses_index), over which activations are split and gathered.
// "cfg" holds guidance branches: the batch is split over it (a plan's guidance_parallel section).
inline constexpr std::string_view kRingAxis = "ring";
inline constexpr std::string_view kUlyssesAxis = "ulysses";
inline constexpr std::string_view kTpAxis = "tp";
inline constexpr std::string_view kCfgAxis = "cfg";
inline constexpr std::string_view kCpGroup = "cp";

enum class RotateMethod : uint8_t {
  kAllGather,  // every ring rank gathers all K/V once (diffusers' behaviour)
  kP2p,        // K/V blocks rotate to the next rank each step; O(S/R) K/V per rank
};
std::string_view RotateMethodName(RotateMethod m);
std::optional<RotateMethod> ParseRotateMethod(std::string_view name);  // also accepts "alltoall"

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

struct Mesh {
  std::vector<MeshAxis> axes;  // world order, outermost first (the innermost axis has
                               // contiguous ranks; by default ulysses is innermost)
  int64_t world_size = 1;      // == product of axis sizes
  bool ulysses_anything = false;
  bool ring_anything = false;
  bool convert_to_fp32 = true;
  RotateMethod rotate_method = RotateMethod::kAllGather;
  // The groups each block's parameters are sliced over (--shard-weights): kCpGroup and/or
  // kCfgAxis, in that order; empty = every rank holds its parameters whole.
  std::vector<std::string> weight_axes;

  // Size of `axis`, 1 when the mesh has no such axis.
  int64_t Size(std::string_view axis) const;
  int64_t Ring() const { return Size(kRingAxis); }
  int64_t Ulysses() const { return Size(kUlyssesAxis); }
  int64_t Tp() const { return Size(kTpAxis); }
  int64_t Cfg() const { return Size(kCfgAxis); }
  // Ranks a block's parameters are sliced over: the product of `weight_axes`' sizes.
  int64_t WeightRanks() const;
  int64_t Cp() const { return Ring() * Ulysses(); }
  bool Uneven() const { return ulysses_anything || ring_anything; }
  // "ring=2,ulysses=2,tp=1"
  std::string ToString() const;
};

struct Workload {
  std::string name;                                         // the graph's workload name
  std::vector<std::pair<std::string, std::string>> params;  // name -> canonical JSON value
};

// ---------------------------------------------------------------------------------------------
// Steps

// Split one tensor along `dim` over `group` (the CP group, or the cfg axis: guidance branches
// along the batch); rank r of the group keeps `sizes[r]` entries (contiguous, in rank order).
// Even splits are `chunk`, uneven ones `tensor_split` (first ranks one more).
struct Split {
  enum class Target : uint8_t {
    kArgument,  // a forward argument, before forward (by name; `element` picks a tuple element)
    kOutput,    // output `output` of forward, after forward (diffusers' split_output)
  };
  Target target = Target::kArgument;
  std::string group = std::string(kCpGroup);  // kCpGroup or kCfgAxis
  std::string argument;      // kArgument
  int64_t element = -1;      // kArgument: tuple/list element, -1 = the argument itself
  int64_t output = -1;       // kOutput
  int64_t dim = 0;           // non-negative
  int64_t rank = 0;          // the traced (and declared) tensor rank
  bool optional = false;     // the argument may be absent or None at run time: then skip
  int64_t global_size = 0;   // length of `dim` before the split
  std::vector<int64_t> sizes;  // per CP rank; sums to global_size
  bool uneven = false;       // sizes differ (only with an anything mode)
  Origin origin;
};
std::string_view SplitTargetName(Split::Target t);

// All-gather output `output` along `dim` over `group` (as Split) after forward; every rank ends
// with the full tensor. `sizes` are the per-rank lengths being gathered.
struct Gather {
  std::string group = std::string(kCpGroup);
  int64_t output = 0;
  int64_t dim = 0;
  int64_t rank = 0;
  int64_t global_size = 0;
  std::vector<int64_t> sizes;
  bool uneven = false;
  Origin origin;
};

enum class AttentionMode : uint8_t {
  kLocal,    // plain attention on the local Q and the (replicated) K/V; no collectives
  kUlysses,  // all-to-all heads <-> sequence on the ulysses axis
  kRing,     // K/V rotate (or are all-gathered) on the ring axis, LSE merge
  kUsp,      // Ulysses on the ulysses axis, ring on the ring axis
};
std::string_view AttentionModeName(AttentionMode m);
std::optional<AttentionMode> ParseAttentionMode(std::string_view name);

struct Attention {
  AttentionMode mode = AttentionMode::kLocal;
  int64_t heads = 0;        // of the model
  int64_t head_dim = 0;
  int64_t local_heads = 0;  // heads / tp (what this rank's projections produce)
  int64_t head_pad = 0;     // zero heads appended so (local_heads + head_pad) % ulysses == 0
  int64_t ulysses = 1;
  int64_t ring = 1;
  bool uneven_sequence = false;  // per-rank sequence lengths differ
  RotateMethod rotate_method = RotateMethod::kAllGather;  // ring / usp
  bool convert_to_fp32 = true;                            // ring / usp: fp32 out/LSE merge
  int64_t q_len = 0;        // global query length of one call (first traced call)
  int64_t kv_len = 0;       // global key/value length of one call
  // Its attn_mask is over (query, key) pairs and reaches it whole (a sliding window, segments of
  // packed samples): each rank applies the rows of its queries and the columns of each key block
  // (runtime/attention CpAttentionOptions::pair_mask); nothing of it moves. Set on programs.
  bool pair_mask = false;
  // A linear attention (softmax-free: Sana's ReLU kernel, V^T K summed over the keys, then times
  // Q): each rank sums over its split of the keys and the sums are all-reduced over the CP group
  // (a program's kAllReduce edit, group cp); no query, key or value moves, whatever the mode says
  // of the axes. Set on programs.
  bool linear = false;
  Origin origin;
};

enum class ShardStyle : uint8_t {
  kColwise,        // weight rows / bias sharded: output features split
  kRowwise,        // weight columns sharded, bias replicated; output all-reduced
  kReplicate,      // every rank holds the full parameter
  kPackedColwise,  // colwise per block of a fused weight, block order kept
  kPackedRowwise,  // rowwise per block of a fused weight
};
std::string_view ShardStyleName(ShardStyle s);
std::optional<ShardStyle> ParseShardStyle(std::string_view name);

// How one parameter of a TP-sharded module is laid out on each rank.
struct ParamShard {
  std::string name;                  // "weight", "bias"
  int64_t dim = -1;                  // sharded dim, -1 = replicated
  std::vector<int64_t> blocks;       // block sizes along `dim` (one block = plain style)
  std::vector<int64_t> full_shape;
  std::vector<int64_t> local_shape;  // per rank
};

struct TensorParallel {
  ShardStyle style = ShardStyle::kReplicate;
  std::vector<int64_t> blocks;     // resolved block sizes (packed styles), else one block
  std::vector<ParamShard> params;
  bool all_reduce_output = false;  // rowwise: sum partial outputs over the tp axis
  Origin origin;
};

// ---------------------------------------------------------------------------------------------
// Cost

enum class CollectiveOp : uint8_t { kAllToAll, kAllGather, kAllReduce, kSendRecv };
std::string_view CollectiveOpName(CollectiveOp op);
std::optional<CollectiveOp> ParseCollectiveOp(std::string_view name);

// `count` collectives of one kind on one group, and the bytes one rank sends for all of them
// (formulas: shared/reference/peers-and-limits.md (c); compiler/plan/cost.h).
struct Collective {
  CollectiveOp op = CollectiveOp::kAllGather;
  std::string axis;  // "ring", "ulysses", "tp" or "cp"
  int64_t count = 0;
  int64_t bytes = 0;
};

// Cost of one call of a step's module (multiply by ModuleStep::calls for a forward).
struct StepCost {
  std::vector<Collective> collectives;
  int64_t weight_bytes = 0;      // this module's own parameters, per rank after sharding
  int64_t activation_bytes = 0;  // inputs + outputs of one call on one rank
};

struct AxisTraffic {
  std::string axis;
  int64_t collectives = 0;
  int64_t bytes = 0;  // sent per rank per forward
};

struct PlanCost {
  std::vector<AxisTraffic> per_axis;  // sorted by axis name; axes with no traffic left out
  int64_t collectives = 0;            // per forward
  int64_t bytes = 0;                  // per rank per forward, all axes
  int64_t weight_bytes = 0;           // per rank: every parameter after sharding (TP shards, weight slices)
  int64_t weight_buffer_bytes = 0;    // per rank: the buffers sliced blocks are gathered into (two)
  int64_t activation_bytes = 0;       // per rank: the largest single call's inputs + outputs
};

// A block whose parameters are sliced over the weight ranks (Mesh::weight_axes): their bytes
// laid out one after the other (each as this rank's tp shard holds it, in its own dtype, at an
// offset aligned to 64 bytes), padded to `ranks` x `slice_bytes`; weight rank r keeps bytes
// [r x slice_bytes, (r + 1) x slice_bytes). Before the block runs they are all-gathered into a
// reused buffer, and the parameters are views of it.
struct WeightBlock {
  std::string module;                        // an element of a module list: "transformer_blocks.3"
  std::vector<std::string> params;           // fqns
  std::vector<std::vector<int64_t>> shapes;  // each as this rank holds it before slicing
  std::vector<std::string> dtypes;           // the graph's dtype names ("f32", "bf16" ...)
  std::vector<int64_t> offsets;              // byte offset of each in the block's layout
  int64_t bytes = 0;                         // the layout's length (before padding)
  int64_t slice_bytes = 0;                   // ceil(bytes / ranks)
};

struct WeightPlacement {
  int64_t ranks = 1;
  std::vector<WeightBlock> blocks;  // in module order, which is the order they run in
};

// Everything the executor does at one module. Execution order at the module: split arguments,
// forward (attention per `attention`, weights per `tp`), split outputs, gather outputs.
struct ModuleStep {
  std::string module;  // fqn, "" = the root
  int64_t calls = 1;   // calls per forward (from the trace)
  std::vector<Split> splits;
  std::vector<Gather> gathers;
  std::optional<Attention> attention;
  std::optional<TensorParallel> tp;
  StepCost cost;
};

// ---------------------------------------------------------------------------------------------
// Programs

// A stream of a joint sequence that every rank of the CP group holds whole while the others are
// split (Mochi joins each sample's valid text tokens to the rank's video tokens): `value`'s dim
// `dim` holds its length at run time; `at` is where its rows lie in an attention's Q or K/V, around
// the split rows: "q_before", "q_after", "kv_before" or "kv_after".
struct WholePart {
  std::string value;
  int64_t dim = -1;
  std::string at;
  bool operator==(const WholePart& o) const { return value == o.value && dim == o.dim && at == o.at; }
};

// One edit of a torch.export program (compiler/program): what a plan step becomes when the model
// is a program. Values and nodes are named as in the program's graph; the executor applies the
// edits mechanically when it loads the program (compiler/program/edits.h).
struct ProgramEdit {
  enum class Kind : uint8_t {
    kSplit,      // `value` split along `dim` over the CP group, for the uses inside module `scope`
                 // ("" with `after_producer`: every use after it is produced); with `node`, for
                 // that node's use only (a whole operand a shard meets, local_sizes.h)
    kGather,     // `value` all-gathered along `dim` over the CP group right after it is produced
    kAttention,  // `node`, a scaled_dot_product_attention, runs as `attention`
    kAllReduce,  // `value`, a rowwise Linear's output (`node`), summed over the tp group; its bias
                 // (parameter value `bias`, "" = none) added once, after the sum. With `group` cp:
                 // a matmul's partial sums over split keys (a linear attention), summed over the CP group.
                 // With `new_value` > 0: a sum or mean over the tp-sharded dim (a hand-written RMS norm
                 // over all heads), divided by `new_value` after the sum (tp for a mean, 1 for a sum)
    kArgument,   // argument `argument` of `node`, element `element` (-1 = the argument), becomes
                 // `new_value` (a head count of a reshape under tensor parallelism)
    kNormStats,  // `node` (an RMS norm over a tp-sharded width) takes its statistics over the tp group;
                 // `new_value` is the full normalized width
    kHalo,       // `node`, a convolution whose input `value` is split along spatial dim `dim`, reads
                 // it with `new_value` rows of each neighbouring CP rank's part on either side (zeros
                 // beyond the first and last part) and pads none along `dim` itself
  };
  Kind kind = Kind::kSplit;
  std::string group = std::string(kCpGroup);  // kSplit: kCpGroup, kCfgAxis or kTpAxis (a whole value sliced where it meets tp-sharded heads); kGather: kCpGroup or kCfgAxis; kAllReduce: kTpAxis or kCpGroup
  std::string value;
  std::string node;
  std::string scope;
  bool after_producer = false;  // kSplit of a module output
  int64_t dim = 0;
  int64_t rank = 0;
  bool uneven = false;
  std::string argument;
  int64_t element = -1;
  int64_t new_value = 0;
  std::string bias;
  // kSplit of a tensor whose `dim` lays out several split streams one after the other (a joint
  // attention mask over (video, text) keys): the symbolic ints holding each part's full length,
  // in layout order. Each part is split on its own and this rank's parts concatenated, as the
  // ranks' K/V are laid out. Empty: the dim is one stream.
  std::vector<std::string> parts;
  // kSplit over the CP group of a stream that a view parts into rows (shard_flow.h: Sana's tokens
  // viewed as the latent grid): the symbolic ints, or integer literals, whose product is one row's
  // length. Each rank takes whole rows (SplitSizes of the rows), at least `min_rows` of them (the
  // widest halo a convolution over them reads). Empty: any length.
  std::vector<std::string> unit;
  // The same for a view that gives the rows a count and infers the row's length (Wan Animate's
  // face adapter views its tokens as (frames, tokens per frame), the frame count read off the
  // face video): the stream is `rows` rows of equal length, taken whole -- a symbolic int or an
  // integer literal. Empty: no such view.
  std::string rows;
  int64_t min_rows = 0;
  // kAttention over a joint sequence with streams every rank holds whole: each such stream, in
  // layout order (runtime/attention AttentionWithWholeRows). Empty: every stream is split.
  std::vector<WholePart> whole_parts;
  std::optional<Attention> attention;
  std::string module;  // the plan step's module, for messages
  Origin origin;
};
std::string_view ProgramEditKindName(ProgramEdit::Kind k);
std::optional<ProgramEdit::Kind> ParseProgramEditKind(std::string_view name);

struct ProgramEdits {
  std::string program;       // the program file as given to the compiler
  std::string program_hash;  // "sha256:" of its models/model.json; the executor compares it
  std::vector<ProgramEdit> edits;  // in program order
};

// Guidance branches as forward calls of their own (guidance_parallel `calls`): every cfg rank
// group runs the calls of a contiguous block of the branches (SplitSizes(branches, cfg): the
// first groups one more when cfg does not divide them), each call on the job's inputs with
// `arguments` taken from that branch's; the outputs are then all-gathered over cfg in branch
// order. The steps and their costs are one call's; the plan's cost counts the first group's
// calls (the most) and the gather.
struct GuidanceCalls {
  std::vector<std::string> arguments;  // forward arguments (leaf paths: `x[0]`) given per branch
  int64_t branches = 0;
  std::vector<int64_t> per_group;      // calls each cfg group runs, in cfg rank order
  int64_t output_bytes = 0;            // one branch's outputs (the gather's unit)
  Origin origin;                       // the `calls` rule
};

struct ExecutionPlan {
  int version = kPlanVersion;
  std::string plan_name;    // `plan flux for ...`
  std::string plan_file;    // the plan's source file as given to the compiler
  std::string model_class;  // e.g. "FluxTransformer2DModel"
  std::string graph_name;
  std::string graph_hash;   // "sha256:..." (model::GraphHash); the executor compares it
  Mesh mesh;
  Workload workload;
  std::vector<ModuleStep> steps;  // in the graph's module order; each module at most once
  PlanCost cost;
  // When the plan was compiled against a program: the steps as edits of its graph.
  std::optional<ProgramEdits> program;
  // When the mesh slices weights (Mesh::weight_axes over more than one rank).
  std::optional<WeightPlacement> weights;
  // When the guidance branches are forward calls of their own (a cfg axis with `calls`).
  std::optional<GuidanceCalls> guidance_calls;

  const ModuleStep* FindStep(std::string_view module) const;
};

// The even/uneven split of `length` over `parts` ranks: chunk semantics when `length` divides
// (all equal), tensor_split semantics otherwise (the first length % parts ranks get one more).
std::vector<int64_t> SplitSizes(int64_t length, int64_t parts);

// "cp", "cfg", "cp,cfg" (either order) -> Mesh::weight_axes (cp first); "" -> none. Anything else
// -> none too: the option parsers accept only those.
std::vector<std::string> ParseWeightAxes(std::string_view text);

// The rows of a batch of `batch` that the first cfg rank holds: its share of the guidance branches
// when `batch` is the length the plan splits over cfg, else `batch`. The first rank holds the
// most (uneven splits give the first ranks one more), so the cost model counts its bytes.
int64_t FirstCfgRankBatch(const ExecutionPlan& plan, int64_t batch);

// The gather of the outputs of guidance branches run as calls: what the first cfg rank sends.
std::vector<Collective> GuidanceCallsCollectives(const GuidanceCalls& g);

// Recomputes `plan.cost` from the steps' costs: per-axis bytes and collectives are summed over
// steps times their `calls`; weight bytes are the steps' weight bytes plus
// `extra_weight_bytes` (parameters of modules without a step, replicated on every rank); the
// activation figure is the largest single call's. Sums and products saturate at INT64_MAX
// (source::kSaturated) instead of wrapping.
void SummarizeCost(ExecutionPlan& plan, int64_t extra_weight_bytes);

// Structural invariants a reader checks and a writer may assert: version, world size equals
// the product of axes, split sizes sum to the global size and have one entry per CP rank,
// unique step modules, non-negative dims below the rank. One message per problem.
std::vector<std::string> CheckPlan(const ExecutionPlan& plan);

}  // namespace weft::plan

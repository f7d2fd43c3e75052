#pragma once

// A machine profile (`weft.machine/1`): what one kind of machine does per second, measured by
// `weft-run --calibrate` or written from published figures (tools/machine_profiles/). The cost
// model (predict.h) turns a program's operations and a plan's collectives into time with it.
//
// Rates are per rank. On a CPU a rank's rate depends on the intra-op threads it runs with and on
// how many ranks share the cores, so every compute rate is measured at 1 thread and at all cores
// (`threads`); RateAt interpolates between them and scales by cores / (ranks x threads) when the
// ranks oversubscribe the machine. A GPU profile has one entry per rate (threads = 1) and one rank
// per device.
//
// Collectives are alpha + bytes / beta per (transport, op, group size), with bytes as weft's
// counters count them (runtime/dist/counters.h: what one rank sends per call), so a plan's
// predicted bytes (compiler/plan/cost.h) are what the time is charged on.
//
// Torch-free: `weft explain` reads profiles; `weft-run --calibrate` writes them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::cost {

inline constexpr const char* kMachineFormat = "weft.machine/1";

// One measured compute rate: `rate` units per second (flops for matmul and attention, bytes for
// elementwise) at a problem `size` (matmul: m*n*k; attention: the sequence length; elementwise:
// bytes moved per call), with `threads` intra-op threads on one rank, the others idle.
struct RatePoint {
  std::string dtype;  // "f32", "bf16"
  int threads = 1;
  double size = 0;
  double rate = 0;
};

// One collective's line: seconds = alpha + bytes / beta, bytes per rank per call (counters.h).
struct CollectiveFit {
  std::string transport;  // "shm", "gloo", "nccl"
  std::string op;         // plan::CollectiveOpName: all_to_all, all_gather, all_reduce, send_recv
  int ranks = 2;          // group size
  double alpha_s = 0;
  double beta_bytes_per_s = 0;
};

// Constants fitted on measured runs (bench/cost_model.py), with the cases they were fitted on:
// the error it reports comes from other cases.
struct Fitted {
  double node_overhead_s = 0;        // interpreter time per program node, beyond its arithmetic
  double compute_scale = 1;          // measured / modelled arithmetic time of one rank alone on its host
  // The same for ranks that share their host with others: they share its memory bandwidth and
  // caches too, which the calibration (one rank measuring, the others idle) does not see.
  double shared_compute_scale = 1;
  // Time a rank waits in each collective beyond its alpha in a real run: its peers arrive at
  // different moments (the calibration's ranks do nothing else, so they never keep one waiting).
  double collective_wait_s = 0;
  // The same for a point-to-point exchange (the p2p ring's K/V steps): Gloo moves it on threads
  // of its own, which wait for a core on a busy host.
  double p2p_wait_s = 0;
  // More per collective for each rank beyond one per core's worth of threads: a rank a peer waits
  // for may be off its core, waiting its turn (the scheduler's slice), when the peer arrives.
  double crowded_wait_s = 0;
  double param_memory_factor = 1;    // resident bytes per parameter byte (packed weight copies)
  double activation_memory_factor = 1;
  double memory_offset_bytes = 0;    // resident bytes a model's rank adds beyond the base (program, interpreter)
  std::vector<std::string> cases;    // the (model, workload, mesh) cases fitted on
};

struct MachineProfile {
  std::string format = kMachineFormat;
  std::string kind;          // "cpu" or "cuda"
  std::string device;        // "Intel(R) Xeon(R) ... x2 cores", "NVIDIA H200"
  std::string host;          // where it was measured ("" for published figures)
  bool measured = true;      // false: written from published figures, not run here
  std::string source;        // "weft-run --calibrate 2026-12-04", or the figures' citation
  std::vector<std::string> citations;
  int cores = 1;             // CPU cores (cpu), devices per node (cuda)
  int64_t memory_bytes = 0;  // per rank's device (cuda) or the host's (cpu); 0 unknown
  // A rank's resident bytes before any parameter (LibTorch, the runtime, its threads).
  int64_t rank_base_bytes = 0;
  // Resident bytes a rank adds per collective group of n ranks it belongs to (shared-memory
  // segments, transport buffers): group_bytes[n - 2] for n = 2, 3, ...; the last entry
  // stands for larger groups.
  std::vector<int64_t> group_bytes;
  std::vector<RatePoint> matmul;       // flops per second
  std::vector<RatePoint> attention;    // flops per second (4 * B * Sq * Skv * H * D per call)
  std::vector<RatePoint> elementwise;  // bytes (read + written) per second
  double op_overhead_s = 0;            // the cost of dispatching one tiny operator
  std::vector<CollectiveFit> collectives;
  std::optional<Fitted> fitted;
};

// What a rank of a job with `ranks_per_host` ranks of `threads` intra-op threads each gets of
// `points` (one kind of rate) for a problem of `size` in `dtype`: the rate at the nearest measured
// sizes (log-linear between them, clamped at the ends), at `threads` (linear between the measured
// thread counts), times min(1, cores / (ranks_per_host * threads)). Falls back to f32 points for a
// dtype with none. 0 when `points` is empty.
double RateAt(const MachineProfile& m, const std::vector<RatePoint>& points, const std::string& dtype, double size,
              int threads, int ranks_per_host);

// The fit for `op` on `transport` for a group of `ranks`: the exact group size, else the nearest
// measured one as it is (the bytes a plan charges already grow with the group); nullopt when the
// profile has no line for the op on that transport.
struct CollectiveTime {
  double alpha_s = 0;
  double beta_bytes_per_s = 0;
  bool exact = true;  // false: taken from another group size
};
std::optional<CollectiveTime> CollectiveAt(const MachineProfile& m, const std::string& transport, const std::string& op,
                                           int ranks);

// Reads a profile; throws std::runtime_error naming the file and the field on anything malformed,
// and on another format (`weft.machine/2`: "a profile of another weft version"). `warnings` gets the
// notes a caller prints (a profile of another kind than `expect_kind` when that is not empty).
MachineProfile ReadMachineProfile(const std::string& file, const std::string& expect_kind,
                                  std::vector<std::string>* warnings);
MachineProfile ParseMachineProfile(const std::string& json_text, const std::string& where);
std::string WriteMachineProfile(const MachineProfile& m);

}  // namespace weft::cost

#pragma once

// The predicted time and memory of one forward of a program on one rank, unsharded or under a
// compiled plan, on a machine (machine_profile.h).
//
// Time is the sum over the program's nodes of
//     max(flops / matmul or attention rate, bytes / elementwise rate)   (a roofline per node)
//   (each rate at the problem one kernel call sees: an attention's keys are all of them under
//   Ulysses or the allgather ring, a block of Skv / R under the p2p ring, which runs R calls)
//   + the per-node interpreter overhead (fitted, else the profile's tiny-op dispatch time; on a
//     GPU only what of it the kernel does not hide: the host launches ahead of the device; on a
//     CPU stretched like the arithmetic when the ranks' threads outnumber the cores)
// with each node's work divided by the degrees of the axes it computes on shards over
// (program::ShardedNodes: a node reading or writing a tp, cp or cfg shard does 1/degree of it),
// plus each collective of the plan's cost section, count x alpha + bytes / beta on its group's
// transport (send_recv always over Gloo on CPUs, as runtime/dist does; a group with ranks on two
// hosts over Gloo, or NCCL's network lines on GPUs: README.md), plus the fitted wait per
// collective (peers arriving at different moments, which a calibration cannot see; more when the
// ranks' threads outnumber the cores and a peer may be off its core). Where weft really
// overlaps, the overlap is modelled: the p2p ring's K/V exchange hides behind the attention it
// feeds, and sliced weights are gathered for the next block while this one computes -- on a GPU
// fully, on a CPU only as far as cores are left over by the ranks' compute threads (the
// exchanges run on threads of their own).
//
// Memory per rank: the rank's base (LibTorch, runtime, threads: the profile's rank_base_bytes),
// what each collective group adds, its parameters after TP and slicing (x the fitted factor for
// packed copies) and the gather buffers, and the peak of live activations, walking the nodes in
// order with every value freed after its last use (as the interpreter does; views share their
// input's storage), inputs whole.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/cost/machine_profile.h"
#include "compiler/plan/execution_plan.h"
#include "compiler/program/program.h"

namespace weft::cost {

struct PredictOptions {
  int ranks_per_host = 0;     // 0: the plan's world (every rank on this host)
  int threads = 0;            // intra-op threads per rank; 0: weft-run's default, max(1, cores / ranks)
  std::string transport;      // "shm" or "gloo" (cpu), "nccl" (cuda); "": shm on cpu, nccl on cuda
  std::string workload;       // manifest workload; "": the plan's, else the program's first
  std::vector<program::InputDesc> inputs;  // the run's own inputs (weft-run); non-empty: instead of a workload
};

struct Prediction {
  double latency_s = 0;
  double matmul_s = 0, attention_s = 0, memory_s = 0, overhead_s = 0;
  double comm_s = 0;         // collectives as charged (after overlap)
  double hidden_comm_s = 0;  // collectives hidden behind compute (p2p ring, weight prefetch)
  std::vector<std::pair<std::string, double>> comm_per_axis;  // as charged, before overlap
  int64_t nodes = 0;
  int64_t collectives = 0;  // per forward, on groups of more than one rank
  int64_t p2p_exchanges = 0;  // of them, point-to-point (send_recv) batches
  double flops = 0;  // per rank
  int threads = 1;
  int64_t base_bytes = 0, group_bytes = 0, param_bytes = 0, weight_buffer_bytes = 0, activation_bytes = 0;
  int64_t peak_bytes = 0;
  std::vector<std::string> notes;  // assumptions made (a collective priced from another group size ...)
  bool from_graph = false;  // an estimate from a graph's module calls (graph_predict.h), not a program's nodes
};

// `plan` nullptr: the program unsharded on one rank. Throws std::runtime_error when the profile
// cannot price what the plan runs (no line at all for a collective op), or program::ProgramError
// when the workload does not bind.
Prediction Predict(const program::Program& program, const plan::ExecutionPlan* plan, const MachineProfile& machine,
                   const PredictOptions& options);

// "412.3 ms" / "1.20 s" for messages and tables.
std::string FormatSeconds(double s);

}  // namespace weft::cost

#pragma once

// What the program prediction (predict.cpp) and the graph estimate (graph_predict.cpp) share: how a
// rank's threads, transport and crowding follow from the machine and the mesh, the plan's
// collectives priced on the profile, and the last step -- overlap, latency and memory per rank.

#include <cstdint>
#include <string>

#include "compiler/cost/machine_profile.h"
#include "compiler/cost/predict.h"
#include "compiler/plan/execution_plan.h"

namespace weft::cost::parts {

struct Setting {
  int ranks = 1;             // on this host (ranks sit on hosts in blocks of this many)
  std::string transport;     // of the collectives
  std::string workload;      // "" = the model's first
  double overhead_s = 0;     // per node: fitted, else the profile's tiny-op dispatch
  double crowding = 1;       // > 1 when the ranks' threads outnumber the cores
  double scale = 1;          // the fitted compute scale (a rank alone, or sharing its host)
};
// Fills r.threads too.
Setting SettingFor(const plan::ExecutionPlan* plan, const MachineProfile& m, const PredictOptions& o, Prediction& r);

// Whether some group of `group` (a mesh axis, cp or weights) has ranks on two hosts, the
// world's ranks placed on hosts in contiguous blocks of `ranks_per_host` (as weft-run, torchrun
// and srun number local ranks); the mesh's axis order decides which axes stay within a host.
bool GroupSpansHosts(const plan::Mesh& mesh, const std::string& group, int ranks_per_host);

// Collectives the overlap may hide: the p2p ring's K/V exchange, sliced weights' gathers.
struct Hideable {
  double ring_p2p_s = 0;
  double weights_s = 0;
};
// Every collective of the plan's cost section, count x (alpha + fitted wait) + bytes / beta on its
// group's transport, into r (comm_s for what no overlap hides, collectives, p2p_exchanges,
// comm_per_axis, notes). Throws std::runtime_error when the profile has no line for an op.
Hideable PriceCollectives(const plan::ExecutionPlan& plan, const MachineProfile& m, const Setting& s, Prediction& r);

// Overlap (on a CPU only as far as cores are left over), latency, and memory per rank: `params`
// the unsharded parameter bytes (used without a plan), `activation_peak` the live activations'.
void Finish(const plan::ExecutionPlan* plan, const MachineProfile& m, const Setting& s, const Hideable& h,
            int64_t params, double activation_peak, Prediction& r);

}  // namespace weft::cost::parts

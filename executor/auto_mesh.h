#pragma once

// `weft-run --mesh auto`: before any rank starts, the launcher weighs every mesh of --nproc ranks
// for the job's program and plan on a machine profile (compiler/cost/mesh_search.h: each mesh
// compiled and lowered as the job would, each priced by the cost model) and runs the fastest one
// that fits. Its ranks then run that mesh as if it had been given.

#include <cstdint>
#include <iosfwd>
#include <string>

#include "compiler/cost/predict.h"

namespace weft::exec {

struct AutoMeshRequest {
  std::string program;       // the job's .pt2
  std::string plan;          // --plan, "" = the plan in plans/ for the program's class
  std::string workload;      // the manifest workload to weigh at ("" = the first)
  std::string machine;       // a weft.machine/1 profile
  int nproc = 1;
  bool ulysses_anything = false;
  bool ring_anything = false;
  bool weight_sharding = true;  // also weigh --shard-weights cp / cfg
  std::string cpu_transport = "shm";
  int threads = 0;              // --threads (0: cores / ranks)
  int64_t memory_per_rank = 0;  // 0: this machine's available memory / nproc
};

struct AutoMeshPick {
  std::string mesh;           // for --mesh: "ring=2,ulysses=2"
  std::string rotate;         // "allgather" / "p2p"
  std::string shard_weights;  // "", "cp", "cfg", "cp,cfg"
  std::string text;           // how the ranking names it
  cost::Prediction prediction;
};

// Weighs the meshes, prints the ranking's top lines to `log`, returns the pick. Throws
// std::runtime_error when no mesh admits the plan (with each mesh's reason) or none fits.
AutoMeshPick PickMesh(const AutoMeshRequest& request, std::ostream& log);

}  // namespace weft::exec

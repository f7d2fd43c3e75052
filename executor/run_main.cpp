// `weft-run`: the runner. Today it runs the distributed smoke job (executor/smoke_job.h);
// the executor (--plan, --model, --check ...) grows into this binary.
//
//   weft-run                          4 local CPU ranks, mesh ring=2,ulysses=2, smoke job
//   weft-run --nproc 8 --mesh ring=2,ulysses=2,tp=2
//   torchrun --nproc-per-node 4 weft-run     (joins as the rank torchrun gives it)
//
// Two modes: when RANK/WORLD_SIZE are set (torchrun, srun wrappers, or our own launcher) the
// process joins the job as that rank; otherwise it is the launcher and re-executes itself
// --nproc times with the rank environment.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <torch/version.h>  // TORCH_VERSION only

#include "compiler/source/version.h"
#include "executor/smoke_job.h"
#include "runtime/dist/dist_context.h"
#include "runtime/dist/launcher.h"
#include "runtime/dist/world.h"

namespace {

using namespace weft;

struct RunOptions {
  int nproc = 0;
  std::string mesh;
  std::string mesh_order;
  int timeout_ms = 30000;
  int threads = 0;
  bool no_prefix = false;
};

std::string VersionText() {
  std::string s = std::string("weft-run ") + weft::kVersion + " (LibTorch " + TORCH_VERSION + ", Gloo";
#ifdef WEFT_WITH_CUDA
  s += ", NCCL";
#endif
  return s + ")";
}

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "weft-run";
  buf[n] = '\0';
  return buf;
}

// The mesh this run uses. Without --mesh: ring=2,ulysses=2 for 4 ranks (the default job),
// else ulysses=N.
dist::MeshShape ResolveMesh(const RunOptions& o, int world_size) {
  dist::MeshShape shape;
  if (!o.mesh.empty()) {
    shape = dist::ParseMeshShape(o.mesh);
  } else if (world_size == 4) {
    shape.ring = 2;
    shape.ulysses = 2;
  } else {
    shape.ulysses = world_size;
  }
  if (!o.mesh_order.empty()) shape.order = dist::ParseMeshOrder(o.mesh_order);
  return shape;
}

// One rank of the job.
int RunRank(const RunOptions& o) {
  dist::WorldConfig world = dist::WorldFromEnv();
  dist::ConfigureIntraOpThreads(world.local_world_size, o.threads);
  dist::MeshShape shape = ResolveMesh(o, world.world_size);
  dist::DistOptions dopts;
  dopts.timeout = std::chrono::milliseconds(o.timeout_ms);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<dist::DistContext> ctx = dist::DistContext::Create(world, shape, dopts);
  double setup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const int status = exec::RunSmokeJobAndReport(*ctx, setup_ms, std::cout);
  ctx->Shutdown();
  return status;
}

// Launcher mode: re-execute ourselves on nproc local ranks.
int RunLauncher(const RunOptions& o, int argc, char** argv) {
  int nproc = o.nproc;
  if (nproc == 0) nproc = o.mesh.empty() ? 4 : dist::ParseMeshShape(o.mesh).WorldSize();
  dist::MeshShape shape = ResolveMesh(o, nproc);
  if (shape.WorldSize() != nproc) {
    std::cerr << "weft-run: --mesh " << shape.ToString() << " has " << shape.WorldSize()
              << " ranks but --nproc is " << nproc << "\n";
    return 2;
  }
  dist::LaunchOptions lo;
  lo.nproc = nproc;
  lo.argv.push_back(SelfExe());
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    lo.argv.push_back(a);
  }
  // Children must not re-launch: they see RANK and join.
  lo.threads_per_rank = o.threads;
  lo.prefix_output = !o.no_prefix;
  dist::LaunchResult r = dist::Launch(lo);
  return r.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-run: run a weft job on N local ranks, or as one rank under torchrun/srun.\n"
               "With no arguments: the distributed smoke job on 4 local CPU ranks, mesh "
               "ring=2,ulysses=2."};
  app.set_version_flag("--version", VersionText());
  RunOptions o;
  app.add_option("--nproc", o.nproc, "Local ranks to spawn (default: the mesh's world size, 4)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mesh", o.mesh, "Mesh degrees, e.g. ring=2,ulysses=2,tp=1 (default for 4 ranks: "
                                   "ring=2,ulysses=2; otherwise ulysses=N)");
  app.add_option("--mesh-order", o.mesh_order,
                 "Axis order, outermost first (default tp,ring,ulysses: Ulysses groups are "
                 "contiguous ranks)");
  app.add_option("--timeout-ms", o.timeout_ms, "Timeout of the rendezvous and of every collective")
      ->check(CLI::Range(100, 86400000));
  app.add_option("--threads", o.threads,
                 "Intra-op threads per rank (default: WEFT_THREADS, else cores / local ranks)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--no-prefix", o.no_prefix, "Do not prefix rank output with [rank k]");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (dist::LaunchedAsRank()) return RunRank(o);
    return RunLauncher(o, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "weft-run: error: " << e.what() << "\n";
    std::cerr.flush();
    std::fflush(nullptr);
    // Skip destructors: c10d teardown after a failed peer may block.
    std::_Exit(1);
  }
}

// How long weft takes to make a torch.export program runnable, without its weights: reading the
// archive and the export schema's JSON, building the module tree and resolving every operator
// (the interpreter's load), and the compiler's weft.graph/1 view. Issue 13's target: Flux-dev's
// program loads in <= 2 s.
//   bench/program_bench/program_load_bench PROGRAM.pt2 [--iters N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"
#include "runtime/program/program_model.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: program_load_bench PROGRAM.pt2 [--iters N]\n");
    return 2;
  }
  int iters = 3;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  double best_read = 1e30, best_load = 1e30, best_view = 1e30;
  size_t nodes = 0, params = 0;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    auto program = std::make_shared<weft::program::Program>(weft::program::ReadProgramFile(argv[1]));
    const auto t1 = Clock::now();
    auto model = weft::interp::ProgramModel::Create(program, weft::interp::LoadOptions{});
    const auto t2 = Clock::now();
    weft::model::ModelGraph view = weft::program::GraphOfProgram(*program);
    const auto t3 = Clock::now();
    best_read = std::min(best_read, Ms(t0, t1));
    best_load = std::min(best_load, Ms(t1, t2));
    best_view = std::min(best_view, Ms(t2, t3));
    nodes = model->interpreter().num_nodes();
    params = model->NamedParameters().size();
  }
  std::printf("{\"program\": \"%s\", \"nodes\": %zu, \"parameters\": %zu, \"read_ms\": %.1f, \"interpreter_load_ms\": %.1f, "
              "\"runnable_ms\": %.1f, \"graph_view_ms\": %.1f, \"iters\": %d}\n",
              argv[1], nodes, params, best_read, best_load, best_read + best_load, best_view, iters);
  return 0;
}

#pragma once

// `weft-run --calibrate -o machine.json`: measures this machine and writes its profile
// (compiler/cost/machine_profile.h), the rates the cost model turns programs and plans into time
// with. Compute is measured in the launcher process itself, on the LibTorch kernels the
// interpreter calls (a Linear as its fast kernel runs it), at 1 thread and at all cores; with
// `--device cuda` on GPU 0, each trial waiting for the GPU at its end.
// Collectives need ranks: for each transport (shm, gloo; nccl on GPUs, one rank per GPU) and
// group size n the launcher starts n
// ranks of weft-run in the hidden mode `--calibrate-collectives FILE`; they time every collective
// at a few sizes and rank 0 writes what it measured to FILE, which the launcher fits and merges.

#include <chrono>
#include <iosfwd>
#include <string>

namespace weft::exec {

struct CalibrateOptions {
  std::string out;      // the profile to write (-o)
  int max_ranks = 0;    // the largest group measured (--nproc); 0: min(8, 4 x cores); < 2: no collectives
  bool quick = false;   // fewer and smaller sizes, for tests (seconds instead of minutes)
  // "cpu", or "cuda": compute on GPU 0 and the collectives over NCCL, one rank per GPU (a
  // profile of kind cuda).
  std::string device = "cpu";
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};  // the ranks' rendezvous and collectives
};

// The launcher's side: measures, fits, writes `o.out` and prints a summary on `out`. Returns the
// exit status; throws std::runtime_error when a rank job fails or the file cannot be written.
int RunCalibration(const CalibrateOptions& o, std::ostream& out);

struct CollectiveCalibrationOptions {
  std::string result_file;  // where rank 0 writes its measurements (the launcher's temp file)
  std::string transport;    // "shm", "gloo" or "nccl"
  std::string device = "cpu";  // "cuda" for nccl: this rank's GPU (its local rank)
  bool quick = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

// A rank's side (RANK/WORLD_SIZE set by RunCalibration's launch): one group of every rank,
// every collective at every size, then rank 0 writes the per-call times, the counters' bytes
// per call and its resident set sizes. Returns the exit status; DistError on a failed peer.
int RunCollectiveCalibrationRank(const CollectiveCalibrationOptions& o);

}  // namespace weft::exec

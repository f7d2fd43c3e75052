#pragma once

// Programs made on demand: `weft-run --model-dir DIR` (or a tools/model_configs model name) without
// `--program` runs the program tools/export_program.py makes for that model, exported once and
// kept in a cache shared by every run and every clone:
//
//   $WEFT_PROGRAM_CACHE, else $XDG_CACHE_HOME/weft/programs, else ~/.cache/weft/programs
//     <key>.pt2          the program
//     <key>.pt2.sha256   its SHA-256, written after it; a program that does not hash to it
//                        (tampered, or torn by a crash) is exported again, never run
//     <key>.lock         held (flock) while an entry is checked or made: two runs exporting the
//                        same model at once make one export and both get it
//
// The key is the SHA-256 of what decides the export: the model's class and config (config.json
// or a tools/model_configs file, byte for byte), the dtype and batch it is exported at, the
// example inputs (the shapes, dtypes and non-tensor arguments of an inputs file, or a workload
// name), the export tool's own sources and the LibTorch version. A config that changes is another
// key, so a stale program is never run. Exports go to a temporary file renamed into place: no
// partial entry survives a failed export, whose reason (the tool's last lines) is the error. A
// cache directory that cannot be written falls back to a temporary export for this run, said once.

#include <string>

namespace weft::exec {

struct ProgramSource {
  std::string config_file;  // tools/model_configs/<name>.json, or
  std::string model_dir;    // a diffusers save_pretrained directory (its config.json)
  std::string inputs;       // example inputs (safetensors, weft.args); "" = the config's workload
  std::string workload;     // that workload ("" = the config's first)
  std::string dtype = "fp32";
  int batch = 2;            // >= 2 keeps the batch dynamic
};

struct CachedProgram {
  std::string path;
  bool exported = false;   // made by this call (else reused)
  double export_s = 0;     // how long the export took
};

// The program for `source`, from the cache or exported now. Throws std::runtime_error with the
// export tool's reason when it cannot be exported. `progress`: say what it does on stderr.
CachedProgram FindOrExportProgram(const ProgramSource& source, bool progress);

// The cache directory (created on first use).
std::string ProgramCacheDir();

}  // namespace weft::exec

#pragma once

// A diffusers `save_pretrained` directory as weft-run's --model-dir: config.json (its
// `_class_name` and fields are what the program is exported from) and the weights, either one
// `*.safetensors` file, several, or shards listed by a `*.safetensors.index.json`. Read before
// the export, so that a directory that cannot be run is named at once, not after minutes of
// exporting (or never, for a config that asks for a billion layers).

#include <string>
#include <vector>

#include "compiler/program/program.h"

namespace weft::exec {

struct ModelDir {
  std::string class_name;                 // config.json's `_class_name`
  std::vector<std::string> weight_files;  // absolute paths, each once, sorted
};

// Throws std::runtime_error naming the directory and what is missing or malformed: no
// config.json, one that is not a JSON object naming its class, a count (`num_*`, `*_layers`,
// `*_blocks`, `*_heads`) outside 0..kMaxConfigCount, an index naming a shard that does not exist
// or lies outside the directory, no weights.
ModelDir ReadModelDir(const std::string& dir);

// The largest count config.json may hold: far above every published DiT (the largest has 60
// layers and 48 heads), far below what would take the export minutes to build.
inline constexpr long long kMaxConfigCount = 10000;

// The program's parameters must be the checkpoint's: compared by name and shape from the
// safetensors headers before any rank allocates a parameter. Throws std::runtime_error with
// the counts and the first difference ("config and weights do not belong together").
void CheckCheckpointHoldsTheProgram(const std::string& dir, const program::Program& program,
                                    const std::vector<std::string>& weight_files);

}  // namespace weft::exec

#pragma once

// A diffusers `save_pretrained` directory as weft-run's --model-dir: config.json (its
// `_class_name` picks the built-in model, its fields the config) and the weights, either one
// `*.safetensors` file, several, or shards listed by a `*.safetensors.index.json`.

#include <string>
#include <vector>

#include "runtime/models/registry.h"

namespace weft::exec {

struct ModelDir {
  models::ModelSpec spec;
  std::vector<std::string> weight_files;  // absolute paths, each once, sorted
};

// Throws std::runtime_error naming the directory and what is missing or malformed (no
// config.json, an unsupported class, an index naming a shard that does not exist, no weights).
ModelDir ReadModelDir(const std::string& dir);

// The graph in `data_dir`/graphs whose structure hash is `model_graph_hash` (ModelGraphHash of
// the model: same class, config, modules, parameters, signatures and attention sites); "" when
// none is.
std::string GraphFileMatching(const std::string& model_graph_hash, const std::string& data_dir);

}  // namespace weft::exec

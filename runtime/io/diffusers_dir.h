#pragma once

// The weights of a diffusers `save_pretrained` directory: the shards listed by its
// `*.safetensors.index.json` when there is one, else its `diffusion_pytorch_model*.safetensors`
// files (or, failing those, every `*.safetensors`).

#include <string>
#include <vector>

namespace weft::io {

// Absolute paths, each once, sorted. Throws SafetensorsError naming the directory or index
// when the directory does not exist, the index is malformed or names a missing shard, or
// there are no weights.
std::vector<std::string> DiffusersWeightFiles(const std::string& dir);

}  // namespace weft::io

#pragma once

// Filling a module tree's parameters from safetensors checkpoints in diffusers key names.

#include <ATen/core/ScalarType.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/io/safetensors.h"
#include "runtime/nn/module.h"

namespace weft::nn {

// A checkpoint that does not fit the model: the message lists every missing key, unexpected
// key and shape mismatch (up to a limit), with the file.
class WeightsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Copies every parameter of `model` from `files` (a model may be split over several
// shards, as diffusers' index files do), converted to `dtype`. Every parameter must be found
// exactly once with its exact shape, and every tensor in the files must be a parameter;
// otherwise throws WeightsError naming the keys.
//
// `load_shard`, when given, is asked first for every parameter: it returns this rank's shard
// read straight from the file (tensor parallelism's streaming load) or an undefined tensor
// to load the parameter whole.
using ShardLoader =
    std::function<at::Tensor(const io::SafetensorsFile& file, const std::string& key, at::ScalarType dtype)>;
void LoadWeights(Module& model, const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype,
                 const ShardLoader& load_shard = nullptr);

// Casts every parameter of `model` to `dtype` (for randomly initialised models).
void CastParameters(Module& model, at::ScalarType dtype);

// Fills every parameter with seeded normal values scaled by 1/sqrt(fan_in) (biases and norm
// weights by 0.5), so that models without a checkpoint still compute something non-trivial
// and identical on every rank.
void RandomizeParameters(Module& model, uint64_t seed);

}  // namespace weft::nn

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
// exactly once with its exact shape, and every tensor in the files must be a parameter or one
// of the model's CheckpointBuffers (loaded in the buffer's own dtype); otherwise throws
// WeightsError naming the keys.
//
// `load_shard`, when given, is asked first for every parameter: it returns this rank's shard
// read straight from the file (tensor parallelism's streaming load) or an undefined tensor
// to load the parameter whole.
using ShardLoader =
    std::function<at::Tensor(const io::SafetensorsFile& file, const std::string& key, at::ScalarType dtype)>;
void LoadWeights(Module& model, const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype,
                 const ShardLoader& load_shard = nullptr);

// Fills every parameter with weft's seeded values (SeededValues), so that models without a
// checkpoint still compute something non-trivial and identical on every rank -- and identical to
// what tools/diffusers_models.py seeded_weights() gives a diffusers model with the same seed.
void RandomizeParameters(Module& model, uint64_t seed);

// The seeded values of parameter `fqn`: element i is scale * u_i with u_i uniform in [-1, 1),
// u_i = (splitmix64(splitmix64(seed ^ fnv1a64(fqn)) + i) >> 40) * 2^-23 - 1, all exact in fp32, and
// scale = 0.5 for 1-D parameters (biases, norm weights), else fp32(1 / sqrt(numel / shape[0])).
// Keyed by name and element index, so it does not depend on registration order, and any slice
// of a parameter (a tensor-parallel shard) can be computed alone. fp32.
at::Tensor SeededValues(const std::string& fqn, at::IntArrayRef shape, uint64_t seed);

}  // namespace weft::nn

#pragma once

// The built-in models by name ("flux:tiny", "wan:1.3b" ...) and seeded example inputs for
// them, so weft-run can run a model with no checkpoint and no input files.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/nn/module.h"

namespace weft::models {

// "family:config", e.g. "flux:tiny". Families: flux, wan.
struct ModelSpec {
  std::string family;
  std::string config;
  // A diffusers config.json text (weft-run --model-dir); when set it defines the model and
  // `config` only names it in reports.
  std::string config_json;
  std::string ToString() const { return family + ":" + config; }
};

// The spec of the model a diffusers config.json describes (its `_class_name` picks the
// family). Throws std::invalid_argument for an unsupported class or a bad config.
ModelSpec SpecFromConfigJson(const std::string& config_json, const std::string& name);

// Parses "family:config" (a bare family means its "tiny" config) and checks that the config
// exists. Throws std::invalid_argument naming the known families and configs.
ModelSpec ParseModelSpec(const std::string& text);

// Builds the model with zero parameters (load weights or randomize them next). Throws
// std::invalid_argument for an unknown family or config.
std::unique_ptr<nn::Module> CreateModel(const ModelSpec& spec);

// The name of a built-in config's graph and model config in the data directory
// (graphs/<name>.graph.json, tools/model_configs/<name>.json): flux:dev -> flux1-dev,
// flux:schnell -> flux1-schnell, wan:14b -> wan2.1-t2v-14b, flux:tiny -> flux-tiny ...
std::string PublishedName(const ModelSpec& spec);

// The diffusers class name and config.json (every key, diffusers' order, no `_class_name`) of
// a model built by CreateModel. Throws std::invalid_argument for another module.
std::pair<std::string, std::string> DiffusersConfigOf(const nn::Module& model);

// The family of a diffusers class name ("FluxTransformer2DModel" -> "flux"), or "".
std::string FamilyOfClass(const std::string& class_name);

// The size of the example inputs, in latent tokens. Zero fields take the model's defaults
// (tiny: Flux 8x8 image + 16 text tokens, Wan 2x8x8 latent + 8 text; small: Flux 32x32 +
// 256 text, the benchmark model; real configs: Flux 1024x1024 (64x64 + 512), Wan 832x480x81).
struct Workload {
  int64_t batch = 1;
  int64_t frames = 0;    // latent frames (video models)
  int64_t height = 0;    // latent tokens (Flux) or latent pixels (Wan: patches are 2x2)
  int64_t width = 0;
  int64_t text = 0;      // text tokens
  std::string ToString() const;
};

// The example-input sizes of `model` when none are given (see Workload). Throws
// std::invalid_argument for a model type without an input recipe.
Workload DefaultWorkload(const nn::Module& model);

// Parses "batch=2,height=32,width=32,text=256,frames=3" (any subset). Throws
// std::invalid_argument on an unknown key or a non-positive value.
Workload ParseWorkload(const std::string& text);

// Seeded random inputs for `model` (a model built by CreateModel) at `workload`, keyed by
// forward argument name; identical on every rank for the same seed. Throws
// std::invalid_argument for a model type without an input recipe.
std::vector<std::pair<std::string, at::Tensor>> ExampleInputs(const nn::Module& model, const Workload& workload,
                                                              uint64_t seed);

// Checks inputs (by forward argument name, e.g. read from an --inputs file) against what
// `model` (a model built by CreateModel) takes, before any of them reaches a LibTorch kernel:
// names its forward has, the required ones present, floating dtypes, ranks, widths that must
// equal the config's, a batch that agrees across arguments, and no empty sequence, frame or
// spatial axis. Throws std::invalid_argument with one sentence naming the argument, its shape
// and what was expected, e.g. "input `encoder_hidden_states` has batch 2 but `hidden_states`
// has batch 1 (dim 0 of every batched input must agree)".
void CheckInputs(const nn::Module& model, const std::vector<std::pair<std::string, at::Tensor>>& inputs);

}  // namespace weft::models

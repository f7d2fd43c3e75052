#include "runtime/models/registry.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/models/flux.h"
#include "runtime/models/wan.h"

namespace weft::models {
namespace {

const char* const kKnown = "known models: flux:{tiny,small,dev,schnell}, wan:{tiny,tiny-i2v,small,1.3b,14b,i2v-14b,ti2v-5b}";

int64_t Or(int64_t value, int64_t fallback) { return value > 0 ? value : fallback; }

}  // namespace

ModelSpec ParseModelSpec(const std::string& text) {
  ModelSpec spec;
  const size_t colon = text.find(':');
  spec.family = text.substr(0, colon);
  spec.config = colon == std::string::npos ? "tiny" : text.substr(colon + 1);
  try {
    if (spec.family == "flux") {
      FluxConfigByName(spec.config);
    } else if (spec.family == "wan") {
      WanConfigByName(spec.config);
    } else {
      throw std::invalid_argument(std::string(kKnown));
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("unknown model `" + text + "`: " + e.what());
  }
  return spec;
}

ModelSpec SpecFromConfigJson(const std::string& config_json, const std::string& name) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 1: ..." without the tag.
    std::string what = e.what();
    if (const size_t tag = what.find("] "); what.rfind("[json.exception", 0) == 0 && tag != std::string::npos) {
      what = what.substr(tag + 2);
    }
    throw std::invalid_argument(name + ": config.json is not valid JSON: " + what);
  }
  if (!json.is_object()) {
    throw std::invalid_argument(name + ": config.json is not a JSON object (a diffusers config.json is {\"_class_name\": ...})");
  }
  if (!json.contains("_class_name")) {
    throw std::invalid_argument(name + ": config.json has no `_class_name` (a diffusers config.json names its model class "
                                       "there, e.g. \"FluxTransformer2DModel\")");
  }
  if (!json["_class_name"].is_string()) {
    throw std::invalid_argument(name + ": config.json's `_class_name` is " + json["_class_name"].dump() +
                                ", not a string naming a model class");
  }
  ModelSpec spec;
  spec.family = FamilyOfClass(json["_class_name"].get<std::string>());
  if (spec.family.empty()) {
    throw std::invalid_argument(name + ": `_class_name` " + json["_class_name"].dump() +
                                " has no built-in model (built in: FluxTransformer2DModel, WanTransformer3DModel)");
  }
  spec.config = name;
  spec.config_json = config_json;
  CreateModel(spec);  // validates the config now, naming the bad key
  return spec;
}

std::unique_ptr<nn::Module> CreateModel(const ModelSpec& spec) {
  try {
    if (!spec.config_json.empty()) {
      if (spec.family == "flux") return std::make_unique<FluxTransformer2DModel>(FluxConfigFromJson(spec.config_json));
      if (spec.family == "wan") return std::make_unique<WanTransformer3DModel>(WanConfigFromJson(spec.config_json));
    }
    if (spec.family == "flux") return std::make_unique<FluxTransformer2DModel>(FluxConfigByName(spec.config));
    if (spec.family == "wan") return std::make_unique<WanTransformer3DModel>(WanConfigByName(spec.config));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("model `" + spec.ToString() + "`: " + e.what());
  }
  throw std::invalid_argument("unknown model `" + spec.ToString() + "`; " + kKnown);
}

std::string PublishedName(const ModelSpec& spec) {
  if (spec.family == "flux") {
    if (spec.config == "dev" || spec.config == "schnell") return "flux1-" + spec.config;
    return "flux-" + spec.config;
  }
  if (spec.family == "wan") {
    if (spec.config == "1.3b" || spec.config == "14b") return "wan2.1-t2v-" + spec.config;
    return "wan-" + spec.config;
  }
  return spec.family + "-" + spec.config;
}

std::pair<std::string, std::string> DiffusersConfigOf(const nn::Module& model) {
  if (const auto* flux = dynamic_cast<const FluxTransformer2DModel*>(&model)) {
    return {flux->type(), FluxConfigToJson(flux->config())};
  }
  if (const auto* wan = dynamic_cast<const WanTransformer3DModel*>(&model)) {
    return {wan->type(), WanConfigToJson(wan->config())};
  }
  throw std::invalid_argument("module `" + model.type() + "` is not a built-in model");
}

std::string FamilyOfClass(const std::string& class_name) {
  if (class_name == "FluxTransformer2DModel") return "flux";
  if (class_name == "WanTransformer3DModel") return "wan";
  return "";
}

std::string Workload::ToString() const {
  std::string s = "batch=" + std::to_string(batch);
  if (frames > 0) s += ",frames=" + std::to_string(frames);
  s += ",height=" + std::to_string(height) + ",width=" + std::to_string(width) + ",text=" + std::to_string(text);
  return s;
}

Workload ParseWorkload(const std::string& text) {
  Workload w;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    int64_t value = 0;
    try {
      size_t used = 0;
      value = eq == std::string::npos ? 0 : std::stoll(item.substr(eq + 1), &used);
      if (eq == std::string::npos || used != item.size() - eq - 1) value = 0;
    } catch (const std::exception&) {
      value = 0;
    }
    if (value <= 0) throw std::invalid_argument("workload item `" + item + "`: expected key=positive integer");
    if (key == "batch") w.batch = value;
    else if (key == "frames") w.frames = value;
    else if (key == "height") w.height = value;
    else if (key == "width") w.width = value;
    else if (key == "text") w.text = value;
    else throw std::invalid_argument("unknown workload key `" + key + "` (known: batch, frames, height, width, text)");
  }
  return w;
}

Workload DefaultWorkload(const nn::Module& model) {
  Workload w;
  if (const auto* flux = dynamic_cast<const FluxTransformer2DModel*>(&model)) {
    const int64_t inner = flux->config().inner_dim();
    const bool tiny = inner <= 64, real = inner >= 3072;
    w.height = w.width = tiny ? 8 : real ? 64 : 32;
    w.text = tiny ? 16 : real ? 512 : 256;
    return w;
  }
  if (const auto* wan = dynamic_cast<const WanTransformer3DModel*>(&model)) {
    const int64_t inner = wan->config().inner_dim();
    const bool tiny = inner <= 64, real = inner >= 1536;
    w.frames = tiny ? 2 : real ? 21 : 3;
    w.height = tiny ? 8 : real ? 60 : 32;
    w.width = tiny ? 8 : real ? 104 : 32;
    w.text = tiny ? 8 : real ? 512 : 128;
    return w;
  }
  throw std::invalid_argument("no default workload for " + model.type());
}

namespace {

std::string ShapeText(const at::Tensor& t) { return c10::str(t.sizes()); }

// One expected argument: its rank, the dims that must have a given size (-1: any), whether it
// is batched along dim 0, and the name of each dim for messages.
struct InputSpec {
  std::string name;
  bool required = true;
  std::vector<int64_t> sizes;      // per dim: the required size, or -1
  std::vector<std::string> dims;   // per dim: what it is ("batch", "tokens", ...)
  bool batched = true;
  bool scalar_ok = false;          // a 0-d tensor is also accepted (timestep, guidance)
  int extra_dims = 0;              // this many more dims are accepted (Wan's per-token timestep)
};

}  // namespace

void CheckInputs(const nn::Module& model, const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  std::vector<InputSpec> specs;
  if (const auto* flux = dynamic_cast<const FluxTransformer2DModel*>(&model)) {
    const FluxConfig& c = flux->config();
    specs = {
        {"hidden_states", true, {-1, -1, c.in_channels}, {"batch", "image tokens", "channels"}, true, false},
        {"encoder_hidden_states", true, {-1, -1, c.joint_attention_dim}, {"batch", "text tokens", "channels"}, true, false},
        {"pooled_projections", true, {-1, c.pooled_projection_dim}, {"batch", "channels"}, true, false},
        {"timestep", true, {-1}, {"batch"}, true, true},
        {"img_ids", true, {-1, 3}, {"image tokens", "axes"}, false, false},
        {"txt_ids", true, {-1, 3}, {"text tokens", "axes"}, false, false},
        {"guidance", c.guidance_embeds, {-1}, {"batch"}, true, true},
    };
  } else if (const auto* wan = dynamic_cast<const WanTransformer3DModel*>(&model)) {
    const WanConfig& c = wan->config();
    specs = {
        {"hidden_states", true, {-1, c.in_channels, -1, -1, -1}, {"batch", "channels", "frames", "height", "width"}, true, false},
        {"timestep", true, {-1}, {"batch"}, true, true, 1},
        {"encoder_hidden_states", true, {-1, -1, c.text_dim}, {"batch", "text tokens", "channels"}, true, false},
    };
    if (c.image_dim > 0) {
      specs.push_back({"encoder_hidden_states_image", true, {-1, -1, c.image_dim}, {"batch", "image tokens", "channels"},
                       true, false});
    }
  } else {
    return;
  }
  const std::string who = model.type();
  std::string known;
  for (const InputSpec& s : specs) known += (known.empty() ? "" : ", ") + s.name;
  int64_t batch = -1;
  std::string batch_from;
  for (const auto& [name, t] : inputs) {
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const InputSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      throw std::invalid_argument("input `" + name + "` is not an argument " + who + " takes (its tensor arguments: " +
                                  known + ")");
    }
    if (!t.defined()) throw std::invalid_argument("input `" + name + "` has no value");
    if (!at::isFloatingType(t.scalar_type())) {
      throw std::invalid_argument("input `" + name + "` is " + std::string(c10::toString(t.scalar_type())) + " " +
                                  ShapeText(t) + "; " + who + " takes a floating tensor there (F32, BF16 or F16)");
    }
    const bool scalar = spec->scalar_ok && t.dim() == 0;
    const int64_t rank = static_cast<int64_t>(spec->sizes.size());
    if (!scalar && (t.dim() < rank || t.dim() > rank + spec->extra_dims)) {
      std::string want;
      for (size_t d = 0; d < spec->dims.size(); ++d) {
        want += (d ? ", " : "") + (spec->sizes[d] >= 0 ? std::to_string(spec->sizes[d]) : spec->dims[d]);
      }
      throw std::invalid_argument("input `" + name + "` has shape " + ShapeText(t) + " but " + who + " takes (" + want +
                                  ") there");
    }
    for (int64_t d = 0; !scalar && d < t.dim(); ++d) {
      const int64_t want = d < rank ? spec->sizes[d] : -1;
      const std::string what = d < rank ? spec->dims[d] : "entries";
      if (want >= 0 && t.size(d) != want) {
        throw std::invalid_argument("input `" + name + "` has " + std::to_string(t.size(d)) + " " + what +
                                    " (dim " + std::to_string(d) + " of " + ShapeText(t) + ") but this " + who +
                                    " takes " + std::to_string(want));
      }
      if (t.size(d) == 0) {
        throw std::invalid_argument("input `" + name + "` has 0 " + what + " (dim " + std::to_string(d) + " of " +
                                    ShapeText(t) + "); every axis of a model input needs at least one entry");
      }
    }
    if (spec->batched && !scalar) {
      if (batch < 0) {
        batch = t.size(0);
        batch_from = name;
      } else if (t.size(0) != batch && !(spec->scalar_ok && t.size(0) == 1)) {
        throw std::invalid_argument("input `" + name + "` has batch " + std::to_string(t.size(0)) + " but `" + batch_from +
                                    "` has batch " + std::to_string(batch) + " (dim 0 of every batched input must agree)");
      }
    }
  }
  for (const InputSpec& s : specs) {
    if (!s.required) continue;
    bool present = false;
    for (const auto& kv : inputs) present = present || kv.first == s.name;
    if (!present) throw std::invalid_argument("the inputs have no `" + s.name + "`, which " + who + " needs");
  }
}

std::vector<std::pair<std::string, at::Tensor>> ExampleInputs(const nn::Module& model, const Workload& workload,
                                                              uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto randn = [&](at::IntArrayRef shape) { return at::normal(0.0, 1.0, shape, gen, at::TensorOptions().dtype(at::kFloat)); };
  const int64_t b = workload.batch;
  if (const auto* flux = dynamic_cast<const FluxTransformer2DModel*>(&model)) {
    const FluxConfig& c = flux->config();
    const Workload d = DefaultWorkload(model);
    const int64_t h = Or(workload.height, d.height);
    const int64_t w = Or(workload.width, d.width);
    const int64_t text = Or(workload.text, d.text);
    at::Tensor rows = at::arange(h, at::kFloat).unsqueeze(1).expand({h, w});
    at::Tensor cols = at::arange(w, at::kFloat).unsqueeze(0).expand({h, w});
    at::Tensor img_ids = at::stack({at::zeros({h, w}), rows, cols}, -1).reshape({h * w, 3});
    std::vector<std::pair<std::string, at::Tensor>> inputs = {
        {"hidden_states", randn({b, h * w, c.in_channels})},
        {"encoder_hidden_states", randn({b, text, c.joint_attention_dim})},
        {"pooled_projections", randn({b, c.pooled_projection_dim})},
        {"timestep", at::linspace(0.2, 0.8, b)},
        {"img_ids", img_ids},
        {"txt_ids", at::zeros({text, 3})},
    };
    if (c.guidance_embeds) inputs.emplace_back("guidance", at::full({b}, 3.5));
    return inputs;
  }
  if (const auto* wan = dynamic_cast<const WanTransformer3DModel*>(&model)) {
    const WanConfig& c = wan->config();
    const Workload d = DefaultWorkload(model);
    const int64_t f = Or(workload.frames, d.frames);
    const int64_t h = Or(workload.height, d.height);
    const int64_t w = Or(workload.width, d.width);
    const int64_t text = Or(workload.text, d.text);
    std::vector<std::pair<std::string, at::Tensor>> inputs = {
        {"hidden_states", randn({b, c.in_channels, f, h, w})},
        {"timestep", at::linspace(100, 900, b)},
        {"encoder_hidden_states", randn({b, text, c.text_dim})},
    };
    if (c.image_dim > 0) inputs.emplace_back("encoder_hidden_states_image", randn({b, 257, c.image_dim}));
    return inputs;
  }
  throw std::invalid_argument("no example inputs for " + model.type());
}

}  // namespace weft::models

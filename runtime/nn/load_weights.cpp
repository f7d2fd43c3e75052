#include "runtime/nn/load_weights.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <sstream>

namespace weft::nn {
namespace {

std::string Shape(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

}  // namespace

void LoadWeights(Module& model, const std::vector<const io::SafetensorsFile*>& files, at::ScalarType dtype,
                 const ShardLoader& load_shard) {
  // Where each checkpoint key lives.
  std::map<std::string, const io::SafetensorsFile*> available;
  std::vector<std::string> duplicated;
  for (const io::SafetensorsFile* file : files) {
    for (const std::string& key : file->Keys()) {
      if (!available.emplace(key, file).second) duplicated.push_back(key + " (in " + file->path() + " again)");
    }
  }
  std::vector<std::string> missing, mismatched;
  for (auto& [name, slot] : model.NamedParameters()) {
    auto it = available.find(name);
    if (it == available.end()) {
      missing.push_back(name + " " + Shape(slot->sizes()));
      continue;
    }
    const io::TensorInfo& info = it->second->Info(name);
    if (at::IntArrayRef(info.shape) != slot->sizes()) {
      mismatched.push_back(name + ": checkpoint " + Shape(info.shape) + " (" + it->second->path() + "), model " +
                           Shape(slot->sizes()));
    } else {
      at::Tensor shard = load_shard ? load_shard(*it->second, name, dtype) : at::Tensor();
      *slot = shard.defined() ? shard : it->second->Load(name, dtype);
    }
    available.erase(it);
  }
  if (missing.empty() && mismatched.empty() && available.empty() && duplicated.empty()) return;

  std::ostringstream message;
  message << "checkpoint does not match " << model.type() << ":";
  auto list = [&](const char* what, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    message << "\n  " << keys.size() << " " << what << ":";
    for (size_t i = 0; i < keys.size() && i < 10; ++i) message << "\n    " << keys[i];
    if (keys.size() > 10) message << "\n    ... and " << keys.size() - 10 << " more";
  };
  std::vector<std::string> unexpected;
  for (const auto& [key, file] : available) unexpected.push_back(key + " (in " + file->path() + ")");
  list("missing parameter(s)", missing);
  list("shape mismatch(es)", mismatched);
  list("unexpected key(s)", unexpected);
  list("duplicated key(s)", duplicated);
  throw WeightsError(message.str());
}

void CastParameters(Module& model, at::ScalarType dtype) {
  for (auto& [name, slot] : model.NamedParameters()) *slot = slot->to(dtype);
}

void RandomizeParameters(Module& model, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (auto& [name, slot] : model.NamedParameters()) {
    const double scale = slot->dim() <= 1 ? 0.5 : 1.0 / std::sqrt(static_cast<double>(slot->size(-1)));
    *slot = (at::normal(0.0, 1.0, slot->sizes(), generator, at::TensorOptions().dtype(at::kFloat)) * scale)
                .to(slot->scalar_type());
  }
}

}  // namespace weft::nn

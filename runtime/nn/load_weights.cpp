#include "runtime/nn/load_weights.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

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
  std::vector<std::string> missing, mismatched, wrong_dtype, wrong_kind;
  for (auto& [name, slot] : model.NamedParameters()) {
    auto it = available.find(name);
    if (it == available.end()) {
      missing.push_back(name + " " + Shape(slot->sizes()));
      continue;
    }
    const io::TensorInfo& info = it->second->Info(name);
    // A parameter declared integral or boolean (a program's, say Long) keeps its own dtype;
    // floating ones are converted to the model's.
    const bool declared_exact = slot->defined() && !at::isFloatingType(slot->scalar_type());
    const at::ScalarType want = declared_exact ? slot->scalar_type() : dtype;
    if (at::IntArrayRef(info.shape) != slot->sizes()) {
      mismatched.push_back(name + ": checkpoint " + Shape(info.shape) + " (" + it->second->path() + "), model " +
                           Shape(slot->sizes()));
    } else if (at::isFloatingType(info.scalar_type) != at::isFloatingType(want)) {
      // Integer or boolean bits are no weights, nor are float bits indices: casting either would
      // run on garbage silently.
      (declared_exact ? wrong_kind : wrong_dtype)
          .push_back(name + ": checkpoint " + info.dtype + " (" + it->second->path() + "), model " +
                     c10::toString(want));
    } else {
      at::Tensor shard = load_shard ? load_shard(*it->second, name, want) : at::Tensor();
      *slot = shard.defined() ? shard : it->second->Load(name, want);
    }
    available.erase(it);
  }
  // Persistent buffers the checkpoint holds replace the model's own (the same values where they
  // are derived from the config, as SD3's sin-cos table is); ones it lacks stay.
  for (auto& [name, slot] : model.CheckpointBuffers()) {
    auto it = available.find(name);
    if (it == available.end()) continue;
    const io::TensorInfo& info = it->second->Info(name);
    if (at::IntArrayRef(info.shape) != slot->sizes()) {
      mismatched.push_back(name + " (a buffer): checkpoint " + Shape(info.shape) + " (" + it->second->path() +
                           "), model " + Shape(slot->sizes()));
    } else if (at::isFloatingType(info.scalar_type) != at::isFloatingType(slot->scalar_type())) {
      wrong_kind.push_back(name + " (a buffer): checkpoint " + info.dtype + " (" + it->second->path() + "), model " +
                           c10::toString(slot->scalar_type()));
    } else {
      *slot = it->second->Load(name, slot->scalar_type()).to(slot->device());
    }
    available.erase(it);
  }
  if (missing.empty() && mismatched.empty() && wrong_dtype.empty() && wrong_kind.empty() && available.empty() &&
      duplicated.empty()) {
    return;
  }

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
  list("non-floating dtype(s) for floating parameters", wrong_dtype);
  list("floating dtype(s) for integer or boolean parameters", wrong_kind);
  list("unexpected key(s)", unexpected);
  list("duplicated key(s)", duplicated);
  throw WeightsError(message.str());
}

namespace {

uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

at::Tensor SeededValues(const std::string& fqn, at::IntArrayRef shape, uint64_t seed) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  const int64_t n = t.numel();
  const float scale = shape.size() <= 1 ? 0.5f
                                         : static_cast<float>(1.0 / std::sqrt(static_cast<double>(n / std::max<int64_t>(1, shape[0]))));
  const uint64_t base = SplitMix64(seed ^ Fnv1a64(fqn));
  float* out = t.data_ptr<float>();
  at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t bits = SplitMix64(base + static_cast<uint64_t>(i));
      const float u = static_cast<float>(bits >> 40) * (1.0f / 8388608.0f) - 1.0f;
      out[i] = u * scale;
    }
  });
  return t;
}

void RandomizeParameters(Module& model, uint64_t seed) {
  for (auto& [name, slot] : model.NamedParameters()) {
    *slot = SeededValues(name, slot->sizes(), seed).to(slot->scalar_type());
  }
}

}  // namespace weft::nn

#include "executor/model_dir.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "runtime/io/diffusers_dir.h"
#include "runtime/io/safetensors.h"

namespace weft::exec {
namespace fs = std::filesystem;

namespace {

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A field that counts layers, blocks or heads: what the export builds that many of.
bool IsCount(const std::string& key) {
  return key.rfind("num_", 0) == 0 || EndsWith(key, "_layers") || EndsWith(key, "_blocks") || EndsWith(key, "_heads");
}

void CheckConfig(const std::string& dir, const std::string& text) {
  const std::string pre = "--model-dir " + dir + ": config.json ";
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 1: ..." without the tag.
    std::string what = e.what();
    if (const size_t tag = what.find("] "); what.rfind("[json.exception", 0) == 0 && tag != std::string::npos) {
      what = what.substr(tag + 2);
    }
    throw std::runtime_error(pre + "is not valid JSON: " + what);
  }
  if (!config.is_object()) {
    throw std::runtime_error(pre + "is not a JSON object (a diffusers config.json is {\"_class_name\": ...})");
  }
  if (!config.contains("_class_name")) {
    throw std::runtime_error(pre + "has no `_class_name` (a diffusers config.json names its model class there, e.g. "
                                   "\"FluxTransformer2DModel\")");
  }
  if (!config["_class_name"].is_string()) {
    throw std::runtime_error("--model-dir " + dir + ": config.json's `_class_name` is " + config["_class_name"].dump() +
                             ", not a string naming a model class");
  }
  for (const auto& [key, value] : config.items()) {
    if (!IsCount(key) || !value.is_number_integer()) continue;
    const long long n = value.get<long long>();
    if (n < 0 || n > kMaxConfigCount) {
      throw std::runtime_error(pre + "`" + key + "` is " + std::to_string(n) + "; weft accepts 0.." +
                               std::to_string(kMaxConfigCount) + " for a count of layers, blocks or heads");
    }
  }
}

}  // namespace

ModelDir ReadModelDir(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw std::runtime_error("--model-dir " + dir + ": not a directory");
  if (!fs::exists(root / "config.json")) {
    throw std::runtime_error("--model-dir " + dir + ": no config.json (expected a diffusers save_pretrained directory)");
  }
  const std::string text = ReadText(root / "config.json");
  CheckConfig(dir, text);
  ModelDir result;
  result.class_name = nlohmann::json::parse(text)["_class_name"].get<std::string>();
  try {
    result.weight_files = io::DiffusersWeightFiles(dir);
  } catch (const io::SafetensorsError& e) {
    throw std::runtime_error(std::string("--model-dir: ") + e.what());
  }
  return result;
}

void CheckCheckpointHoldsTheProgram(const std::string& dir, const program::Program& program,
                                    const std::vector<std::string>& weight_files) {
  std::map<std::string, std::vector<int64_t>> checkpoint;
  long double checkpoint_values = 0;
  try {
    for (const std::string& file : weight_files) {
      const io::SafetensorsFile f = io::SafetensorsFile::Open(file);
      for (const std::string& key : f.Keys()) {
        const io::TensorInfo& info = f.Info(key);
        long double n = 1;
        for (int64_t d : info.shape) n *= static_cast<long double>(d);
        checkpoint_values += n;
        checkpoint.emplace(key, info.shape);
      }
    }
  } catch (const io::SafetensorsError& e) {
    throw std::runtime_error(std::string("--model-dir: ") + e.what());
  }
  long double program_values = 0;
  int64_t missing = 0, mismatched = 0;
  std::string first;
  for (const auto& [fqn, shape] : program.ParameterShapes()) {
    long double n = 1;
    for (int64_t d : shape) n *= static_cast<long double>(d);
    program_values += n;
    auto it = checkpoint.find(fqn);
    if (it == checkpoint.end()) {
      if (missing++ == 0 && first.empty()) first = "`" + fqn + "` " + Shape(shape) + " is not in it";
    } else if (it->second != shape) {
      if (mismatched++ == 0 && first.empty()) {
        first = "`" + fqn + "` is " + Shape(it->second) + " there but " + Shape(shape) + " in the program";
      }
    }
  }
  if (missing == 0 && mismatched == 0) return;
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "%.4Lg parameter values, but its checkpoint holds %.4Lg", program_values,
                checkpoint_values);
  throw std::runtime_error("--model-dir " + dir + ": config.json describes a " +
                           (program.manifest ? program.manifest->class_name : std::string("model")) + " with " + numbers +
                           " (" + std::to_string(missing) + " parameter(s) missing, " + std::to_string(mismatched) +
                           " of another shape; e.g. " + first + "): the config and the weights do not belong together");
}

}  // namespace weft::exec

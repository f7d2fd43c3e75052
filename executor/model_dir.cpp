#include "executor/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include <cstdio>
#include <memory>

#include "compiler/model/graph_json.h"
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

// The parameters config.json describes must be the checkpoint's: compared from the safetensors
// headers and the model built on the meta device, before any rank allocates a parameter, so a
// config that does not belong to its weights (a billion layers, other widths) is named at once.
void CheckCheckpointHoldsTheModel(const std::string& dir, const models::ModelSpec& spec,
                                  const std::vector<std::string>& weight_files) {
  std::map<std::string, std::vector<int64_t>> checkpoint;
  long double checkpoint_values = 0;
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
  const std::unique_ptr<nn::Module> model = models::CreateModel(spec);
  long double model_values = 0;
  int64_t missing = 0, mismatched = 0;
  std::string first;
  for (const auto& [name, slot] : model->NamedParameters()) {
    model_values += static_cast<long double>(slot->numel());
    const std::vector<int64_t> shape = slot->sizes().vec();
    auto it = checkpoint.find(name);
    if (it == checkpoint.end()) {
      if (missing++ == 0 && first.empty()) first = "`" + name + "` " + Shape(shape) + " is not in it";
    } else if (it->second != shape) {
      if (mismatched++ == 0 && first.empty()) {
        first = "`" + name + "` is " + Shape(it->second) + " there but " + Shape(shape) + " in the model";
      }
    }
  }
  if (missing == 0 && mismatched == 0) return;
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "%.4Lg parameter values, but its checkpoint holds %.4Lg", model_values,
                checkpoint_values);
  throw std::runtime_error("--model-dir " + dir + ": config.json describes " + spec.ToString() + " with " + numbers + " (" +
                           std::to_string(missing) + " parameter(s) missing, " + std::to_string(mismatched) +
                           " of another shape; e.g. " + first + "): the config and the weights do not belong together");
}

}  // namespace

ModelDir ReadModelDir(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw std::runtime_error("--model-dir " + dir + ": not a directory");
  if (!fs::exists(root / "config.json")) {
    throw std::runtime_error("--model-dir " + dir + ": no config.json (expected a diffusers save_pretrained directory)");
  }
  ModelDir result;
  const std::string name = root.filename().string();
  try {
    result.spec = models::SpecFromConfigJson(ReadText(root / "config.json"), name);
  } catch (const std::invalid_argument& e) {
    std::string problem = e.what();
    if (problem.rfind(name + ": ", 0) == 0) problem = problem.substr(name.size() + 2);
    throw std::runtime_error("--model-dir " + dir + ": " + problem);
  }
  try {
    result.weight_files = io::DiffusersWeightFiles(dir);
  } catch (const io::SafetensorsError& e) {
    throw std::runtime_error(std::string("--model-dir: ") + e.what());
  }
  try {
    CheckCheckpointHoldsTheModel(dir, result.spec, result.weight_files);
  } catch (const io::SafetensorsError& e) {
    throw std::runtime_error(std::string("--model-dir: ") + e.what());
  }
  return result;
}

std::string GraphFileMatching(const std::string& model_graph_hash, const std::string& data_dir) {
  std::vector<fs::path> candidates;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data_dir + "/graphs", ec)) {
    if (entry.path().string().size() > 11 &&
        entry.path().string().compare(entry.path().string().size() - 11, 11, ".graph.json") == 0) {
      candidates.push_back(entry.path());
    }
  }
  std::sort(candidates.begin(), candidates.end());
  for (const fs::path& path : candidates) {
    model::GraphReadResult read = model::ReadGraphFile(path.string());
    if (read.graph && read.graph->Hash() == model_graph_hash) return path.string();
  }
  return "";
}

}  // namespace weft::exec

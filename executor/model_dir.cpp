#include "executor/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

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

}  // namespace

ModelDir ReadModelDir(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw std::runtime_error("--model-dir " + dir + ": not a directory");
  if (!fs::exists(root / "config.json")) {
    throw std::runtime_error("--model-dir " + dir + ": no config.json (expected a diffusers save_pretrained directory)");
  }
  ModelDir result;
  try {
    result.spec = models::SpecFromConfigJson(ReadText(root / "config.json"), root.filename().string());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("--model-dir " + dir + ": " + e.what());
  }
  try {
    result.weight_files = io::DiffusersWeightFiles(dir);
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

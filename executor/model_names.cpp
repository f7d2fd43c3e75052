#include "executor/model_names.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace weft::exec {

namespace fs = std::filesystem;

std::string ModelConfigName(const std::string& name) {
  const size_t colon = name.find(':');
  if (colon == std::string::npos) return name == "flux" || name == "wan" ? name + "-tiny" : name;
  const std::string family = name.substr(0, colon);
  const std::string config = name.substr(colon + 1);
  if (family == "flux" && (config == "dev" || config == "schnell")) return "flux1-" + config;
  if (family == "wan" && (config == "1.3b" || config == "14b")) return "wan2.1-t2v-" + config;
  return family + "-" + config;
}

std::vector<std::string> ModelConfigNames(const std::string& data_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(data_dir) / "tools" / "model_configs", ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ModelConfigFile(const std::string& name, const std::string& data_dir) {
  const std::string stem = ModelConfigName(name);
  const fs::path file = fs::path(data_dir) / "tools" / "model_configs" / (stem + ".json");
  // A name is a file name, never a path: `--model ../x` must not read outside the directory.
  if (stem.find('/') == std::string::npos && !stem.empty() && stem[0] != '.' && fs::is_regular_file(file)) {
    return file.string();
  }
  std::string known;
  for (const std::string& n : ModelConfigNames(data_dir)) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model `" + name + "`: no " + stem + ".json in " + data_dir +
                              "/tools/model_configs (there: " + (known.empty() ? "none" : known) +
                              "); give a diffusers directory with --model-dir, or a config with --model-config");
}

bool ClassHasModelConfig(const std::string& class_name, const std::string& data_dir) {
  for (const std::string& name : ModelConfigNames(data_dir)) {
    std::ifstream in(fs::path(data_dir) / "tools" / "model_configs" / (name + ".json"));
    const nlohmann::json spec = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!spec.is_object() || !spec.contains("config") || !spec["config"].is_object()) continue;
    const nlohmann::json& config = spec["config"];
    if (config.value("_class_name", "") == class_name && spec.contains("workloads") && spec["workloads"].is_array() &&
        !spec["workloads"].empty()) {
      return true;
    }
  }
  return false;
}

}  // namespace weft::exec

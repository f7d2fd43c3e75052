#include "runtime/io/diffusers_dir.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/io/safetensors.h"

namespace weft::io {
namespace fs = std::filesystem;

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> DiffusersWeightFiles(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw SafetensorsError(dir + ": not a directory");
  std::vector<fs::path> indexes, preferred, any;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (EndsWith(name, ".safetensors.index.json")) indexes.push_back(entry.path());
    if (EndsWith(name, ".safetensors")) {
      any.push_back(entry.path());
      if (name.rfind("diffusion_pytorch_model", 0) == 0) preferred.push_back(entry.path());
    }
  }
  std::set<std::string> files;
  if (indexes.size() > 1) throw SafetensorsError(dir + ": several *.safetensors.index.json files");
  if (indexes.size() == 1) {
    std::ifstream in(indexes[0]);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json index = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw SafetensorsError(indexes[0].string() + ": no `weight_map` object");
    }
    for (const auto& [key, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) throw SafetensorsError(indexes[0].string() + ": weight_map[`" + key + "`] is not a file name");
      // Only files inside the directory: a relative name with no `..` (symbolic links inside the
      // directory, e.g. a Hugging Face cache's links to its blobs, are the directory's own).
      const std::string name = shard.get<std::string>();
      const fs::path relative(name);
      bool inside = !name.empty() && !relative.is_absolute() && !relative.has_root_name();
      for (const fs::path& part : relative) inside = inside && part != "..";
      if (!inside) {
        throw SafetensorsError(indexes[0].string() + ": weight_map[`" + key + "`] names `" + name +
                               "`, which is outside the model directory " + dir +
                               " (an index may name only files inside its directory)");
      }
      const fs::path path = root / relative;
      if (!fs::exists(path)) {
        throw SafetensorsError(indexes[0].string() + ": weight_map[`" + key + "`] names " + path.string() +
                               ", which does not exist");
      }
      files.insert(fs::absolute(path).string());
    }
  } else {
    for (const fs::path& path : preferred.empty() ? any : preferred) files.insert(fs::absolute(path).string());
  }
  if (files.empty()) throw SafetensorsError(dir + ": no *.safetensors weights");
  return {files.begin(), files.end()};
}

}  // namespace weft::io

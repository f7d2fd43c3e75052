#pragma once

// `weft-run --model NAME`: the tools/model_configs entry (class, config, workloads) a model is
// exported from. NAME is an entry's file name ("qwen-image-tiny", "wan2.1-t2v-1.3b") or one of
// weft's short names, family:config -- flux:tiny -> flux-tiny, flux:dev -> flux1-dev,
// flux:schnell -> flux1-schnell, wan:1.3b -> wan2.1-t2v-1.3b, wan:14b -> wan2.1-t2v-14b, any
// other family:config -> family-config, a bare family -> its tiny config.

#include <string>
#include <vector>

namespace weft::exec {

// The entry's file name a model name resolves to ("flux:dev" -> "flux1-dev").
std::string ModelConfigName(const std::string& name);

// `data_dir`/tools/model_configs/<ModelConfigName(name)>.json. Throws std::invalid_argument
// naming the model, the file looked for and the entries there are, when there is none.
std::string ModelConfigFile(const std::string& name, const std::string& data_dir);

// The entries of `data_dir`/tools/model_configs, by file name, sorted.
std::vector<std::string> ModelConfigNames(const std::string& data_dir);

// Whether an entry of `data_dir`/tools/model_configs builds `class_name` and has workloads (the
// export tool makes a model dir's example inputs at them).
bool ClassHasModelConfig(const std::string& class_name, const std::string& data_dir);

}  // namespace weft::exec

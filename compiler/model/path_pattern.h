#pragma once

// Compressed module paths in graph files: a path component may be an index set `{0..18}` or
// `{0,2,5..7}` standing for every listed index. The exporter writes one entry for all list items
// whose content is identical; the reader expands it back (README.md, "Compression").

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::model {

// Expands `pattern` into the paths it stands for, in index order (the cartesian product of
// every index set, leftmost set outermost). A path without braces expands to itself. On a
// malformed set (empty, descending range, non-digits, unbalanced braces, more than
// `max_paths` results) returns false and sets `error`.
bool ExpandPathPattern(std::string_view pattern, std::vector<std::string>& out, std::string& error,
                       size_t max_paths = 1u << 22);

// Groups `entries` (path, canonical content) into patterns: entries whose paths differ only in
// components that index a list container (`is_list(prefix)` is true for the path before that
// component) and whose content is equal become one pattern. Exact: each pattern expands to
// exactly the merged paths. Patterns are ordered by their first path's position in `entries`.
// Returns (pattern, index of the representative entry in `entries`).
template <typename IsList>
std::vector<std::pair<std::string, size_t>> CompressPaths(
    const std::vector<std::pair<std::string, std::string>>& entries, IsList is_list);

// Non-template core of CompressPaths: `list_prefix[i][k]` tells whether component k of entry i
// indexes a list.
std::vector<std::pair<std::string, size_t>> CompressPathsImpl(
    const std::vector<std::pair<std::string, std::string>>& entries,
    const std::vector<std::vector<bool>>& list_component);

// Splits a dotted path into components ("" -> no components).
std::vector<std::string> SplitPath(std::string_view path);

template <typename IsList>
std::vector<std::pair<std::string, size_t>> CompressPaths(
    const std::vector<std::pair<std::string, std::string>>& entries, IsList is_list) {
  std::vector<std::vector<bool>> list_component;
  list_component.reserve(entries.size());
  for (const auto& entry : entries) {
    const std::vector<std::string> comps = SplitPath(entry.first);
    std::vector<bool> flags(comps.size(), false);
    std::string prefix;
    for (size_t k = 0; k < comps.size(); ++k) {
      const bool digits = !comps[k].empty() &&
                          comps[k].find_first_not_of("0123456789") == std::string::npos;
      flags[k] = digits && is_list(std::string_view(prefix));
      if (k > 0) prefix += '.';
      prefix += comps[k];
    }
    list_component.push_back(std::move(flags));
  }
  return CompressPathsImpl(entries, list_component);
}

}  // namespace weft::model

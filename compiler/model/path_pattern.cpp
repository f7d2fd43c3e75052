#include "compiler/model/path_pattern.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

namespace weft::model {
namespace {

bool ParseIndex(std::string_view text, int64_t& out) {
  if (text.empty() || text.size() > 12) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

// Parses the inside of `{...}` into sorted unique indices.
bool ParseIndexSet(std::string_view body, std::vector<int64_t>& out, std::string& error) {
  std::set<int64_t> values;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    const std::string_view item = body.substr(start, comma - start);
    const size_t dots = item.find("..");
    if (dots == std::string_view::npos) {
      int64_t v = 0;
      if (!ParseIndex(item, v)) {
        error = "index set `{" + std::string(body) + "}` has a non-numeric item `" +
                std::string(item) + "`";
        return false;
      }
      values.insert(v);
    } else {
      int64_t lo = 0, hi = 0;
      if (!ParseIndex(item.substr(0, dots), lo) || !ParseIndex(item.substr(dots + 2), hi)) {
        error = "index range `" + std::string(item) + "` needs two non-negative integers";
        return false;
      }
      if (hi < lo) {
        error = "index range `" + std::string(item) + "` is descending";
        return false;
      }
      if (hi - lo > (1 << 22)) {
        error = "index range `" + std::string(item) + "` is too large";
        return false;
      }
      for (int64_t v = lo; v <= hi; ++v) values.insert(v);
    }
    start = comma + 1;
  }
  out.assign(values.begin(), values.end());
  return true;
}

std::string FormatIndexSet(const std::set<int64_t>& values) {
  std::vector<std::string> parts;
  const std::vector<int64_t> v(values.begin(), values.end());
  size_t i = 0;
  while (i < v.size()) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (j == i) {
      parts.push_back(std::to_string(v[i]));
    } else if (j == i + 1) {
      parts.push_back(std::to_string(v[i]));
      parts.push_back(std::to_string(v[j]));
    } else {
      parts.push_back(std::to_string(v[i]) + ".." + std::to_string(v[j]));
    }
    i = j + 1;
  }
  if (parts.size() == 1 && parts[0].find("..") == std::string::npos) return parts[0];
  std::string out = "{";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k) out += ',';
    out += parts[k];
  }
  return out + "}";
}

// One component of a pattern under construction: a literal, or a set of list indices.
struct Component {
  bool is_set = false;
  std::string literal;
  std::set<int64_t> indices;
};

struct Item {
  std::vector<Component> comps;
  size_t content;  // index of the entry whose content this item carries
  size_t first;    // smallest entry index merged into this item
};

std::string ComponentKey(const Component& c) {
  if (!c.is_set) return "L" + c.literal;
  std::string k = "S";
  for (int64_t v : c.indices) k += std::to_string(v) + ",";
  return k;
}

}  // namespace

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    if (dot == std::string_view::npos) {
      out.emplace_back(path.substr(start));
      break;
    }
    out.emplace_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  return out;
}

bool ExpandPathPattern(std::string_view pattern, std::vector<std::string>& out, std::string& error,
                       size_t max_paths) {
  if (pattern.find_first_of("{}") == std::string_view::npos) {
    out.emplace_back(pattern);
    return true;
  }
  // Split into components, keeping braces intact (a set contains no dots other than `..`).
  std::vector<std::vector<std::string>> choices;
  size_t pos = 0;
  std::string current;
  bool any = false;
  while (pos <= pattern.size()) {
    if (pos == pattern.size() || pattern[pos] == '.') {
      choices.push_back({current});
      current.clear();
      any = true;
      if (pos == pattern.size()) break;
      ++pos;
      continue;
    }
    if (pattern[pos] == '{') {
      const size_t close = pattern.find('}', pos);
      if (close == std::string_view::npos || !current.empty()) {
        error = "unbalanced `{` in path pattern `" + std::string(pattern) + "`";
        return false;
      }
      std::vector<int64_t> indices;
      if (!ParseIndexSet(pattern.substr(pos + 1, close - pos - 1), indices, error)) return false;
      const size_t after = close + 1;
      if (after != pattern.size() && pattern[after] != '.') {
        error = "index set in `" + std::string(pattern) + "` must be a whole path component";
        return false;
      }
      std::vector<std::string> names;
      for (int64_t v : indices) names.push_back(std::to_string(v));
      choices.push_back(std::move(names));
      any = true;
      pos = after;
      if (pos == pattern.size()) break;
      ++pos;  // the dot
      if (pos == pattern.size()) {
        error = "path pattern `" + std::string(pattern) + "` ends with `.`";
        return false;
      }
      continue;
    }
    if (pattern[pos] == '}') {
      error = "unbalanced `}` in path pattern `" + std::string(pattern) + "`";
      return false;
    }
    current += pattern[pos++];
  }
  (void)any;
  size_t total = 1;
  for (const auto& c : choices) {
    total *= c.size();
    if (total > max_paths) {
      error = "path pattern `" + std::string(pattern) + "` expands to too many paths";
      return false;
    }
  }
  std::vector<size_t> idx(choices.size(), 0);
  for (size_t n = 0; n < total; ++n) {
    std::string path;
    for (size_t k = 0; k < choices.size(); ++k) {
      if (k) path += '.';
      path += choices[k][idx[k]];
    }
    out.push_back(std::move(path));
    for (size_t k = choices.size(); k-- > 0;) {
      if (++idx[k] < choices[k].size()) break;
      idx[k] = 0;
    }
  }
  return true;
}

std::vector<std::pair<std::string, size_t>> CompressPathsImpl(
    const std::vector<std::pair<std::string, std::string>>& entries,
    const std::vector<std::vector<bool>>& list_component) {
  std::vector<Item> items;
  items.reserve(entries.size());
  size_t max_len = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    Item item;
    item.content = i;
    item.first = i;
    const std::vector<std::string> comps = SplitPath(entries[i].first);
    for (size_t k = 0; k < comps.size(); ++k) {
      Component c;
      if (list_component[i][k]) {
        c.is_set = true;
        c.indices.insert(std::stoll(comps[k]));
      } else {
        c.literal = comps[k];
      }
      item.comps.push_back(std::move(c));
    }
    max_len = std::max(max_len, item.comps.size());
    items.push_back(std::move(item));
  }
  // Merge one dimension at a time, innermost first (the exporter does the same).
  for (size_t d = max_len; d-- > 0;) {
    std::map<std::string, size_t> group_of;  // key -> index into merged
    std::vector<Item> merged;
    merged.reserve(items.size());
    for (Item& item : items) {
      std::string key;
      if (d < item.comps.size() && item.comps[d].is_set) {
        for (size_t k = 0; k < item.comps.size(); ++k) {
          key += (k == d) ? std::string("*") : ComponentKey(item.comps[k]);
          key += '\x1f';
        }
        key += '\x1e';
        key += entries[item.content].second;
      } else {
        key = "\x1d" + std::to_string(item.first);
      }
      auto it = group_of.find(key);
      if (it == group_of.end()) {
        group_of.emplace(std::move(key), merged.size());
        merged.push_back(std::move(item));
      } else {
        Item& into = merged[it->second];
        into.comps[d].indices.insert(item.comps[d].indices.begin(), item.comps[d].indices.end());
        into.first = std::min(into.first, item.first);
      }
    }
    items = std::move(merged);
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, size_t>> out;
  out.reserve(items.size());
  for (const Item& item : items) {
    std::string path;
    for (size_t k = 0; k < item.comps.size(); ++k) {
      if (k) path += '.';
      path += item.comps[k].is_set ? FormatIndexSet(item.comps[k].indices) : item.comps[k].literal;
    }
    out.emplace_back(std::move(path), item.content);
  }
  return out;
}

}  // namespace weft::model

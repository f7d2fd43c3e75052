// Plan patterns against the module tree. No regular expressions: a pattern is expanded into
// simple dotted paths whose segments are literals or `*`, and those are walked down the tree,
// so matching costs O(matches), not O(modules x patterns).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "compiler/bind/bind.h"
#include "compiler/bind/glob.h"

namespace weft::bind {
namespace {

constexpr size_t kMaxExpansions = 1u << 20;

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Items of one `{...}` group: alternatives, with `m..n` ranges expanded.
bool GroupItems(const std::string& body, std::vector<std::string>& items, std::string& error) {
  size_t start = 0;
  while (true) {
    size_t comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dots = item.find("..");
    if (dots != std::string::npos && AllDigits(item.substr(0, dots)) && AllDigits(item.substr(dots + 2))) {
      const long long lo = std::stoll(item.substr(0, dots)), hi = std::stoll(item.substr(dots + 2));
      if (hi < lo || hi - lo > 1'000'000) {
        error = "range `{" + item + "}` is empty or too large";
        return false;
      }
      for (long long v = lo; v <= hi; ++v) items.push_back(std::to_string(v));
    } else {
      items.push_back(item);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace

bool ExpandAlternatives(const std::string& pattern, std::vector<std::string>& out, std::string& error) {
  out = {""};
  size_t pos = 0;
  while (pos < pattern.size()) {
    const size_t open = pattern.find('{', pos);
    const std::string literal = pattern.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (literal.find('}') != std::string::npos) {
      error = "unbalanced `}`";
      return false;
    }
    for (std::string& s : out) s += literal;
    if (open == std::string::npos) break;
    const size_t close = pattern.find('}', open);
    if (close == std::string::npos) {
      error = "unbalanced `{`";
      return false;
    }
    const std::string body = pattern.substr(open + 1, close - open - 1);
    if (body.find('{') != std::string::npos) {
      error = "nested `{` is not supported";
      return false;
    }
    std::vector<std::string> items;
    if (!GroupItems(body, items, error)) return false;
    if (out.size() * items.size() > kMaxExpansions) {
      error = "pattern expands to more than " + std::to_string(kMaxExpansions) + " paths";
      return false;
    }
    std::vector<std::string> next;
    next.reserve(out.size() * items.size());
    for (const std::string& prefix : out) {
      for (const std::string& item : items) next.push_back(prefix + item);
    }
    out = std::move(next);
    pos = close + 1;
  }
  return true;
}

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    out.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

void MatchSimple(const model::ModelGraph& graph, const std::vector<std::string>& segments,
                 std::vector<model::ModuleId>& out, MatchFailure* failure) {
  std::vector<model::ModuleId> frontier = {0};
  if (graph.modules.empty()) return;
  for (size_t k = 0; k < segments.size(); ++k) {
    std::vector<model::ModuleId> next;
    for (model::ModuleId id : frontier) {
      const model::Module& m = graph.modules[id];
      if (segments[k] == "*") {
        for (const std::string& c : m.children) {
          if (auto child = graph.FindModuleId(m.path.empty() ? c : m.path + "." + c)) next.push_back(*child);
        }
      } else if (auto child = graph.FindModuleId(m.path.empty() ? segments[k] : m.path + "." + segments[k])) {
        next.push_back(*child);
      }
    }
    if (next.empty()) {
      if (failure != nullptr && !frontier.empty() && !failure->set) {
        failure->set = true;
        failure->parent = frontier.front();
        failure->segment = segments[k];
      }
      return;
    }
    frontier = std::move(next);
  }
  out.insert(out.end(), frontier.begin(), frontier.end());
}

bool MatchPatternDetailed(const model::ModelGraph& graph, const std::string& pattern,
                          std::vector<model::ModuleId>& out, std::string& error, MatchFailure* failure) {
  std::vector<std::string> simple;
  if (!ExpandAlternatives(pattern, simple, error)) return false;
  std::vector<model::ModuleId> ids;
  for (const std::string& s : simple) MatchSimple(graph, Segments(s), ids, failure);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  out = std::move(ids);
  return true;
}

bool MatchPattern(const model::ModelGraph& graph, const std::string& pattern, std::vector<model::ModuleId>& out,
                  std::string& error) {
  return MatchPatternDetailed(graph, pattern, out, error, nullptr);
}

}  // namespace weft::bind

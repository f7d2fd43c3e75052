#pragma once

// Internal to compiler/bind: pattern expansion and matching (bind.h has the public
// MatchPattern).

#include <string>
#include <vector>

#include "compiler/model/graph.h"

namespace weft::bind {

// Where a pattern stopped matching: the deepest module reached and the segment that found no
// child there (for "did you mean" and "list has N entries" notes).
struct MatchFailure {
  bool set = false;
  model::ModuleId parent = 0;
  std::string segment;
};

// `{a,b.c}` alternation and `{m..n}` ranges expanded into plain dotted patterns (segments are
// literals or `*`).
bool ExpandAlternatives(const std::string& pattern, std::vector<std::string>& out, std::string& error);

std::vector<std::string> Segments(const std::string& path);

// Walks one plain pattern down the module tree, appending matches to `out`.
void MatchSimple(const model::ModelGraph& graph, const std::vector<std::string>& segments,
                 std::vector<model::ModuleId>& out, MatchFailure* failure);

bool MatchPatternDetailed(const model::ModelGraph& graph, const std::string& pattern,
                          std::vector<model::ModuleId>& out, std::string& error, MatchFailure* failure);

}  // namespace weft::bind

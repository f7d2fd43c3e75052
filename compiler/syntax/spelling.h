#pragma once

// Internal to compiler/syntax: "did you mean" suggestions and list wording for messages.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::syntax {

// Optimal-string-alignment distance (insertions, deletions, substitutions and adjacent
// transpositions each cost 1).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a plausible typo (distance 1
// for short words, up to 2 for words of 5+ characters; ties go to the first candidate).
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// "`a`", "`a` or `b`", "`a`, `b` or `c`".
std::string BacktickedList(const std::vector<std::string>& words);

// The hint that follows an unknown word: "; did you mean `x`?" when one is close,
// otherwise "; expected `a`, `b` or `c`".
std::string SuggestionSuffix(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace weft::syntax

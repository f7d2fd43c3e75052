#pragma once

// Size arithmetic that never wraps. Every size product of the compiler (tensor elements,
// bytes, per-rank costs, block sums) goes through these: a graph or a compiled plan may hold
// any int64, and a wrapped product reads as a plausible small (or negative) number.
//
// Checked forms return std::nullopt on overflow so the caller can report it; the saturating
// forms clamp to kSaturated (INT64_MAX) for values that only feed further arithmetic and are
// checked for kSaturated where they are reported (no real size is 2^63 - 1 bytes).

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace weft::source {

inline constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `dims` (1 for none); nullopt on overflow.
inline std::optional<int64_t> CheckedProduct(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// a * b and a + b for non-negative sizes, clamped to kSaturated (a saturated operand stays
// saturated).
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a == kSaturated || b == kSaturated) return (a == 0 || b == 0) ? 0 : kSaturated;
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kSaturated : out;
}

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  if (a == kSaturated || b == kSaturated) return kSaturated;
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? kSaturated : out;
}

// The product of non-negative `dims`, clamped to kSaturated.
inline int64_t SaturatingProduct(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = SaturatingMul(n, d);
  return n;
}

}  // namespace weft::source

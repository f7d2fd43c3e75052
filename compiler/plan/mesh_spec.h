#pragma once

// The one parser of mesh specifications ("ring=2,ulysses=2,tp=1"), shared by `weft`
// (compiler/driver) and, through a thin adapter, by weft-run (runtime/dist ParseMeshShape), so
// both sides accept exactly the same text with the same messages. Standard library only.
//
// Grammar: items separated by commas; each item `axis=size` or `order=a:b:c`, with spaces and
// tabs allowed around items, keys and values. An empty (or all-blank) text is the mesh of one
// rank with no axes. The vocabulary is closed and exact (lower case):
//   ring, ulysses, tp, cfg  the mesh axes; each at most once; a size is decimal digits only,
//                       1 <= size <= kMaxMeshWorldSize. cfg holds guidance branches (issue 26).
//   order               optional, at most once: the axes outermost first, separated by `:`
//                       (e.g. order=ulysses:ring:tp); default cfg:tp:ring:ulysses (Ulysses
//                       innermost: its groups are contiguous ranks; cfg outermost: each branch
//                       on a contiguous block). Three names leave cfg outermost; four place it.
// The product of the sizes (the world size) is at most kMaxMeshWorldSize as well.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/plan/execution_plan.h"

namespace weft::plan {

// The largest world a mesh may describe, and so the largest size of any one axis: 65536 ranks
// (2^16). Far beyond any job weft runs (a sequence is split at most a few thousand ways), and
// small enough to fit the `int` degrees of runtime/dist and to keep sizes x degrees in int64.
inline constexpr int64_t kMaxMeshWorldSize = int64_t{1} << 16;

struct MeshSpec {
  int64_t ring = 1;
  int64_t ulysses = 1;
  int64_t tp = 1;
  int64_t cfg = 1;
  // The axes, outermost first: names are kCfgAxis, kTpAxis, kRingAxis, kUlyssesAxis (static storage).
  std::array<std::string_view, 4> order = {kCfgAxis, kTpAxis, kRingAxis, kUlyssesAxis};
  bool order_given = false;
  // The axes the text named, in the order written (for a Mesh that lists only those).
  std::vector<std::string_view> given;

  int64_t Size(std::string_view axis) const;
  int64_t WorldSize() const { return ring * ulysses * tp * cfg; }
  // The mesh axes in world order (`order`): ring, ulysses and tp (and cfg when named) when
  // `all_axes`, else only the axes the text named. Flags (anything modes, rotate method) are left
  // at their defaults.
  std::vector<MeshAxis> Axes(bool all_axes) const;
};

// Parses `text`. On failure returns std::nullopt and sets `*error` to one line that quotes the
// text and says what is wrong, e.g.
//   mesh `ULYSSES=2`: unknown axis `ULYSSES`; did you mean `ulysses`? (axis names are lower case)
//   mesh `ulysses=1000000`: axis `ulysses` has size 1000000, more than the 65536 ranks a mesh may have
std::optional<MeshSpec> ParseMeshSpec(std::string_view text, std::string* error);

// Parses an order alone ("tp:ring:ulysses", cfg outermost, or all four; `,` also separates, for
// weft-run's --mesh-order). `context` prefixes the message ("mesh `...`: " or "").
std::optional<std::array<std::string_view, 4>> ParseMeshOrder(std::string_view text, std::string* error,
                                                               const std::string& context = "");

}  // namespace weft::plan

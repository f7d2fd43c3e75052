#include "compiler/plan/mesh_spec.h"

#include <algorithm>

namespace weft::plan {
namespace {

constexpr std::array<std::string_view, 4> kAxisNames = {kRingAxis, kUlyssesAxis, kTpAxis, kCfgAxis};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

std::optional<std::string_view> KnownAxis(std::string_view name) {
  for (std::string_view a : kAxisNames) {
    if (a == name) return a;
  }
  return std::nullopt;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// What follows "unknown axis `x`" for a name that is not an axis.
std::string UnknownAxisHint(std::string_view name) {
  const std::string lower = Lower(name);
  if (lower != name) {
    if (KnownAxis(lower) || lower == "order") {
      return "; did you mean `" + lower + "`? (mesh keys are lower case)";
    }
  }
  std::string_view best;
  size_t best_d = 3;
  for (std::string_view a : kAxisNames) {
    const size_t d = Distance(lower, a);
    if (d < best_d && d < a.size()) {
      best_d = d;
      best = a;
    }
  }
  if (!best.empty()) return "; did you mean `" + std::string(best) + "`?";
  return "; weft's mesh axes are `ring`, `ulysses`, `tp` and `cfg` (and the key `order`)";
}

std::string MaxText() { return std::to_string(kMaxMeshWorldSize) + " ranks a mesh may have"; }

}  // namespace

int64_t MeshSpec::Size(std::string_view axis) const {
  if (axis == kRingAxis) return ring;
  if (axis == kUlyssesAxis) return ulysses;
  if (axis == kTpAxis) return tp;
  if (axis == kCfgAxis) return cfg;
  return 1;
}

std::vector<MeshAxis> MeshSpec::Axes(bool all_axes) const {
  std::vector<MeshAxis> axes;
  for (std::string_view a : order) {
    const bool named = std::find(given.begin(), given.end(), a) != given.end();
    if (named || (all_axes && a != kCfgAxis)) {
      axes.push_back({std::string(a), Size(a)});
    }
  }
  return axes;
}

std::optional<std::array<std::string_view, 4>> ParseMeshOrder(std::string_view text, std::string* error,
                                                               const std::string& context) {
  auto fail = [&](const std::string& message) {
    if (error != nullptr) *error = context + message;
    return std::nullopt;
  };
  const std::string_view trimmed = Trim(text);
  const char sep = trimmed.find(':') != std::string_view::npos ? ':' : ',';
  std::vector<std::string_view> names = SplitOn(trimmed, sep);
  if (names.size() != 3 && names.size() != 4) {
    return fail("order `" + std::string(trimmed) + "` names " + std::to_string(names.size()) +
                " axes; it names the three axes ring, ulysses and tp, outermost first (e.g. tp:ring:ulysses), or "
                "those and cfg");
  }
  std::array<std::string_view, 4> order{};
  const size_t first = names.size() == 3 ? 1 : 0;  // three names: cfg stays outermost
  order[0] = kCfgAxis;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string_view name = Trim(names[i]);
    std::optional<std::string_view> axis = KnownAxis(name);
    if (!axis) {
      return fail("order `" + std::string(trimmed) + "` names unknown axis `" + std::string(name) + "`" +
                  UnknownAxisHint(name));
    }
    if (first == 1 && *axis == kCfgAxis) {
      return fail("order `" + std::string(trimmed) + "` places `cfg` among three axes; name all four (e.g. "
                  "tp:ring:ulysses:cfg) or leave cfg out to keep it outermost");
    }
    for (size_t k = first; k < first + i; ++k) {
      if (order[k] == *axis) {
        return fail("order `" + std::string(trimmed) + "` names `" + std::string(*axis) +
                    "` twice; it names each of ring, ulysses and tp (and cfg) once, outermost first");
      }
    }
    order[first + i] = *axis;
  }
  return order;
}

std::optional<MeshSpec> ParseMeshSpec(std::string_view text, std::string* error) {
  const std::string context = "mesh `" + std::string(text) + "`: ";
  auto fail = [&](const std::string& message) {
    if (error != nullptr) *error = context + message;
    return std::nullopt;
  };
  MeshSpec spec;
  if (Trim(text).empty()) return spec;
  const std::vector<std::string_view> items = SplitOn(text, ',');
  for (size_t n = 0; n < items.size(); ++n) {
    const std::string_view item = Trim(items[n]);
    if (item.empty()) {
      return fail("item " + std::to_string(n + 1) +
                  " is empty; expected axis=size items separated by commas (e.g. ring=2,ulysses=2,tp=1)");
    }
    const size_t eq = item.find('=');
    const std::string_view key = eq == std::string_view::npos ? item : Trim(item.substr(0, eq));
    if (eq == std::string_view::npos || key.empty()) {
      return fail("`" + std::string(item) + "` is not axis=size; expected items like ring=2,ulysses=2,tp=1");
    }
    const std::string_view value = Trim(item.substr(eq + 1));
    if (key == "order") {
      if (spec.order_given) return fail("`order` is given twice");
      std::string order_error;
      auto order = ParseMeshOrder(value, &order_error, context);
      if (!order) {
        if (error != nullptr) *error = order_error;
        return std::nullopt;
      }
      spec.order = *order;
      spec.order_given = true;
      continue;
    }
    std::optional<std::string_view> axis = KnownAxis(key);
    if (!axis) {
      if (key == kCpGroup) {
        return fail("`cp` is the ring x ulysses group, not an axis; give its factors as `ring` and `ulysses`");
      }
      return fail("unknown axis `" + std::string(key) + "`" + UnknownAxisHint(key));
    }
    const std::string name(*axis);
    if (std::find(spec.given.begin(), spec.given.end(), *axis) != spec.given.end()) {
      return fail("axis `" + name + "` is given twice");
    }
    if (value.empty()) return fail("axis `" + name + "` has no size; expected a positive integer");
    const bool negative = value.front() == '-';
    const std::string_view digits = negative ? value.substr(1) : value;
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return fail("size `" + std::string(value) + "` of axis `" + name +
                  "` is not a whole number; expected a positive integer such as 2");
    }
    // Accumulate with a ceiling: any value past the bound is reported as written.
    int64_t size = 0;
    for (char c : digits) {
      size = size * 10 + (c - '0');
      if (size > kMaxMeshWorldSize) break;
    }
    if (negative && size != 0) {
      return fail("axis `" + name + "` has size " + std::string(value) + "; sizes are at least 1");
    }
    if (size < 1) return fail("axis `" + name + "` has size 0; sizes are at least 1");
    if (size > kMaxMeshWorldSize) {
      return fail("axis `" + name + "` has size " + std::string(value) + ", more than the " + MaxText());
    }
    if (*axis == kRingAxis) spec.ring = size;
    if (*axis == kUlyssesAxis) spec.ulysses = size;
    if (*axis == kTpAxis) spec.tp = size;
    if (*axis == kCfgAxis) spec.cfg = size;
    spec.given.push_back(*axis);
  }
  // Each size is at most 2^16, so the product of three fits in int64; the fourth is checked first.
  const int64_t three = spec.ring * spec.ulysses * spec.tp;
  if (three > kMaxMeshWorldSize || three * spec.cfg > kMaxMeshWorldSize) {
    const std::string product =
        three > kMaxMeshWorldSize ? std::to_string(three) + (spec.cfg > 1 ? " x cfg " + std::to_string(spec.cfg) : "")
                                  : std::to_string(three * spec.cfg);
    return fail("ring " + std::to_string(spec.ring) + " x ulysses " + std::to_string(spec.ulysses) + " x tp " +
                std::to_string(spec.tp) + (spec.cfg > 1 ? " x cfg " + std::to_string(spec.cfg) : "") + " = " +
                product + " ranks, more than the " + MaxText());
  }
  return spec;
}

}  // namespace weft::plan

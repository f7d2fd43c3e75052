#include "compiler/program/equal_sizes.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "compiler/program/expr.h"
#include "compiler/program/lowering.h"

namespace weft::program {
namespace {

std::string Find(std::unordered_map<std::string, std::string>& parent, const std::string& s) {
  auto it = parent.find(s);
  if (it == parent.end() || it->second == s) return s;
  const std::string root = Find(parent, it->second);
  parent[s] = root;
  return root;
}

// Each symbol joined to another -> the one that stands for its class.
std::unordered_map<std::string, std::string> Roots(std::unordered_map<std::string, std::string>& parent) {
  std::unordered_map<std::string, std::string> equal;
  std::vector<std::string> symbols;
  for (const auto& [symbol, unused] : parent) symbols.push_back(symbol);
  for (const std::string& symbol : symbols) {
    const std::string r = Find(parent, symbol);
    if (r != symbol) equal[symbol] = r;
  }
  return equal;
}

// The top-level factors of `text` split at `*` (not `**`), parentheses kept whole; one factor
// when `text` is no product. Empty when `text` is a sum or difference at the top level.
std::vector<std::string> TopLevelFactors(const std::string& text) {
  std::vector<std::string> factors;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth != 0) continue;
    if ((c == '+' || c == '-') && i > 0) return {};
    if (c == '*' && !(i + 1 < text.size() && text[i + 1] == '*') && !(i > 0 && text[i - 1] == '*')) {
      factors.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  factors.push_back(text.substr(start));
  return factors;
}

std::string Strip(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  while (text.size() > 2 && text.front() == '(' && text.back() == ')') {
    int depth = 0;
    bool outer = true;  // the first `(` closes at the end
    for (size_t i = 0; i + 1 < text.size(); ++i) {
      depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
      if (depth == 0) outer = false;
    }
    if (!outer) break;
    text = text.substr(1, text.size() - 2);
  }
  return text;
}

}  // namespace

GuardInputSizes::GuardInputSizes(const Program& program) : p_(program) {
  const std::vector<CallValues> root = ModuleCallValues(program, "");
  if (root.empty()) return;
  for (const auto& [name, leaves] : root[0].arguments) {
    if (leaves.size() == 1 && !leaves[0].empty()) value_of_[name] = leaves[0];
  }
}

const SymInt* GuardInputSizes::Of(const std::string& term) const {
  const size_t q = term.find("'].size()[");
  if (term.rfind("L['", 0) != 0 || q == std::string::npos || term.back() != ']') return nullptr;
  const std::string index = term.substr(q + 10, term.size() - q - 11);
  if (index.empty() || index.size() > 6 || !std::all_of(index.begin(), index.end(), ::isdigit)) return nullptr;
  auto v = value_of_.find(term.substr(3, q - 3));
  const TensorMeta* m = v == value_of_.end() ? nullptr : p_.FindTensor(v->second);
  const size_t k = std::stoul(index);
  return m == nullptr || k >= m->sizes.size() ? nullptr : &m->sizes[k];
}

// `a` and `b` name one size (equal at the export's example too): their symbols joined where they
// differ by one symbol each (`s33*s20 + s52` and `s31 + s33*s20`: s52 is s31).
static void JoinSums(std::unordered_map<std::string, std::string>& parent, const SymInt& a, const SymInt& b) {
  if (!a.symbolic || !b.symbolic || a.expr.empty() || b.expr.empty() || a.expr == b.expr || a.value != b.value) return;
  std::vector<std::string> sides[2];
  try {
    sides[0] = Expr::Parse(a.expr).SumTerms();
    sides[1] = Expr::Parse(b.expr).SumTerms();
  } catch (const ExprError&) {
    return;
  }
  for (std::vector<std::string>& side : sides) std::sort(side.begin(), side.end());
  std::vector<std::string> left, right;
  std::set_difference(sides[0].begin(), sides[0].end(), sides[1].begin(), sides[1].end(), std::back_inserter(left));
  std::set_difference(sides[1].begin(), sides[1].end(), sides[0].begin(), sides[0].end(), std::back_inserter(right));
  if (left.size() != 1 || right.size() != 1) return;
  std::string x, y;
  try {
    x = Expr::Parse(left[0]).AsSymbol();
    y = Expr::Parse(right[0]).AsSymbol();
  } catch (const ExprError&) {
    return;
  }
  if (x.empty() || y.empty()) return;
  const std::string fx = Find(parent, x), fy = Find(parent, y);
  if (fx == fy) return;
  parent[fx] = fx;
  parent[fy] = fy;
  parent[std::max(fx, fy)] = std::min(fx, fy);
}

// scaled_dot_product_attention needs its mask's last dim to be the keys' length (or 1): a mask
// input whose length the export gave a symbol of its own (MotifVideo's text mask beside its text
// states) is as long as the keys it masks, which no guard says.
static void JoinMaskAndKeyLengths(const Program& p, std::unordered_map<std::string, std::string>& parent) {
  for (const Node& n : p.nodes) {
    if (n.target != "torch.ops.aten.scaled_dot_product_attention.default") continue;
    const TensorMeta* key = nullptr;
    const TensorMeta* mask = nullptr;
    for (const NamedArgument& in : n.inputs) {
      if (in.arg.kind != Argument::Kind::kTensor) continue;
      if (in.name == "key") key = p.FindTensor(in.arg.name);
      if (in.name == "attn_mask") mask = p.FindTensor(in.arg.name);
    }
    if (key == nullptr || mask == nullptr || key->sizes.size() < 2 || mask->sizes.empty()) continue;
    JoinSums(parent, mask->sizes.back(), key->sizes[key->sizes.size() - 2]);
  }
}

std::unordered_map<std::string, std::string> EqualSymbolsFromGuards(const Program& p) {
  std::unordered_map<std::string, std::string> parent;
  JoinMaskAndKeyLengths(p, parent);
  if (p.guards.empty()) return Roots(parent);
  const GuardInputSizes sizes(p);
  // A factor's symbol (`L['x'].size()[k]` of a dim that is one symbol), its integer ("#N"), or "".
  auto factor = [&](const std::string& f) -> std::string {
    if (!f.empty() && std::all_of(f.begin(), f.end(), ::isdigit)) return "#" + f;
    const SymInt* size = sizes.Of(f);
    if (size == nullptr || !size->symbolic) return "";
    try {
      return Expr::Parse(size->expr).AsSymbol();
    } catch (const ExprError&) {
      return "";
    }
  };
  for (const std::string& g : p.guards) {
    const size_t eq = g.find("==");
    if (eq == std::string::npos || g.find("==", eq + 2) != std::string::npos || g.find('<') != std::string::npos ||
        g.find('>') != std::string::npos || g.find('!') != std::string::npos) {
      continue;
    }
    std::vector<std::string> sides[2];
    bool readable = true;
    for (int s = 0; s < 2 && readable; ++s) {
      const std::vector<std::string> factors = TopLevelFactors(Strip(s == 0 ? g.substr(0, eq) : g.substr(eq + 2)));
      readable = !factors.empty();
      for (const std::string& f : factors) {
        const std::string x = factor(Strip(f));
        readable = readable && !x.empty();
        sides[s].push_back(x);
      }
    }
    if (!readable) continue;
    for (std::vector<std::string>& side : sides) std::sort(side.begin(), side.end());
    std::vector<std::string> left, right;  // what each side has that the other lacks
    std::set_difference(sides[0].begin(), sides[0].end(), sides[1].begin(), sides[1].end(), std::back_inserter(left));
    std::set_difference(sides[1].begin(), sides[1].end(), sides[0].begin(), sides[0].end(), std::back_inserter(right));
    if (left.size() != 1 || right.size() != 1 || left[0][0] == '#' || right[0][0] == '#') continue;
    const std::string a = Find(parent, left[0]), b = Find(parent, right[0]);
    if (a == b) continue;
    parent[a] = a;
    parent[b] = b;
    parent[std::max(a, b)] = std::min(a, b);
  }
  return Roots(parent);
}

std::string SpellEqualSizesAlike(const std::string& infix, const std::unordered_map<std::string, std::string>& equal) {
  if (equal.empty()) return infix;
  std::string out;
  bool involved = false;  // a symbol of some class: its products are sorted, so both spellings meet
  for (size_t i = 0; i < infix.size();) {
    const bool starts = (std::isalpha(static_cast<unsigned char>(infix[i])) || infix[i] == '_') &&
                        (i == 0 || !(std::isalnum(static_cast<unsigned char>(infix[i - 1])) || infix[i - 1] == '_'));
    if (!starts) {
      out += infix[i++];
      continue;
    }
    size_t end = i;
    while (end < infix.size() && (std::isalnum(static_cast<unsigned char>(infix[end])) || infix[end] == '_')) ++end;
    const std::string name = infix.substr(i, end - i);
    auto it = equal.find(name);
    if (it != equal.end()) {
      involved = true;
      out += it->second;
    } else {
      for (const auto& [member, root] : equal) involved = involved || root == name;
      out += name;
    }
    i = end;
  }
  if (!involved || out.empty() || out[0] == '-') return out;
  std::vector<std::string> factors = TopLevelFactors(out);
  if (factors.size() < 2) return out;
  std::sort(factors.begin(), factors.end());
  std::string sorted;
  for (const std::string& f : factors) sorted += (sorted.empty() ? "" : "*") + f;
  return sorted;
}

const std::string& SizeSpelling::Infix(const SymInt& s) {
  static const std::string kNone;
  if (!s.symbolic || s.expr.empty()) return kNone;
  return Of(s).infix;
}

const std::string& SizeSpelling::Expression(const SymInt& s) {
  if (!s.symbolic || s.expr.empty()) return s.expr;
  return Of(s).expression;
}

const SizeSpelling::Spelled& SizeSpelling::Of(const SymInt& s) {
  auto it = cache_.find(s.expr);
  if (it != cache_.end()) return it->second;
  Spelled spelled{s.expr, s.expr};
  std::string values;
  try {
    const Expr e = Expr::Parse(s.expr);
    spelled.infix = SpellEqualSizesAlike(e.Infix(), equal_);
    values = Sampled(e);
  } catch (const ExprError&) {
    // An expression weft cannot read is its own spelling.
  }
  if (!values.empty()) spelled = by_values_.emplace(values, spelled).first->second;
  return cache_.emplace(s.expr, spelled).first->second;
}

// The expression's values at the sample sizes as one key; "" where it cannot be evaluated there
// (a float, an overflow, an unbacked size).
std::string SizeSpelling::Sampled(const Expr& e) const {
  constexpr int kPoints = 24;
  std::string key;
  for (int point = 0; point < kPoints; ++point) {
    ExprEnv env;
    env.symbol = [&](const std::string& name) -> std::optional<int64_t> {
      if (IsUnbackedSymbol(name)) return std::nullopt;
      auto eq = equal_.find(name);
      const std::string& root = eq == equal_.end() ? name : eq->second;
      uint64_t h = std::hash<std::string>{}(root) ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(point + 1));
      h ^= h >> 31;
      h *= 0xBF58476D1CE4E5B9ull;
      h ^= h >> 29;
      return static_cast<int64_t>(2 + h % 198);
    };
    try {
      key += std::to_string(e.Evaluate(env)) + ",";
    } catch (const ExprError&) {
      return "";
    }
  }
  return key;
}

}  // namespace weft::program

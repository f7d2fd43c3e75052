#pragma once

// The three expression forms a torch.export program carries, read by one small Python-expression
// parser and evaluated with checked 64-bit integers:
//   * symbolic sizes, in sympy's srepr form:   Add(Mul(Integer(2), Symbol('s1', integer=True)), Integer(1))
//   * range-constraint keys, in sympy's str form:  s40*s65*s66
//   * guards, in Python over the inputs:        L['img_ids'].size()[0] == L['hidden_states'].size()[1]
// Supported: integers, floats (Python semantics: `/` and a float operand give a float), True/False,
// strings, names (symbols), L['arg'] with subscripts and .size(), calls of Symbol, Integer, Float,
// Add, Mul, Pow, FloorDiv, Mod, PythonMod, Max, Min, max, min, Abs, CeilToInt, TruncToInt,
// FloorToInt, RoundToInt, ToFloat, IntTrueDiv, FloatTrueDiv, int, float, round, math.trunc,
// math.floor, math.ceil, math.sqrt, torch.sym_float, torch.sym_int, torch.sym_sqrt (guards on
// derived floats: DiT's `math.trunc(torch.sym_float(n) ** 0.5) == 4`, EasyAnimate's aspect ratio);
// operators + - * / // % ** (unary -, +), comparisons (chains too), and, or, not. Anything else is a
// parse error naming it, so an unknown guard is refused, never skipped.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft::program {

class ExprError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value while evaluating: an integer (booleans are 0/1 with `is_bool`), a float, a string, a list
// (a tensor's sizes, or a nested argument like img_shapes), or a tensor input (its sizes).
struct ExprValue {
  enum class Kind : uint8_t { kInt, kFloat, kStr, kList, kTensor, kNone };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double f = 0;
  bool is_bool = false;
  std::string s;
  std::vector<ExprValue> list;  // kList elements; kTensor sizes

  static ExprValue Int(int64_t v) { ExprValue x; x.i = v; return x; }
  static ExprValue Float(double v) { ExprValue x; x.kind = Kind::kFloat; x.f = v; return x; }
  static ExprValue Bool(bool v) { ExprValue x; x.i = v ? 1 : 0; x.is_bool = true; return x; }
  static ExprValue Str(std::string v) { ExprValue x; x.kind = Kind::kStr; x.s = std::move(v); return x; }
  static ExprValue List(std::vector<ExprValue> v) { ExprValue x; x.kind = Kind::kList; x.list = std::move(v); return x; }
  static ExprValue Tensor(const std::vector<int64_t>& sizes);
};

struct ExprEnv {
  // The value of symbol `name` (s31 ...), or nullopt when unbound (then evaluation fails naming it).
  std::function<std::optional<int64_t>(const std::string&)> symbol;
  // The input called `name` (for L['name']), or nullopt when absent.
  std::function<std::optional<ExprValue>(const std::string&)> input;
};

// How deep an expression may nest (parentheses, calls, unary operators) and how deep its tree of
// operations may be: parsing, evaluating and printing recurse per level. Real guards and sizes
// nest under 20 levels.
inline constexpr int kMaxExprNesting = 256;
inline constexpr int kMaxExprTreeDepth = 1000;

// Whether `name` is an unbacked symbol (u0, u12): a size or scalar only the data determines (the
// rows of a nonzero, an .item()), never an input's size.
bool IsUnbackedSymbol(const std::string& name);

class Expr {
 public:
  // Parses `text`. Throws ExprError naming the position and what was found, or the bound an
  // expression nesting deeper than kMaxExprNesting / kMaxExprTreeDepth passes.
  static Expr Parse(const std::string& text);

  // Evaluates to an integer (or boolean as 0/1). Throws ExprError on an unbound symbol, a missing
  // input, an out-of-range subscript, division by zero, overflow, or a float result.
  int64_t Evaluate(const ExprEnv& env) const;
  ExprValue EvaluateValue(const ExprEnv& env) const;

  // The symbols the expression names (Symbol('s1') and bare names), in first-use order.
  std::vector<std::string> Symbols() const;
  // Python-style infix text, e.g. "2*s1 + 1" for Add(Mul(Integer(2), Symbol('s1')), Integer(1)).
  std::string Infix() const;
  // The operands of a sum as infix text ("s1 + 2*s3" -> {"s1", "2*s3"}), or {Infix()} when the
  // expression is no sum: the streams of a joint sequence's length.
  std::vector<std::string> SumTerms() const;
  // The symbol when the whole expression is one, else "".
  std::string AsSymbol() const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace weft::program

#include "compiler/program/expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>

namespace weft::program {

ExprValue ExprValue::Tensor(const std::vector<int64_t>& sizes) {
  ExprValue x;
  x.kind = Kind::kTensor;
  for (int64_t s : sizes) x.list.push_back(Int(s));
  return x;
}

struct Expr::Node {
  enum class Kind : uint8_t { kInt, kFloat, kStr, kName, kCall, kMethod, kSubscript, kBinary, kUnary, kCompare, kAnd, kOr, kNot, kList };
  Kind kind = Kind::kInt;
  int64_t value = 0;
  double fvalue = 0;
  std::string text;  // name, string, operator, call or method name
  std::vector<std::shared_ptr<const Node>> children;  // operands, arguments (a method's object first)
  std::vector<std::string> ops;  // comparison operators of a chain
  int depth = 1;  // of the tree below and including this node
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;
using N = Expr::Node;

struct Token {
  enum class Kind : uint8_t { kInt, kFloat, kStr, kName, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  int64_t value = 0;
  double fvalue = 0;
  size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) { Lex(); }

  NodePtr ParseAll() {
    NodePtr e = Or();
    if (Peek().kind != Token::Kind::kEnd) Fail("unexpected `" + Peek().text + "`");
    return e;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    // A hostile expression may be megabytes: its start is enough to recognise it.
    const std::string shown = text_.size() > 120 ? text_.substr(0, 100) + "..." : text_;
    throw ExprError("cannot read expression `" + shown + "` at column " + std::to_string(Peek().pos + 1) + ": " + what);
  }

  // Parsing, evaluating and printing recurse per level of nesting: a bound keeps a hostile
  // expression (5,000 parentheses deep) an error, not a stack overflow.
  class Nesting {
   public:
    explicit Nesting(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxExprNesting) {
        p_.Fail("nests deeper than " + std::to_string(kMaxExprNesting) + " levels");
      }
    }
    ~Nesting() { --p_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& p_;
  };

  void Lex() {
    size_t i = 0;
    while (i < text_.size()) {
      const char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token t;
      t.pos = i;
      if (std::isdigit(static_cast<unsigned char>(c))) {
        auto digits = [&](size_t j) {
          while (j < text_.size() && std::isdigit(static_cast<unsigned char>(text_[j]))) ++j;
          return j;
        };
        size_t j = digits(i);
        bool is_float = false;
        // Python's repr of a float: 0.6666666666666666, 1e-05, 2.5e+10 (a `.` before a digit only:
        // `x.size()` stays a method call).
        if (j + 1 < text_.size() && text_[j] == '.' && std::isdigit(static_cast<unsigned char>(text_[j + 1]))) {
          j = digits(j + 1);
          is_float = true;
        }
        if (j < text_.size() && (text_[j] == 'e' || text_[j] == 'E')) {
          size_t k = j + 1;
          if (k < text_.size() && (text_[k] == '+' || text_[k] == '-')) ++k;
          if (k < text_.size() && std::isdigit(static_cast<unsigned char>(text_[k]))) {
            j = digits(k);
            is_float = true;
          }
        }
        t.text = text_.substr(i, j - i);
        if (is_float) {
          t.kind = Token::Kind::kFloat;
          t.fvalue = std::strtod(t.text.c_str(), nullptr);
        } else {
          t.kind = Token::Kind::kInt;
          try {
            t.value = std::stoll(t.text);
          } catch (const std::out_of_range&) {
            throw ExprError("expression `" + text_ + "`: integer " + t.text + " does not fit in 64 bits");
          }
        }
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_')) ++j;
        t.kind = Token::Kind::kName;
        t.text = text_.substr(i, j - i);
        i = j;
      } else if (c == '\'' || c == '"') {
        size_t j = i + 1;
        while (j < text_.size() && text_[j] != c) ++j;
        if (j >= text_.size()) throw ExprError("expression `" + text_ + "`: unterminated string");
        t.kind = Token::Kind::kStr;
        t.text = text_.substr(i + 1, j - i - 1);
        i = j + 1;
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "<", ">",
                                     "(", ")", "[", "]", ",", ".", "="};
        bool found = false;
        for (const char* op : kOps) {
          const size_t n = std::char_traits<char>::length(op);
          if (text_.compare(i, n, op) == 0) {
            t.kind = Token::Kind::kOp;
            t.text = op;
            i += n;
            found = true;
            break;
          }
        }
        if (!found) throw ExprError("expression `" + text_ + "`: unexpected character `" + std::string(1, c) + "`");
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.pos = text_.size();
    end.text = "end of text";
    tokens_.push_back(end);
  }

  const Token& Peek() const { return tokens_[pos_]; }
  bool IsOp(const char* op) const { return Peek().kind == Token::Kind::kOp && Peek().text == op; }
  bool IsName(const char* name) const { return Peek().kind == Token::Kind::kName && Peek().text == name; }
  void Expect(const char* op) {
    if (!IsOp(op)) Fail(std::string("expected `") + op + "`, found `" + Peek().text + "`");
    ++pos_;
  }

  NodePtr Make(N::Kind kind, std::string text, std::vector<NodePtr> children) const {
    auto n = std::make_shared<N>();
    n->kind = kind;
    n->text = std::move(text);
    n->children = std::move(children);
    SetDepth(*n);
    return n;
  }

  // A long left-associative chain (s0 + s0 + ... + s0) nests without recursing while parsing,
  // but evaluation recurses through it: its tree depth is bounded too.
  void SetDepth(N& n) const {
    for (const NodePtr& c : n.children) n.depth = std::max(n.depth, c->depth + 1);
    if (n.depth > kMaxExprTreeDepth) {
      Fail("its tree is deeper than " + std::to_string(kMaxExprTreeDepth) + " operations");
    }
  }

  NodePtr Or() {
    Nesting nesting(*this);
    NodePtr first = And();
    if (!IsName("or")) return first;
    std::vector<NodePtr> items{first};
    while (IsName("or")) {
      ++pos_;
      items.push_back(And());
    }
    return Make(N::Kind::kOr, "or", std::move(items));
  }

  NodePtr And() {
    NodePtr first = Not();
    if (!IsName("and")) return first;
    std::vector<NodePtr> items{first};
    while (IsName("and")) {
      ++pos_;
      items.push_back(Not());
    }
    return Make(N::Kind::kAnd, "and", std::move(items));
  }

  NodePtr Not() {
    if (IsName("not")) {
      ++pos_;
      Nesting nesting(*this);
      return Make(N::Kind::kNot, "not", {Not()});
    }
    return Compare();
  }

  NodePtr Compare() {
    NodePtr first = Arith();
    std::vector<NodePtr> items{first};
    std::vector<std::string> ops;
    while (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">=")) {
      ops.push_back(Peek().text);
      ++pos_;
      items.push_back(Arith());
    }
    if (ops.empty()) return first;
    auto n = std::make_shared<N>();
    n->kind = N::Kind::kCompare;
    n->children = std::move(items);
    n->ops = std::move(ops);
    SetDepth(*n);
    return n;
  }

  NodePtr Arith() {
    NodePtr left = Term();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Peek().text;
      ++pos_;
      left = Make(N::Kind::kBinary, op, {left, Term()});
    }
    return left;
  }

  NodePtr Term() {
    NodePtr left = Factor();
    while (IsOp("*") || IsOp("//") || IsOp("%") || IsOp("/")) {
      const std::string op = Peek().text;
      ++pos_;
      left = Make(N::Kind::kBinary, op, {left, Factor()});
    }
    return left;
  }

  NodePtr Factor() {
    if (IsOp("-") || IsOp("+")) {
      const std::string op = Peek().text;
      ++pos_;
      Nesting nesting(*this);
      return Make(N::Kind::kUnary, op, {Factor()});
    }
    NodePtr base = Postfix();
    if (IsOp("**")) {
      ++pos_;
      Nesting nesting(*this);
      return Make(N::Kind::kBinary, "**", {base, Factor()});
    }
    return base;
  }

  std::vector<NodePtr> CallArguments() {
    std::vector<NodePtr> args;
    Expect("(");
    while (!IsOp(")")) {
      // Keyword arguments (Symbol('s1', positive=True)) carry assumptions only: skipped.
      if (Peek().kind == Token::Kind::kName && tokens_[pos_ + 1].kind == Token::Kind::kOp && tokens_[pos_ + 1].text == "=") {
        pos_ += 2;
        Or();
      } else {
        args.push_back(Or());
      }
      if (!IsOp(",")) break;
      ++pos_;
    }
    Expect(")");
    return args;
  }

  NodePtr Postfix() {
    NodePtr e = Atom();
    while (true) {
      if (IsOp("[")) {
        ++pos_;
        NodePtr index = Or();
        Expect("]");
        e = Make(N::Kind::kSubscript, "", {e, index});
      } else if (IsOp("(")) {
        if (e->kind != N::Kind::kName) Fail("only named functions can be called");
        e = Make(N::Kind::kCall, e->text, CallArguments());
      } else if (IsOp(".")) {
        ++pos_;
        if (Peek().kind != Token::Kind::kName) Fail("expected a method name after `.`");
        const std::string method = Peek().text;
        ++pos_;
        // math.trunc(...), torch.sym_float(...): a module's function, not a method of a value.
        if (e->kind == N::Kind::kName && (e->text == "math" || e->text == "torch")) {
          e = Make(N::Kind::kCall, e->text + "." + method, CallArguments());
          continue;
        }
        std::vector<NodePtr> args{e};
        for (NodePtr& a : CallArguments()) args.push_back(std::move(a));
        e = Make(N::Kind::kMethod, method, std::move(args));
      } else {
        return e;
      }
    }
  }

  NodePtr Atom() {
    const Token t = Peek();
    switch (t.kind) {
      case Token::Kind::kInt: {
        ++pos_;
        auto n = std::make_shared<N>();
        n->kind = N::Kind::kInt;
        n->value = t.value;
        return n;
      }
      case Token::Kind::kFloat: {
        ++pos_;
        auto n = std::make_shared<N>();
        n->kind = N::Kind::kFloat;
        n->fvalue = t.fvalue;
        return n;
      }
      case Token::Kind::kStr:
        ++pos_;
        return Make(N::Kind::kStr, t.text, {});
      case Token::Kind::kName:
        ++pos_;
        return Make(N::Kind::kName, t.text, {});
      case Token::Kind::kOp:
        if (t.text == "(") {
          ++pos_;
          NodePtr e = Or();
          Expect(")");
          return e;
        }
        if (t.text == "[") {
          ++pos_;
          std::vector<NodePtr> items;
          while (!IsOp("]")) {
            items.push_back(Or());
            if (!IsOp(",")) break;
            ++pos_;
          }
          Expect("]");
          return Make(N::Kind::kList, "", std::move(items));
        }
        break;
      case Token::Kind::kEnd:
        break;
    }
    Fail("unexpected `" + t.text + "`");
  }

  const std::string& text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

// A float as Python's repr would round-trip it.
std::string FloatLiteral(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

class Evaluator {
 public:
  Evaluator(const std::string& text, const ExprEnv& env) : text_(text), env_(env) {}

  ExprValue Eval(const N& n) {
    switch (n.kind) {
      case N::Kind::kInt:
        return ExprValue::Int(n.value);
      case N::Kind::kFloat:
        return ExprValue::Float(n.fvalue);
      case N::Kind::kStr:
        return ExprValue::Str(n.text);
      case N::Kind::kName:
        return Name(n.text);
      case N::Kind::kList: {
        std::vector<ExprValue> items;
        for (const auto& c : n.children) items.push_back(Eval(*c));
        return ExprValue::List(std::move(items));
      }
      case N::Kind::kSubscript:
        return Subscript(n);
      case N::Kind::kCall:
        return Call(n);
      case N::Kind::kMethod:
        return Method(n);
      case N::Kind::kUnary: {
        const ExprValue v = Number(Eval(*n.children[0]));
        if (n.text == "+") return v;
        return v.kind == ExprValue::Kind::kFloat ? ExprValue::Float(-v.f) : ExprValue::Int(Checked(0, v.i, '-'));
      }
      case N::Kind::kBinary:
        return Binary(n.text, Number(Eval(*n.children[0])), Number(Eval(*n.children[1])));
      case N::Kind::kCompare: {
        ExprValue left = Number(Eval(*n.children[0]));
        for (size_t i = 0; i < n.ops.size(); ++i) {
          const ExprValue right = Number(Eval(*n.children[i + 1]));
          if (!Compare(n.ops[i], left, right)) return ExprValue::Bool(false);
          left = right;
        }
        return ExprValue::Bool(true);
      }
      case N::Kind::kAnd:
        for (const auto& c : n.children) {
          if (!Truth(Eval(*c))) return ExprValue::Bool(false);
        }
        return ExprValue::Bool(true);
      case N::Kind::kOr:
        for (const auto& c : n.children) {
          if (Truth(Eval(*c))) return ExprValue::Bool(true);
        }
        return ExprValue::Bool(false);
      case N::Kind::kNot:
        return ExprValue::Bool(!Truth(Eval(*n.children[0])));
    }
    Fail("unknown node");
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const { throw ExprError("expression `" + text_ + "`: " + what); }

  int64_t IntOf(const ExprValue& v) const {
    if (v.kind == ExprValue::Kind::kFloat) Fail("expected an integer, found the float " + FloatText(v.f));
    if (v.kind != ExprValue::Kind::kInt) Fail("expected a number");
    return v.i;
  }

  ExprValue Number(const ExprValue& v) const {
    if (v.kind != ExprValue::Kind::kInt && v.kind != ExprValue::Kind::kFloat) Fail("expected a number");
    return v;
  }

  static double AsDouble(const ExprValue& v) { return v.kind == ExprValue::Kind::kFloat ? v.f : static_cast<double>(v.i); }
  static bool Truth(const ExprValue& v) { return v.kind == ExprValue::Kind::kFloat ? v.f != 0 : v.i != 0; }
  static std::string FloatText(double d) { return FloatLiteral(d); }

  // A float that must become an integer (int(), math.trunc ...): finite and within 64 bits.
  int64_t ToInt(double d) const {
    if (!std::isfinite(d) || d >= 9.2e18 || d <= -9.2e18) Fail("the float " + FloatText(d) + " is no 64-bit integer");
    return static_cast<int64_t>(d);
  }

  bool Compare(const std::string& op, const ExprValue& a, const ExprValue& b) const {
    if (a.kind == ExprValue::Kind::kInt && b.kind == ExprValue::Kind::kInt) {
      const int64_t l = a.i, r = b.i;
      return op == "==" ? l == r : op == "!=" ? l != r : op == "<" ? l < r : op == "<=" ? l <= r : op == ">" ? l > r : l >= r;
    }
    const double l = AsDouble(a), r = AsDouble(b);
    return op == "==" ? l == r : op == "!=" ? l != r : op == "<" ? l < r : op == "<=" ? l <= r : op == ">" ? l > r : l >= r;
  }

  int64_t Checked(int64_t a, int64_t b, char op) const {
    int64_t r = 0;
    bool overflow = false;
    switch (op) {
      case '+': overflow = __builtin_add_overflow(a, b, &r); break;
      case '-': overflow = __builtin_sub_overflow(a, b, &r); break;
      case '*': overflow = __builtin_mul_overflow(a, b, &r); break;
      default: Fail("internal: unknown operator");
    }
    if (overflow) Fail("overflows 64-bit integers (" + std::to_string(a) + " " + op + " " + std::to_string(b) + ")");
    return r;
  }

  int64_t FloorDiv(int64_t a, int64_t b) const {
    if (b == 0) Fail("division by zero");
    if (a == INT64_MIN && b == -1) Fail("overflows 64-bit integers");
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }

  int64_t Mod(int64_t a, int64_t b) const {
    if (b == 0) Fail("modulo by zero");
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }

  int64_t Pow(int64_t base, int64_t exp) const {
    if (exp < 0) Fail("negative exponent " + std::to_string(exp));
    int64_t r = 1;
    for (int64_t i = 0; i < exp; ++i) r = Checked(r, base, '*');
    return r;
  }

  // Python semantics: integers stay exact (checked), `/` and any float operand compute in double.
  ExprValue Binary(const std::string& op, const ExprValue& x, const ExprValue& y) const {
    if (x.kind == ExprValue::Kind::kInt && y.kind == ExprValue::Kind::kInt && op != "/") return ExprValue::Int(IntBinary(op, x.i, y.i));
    const double a = AsDouble(x), b = AsDouble(y);
    if (op == "+") return ExprValue::Float(a + b);
    if (op == "-") return ExprValue::Float(a - b);
    if (op == "*") return ExprValue::Float(a * b);
    if (op == "/") {
      if (b == 0) Fail("division by zero");
      return ExprValue::Float(a / b);
    }
    if (op == "//") {
      if (b == 0) Fail("division by zero");
      return ExprValue::Float(std::floor(a / b));
    }
    if (op == "%") {
      if (b == 0) Fail("modulo by zero");
      return ExprValue::Float(a - b * std::floor(a / b));
    }
    if (op == "**") {
      const double r = std::pow(a, b);
      if (std::isnan(r)) Fail("power " + FloatText(a) + " ** " + FloatText(b) + " is not a real number");
      return ExprValue::Float(r);
    }
    Fail("unknown operator `" + op + "`");
  }

  int64_t IntBinary(const std::string& op, int64_t a, int64_t b) const {
    if (op == "+") return Checked(a, b, '+');
    if (op == "-") return Checked(a, b, '-');
    if (op == "*") return Checked(a, b, '*');
    if (op == "//") return FloorDiv(a, b);
    if (op == "%") return Mod(a, b);
    if (op == "**") return Pow(a, b);
    Fail("unknown operator `" + op + "`");
  }

  ExprValue Name(const std::string& name) const {
    if (name == "True") return ExprValue::Bool(true);
    if (name == "False") return ExprValue::Bool(false);
    if (name == "None") {
      ExprValue v;
      v.kind = ExprValue::Kind::kNone;
      return v;
    }
    if (name == "L") {
      ExprValue v;
      v.kind = ExprValue::Kind::kStr;
      v.s = "\x01L";  // the inputs' namespace; only subscripted
      return v;
    }
    return ExprValue::Int(Symbol(name));
  }

  int64_t Symbol(const std::string& name) const {
    std::optional<int64_t> v = env_.symbol ? env_.symbol(name) : std::nullopt;
    if (!v) Fail("symbol " + name + " has no value (no input determines it)");
    return *v;
  }

  ExprValue Subscript(const N& n) {
    ExprValue object = Eval(*n.children[0]);
    ExprValue index = Eval(*n.children[1]);
    if (object.kind == ExprValue::Kind::kStr && object.s == "\x01L") {
      if (index.kind != ExprValue::Kind::kStr) Fail("inputs are subscripted by name");
      std::optional<ExprValue> v = env_.input ? env_.input(index.s) : std::nullopt;
      if (!v) Fail("no input `" + index.s + "`");
      return *v;
    }
    if (object.kind != ExprValue::Kind::kList && object.kind != ExprValue::Kind::kTensor) Fail("subscript of a non-list");
    const int64_t i = IntOf(index);
    const int64_t size = static_cast<int64_t>(object.list.size());
    const int64_t k = i < 0 ? i + size : i;
    if (k < 0 || k >= size) Fail("index " + std::to_string(i) + " out of range for " + std::to_string(size) + " elements");
    return object.list[static_cast<size_t>(k)];
  }

  ExprValue Method(const N& n) {
    ExprValue object = Eval(*n.children[0]);
    if (n.text == "size" || n.text == "shape") {
      if (object.kind != ExprValue::Kind::kTensor) Fail(".size() of something that is not a tensor");
      if (n.children.size() == 1) return ExprValue::List(object.list);
      ExprValue dim = Eval(*n.children[1]);
      ExprValue sizes = ExprValue::List(object.list);
      const int64_t d = IntOf(dim) < 0 ? IntOf(dim) + static_cast<int64_t>(sizes.list.size()) : IntOf(dim);
      if (d < 0 || d >= static_cast<int64_t>(sizes.list.size())) Fail("dim out of range");
      return sizes.list[static_cast<size_t>(d)];
    }
    Fail("unknown method ." + n.text + "()");
  }

  ExprValue Call(const N& n) {
    const std::string& f = n.text;
    if (f == "Symbol") {
      if (n.children.empty() || n.children[0]->kind != N::Kind::kStr) Fail("Symbol() needs a name");
      return ExprValue::Int(Symbol(n.children[0]->text));
    }
    if (f == "Float" && n.children.size() == 1 && n.children[0]->kind == N::Kind::kStr) {
      return ExprValue::Float(std::strtod(n.children[0]->text.c_str(), nullptr));  // sympy's Float('0.5')
    }
    std::vector<ExprValue> values;
    for (const auto& c : n.children) values.push_back(Number(Eval(*c)));
    auto need = [&](size_t count) {
      if (values.size() != count) Fail(f + "() takes " + std::to_string(count) + " arguments");
    };
    if (std::optional<ExprValue> v = FloatCall(f, values, need)) return *v;
    std::vector<int64_t> args;
    for (const ExprValue& v : values) args.push_back(IntOf(v));
    if (f == "Integer") {
      need(1);
      return ExprValue::Int(args[0]);
    }
    if (f == "Add" || f == "Mul") {
      int64_t r = f == "Add" ? 0 : 1;
      for (int64_t a : args) r = Checked(r, a, f == "Add" ? '+' : '*');
      return ExprValue::Int(r);
    }
    if (f == "Pow") {
      need(2);
      return ExprValue::Int(Pow(args[0], args[1]));
    }
    if (f == "FloorDiv") {
      need(2);
      return ExprValue::Int(FloorDiv(args[0], args[1]));
    }
    if (f == "Mod" || f == "PythonMod") {
      need(2);
      return ExprValue::Int(Mod(args[0], args[1]));
    }
    if (f == "Max" || f == "max" || f == "Min" || f == "min") {
      if (args.empty()) Fail(f + "() of nothing");
      int64_t r = args[0];
      for (int64_t a : args) r = (f == "Max" || f == "max") ? std::max(r, a) : std::min(r, a);
      return ExprValue::Int(r);
    }
    if (f == "Abs" || f == "abs") {
      need(1);
      return ExprValue::Int(args[0] < 0 ? Checked(0, args[0], '-') : args[0]);
    }
    Fail("unknown function " + f + "()");
  }

  // The functions that take or give floats (Python's and sympy's spellings); nullopt for the
  // integer-only ones.
  template <typename Need>
  std::optional<ExprValue> FloatCall(const std::string& f, const std::vector<ExprValue>& a, Need need) const {
    auto rounded = [&](double (*round)(double)) {
      need(1);
      if (a[0].kind == ExprValue::Kind::kInt) return a[0];
      return ExprValue::Int(ToInt(round(a[0].f)));
    };
    if (f == "int" || f == "math.trunc" || f == "TruncToInt" || f == "torch.sym_int") return rounded(std::trunc);
    if (f == "math.floor" || f == "FloorToInt") return rounded(std::floor);
    if (f == "math.ceil" || f == "CeilToInt") return rounded(std::ceil);
    if (f == "round" || f == "RoundToInt") return rounded(std::nearbyint);  // half to even, as Python
    if (f == "float" || f == "torch.sym_float" || f == "ToFloat" || f == "Float") {
      need(1);
      return ExprValue::Float(AsDouble(a[0]));
    }
    if (f == "IntTrueDiv" || f == "FloatTrueDiv") {
      need(2);
      return Binary("/", a[0], a[1]);
    }
    if (f == "math.sqrt" || f == "torch.sym_sqrt" || f == "OpaqueUnaryFn_sqrt") {
      need(1);
      if (AsDouble(a[0]) < 0) Fail("square root of a negative number");
      return ExprValue::Float(std::sqrt(AsDouble(a[0])));
    }
    const bool any_float = std::any_of(a.begin(), a.end(), [](const ExprValue& v) { return v.kind == ExprValue::Kind::kFloat; });
    if (!any_float) return std::nullopt;
    if (f == "Max" || f == "max" || f == "Min" || f == "min") {
      if (a.empty()) Fail(f + "() of nothing");
      ExprValue r = a[0];
      for (const ExprValue& v : a) {
        const bool take = (f == "Max" || f == "max") ? AsDouble(v) > AsDouble(r) : AsDouble(v) < AsDouble(r);
        if (take) r = v;
      }
      return r;
    }
    if (f == "Abs" || f == "abs") {
      need(1);
      return ExprValue::Float(std::fabs(a[0].f));
    }
    if (f == "Add" || f == "Mul" || f == "Pow") {
      ExprValue r = a[0];
      for (size_t i = 1; i < a.size(); ++i) r = Binary(f == "Add" ? "+" : f == "Mul" ? "*" : "**", r, a[i]);
      return r;
    }
    Fail(f + "() of a float");
  }

  const std::string& text_;
  const ExprEnv& env_;
};

void CollectSymbols(const N& n, std::vector<std::string>& out) {
  auto add = [&](const std::string& s) {
    for (const std::string& x : out) {
      if (x == s) return;
    }
    out.push_back(s);
  };
  if (n.kind == N::Kind::kName && n.text != "L" && n.text != "True" && n.text != "False" && n.text != "None") add(n.text);
  if (n.kind == N::Kind::kCall && n.text == "Symbol" && !n.children.empty()) {
    add(n.children[0]->text);
    return;
  }
  for (const auto& c : n.children) CollectSymbols(*c, out);
}

// Python-style infix text of a size expression (Add(Symbol('s1'), Integer(1)) -> "s1 + 1"),
// parenthesised where an operand binds more loosely than its operator. `level`: 0 sum, 1
// product, 2 atom.
std::string InfixText(const N& n, int level) {
  auto wrap = [&](const std::string& t, int own) { return own < level ? "(" + t + ")" : t; };
  auto join = [&](const char* op, int own) {
    std::string t;
    for (size_t i = 0; i < n.children.size(); ++i) t += (i ? op : "") + InfixText(*n.children[i], own + (i ? 1 : 0) * (own == 1));
    return wrap(t, own);
  };
  switch (n.kind) {
    case N::Kind::kInt: return n.value < 0 ? wrap(std::to_string(n.value), 1) : std::to_string(n.value);
    case N::Kind::kFloat: return wrap(FloatLiteral(n.fvalue), n.fvalue < 0 ? 1 : 2);
    case N::Kind::kName: return n.text;
    case N::Kind::kStr: return "'" + n.text + "'";
    case N::Kind::kCall:
      if (n.text == "Symbol" && n.children.size() == 1) return n.children[0]->text;
      if (n.text == "Integer" && n.children.size() == 1) return InfixText(*n.children[0], level);
      if (n.text == "Add" && !n.children.empty()) return join(" + ", 0);
      if (n.text == "Mul" && !n.children.empty()) return join("*", 1);
      if ((n.text == "FloorDiv" || n.text == "Mod" || n.text == "PythonMod") && n.children.size() == 2) {
        const char* op = n.text == "FloorDiv" ? "//" : "%";
        return wrap(InfixText(*n.children[0], 1) + op + InfixText(*n.children[1], 2), 1);
      }
      if (n.text == "Pow" && n.children.size() == 2) return InfixText(*n.children[0], 2) + "**" + InfixText(*n.children[1], 2);
      break;
    case N::Kind::kUnary:
      if (n.children.size() == 1) return wrap(n.text + InfixText(*n.children[0], 2), 1);
      break;
    case N::Kind::kBinary:
      if (n.children.size() == 2) {
        const int own = n.text == "+" || n.text == "-" ? 0 : n.text == "**" ? 2 : 1;
        return wrap(InfixText(*n.children[0], own) + (own == 0 ? " " + n.text + " " : n.text) +
                        InfixText(*n.children[1], own + 1),
                    own);
      }
      break;
    default: break;
  }
  std::string t = n.text + "(";
  for (size_t i = 0; i < n.children.size(); ++i) t += (i ? ", " : "") + InfixText(*n.children[i], 0);
  return t + ")";
}

}  // namespace

bool IsUnbackedSymbol(const std::string& name) {
  return name.size() > 1 && name[0] == 'u' &&
         std::all_of(name.begin() + 1, name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

std::string Expr::Infix() const { return InfixText(*root_, 0); }

Expr Expr::Parse(const std::string& text) {
  Expr e;
  e.text_ = text;
  Parser parser(e.text_);
  e.root_ = parser.ParseAll();
  return e;
}

ExprValue Expr::EvaluateValue(const ExprEnv& env) const {
  Evaluator ev(text_, env);
  return ev.Eval(*root_);
}

int64_t Expr::Evaluate(const ExprEnv& env) const {
  ExprValue v = EvaluateValue(env);
  if (v.kind == ExprValue::Kind::kFloat) throw ExprError("expression `" + text_ + "`: evaluates to a float, not an integer");
  if (v.kind != ExprValue::Kind::kInt) throw ExprError("expression `" + text_ + "`: does not evaluate to a number");
  return v.i;
}

std::vector<std::string> Expr::Symbols() const {
  std::vector<std::string> out;
  CollectSymbols(*root_, out);
  return out;
}

std::vector<std::string> Expr::SumTerms() const {
  const bool call = root_->kind == N::Kind::kCall && root_->text == "Add";
  const bool binary = root_->kind == N::Kind::kBinary && root_->text == "+";
  if (!call && !binary) return {Infix()};
  std::vector<std::string> terms;
  for (const auto& c : root_->children) terms.push_back(InfixText(*c, 0));
  return terms;
}

std::string Expr::AsSymbol() const {
  if (root_->kind == N::Kind::kName) return root_->text;
  if (root_->kind == N::Kind::kCall && root_->text == "Symbol" && !root_->children.empty()) return root_->children[0]->text;
  return "";
}

}  // namespace weft::program

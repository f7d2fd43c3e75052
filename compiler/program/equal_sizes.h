#pragma once

// Sizes a program's guards make equal, for comparing symbolic lengths.
//
// torch.export gives each input dim its own symbol and records how they relate only as guards,
// which the executor checks before every run (program/bindings.h). A guard that two products of
// input sizes are equal and differ in one factor each -- Latte's `L['hidden_states'].size()[2] *
// L['hidden_states'].size()[0] == L['hidden_states'].size()[2] * L['timestep'].size()[0]`, frames
// x batch on both sides -- says those two sizes are equal (sizes are positive), so the timestep's
// batch s53 is the latents' batch s47 wherever a length spells one or the other. The passes that
// compare lengths as text (compiler/program/local_sizes.h) spell each such symbol one way.

#include <string>
#include <unordered_map>

#include "compiler/program/expr.h"
#include "compiler/program/program.h"

namespace weft::program {

// The size a guard term names, `L['name'].size()[k]` (spaces removed): the k-th dim of the
// forward argument `name` as the program records it; nullptr for any other term.
class GuardInputSizes {
 public:
  explicit GuardInputSizes(const Program& program);
  const SymInt* Of(const std::string& term) const;

 private:
  const Program& p_;
  std::unordered_map<std::string, std::string> value_of_;  // forward argument -> its graph input
};

// symbol -> the symbol that stands for its class (the least name), for every symbol some guard
// makes equal to another, or that an attention's mask length makes equal to its keys' length;
// absent symbols stand for themselves.
std::unordered_map<std::string, std::string> EqualSymbolsFromGuards(const Program& program);

// `infix` (an Expr's Infix text) with every symbol of `equal` spelled as its class's, and the
// factors of a top-level product in sorted order: `s53*(s20//2)` and `(s20//2)*s47` meet.
std::string SpellEqualSizesAlike(const std::string& infix, const std::unordered_map<std::string, std::string>& equal);

// Symbolic sizes in one spelling per function of the input sizes: equal symbols spelled alike,
// and two expressions that agree at every one of 24 sample sizes (each symbol a pseudo-random size
// from 2 to 199, symbols the guards make equal the same) taken as one -- the export computes
// Latte's `batch * (batch' * tokens // batch)` in a later block where the first computed `batch *
// tokens`. The first spelling seen stands for the others.
class SizeSpelling {
 public:
  explicit SizeSpelling(const Program& program) : equal_(EqualSymbolsFromGuards(program)) {}

  // Infix text (SpellEqualSizesAlike); "" for a constant size. An expression weft cannot read is
  // its own text.
  const std::string& Infix(const SymInt& s);
  // The sympy expression (`SymInt::expr`) of the first size seen with the same values; `s.expr`
  // itself when it is the first, or cannot be evaluated.
  const std::string& Expression(const SymInt& s);

 private:
  struct Spelled {
    std::string infix, expression;
  };
  const Spelled& Of(const SymInt& s);
  std::string Sampled(const Expr& e) const;

  std::unordered_map<std::string, std::string> equal_;
  std::unordered_map<std::string, Spelled> cache_;         // expression -> its spellings
  std::unordered_map<std::string, Spelled> by_values_;     // sampled values -> the first seen
};

}  // namespace weft::program

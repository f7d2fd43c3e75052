#include "tests/fuzz/program_fuzz_target.h"

#include <exception>

#include "compiler/program/archive.h"
#include "compiler/program/bindings.h"
#include "compiler/program/expr.h"
#include "compiler/program/graph_view.h"
#include "compiler/program/program_reader.h"

namespace weft::fuzz {

std::string CheckProgramJson(const uint8_t* data, size_t size, const std::optional<program::Manifest>& manifest) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  program::Program p;
  try {
    p = program::ParseProgramJson(text, "fuzz.pt2: models/model.json");
  } catch (const program::ProgramError&) {
    return "";
  } catch (const std::exception& e) {
    return std::string("reading threw a non-ProgramError: ") + e.what();
  }
  p.path = "fuzz.pt2";
  p.manifest = manifest;
  try {
    for (const auto& [name, value] : p.sym_int_values) {
      if (value.symbolic) program::Expr::Parse(value.expr);
    }
  } catch (const program::ExprError&) {
    // A size that does not parse is reported when it is used.
  } catch (const std::exception& e) {
    return std::string("an expression threw a non-ExprError: ") + e.what();
  }
  try {
    program::GraphOfProgram(p);
  } catch (const program::ProgramError&) {
  } catch (const program::ExprError&) {
    return "the graph view let an ExprError escape (it must become a ProgramError naming the program)";
  } catch (const std::exception& e) {
    return std::string("the graph view threw a non-ProgramError: ") + e.what();
  }
  return "";
}

}  // namespace weft::fuzz

#include "tests/fuzz/program_fuzz_target.h"

#include <cstdio>
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
    for (const std::string& guard : p.guards) program::Expr::Parse(guard);
  } catch (const program::ExprError&) {
    // A guard that does not parse is refused when the program binds its inputs.
  } catch (const std::exception& e) {
    return std::string("a guard threw a non-ExprError: ") + e.what();
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

std::string CheckProgramArchive(const uint8_t* data, size_t size, const std::string& scratch_path) {
  {
    std::FILE* f = std::fopen(scratch_path.c_str(), "wb");
    if (f == nullptr) return "cannot write the scratch archive " + scratch_path;
    const bool written = std::fwrite(data, 1, size, f) == size;
    if (std::fclose(f) != 0 || !written) return "cannot write the scratch archive " + scratch_path;
  }
  try {
    program::Program p = program::ReadProgramFile(scratch_path);
    for (const std::string& guard : p.guards) program::Expr::Parse(guard);
    program::GraphOfProgram(p);
  } catch (const program::ProgramError&) {
  } catch (const program::ExprError&) {
  } catch (const std::exception& e) {
    return std::string("reading the archive threw a non-ProgramError: ") + e.what();
  }
  return "";
}

}  // namespace weft::fuzz

#pragma once

// The fuzz target of the program reader (compiler/program), shared by the libFuzzer entry point
// (program_fuzzer.cpp) and the bounded-time smoke test under ctest. One input is the text of a
// `models/model.json`; the contract:
// - reading it either yields a Program or throws ProgramError (nothing else: no other exception,
//   no crash, no hang);
// - a Program read yields its weft.graph/1 view or a ProgramError, and every symbolic size in it
//   parses (or raises ExprError).
// The manifest (extra/weft.json) of a real program is attached when `manifest` is set, so
// mutations of the graph meet a manifest that expects the original.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "compiler/program/program.h"

namespace weft::fuzz {

// "" when the contract holds, else what broke it. The graph is validated as it is read
// (dataflow, metadata: compiler/program/validate.h) and every guard parses or raises ExprError.
std::string CheckProgramJson(const uint8_t* data, size_t size, const std::optional<program::Manifest>& manifest);

// The same contract for the bytes of a whole `.pt2` archive (written to `scratch_path` and read
// as weft reads a program file): zip structure, entry sizes and CRCs, every JSON entry.
std::string CheckProgramArchive(const uint8_t* data, size_t size, const std::string& scratch_path);

}  // namespace weft::fuzz

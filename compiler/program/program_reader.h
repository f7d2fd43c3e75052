#pragma once

// Reading a `.pt2` program (compiler/program/README.md): the archive, the export schema's JSON
// of `models/model.json`, the weights and constants indexes and weft's manifest. Every problem
// is a ProgramError naming the file and the entry, node or field.

#include <string>

#include "compiler/program/archive.h"
#include "compiler/program/program.h"

namespace weft::program {

// Reads the program in `archive`. Throws ProgramError on a missing `models/model.json`, an
// export schema major version other than kSchemaMajor (naming the version found and the one
// supported), or a malformed document.
Program ReadProgram(const Archive& archive);

// Opens and reads `path`.
Program ReadProgramFile(const std::string& path);

// Parses the schema's JSON text directly (tests, fuzzing); `where` names it in messages.
Program ParseProgramJson(const std::string& model_json, const std::string& where);

}  // namespace weft::program

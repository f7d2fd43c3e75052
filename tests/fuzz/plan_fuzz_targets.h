#pragma once

// The fuzz targets of the plan language, shared by the libFuzzer entry points
// (dsl_fuzzer.cpp, json_fuzzer.cpp) and the bounded-time smoke test that runs under ctest.
//
// Each target parses one input and checks the parse phase's contract; a violated property
// returns a description (and the libFuzzer entry points abort with it):
// - every input yields an AST or at least one error diagnostic (nothing silent);
// - an input that parses without errors prints (DSL and JSON) to text that parses again
//   without errors to the same AST (Dump without locations), printing is a fixed point in both
//   forms (parse -> print -> parse -> print: equal text), each form reads back to the other's
//   text, and the same input behind a UTF-8 byte order mark parses to the same AST;
// - every diagnostic renders as text, JSON and SARIF.
// Crashes and hangs are found by the drivers themselves.

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::fuzz {

// "" when every property holds, else what failed.
std::string CheckDslInput(const uint8_t* data, size_t size);
std::string CheckJsonInput(const uint8_t* data, size_t size);

}  // namespace weft::fuzz

#pragma once

// Golden-file machinery shared by the golden, coverage and corpus tests.
//
// A golden case is an input file (`tests/golden/testdata/<phase>/<name>.weft|.json`) with a
// sidecar `<name>.<ext>.expected`:
//
//   # ARGS: --max-errors=2          optional directives, one per line, before any section
//   ---- stderr                      rendered diagnostics (text renderer, sorted)
//   ---- ast                         syntax::Dump with locations ("<none>" when no AST)
//   ---- fmt                         canonical DSL (only for inputs without errors)
//   ---- json                        canonical JSON form (only for inputs without errors)
//   ---- diagnostics-json            the JSON renderer's document
//   ---- sarif                       the SARIF renderer's log
//
// A case compares only the sections its .expected file has. A file is named `fail_*` if
// and only if its stderr has an `error:`. With WEFT_UPDATE_GOLDENS=1 the runner rewrites
// the sections present (stderr and ast for a new case) instead of comparing.

#include <map>
#include <string>
#include <vector>

namespace weft::golden {

struct Expected {
  std::vector<std::string> directives;                 // "# ARGS: ..." lines, verbatim
  std::vector<std::pair<std::string, std::string>> sections;  // in file order
};

// Parses an .expected file's text.
Expected ParseExpected(const std::string& text);
// Writes it back in the same format.
std::string FormatExpected(const Expected& expected);

// The value of directive `name` ("ARGS") or "".
std::string Directive(const Expected& expected, const std::string& name);

// Runs the parse phase on `path` (displayed as its file name) and renders every section
// (keys: stderr, ast, fmt, json, diagnostics-json, sarif). `args` may hold
// `--max-errors=N`.
std::map<std::string, std::string> RunParsePhase(const std::string& path, const std::string& args);

// A phase runner renders the sections of one golden case of its phase (testdata/<phase>/).
// `expected` gives the case's directives (e.g. `# GRAPH:`, `# MESH:` for later phases).
// The "parse" runner is built in; later phases register theirs from a
// tests/golden/<phase>_phase_runner.cpp (CMake adds every such file to golden_test):
//   const bool kBindRunner = weft::golden::RegisterPhaseRunner("bind", &RunBindPhase);
using PhaseRunner = std::map<std::string, std::string> (*)(const std::string& path,
                                                           const Expected& expected);
bool RegisterPhaseRunner(const std::string& phase, PhaseRunner runner);
// The runner registered for `phase`, or nullptr.
PhaseRunner FindPhaseRunner(const std::string& phase);

// Reads a whole file ("" if it cannot); writes one (false on failure).
std::string ReadFile(const std::string& path);
bool WriteFile(const std::string& path, const std::string& text);

// Files under `dir` (recursively) whose names end in one of `extensions`, sorted.
std::vector<std::string> ListFiles(const std::string& dir, const std::vector<std::string>& extensions);

// True when WEFT_UPDATE_GOLDENS=1.
bool UpdateMode();

}  // namespace weft::golden

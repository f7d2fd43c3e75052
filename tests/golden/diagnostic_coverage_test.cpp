// Every diagnostic kind in compiler/diag/kinds.def must appear as `[Kind]` in some golden
// expectation, unless it is exempted below with the reason (only kinds a later phase owns
// and tests with its own goldens may be exempted).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "compiler/diag/diagnostic.h"
#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

// Kind name -> why it has no golden test here.
const std::map<std::string, std::string> kExemptions = {
    // (none: every parse-phase kind has a golden case)
};

TEST(DiagnosticCoverage, EveryKindHasAGoldenTest) {
  std::string all;
  for (const std::string& path : ListFiles(WEFT_GOLDEN_DIR, {".expected"})) all += ReadFile(path);
  std::vector<std::string> missing;
  for (diag::Kind kind : diag::AllKinds()) {
    std::string name(diag::KindName(kind));
    if (kExemptions.count(name)) continue;
    if (all.find("[" + name + "]") == std::string::npos) missing.push_back(name);
  }
  std::string list;
  for (const std::string& name : missing) list += "\n  " + name;
  EXPECT_TRUE(missing.empty()) << missing.size()
                               << " diagnostic kind(s) appear in no tests/golden/testdata/**/*.expected:"
                               << list;
}

TEST(DiagnosticCoverage, ExemptionsNameRealKinds) {
  for (const auto& [name, reason] : kExemptions) {
    bool found = false;
    for (diag::Kind kind : diag::AllKinds()) found |= diag::KindName(kind) == name;
    EXPECT_TRUE(found) << "exemption for unknown kind " << name << " (" << reason << ")";
  }
}

}  // namespace
}  // namespace weft::golden

// Every diagnostic kind in compiler/diag/kinds.def must appear as `[Kind]` in some golden
// expectation, unless it is exempted below with the reason (only kinds a later phase owns
// and tests with its own goldens may be exempted, and kinds no input reaches past an earlier check,
// each tested elsewhere as named).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "compiler/diag/diagnostic.h"
#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

// Kind name -> why it has no golden test here.
const std::map<std::string, std::string> kExemptions = {
    // Plans on programs (compiler/program): no fixture program and plan reach these past the
    // graph-level checks, which refuse the same plans first under their own kinds; the lowering's
    // refusals are tested on hand-made programs instead (tests/unit/program/shard_flow_test.cpp),
    // and which kind each refusal is reported as in tests/unit/driver/program_lowering_test.cpp.
    {"TpUnsupportedOperator", "shard_flow_test: TensorParallelRefusesAnOperatorItDoesNotFollow"},
    {"TpShardReachesOutput", "shard_flow_test: TensorParallelRefusesAShardReachingTheOutput (graph: ColwiseWithoutRowwise)"},
    {"ProgramLacksPlanValue", "shard_flow_test: TensorParallelRefusesAParameterTheProgramLacks (graph: ModuleNotCalled)"},
    {"SplitThroughUnsupportedOperator", "shard_flow_test: SplitRefusesAnOperatorItDoesNotFollow"},
    {"SplitNeverGathered", "shard_flow_test: SplitNeverGathered (graph: OutputNotGathered)"},
    {"LocalAttentionOverSplitKeys", "shard_flow_test: LocalAttentionOverSplitKeys (graph: ShardedKvRunsLocal)"},
    {"FullLengthWithoutShard", "shard_flow_test: LocalSizes.RefusesAFullLengthNoShardCarries"},
    {"MaskNotLaidOutWithKeys", "shard_flow_test: LocalSizes.RefusesAMaskNotLaidOutWithItsKeys"},
    {"PlanDoesNotLowerToProgram", "an edit the compiler decided failing to apply (an internal inconsistency)"},
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

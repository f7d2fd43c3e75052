#!/usr/bin/env bash
# Long runs of the fuzz smoke targets (tests/fuzz/fuzz_smoke_test.cpp, program_fuzz_smoke_test.cpp), outside ctest: each
# target for SECONDS per seed, over several mutation seeds. ctest runs them for 5 s each.
#
#   tests/fuzz/run_smoke_long.sh [SECONDS_PER_TARGET_AND_SEED=120] [SEEDS="1 2 3"] [BUILD_DIR=build]
#
# The properties are those of plan_fuzz_targets.h (round-trip idempotence of both printed
# forms among them). A violation leaves fuzz-failure-* in the current directory and the
# exit status is non-zero. Needs a built BUILD_DIR/tests/fuzz/fuzz_smoke_test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=${1:-120}
seeds=${2:-"1 2 3"}
build=${3:-$root/build}
# The plan targets (DSL, JSON plans) and the program reader's (model.json, whole archives).
bins=("$build/tests/fuzz/fuzz_smoke_test" "$build/tests/fuzz/program_fuzz_smoke_test")
for bin in "${bins[@]}"; do
  [[ -x "$bin" ]] || { echo "run_smoke_long: $bin not built" >&2; exit 2; }
done
status=0
for seed in $seeds; do
  echo "run_smoke_long: seed $seed, ${seconds}s per target" >&2
  for bin in "${bins[@]}"; do
    WEFT_FUZZ_SEED=$seed WEFT_FUZZ_SECONDS=$seconds "$bin" --gtest_brief=1 || status=1
  done
done
exit $status

#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + coverage instrumentation on weft's code)
# in their own build tree and runs each for a bounded time.
#
#   tests/fuzz/run_libfuzzer.sh [SECONDS_PER_TARGET=60] [BUILD_DIR=build-fuzz]
#
# Needs clang and libFuzzer (Debian: clang libclang-rt-14-dev). Crashes and property
# violations leave crash-* files in BUILD_DIR/fuzz-artifacts; the exit status is non-zero.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=${1:-60}
build=${2:-$root/build-fuzz}
jobs=${WEFT_JOBS:-2}
cxx=$(command -v clang++ || command -v clang++-14 || true)
[[ -n "$cxx" ]] || { echo "run_libfuzzer: clang++ not found" >&2; exit 2; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_EXECUTOR=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" -DWEFT_LIBFUZZER=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -Wno-unknown-warning-option" >/dev/null
cmake --build "$build" -j"$jobs" --target weft_dsl_fuzzer weft_json_fuzzer

mkdir -p "$build/fuzz-artifacts"
status=0
for target in dsl json; do
  corpus="$build/fuzz-corpus-$target"
  mkdir -p "$corpus"
  if [[ $target == dsl ]]; then ext=weft; else ext=json; fi
  cp "$root"/plans/*.$ext "$root"/tests/golden/testdata/parse/*.$ext "$corpus"/ 2>/dev/null || true
  echo "run_libfuzzer: $target for ${seconds}s" >&2
  "$build/tests/fuzz/weft_${target}_fuzzer" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
    -max_len=8192 -artifact_prefix="$build/fuzz-artifacts/$target-" "$corpus" || status=1
done
exit $status

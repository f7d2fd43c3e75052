#!/bin/sh
# weft suggest's plan for a program, byte for byte as committed (tests/suggest/expected/), and that
# plan clean under `weft check` at the meshes suggest checks (tp=2 and cfg=2 where the plan has
# those sections). WEFT_UPDATE_GOLDENS=1 rewrites it.
#   check_suggestion.sh WEFT PROGRAM EXPECTED
set -eu
weft=$1 program=$2 expected=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$weft" suggest --program "$program" -o "$out/plan.weft"
if [ "${WEFT_UPDATE_GOLDENS:-}" = 1 ]; then
  cp "$out/plan.weft" "$expected"
fi
if ! cmp -s "$out/plan.weft" "$expected"; then
  echo "weft suggest's plan differs from $expected (WEFT_UPDATE_GOLDENS=1 to accept):"
  diff -u "$expected" "$out/plan.weft" || true
  exit 1
fi
set -- --mesh ulysses=2 --mesh ring=2
grep -q '^tensor_parallel' "$expected" && set -- "$@" --mesh tp=2
grep -q '^guidance_parallel' "$expected" && set -- "$@" --mesh cfg=2
# Uneven lengths at some workload are a mode of the run, as suggest checks them.
"$weft" check "$expected" --program "$program" --ulysses-anything --ring-anything "$@"

#!/bin/sh
# One class of the zoo subset (tests/fixtures/zoo/<class>: its tiny program, seeded weights, inputs
# and diffusers' eager fp32 output): weft suggest proposes and checks a plan, then weft-run runs it
# on 2 ranks at ulysses=2, ring=2 (p2p) and, where the plan has tensor_parallel rules, tp=2, each
# against diffusers' output (fp32, <= 1e-4 x max|reference|, weft-run --expect's default, unless the
# fixture's `tolerance` file says otherwise).
#   run_class.sh WEFT WEFT_RUN FIXTURE_DIR OUT_DIR
set -eu
weft=$1 run=$2 dir=$3 out=$4
mkdir -p "$out"
"$weft" suggest --program "$dir/program.pt2" -o "$out/plan.weft"
# Every class here splits its sequence: a plan without context_parallel rules would make the
# ulysses and ring runs below the unsharded one.
if ! grep -q '^context_parallel' "$out/plan.weft"; then
  echo "$(basename "$dir"): the suggested plan has no context_parallel section:"
  cat "$out/plan.weft"
  exit 1
fi
# ... and some attention must run context-parallel under those splits: a split and gather that
# reach none (SanaWM's around one Linear, before weft suggest checked it) pass at parity and shard nothing.
"$weft" compile "$out/plan.weft" --program "$dir/program.pt2" --mesh ulysses=2 --ulysses-anything -o "$out/plan.json"
if ! grep -q '"mode": *"\(ulysses\|ring\|usp\)"' "$out/plan.json"; then
  echo "$(basename "$dir"): no attention of the suggested plan runs context-parallel at ulysses=2:"
  cat "$out/plan.weft"
  exit 1
fi
# A class that computes in a lower precision on purpose says so in its fixture's `tolerance` file
# (the tolerance, then why); the others are held to weft-run --expect's fp32 default.
tolerance=""
[ -f "$dir/tolerance" ] && tolerance="--tolerance $(cut -d' ' -f1 "$dir/tolerance")"
set -- "ulysses=2 --ulysses-anything" "ring=2 --rotate p2p --ring-anything"
grep -q '^tensor_parallel' "$out/plan.weft" && set -- "$@" "tp=2"
# Guidance branches where the suggestion has them: the fixture's batch of 2 as 2 branches.
grep -q '^guidance_parallel' "$out/plan.weft" && set -- "$@" "cfg=2"
# More meshes where the fixture's `meshes` file lists them (one per line: USP, 3 uneven ranks ...).
if [ -f "$dir/meshes" ]; then
  while IFS= read -r extra; do [ -n "$extra" ] && set -- "$@" "$extra"; done < "$dir/meshes"
fi
for mesh in "$@"; do
  # shellcheck disable=SC2086
  if ! "$run" --no-prefix --program "$dir/program.pt2" --model-dir "$dir/model" --inputs "$dir/inputs.safetensors" \
        --expect "$dir/reference.safetensors" --plan "$out/plan.weft" --mesh $mesh $tolerance > "$out/run.log" 2>&1 ||
     ! grep -q "output against .* passed" "$out/run.log"; then
    echo "$(basename "$dir") at $mesh: FAILED"
    cat "$out/run.log"
    exit 1
  fi
  echo "$(basename "$dir") at $mesh: $(grep -o 'passed: max abs error [^,]*, [^ ]* x' "$out/run.log")"
done

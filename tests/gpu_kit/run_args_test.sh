#!/usr/bin/env bash
# bench/gpu/run.sh's argument handling, step selection and result writing, in seconds and
# without building anything: the env step runs against a stub `torch` module, so the script's
# own logic is tested where CI runs (the GPU call is not where such bugs should be found).
#   run_args_test.sh <repo root>
set -euo pipefail
root=$1
run=$root/bench/gpu/run.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# expect RC PATTERN -- CMD...: CMD exits RC and its output (stdout + stderr) matches PATTERN.
expect() {
  local want_rc=$1 pattern=$2
  shift 3
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [[ "$rc" != "$want_rc" ]]; then
    fail "$* exited $rc, want $want_rc; output: ${out:0:600}"
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$* printed no line matching '$pattern'; output: ${out:0:600}"
  fi
}
# The summary file of the last run in $1 has a line matching $2.
summary_has() {
  grep -qE -- "$2" "$1/summary.txt" || fail "$1/summary.txt has no line matching '$2': $(cat "$1/summary.txt" 2>&1)"
}

# A torch that loads in milliseconds and sees GPUS GPUs (0 unless set).
mkdir -p "$tmp/stub/torch"
cat >"$tmp/stub/torch/__init__.py" <<'PY'
import os
from types import SimpleNamespace
__version__ = "0.0-stub"
version = SimpleNamespace(cuda=None)
_n = int(os.environ.get("GPUS", "0"))
cuda = SimpleNamespace(is_available=lambda: _n > 0, device_count=lambda: _n,
                       get_device_name=lambda i: "Stub GPU",
                       get_device_properties=lambda i: SimpleNamespace(total_memory=2**30))
PY
export PYTHONPATH=$tmp/stub
py=(--python python3)

bash -n "$run" || fail "run.sh has a syntax error"
bash -n "$root/bench/gpu/prepare.sh" || fail "prepare.sh has a syntax error"
expect 0 '--dry-run' -- "$run" --help
expect 0 '--check' -- "$root/bench/gpu/prepare.sh" --help
expect 0 '^env$' -- "$run" --list-steps
[[ "$("$run" --list-steps | tr '\n' ' ')" == "env deps build attention calibrate probe flux program meshes wan " ]] ||
  fail "--list-steps: $("$run" --list-steps | tr '\n' ' ')"
expect 2 "unknown option '--frobnicate'" -- "$run" --frobnicate
expect 2 "unknown step 'nope' in --steps" -- "$run" --steps env,nope
expect 2 "unknown step 'flx' in --skip" -- "$run" --skip flx
expect 2 '--iters needs a value' -- "$run" --iters
expect 2 "--budget wants a whole number, not '1m'" -- "$run" --budget=1m
expect 2 "--weights must be auto, seeded or file" -- "$run" --weights maybe
expect 2 '--iters and --wan-iters must be at least 1' -- "$run" --iters 0

# One selected step runs; the others are listed as not selected; results land in --out.
out=$tmp/out1
expect 0 '^env: no GPU; torch 0.0-stub' -- "$run" --dry-run --steps env --out "$out" --workdir "$tmp/w" "${py[@]}"
summary_has "$out" '^steps: env ok \([0-9]+ s\); deps not selected; build not selected;'
summary_has "$out" '^weft GPU kit, dry-run, '
[[ -s "$out/env.txt" ]] || fail "no $out/env.txt"
grep -q '"kind": "env"' "$out/results.jsonl" || fail "no env record in $out/results.jsonl"
grep -q '^======== env: ok' "$out/steps.log" || fail "no env section in $out/steps.log"

# $OUT (the device tool's) is where results go when no --out is given.
OUT=$tmp/out2 expect 0 '^total: ' -- "$run" --dry-run --steps env --workdir "$tmp/w" "${py[@]}"
[[ -f "$tmp/out2/summary.txt" ]] || fail "\$OUT was not used"

# A failing step is recorded and the run goes on; exit 1.
out=$tmp/out3
expect 1 'attention: FAILED: no .*/gpu_attention_check' -- "$run" --dry-run --steps env,attention \
  --build-dir "$tmp/nobuild" --out "$out" --workdir "$tmp/w" "${py[@]}"
summary_has "$out" '^steps: env ok .*attention FAILED \(exit 1'

# A step that no longer fits the budget is skipped, said, and counts as a shortfall.
out=$tmp/out4
expect 1 '^env: skipped \(-?[0-9]+ s of the budget left' -- "$run" --dry-run --steps env --budget 5 \
  --out "$out" --workdir "$tmp/w" "${py[@]}"

# Everything skipped: nothing to fail.
expect 0 '^steps: env not selected' -- "$run" --dry-run --skip env,deps,build,attention,calibrate,probe,flux,program,meshes,wan \
  --out "$tmp/out5" --workdir "$tmp/w" "${py[@]}"

# Without --dry-run, a machine with no GPU is refused at the env step; with one the step passes.
expect 1 'env: FAILED: no GPU visible to torch on a GPU call' -- "$run" --steps env --out "$tmp/out6" \
  --workdir "$tmp/w" "${py[@]}"
GPUS=2 expect 0 '^env: 2 x Stub GPU \(1 GiB\)' -- "$run" --steps env --out "$tmp/out7" --workdir "$tmp/w" "${py[@]}"

# The summary helper of kit.py turns missing measurements into named failures, not tracebacks.
expect 0 '^x: weft program FAILED \(exit 3; steps.log\), diffusers eager FAILED \(exit 4; steps.log\); no weft - diffusers comparison' -- \
  python3 "$root/bench/gpu/kit.py" line model --label x --workdir "$tmp/none" --weft-rc 3 --diffusers-rc 4

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "gpu kit: all argument checks passed"

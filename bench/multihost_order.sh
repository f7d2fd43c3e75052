#!/usr/bin/env bash
# Which axis of a 2-D mesh should cross the hosts? weft's cost model against measurement, on two
# "hosts" of 2 ranks each (tests/multihost/two_hosts.sh: network namespaces joined by a veth pair,
# shared memory inside a host, Gloo across; needs root). For each mesh in both axis orders, one
# weft-run job of 4 ranks (torchrun environment, 1 thread per rank) on the small Flux prints rank
# 0's median latency and what `--machine` predicted for that very run; the table says whether the
# order predicted faster is the order measured faster.
#
#   bench/multihost_order.sh [--machine FILE] [--iters N] [--model flux:small]
#
# Without --machine, this machine is calibrated first (weft-run --calibrate --nproc 4, about 40 s).
# The machine is shared: compare the two orders of a mesh within one run.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
weft_run=""
for b in build-bench build-lead build; do
  [ -x "$root/$b/executor/weft-run" ] && { weft_run="$root/$b/executor/weft-run"; break; }
done
[ -n "$weft_run" ] || { echo "bench/multihost_order.sh: no built weft-run (cmake --build build)"; exit 2; }
machine="" iters=10 model=flux:small
while [ $# -gt 0 ]; do
  case "$1" in
    --machine) machine=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) echo "usage: bench/multihost_order.sh [--machine FILE] [--iters N] [--model NAME]"; exit 2 ;;
  esac
done

# shellcheck source=../tests/multihost/two_hosts.sh
. "$root/tests/multihost/two_hosts.sh"

cd "$root" || exit 2
if [ -z "$machine" ]; then
  machine="$dir/machine.json"
  echo "calibrating this machine: weft-run --calibrate --nproc 4 -o $machine"
  "$weft_run" --calibrate --nproc 4 -o "$machine" >"$dir/calibrate.log" 2>&1 || fail "the calibration failed"
fi
# The two namespace hosts share this machine's cores: each is given half of them, so that the model
# sees what the ranks do (4 ranks on these cores, not 2 on each host's own).
cores=$(grep -Eo '"cores": *[0-9]+' "$machine" | grep -Eo '[0-9]+$')
[ -n "$cores" ] || fail "no \"cores\" in $machine"
sed -E "s/\"cores\": *[0-9]+/\"cores\": $(( cores / 2 > 0 ? cores / 2 : 1 ))/" "$machine" >"$dir/machine-per-host.json"
machine="$dir/machine-per-host.json"
# The program cache, made once here rather than by four ranks at once.
"$weft_run" --model "$model" --nproc 1 --iters 1 --warmup 0 >"$dir/warm.log" 2>&1 || fail "weft-run --model $model failed"

# field REPORT KEY: a number of the JSON report (python-free: the report is weft-run's own format).
field() { tr -d '\n ' <"$1" | grep -Eo "\"$2\":[-0-9.e+]+" | head -n 1 | cut -d: -f2; }
median() { tr -d '\n ' <"$1" | grep -Eo '"latency_ms":\{[^}]*\}' | grep -Eo '"median":[0-9.e+-]+' | cut -d: -f2; }

printf "%-44s %12s %12s %8s\n" "mesh (2 hosts x 2 ranks, $model)" "predicted" "measured" "error"
run_mesh() {
  local mesh=$1 tag=$2
  start_ranks --model "$model" --mesh "$mesh" --iters "$iters" --warmup 2 --timeout 120 \
      --report "$dir/$tag.json" --machine "$machine"
  for r in 0 1 2 3; do
    wait_exit "${rank_pid[$r]}" 600 || fail "rank $r of $mesh exited non-zero"
  done
  local p m
  p=$(field "$dir/$tag.json" predicted_latency_ms)
  m=$(median "$dir/$tag.json")
  awk -v mesh="$mesh" -v p="$p" -v m="$m" 'BEGIN { printf "%-44s %9.1f ms %9.1f ms %+7.1f%%\n", mesh, p, m, 100 * (p - m) / m }'
  echo "$p $m" >"$dir/$tag.pm"
}
compare() {
  local a=$1 b=$2 what=$3
  read -r pa ma <"$dir/$a.pm"
  read -r pb mb <"$dir/$b.pm"
  awk -v pa="$pa" -v ma="$ma" -v pb="$pb" -v mb="$mb" -v what="$what" 'BEGIN {
    pick = (pa <= pb) ? "first" : "second"; best = (ma <= mb) ? "first" : "second";
    printf "  %s: predicted %s order faster (%.2fx), measured %s faster (%.2fx): %s\n", what, pick,
           (pa > pb ? pa / pb : pb / pa), best, (ma > mb ? ma / mb : mb / ma), (pick == best ? "agree" : "DISAGREE") }'
}
run_mesh "ring=2,ulysses=2" usp_ulysses_inside
run_mesh "ring=2,ulysses=2,order=tp:ulysses:ring" usp_ring_inside
compare usp_ulysses_inside usp_ring_inside "ring x ulysses (ulysses inside first, ring inside second)"
run_mesh "tp=2,ulysses=2" tp_ulysses_inside
run_mesh "tp=2,ulysses=2,order=ulysses:tp:ring" tp_tp_inside
compare tp_ulysses_inside tp_tp_inside "tp x ulysses (ulysses inside first, tp inside second)"

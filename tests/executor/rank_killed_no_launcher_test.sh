#!/usr/bin/env bash
# A rank killed mid-run when the ranks were started by something other than weft-run's own
# launcher (torchrun, srun, by hand): nobody stops the survivor, so it must notice by itself,
# name the dead rank, and exit non-zero well before its collective timeout (30 s here).
#   rank_killed_no_launcher_test.sh WEFT_RUN SOURCE_DIR shm|gloo
set -u
weft_run=$1
source_dir=$2
transport=$3
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
port=$(( 20000 + RANDOM % 20000 ))
run_rank() {
  exec env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 RANK=$1 LOCAL_RANK=$1 \
      "$weft_run" --model flux:small --mesh ulysses=2 \
      --iters 100000 --timeout-ms 30000 --cpu-transport $transport >"$dir/rank$1.log" 2>&1
}
run_rank 0 &
survivor=$!
run_rank 1 &
victim=$!
for _ in $(seq 1 600); do
  grep -q "iteration 2/" "$dir/rank0.log" && break
  sleep 0.1
done
grep -q "iteration 2/" "$dir/rank0.log" || { echo "FAIL: no iteration finished"; cat "$dir"/rank*.log; exit 1; }
killed_at=$(date +%s)
kill -9 $victim
wait $survivor
status=$?
seconds=$(( $(date +%s) - killed_at ))
tail -n 2 "$dir/rank0.log"
if [ "$status" -eq 0 ]; then echo "FAIL: the survivor exited 0"; exit 1; fi
if ! grep -Eq "rank 0: .* failed after [0-9]+ ms \(timeout 30000 ms\): .*rank 1 \(pid [0-9]+[^)]*\) (exited|is no longer running)" "$dir/rank0.log"; then
  echo "FAIL: the survivor did not name the dead rank"; exit 1
fi
if [ "$seconds" -gt 10 ]; then echo "FAIL: the survivor took ${seconds}s to exit (timeout 30 s)"; exit 1; fi
echo "PASS: the survivor exited $status after ${seconds}s"

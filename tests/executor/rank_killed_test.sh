#!/usr/bin/env bash
# A rank killed mid-run: weft-run must name the dead rank, stop the others and exit non-zero
# quickly (well within the collective timeout), never hang.
#   rank_killed_test.sh WEFT_RUN SOURCE_DIR
set -u
weft_run=$1
source_dir=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
env -u RANK -u WORLD_SIZE "$weft_run" --model flux:small \
    --nproc 2 --mesh ulysses=2 --iters 100000 --timeout-ms 5000 >"$log" 2>&1 &
launcher=$!
# Wait until rank 0 reports a finished iteration, so the kill lands mid-run.
for _ in $(seq 1 300); do
  grep -q "iteration 1/" "$log" && break
  sleep 0.1
done
children=$(cat /proc/$launcher/task/$launcher/children 2>/dev/null || pgrep -P "$launcher")
victim=$(echo $children | tr ' ' '\n' | tail -n 1)
[ -n "$victim" ] || { echo "no rank process found"; cat "$log"; exit 1; }
killed_at=$(date +%s)
kill -9 "$victim"
wait "$launcher"
status=$?
seconds=$(( $(date +%s) - killed_at ))
cat "$log" | tail -n 3
if [ "$status" -eq 0 ]; then echo "FAIL: weft-run exited 0 after a rank was killed"; exit 1; fi
if ! grep -Eq "weft-run: rank [01] was killed by signal 9 \(Killed\); stopping 1 other rank" "$log"; then
  echo "FAIL: weft-run did not name the killed rank"; exit 1
fi
if [ "$seconds" -gt 10 ]; then echo "FAIL: took ${seconds}s to stop (timeout 5 s)"; exit 1; fi
echo "PASS: a rank killed, weft-run exited $status after ${seconds}s"

#!/usr/bin/env bash
# Two "hosts" on one machine (two_hosts.sh: network namespaces with their own hostnames, joined by
# a veth pair); the test makes both and removes them (and every process it started) on exit.
#
# weft-run ranks run in them with the torchrun environment: MASTER_ADDR on host 0, RANK,
# WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE per host; 2 hosts x 2 ranks.
#
#   multihost.sh WEFT_RUN SOURCE_DIR SCENARIO [PYTHON]
#
# Scenarios:
#   usp             ring=2 x ulysses=2, Ulysses inside a host and ring across (the default mesh
#                   order puts Ulysses innermost), --check passes, the report names shm for
#                   ulysses and Gloo for ring, cp and world
#   usp-flipped     the same mesh in the other order (order=tp:ulysses:ring): ring inside a host,
#                   Ulysses across
#   tp              tp=2 x ulysses=2 the same way (tp across the hosts)
# In each of those three, weft-run's prediction (--machine) prices the groups across the hosts on
# Gloo, as the runtime runs them, and says so in the report's notes.
#   link-down       host 1's veth link goes down mid-run
#   host-killed     both ranks of host 1 are SIGKILLed mid-run
#   rank-stopped    rank 3 (host 1) is SIGSTOPped mid-run (timeout from WEFT_TIMEOUT_S)
#   torchrun        one torchrun per host (PYTHON -m torch.distributed.run --nnodes 2); host 1's
#                   ranks are SIGKILLed mid-run and both torchruns must exit non-zero
# In a fault, every surviving rank must exit non-zero within the collective timeout (plus a
# little) with a message naming the peer rank, its host, the axis and the collective.
#
# Exit 77 (ctest SKIP_RETURN_CODE) with "SKIP: <reason>" where namespaces cannot be made.
set -u
weft_run=$1
source_dir=$2
scenario=$3
python=${4:-}

# shellcheck source=two_hosts.sh
. "$(dirname "$0")/two_hosts.sh"

# wait_iteration LOG N PID: until the log shows iteration N (the job is mid-run), at most 120 s,
# failing at once when PID exits first.
wait_iteration() {
  for _ in $(seq 1 1200); do
    grep -q "iteration $2/" "$1" && return 0
    kill -0 "$3" 2>/dev/null || fail "the job ended before iteration $2"
    sleep 0.1
  done
  fail "no iteration $2 in $1"
}

# check_survivor RANK SECONDS_SINCE_FAULT LIMIT: exited non-zero in time, naming rank/host/axis/collective.
check_survivor() {
  local r=$1 status=$2 took=$3 limit=$4 log="$dir/rank$1.log"
  [ "$status" -ne 0 ] || fail "rank $r exited 0 after the fault"
  [ "$status" -ne 255 ] || fail "rank $r still ran ${limit} s after the fault (killed)"
  [ "$took" -le "$limit" ] || fail "rank $r took ${took} s to exit (limit ${limit} s)"
  grep -Eq "rank $r: [a-z_]+ on axis \`[a-z]+\` \(group ranks [0-9,]+\).* failed .*rank [0-9]+ \((pid [0-9]+, )?host weft-h[01]\)" "$log" ||
    fail "rank $r did not name the collective, its axis, the peer rank and its host"
  echo "rank $r: exit $status after ${took} s: $(grep -m 1 "weft-run: error" "$log" | cut -c 1-600)"
}

case "$scenario" in
usp | usp-flipped | tp)
  # Axes whose groups stay inside a host, and axes whose groups span both.
  case "$scenario" in
    usp) mesh=ring=2,ulysses=2; inside="ulysses"; across="ring cp world" ;;
    usp-flipped) mesh=ring=2,ulysses=2,order=tp:ulysses:ring; inside="ring"; across="ulysses cp world" ;;
    tp) mesh=tp=2,ulysses=2; inside="ulysses cp"; across="tp world" ;;
  esac
  start_ranks --model flux:tiny --mesh $mesh --check --timeout 60 --report "$dir/report.json" \
      --machine "$source_dir/tests/multihost/machine_two_hosts.json"
  for r in 0 1 2 3; do
    wait_exit "${rank_pid[$r]}" 120
    status=$?
    [ "$status" -eq 0 ] || fail "rank $r exited $status"
  done
  grep -q "weft-run: check against the unsharded model passed" "$dir/rank0.log" || fail "no passed check"
  transports=$(tr -d '\n' <"$dir/report.json" | grep -Eo '"cpu_transport": *\{[^}]*\}' | tr -s ' ')
  echo "$transports"
  for axis in $inside; do
    echo "$transports" | grep -q "\"$axis\": \"shm\"" || fail "$axis (inside a host) does not use shared memory"
  done
  for axis in $across; do
    echo "$transports" | grep -q "\"$axis\": \"gloo (the group's ranks run on more than one host)\"" ||
      fail "$axis (across the hosts) does not use Gloo for the reason that its ranks span hosts"
  done
  # The cost model prices the groups across hosts as the runtime runs them: on Gloo.
  notes=$(tr -d '\n' <"$dir/report.json" | grep -Eo '"notes": *\[[^]]*\]')
  echo "$notes"
  for axis in $across; do
    [ "$axis" = world ] && continue  # no collective of the plan runs on the whole world
    echo "$notes" | grep -q "the $axis groups span hosts (2 ranks per host): priced on gloo" ||
      fail "the prediction does not price the $axis groups (across the hosts) on Gloo"
  done
  for axis in $inside; do
    echo "$notes" | grep -q "the $axis groups span hosts" && fail "the prediction has $axis (inside a host) across the hosts"
  done
  grep -h "check against the unsharded model passed" "$dir/rank0.log"
  echo "PASS: $mesh on 2 hosts x 2 ranks"
  ;;
link-down | host-killed | rank-stopped)
  timeout=5
  if [ "$scenario" = rank-stopped ]; then
    export WEFT_TIMEOUT_S=4
    timeout=4
    start_ranks --model flux:tiny --mesh ring=2,ulysses=2 --iters 100000
  else
    start_ranks --model flux:tiny --mesh ring=2,ulysses=2 --iters 100000 \
        --timeout $timeout
  fi
  wait_iteration "$dir/rank0.log" 20 "${rank_pid[0]}"
  fault_at=$(date +%s)
  survivors="0 1 2 3"
  case "$scenario" in
    link-down) ip -n "${ns[1]}" link set "${veth[1]}" down || fail "cannot take the link down" ;;
    host-killed) kill -9 "${rank_pid[2]}" "${rank_pid[3]}"; survivors="0 1" ;;
    rank-stopped) kill -STOP "${rank_pid[3]}"; survivors="0 1 2" ;;
  esac
  limit=$(( timeout + 4 ))
  for r in $survivors; do
    left=$(( fault_at + limit + 2 - $(date +%s) ))
    wait_exit "${rank_pid[$r]}" $(( left > 1 ? left : 1 ))
    status=$?
    check_survivor "$r" "$status" $(( $(date +%s) - fault_at )) "$limit"
  done
  if [ "$scenario" = rank-stopped ]; then
    grep -q "rank 3 (pid ${rank_pid[3]}, host weft-h1) is stopped (SIGSTOP)" "$dir/rank2.log" ||
      fail "rank 2 (same host) did not say that rank 3 is stopped"
    kill -9 "${rank_pid[3]}"
  fi
  echo "PASS: $scenario: every surviving rank exited non-zero within the ${timeout} s timeout (+ ${limit}-${timeout} s)"
  ;;
torchrun)
  [ -n "$python" ] || skip "no Python with torch to run torchrun"
  agent=()
  for h in 0 1; do
    on_host "$h" env WEFT_THREADS=1 "$python" -m torch.distributed.run --nnodes 2 --node-rank $h --nproc-per-node 2 \
        --master-addr "${addr[0]}" --master-port $port --max-restarts 0 --monitor-interval 0.2 --no-python \
        "$weft_run" --model flux:tiny --mesh ring=2,ulysses=2 \
        --iters 100000 --timeout 5 >"$dir/torchrun$h.log" 2>&1 &
    agent[$h]=$!
    pids+=("$!")
  done
  wait_iteration "$dir/torchrun0.log" 20 "${agent[0]}"
  # Host 1's ranks: the children of its torchrun agent.
  victims=$(pgrep -P "${agent[1]}" -f weft-run)
  [ -n "$victims" ] || fail "no weft-run rank under host 1's torchrun"
  fault_at=$(date +%s)
  kill -9 $victims
  for h in 0 1; do
    wait_exit "${agent[$h]}" 60
    status=$?
    took=$(( $(date +%s) - fault_at ))
    [ "$status" -ne 0 ] || fail "torchrun on host $h exited 0 after host 1's ranks were killed"
    [ "$status" -ne 255 ] || fail "torchrun on host $h still ran 60 s after the fault"
    echo "torchrun on host $h: exit $status after ${took} s"
  done
  grep -Eq "rank [01]: [a-z_]+ on axis \`[a-z]+\` .* failed .*rank [23] \(host weft-h1\)" "$dir/torchrun0.log" ||
    fail "host 0's ranks did not name a rank of host 1"
  grep -Eo "rank [01]: [a-z_]+ on axis \`[a-z]+\`.*rank [23] \(host weft-h1\)" "$dir/torchrun0.log" | head -n 2 | cut -c 1-300
  echo "PASS: torchrun saw a non-zero exit on both hosts"
  ;;
*)
  echo "unknown scenario $scenario"
  exit 2
  ;;
esac

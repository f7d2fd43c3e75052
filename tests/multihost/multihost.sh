#!/usr/bin/env bash
# Two "hosts" on one machine: each a network namespace (its own network stack) with its own
# hostname (UTS namespace), joined by a veth pair with addresses of 192.0.2.0/24 (TEST-NET-1,
# reserved for documentation and never routed; they exist only inside the two namespaces). The
# test makes both namespaces and removes them (and every process it started) on exit.
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
#   tp              tp=2 x ulysses=2 the same way (tp across the hosts)
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

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; }; done; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "making network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); running as uid $(id -u)"
command -v ip >/dev/null || skip "no \`ip\` (iproute2) to make network namespaces"
command -v unshare >/dev/null || skip "no \`unshare\` (util-linux) to give each host its own hostname"

tag="wmh$$"
ns=("$tag-h0" "$tag-h1")
veth=("${tag}a" "${tag}b")
addr=("192.0.2.1" "192.0.2.2")
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  ip netns del "${ns[0]}" 2>/dev/null
  ip netns del "${ns[1]}" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

if ! err=$(ip netns add "${ns[0]}" 2>&1); then skip "cannot create a network namespace: $err"; fi
ip netns add "${ns[1]}" || skip "cannot create a second network namespace"
if ! err=$(unshare --uts true 2>&1); then skip "cannot create a UTS namespace: $err"; fi
ip link add "${veth[0]}" netns "${ns[0]}" type veth peer name "${veth[1]}" netns "${ns[1]}" ||
  skip "cannot create a veth pair between the namespaces"
for h in 0 1; do
  ip -n "${ns[$h]}" addr add "${addr[$h]}/24" dev "${veth[$h]}" || fail "ip addr add"
  ip -n "${ns[$h]}" link set "${veth[$h]}" up || fail "ip link set up"
  ip -n "${ns[$h]}" link set lo up || fail "ip link set lo up"
done
port=$(( 20000 + RANDOM % 20000 ))

# on_host H CMD...: exec CMD in host H's namespaces (network and hostname weft-hH): a subshell
# running it in the background becomes CMD, so $! is its pid.
on_host() {
  local h=$1
  shift
  exec ip netns exec "${ns[$h]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "weft-h$h" "$@"
}

# start_ranks ARGS...: the 4 ranks (2 per host) of one weft-run job; pids in rank_pid[].
rank_pid=()
start_ranks() {
  for r in 0 1 2 3; do
    local h=$(( r / 2 ))
    on_host "$h" env -u WEFT_JOB_ID MASTER_ADDR="${addr[0]}" MASTER_PORT=$port WORLD_SIZE=4 RANK=$r \
        LOCAL_RANK=$(( r % 2 )) LOCAL_WORLD_SIZE=2 WEFT_THREADS=1 "$weft_run" "$@" >"$dir/rank$r.log" 2>&1 &
    rank_pid[$r]=$!
    pids+=("$!")
  done
}

# wait_exit PID DEADLINE_SECONDS: the exit status, or 255 after SIGKILL at the deadline.
wait_exit() {
  local pid=$1 limit=$2 waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/$pid/stat 2>/dev/null | awk '{print $3}')" != Z ]; do
    sleep 0.1
    waited=$(( waited + 1 ))
    if [ "$waited" -ge $(( limit * 10 )) ]; then
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 255
    fi
  done
  wait "$pid"
}

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
usp | tp)
  # Axes whose groups stay inside a host, and axes whose groups span both.
  if [ "$scenario" = usp ]; then
    mesh=ring=2,ulysses=2; inside="ulysses"; across="ring cp world"
  else
    mesh=tp=2,ulysses=2; inside="ulysses cp"; across="tp world"
  fi
  start_ranks --model flux:tiny --mesh $mesh --check --timeout 60 --report "$dir/report.json"
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

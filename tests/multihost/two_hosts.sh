# Two "hosts" on one machine, for tests/multihost/multihost.sh and bench/multihost_order.sh
# (sourced, bash): each a network namespace (its own network stack) with its own hostname (UTS
# namespace), joined by a veth pair with addresses of 192.0.2.0/24 (TEST-NET-1, reserved for
# documentation and never routed; they exist only inside the two namespaces). Sourcing makes both
# namespaces; they, $dir and every process started through start_ranks go on exit.
#
# The sourcing script sets weft_run first; skip() exits 77 with "SKIP: <reason>" where namespaces
# cannot be made (without root). It provides on_host, start_ranks (4 ranks, 2 per host, with the
# torchrun environment; their pids in rank_pid[]) and wait_exit.
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


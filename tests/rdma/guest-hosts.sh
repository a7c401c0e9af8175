#!/bin/bash
# guest-hosts.sh: a cluster of qemu guests that behaves as a user's cluster: hosts g0..g<N-1>
# with their own kernels, addresses and Soft-RoCE devices, an ssh server each, and the build
# tree and the host's /usr at the same paths as here, so that Open MPI's ordinary ssh launcher
# starts ranks on them. Also reached as `guest-cluster.sh up|down|ssh|status`.
# Exit status: 0 ok, 1 failed, 2 usage, 77 this machine cannot run guests.
set -euo pipefail

usage() {
  cat << 'EOF'
usage: guest-hosts.sh up --state DIR [--guests 4] [--build-dir DIR] [--results DIR]
                         [--lifetime S] [--boot-timeout S] [--mem SIZE] [--cache-dir DIR] [--no-install]
       guest-hosts.sh ssh --state DIR HOST [COMMAND...]
       guest-hosts.sh status --state DIR
       guest-hosts.sh down --state DIR

up      boots the guests (in the background, owned by a guest-cluster.sh process) and returns
        once every guest accepts ssh. Each guest gN is 10.77.0.(N+1) with rxe0 on eth0, user
        `ringbench` (public-key ssh between all guests; keys made for this run, host keys
        checked), the host's /usr read-only, the build directory (default <repo>/build)
        read-only and the results directory (default DIR/results) read-write, both at their
        host paths. Then, for example:
          guest-hosts.sh ssh --state DIR g0 mpirun -np 4 -H g0,g1,g2,g3 hostname
ssh     runs COMMAND on HOST (g0..) as `ringbench`, from inside the cluster's namespace
status  says whether the cluster is up, and each guest's state
down    asks the guests to power off, waits for them, and removes the namespace; the results
        directory is given back to the calling user
--lifetime S    the cluster is taken down after S seconds in any case (default 10800)
--boot-timeout S  how long `up` waits for every guest's ssh (default 300)
Guests run under qemu TCG: their speeds prove the path, not the hardware's speed.
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
die() { echo "guest-hosts: $*" >&2; exit 2; }
log() { echo "guest-hosts: [$(date -u +%H:%M:%S)] $*" >&2; }
GUEST_UID=4242

[ $# -ge 1 ] || { usage >&2; exit 2; }
CMD=$1; shift
STATE=""; GUESTS=4; BUILD=$REPO/build; RESULTS=""; LIFETIME=10800; BOOT_TIMEOUT=300; GC_OPTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --state) STATE=${2:?}; shift 2 ;;
    --guests) GUESTS=${2:?}; shift 2 ;;
    --build-dir) BUILD=${2:?}; shift 2 ;;
    --results) RESULTS=${2:?}; shift 2 ;;
    --lifetime) LIFETIME=${2:?}; shift 2 ;;
    --boot-timeout) BOOT_TIMEOUT=${2:?}; shift 2 ;;
    --mem | --cache-dir) GC_OPTS+=("$1" "${2:?}"); shift 2 ;;
    --no-install) GC_OPTS+=("$1"); shift ;;
    -h | --help) usage; exit 0 ;;
    *) break ;;
  esac
done
case "$CMD" in -h | --help) usage; exit 0 ;; esac
[ -n "$STATE" ] || { usage >&2; die "--state DIR is required"; }

owner_alive() { local p; p=$(cat "$STATE/owner.pid" 2>/dev/null) && kill -0 "$p" 2>/dev/null; }
in_ns() { ip netns exec "$(cat "$STATE/netns")" "$@"; }
guest_count() { ls -d "$STATE"/guest[0-9]* 2>/dev/null | grep -c 'guest[0-9]*$'; }

cmd_up() {
  [[ "$GUESTS" =~ ^[0-9]+$ ]] && [ "$GUESTS" -ge 1 ] && [ "$GUESTS" -le 4 ] || die "--guests must be 1..4"
  [[ "$LIFETIME" =~ ^[0-9]+$ ]] || die "--lifetime must be whole seconds"
  [[ "$BOOT_TIMEOUT" =~ ^[0-9]+$ ]] || die "--boot-timeout must be whole seconds"
  [ -x "$BUILD/runner/ringbench" ] || die "no $BUILD/runner/ringbench (build first)"
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd -P)
  owner_alive && die "a cluster is already up in $STATE (pid $(cat "$STATE/owner.pid")); guest-hosts.sh down --state $STATE"
  RESULTS=${RESULTS:-$STATE/results}
  mkdir -p "$RESULTS"
  chown "$GUEST_UID:$GUEST_UID" "$RESULTS"  # the guests' user writes there
  rm -f "$STATE/owner.pid" "$STATE/netns" "$STATE/up.log"
  echo "$RESULTS" > "$STATE/results.path"
  trap 'log "interrupted"; cmd_down; exit 130' INT TERM HUP
  # The owner: one guest-cluster.sh that boots the guests, waits for them and cleans up.
  setsid "$HERE/guest-cluster.sh" --hosts --guests "$GUESTS" --build-dir "$BUILD" --out "$STATE" \
    --results "$RESULTS" --timeout "$LIFETIME" --in "$HERE" "${GC_OPTS[@]}" -- sh /mnt/in/guest-host.sh \
    > "$STATE/up.log" 2>&1 < /dev/null &
  echo $! > "$STATE/owner.pid"
  log "booting $GUESTS guests (owner pid $!, log $STATE/up.log); waiting up to ${BOOT_TIMEOUT}s for ssh"
  local deadline=$(($(date +%s) + BOOT_TIMEOUT)) i up=0 f
  while [ $up -lt "$GUESTS" ]; do
    if ! owner_alive; then
      wait "$(cat "$STATE/owner.pid")" 2>/dev/null && rc=0 || rc=$?
      [ "$rc" = 77 ] && { tail -3 "$STATE/up.log" >&2; exit 77; }
      tail -20 "$STATE/up.log" >&2; echo "guest-hosts: the cluster did not come up (rc=$rc)" >&2; exit 1
    fi
    for f in "$STATE"/shared/.host-failed-* "$STATE"/shared/.failed-*; do
      [ -e "$f" ] && { echo "guest-hosts: guest ${f##*-} failed: $(cat "$f")" >&2; cmd_down; exit 1; }
    done
    [ "$(date +%s)" -lt "$deadline" ] || { echo "guest-hosts: only $up of $GUESTS guests serve ssh after ${BOOT_TIMEOUT}s" >&2; cmd_down; exit 1; }
    up=0
    for ((i = 0; i < GUESTS; i++)); do [ -e "$STATE/shared/.host-up-$i" ] && up=$((up + 1)); done
    sleep 1
  done
  for ((i = 0; i < GUESTS; i++)); do  # dropbear was started last: wait until it answers
    until in_ns ssh -F "$STATE/ssh/config" "g$i" true 2> "$STATE/ssh-g$i.err"; do
      [ "$(date +%s)" -lt "$deadline" ] || { echo "guest-hosts: ssh g$i: $(cat "$STATE/ssh-g$i.err")" >&2; cmd_down; exit 1; }
      sleep 1
    done
    rm -f "$STATE/ssh-g$i.err"
  done
  log "up: $(for ((i = 0; i < GUESTS; i++)); do printf 'g%d=10.77.0.%d ' $i $((i + 1)); done)(rxe0 each); results $RESULTS"
  trap - INT TERM HUP
  log "try: $HERE/guest-hosts.sh ssh --state $STATE g0 mpirun -np $GUESTS -H $(seq -s, -f 'g%.0f' 0 $((GUESTS - 1))) hostname"
}

cmd_ssh() {
  [ $# -ge 1 ] || die "ssh: which host (g0..)?"
  owner_alive && [ -s "$STATE/netns" ] || die "no cluster is up in $STATE"
  in_ns ssh -F "$STATE/ssh/config" "$@"
}

cmd_status() {
  if owner_alive && [ -s "$STATE/netns" ]; then
    echo "up: owner pid $(cat "$STATE/owner.pid"), namespace $(cat "$STATE/netns")"
    local i
    for ((i = 0; i < $(guest_count); i++)); do
      if [ -e "$STATE/shared/.host-up-$i" ]; then echo "g$i: serving ssh"; else echo "g$i: booting"; fi
    done
  else
    echo "down"; [ -s "$STATE/cluster.txt" ] && cat "$STATE/cluster.txt"
    return 1
  fi
}

cmd_down() {
  local pid
  pid=$(cat "$STATE/owner.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    [ -d "$STATE/shared" ] && touch "$STATE/shared/.down"
    local n=0
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 60 ]; do sleep 0.5; n=$((n + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      log "guests still running after 30 s; stopping them"
      kill -TERM "$pid" 2>/dev/null || true
      n=0; while kill -0 "$pid" 2>/dev/null && [ $n -lt 30 ]; do sleep 0.5; n=$((n + 1)); done
    fi
  fi
  [ -n "$RESULTS" ] || RESULTS=$(cat "$STATE/results.path" 2>/dev/null || true)
  [ -n "$RESULTS" ] && [ -d "$RESULTS" ] && chown -R "$(id -u):$(id -g)" "$RESULTS"
  rm -f "$STATE/owner.pid"
  [ -s "$STATE/cluster.txt" ] && cat "$STATE/cluster.txt" >&2
  log "down"
}

case "$CMD" in
  up) cmd_up ;;
  ssh) cmd_ssh "$@" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) usage >&2; die "unknown command '$CMD'" ;;
esac

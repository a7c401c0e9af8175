#!/bin/bash
# remote-in-guests.sh: the device protocol (issue 41) between two qemu guests with Soft-RoCE:
# `ringbench device-server` in guest 0, a LeNet `train --device remote:...` client in guest 1,
# over tcp and over verbs (rxe0), then a client and a server SIGKILLed, and a client SIGSTOPped,
# mid-training over verbs (guest-remote.sh). Passes when both trainings exit 0 with the transport
# asked for in their JSON, the same losses, final hashes, bytes and round trips per step; the
# server names the killed client as vanished, the client the killed server, and the server drops
# the stopped client within its --timeout (10 s), naming it.
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (guest-cluster.sh cannot run guests here).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/guest-options.sh"
STEPS=3 BATCH=8 TIMEOUT=900
while [ $# -gt 0 ]; do
  if guest_option "$@"; then shift "$TAKEN"; continue; fi
  case "$1" in
    --steps) STEPS=${2:?}; shift 2 ;;
    --batch) BATCH=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    *) echo "usage: remote-in-guests.sh [--build-dir DIR] [--out DIR] [--steps 3] [--batch 8] [--timeout 900]" >&2; exit 2 ;;
  esac
done
[ -z "$STATE" ] || { echo "remote-in-guests: --state is not supported: it boots two guests of its own" >&2; exit 2; }
OUT=${OUT:-$REPO/results/guests-remote-$(date -u +%Y%m%d-%H%M%S)}
[ "$(id -u)" = 0 ] || { echo "remote-in-guests: SKIP: needs root (guest network)" >&2; exit 77; }
[ -x "$BUILD/runner/ringbench" ] || { echo "remote-in-guests: no $BUILD/runner/ringbench (build first)" >&2; exit 2; }
command -v jq > /dev/null || { echo "remote-in-guests: SKIP: needs jq" >&2; exit 77; }
open_summary  # OUT, SUMMARY, say
say "remote-in-guests: LeNet batch $BATCH, $STEPS steps, build $BUILD, $(date -u +%FT%TZ)"
say "note: guests run under qemu TCG (emulated CPU): this proves the path, not performance"
t0=$(date +%s)
set +e
"$HERE/guest-cluster.sh" --guests 2 --build-dir "$BUILD" --out "$OUT" --timeout "$TIMEOUT" --in "$HERE" \
  "${GUEST_OPTS[@]}" -- sh /mnt/in/guest-remote.sh "$STEPS" "$BATCH"
rc=$?
set -e
rm -f "$OUT/shared/secret"  # the run's secret, made by guest 0
[ "$rc" = 77 ] && { say "SKIP: guest-cluster.sh cannot run guests on this machine"; exit 77; }
say "guest-cluster.sh rc=$rc, $(( $(date +%s) - t0 )) s"
fail=0
check() {  # WHAT CONDITION...: says PASS or FAIL
  local what=$1; shift
  if "$@"; then say "$what: PASS"; else say "$what: FAIL"; fail=1; fi
}
g0=$OUT/guest0 g1=$OUT/guest1
rcs() { cat "$g0/0-$1.rc" "$g1/1-$1.rc" 2>/dev/null | tr '\n' ' '; }
for t in tcp verbs; do
  check "train over $t: server and client exit 0 (rc: $(rcs "$t"))" test "$(rcs "$t")" = "0 0 "
  check "train over $t: the JSON names transport $t" \
    test "$(jq -r .meta.remote.link.transport "$g1/train-$t.json" 2>/dev/null)" = "$t"
  say "  $(grep -m1 '^# remote device' "$g1/train-$t.out" 2>/dev/null || echo 'no header')"
  say "  $(grep -m1 '^# remote traffic' "$g1/train-$t.out" 2>/dev/null || echo 'no traffic line')"
done
same() { test "$(jq -c "$1" "$g1/train-tcp.json" 2>/dev/null)" = "$(jq -c "$1" "$g1/train-verbs.json" 2>/dev/null)" &&
         test -n "$(jq -c "$1" "$g1/train-tcp.json" 2>/dev/null)"; }
check "the same bytes and round trips per step over tcp and verbs ($(jq -c .meta.remote.per_step "$g1/train-verbs.json" 2>/dev/null))" \
  same .meta.remote.per_step
check "the same losses ($(jq -c '.ranks[0].loss' "$g1/train-verbs.json" 2>/dev/null))" same '.ranks[0].loss'
check "the same final hashes" same .summary.final_hashes
check "client killed: the server names it as vanished (rc: $(rcs kill-client))" \
  grep -q 'vanished' "$g0/server-kill-client.out"
say "  $(grep -m1 'vanished' "$g0/server-kill-client.out" 2>/dev/null)"
check "server killed: the client fails naming the device server (rc: $(rcs kill-server))" \
  grep -q 'device server.*vanished\|vanished.*device server' "$g1/train-kill-server.out"
say "  $(grep -m1 'vanished' "$g1/train-kill-server.out" 2>/dev/null)"
# Stopped between requests, the verbs transport's heartbeats tell; in the middle of one, the
# request's own --timeout does: either way the server names the client and exits.
check "client stopped: the server drops it, naming it (rc: $(rcs stop-client))" \
  grep -q 'client .* ended: client .*\(not even a heartbeat\|did not send the rest of a message\)' \
  "$g0/server-stop-client.out"
say "  $(grep -m1 'ended' "$g0/server-stop-client.out" 2>/dev/null)"
[ "$rc" = 0 ] || fail=1
say "remote-in-guests: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail

#!/bin/bash
# fault-in-guests.sh: one rank of a 4-guest ring dies (or freezes) in the middle of an
# allreduce; every other rank must report an error naming that rank within 2 x --timeout, and exit.
# Runs in a cluster of guest hosts: the one up in --state DIR, else one it boots (guest-hosts.sh;
# see README.md). Exit: 0 pass, 1 fail, 2 usage, 77 skipped.
set -euo pipefail

usage() {
  cat << 'EOF'
usage: fault-in-guests.sh [--build-dir DIR] [--out DIR] [--state DIR] [--timeout S]
                          [guest-hosts.sh options: --cache-dir DIR --mem SIZE --no-install]
  --build-dir DIR  ringbench build directory (default: <repo>/build)
  --out DIR        results (default: <repo>/results/guests-fault-<UTC time>)
  --state DIR      run in the guest hosts up in DIR (guest-fixture.sh up, guest-hosts.sh up);
                   default: boot them in OUT/cluster, and take them down at the end
  --timeout S      limit for every step in the guests together (default 420)
Environment:
  TRANSPORTS=tcp       the ring's transports, e.g. "tcp verbs" (verbs adds --ib-dev rxe0): every
                       transport and mode is one step in the same guests (TRANSPORT=T: one)
  FAULT_MODES="kill stop"  kill: SIGKILL the victim (its sockets are reset); stop: SIGSTOP it
                       (its connections stay open and silent: only the timeout can tell)
  NODES=4 VICTIM=2 DELAY=3 (seconds of timed allreduces before the fault: counted from rank 0's
  table header, which it prints once every rank is set up) RB_TIMEOUT=15 (ringbench
  --timeout). Checked for each survivor: its error names the victim and is reported within
  2 x RB_TIMEOUT of the fault, and it exits within 2 x RB_TIMEOUT + 10 s: rank 0 serves the
  store and, after its error, waits up to 10 s for the store's clients to leave, and a stopped
  victim never leaves.
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=guest-options.sh
. "$HERE/guest-options.sh"  # REPO, BUILD, OUT, STATE, GUEST_OPTS, guest_option
TIMEOUT=420
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) guest_option "$@" || { usage >&2; exit 2; }; shift "$TAKEN" ;;
  esac
done
TRANSPORTS=${TRANSPORTS:-${TRANSPORT:-tcp}}
FAULT_MODES=${FAULT_MODES:-"kill stop"}
NODES=${NODES:-4}
VICTIM=${VICTIM:-2}
DELAY=${DELAY:-3}
RB_TIMEOUT=${RB_TIMEOUT:-15}
OUT=${OUT:-$REPO/results/guests-fault-$(date -u +%Y%m%d-%H%M%S)}
[ "$(id -u)" = 0 ] || { echo "fault-in-guests: SKIP: needs root (guest network)" >&2; exit 77; }
[ -x "$BUILD/runner/ringbench" ] || { echo "fault-in-guests: no $BUILD/runner/ringbench (build first)" >&2; exit 2; }
[ "$VICTIM" -lt "$NODES" ] || { echo "fault-in-guests: VICTIM must be below NODES" >&2; exit 2; }
# a run far longer than the test: 1 MiB allreduces, checked, until the fault ends it
ring_args="-b 1M -e 1M -n 100000 -w 1 -c 1 --iface eth0 --timeout $RB_TIMEOUT"
steps=""
for t in $TRANSPORTS; do for mode in $FAULT_MODES; do steps+="${steps:+ }$t:$mode"; done; done

open_summary  # OUT, SUMMARY, say
say "fault-in-guests: $NODES guests, transports '$TRANSPORTS', victim rank $VICTIM after ${DELAY}s, modes '$FAULT_MODES', ringbench --timeout $RB_TIMEOUT (bounds: error $((2 * RB_TIMEOUT))s, exit $((2 * RB_TIMEOUT + 10))s after the fault)"
t0=$(date +%s)
BUILD=$(cd "$BUILD" && pwd -P)
# shellcheck source=guest-scenario.sh
. "$HERE/guest-scenario.sh"  # cluster_begin, on_guests
cluster_begin fault "$NODES"  # STATE, RESULTS, SCENARIO
t1=$(date +%s)
# shellcheck disable=SC2086
on_guests "$SCENARIO" "$NODES" "$TIMEOUT" guest-fault.sh "$VICTIM" "$DELAY" "$steps" $ring_args
D=$SCENARIO
rcs=$(for ((i = 0; i < NODES; i++)); do printf 'g%d rc=%s ' "$i" "$(cat "$D/guest$i.rc" 2>/dev/null || echo missing)"; done)
say "steps ran in $(( $(date +%s) - t1 ))s ($rcs; files in $D)"

fail=0
mtime() { stat -c %.3Y "$1"; }
for spec in $steps; do
  t=${spec%%:*}
  mode=${spec#*:}
  f=fault-$t-$mode
  at=$D/guest$VICTIM/$f.at
  if [ ! -s "$at" ] || [ "$(cat "$at")" = early ]; then
    fail=1; say "$t $mode: FAIL: the victim did not deliver the fault ($(cat "$at" 2>/dev/null || echo 'no marker'))"
    continue
  fi
  for ((i = 0; i < NODES; i++)); do
    [ "$i" = "$VICTIM" ] && continue
    ex=$D/guest$i/$f.exit
    if [ ! -s "$ex" ]; then fail=1; say "$t $mode: rank $i: FAIL: did not exit (hung until the cluster was killed?)"; continue; fi
    r=$(cat "$ex")
    dt=$(awk -v a="$(mtime "$at")" -v b="$(mtime "$ex")" 'BEGIN{printf "%.1f", b - a}')
    # the error is the last thing ringbench writes: the output's mtime is when it was reported
    de=$(awk -v a="$(mtime "$at")" -v b="$(mtime "$D/guest$i/$f.out")" 'BEGIN{printf "%.1f", b - a}')
    err=$(grep -v '^#' "$D/guest$i/$f.out" | grep -m1 -i "rank $VICTIM\b" || true)
    [ -n "$err" ] || err=$(grep -v '^#' "$D/guest$i/$f.out" | grep -m1 -i 'error\|ringbench:' || true)
    verdict=PASS; why=""
    [ "$r" != 0 ] || { verdict=FAIL; why+=" exited 0;"; }
    grep -v '^#' "$D/guest$i/$f.out" | grep -q "rank $VICTIM\b" || { verdict=FAIL; why+=" error does not name rank $VICTIM;"; }
    awk -v d="$de" -v b="$((2 * RB_TIMEOUT))" 'BEGIN{exit !(d <= b)}' || { verdict=FAIL; why+=" reported its error ${de}s after the fault > $((2 * RB_TIMEOUT))s;"; }
    awk -v d="$dt" -v b="$((2 * RB_TIMEOUT + 10))" 'BEGIN{exit !(d <= b)}' || { verdict=FAIL; why+=" exited ${dt}s after the fault > $((2 * RB_TIMEOUT + 10))s;"; }
    [ "$verdict" = PASS ] || fail=1
    say "$t $mode: rank $i: $verdict${why:+:$why} rc=$r, error reported ${de}s and exited ${dt}s after the fault: ${err:0:220}"
  done
done
say "total wall time $(( $(date +%s) - t0 ))s; summary $SUMMARY, files in $D"
[ $fail = 0 ] && say "RESULT: PASS" || say "RESULT: FAIL"
exit $fail

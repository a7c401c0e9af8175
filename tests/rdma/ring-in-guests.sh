#!/bin/bash
# ring-in-guests.sh: our ring allreduce between qemu guests with Soft-RoCE (see README.md).
# In a cluster of guest hosts (guest-hosts.sh: the one up in --state DIR, else one it boots of
# as many guests as the largest node count) it runs, for every node count N (2 and 4), in guests
# 0..N-1, rank i in guest i (env launcher, rank 0 serves the store):
#   ringbench allreduce --transport T -b 4K -e 4M -f 4 -n 3 -w 1 -c 1 --iface eth0 --timeout 20
# for every T in $TRANSPORTS; then ib_write_bw (perftest) from guest 0 to guest 1 on rxe0, and
# the unit tests that need a device in guest 0. Passes when every rank of every ring exits 0,
# rank 0's JSON has rows, all with wrong == 0, and reports the transport asked for, and every
# ib_write_bw and unit test succeeded.
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (guests cannot run here).
set -euo pipefail

usage() {
  cat << 'EOF'
usage: ring-in-guests.sh [--build-dir DIR] [--out DIR] [--state DIR] [--nodes "2 4"] [--timeout S]
                         [guest-hosts.sh options: --cache-dir DIR --mem SIZE --no-install]
  --build-dir DIR  ringbench build directory (default: <repo>/build); DIR/runner/ringbench
  --out DIR        results (default: <repo>/results/guests-<UTC time>)
  --state DIR      run in the guest hosts up in DIR (guest-fixture.sh up, guest-hosts.sh up);
                   default: boot them in OUT/cluster, and take them down at the end
  --nodes LIST     node counts (default "2 4")
  --timeout S      limit for the rings, perftest and unit tests in the guests (default 420)
Environment:
  TRANSPORTS="tcp"        transports of the ring, e.g. "tcp verbs" (verbs adds --ib-dev rxe0);
                          "auto": tcp, plus verbs when this build has the verbs transport
  PERFTEST_SIZES="4096:500 65536:200 1048576:40"   ib_write_bw bytes:iterations; "-" for none
  UNIT_TESTS=auto         test executables (relative to the build directory) run in guest 0 on
                          rxe0 after the rest; auto: tests/verbs_transport_test and
                          tests/remote_verbs_test, those built; "-" none
  RING_ARGS="-b 4K -e 4M -f 4 -n 3 -w 1 -c 1 --iface eth0 --timeout 20"
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=guest-options.sh
. "$HERE/guest-options.sh"  # REPO, BUILD, OUT, STATE, GUEST_OPTS, guest_option
NODES="2 4"
TIMEOUT=420
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) guest_option "$@" || { usage >&2; exit 2; }; shift "$TAKEN" ;;
  esac
done
TRANSPORTS=${TRANSPORTS:-tcp}
PERFTEST_SIZES=${PERFTEST_SIZES:-"4096:500 65536:200 1048576:40"}
UNIT_TESTS=${UNIT_TESTS:-auto}
RING_ARGS=${RING_ARGS:-"-b 4K -e 4M -f 4 -n 3 -w 1 -c 1 --iface eth0 --timeout 20"}
OUT=${OUT:-$REPO/results/guests-$(date -u +%Y%m%d-%H%M%S)}
[ "$(id -u)" = 0 ] || { echo "ring-in-guests: SKIP: needs root (guest network)" >&2; exit 77; }
[ -x "$BUILD/runner/ringbench" ] || { echo "ring-in-guests: no $BUILD/runner/ringbench (build first)" >&2; exit 2; }
command -v jq > /dev/null || apt-get install -y -qq jq > /dev/null 2>&1 || { echo "ring-in-guests: SKIP: needs jq" >&2; exit 77; }
BUILD=$(cd "$BUILD" && pwd -P)
if [ "$TRANSPORTS" = auto ]; then
  # the build says whether it has the verbs transport in the JSON metadata of any run
  probe=$(mktemp)
  "$BUILD/runner/ringbench" allreduce --ranks 1 -b 4K -e 4K -n 1 -w 0 --json "$probe" > /dev/null 2>&1 || true
  if [ "$(jq -r '.meta.build.have_verbs' "$probe" 2>/dev/null)" = true ]; then TRANSPORTS="tcp verbs"; else TRANSPORTS=tcp; fi
  rm -f "$probe"
fi
if [ "$UNIT_TESTS" = auto ]; then
  UNIT_TESTS=
  for t in tests/verbs_transport_test tests/remote_verbs_test; do
    [ -x "$BUILD/$t" ] && UNIT_TESTS="$UNIT_TESTS $t"
  done
  UNIT_TESTS=${UNIT_TESTS# }
  [ -n "$UNIT_TESTS" ] || UNIT_TESTS=-
fi
most=0
for n in $NODES; do [ "$n" -gt "$most" ] && most=$n; done
open_summary  # OUT, SUMMARY, say
T_ALL=$(date +%s)
say "ring-in-guests: transports '$TRANSPORTS', nodes '$NODES', ring args '$RING_ARGS', unit tests '$UNIT_TESTS', build $BUILD, $(date -u +%FT%TZ)"
say "note: guests run under qemu TCG (emulated CPU); the speeds below prove the path, not performance"
# shellcheck source=guest-scenario.sh
. "$HERE/guest-scenario.sh"  # cluster_begin, on_guests
cluster_begin ring "$most"   # STATE, RESULTS, SCENARIO

# One attempt into DIR, with the rings' store ports from PORT (a retry's differ from the first's):
# runs every ring size in guests 0..most-1 and says what passed; returns 1 when anything failed.
run_rings() {
  local dir=$1 port=$2 nfail=0 t0 n t ok why i r json rows wrong path big spec s c sv line note name counts
  mkdir -p "$dir/shared"
  chown "$GUEST_UID:$GUEST_UID" "$dir" "$dir/shared"
  t0=$(date +%s)
  # shellcheck disable=SC2086  # RING_ARGS is a word list
  on_guests "$dir" "$most" "$TIMEOUT" guest-ring.sh "$port" "$NODES" "$TRANSPORTS" "$PERFTEST_SIZES" "$UNIT_TESTS" $RING_ARGS
  say ""
  say "== $most guests, rings of $NODES ($(( $(date +%s) - t0 ))s; files in $dir) =="
  for ((i = 0; i < most; i++)); do
    r=$(cat "$dir/guest$i.rc" 2>/dev/null || echo missing)
    [ "$r" = 0 ] || { nfail=1; say "  guest $i: rc=$r$([ "$r" = 124 ] && echo " (killed at the ${TIMEOUT}s limit)"); $dir/guest$i.log"; }
  done
  for n in $NODES; do
    for t in $TRANSPORTS; do
      ok=1; why=""
      for ((i = 0; i < n; i++)); do
        r=$(cat "$dir/guest$i/ring-n$n-$t.rc" 2>/dev/null || echo missing)
        if [ "$r" != 0 ]; then
          ok=0; why+=" rank $i rc=$r: $(grep -v '^#' "$dir/guest$i/ring-n$n-$t.out" 2>/dev/null | grep -m1 -i 'error\|fail\|ringbench:' || true);"
        fi
      done
      json=$dir/guest0/ring-n$n-$t.json
      if [ -s "$json" ]; then
        rows=$(jq '.rows | length' "$json")
        wrong=$(jq '[.rows[] | select(.wrong != 0)] | length' "$json")
        path=$(jq -r '[.meta.hosts[].path.transport] | unique | join(",")' "$json")
        [ "$rows" -gt 0 ] || { ok=0; why+=" no rows in rank 0's JSON;"; }
        [ "$wrong" = 0 ] || { ok=0; why+=" $wrong rows with wrong != 0;"; }
        [ "$path" = "$t" ] || { ok=0; why+=" the ranks report transport '$path', not '$t';"; }
        big=$(jq -r '[.rows[] | select(.inplace == false)] | max_by(.bytes) | "\(.bytes) B: busbw \(.busbw_gbps * 1000 | floor) MB/s, time \(.time_us | floor) us"' "$json")
      else
        ok=0; why+=" rank 0 wrote no JSON;"; rows=0; big=""
      fi
      if [ $ok = 1 ]; then
        say "ring $t N=$n: PASS ($rows rows, all wrong == 0, path $t; largest: $big)"
      else
        nfail=1; say "ring $t N=$n: FAIL:$why"
      fi
    done
  done
  if [ "$PERFTEST_SIZES" != - ]; then
    for spec in $PERFTEST_SIZES; do
      s=${spec%%:*}
      c=$(cat "$dir/guest0/perftest-$s.rc" 2>/dev/null || echo missing)
      sv=$(cat "$dir/guest1/perftest-$s.rc" 2>/dev/null || echo missing)
      line=$(awk -v s="$s" '$1 == s && NF == 5 {print "BW average " $4 " Gb/s, peak " $3 " Gb/s, " $5 " Mpps"}' "$dir/guest0/perftest-$s.out" 2>/dev/null || true)
      if [ "$c" = 0 ] && [ "$sv" = 0 ] && [ -n "$line" ]; then
        note=""
        case "$line" in "BW average 0.000000 "*) note="; perftest could not time it on this loaded host (r^2 < 0.9 in its clock calibration): the path works, the number is void" ;; esac
        say "ib_write_bw guest0 -> guest1 rxe0 size $s (${spec#*:} iters): PASS ($line$note)"
      else
        nfail=1; say "ib_write_bw size $s: FAIL (client rc=$c, server rc=$sv; see $dir/guest0/perftest-$s.out)"
      fi
    done
  fi
  if [ "$UNIT_TESTS" != - ]; then
    for t in $UNIT_TESTS; do
      name=${t##*/}
      r=$(cat "$dir/guest0/unit-$name.rc" 2>/dev/null || echo missing)
      counts=$(grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ test' "$dir/guest0/unit-$name.out" 2>/dev/null | sed 's/\[ *\([A-Z]*\) *\] \([0-9]*\).*/\2 \1/' | paste -sd, - || true)
      if [ "$r" = 0 ]; then say "unit $name in guest 0 (rxe0): PASS ($counts)"
      else nfail=1; say "unit $name in guest 0 (rxe0): FAIL (rc=$r; $counts; see $dir/guest0/unit-$name.out)"; fi
    done
  fi
  return $nfail
}

fail=0
if ! run_rings "$SCENARIO/attempt1" 29500; then
  # Soft-RoCE in these TCG guests has failed now and then under load: a SEND of 64 KiB, the
  # same length as the receive posted for it, NAKed "remote invalid request" (seen once in CI,
  # N=4, verbs, 1 MiB; the rerun passed). One retry, in the same guests with new processes and
  # ports; both attempts stay in the summary, and a second failure fails the test.
  say "attempt 1 failed (above); retrying once (see tests/rdma/README.md, \"Intermittent\")"
  reset_guests "$most"
  run_rings "$SCENARIO/attempt2" 29700 || fail=1
fi
say ""
say "total wall time $(( $(date +%s) - T_ALL ))s; results in $OUT"
[ $fail = 0 ] && say "RESULT: PASS" || say "RESULT: FAIL"
exit $fail

#!/bin/bash
# headline-in-guests.sh: the headline command, end to end, on four guest hosts
# (guest-hosts.sh: own kernels and addresses, rxe0 each, ssh between them):
#   ssh g0 mpirun -np 4 -H g0,g1,g2,g3 ringbench sweep CONFIG
# The sweep runs the doctor's checks on every host before its first point (its "# doctor:" lines;
# the same code as `ringbench doctor`, whose report goes into env.json), so the test reads them
# there rather than paying for a second mpirun of the doctor across the guests (~27 s of four TCG
# guests). It checks them and the run directory: every point ok (none failed, none skipped), the report has the
# verbs vs tcp and mpi vs tcp ratios and says the cluster is guests, and every rank of every
# point reports the path asked for (verbs: device=rxe0 gid_type=RoCE v2; tcp: iface=eth0;
# mpi: btl tcp on eth0).
# With --state DIR it runs in the guest hosts up there (ctest's fixture), else it boots them.
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (this machine cannot run guests).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=guest-options.sh
. "$HERE/guest-options.sh"  # REPO, BUILD, OUT, STATE, GUEST_OPTS, guest_option
CONFIG=$HERE/headline-ci.yaml
LINK_ROUNDS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --config) CONFIG=${2:?}; shift 2 ;;
    --link-rounds) LINK_ROUNDS=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0"; echo "usage: headline-in-guests.sh [--build-dir DIR] [--out DIR] [--state DIR] [--config FILE] [--link-rounds N]"; echo "  --state DIR  run in the guest hosts up in DIR (guest-fixture.sh up); default: boot them in OUT/cluster"; echo "  --link-rounds N  then, in the same guests, the ring over verbs vs ib_write_bw (bench/verbs_vs_perftest.sh), N alternating rounds (0: not run)"; exit 0 ;;
    *) guest_option "$@" || { echo "headline-in-guests: unknown argument '$1'" >&2; exit 2; }; shift "$TAKEN" ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "headline-in-guests: SKIP: needs root (guest network)" >&2; exit 77; }
[ -x "$BUILD/runner/ringbench" ] || { echo "headline-in-guests: no $BUILD/runner/ringbench (build first)" >&2; exit 2; }
[ -f "$CONFIG" ] || { echo "headline-in-guests: no config $CONFIG" >&2; exit 2; }
command -v jq > /dev/null || apt-get install -y -qq jq > /dev/null 2>&1 || { echo "headline-in-guests: SKIP: needs jq" >&2; exit 77; }
BUILD=$(cd "$BUILD" && pwd -P)
OUT=${OUT:-$REPO/results/headline-guests-$(date -u +%Y%m%d-%H%M%S)}
open_summary  # OUT, SUMMARY, say
T0=$(date +%s)
# shellcheck source=guest-scenario.sh
. "$HERE/guest-scenario.sh"  # cluster_begin
# the guests' results directory for this test, new and empty (the sweep rightly refuses a run
# directory that is not)
cluster_begin headline 4  # STATE, SCENARIO
RESULTS=$SCENARIO
say "headline-in-guests: 4 guests ready in $(( $(date +%s) - T0 ))s (state $STATE); build $BUILD; files in $RESULTS"
say "note: guests run under qemu TCG (emulated CPU); the speeds prove the path, not performance"

# The config at the same path on every host, as a user would have it.
cp "$CONFIG" "$RESULTS/config.yaml"
chmod 644 "$RESULTS/config.yaml"
RB=$BUILD/runner/ringbench
HOSTS=g0,g1,g2,g3
fail=0
# at most 10 minutes a command (a hung one is killed here, and what it left running in the
# guests by the next scenario's guest-reset.sh)
gh() { timeout -k 10 600 "$HERE/guest-hosts.sh" ssh --state "$STATE" g0 "$@"; }

check() { # check WHAT COMMAND...: one PASS/FAIL line
  local what=$1; shift
  if "$@"; then say "PASS: $what"; else say "FAIL: $what"; fail=1; fi
}

t=$(date +%s)
set +e
gh mpirun -np 4 -H "$HOSTS" "$RB" sweep "$RESULTS/config.yaml" --out "$RESULTS/run" > "$OUT/sweep.log" 2>&1
rc=$?
set -e
say "sweep: mpirun -np 4 -H $HOSTS ringbench sweep: rc=$rc in $(( $(date +%s) - t ))s (log $OUT/sweep.log)"
RUN=$RESULTS/run
RAW=$RUN/raw.jsonl
# The doctor's lines, as `ringbench doctor` prints them, from the sweep's log.
sed -n 's/^# doctor: //p' "$OUT/sweep.log" > "$OUT/doctor.log"
sed 's/^/  /' "$OUT/doctor.log" | tee -a "$SUMMARY"
check "doctor: every host checked before the first point, no check failed" \
  sh -c "grep -q '^build: ' '$OUT/doctor.log' && ! grep -q '^[a-z ]*: FAIL' '$OUT/doctor.log'"
check "doctor: verbs RC ping between all 6 pairs of hosts on rxe0, RoCE v2" \
  grep -q '^verbs: ok, on 4 hosts (rxe0, RoCE v2, MTU 1024); RC ping between all 6 pairs' "$OUT/doctor.log"
check "doctor: the same build and config on the 4 hosts" \
  sh -c "grep -q '^build: ok, .* on 4 hosts' '$OUT/doctor.log' && grep -q '^config: ok, .* on 4 hosts' '$OUT/doctor.log'"
if [ "$rc" != 0 ] || [ ! -s "$RAW" ]; then
  say "FAIL: the sweep did not finish ($(tail -3 "$OUT/sweep.log" | tr '\n' ' '))"
  exit 1
fi
points=$(jq -s 'length' "$RAW")
not_ok=$(jq -r 'select(.status != "ok") | "\(.point) r\(.repeat): \(.status) \(.error)"' "$RAW")
check "$points records, every point ok (none failed or skipped)${not_ok:+: $not_ok}" test -z "$not_ok"
check "report.md says the cluster is qemu TCG guests" grep -q '^Cluster: guests' "$RUN/report.md"
check "report.md has the verbs vs tcp and mpi vs tcp ratios" \
  sh -c "grep -q '^### verbs vs tcp' '$RUN/report.md' && grep -q '^### mpi vs tcp' '$RUN/report.md'"
# every rank of every point: the path asked for
bad_paths=$(jq -r 'select(.nodes > 1) | ((.train // .collectives).meta.hosts | length) as $n |
  select($n != .nodes) | "\(.point): \($n) of \(.nodes) ranks reported a path; "' "$RAW")
bad_paths+=$(jq -r 'select(.nodes > 1) | .transport as $t | .point as $p | (.train // .collectives).meta.hosts[] |
  select(($t == "verbs" and (.path.transport != "verbs" or .path.device != "rxe0" or .path.gid_type != "RoCE v2"))
      or ($t == "tcp" and (.path.transport != "tcp" or .path.iface != "eth0"))
      or ($t == "mpi" and (.path.transport != "mpi" or .path.btl != "tcp,self" or .path.btl_tcp_if_include != "eth0")))
  | "\($p) rank \(.rank) on \(.host): \(.path | tostring)"' "$RAW")
check "every rank's path: verbs on rxe0 RoCE v2, tcp on eth0, mpi btl tcp on eth0${bad_paths:+: $bad_paths}" test -z "$bad_paths"
hosts=$(jq -r 'select(.nodes == 4) | [(.train // .collectives).meta.hosts[].host] | sort | join(",")' "$RAW" | sort -u | paste -sd' ' -)
check "4-node points ran on g0..g3 (hosts: $hosts)" test "$hosts" = "g0,g1,g2,g3"
for f in report.md env.json summary.csv; do check "$f written" test -s "$RUN/$f"; done
check "env.json holds the doctor's report of the 4 hosts (kernel, RDMA ports)" \
  test "$(jq '[.doctor.hosts[] | select(.kernel != null and (.rdma | length) > 0)] | length' "$RUN/env.json")" = 4
check "plots written" sh -c "ls '$RUN'/plots/*.svg > /dev/null 2>&1"
if [ "$LINK_ROUNDS" -gt 0 ]; then
  t=$(date +%s)
  if "$REPO/bench/verbs_vs_perftest.sh" --state "$STATE" --rounds "$LINK_ROUNDS" --build-dir "$BUILD" \
      --out "$OUT/link.md" > "$OUT/link.log" 2>&1; then
    say "PASS: ring over verbs vs ib_write_bw, $LINK_ROUNDS rounds in $(( $(date +%s) - t ))s ($OUT/link.md):"
    awk '/^\| size/ {on = 1} on && /^$/ {exit} on' "$OUT/link.md" | tee -a "$SUMMARY"
  else
    say "FAIL: ring over verbs vs ib_write_bw ($(tail -2 "$OUT/link.log" | tr '\n' ' '))"; fail=1
  fi
fi
say ""
awk '/^### (verbs|mpi) vs tcp/ {on = 1} on && /^!/ {on = 0} on' "$RUN/report.md" | tee -a "$SUMMARY"
say "total wall time $(( $(date +%s) - T0 ))s; results in $OUT"
[ $fail = 0 ] && say "RESULT: PASS" || say "RESULT: FAIL"
exit $fail

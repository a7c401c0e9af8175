#!/bin/bash
# guest-fixture.sh: ctest's fixture for the guest tests, so that they share one boot of four guests
# (tests/CMakeLists.txt: rdma_guests_up is its FIXTURES_SETUP, rdma_guests_down its
# FIXTURES_CLEANUP, which ctest runs even when a test failed).
#   up --state DIR [--build-dir DIR] [guest-hosts.sh up options]
#       takes down a cluster an earlier run left up in DIR, then boots the 4 guest hosts there
#       (guest-hosts.sh up, at most --lifetime 3600 s). Where guests cannot run here it writes
#       the reason to DIR/skip, which makes every test of the fixture skip (77) with it.
#   down --state DIR
#       takes the cluster down (nothing to do after a skip).
# Exit: 0 done, 1 failed, 2 usage, 77 skipped (this machine cannot run guests).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 3 ] && [ "$2" = --state ] || { usage >&2; exit 2; }
CMD=$1 STATE=$3
shift 3
say() { echo "guest-fixture: $*"; }

fixture_up() {
  mkdir -p "$STATE"
  rm -f "$STATE/skip"
  skip() { echo "$*" > "$STATE/skip"; say "SKIP: $*"; exit 77; }
  [ "$(id -u)" = 0 ] || skip "needs root (the guests' network namespace and tap devices)"
  if "$HERE/guest-hosts.sh" status --state "$STATE" > /dev/null 2>&1; then
    say "a cluster from an earlier run is still up in $STATE: taking it down first"
    "$HERE/guest-hosts.sh" down --state "$STATE" || true
  fi
  local t0 rc
  t0=$(date +%s)
  set +e
  "$HERE/guest-hosts.sh" up --state "$STATE" --guests 4 --lifetime 3600 --boot-timeout 480 "$@"
  rc=$?
  set -e
  if [ "$rc" = 77 ]; then
    skip "this machine cannot run the guests: $(grep -h -m1 'SKIP' "$STATE/up.log" 2>/dev/null || echo "see $STATE/up.log")"
  fi
  [ "$rc" = 0 ] || { say "FAIL: the 4 guest hosts did not come up (rc=$rc; $STATE/up.log)"; exit 1; }
  say "4 guest hosts up in $(( $(date +%s) - t0 ))s (state $STATE)"
}

fixture_down() {
  [ -s "$STATE/skip" ] && { say "SKIP: nothing to take down ($(cat "$STATE/skip"))"; exit 77; }
  local owner
  owner=$(cat "$STATE/owner.pid" 2>/dev/null || true)
  "$HERE/guest-hosts.sh" down --state "$STATE"
  # the owner (guest-cluster.sh) kills the guests and removes the namespace as it exits
  if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
    say "FAIL: the cluster's owner (pid $owner) still runs after down"; exit 1
  fi
}

case "$CMD" in
  up) fixture_up "$@" ;;
  down) fixture_down ;;
  *) usage >&2; exit 2 ;;
esac

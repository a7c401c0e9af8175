# shellcheck shell=bash disable=SC2034  # SCENARIO and RESULTS are the sourcing script's
# Sourced by ring-, fault- and headline-in-guests.sh after guest-options.sh (and once they have a
# say function): the cluster of ssh hosts (guest-hosts.sh) a scenario runs in, and running a
# script in every guest at once.
#
# cluster_begin NAME GUESTS: with --state DIR, the cluster already up there (ctest's fixture,
#   guest-fixture.sh); exits 77 with the fixture's reason where it could not boot guests, 1 when
#   no cluster is up. Without --state, boots GUESTS guests in OUT/cluster, taken down when the
#   script exits. Then ends what an earlier scenario left running in the guests (guest-reset.sh)
#   and sets RESULTS (the results share: the same path on the host and in the guests) and
#   SCENARIO=RESULTS/NAME, new and empty, owned by the guests' user.
# on_guests DIR N LIMIT SCRIPT ARGS...: `sh /mnt/in/SCRIPT ARGS` as user ringbench in guests
#   0..N-1 at once, each in DIR/guest<i> with GUEST_OUT there, GUEST_SHARED=DIR/shared and
#   GUEST_COUNT=N; stdout+stderr in DIR/guest<i>.log, the exit status in DIR/guest<i>.rc (124:
#   killed at LIMIT seconds, with everything it started). Returns when all have ended.
GUEST_UID=4242

cluster_begin() {
  local name=$1 guests=$2 rc up
  if [ -n "$STATE" ]; then
    [ -s "$STATE/skip" ] && { say "SKIP: $(cat "$STATE/skip")"; exit 77; }
    "$HERE/guest-hosts.sh" status --state "$STATE" > /dev/null 2>&1 \
      || { say "FAIL: no guest cluster is up in $STATE (ctest's fixture rdma_guests_up boots it: see $STATE/up.log)"; exit 1; }
  else
    STATE=$OUT/cluster
    set +e
    "$HERE/guest-hosts.sh" up --state "$STATE" --guests "$guests" --build-dir "$BUILD" "${GUEST_OPTS[@]}"
    rc=$?
    set -e
    [ "$rc" = 77 ] && { say "SKIP: this machine cannot run guests ($(grep -h -m1 'SKIP' "$STATE/up.log" 2>/dev/null || echo "see $STATE/up.log"))"; exit 77; }
    [ "$rc" = 0 ] || { say "FAIL: the guest cluster did not come up (rc=$rc; $STATE/up.log)"; exit 1; }
    trap '"$HERE/guest-hosts.sh" down --state "$STATE" > /dev/null 2>&1 || true' EXIT
    trap 'exit 130' INT TERM
  fi
  up=$(find "$STATE/shared" -maxdepth 1 -name '.host-up-*' | wc -l)
  [ "$up" -ge "$guests" ] || { say "FAIL: the cluster in $STATE has $up guests, this needs $guests"; exit 1; }
  RESULTS=$(cat "$STATE/results.path")
  SCENARIO=$RESULTS/$name
  rm -rf "$SCENARIO"
  mkdir -p "$SCENARIO/shared"
  chown -R "$GUEST_UID:$GUEST_UID" "$SCENARIO"
  reset_guests "$up"
}

reset_guests() {  # N: guest-reset.sh in guests 0..N-1 (what it killed goes to the summary)
  local i out
  for ((i = 0; i < $1; i++)); do
    out=$(timeout -k 5 60 "$HERE/guest-hosts.sh" ssh --state "$STATE" "g$i" '. ~/guest.env && sh /mnt/in/guest-reset.sh' 2>&1 < /dev/null) \
      || { say "FAIL: g$i does not answer ssh: $out"; exit 1; }
    [ -z "$out" ] || say "$out"
  done
}

on_guests() {
  local dir=$1 n=$2 limit=$3 script=$4 i w args="" pids=()
  shift 4
  [[ "$script" =~ ^[a-z-]+\.sh$ ]] || { echo "on_guests: bad script name '$script'" >&2; return 2; }
  for w in "$@"; do args+=" '${w//\'/\'\\\'\'}'"; done  # each word single-quoted for the guest's sh
  for ((i = 0; i < n; i++)); do
    mkdir -p "$dir/guest$i"
    chown "$GUEST_UID:$GUEST_UID" "$dir/guest$i"
    # the guest's timeout ends the script's whole process group at LIMIT; the host's, 30 s later,
    # only ssh: a dead guest or network cannot hold the test
    (set +e
     timeout -k 5 $((limit + 30)) "$HERE/guest-hosts.sh" ssh --state "$STATE" "g$i" \
       ". ~/guest.env && export GUEST_OUT='$dir/guest$i' GUEST_SHARED='$dir/shared' GUEST_COUNT=$n && cd \"\$GUEST_OUT\" && exec /usr/bin/timeout -k 10 $limit sh /mnt/in/$script$args" \
       > "$dir/guest$i.log" 2>&1 < /dev/null
     echo $? > "$dir/guest$i.rc") &
    pids+=($!)
  done
  wait "${pids[@]}" || true
}

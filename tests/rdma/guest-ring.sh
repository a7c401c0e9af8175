#!/bin/sh
# In-guest part of ring-in-guests.sh (busybox sh; run over ssh in every guest host).
# usage: guest-ring.sh PORT SIZES TRANSPORTS PERFTEST_SIZES UNIT_TESTS RING_ARGS...
#   PORT            the first ring's store port; each further step takes the next, and
#                   ib_write_bw PORT+40 onwards (a retry passes other ports than the first try)
#   SIZES           space-separated ring sizes, e.g. "2 4": for each, guests 0..N-1 run the ring
#                   as ranks 0..N-1 while the others wait; all guests meet at a barrier (files in
#                   the shared directory) between sizes, so one boot serves every size
#   TRANSPORTS      space-separated list, e.g. "tcp verbs": one `ringbench allreduce` per entry
#                   and size
#   PERFTEST_SIZES  space-separated "bytes:iters" list for ib_write_bw from guest 0 (client) to
#                   guest 1 (server) on rxe0; empty or "-" for none
#   UNIT_TESTS      space-separated test executables (paths relative to the build directory)
#                   that guest 0 runs after the rest, e.g. "tests/verbs_transport_test"; "-" none
#   RING_ARGS       the common `ringbench allreduce` arguments
# Writes, in the current directory (GUEST_OUT, on a host share): ring-n<N>-<t>.out,
# ring-n<N>-<t>.json (rank 0 only), ring-n<N>-<t>.rc, perftest-<bytes>.out/.rc,
# unit-<name>.out/.rc; prints RESULT lines. Each step uses its own store/perftest port, so a
# step that failed on one guest cannot disturb the next one. Exit status: 0 when every step of
# this guest succeeded.
PORT=$1
SIZES=$2
TRANSPORTS=$3
PERFTEST_SIZES=$4
UNIT_TESTS=$5
shift 5
RB=$GUEST_BUILD_DIR/runner/ringbench
STORE_HOST=$GUEST_NET.1
status=0
step=0
now() { cut -d' ' -f1 /proc/uptime; }
. "$(dirname "$0")/guest-barrier.sh"  # barrier NAME

for size in $SIZES; do
  barrier "ring-n$size" || status=1
  for t in $TRANSPORTS; do
    port=$((PORT + step))  # the same on every guest, whether it takes part or not
    step=$((step + 1))
    [ "$GUEST_INDEX" -lt "$size" ] || continue
    extra=""
    # 64K memory regions instead of PVRDMA's 1G: transfers cross region boundaries (one SGE each).
    [ "$t" = verbs ] && extra="--ib-dev $GUEST_IB_DEV --mr-chunk 64K"
    json=""
    [ "$GUEST_INDEX" = 0 ] && json="--json ring-n$size-$t.json"
    serve=""
    [ "$GUEST_INDEX" = 0 ] && serve="RINGBENCH_STORE_SERVE=1"
    echo "=== ring transport=$t rank $GUEST_INDEX/$size store $STORE_HOST:$port (uptime $(now)s)"
    t0=$(now)
    # shellcheck disable=SC2086  # extra, json and serve are word lists
    env $serve RINGBENCH_RANK="$GUEST_INDEX" RINGBENCH_WORLD_SIZE="$size" \
      RINGBENCH_STORE="$STORE_HOST:$port" RINGBENCH_JOB_ID="guests-n$size-$t" \
      "$RB" allreduce --transport "$t" $extra "$@" $json > "ring-n$size-$t.out" 2>&1
    rc=$?
    echo "$rc" > "ring-n$size-$t.rc"
    cat "ring-n$size-$t.out"
    echo "RESULT ring transport=$t rank=$GUEST_INDEX ranks=$size rc=$rc wall_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{print b-a}')"
    [ "$rc" = 0 ] || status=1
  done
done
barrier rings-done || status=1

# ib_write_bw between guests 0 and 1: perftest alone, independent of our code, on the same
# rxe devices and segment. The server (guest 1) takes one client per attempt; the client
# (guest 0) retries while the server is not listening yet. perftest calibrates the CPU clock
# by sampling when it starts; on a loaded TCG host that sampling can fail ("Correlation
# coefficient r^2 < 0.9") and perftest then reports 0 Gb/s: such an attempt is repeated (up
# to 3 times). The client tells the server after each attempt, through GUEST_SHARED, whether
# another one follows.
if [ "$PERFTEST_SIZES" != - ] && [ -n "$PERFTEST_SIZES" ] && [ "$GUEST_INDEX" -le 1 ] && [ "$GUEST_COUNT" -ge 2 ]; then
  k=0
  for spec in $PERFTEST_SIZES; do
    size=${spec%%:*}
    iters=${spec#*:}
    port=$((PORT + 40 + k))
    k=$((k + 1))
    common="-d $GUEST_IB_DEV -x $GUEST_GID_INDEX -p $port -F --report_gbits -s $size -n $iters"
    role=server
    [ "$GUEST_INDEX" = 0 ] && role=client
    attempt=1
    while :; do
      flag=$GUEST_SHARED/perftest-$size-attempt$attempt
      if [ $role = server ]; then
        # shellcheck disable=SC2086
        timeout 180 ib_write_bw $common > "perftest-$size.out" 2>&1
        rc=$?
        n=0
        while [ ! -s "$flag" ] && [ $n -lt 240 ]; do sleep 0.25; n=$((n + 1)); done
        [ "$(cat "$flag" 2>/dev/null)" = again ] || break
      else
        deadline=$(( $(cut -d. -f1 /proc/uptime) + 120 ))
        while :; do
          # shellcheck disable=SC2086
          timeout 180 ib_write_bw $common "$GUEST_NET.2" > "perftest-$size.out" 2>&1
          rc=$?
          [ "$rc" = 0 ] && break
          grep -q -i "couldn't connect\|unable to connect\|connection refused" "perftest-$size.out" || break
          [ "$(cut -d. -f1 /proc/uptime)" -ge "$deadline" ] && break
          sleep 0.5
        done
        avg=$(awk -v s="$size" '$1 == s && NF == 5 {print $4}' "perftest-$size.out")
        if [ "$rc" = 0 ] && [ "$attempt" -lt 3 ] && awk -v a="${avg:-0}" 'BEGIN{exit !(a + 0 == 0)}'; then
          echo "ib_write_bw size=$size attempt $attempt reported 0 Gb/s ($(grep -m1 'r^2' "perftest-$size.out")); again"
          echo again > "$flag"
        else
          echo finished > "$flag"
          break
        fi
      fi
      attempt=$((attempt + 1))
    done
    echo "$rc" > "perftest-$size.rc"
    echo "=== ib_write_bw size=$size iters=$iters $role (attempt $attempt)"
    cat "perftest-$size.out"
    # result line: bytes iterations BW_peak BW_average MsgRate
    bw=$(awk -v s="$size" '$1 == s && NF == 5 {print "bw_peak_gbit=" $3 " bw_avg_gbit=" $4 " msgrate_mpps=" $5}' "perftest-$size.out")
    echo "RESULT ib_write_bw role=$role size=$size iters=$iters attempts=$attempt rc=$rc $bw"
    [ "$rc" = 0 ] || status=1
  done
fi
# unit tests that need an RDMA device (they run on rxe0 of guest 0, ranks over loopback)
if [ "$UNIT_TESTS" != - ] && [ -n "$UNIT_TESTS" ] && [ "$GUEST_INDEX" = 0 ]; then
  for t in $UNIT_TESTS; do
    name=${t##*/}
    echo "=== unit test $t"
    "$GUEST_BUILD_DIR/$t" > "unit-$name.out" 2>&1
    rc=$?
    echo "$rc" > "unit-$name.rc"
    cat "unit-$name.out"
    echo "RESULT unit test=$name rc=$rc"
    [ "$rc" = 0 ] || status=1
  done
fi
exit $status

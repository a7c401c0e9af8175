#!/bin/sh
# In-guest part of fault-in-guests.sh (busybox sh; run over ssh in every guest host).
# usage: guest-fault.sh VICTIM DELAY STEPS RING_ARGS...
#   VICTIM  the rank (= guest index) that is made to fail
#   DELAY   seconds the victim lets the timed allreduces run before the fault (counted from
#           rank 0's table header, which it prints once every rank is set up)
#   STEPS   space-separated TRANSPORT:MODE list, one step each, e.g. "tcp:kill verbs:stop";
#           verbs adds --ib-dev of the guest's RDMA device. Modes:
#             kill  SIGKILL the victim's ringbench: its sockets are reset by the kernel
#             stop  SIGSTOP it: its connections stay open and silent, only timeouts can tell
#   RING_ARGS  `ringbench allreduce` arguments of a long run (it must outlast DELAY), less
#              --transport
# Every guest runs the allreduce as rank GUEST_INDEX. Markers, written (not touched) on the
# host-backed shares so that their mtimes are host times: the victim writes
# fault-<transport>-<mode>.at when it sends the signal, the others
# fault-<transport>-<mode>.exit (with the rc) when their ringbench returned. Between steps all
# guests meet at a barrier in GUEST_SHARED.
VICTIM=$1
DELAY=$2
STEPS=$3
shift 3
RB=$GUEST_BUILD_DIR/runner/ringbench
step=0
status=0

. "$(dirname "$0")/guest-barrier.sh"  # barrier NAME

for spec in $STEPS; do
  t=${spec%%:*}
  mode=${spec#*:}
  f=fault-$t-$mode
  extra=""
  [ "$t" = verbs ] && extra="--ib-dev $GUEST_IB_DEV"
  port=$((29600 + step))
  step=$((step + 1))
  barrier "start-$t-$mode" || status=1
  serve=""
  [ "$GUEST_INDEX" = 0 ] && serve="RINGBENCH_STORE_SERVE=1"
  echo "=== fault transport=$t mode=$mode: rank $GUEST_INDEX/$GUEST_COUNT, victim rank $VICTIM after ${DELAY}s"
  # shellcheck disable=SC2086
  env $serve RINGBENCH_RANK="$GUEST_INDEX" RINGBENCH_WORLD_SIZE="$GUEST_COUNT" \
    RINGBENCH_STORE="$GUEST_NET.1:$port" RINGBENCH_JOB_ID="guests-$f" \
    "$RB" allreduce --transport "$t" $extra "$@" > "$f.out" 2>&1 &
  pid=$!
  running=$GUEST_SHARED/running-$f
  if [ "$GUEST_INDEX" = 0 ]; then
    # Rank 0 prints the table's header once every rank is set up and the timed allreduces
    # begin: that is when the fault's delay starts (on a loaded host setup alone can take
    # longer than the delay, and a fault during setup tests something else).
    (n=0
     while ! grep -q '(elements)' "$f.out" 2> /dev/null && [ $n -lt 480 ] && kill -0 "$pid" 2> /dev/null; do
       sleep 0.25; n=$((n + 1))
     done
     echo "$n" > "$running") &
  fi
  if [ "$GUEST_INDEX" = "$VICTIM" ]; then
    n=0
    while [ ! -e "$running" ] && [ $n -lt 480 ]; do sleep 0.25; n=$((n + 1)); done
    sleep "$DELAY"
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "victim: ringbench already exited before the fault; the run is too short"
      echo "early" > "$f.at"; status=1
    elif [ "$mode" = kill ]; then
      kill -KILL "$pid"; echo "kill" > "$f.at"
    else
      kill -STOP "$pid"; echo "stop" > "$f.at"
    fi
    echo "victim: sent the fault ($mode) at uptime $(cut -d' ' -f1 /proc/uptime)s"
    if [ "$mode" = stop ]; then
      # keep the process stopped until every other rank has given up, then remove it
      barrier "survivors-$t-$mode" || status=1
      kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
  else
    wait "$pid"
    rc=$?
    echo "$rc" > "$f.exit"
    echo "rank $GUEST_INDEX: ringbench exited with $rc at uptime $(cut -d' ' -f1 /proc/uptime)s"
    [ "$mode" = stop ] && { barrier "survivors-$t-$mode" || status=1; }
  fi
  cat "$f.out"
done
exit $status

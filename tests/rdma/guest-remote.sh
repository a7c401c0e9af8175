#!/bin/sh
# In-guest part of remote-in-guests.sh (busybox sh; run by guest-cluster.sh in 2 guests): guest 0
# serves its device (`ringbench device-server`, the CPU standing in), guest 1 trains LeNet on it.
# usage: guest-remote.sh STEPS BATCH
# The job's secret: 32 random bytes guest 0 writes to the shared directory (never on a command line).
# Rounds, each with a server of its own (--clients 1) on port 7071.. of guest 0:
#   tcp, verbs       the same training over each transport: train-<t>.json/.out, server-<t>.out
#   kill-client      over verbs, guest 1's client is SIGKILLed mid-training: the server must say
#                    the client vanished and serve no one else (server-kill-client.out)
#   kill-server      over verbs, guest 0's server is SIGKILLed mid-training: the client must fail
#                    naming the device server (train-kill-server.out, .rc)
#   stop-client      over verbs, the client is SIGSTOPped mid-training (its connections stay open and
#                    silent): the server, --timeout 10, must drop it, naming it: by the verbs
#                    transport's heartbeats between requests, by the request's timeout in the middle
#                    of one (server-stop-client.out); then the client is SIGKILLed
# Prints RESULT lines; exit 0 when every step of this guest went as it should.
STEPS=$1
BATCH=$2
RB=$GUEST_BUILD_DIR/runner/ringbench
SERVER=$GUEST_NET.1
status=0
now() { cut -d' ' -f1 /proc/uptime; }
. "$(dirname "$0")/guest-barrier.sh"  # barrier NAME

if [ "$GUEST_INDEX" = 0 ]; then
  (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$GUEST_SHARED/secret")
fi
barrier secret || status=1
RINGBENCH_SECRET=$(cat "$GUEST_SHARED/secret")
export RINGBENCH_SECRET

serve() {  # ROUND PORT TRANSPORT [TIMEOUT]: a device server for one client, in the background
  extra=""
  [ "$3" = verbs ] && extra="--ib-dev $GUEST_IB_DEV"
  # shellcheck disable=SC2086  # extra is a word list
  "$RB" device-server --addr "$SERVER" --port "$2" --threads 1 --clients 1 --timeout "${4:-60}" \
    --transport "$3" $extra > "server-$1.out" 2>&1 &
  SERVER_PID=$!
}
train() {  # ROUND PORT TRANSPORT STEPS [exec]: LeNet on the remote device (exec: as this process)
  ${5:+exec} "$RB" train --model lenet --batch "$BATCH" --steps "$4" --warmup 1 --threads 1 --seed 7 --log-every 1 \
    --timeout 120 --device "remote:$SERVER:$2,transport=$3" --json "train-$1.json" > "train-$1.out" 2>&1
}
training() {  # ROUND PORT: a long training over verbs in the background (its pid in pid), once it took a step
  train "$1" "$2" verbs 1000 exec &
  pid=$!
  await "grep -q ^step train-$1.out" 600
}
await() {  # TEST HALF-SECONDS: until the command TEST succeeds, at most that many half seconds
  n=0
  until $1 2>/dev/null || [ $n -gt "$2" ]; do sleep 0.5; n=$((n + 1)); done
}
result() {  # ROUND RC EXPECTED
  echo "$2" > "$GUEST_INDEX-$1.rc"
  echo "RESULT remote round=$1 guest=$GUEST_INDEX rc=$2 uptime=$(now)"
  [ "$2" = "$3" ] || status=1
}

port=7070
for round in tcp verbs; do
  port=$((port + 1))
  barrier "remote-$round" || status=1
  if [ "$GUEST_INDEX" = 0 ]; then
    serve "$round" "$port" "$round"
    wait "$SERVER_PID"
    result "$round" $? 0
  else
    train "$round" "$port" "$round" "$STEPS"
    result "$round" $? 0
  fi
done

# A client killed mid-training: the server names it and exits (its one client served).
barrier remote-kill-client || status=1
if [ "$GUEST_INDEX" = 0 ]; then
  serve kill-client 7081 verbs
  wait "$SERVER_PID"
  result kill-client $? 0
else
  training kill-client 7081
  echo "killing the client at uptime $(now)"
  kill -9 "$pid"
  wait "$pid"
  result kill-client $? 137
fi

# The server killed mid-training: the client fails, naming the device server.
barrier remote-kill-server || status=1
if [ "$GUEST_INDEX" = 0 ]; then
  serve kill-server 7082 verbs
  await "test -e $GUEST_SHARED/client-training" 1200
  echo "killing the server at uptime $(now)"
  kill -9 "$SERVER_PID"
  wait "$SERVER_PID"
  result kill-server $? 137
else
  training kill-server 7082
  touch "$GUEST_SHARED/client-training"
  wait "$pid"
  rc=$?
  echo "the client exited at uptime $(now)"
  result kill-server "$rc" 1
fi
# A client stopped mid-training: its connections stay open; only timeouts can tell.
barrier remote-stop-client || status=1
if [ "$GUEST_INDEX" = 0 ]; then
  serve stop-client 7083 verbs 10
  wait "$SERVER_PID"
  result stop-client $? 0
  echo "the server exited at uptime $(now)"
  touch "$GUEST_SHARED/server-done"
else
  training stop-client 7083
  echo "stopping the client at uptime $(now)"
  kill -STOP "$pid"
  await "test -e $GUEST_SHARED/server-done" 240
  kill -9 "$pid"
  wait "$pid"
  result stop-client $? 137
fi
exit $status

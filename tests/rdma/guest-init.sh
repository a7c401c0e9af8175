#!/bin/sh
# /init of a ringbench test guest (busybox ash; packed into the initramfs by guest-cluster.sh).
#
# Kernel command line: rb.index=I rb.count=N (this guest's index and the number of guests).
# Everything else comes from the 9p shares that guest-cluster.sh exports:
#   tag rbrun   (read-only)  /mnt/run: env (settings, sourced), cmd.sh (the command), lib/
#                            (the shared libraries of the build directory's binaries)
#   tag rbbuild (read-only)  the build directory, mounted at the same absolute path as on the
#                            host so that paths compiled into test binaries stay valid
#   tag rbout   (read-write) /mnt/out: this guest's output directory (OUT/guest<I> on the host)
#   tag rbin    (read-only)  /mnt/in: optional extra input directory (--in)
#   tag rbshared (read-write) /mnt/shared: one directory for all guests (OUT/shared on the host)
# The command's stdout+stderr go to /mnt/out/.cmd.log and its exit status to /mnt/out/.cmd.rc;
# the host renames them to OUT/guest<I>.log and OUT/guest<I>.rc. Setup failures are reported
# with status 125 and a message in the log. The guest powers itself off at the end.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH HOME=/root
busybox mount -t proc proc /proc
busybox mount -t sysfs sysfs /sys
busybox mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /tmp /run /mnt/run /mnt/out /mnt/in /mnt/shared
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp

say() { echo "guest-init: $*"; }
up() { cut -d' ' -f1 /proc/uptime; }
say "start (uptime $(up)s)"

INDEX=0
COUNT=1
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    rb.index=*) INDEX=${arg#rb.index=} ;;
    rb.count=*) COUNT=${arg#rb.count=} ;;
  esac
done

finish() { # finish RC: record the status (when there is somewhere to record it) and power off
  if [ -d /mnt/out/. ] && [ ! -e /mnt/out/.cmd.rc ]; then echo "$1" > /mnt/out/.cmd.rc; fi
  say "done rc=$1 (uptime $(up)s)"
  sync
  umount /mnt/out /mnt/shared 2>/dev/null
  poweroff -f
  sleep 5
}
fail() { # setup failure: message to the console and the log, status 125
  say "SETUP FAILED: $*"
  if [ -d /mnt/shared/. ]; then echo "$*" > "/mnt/shared/.failed-$INDEX"; fi
  if [ -d /mnt/out/. ]; then echo "guest-init: guest $INDEX setup failed: $*" >> /mnt/out/.cmd.log; fi
  finish 125
}

# ---- modules (order written by guest-cluster.sh, dependencies first) ----
while read -r ko opts; do
  [ -n "$ko" ] || continue
  # shellcheck disable=SC2086  # opts are words
  out=$(insmod "/lib/modules/$ko" $opts 2>&1) || case "$out" in
    *"File exists"*) ;;
    *) say "insmod $ko: $out" ;;
  esac
done < /etc/rb-modules

# ---- shares ----
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro rbrun /mnt/run || fail "cannot mount the run share"
. /mnt/run/env
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rbout /mnt/out || fail "cannot mount the output share"
: > /mnt/out/.cmd.log
mkdir -p "$GC_BUILD_DIR"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro,cache=loose rbbuild "$GC_BUILD_DIR" \
  || fail "cannot mount the build directory at $GC_BUILD_DIR"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rbshared /mnt/shared || fail "cannot mount /mnt/shared"
if [ "$GC_HAVE_IN" = 1 ]; then
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro rbin /mnt/in || fail "cannot mount /mnt/in"
fi

# ---- network: one L2 segment, GC_NET.(index+1)/24 ----
ADDR=$GC_NET.$((INDEX + 1))
ip link set lo up
n=0
while [ ! -e /sys/class/net/eth0 ]; do
  n=$((n + 1)); [ $n -gt 100 ] && fail "no eth0"; sleep 0.1
done
ip addr add "$ADDR/24" dev eth0 || fail "ip addr add $ADDR/24"
ip link set eth0 up || fail "ip link set eth0 up"

# ---- Soft-RoCE: rxe0 on eth0, wait for its RoCE v2 IPv4 GID ----
out=$(rdma link add rxe0 type rxe netdev eth0 2>&1) || fail "rdma link add rxe0 type rxe netdev eth0: $out"
GID_INDEX=""
n=0
while [ -z "$GID_INDEX" ]; do
  for t in /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/*; do
    i=${t##*/}
    [ "$(cat "$t" 2>/dev/null)" = "RoCE v2" ] || continue
    case "$(cat /sys/class/infiniband/rxe0/ports/1/gids/"$i" 2>/dev/null)" in
      0000:0000:0000:0000:0000:ffff:*) GID_INDEX=$i; break ;;
    esac
  done
  [ -n "$GID_INDEX" ] && break
  n=$((n + 1)); [ $n -gt 200 ] && fail "rxe0 has no RoCE v2 IPv4 GID after 20 s"
  sleep 0.1
done
state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
say "rxe0 ready: $ADDR/24 on eth0, port state '$state', RoCE v2 GID index $GID_INDEX"

# ---- barrier: every guest has its network and rxe0 up (markers in the shared directory; a
# guest that is done and powered off already still counts, which a ping would not see) ----
echo "$ADDR" > "/mnt/shared/.ready-$INDEX"
n=0
while :; do
  set -- /mnt/shared/.ready-*
  ready=0; [ -e "$1" ] && ready=$#
  [ "$ready" -ge "$COUNT" ] && break
  set -- /mnt/shared/.failed-*
  [ -e "$1" ] && fail "guest ${1##*/.failed-} failed its setup: $(cat "$1")"
  n=$((n + 1)); [ $n -gt $((GC_PEER_WAIT * 4)) ] && fail "only $ready of $COUNT guests ready after ${GC_PEER_WAIT}s"
  sleep 0.25
done
say "all $COUNT guests ready (uptime $(up)s); running the command"

# ---- the command ----
export GUEST_INDEX=$INDEX GUEST_COUNT=$COUNT GUEST_ADDR=$ADDR GUEST_NET=$GC_NET
export GUEST_OUT=/mnt/out GUEST_IN=/mnt/in GUEST_SHARED=/mnt/shared GUEST_BUILD_DIR=$GC_BUILD_DIR GUEST_GID_INDEX=$GID_INDEX
export GUEST_IB_DEV=rxe0 LD_LIBRARY_PATH=/mnt/run/lib
cd /mnt/out || fail "cd /mnt/out"
sh /mnt/run/cmd.sh >> /mnt/out/.cmd.log 2>&1 < /dev/null
rc=$?
echo "$rc" > /mnt/out/.cmd.rc
finish "$rc"

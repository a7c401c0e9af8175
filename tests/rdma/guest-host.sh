#!/bin/sh
# In-guest part of `guest-cluster.sh up` (busybox sh, run as root by guest-init.sh in every
# guest): turns the guest into a cluster host as a user's would be, then waits until the
# cluster is taken down.
#   - hostname g<i>, and g0..g<N-1> in /etc/hosts
#   - the host's /usr read-only at /usr (9p tag rbusr): ringbench's and Open MPI's libraries,
#     mpirun/orted, ssh and dropbear at the paths they have on the host; the host's
#     /etc/alternatives, /etc/openmpi and /etc/ld.so.cache, so those paths resolve as there
#   - the results directory read-write at its host path (9p tag rbresults), when there is one
#   - user `ringbench` (uid 4242, shell /bin/sh, home on tmpfs) with this run's client key,
#     known_hosts and ssh config; memlock unlimited, as RDMA needs
#   - dropbear on port 22 with this guest's host key, public-key logins only, no root login
#   - ~ringbench/guest.env (mode 600): GUEST_INDEX, GUEST_COUNT ... and the job's secret
# Exits 0 when /mnt/shared/.down appears (the guest then powers off).
set -u
say() { echo "guest-host: $*"; }
fail() { say "FAILED: $*"; echo "$*" > "$GUEST_SHARED/.host-failed-$GUEST_INDEX"; exit 1; }
RUN=/mnt/run
. "$RUN/env"  # GC_RESULTS_DIR
NAME=g$GUEST_INDEX

chmod 755 /  # the initramfs's root comes as 0700 (mktemp -d): users could not reach anything
hostname "$NAME"
i=0
while [ $i -lt "$GUEST_COUNT" ]; do
  echo "$GUEST_NET.$((i + 1)) g$i" >> /etc/hosts
  i=$((i + 1))
done

# The build directory without cache=loose (guest-init.sh's choice for one-shot runs): a cluster
# stays up while the tree is rebuilt, and must not run stale binaries.
umount "$GC_BUILD_DIR" && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro rbbuild "$GC_BUILD_DIR" \
  || fail "cannot remount the build directory at $GC_BUILD_DIR"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro,cache=loose rbusr /usr || fail "cannot mount the host's /usr"
# the initramfs's own copies of a few libraries give way to the host's, as on the host
rm -rf /lib/x86_64-linux-gnu
ln -s /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu
for d in alternatives openmpi; do
  [ -d "$RUN/etc/$d" ] && cp -a "$RUN/etc/$d" /etc/
done
cp "$RUN/etc/ld.so.cache" /etc/ld.so.cache 2>/dev/null
echo /bin/sh > /etc/shells
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n' > /etc/nsswitch.conf
if [ -n "${GC_RESULTS_DIR:-}" ]; then
  mkdir -p "$GC_RESULTS_DIR"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rbresults "$GC_RESULTS_DIR" \
    || fail "cannot mount the results directory at $GC_RESULTS_DIR"
fi

echo 'ringbench:x:4242:4242:ringbench:/home/ringbench:/bin/sh' >> /etc/passwd
echo 'ringbench:x:4242:' >> /etc/group
echo 'ringbench:*:19000:0:99999:7:::' > /etc/shadow
H=/home/ringbench
mkdir -p "$H/.ssh"
cp "$RUN/ssh/id_ed25519" "$RUN/ssh/id_ed25519.pub" "$RUN/ssh/known_hosts" "$H/.ssh/"
cp "$RUN/ssh/guest_config" "$H/.ssh/config"
cp "$RUN/ssh/id_ed25519.pub" "$H/.ssh/authorized_keys"
# What a scenario run over ssh reads first (guest-scenario.sh's on_guests): this guest's place
# in the cluster, as guest-init.sh gives it to a one-shot command, and the cluster's job secret
# for ranks started by hand (the env launcher; dropbear's sessions start from a clean
# environment).
{
  echo "export GUEST_INDEX=$GUEST_INDEX GUEST_COUNT=$GUEST_COUNT GUEST_ADDR=$GUEST_ADDR GUEST_NET=$GUEST_NET"
  echo "export GUEST_IB_DEV=$GUEST_IB_DEV GUEST_GID_INDEX=$GUEST_GID_INDEX GUEST_BUILD_DIR=$GUEST_BUILD_DIR"
  echo "export GUEST_IN=$GUEST_IN RINGBENCH_SECRET=$RINGBENCH_SECRET"
} > "$H/guest.env"
chown -R 4242:4242 "$H"
chmod 700 "$H" "$H/.ssh"
chmod 600 "$H/.ssh/"* "$H/guest.env"

mkdir -p /etc/dropbear
cp "$RUN/ssh/hostkey-$NAME" /etc/dropbear/hostkey
chmod 600 /etc/dropbear/hostkey
ulimit -l unlimited  # the sessions inherit it: registering memory pins it
# -s: no password logins, -w: no root logins, -F -E: in the foreground, log to stderr
/usr/sbin/dropbear -r /etc/dropbear/hostkey -p 22 -s -w -F -E > "$GUEST_OUT/dropbear.log" 2>&1 &
say "$NAME ($GUEST_ADDR) serving ssh; rxe0 GID index $GUEST_GID_INDEX"
echo "$GUEST_ADDR" > "$GUEST_SHARED/.host-up-$GUEST_INDEX"

while [ ! -e "$GUEST_SHARED/.down" ]; do sleep 1; done
say "$NAME going down"
exit 0

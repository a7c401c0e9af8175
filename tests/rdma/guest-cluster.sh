#!/bin/bash
# guest-cluster.sh: boot N qemu guests running Debian's own kernel on one private L2 segment,
# each with a Soft-RoCE device (rxe0 on eth0), run a command in every guest, collect the results.
# See tests/rdma/README.md. Exit status: 0 all guests' commands succeeded, 1 some failed or timed
# out, 2 usage error, 77 this machine cannot run guests (not root, no qemu and no apt-get, no tun,
# no network namespaces, kernel package unavailable), 130 interrupted.
set -euo pipefail

usage() {
  cat << 'EOF'
usage: guest-cluster.sh --guests N --build-dir DIR --out DIR [options] -- COMMAND [ARG...]
       guest-cluster.sh up|down|ssh|status ...   (a cluster of ssh hosts: see guest-hosts.sh --help)

Boots N guests (qemu TCG, 1 vCPU each) on one virtual L2 segment inside a private network
namespace, with Soft-RoCE (rxe0 on eth0) ready, and runs COMMAND (with busybox sh, ARGs quoted
as given) in every guest. In the guest:
  GUEST_INDEX=i  GUEST_COUNT=N  GUEST_ADDR=10.77.0.(i+1)  GUEST_NET=10.77.0
  GUEST_IB_DEV=rxe0  GUEST_GID_INDEX=<RoCE v2 IPv4 GID index of rxe0>
  GUEST_BUILD_DIR=<DIR, mounted read-only at the same absolute path as on the host>
  GUEST_OUT=/mnt/out (read-write, the current directory; OUT/guest<i>/ on the host)
  GUEST_IN=/mnt/in   (read-only, --in DIR)
  GUEST_SHARED=/mnt/shared (read-write, one directory for all guests: OUT/shared/; e.g. barriers)
  LD_LIBRARY_PATH with the shared libraries of the ELF executables in DIR (and of --lib-for)
Results: OUT/guest<i>.log (the command's stdout+stderr), OUT/guest<i>.rc (its exit status;
124 when the guest did not finish in time, 125 when the guest's setup failed),
OUT/guest<i>.console (the guest's serial console), OUT/guest<i>/ (files the command wrote),
OUT/cluster.txt (a summary).

Options:
  --guests N        number of guests, 1..4 (GUEST_CLUSTER_MAX_GUESTS raises the limit)
  --build-dir DIR   build directory to export (read-only)
  --out DIR         output directory (created; old guest* results in it are removed)
  --timeout S       wall-clock limit for the whole run, boot included (default 600); guests
                    still running then are killed and count as failed (rc 124)
  --in DIR          extra read-only directory, mounted at /mnt/in
  --lib-for FILE    also ship the shared libraries of this host executable (repeatable)
  --mem SIZE        guest RAM (default 512M)
  --cache-dir DIR   where the kernel and the initramfs are cached (default
                    $XDG_CACHE_HOME/ringbench-guests if XDG_CACHE_HOME is set, else
                    /var/cache/ringbench-guests)
  --no-install      do not apt-get install missing host packages (skip with 77 instead)
  --prepare-only    fetch the kernel and build the initramfs, boot nothing
  --hosts           the guests get the host's /usr (read-only), ssh keys made for this run
                    (OUT/ssh) and the address 10.77.0.254 on the namespace's bridge: what
                    guest-hosts.sh builds its cluster of ssh hosts on
  --results DIR     (with --hosts) DIR read-write in every guest at the same path
  -h, --help        this help
Environment: GUEST_CLUSTER_KERNEL_PKG=linux-image-X-amd64 overrides the kernel package (default:
what linux-image-amd64 depends on); GUEST_CLUSTER_CPU the guests' qemu CPU model (default
max,avx=off,avx2=off: TCG runs SSE code far faster than its emulated AVX2).
EOF
}

die() { echo "guest-cluster: $*" >&2; exit 2; }
skip() { echo "guest-cluster: SKIP: $*" >&2; exit 77; }
log() { echo "guest-cluster: [$(date -u +%H:%M:%S)] $*" >&2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# A cluster that stays up, as ssh hosts g0..g<N-1>: guest-hosts.sh
case "${1:-}" in up | down | ssh | status) exec "$HERE/guest-hosts.sh" "$@" ;; esac
GUESTS=""; BUILD_DIR=""; OUT=""; TIMEOUT=600; IN_DIR=""; MEM=512M; INSTALL=1; PREPARE_ONLY=0
HOSTS=0; RESULTS_DIR=""
LIB_FOR=()
if [ -n "${XDG_CACHE_HOME:-}" ]; then CACHE=$XDG_CACHE_HOME/ringbench-guests; else CACHE=/var/cache/ringbench-guests; fi
MAX_GUESTS=${GUEST_CLUSTER_MAX_GUESTS:-4}
NET_PREFIX=10.77.0

while [ $# -gt 0 ]; do
  case "$1" in
    --guests) GUESTS=${2:?}; shift 2 ;;
    --build-dir) BUILD_DIR=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    --in) IN_DIR=${2:?}; shift 2 ;;
    --lib-for) LIB_FOR+=("${2:?}"); shift 2 ;;
    --mem) MEM=${2:?}; shift 2 ;;
    --cache-dir) CACHE=${2:?}; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --prepare-only) PREPARE_ONLY=1; shift ;;
    --hosts) HOSTS=1; shift ;;
    --results) RESULTS_DIR=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
CMD=("$@")
if [ "$PREPARE_ONLY" = 0 ]; then
  [ -n "$GUESTS" ] && [ -n "$BUILD_DIR" ] && [ -n "$OUT" ] && [ ${#CMD[@]} -gt 0 ] \
    || { usage >&2; die "--guests, --build-dir, --out and a COMMAND are required"; }
  [[ "$GUESTS" =~ ^[0-9]+$ ]] && [ "$GUESTS" -ge 1 ] && [ "$GUESTS" -le "$MAX_GUESTS" ] \
    || die "--guests must be 1..$MAX_GUESTS (got '$GUESTS')"
  [[ "$TIMEOUT" =~ ^[0-9]+$ ]] && [ "$TIMEOUT" -ge 1 ] || die "--timeout must be whole seconds >= 1"
  [ -d "$BUILD_DIR" ] || die "--build-dir $BUILD_DIR is not a directory"
  BUILD_DIR=$(cd "$BUILD_DIR" && pwd -P)
  [[ "$BUILD_DIR" =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "--build-dir path must not contain spaces or special characters"
  if [ -n "$IN_DIR" ]; then [ -d "$IN_DIR" ] || die "--in $IN_DIR is not a directory"; IN_DIR=$(cd "$IN_DIR" && pwd -P); fi
  for f in "${LIB_FOR[@]}"; do [ -x "$f" ] || die "--lib-for $f is not an executable"; done
  if [ -n "$RESULTS_DIR" ]; then
    [ "$HOSTS" = 1 ] || die "--results needs --hosts"
    [ -d "$RESULTS_DIR" ] || die "--results $RESULTS_DIR is not a directory"
    RESULTS_DIR=$(cd "$RESULTS_DIR" && pwd -P)
    [[ "$RESULTS_DIR" =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "--results path must not contain spaces or special characters"
  fi
fi

# ---------------------------------------------------------------- host requirements
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, tap devices)"
[ -e /dev/net/tun ] || skip "no /dev/net/tun"
# host command -> Debian package that provides it
declare -A NEED=(
  [qemu-system-x86_64]=qemu-system-x86 [busybox]=busybox-static [ibv_devinfo]=ibverbs-utils
  [ib_write_bw]=perftest [rdma]=iproute2 [ip]=iproute2 [cpio]=cpio [depmod]=kmod [xz]=xz-utils
  [zstd]=zstd [readelf]=binutils [flock]=util-linux [apt-get]=apt)
# --hosts: the guests serve ssh with the host's dropbear and launch with the host's Open MPI
[ "$HOSTS" = 1 ] && NEED+=([dropbear]=dropbear-bin [dropbearkey]=dropbear-bin [ssh]=openssh-client
  [ssh-keygen]=openssh-client [mpirun]=openmpi-bin)
missing_pkgs() {
  local c
  for c in "${!NEED[@]}"; do command -v "$c" > /dev/null 2>&1 || echo "${NEED[$c]}"; done
  [ -e /etc/libibverbs.d/rxe.driver ] && compgen -G '/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so' > /dev/null \
    || echo ibverbs-providers
  [ -e /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -x insmod > /dev/null && ! ldd /bin/busybox > /dev/null 2>&1 \
    || echo busybox-static
}
PKGS=$(missing_pkgs | sort -u | tr '\n' ' ')
if [ -n "${PKGS// /}" ]; then
  [ "$INSTALL" = 1 ] && command -v apt-get > /dev/null || skip "missing packages: $PKGS(--no-install or no apt-get)"
  log "installing $PKGS"
  # shellcheck disable=SC2086
  { apt-get install -y -qq --no-install-recommends $PKGS > /dev/null 2>&1 \
    || { apt-get update -qq > /dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS > /dev/null 2>&1; }; } \
    || skip "apt-get install $PKGS failed"
  PKGS=$(missing_pkgs | sort -u | tr '\n' ' ')
  [ -z "${PKGS// /}" ] || skip "still missing after apt-get: $PKGS"
fi

# ---------------------------------------------------------------- cache: kernel + initramfs
mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"
flock 9   # one preparer at a time; released once the image is ready (see below)

KPKG=${GUEST_CLUSTER_KERNEL_PKG:-}
# No AVX: TCG emulates AVX2 slowly, and oneDNN and glibc take their SSE code without it (a guest
# trains LeNet 4.5x faster: 0.4 -> 1.8 img/s; allreduce speed is unchanged).
CPU=${GUEST_CLUSTER_CPU:-max,avx=off,avx2=off}
if [ -z "$KPKG" ]; then
  KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}' || true)
  if [ -z "$KPKG" ]; then
    apt-get update -qq > /dev/null 2>&1 || true
    KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}' || true)
  fi
  [ -n "$KPKG" ] || skip "cannot tell which kernel linux-image-amd64 depends on (apt-cache depends)"
fi
KVER=${KPKG#linux-image-}
KDIR=$CACHE/kernel-$KVER
# what goes into the guests: user-space tools (with their libraries) and the top modules
TOOLS=(ibv_devices ibv_devinfo ib_write_bw ib_write_lat ib_send_bw ib_read_bw rdma)
MODULES=(crc32_generic crc32-pclmul rdma_rxe ib_uverbs rdma_ucm virtio_pci virtio_net 9pnet_virtio 9p)
if [ "$(cat "$KDIR/ready" 2>/dev/null)" != "$KPKG ${MODULES[*]}" ]; then
  log "fetching $KPKG (first run; cached in $KDIR)"
  rm -rf "$KDIR"; mkdir -p "$KDIR/deb"
  (cd "$KDIR/deb" && apt-get download "$KPKG" > "$KDIR/download.log" 2>&1) \
    || { apt-get update -qq > /dev/null 2>&1; (cd "$KDIR/deb" && apt-get download "$KPKG" >> "$KDIR/download.log" 2>&1); } \
    || { rm -rf "$KDIR"; skip "apt-get download $KPKG failed"; }
  deb=$(ls "$KDIR"/deb/*.deb)
  dpkg -x "$deb" "$KDIR/root"
  depmod -b "$KDIR/root" "$KVER"
  grep -q '^CONFIG_RDMA_RXE=m' "$KDIR/root/boot/config-$KVER" || { rm -rf "$KDIR"; skip "$KPKG has no CONFIG_RDMA_RXE=m"; }
  # The uncompressed ELF vmlinux boots through its PVH note: qemu skips the real-mode setup
  # and the guest skips decompressing itself, seconds per boot under TCG. Find the compressed
  # payload inside the bzImage by its magic and keep the first stream that yields an ELF file.
  bz=$KDIR/root/boot/vmlinuz-$KVER
  for fmt in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
    tool=${fmt%%:*}
    for off in $(LC_ALL=C grep -obUaP "${fmt#*:}" "$bz" | cut -d: -f1); do
      case $tool in
        xz) tail -c +$((off + 1)) "$bz" | xz -dc --single-stream > "$KDIR/vmlinux" 2>/dev/null || true ;;
        zstd) tail -c +$((off + 1)) "$bz" | zstd -qdc > "$KDIR/vmlinux" 2>/dev/null || true ;;
        gzip) tail -c +$((off + 1)) "$bz" | gzip -dc > "$KDIR/vmlinux" 2>/dev/null || true ;;
      esac
      if readelf -n "$KDIR/vmlinux" 2>/dev/null | grep -q 'Xen'; then break 2; fi
      rm -f "$KDIR/vmlinux"
    done
  done
  if [ -s "$KDIR/vmlinux" ]; then echo "$KDIR/vmlinux" > "$KDIR/boot"; else echo "$bz" > "$KDIR/boot"; fi
  # keep only the modules the guests load (and their dependencies): ~15 MB instead of ~400 MB
  for m in "${MODULES[@]}"; do
    modprobe -d "$KDIR/root" -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | sort -u > "$KDIR/keep"
  find "$KDIR/root/lib/modules/$KVER/kernel" -type f -name '*.ko*' | sort | comm -23 - "$KDIR/keep" | xargs -r rm -f
  rm -rf "$KDIR/root/usr" "$KDIR/root/lib/firmware" "$KDIR/deb"
  [ -s "$KDIR/vmlinux" ] && rm -f "$bz"
  depmod -b "$KDIR/root" "$KVER"
  echo "$KPKG ${MODULES[*]}" > "$KDIR/ready"
fi
BOOT_KERNEL=$(cat "$KDIR/boot")

# The initramfs: busybox, rdma-core user space (rxe provider, ibv_devinfo, perftest, rdma) with
# their shared libraries and the loader, the kernel modules (decompressed, in load order), and
# guest-init.sh as /init. Its name is a hash of everything it is made of.
key=$( { echo "v1 $KVER ${MODULES[*]} ${TOOLS[*]}"; cat "$HERE/guest-init.sh";
        dpkg-query -W -f='${Package} ${Version}\n' busybox-static ibverbs-providers ibverbs-utils \
          perftest iproute2 libc6 libibverbs1 2>/dev/null; } | sha256sum | cut -c1-16)
INITRD=$CACHE/initramfs-$key.cpio.gz
if [ ! -s "$INITRD" ]; then
  log "building the initramfs ($INITRD)"
  stage=$(mktemp -d "$CACHE/stage.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,root,mnt,lib/modules}
  cp /bin/busybox "$stage/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$stage/bin/$a" ] || ln -s busybox "$stage/bin/$a"; done
  put() { # put FILE: copy a host file (symlinks resolved) to the same path in the image
    [ -e "$stage$1" ] && return 0
    mkdir -p "$stage$(dirname "$1")"; cp -L "$1" "$stage$1"
  }
  put_elf() { # put_elf FILE: the file, the libraries ldd resolves for it, and its loader
    local lib
    put "$1"
    for lib in $(ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do put "$lib"; done
  }
  for t in "${TOOLS[@]}"; do put_elf "$(command -v "$t")"; done
  for p in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do put_elf "$p"; done
  put /etc/libibverbs.d/rxe.driver
  put /lib64/ld-linux-x86-64.so.2
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$stage/etc/passwd"
  printf 'root:x:0:\n' > "$stage/etc/group"
  printf '127.0.0.1 localhost\n' > "$stage/etc/hosts"
  for i in $(seq 1 16); do printf '%s.%d guest%d\n' "$NET_PREFIX" "$i" $((i - 1)) >> "$stage/etc/hosts"; done
  printf 'hosts: files\n' > "$stage/etc/nsswitch.conf"
  # modules: dependencies first (modprobe --show-depends on the extracted tree), decompressed,
  # virtio_net with napi_tx=0 (with napi_tx=1, 4 guests under rxe load stalled and crashed)
  : > "$stage/etc/rb-modules"
  for m in "${MODULES[@]}"; do
    modprobe -d "$KDIR/root" -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r ko; do
    rel=${ko#"$KDIR/root/lib/modules/"}
    mkdir -p "$stage/lib/modules/$(dirname "$rel")"
    case "$ko" in
      *.xz) rel=${rel%.xz}; xz -dc "$ko" > "$stage/lib/modules/$rel" ;;
      *.zst) rel=${rel%.zst}; zstd -qdc "$ko" > "$stage/lib/modules/$rel" ;;
      *) cp "$ko" "$stage/lib/modules/$rel" ;;
    esac
    opts=""; [ "$(basename "$rel")" = virtio_net.ko ] && opts="napi_tx=0"
    echo "$rel $opts" >> "$stage/etc/rb-modules"
  done
  grep -q rdma_rxe.ko "$stage/etc/rb-modules" || { echo "guest-cluster: rdma_rxe not found in $KPKG" >&2; exit 1; }
  install -m 0755 "$HERE/guest-init.sh" "$stage/init"
  (cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
  rm -rf "$stage"; trap - EXIT
  # older images of this cache are dead weight
  for old in "$CACHE"/initramfs-*.cpio.gz; do [ "$old" = "$INITRD" ] || rm -f "$old"; done
  log "initramfs ready: $(du -h "$INITRD" | cut -f1)"
fi
flock -u 9
if [ "$PREPARE_ONLY" = 1 ]; then log "prepared: kernel $BOOT_KERNEL, initramfs $INITRD"; exit 0; fi

# ---------------------------------------------------------------- leftovers of dead runs
# Our namespaces are rdmaguests<pid of the guest-cluster.sh that made them>. One whose owner is
# gone: kill what still runs in it (qemu), then delete it (its bridge and taps go with it).
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rdmaguests[0-9]+$' || true); do
  owner=${ns#rdmaguests}
  if ! kill -0 "$owner" 2>/dev/null || ! grep -q guest-cluster "/proc/$owner/cmdline" 2>/dev/null; then
    log "removing leftover namespace $ns of a dead run"
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  fi
done
for d in "${TMPDIR:-/tmp}"/rdmaguests[0-9]*.??????; do   # run shares (libraries, command)
  [ -d "$d" ] || continue
  owner=${d##*/rdmaguests}; owner=${owner%%.*}
  kill -0 "$owner" 2>/dev/null && grep -q guest-cluster "/proc/$owner/cmdline" 2>/dev/null || rm -rf "$d"
done

# ---------------------------------------------------------------- --hosts: ssh and /etc
# Keys made for this run only: one client key (the user `ringbench` on every guest, and the
# host's side of `guest-cluster.sh ssh`), one host key per guest, and known_hosts listing them,
# so that every ssh is checked strictly and no password exists anywhere. OUT/ssh keeps the
# host's copies; the guests get theirs through the read-only run share.
make_host_material() {
  local i pub ssh=$OUT/ssh
  rm -rf "$ssh"; mkdir -m 700 "$ssh"
  ssh-keygen -q -t ed25519 -N '' -C "ringbench-guests-$$" -f "$ssh/id_ed25519"
  : > "$ssh/known_hosts"
  printf 'Host g*\n  User ringbench\n  IdentityFile ~/.ssh/id_ed25519\n  UserKnownHostsFile ~/.ssh/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 20\n' > "$ssh/guest_config"
  : > "$ssh/config"
  for ((i = 0; i < GUESTS; i++)); do
    dropbearkey -t ed25519 -f "$ssh/hostkey-g$i" > /dev/null 2>&1 || { echo "guest-cluster: dropbearkey failed" >&2; exit 1; }
    pub=$(dropbearkey -y -f "$ssh/hostkey-g$i" | awk '$1 == "ssh-ed25519" {print $1, $2}')
    echo "g$i,$NET_PREFIX.$((i + 1)) $pub" >> "$ssh/known_hosts"
    printf 'Host g%d\n  HostName %s.%d\n' "$i" "$NET_PREFIX" $((i + 1)) >> "$ssh/config"
  done
  printf 'Host g*\n  User ringbench\n  IdentityFile %s/id_ed25519\n  UserKnownHostsFile %s/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 20\n  LogLevel ERROR\n' "$ssh" "$ssh" >> "$ssh/config"
  chmod 600 "$ssh"/*
  mkdir -p "$RUN/ssh" "$RUN/etc"
  cp "$ssh"/id_ed25519 "$ssh"/id_ed25519.pub "$ssh"/known_hosts "$ssh"/guest_config "$ssh"/hostkey-g* "$RUN/ssh/"
  # what makes the host's /usr resolve in the guests as on the host
  cp -a /etc/alternatives "$RUN/etc/"
  [ -d /etc/openmpi ] && cp -a /etc/openmpi "$RUN/etc/"
  cp /etc/ld.so.cache "$RUN/etc/"
}

# ---------------------------------------------------------------- run
NS=rdmaguests$$
RUN=""
QPIDS=()
cleanup() {
  local p
  for p in "${QPIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  if [ ${#QPIDS[@]} -gt 0 ]; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      local alive=0
      for p in "${QPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break
      sleep 0.2
    done
    for p in "${QPIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  fi
  if ip netns list 2>/dev/null | grep -qw "$NS"; then
    for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true
  fi
  [ -n "$RUN" ] && rm -rf "$RUN"
  QPIDS=()
}
trap cleanup EXIT
trap 'log "interrupted"; cleanup; exit 130' INT TERM HUP

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
rm -rf "$OUT"/guest[0-9]* "$OUT/cluster.txt" "$OUT/shared" "$OUT/netns"
mkdir -p "$OUT/shared"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/rdmaguests$$.XXXXXX")
mkdir -p "$RUN/lib"

# The shared libraries of every ELF executable in the build directory (and --lib-for), by
# ldd on the host, hard-linked (or copied) into the run share, which is LD_LIBRARY_PATH in the
# guests; the loader and libc come along, so they match the host's build exactly.
t0=$(date +%s.%N)
mapfile -t elves < <(find "$BUILD_DIR" -path '*/CMakeFiles' -prune -o -type f -perm -u+x -size +1k -print \
  | while read -r f; do [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$f"; done)
elves+=("${LIB_FOR[@]}")
for f in "${elves[@]}"; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3} $1 ~ /^\// {n = split($1, a, "/"); print a[n], $1}'
done | sort -u | while read -r name path; do
  [ -e "$RUN/lib/$name" ] && continue
  real=$(readlink -f "$path")
  ln "$real" "$RUN/lib/$name" 2>/dev/null || cp "$real" "$RUN/lib/$name"
done
log "shipping $(ls "$RUN/lib" | wc -l) shared libraries ($(du -shL "$RUN/lib" | cut -f1)) for ${#elves[@]} executables ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s)"

{ # the command, each word single-quoted for busybox sh
  printf '# written by guest-cluster.sh\nexec'
  for w in "${CMD[@]}"; do printf " '%s'" "${w//\'/\'\\\'\'}"; done
  printf '\n'
} > "$RUN/cmd.sh"
cat > "$RUN/env" << EOF
GC_BUILD_DIR=$BUILD_DIR
GC_NET=$NET_PREFIX
GC_HAVE_IN=$([ -n "$IN_DIR" ] && echo 1 || echo 0)
GC_PEER_WAIT=120
# The cluster's job secret, as an admin would hand it to every host: ranks started by hand
# off loopback refuse to run without one.
export RINGBENCH_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
EOF
[ -n "$RESULTS_DIR" ] && echo "GC_RESULTS_DIR=$RESULTS_DIR" >> "$RUN/env"
chmod 600 "$RUN/env"
[ "$HOSTS" = 1 ] && make_host_material

# network: a bridge and one tap per guest, all inside our own namespace (nothing on the host)
ip netns add "$NS" || skip "cannot create a network namespace"
ip -n "$NS" link set lo up
ip -n "$NS" link add br0 type bridge
ip -n "$NS" link set br0 type bridge forward_delay 0 stp_state 0 2>/dev/null || true
ip -n "$NS" link set br0 up
if [ "$HOSTS" = 1 ]; then  # the host's side of `guest-cluster.sh ssh`, inside the namespace only
  ip -n "$NS" addr add "$NET_PREFIX.254/24" dev br0
  echo "$NS" > "$OUT/netns"
fi
for ((i = 0; i < GUESTS; i++)); do
  ip -n "$NS" tuntap add "tap$i" mode tap
  ip -n "$NS" link set "tap$i" master br0 up
done

START=$(date +%s)
DEADLINE=$((START + TIMEOUT))
# mitigations=off: the guest kernels' Spectre mitigations (retpolines, swapgs barriers) only
# cost emulated instructions here: ring-in-guests.sh 161 -> 148 s on this 2-core machine.
for ((i = 0; i < GUESTS; i++)); do
  mkdir -p "$OUT/guest$i"
  args=(-accel "tcg,thread=multi" -cpu "$CPU" -smp 1 -m "$MEM" -nodefaults -no-user-config -display none
    -no-reboot -serial "file:$OUT/guest$i.console" -monitor none
    -kernel "$BOOT_KERNEL" -initrd "$INITRD"
    -append "console=ttyS0 quiet panic=-1 mitigations=off rb.index=$i rb.count=$GUESTS"
    -netdev "tap,id=n0,ifname=tap$i,script=no,downscript=no"
    -device "virtio-net-pci,netdev=n0,mac=$(printf '52:54:00:77:00:%02x' $((i + 1))),romfile="
    -virtfs "local,path=$RUN,mount_tag=rbrun,security_model=none,readonly=on,id=rbrun"
    -virtfs "local,path=$BUILD_DIR,mount_tag=rbbuild,security_model=none,readonly=on,id=rbbuild"
    -virtfs "local,path=$OUT/guest$i,mount_tag=rbout,security_model=none,id=rbout"
    -virtfs "local,path=$OUT/shared,mount_tag=rbshared,security_model=none,id=rbshared")
  [ -n "$IN_DIR" ] && args+=(-virtfs "local,path=$IN_DIR,mount_tag=rbin,security_model=none,readonly=on,id=rbin")
  [ "$HOSTS" = 1 ] && args+=(-virtfs "local,path=/usr,mount_tag=rbusr,security_model=none,readonly=on,id=rbusr")
  [ -n "$RESULTS_DIR" ] && args+=(-virtfs "local,path=$RESULTS_DIR,mount_tag=rbresults,security_model=none,id=rbresults")
  echo "ip netns exec $NS qemu-system-x86_64 ${args[*]}" > "$OUT/guest$i.cmdline"
  ip netns exec "$NS" qemu-system-x86_64 "${args[@]}" < /dev/null > "$OUT/guest$i.qemu.log" 2>&1 &
  QPIDS+=($!)
done
log "booted $GUESTS guests (netns $NS, ${MEM} each, kernel $KVER); waiting up to ${TIMEOUT}s"

ENDED=()
while :; do
  running=0
  for ((i = 0; i < GUESTS; i++)); do
    if [ -z "${ENDED[$i]:-}" ]; then
      if kill -0 "${QPIDS[$i]}" 2>/dev/null; then running=$((running + 1)); else ENDED[$i]=$(($(date +%s) - START)); fi
    fi
  done
  [ $running = 0 ] && break
  if [ "$(date +%s)" -ge "$DEADLINE" ]; then
    log "timeout: $running guest(s) still running after ${TIMEOUT}s; killing them"
    break
  fi
  sleep 0.5
done
cleanup
trap - EXIT INT TERM HUP

status=0
{
  echo "guest-cluster: $GUESTS guests, kernel $KVER, command: ${CMD[*]}"
  for ((i = 0; i < GUESTS; i++)); do
    mv -f "$OUT/guest$i/.cmd.log" "$OUT/guest$i.log" 2>/dev/null || : > "$OUT/guest$i.log"
    if [ -s "$OUT/guest$i/.cmd.rc" ]; then
      rc=$(tr -dc '0-9' < "$OUT/guest$i/.cmd.rc")
    else
      rc=124; echo "guest-cluster: guest $i did not finish within ${TIMEOUT}s (killed)" >> "$OUT/guest$i.log"
    fi
    rm -f "$OUT/guest$i/.cmd.rc"
    echo "$rc" > "$OUT/guest$i.rc"
    [ "$rc" = 0 ] || status=1
    panic=$(tr -d '\r' < "$OUT/guest$i.console" | grep -m1 -E 'Kernel panic|BUG:|Oops|NETDEV WATCHDOG' || true)
    if [ -n "${ENDED[$i]:-}" ]; then when="powered off after ${ENDED[$i]}s"; else when="killed at the ${TIMEOUT}s limit"; fi
    echo "guest $i: rc=$rc, $when${panic:+, console: $panic}"
  done
  echo "wall: $(($(date +%s) - START))s"
} > "$OUT/cluster.txt"
cat "$OUT/cluster.txt" >&2
exit $status

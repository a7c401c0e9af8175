#!/usr/bin/env bash
# The .deb in a clean root: builds the package of a build tree (scripts/package.sh), installs it
# with apt into a fresh Debian 12 minbase root (debootstrap; no compiler, no ringbench build
# dependencies), and runs from there, chrooted: `ringbench --version`, `ringbench doctor`, and a
# tiny local sweep (LeNet on 1 and 2 ranks over TCP, an allreduce of 4-16 KiB) whose run
# directory must hold an ok point of each kind and a report. From a tree built with CUDA
# (ringbench-cuda), the postinst must first name the CUDA libraries missing from the root, and
# then the toolkit's libraries are bound in, standing in for NVIDIA's packages.
#   tests/package/clean-root.sh --build-dir DIR --out DIR
# Root only; skipped (77) without root, or where debootstrap cannot reach a Debian mirror. The
# minbase root is cached as a tarball and apt's downloads beside it (RINGBENCH_ROOT_CACHE,
# default /var/cache/ringbench): the first run downloads about 150 MB and takes minutes, later
# runs a minute or so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root_dir=$(cd "$here/../.." && pwd)
build="" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "clean-root.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] && [ -n "$out" ] || { echo "usage: clean-root.sh --build-dir DIR --out DIR" >&2; exit 2; }
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (debootstrap and chroot need root)"
cache=${RINGBENCH_ROOT_CACHE:-/var/cache/ringbench}
mirror=${RINGBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache/apt-archives" "$out"
tarball=$cache/bookworm-minbase.tar.gz

if [ ! -f "$tarball" ]; then
  command -v debootstrap > /dev/null || apt-get install -y -qq debootstrap > /dev/null 2>&1 ||
    skip "debootstrap is not installed and apt-get could not install it"
  echo "clean-root: debootstrap --variant=minbase bookworm (once; cached in $tarball)"
  rm -rf "$out/bootstrap"
  debootstrap --variant=minbase bookworm "$out/bootstrap" "$mirror" > "$out/debootstrap.log" 2>&1 ||
    { tail -5 "$out/debootstrap.log"; skip "debootstrap could not make a root from $mirror (log: $out/debootstrap.log)"; }
  tar -C "$out/bootstrap" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$out/bootstrap"
fi

"$root_dir/scripts/package.sh" "$build" --out "$out/pkg"
deb=$(ls -t "$out"/pkg/*.deb | head -1)

chroot_dir=$out/root
mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2> /dev/null || true; done
}
trap cleanup EXIT
rm -rf "$chroot_dir"
mkdir -p "$chroot_dir"
tar -C "$chroot_dir" -xzf "$tarball"
for m in proc sys dev dev/pts; do
  mount --bind "/$m" "$chroot_dir/$m" && mounted+=("$chroot_dir/$m")
done
mount --bind "$cache/apt-archives" "$chroot_dir/var/cache/apt/archives" && mounted+=("$chroot_dir/var/cache/apt/archives")
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
cp "$deb" "$chroot_dir/tmp/"
in_root() { chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

echo "clean-root: apt-get install ./$(basename "$deb") into a fresh minbase root"
in_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  /tmp/$(basename "$deb")" > "$out/apt.log" 2>&1 ||
  { tail -20 "$out/apt.log"; echo "FAIL: the package did not install (log: $out/apt.log)"; exit 1; }
# Nothing of the build tree is reachable from the root: the binary is the package's.
[ "$(in_root sh -c 'command -v ringbench')" = /usr/bin/ringbench ] || { echo "FAIL: no /usr/bin/ringbench"; exit 1; }
if [ "$(dpkg-deb --field "$deb" Package)" = ringbench-cuda ]; then
  # NVIDIA's libraries are no Debian packages, so not in Depends: the postinst must have named
  # the missing ones, and every library not found must be one of the toolkit's.
  cuda_lib=$(ldd "$build/runner/ringbench" | awk '/libcudart/ {print $3}')
  cuda_lib=$(dirname "$(readlink -f "$cuda_lib")")
  grep "ringbench-cuda: " "$out/apt.log" | cut -c1-200
  grep -q "ringbench-cuda: these libraries are not found: .*libcudart" "$out/apt.log" ||
    { tail -20 "$out/apt.log"; echo "FAIL: the postinst did not name the missing CUDA libraries"; exit 1; }
  for lib in $(in_root ldd /usr/bin/ringbench | awk '/not found/ {print $1}'); do
    [ -e "$cuda_lib/$lib" ] || { echo "FAIL: $lib is not found and is not CUDA's: it belongs in Depends"; exit 1; }
  done
  # Standing in for NVIDIA's runtime packages: the toolkit's libraries at the same path, read
  # only, registered with the loader as NVIDIA's packages do (/etc/ld.so.conf.d).
  echo "clean-root: CUDA's libraries from $cuda_lib bound into the root (for NVIDIA's packages)"
  mkdir -p "$chroot_dir$cuda_lib"
  mount --bind "$cuda_lib" "$chroot_dir$cuda_lib" && mounted+=("$chroot_dir$cuda_lib")
  mount -o remount,bind,ro "$chroot_dir$cuda_lib"
  echo "$cuda_lib" > "$chroot_dir/etc/ld.so.conf.d/nvidia-cuda.conf"
  in_root ldconfig
fi
if in_root ldd /usr/bin/ringbench | grep -q "not found"; then
  in_root ldd /usr/bin/ringbench | grep "not found"; echo "FAIL: a library the package links is not in its Depends"; exit 1
fi
in_root ringbench --version
in_root ls /usr/share/ringbench/configs/quick.yaml /usr/share/doc/ringbench/README.md > /dev/null

echo "clean-root: ringbench doctor"
in_root ringbench doctor | tee "$out/doctor.txt"

cat > "$chroot_dir/tmp/tiny.yaml" <<'YAML'
name: tiny
nodes: [1, 2]
transports: [tcp]
repeats: 1
timeout: 120
cluster: {type: local}
train:
  models:
    - {model: lenet, batch: 8}
  warmup: 1
  steps: 2
collectives: {min_bytes: 4K, max_bytes: 16K, step_factor: 4, iters: 2, warmup_iters: 1}
YAML
echo "clean-root: a tiny sweep from the package"
in_root ringbench sweep /tmp/tiny.yaml --out /tmp/tiny-run 2>&1 | tail -8
run=$chroot_dir/tmp/tiny-run
[ -f "$run/report.md" ] || { echo "FAIL: no report.md in the sweep's run directory"; exit 1; }
python3 - "$run/raw.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds = {r.get("kind") for r in recs if r.get("status") == "ok"}
bad = [r.get("point") for r in recs if r.get("status") != "ok"]
if bad or not {"train", "collectives"} <= kinds:
    sys.exit(f"FAIL: points not ok: {bad}, ok kinds {sorted(kinds)}")
print(f"clean-root: {len(recs)} points ok ({', '.join(sorted(kinds))}), report.md written")
PY
echo "PASS: $(basename "$deb") installs into a clean Debian 12 root and runs doctor and a sweep there"

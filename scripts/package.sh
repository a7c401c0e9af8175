#!/usr/bin/env bash
# Builds the Debian package of a build tree with CPack: ringbench_<version>_amd64.deb (or
# ringbench-cuda_<version>_amd64.deb from a tree built with CUDA, which scripts/build.sh gives
# where the CUDA toolkit is): /usr/bin/ringbench, the sweep configs in /usr/share/ringbench/configs,
# README.md and docs/ in /usr/share/doc/ringbench; Depends from the libraries it links
# (dpkg-shlibdeps) and the programs it runs (mpirun, ip).
#   scripts/package.sh [BUILD_DIR (default build/)] [--out DIR (default BUILD_DIR/package)]
# Install on each host: apt-get install ./ringbench_<version>_amd64.deb, then `ringbench doctor`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/build out=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "scripts/package.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
out=${out:-$dir/package}
command -v dpkg-shlibdeps > /dev/null ||
  { echo "scripts/package.sh: dpkg-shlibdeps not found (apt-get install dpkg-dev)" >&2; exit 1; }
[ -f "$dir/CMakeCache.txt" ] || "$root/scripts/build.sh" --configure-only "$dir"
echo "package.sh: building ringbench in $dir"
"$root/scripts/build.sh" --build-only "$dir" ringbench 2>&1 | "$root/scripts/progress.sh" "$dir.package.log" build ||
  { echo "scripts/package.sh: the build failed ($dir.package.log)" >&2; exit 1; }
mkdir -p "$out"
(cd "$dir" && cpack -G DEB -B "$out" > "$out/cpack.log" 2>&1) ||
  { cat "$out/cpack.log" >&2; echo "scripts/package.sh: cpack failed" >&2; exit 1; }
deb=$(ls -t "$out"/*.deb | head -1)
echo "package: $deb"
dpkg-deb --field "$deb" Package Version Depends

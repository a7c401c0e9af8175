#!/usr/bin/env bash
# Configures and builds one build tree; warnings are errors, as in CI.
#   scripts/build.sh [--configure-only | --build-only] [DIR] [extra cmake args... | targets...]
# DIR defaults to build/. With --build-only the remaining arguments are targets (default: all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=both
case ${1:-} in
  --configure-only) mode=configure; shift ;;
  --build-only) mode=build; shift ;;
esac
dir=${1:-$root/build}
shift || true
jobs=$(nproc 2>/dev/null || echo 2)
if [ "$mode" != build ]; then
  mkdir -p "$(dirname "$dir")"
  cmake -S "$root" -B "$dir" -G Ninja -DRINGBENCH_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  [ "$mode" = configure ] && exit 0
  set --
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"

#!/usr/bin/env bash
# Configures and builds one build tree; warnings are errors, as in CI.
#   scripts/build.sh [--configure-only | --build-only] [DIR] [extra cmake args... | targets...]
# DIR defaults to build/. With --build-only the remaining arguments are targets (default: all).
# A new tree gets the CUDA backend, and NCCL where nccl.h is beside it, when the CUDA toolkit is
# found (nvcc on PATH or in /usr/local/cuda/bin), as scripts/test.sh's cuda pass does; a tree
# already configured keeps its choice. -DRINGBENCH_WITH_CUDA=OFF (or env RINGBENCH_CUDA=OFF)
# builds without it.
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
# The toolkit's cmake arguments for a new tree, unless CUDA is named or turned off.
cuda_args() {  # DIR ARGS...
  local dir=$1 nvcc
  shift
  [ -f "$dir/CMakeCache.txt" ] && return
  [ "${RINGBENCH_CUDA:-auto}" = OFF ] && return
  [[ " $* " == *" -DRINGBENCH_WITH_CUDA="* ]] && return
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ ! -x "$nvcc" ]; then
    echo "build.sh: no CUDA toolkit (nvcc) found: a CPU-only build" >&2
    return
  fi
  echo "-DRINGBENCH_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=$nvcc"
  [ -f "$(dirname "$(dirname "$nvcc")")/include/nccl.h" ] && echo "-DRINGBENCH_WITH_NCCL=ON"
  echo "build.sh: CUDA toolkit at $nvcc: building the CUDA backend (-DRINGBENCH_WITH_CUDA=OFF to leave it out)" >&2
}
if [ "$mode" != build ]; then
  mkdir -p "$(dirname "$dir")"
  # shellcheck disable=SC2046  # cmake arguments, one per word
  set -- $(cuda_args "$dir" "$@") "$@"
  cmake -S "$root" -B "$dir" -G Ninja -DRINGBENCH_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  [ "$mode" = configure ] && exit 0
  set --
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"

#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite:
#   1. the release build with warnings as errors: every test (ctest)
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build: every test
#   3. a ThreadSanitizer build: the transport, store and fault tests (label tsan)
# The release build includes the CUDA backend and NCCL when the CUDA toolkit (with cuDNN and
# NCCL) is installed: it must compile and link everywhere; its tests (label gpu) report skipped
# where there is no GPU. RINGBENCH_CUDA=OFF leaves it out. The sanitizer builds are CPU-only.
# Set RINGBENCH_SKIP_SANITIZERS=1 to run only step 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun tests as root (CI)

run_ctest() {  # DIR [ctest args...]
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 600 "$@")
}

cuda_args=()
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ "${RINGBENCH_CUDA:-auto}" != OFF ] && [ -x "$nvcc" ]; then
  cuda_args=(-DRINGBENCH_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
  cuda_inc=$(dirname "$(dirname "$nvcc")")/include
  [ -f "$cuda_inc/nccl.h" ] && cuda_args+=(-DRINGBENCH_WITH_NCCL=ON)
fi
echo "== release build ${cuda_args[*]:+(with ${cuda_args[*]})} =="
"$root/scripts/build.sh" "$root/build" "${cuda_args[@]}"
run_ctest "$root/build"

if [ "${RINGBENCH_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build =="
  "$root/scripts/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRINGBENCH_SANITIZE=address,undefined -DRINGBENCH_BUILD_BENCH=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_ctest "$root/build-asan" -LE nosan

  echo "== ThreadSanitizer build =="
  "$root/scripts/build.sh" "$root/build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRINGBENCH_SANITIZE=thread -DRINGBENCH_BUILD_BENCH=OFF
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest "$root/build-tsan" -L tsan
fi

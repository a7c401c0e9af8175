#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite:
#   1. the release build with warnings as errors: every test (ctest)
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build: every test
#   3. a ThreadSanitizer build: the transport, store and fault tests (label tsan)
#   4. when the CUDA toolkit is installed: a release build with the CUDA backend and NCCL, which
#      must compile and link everywhere: its GPU tests (label gpu; skipped, with the reason,
#      where there is no GPU) and the GPU options' errors. A build of its own, so that the other
#      steps' binaries (and the qemu guests of the rdma tests) stay free of the CUDA libraries.
#      RINGBENCH_CUDA=OFF skips it.
# Set RINGBENCH_SKIP_SANITIZERS=1 to skip steps 2 and 3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun tests as root (CI)

run_ctest() {  # DIR [ctest args...]
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 600 "$@")
}

echo "== release build =="
"$root/scripts/build.sh" "$root/build"
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

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ "${RINGBENCH_CUDA:-auto}" != OFF ] && [ -x "$nvcc" ]; then
  cuda_args=(-DRINGBENCH_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DRINGBENCH_BUILD_BENCH=OFF)
  [ -f "$(dirname "$(dirname "$nvcc")")/include/nccl.h" ] && cuda_args+=(-DRINGBENCH_WITH_NCCL=ON)
  echo "== CUDA build (${cuda_args[*]}) =="
  "$root/scripts/build.sh" "$root/build-cuda" "${cuda_args[@]}"
  run_ctest "$root/build-cuda" -L '^gpu$'  # not vgpu
  run_ctest "$root/build-cuda" -R 'GpuOptions|Nccl|Cudnn'
else
  echo "== CUDA build: skipped (${RINGBENCH_CUDA:+RINGBENCH_CUDA=$RINGBENCH_CUDA, }no nvcc at $nvcc) =="
fi

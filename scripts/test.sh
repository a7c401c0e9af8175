#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite:
#   1. the release build with warnings as errors: every test (ctest)
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build: every test
#   3. a ThreadSanitizer build: the transport, store and fault tests (label tsan)
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

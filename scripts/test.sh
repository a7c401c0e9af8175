#!/usr/bin/env bash
# README command 2 (and CI's): install what is missing, build, and run the whole test suite in
# passes, each a build tree of its own:
#   release  the release build with warnings as errors: every test (ctest)
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer: every test not labelled nosan
#   tsan     ThreadSanitizer: the concurrency tests (label tsan)
#   cuda     when the CUDA toolkit is installed: the CUDA backend and NCCL, which must compile
#            and link with -Werror everywhere; its GPU tests (label gpu; skipped, with the reason,
#            where there is no GPU) and the GPU options' errors. A tree of its own, so that the
#            other passes' binaries (and the qemu guests of the rdma tests) stay free of the CUDA
#            libraries.
#   fuzz     the libFuzzer targets (scripts/fuzz.sh): built with clang, each run for
#            RINGBENCH_FUZZ_SECONDS (60) over its corpus; a crash fails the pass.
# Usage: scripts/test.sh [--only PASS[,PASS...]]
# env: RINGBENCH_SKIP_SANITIZERS=1 (no asan, tsan), RINGBENCH_CUDA=OFF (no cuda),
#      CTEST_JOBS (1: tests one at a time; some compare timings on a 2-core machine).
# Every pass runs even when an earlier one failed; the script ends with a table of each phase's
# time and exits nonzero if any phase failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
only=""
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=${2:?--only needs a pass: release, asan, tsan, cuda or fuzz}; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for p in ${only//,/ }; do
  case $p in release|asan|tsan|cuda|fuzz) ;; *)
    echo "scripts/test.sh: --only: unknown pass '$p' (release, asan, tsan, cuda, fuzz)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # mpirun tests as root (CI)
jobs=${CTEST_JOBS:-1}

phases=() failed=()
phase() {  # NAME COMMAND...: runs and times one phase; a failure is recorded, not fatal
  local name=$1 start rc
  shift
  echo "== $name =="
  start=$(date +%s)
  "$@"
  rc=$?
  phases+=("$(printf '%-22s %6ds  %s' "$name" $(($(date +%s) - start)) "$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  [ $rc = 0 ] || failed+=("$name")
  return $rc
}
wanted() {  # PASS: whether this run includes the pass
  [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]
}
run_ctest() {  # DIR [ctest args...]
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j "$jobs" "$@")
}
build_pass() {  # PASS DIR TEST_FUNCTION SELECT_FUNCTION [CMAKE_ARGS...]: configure, build, test
  local pass=$1 dir=$2 test_fn=$3 select_fn=$4 targets
  shift 4
  phase "$pass configure" "$root/scripts/build.sh" --configure-only "$dir" "$@" || return
  targets=$("$select_fn" "$dir") || { failed+=("$pass targets"); return 1; }
  # shellcheck disable=SC2086  # a list of target names
  phase "$pass build" "$root/scripts/build.sh" --build-only "$dir" $targets || return
  phase "$pass test" "$test_fn" "$dir"
}
# The executables of the tests that `ctest ARGS` selects in DIR: what a pass must build (a test's
# own dependencies, such as the ringbench binary of the CLI tests, come along). Read from the
# CTestTestfile.cmake files, since ctest names no command for an executable not yet built.
test_targets() {  # DIR CTEST_ARGS...
  local dir
  dir=$(cd "$1" && pwd) || return
  shift
  (cd "$dir" && ctest --show-only=json-v1 "$@") | python3 -c '
import json, os, pathlib, re, sys
build = sys.argv[1]
names = {t["name"] for t in json.load(sys.stdin)["tests"]}
exe_of = {}
for testfile in pathlib.Path(build).rglob("CTestTestfile.cmake"):
    for name, exe in re.findall(r"add_test\(\[=\[(.*?)\]=\] \"([^\"]+)\"", testfile.read_text()):
        exe_of[name] = exe
exes = {os.path.basename(exe_of[n]) for n in names
        if n in exe_of and exe_of[n].startswith(build + "/")}
if names and not exes:
    sys.exit(f"test_targets: {len(names)} tests selected in {build} but no executable found for them")
print(" ".join(sorted(exes)))' "$dir"
}
select_all() { :; }  # nothing named: the whole tree (the product, benchmarks and every test)
select_asan() { test_targets "$1" -LE nosan; }
select_tsan() { test_targets "$1" -L tsan; }
select_cuda() { echo "$(test_targets "$1" -L '^gpu$') $(test_targets "$1" -R 'GpuOptions|Nccl|Cudnn')" ringbench; }
test_release() { run_ctest "$1"; }
test_asan() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_ctest "$1" -LE nosan
}
test_tsan() { TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest "$1" -L tsan; }
test_cuda() {
  run_ctest "$1" -L '^gpu$' || return  # ^gpu$: -L is a regular expression, and vgpu matches gpu
  run_ctest "$1" -R 'GpuOptions|Nccl|Cudnn'
}

t0=$(date +%s)
phase install "$root/scripts/install-deps.sh" || true

sanitizers=$([ "${RINGBENCH_SKIP_SANITIZERS:-0}" = 1 ] && echo off || echo on)
wanted release && build_pass release "$root/build" test_release select_all
[ "$sanitizers" = on ] && wanted asan && build_pass asan "$root/build-asan" test_asan select_asan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGBENCH_SANITIZE=address,undefined -DRINGBENCH_BUILD_BENCH=OFF
[ "$sanitizers" = on ] && wanted tsan && build_pass tsan "$root/build-tsan" test_tsan select_tsan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGBENCH_SANITIZE=thread -DRINGBENCH_BUILD_BENCH=OFF

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ "${RINGBENCH_CUDA:-auto}" != OFF ] && [ -x "$nvcc" ] && wanted cuda; then
  cuda_args=(-DRINGBENCH_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DRINGBENCH_BUILD_BENCH=OFF)
  [ -f "$(dirname "$(dirname "$nvcc")")/include/nccl.h" ] && cuda_args+=(-DRINGBENCH_WITH_NCCL=ON)
  echo "CUDA build: ${cuda_args[*]}"
  build_pass cuda "$root/build-cuda" test_cuda select_cuda "${cuda_args[@]}"
elif wanted cuda; then
  echo "== CUDA build: skipped (${RINGBENCH_CUDA:+RINGBENCH_CUDA=$RINGBENCH_CUDA, }no nvcc at $nvcc) =="
fi

if wanted fuzz; then
  phase "fuzz build" "$root/scripts/fuzz.sh" --build-only &&
    phase "fuzz run" "$root/scripts/fuzz.sh" --run-only
fi

echo
echo "== phase times =="
printf '%s\n' "${phases[@]}"
printf '%-22s %6ds\n' total $(($(date +%s) - t0))
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all passes green"

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
#            RINGBENCH_FUZZ_SECONDS (here 30, fuzz.sh's own default 60) over its corpus, all at
#            once; a crash fails the pass. Built and run behind the tests, whose end it bounds.
# Usage: scripts/test.sh [--only PASS[,PASS...]]
# env: RINGBENCH_SKIP_SANITIZERS=1 (no asan, tsan), RINGBENCH_CUDA=OFF (no cuda),
#      CTEST_JOBS (1: tests one at a time; some compare timings on a 2-core machine),
#      RINGBENCH_BUILD_BEHIND=0 (build every pass before testing any, instead of behind the tests),
#      RINGBENCH_CCACHE=0 (no ccache between the release and cuda trees).
# The release tree is built first. The other passes' trees are then built in the background at
# a low priority (nice 10) while the tests run: tests leave a core idle much of the time (ranks
# waiting on each other, timeouts), and that time goes to the next pass's build. Every test is
# green beside a far heavier load (stress-ng --cpu 2, issue 21). Each pass's tests wait for its
# build. When the lane's builds are done it runs the test passes not yet begun (lane_tests), at
# nice 0 where it may. Every pass runs even when an earlier one failed; the script ends with a
# table of each phase's start and time and exits nonzero if any phase failed.
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

state=$(mktemp -d /tmp/ringbench-test.XXXXXX)  # phase records of both lanes, build logs
lane=""  # the background lane's process group
trap '[ -n "$lane" ] && kill -- -"$lane" 2>/dev/null; rm -rf "$state"' EXIT
t0=$(date +%s)
phase() {  # NAME COMMAND...: runs and times one phase; a failure is recorded, not fatal
  local name=$1 start rc
  shift
  echo "== $name =="
  start=$(date +%s)
  "$@"
  rc=$?
  record "$name" "$start" $rc
  return $rc
}
record() {  # NAME START RC: a line of the phase table (both lanes append to one file)
  printf '%d\t%-22s %6ds %6ds  %s\n' "$2" "$1" $(($2 - t0)) $(($(date +%s) - $2)) \
    "$([ "$3" = 0 ] && echo ok || echo "FAILED (exit $3)")" >> "$state/phases"
}
wanted() {  # PASS: whether this run includes the pass
  [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]
}
run_ctest() {  # DIR [ctest args...]
  local dir=$1
  shift
  echo "$(test_estimate "$dir" "$@")"
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j "$jobs" "$@")
}
# What a test phase is about to do and roughly how long: its tests' last recorded times (ctest's
# Testing/Temporary/CTestCostData.txt, left by an earlier run in the tree), else just the count.
test_estimate() {  # DIR [ctest args...]
  local dir=$1
  shift
  (cd "$dir" && ctest --show-only=json-v1 "$@") 2>/dev/null | python3 -c '
import json, sys
names = [t["name"] for t in json.load(sys.stdin)["tests"]]
cost = {}
try:
    for line in open(sys.argv[1] + "/Testing/Temporary/CTestCostData.txt"):
        f = line.split()
        if line.startswith("---"): break
        if len(f) == 3: cost[f[0]] = float(f[2])
except OSError:
    pass
known = [cost[n] for n in names if n in cost]
what = f"next: {len(names)} tests, one at a time" if sys.argv[2] == "1" else f"next: {len(names)} tests, {sys.argv[2]} at a time"
if known:
    s = sum(known) / int(sys.argv[2])
    what += f"; about {s / 60:.0f} min" if s >= 120 else f"; about {s:.0f} s"
    what += f" by the last recorded times of {len(known)} of them"
else:
    what += " (no earlier times recorded in this tree)"
print(what + "; each line below is one test ending")' "$dir" "$jobs" || true
}
configure_pass() {  # PASS DIR SELECT_FUNCTION [CMAKE_ARGS...]: configure; targets to $state/PASS.targets
  local pass=$1 dir=$2 select_fn=$3
  shift 3
  phase "$pass configure" "$root/scripts/build.sh" --configure-only "$dir" "$@" || return
  "$select_fn" "$dir" > "$state/$pass.targets" || { record "$pass targets" "$(date +%s)" 1; return 1; }
}
build_targets() {  # PASS DIR: builds what configure_pass selected
  # shellcheck disable=SC2046  # a list of target names
  "$root/scripts/build.sh" --build-only "$2" $(cat "$state/$1.targets")
}
# The background lane: configures and builds each later pass in turn, nice 10, its output in
# $state/PASS.log; $state/PASS.built holds the build's exit status when it is done.
build_lane() {
  local spec pass dir select_fn rc
  for spec in "${later[@]}"; do
    read -r pass dir select_fn _ <<< "$spec"
    {
      rc=1
      if [ "$pass" = fuzz ]; then
        # The run too, right after the build: the lane's last work, beside the tests, whose
        # path is the longer one.
        phase "fuzz build" "$root/scripts/fuzz.sh" --build-only &&
          phase "fuzz run" env RINGBENCH_FUZZ_SECONDS="${RINGBENCH_FUZZ_SECONDS:-30}" \
            "$root/scripts/fuzz.sh" --run-only && rc=0
      else
        # shellcheck disable=SC2086  # the pass's cmake arguments
        configure_pass "$pass" "$dir" "$select_fn" ${spec#* * * } &&
          phase "$pass build" build_targets "$pass" "$dir" && rc=0
      fi
    } > "$state/$pass.log" 2>&1
    echo $rc > "$state/$pass.tmp" && mv "$state/$pass.tmp" "$state/$pass.built"  # whole, or not there
  done
  [ "${1:-}" = behind ] && lane_tests  # not with RINGBENCH_BUILD_BEHIND=0: the tests come after
}
# When its builds are done the build lane takes the test passes the test lane has not begun, so
# the last minutes have two lanes at work, not one (a fresh clone's run here: the builds ended at
# 1947 s, the tests at 2145 s). A pass's tests run in one lane or the other: whichever claims it
# first (claim). Here back at nice 0 where it may (root): they are tests, beside tests.
lane_tests() {
  local spec pass dir
  for spec in "${later[@]}"; do
    read -r pass dir _ <<< "$spec"
    [ "$pass" = fuzz ] && continue
    [ "$(cat "$state/$pass.built" 2>/dev/null)" = 0 ] || continue
    claim "$pass" || continue
    phase "$pass test" at_nice_0 "test_$pass" "$dir" > "$state/$pass.tests.log" 2>&1
  done
}
at_nice_0() {  # COMMAND...: in a subshell back at nice 0 where allowed (root), else as it is
  (renice -n 0 -p "$BASHPID" > /dev/null 2>&1; "$@")
}
claim() {  # PASS: whether this lane may run PASS's tests (mkdir is atomic: one lane wins)
  mkdir "$state/$1.claimed" 2> /dev/null
}
await_build() {  # PASS: waits for the lane to build PASS, shows its output; fails if the build did
  local pass=$1 waited=0
  until [ -f "$state/$pass.built" ]; do
    [ -n "$lane" ] && kill -0 "$lane" 2>/dev/null || [ -f "$state/$pass.built" ] ||
      { echo "scripts/test.sh: the build lane ended before building $pass" >&2; record "$pass build" "$(date +%s)" 1; return 1; }
    # Every minute of waiting says where the pass's build is (its last [n/N] line).
    [ $((waited % 60)) = 0 ] && echo "waiting for the $pass build: $(grep -oE '^\[[0-9]+/[0-9]+\]' "$state/$pass.log" 2>/dev/null |
      tail -1 || true) ${waited}s so far"
    sleep 2
    waited=$((waited + 2))
  done
  echo "== $pass build (behind the tests, nice 10; log $state/$pass.log) =="
  if [ "$(cat "$state/$pass.built")" != 0 ]; then cat "$state/$pass.log"; return 1
  elif [ "$pass" = fuzz ]; then sed -n '/^== fuzz run ==/,$p' "$state/$pass.log" | tail -20  # its run's summary
  else grep -E '^== |^\[[0-9]+/[0-9]+\]' "$state/$pass.log" | tail -3; fi
}
# The executables of the tests that `ctest ARGS` selects in DIR, as paths in the tree (ninja
# builds a path: a copied CLI test program has no target of its name): what a pass must build (a
# test's own dependencies, such as the ringbench binary of the CLI tests, come along). Read from the
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
exes = {os.path.relpath(exe_of[n], build) for n in names
        if n in exe_of and exe_of[n].startswith(build + "/")}
if names and not exes:
    sys.exit(f"test_targets: {len(names)} tests selected in {build} but no executable found for them")
print(" ".join(sorted(exes)))' "$dir"
}
select_all() { :; }  # nothing named: the whole tree (the product, benchmarks and every test)
select_asan() { test_targets "$1" -LE nosan; }
select_tsan() { test_targets "$1" -L tsan; }
select_cuda() { echo "$(test_targets "$1" -L '^gpu$') $(test_targets "$1" -R 'GpuOptions|Nccl|Cudnn')" ringbench; }
test_release() { run_ctest "$1" -LE manual; }  # manual: minutes and a mirror (tests/package)
test_asan() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_ctest "$1" -LE nosan
}
test_tsan() { TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest "$1" -L tsan; }
test_cuda() {
  run_ctest "$1" -L '^gpu$' || return  # ^gpu$: -L is a regular expression, and vgpu matches gpu
  run_ctest "$1" -R 'GpuOptions|Nccl|Cudnn'
}

echo "scripts/test.sh: the passes ${only:-release,asan,tsan,cuda,fuzz}, each a build tree of its own. On a 2-core"
echo "machine a whole run takes ~31 min: the release build (~6 min from scratch, ninja's [n/N] lines"
echo "below), its tests (~14 min), then each later pass's tests, whose builds run behind the tests."
echo "A table of every phase's time ends the run."
phase install "$root/scripts/install-deps.sh" || true

sanitizers=$([ "${RINGBENCH_SKIP_SANITIZERS:-0}" = 1 ] && echo off || echo on)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# The passes after release: "PASS DIR SELECT_FUNCTION CMAKE_ARGS..." (fuzz: scripts/fuzz.sh's).
later=()
# The later passes precompile nlohmann/json and GoogleTest (RINGBENCH_PCH): ~35% less compile
# time for runner/ and tests/, on the build lane that bounds CI's time.
# build.sh turns CUDA on in a new tree where nvcc is: only the cuda pass's tree has it.
# Every tree compiles each library in unity batches of 64 files (RINGBENCH_UNITY, on by default):
# about half the library compile time of one file per object.
no_bench="-DRINGBENCH_BUILD_BENCH=OFF -DRINGBENCH_PCH=ON -DRINGBENCH_WITH_CUDA=OFF"
[ "$sanitizers" = on ] && wanted asan && later+=("asan $root/build-asan select_asan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGBENCH_SANITIZE=address,undefined $no_bench")
[ "$sanitizers" = on ] && wanted tsan && later+=("tsan $root/build-tsan select_tsan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGBENCH_SANITIZE=thread $no_bench")
# The cuda tree compiles the whole product again, most of it exactly as the release tree does.
# With ccache (a cache private to this run, in $state) both trees go through it and the cuda
# tree's C++ objects come from the release tree's: 174 s -> 61 s for the cuda tree on this
# 2-core machine. Its product's lines must then match the release tree's, so it goes without
# PCH there; the test programs, which the release tree builds nearly all of and the cuda tree a
# few, have theirs in both (RINGBENCH_PCH=tests; 432 -> 292 s of compile in the release
# tree). Not ccache's depend mode, which would save its preprocessor run on each miss (+9% of a
# compile) but hashes the -I paths, which differ between the trees: the cuda tree then found 10
# of its 57 objects.
# A tree configured with ccache before keeps it in its CMakeCache: off is said explicitly.
cache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=)
cuda_pch="-DRINGBENCH_PCH=ON -DCMAKE_CXX_COMPILER_LAUNCHER="
if [ "${RINGBENCH_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null && [ -x "$nvcc" ] &&
  [ "${RINGBENCH_CUDA:-auto}" != OFF ] && wanted release && wanted cuda; then
  export CCACHE_DIR=$state/ccache CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=4G
  cache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cuda_pch="-DRINGBENCH_PCH=tests -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
if [ "${RINGBENCH_CUDA:-auto}" != OFF ] && [ -x "$nvcc" ] && wanted cuda; then
  cuda_args="-DRINGBENCH_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=$nvcc -DRINGBENCH_BUILD_BENCH=OFF $cuda_pch"
  [ -f "$(dirname "$(dirname "$nvcc")")/include/nccl.h" ] && cuda_args+=" -DRINGBENCH_WITH_NCCL=ON"
  echo "CUDA build: $cuda_args"
  later+=("cuda $root/build-cuda select_cuda $cuda_args")
elif wanted cuda; then
  echo "== CUDA build: skipped (${RINGBENCH_CUDA:+RINGBENCH_CUDA=$RINGBENCH_CUDA, }no nvcc at $nvcc) =="
fi
wanted fuzz && later+=("fuzz $root/build-fuzz -")

release_built=0
wanted release && configure_pass release "$root/build" select_all -DRINGBENCH_WITH_CUDA=OFF -DRINGBENCH_PCH=tests "${cache_args[@]}" &&
  phase "release build" build_targets release "$root/build" && release_built=1
# The asan and cuda trees copy the CLI test programs (which only start the tree's own ringbench)
# from the release tree instead of compiling them again (RINGBENCH_CLI_TESTS_FROM); said empty
# otherwise, since a tree keeps what its cache was given before.
cli_tests=-DRINGBENCH_CLI_TESTS_FROM=
[ $release_built = 1 ] && cli_tests=-DRINGBENCH_CLI_TESTS_FROM=$root/build/tests
for i in "${!later[@]}"; do
  case ${later[$i]} in asan\ * | cuda\ *) later[i]+=" $cli_tests" ;; esac
done
if [ ${#later[@]} -gt 0 ] && [ "${RINGBENCH_BUILD_BEHIND:-1}" = 0 ]; then
  build_lane
elif [ ${#later[@]} -gt 0 ]; then
  set -m  # the lane in a process group of its own, so that an interrupted run stops its builds
  (renice -n 10 -p "$BASHPID" > /dev/null; build_lane behind) < /dev/null &  # set -m would give it our stdin
  lane=$!
  set +m
fi
[ $release_built = 1 ] && phase "release test" test_release "$root/build"
for spec in "${later[@]}"; do
  read -r pass dir _ <<< "$spec"
  await_build "$pass" || continue
  [ "$pass" = fuzz ] && continue  # built and run in the lane
  if claim "$pass"; then phase "$pass test" "test_$pass" "$dir"
  else echo "== $pass test: run in the build lane, whose builds were done (its output below, at the end) =="; fi
done
[ -n "$lane" ] && wait
lane=""
for log in "$state"/*.tests.log; do
  [ -f "$log" ] || continue
  echo "== $(basename "$log" .tests.log) test (run in the build lane) =="
  cat "$log"
done

echo
echo "== phase times =="
printf '%-22s %7s %7s\n' phase start time
sort -s -n -k1,1 "$state/phases" | cut -f2-  # by start; ties in the order run
printf '%-22s %7s %6ds\n' total "" $(($(date +%s) - t0))
mapfile -t failed < <(grep -v '  ok$' "$state/phases" | cut -f2 | cut -c1-22 | sed 's/ *$//')
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all passes green"
